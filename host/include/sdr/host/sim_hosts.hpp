// Many hosts of one simulated fabric in a few lines: an SDR context per "sim:N" host used,
// connected SDR QP pairs between any two hosts, and one-message transfers on them. What the
// fabric's tests, benchmark and experiment drive (incasts, permutations, shared long hauls).
// Throws std::runtime_error (with sdr_last_error()) if set-up fails, as SimWorld.
#pragma once

#include <sdr.h>
#include <sdr/emu/fabric.hpp>
#include <sdr_ext.h>
#include <sdr_mr.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace sdr {

class SimHosts {
public:
    // A fresh fabric with these parameters becomes the process's; channels per context.
    explicit SimHosts(const emu::FabricParams& p, uint32_t channels = 8);
    ~SimHosts();
    SimHosts(const SimHosts&) = delete;
    SimHosts& operator=(const SimHosts&) = delete;

    emu::SimFabric& fabric() { return *fabric_; }
    emu::SimNetwork& net() { return *fabric_->network(); }
    sdr_context* ctx(uint32_t host);

    // A connected QP pair from host a to host b (by default UC, lifetime from the path); its index.
    size_t connect(uint32_t a, uint32_t b, const sdr_qp_attr& attr = sdr_qp_attr{16, 30, 4, SDR_MTU_4096, 1, 1, 0},
                   const sdr_qp_attr_ext& ext = sdr_qp_attr_ext{0, SDR_LIFETIME_FROM_PATH, SDR_TRANSPORT_UC, 0});
    sdr_qp* qp(size_t pair, int side) const { return pairs_[pair].qp[side]; }

    // Post one message of `bytes` on a pair (the receive first; sizes up to 4 GiB - 1): with
    // payload, a patterned source and a zeroed destination; payload-free, buffers never touched
    // (so never resident). Its index among the posted messages.
    size_t post(size_t pair, size_t bytes);
    // Wait until every posted send left its NIC, then run the fabric until idle.
    void run();
    // Whether message k arrived whole: every chunk's bit set in the receive bitmap, and with
    // payload its bytes equal to the source's.
    bool arrived(size_t k) const;
    // Complete the receives and free the messages' buffers.
    void finish();

private:
    struct Pair {
        sdr_qp* qp[2];
        uint32_t host[2];
        uint32_t chunk_log;
    };
    struct Msg {
        size_t pair;
        sdr_send_handle* sh;
        sdr_recv_handle* rh;
        size_t bytes, chunks;
        std::unique_ptr<uint8_t[]> src, dst;
    };
    uint32_t lkey(uint32_t host, void* addr, size_t len);
    uint32_t channels_;
    emu::SimFabric* fabric_;
    std::map<uint32_t, sdr_context*> ctx_;
    std::vector<Pair> pairs_;
    std::vector<std::unique_ptr<Msg>> msgs_;
    std::vector<sdr_mr*> mrs_;
};

}  // namespace sdr
