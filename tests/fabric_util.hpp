// Many hosts of one simulated fabric, each an SDR context on "sim:N", joined in pairs by
// connected SDR QPs: what the fabric tests drive (incasts, shared links, ECMP).
#pragma once

#include "sim_util.hpp"

#include <sdr/emu/fabric.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sdr::test {

class FabricHosts {
public:
    explicit FabricHosts(const emu::FabricParams& p, uint32_t channels = 8) : channels_(channels)
    {
        auto f = std::make_unique<emu::SimFabric>(p);
        fabric_ = f.get();
        emu::SimFabric::install(std::move(f));
    }
    ~FabricHosts()
    {
        for (sdr_mr* m : mrs_) sdr_mr_dereg(m);
        for (Pair& p : pairs_) {
            sdr_qp_destroy(p.qp[0]);
            sdr_qp_destroy(p.qp[1]);
        }
        for (auto& [n, c] : ctx_) sdr_context_destroy(c);
        emu::SimFabric::install(nullptr);
    }
    emu::SimFabric& fabric() { return *fabric_; }
    emu::SimNetwork& net() { return *fabric_->network(); }

    // A connected QP pair from host a to host b; returns its index.
    size_t connect(uint32_t a, uint32_t b, sdr_qp_attr qa = sdr_qp_attr{16, 30, 4, SDR_MTU_4096, 1, 1, 0})
    {
        Pair p{};
        const sdr_qp_attr_ext ext{0, SDR_LIFETIME_FROM_PATH, SDR_TRANSPORT_UC};
        for (int i = 0; i < 2; i++) {
            p.qp[i] = sdr_qp_create_ext(ctx(i ? b : a), &qa, &ext);
            EXPECT_NE(p.qp[i], nullptr) << sdr_last_error();
        }
        size_t n = 0;
        sdr_qp_info_size_get(p.qp[0], &n);
        std::vector<uint8_t> i0(n), i1(n);
        sdr_qp_info_get(p.qp[0], i0.data());
        sdr_qp_info_get(p.qp[1], i1.data());
        EXPECT_EQ(sdr_qp_connect(p.qp[0], i1.data()), SDR_SUCCESS) << sdr_last_error();
        EXPECT_EQ(sdr_qp_connect(p.qp[1], i0.data()), SDR_SUCCESS) << sdr_last_error();
        p.host[0] = a;
        p.host[1] = b;
        pairs_.push_back(p);
        return pairs_.size() - 1;
    }

    // Post one message of `bytes` on pair i (receive first); run everything with run().
    void post(size_t i, size_t bytes)
    {
        Pair& p = pairs_[i];
        auto src = std::make_unique<std::vector<uint8_t>>(bytes), dst = std::make_unique<std::vector<uint8_t>>(bytes, 0);
        fill(*src, i + 1);
        sdr_recv_wr rw{static_cast<uint32_t>(bytes), lkey(p.host[1], dst->data(), bytes),
                       reinterpret_cast<uint64_t>(dst->data())};
        sdr_recv_handle* rh = nullptr;
        ASSERT_EQ(sdr_recv_post(p.qp[1], &rw, &rh), SDR_SUCCESS) << sdr_last_error();
        sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(bytes), lkey(p.host[0], src->data(), bytes),
                       reinterpret_cast<uint64_t>(src->data()), 0};
        sdr_send_handle* sh = nullptr;
        ASSERT_EQ(sdr_send_post(p.qp[0], &sw, &sh), SDR_SUCCESS) << sdr_last_error();
        msgs_.push_back(Msg{i, sh, rh, std::move(src), std::move(dst)});
    }
    // Run until every posted send left its NIC and the fabric is idle.
    void run()
    {
        for (Msg& m : msgs_) wait_send(m.sh);
        fabric_->run_until_idle();
    }
    // Receive bitmaps' set bits of message k, and whether its bytes all arrived.
    bool complete(size_t k)
    {
        Msg& m = msgs_[k];
        return *m.src == *m.dst;
    }
    void finish()
    {
        for (Msg& m : msgs_) sdr_recv_complete(m.rh);
        msgs_.clear();
    }

private:
    struct Pair {
        sdr_qp* qp[2];
        uint32_t host[2];
    };
    struct Msg {
        size_t pair;
        sdr_send_handle* sh;
        sdr_recv_handle* rh;
        std::unique_ptr<std::vector<uint8_t>> src, dst;
    };
    sdr_context* ctx(uint32_t host)
    {
        auto it = ctx_.find(host);
        if (it != ctx_.end()) return it->second;
        sdr_dev_attr da{channels_, 6};
        sdr_context* c = sdr_context_create(("sim:" + std::to_string(host)).c_str(), &da);
        EXPECT_NE(c, nullptr) << sdr_last_error();
        ctx_[host] = c;
        return c;
    }
    uint32_t lkey(uint32_t host, void* addr, size_t len)
    {
        sdr_mr* m = sdr_mr_reg(ctx(host), addr, len, SDR_ACCESS_REMOTE_WRITE);
        EXPECT_NE(m, nullptr) << sdr_last_error();
        mrs_.push_back(m);
        uint32_t k = 0;
        sdr_mr_lkey_get(m, &k);
        return k;
    }
    uint32_t channels_;
    emu::SimFabric* fabric_;
    std::map<uint32_t, sdr_context*> ctx_;
    std::vector<Pair> pairs_;
    std::vector<Msg> msgs_;
    std::vector<sdr_mr*> mrs_;
};

}  // namespace sdr::test
