#include <sdr/host/sim_hosts.hpp>

#include <sdr_mr.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace sdr {

static void check(bool ok, const char* what)
{
    if (!ok) throw std::runtime_error(std::string(what) + ": " + sdr_last_error());
}

SimHosts::SimHosts(const emu::FabricParams& p, uint32_t channels) : channels_(channels)
{
    auto f = std::make_unique<emu::SimFabric>(p);
    fabric_ = f.get();
    emu::SimFabric::install(std::move(f));
}

SimHosts::~SimHosts()
{
    finish();
    for (sdr_mr* m : mrs_) sdr_mr_dereg(m);
    for (Pair& p : pairs_)
        for (sdr_qp* q : p.qp) sdr_qp_destroy(q);
    for (auto& [n, c] : ctx_) sdr_context_destroy(c);
    emu::SimFabric::install(nullptr);
}

sdr_context* SimHosts::ctx(uint32_t host)
{
    auto it = ctx_.find(host);
    if (it != ctx_.end()) return it->second;
    sdr_dev_attr da{channels_, 8};
    sdr_context* c = sdr_context_create(("sim:" + std::to_string(host)).c_str(), &da);
    check(c != nullptr, "sdr_context_create");
    ctx_[host] = c;
    return c;
}

size_t SimHosts::connect(uint32_t a, uint32_t b, const sdr_qp_attr& attr, const sdr_qp_attr_ext& ext)
{
    Pair p{{nullptr, nullptr}, {a, b}, attr.bitmap_chunk_size_log_bytes};
    for (int i = 0; i < 2; i++) {
        sdr_qp_attr qa = attr;
        p.qp[i] = sdr_qp_create_ext(ctx(p.host[i]), &qa, &ext);
        check(p.qp[i] != nullptr, "sdr_qp_create");
    }
    pairs_.push_back(p);
    size_t n = 0;
    check(sdr_qp_info_size_get(p.qp[0], &n) == SDR_SUCCESS, "sdr_qp_info_size_get");
    std::vector<uint8_t> i0(n), i1(n);
    check(sdr_qp_info_get(p.qp[0], i0.data()) == SDR_SUCCESS, "sdr_qp_info_get");
    check(sdr_qp_info_get(p.qp[1], i1.data()) == SDR_SUCCESS, "sdr_qp_info_get");
    check(sdr_qp_connect(p.qp[0], i1.data()) == SDR_SUCCESS, "sdr_qp_connect");
    check(sdr_qp_connect(p.qp[1], i0.data()) == SDR_SUCCESS, "sdr_qp_connect");
    return pairs_.size() - 1;
}

uint32_t SimHosts::lkey(uint32_t host, void* addr, size_t len)
{
    sdr_mr* m = sdr_mr_reg(ctx(host), addr, len, SDR_ACCESS_REMOTE_WRITE);
    check(m != nullptr, "sdr_mr_reg");
    mrs_.push_back(m);
    uint32_t k = 0;
    sdr_mr_lkey_get(m, &k);
    return k;
}

size_t SimHosts::post(size_t pair, size_t bytes)
{
    const Pair& p = pairs_.at(pair);
    auto m = std::make_unique<Msg>();
    m->pair = pair;
    m->bytes = bytes;
    m->chunks = (bytes + (size_t{1} << p.chunk_log) - 1) >> p.chunk_log;
    m->src.reset(new uint8_t[bytes + 1]);  // default-initialised: untouched pages stay virtual
    m->dst.reset(new uint8_t[bytes + 1]);
    if (fabric_->params().payload) {
        uint64_t x = (msgs_.size() + 1) * 0x9E3779B97F4A7C15ull;
        for (size_t i = 0; i < bytes; i++) m->src[i] = static_cast<uint8_t>((x += 0xD1B54A32D192ED03ull) >> 56);
        std::memset(m->dst.get(), 0, bytes);
    }
    sdr_recv_wr rw{static_cast<uint32_t>(bytes), lkey(p.host[1], m->dst.get(), bytes + 1),
                   reinterpret_cast<uint64_t>(m->dst.get())};
    check(sdr_recv_post(p.qp[1], &rw, &m->rh) == SDR_SUCCESS, "sdr_recv_post");
    sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(bytes), lkey(p.host[0], m->src.get(), bytes + 1),
                   reinterpret_cast<uint64_t>(m->src.get()), 0};
    check(sdr_send_post(p.qp[0], &sw, &m->sh) == SDR_SUCCESS, "sdr_send_post");
    msgs_.push_back(std::move(m));
    return msgs_.size() - 1;
}

void SimHosts::run()
{
    for (auto& m : msgs_) {
        int done = 0;
        while (!done) check(sdr_send_poll(m->sh, &done, nullptr) != SDR_ERROR, "sdr_send_poll");
    }
    fabric_->run_until_idle();
}

bool SimHosts::arrived(size_t k) const
{
    const Msg& m = *msgs_.at(k);
    uint8_t* bm = nullptr;
    size_t nb = 0;
    if (sdr_recv_bitmap_get(m.rh, &bm, &nb) != SDR_SUCCESS || nb * 8 < m.chunks) return false;
    for (size_t c = 0; c < m.chunks; c++)
        if (!((bm[c / 8] >> (c % 8)) & 1)) return false;
    return !fabric_->params().payload || std::memcmp(m.src.get(), m.dst.get(), m.bytes) == 0;
}

void SimHosts::finish()
{
    for (auto& m : msgs_) sdr_recv_complete(m->rh);
    msgs_.clear();
}

}  // namespace sdr
