// The world fuzz_nic_rx throws frames at, and make_seeds captures real frames from: two
// simulated NICs with one connected SDR QP each (2 channels, MTU 1 KiB, 2 KiB chunks, 4 slots
// of 4 KiB), and on NIC 1 a registered region holding receives in every state a late or hostile
// frame may meet. Both programs build it the same way, so the frames captured by make_seeds
// carry the QPNs, keys and addresses fuzz_nic_rx's world uses.
//
// Region on NIC 1 (8 pages of 4 KiB, filled with a position-dependent pattern):
//   page 1  message 0, slot 0 generation 0: completed (its root-key entry is NULL again)
//   page 2  message 1, slot 1: posted, 3000 bytes (its last chunk is partial)
//   page 4  message 2, slot 2: posted, 100 bytes
//   page 5  message 3, slot 3: completed
//   page 6  message 4, slot 0 generation 1: posted, 4096 bytes
// Pages 0, 3 and 7 and the unposted tails are never posted: guard bytes.
#pragma once

#include <sdr/host/sim_world.hpp>
#include <sdr_ctrl.h>
#include <sdr_sim.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace sdr::fuzz {

struct PostedRange {
    uint64_t offset, length;  // in the region
};

class NicWorld {
public:
    static constexpr size_t kPage = 4096, kPages = 8;

    explicit NicWorld(const std::string& pcap_path = "")
    {
        WorldConfig c;
        c.channels = 2;
        c.fabric.link.rtt_ms = 0.01;
        c.fabric.pcap_path = pcap_path;
        c.qp = sdr_qp_attr{11, 14, 2, SDR_MTU_1024, 1, 1, 0};
        world_ = std::make_unique<SimWorld>(c);
        region_.resize(kPages * kPage);
        for (size_t i = 0; i < region_.size(); i++) region_[i] = pattern(i);
        uint32_t lkey = world_->lkey(1, region_.data(), region_.size());
        sdr_recv_handle* h[5] = {};
        const uint64_t page[5] = {1, 2, 4, 5, 6}, len[5] = {4096, 3000, 100, 4096, 4096};
        for (int n = 0; n < 5; n++) {
            if (n == 4) {  // message 4 reuses slot 0 once message 0 is completed
                complete(h[0]);
                complete(h[3]);
            }
            sdr_recv_wr wr{static_cast<uint32_t>(len[n]), lkey, address(page[n] * kPage)};
            post(&wr, &h[n]);
        }
        posted_ = {{2 * kPage, 3000}, {4 * kPage, 100}, {6 * kPage, 4096}};
    }

    SimWorld& world() { return *world_; }
    emu::Nic& receiver() { return world_->nic(1); }
    std::vector<uint8_t>& region() { return region_; }
    const std::vector<PostedRange>& posted() const { return posted_; }
    static uint8_t pattern(size_t i) { return static_cast<uint8_t>((i * 131) ^ (i >> 8) ^ 0xA5); }

private:
    uint64_t address(uint64_t offset) { return reinterpret_cast<uint64_t>(region_.data() + offset); }
    static void check(bool ok, const char* what)
    {
        if (!ok) throw std::runtime_error(std::string("NicWorld: ") + what + ": " + sdr_last_error());
    }
    void complete(sdr_recv_handle* h) { check(sdr_recv_complete(h) == SDR_SUCCESS, "sdr_recv_complete"); }
    // A receive posted as an application does: on SDR_RETRY (a slot not yet free to re-arm)
    // let virtual time pass and try again.
    void post(sdr_recv_wr* wr, sdr_recv_handle** h)
    {
        sdr_context* ctx = world_->ctx(1);
        for (int i = 0; i < 100000; i++) {
            int rc = sdr_recv_post(world_->qp(1), wr, h);
            check(rc != SDR_ERROR, "sdr_recv_post");
            if (rc == SDR_SUCCESS) return;
            check(sdr_sim_advance_to(ctx, sdr_now_ns(ctx) + 100000) == SDR_SUCCESS, "sdr_sim_advance_to");
        }
        check(false, "sdr_recv_post kept answering SDR_RETRY");
    }

    std::unique_ptr<SimWorld> world_;
    std::vector<uint8_t> region_;
    std::vector<PostedRange> posted_;
};

}  // namespace sdr::fuzz
