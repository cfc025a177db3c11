// The QP pair of the emulator's harnesses (emu_sim_harness.cpp, emu_rt_harness.cpp), set up
// through the NIC's public SDR API as libsdr sets up one transport QP of an SDR QP: A's source
// region, B's destination region behind a one-slot root key (remote_va is zero-based in it),
// one transport QP on each side with the probe's tags, connected, B's bound to the key.
#pragma once

#include "harness.hpp"

#include <sdr/emu/nic.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace sdr::hal_conformance {

struct EmuPair {
    static constexpr uint32_t kRegionBytes = 4096;
    std::vector<uint8_t> source = std::vector<uint8_t>(kRegionBytes);
    std::vector<uint8_t> target = std::vector<uint8_t>(kRegionBytes);

    // rc: SDR's RC transport QPs (where a frame may be lost on the way), else UC.
    bool connect(emu::Nic& a, emu::Nic& b, bool rc, probe_path* path, std::string* why)
    {
        const uint32_t lkey = a.mr_reg(source.data(), source.size());
        const uint32_t target_lkey = b.mr_reg(target.data(), target.size());
        const uint32_t rkey = b.root_key_create(1, kRegionBytes);
        if (!lkey || !target_lkey || !rkey ||
            !b.root_key_set(rkey, 0, target_lkey, reinterpret_cast<uint64_t>(target.data()), kRegionBytes))
            return *why = "memory regions or root key refused", false;
        const uint32_t qa = a.qp_create(PROBE_TX_TAG, 0, rc), qb = b.qp_create(PROBE_RX_TAG, PROBE_RX_CHANNEL, rc);
        if (qa == emu::Nic::kNoHandle || qb == emu::Nic::kNoHandle) return *why = "qp_create refused", false;
        if (!a.qp_connect(qa, b.address(), b.qpn(qb)) || !b.qp_connect(qb, a.address(), a.qpn(qa)))
            return *why = "qp_connect refused", false;
        b.qp_bind_root_key(qb, rkey);
        path->qp = qa;
        path->lkey = lkey;
        path->local_addr = reinterpret_cast<uint64_t>(source.data());
        path->rkey = rkey;
        path->local_len = path->remote_len = kRegionBytes;
        path->sq_depth = emu::Nic::kSqDepth;
        return true;
    }
};

// What the emulator counted for DPA worker i of a NIC: both its handler contexts, summed.
inline WorkerCounts emu_counts(const emu::Nic& nic, uint32_t i)
{
    const hal_worker w = nic.worker(i);
    WorkerCounts c;
    c.window_writes = w.window_writes;
    c.window_refused = w.window_refused;
    for (uint32_t k = 0; k < HAL_MAX_COUNTERS; k++) c.counters[k] = w.counters[k];
    return c;
}

}  // namespace sdr::hal_conformance
