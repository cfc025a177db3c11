// An optional cost model of the DPA and PCIe for the simulated fabric (off by default: then
// every firmware handler runs at the packet's arrival and costs nothing, as before).
//
// On: each NIC has `threads` DPA threads, each a server with a CQ of cq_depth entries. A
// receive CQE waits in its thread's CQ, then the thread spends handler_ns on it; the firmware's
// receive handler runs at the end of that time, so its host-window writes (chunk bits,
// immediates) become visible then. Each window write then keeps the thread busy for its PCIe
// cost: window_add_ns for a fetch-and-add (non-posted: the thread waits for the round trip),
// window_write_ns for a plain (posted) write. Every handler start also passes a server shared
// by all threads of the NIC (1 / shared_mpps each): the aggregate limit of many threads. A CQE
// that finds its thread's CQ full is dropped and counted (RxDrop::CqOverflow). The sender's TX
// thread spends tx_wqe_ns per posted WQE: its packets leave no closer than that. A receive
// repost (root-key entry update plus bitmap clear) takes repost_ns(bitmap words).
//
// Threads and channels: the firmware has at most FW_MAX_CHANNELS channels (one CQ and QP per
// channel and generation), the model up to 4096 threads. Two steerings of CQEs onto threads:
//  - balanced (default): the threads drain one CQ of cq_depth x threads entries, each taking
//    the oldest CQE when it is free: the load spread evenly by work, as per-thread CQs with
//    ideal steering would have it. The firmware keeps its per-packet state with atomics, so
//    any thread may take any CQE.
//  - by channel: the CQEs of channel c go to threads c, c + channels, c + 2 channels, ... in
//    turn (with fewer threads than channels, thread t serves channels t, t + threads, ...).
//    The firmware sprays packets round-robin, so the last packet of every chunk lands on the
//    same channel: its thread pays every chunk's PCIe round trip and limits the rate, which
//    the paper's near-linear scaling says the hardware does not suffer.
//
// Defaults: see DpaParams and emu/README.md (calibrated on two of the paper's BlueField-3
// points, arXiv 2505.05366 hardware evaluation: 1.45 Mpps per thread and 92 Mpps at 128).
#pragma once

#include <sdr/emu/simulator.hpp>
#include <sdr/hal/hal.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace sdr::emu {

class Nic;

struct DpaParams {
    bool enabled = false;
    uint32_t threads = 0;          // DPA threads per NIC; 0 = one per channel (NIC worker)
    double handler_ns = 682.6;     // receive handler per CQE (calibrated: 1.45 Mpps at 1 thread)
    double window_add_ns = 450;    // PCIe round trip of a fetch-and-add on a host window word
    double window_write_ns = 30;   // issue cost of a posted host-window write
    double repost_key_ns = 1000;   // receive repost: the root-key entry update
    double repost_word_ns = 2;     // receive repost: per 64-bit word of the slot's bitmaps
    double tx_wqe_ns = 50;         // sender: TX handler time per posted WQE
    double shared_mpps = 93.2;     // aggregate of all threads (calibrated: 92 Mpps at 128)
    uint32_t cq_depth = 4096;      // CQEs a thread's CQ holds (waiting or in service)
    bool by_channel = false;       // steering: false = balanced (fewest queued), true = by channel

    double repost_ns(uint64_t bitmap_words) const { return repost_key_ns + repost_word_ns * double(bitmap_words); }
    // SDR_SIM_DPA=1 turns the model on; SDR_SIM_DPA_<FIELD> (THREADS, HANDLER_NS, WINDOW_ADD_NS,
    // WINDOW_WRITE_NS, REPOST_KEY_NS, REPOST_WORD_NS, TX_WQE_NS, SHARED_MPPS, CQ_DEPTH, STEERING=balanced|channel) override
    // the defaults. false + err on a malformed value.
    [[nodiscard]] static bool from_env(DpaParams* out, std::string* err);
};

// The receive-side statistics of one NIC's threads (for rate measurements).
struct DpaStats {
    uint64_t handled = 0, overflows = 0;
    SimTime first_arrival = 0, last_finish = 0;  // of the CQEs handled
    double mpps() const
    {
        return last_finish > first_arrival ? double(handled) * 1e6 / double(last_finish - first_arrival) : 0;
    }
};

class DpaModel final : public SimTarget {
public:
    DpaModel(Simulator& sim, const DpaParams& p) : sim_(sim), p_(p) {}
    const DpaParams& params() const { return p_; }
    // A receive CQE of `channel` on `nic`: queued on its thread, or dropped if that CQ is full.
    void offer(Nic& nic, uint32_t channel, const hal_cqe& cqe);
    const DpaStats& stats(uint32_t nic) const;
    void reset_stats();
    // Picoseconds between two packets a sender's TX thread posts (0: no limit).
    SimTime tx_spacing_ps() const { return static_cast<SimTime>(p_.tx_wqe_ns * double(kPsPerNs)); }

    void fire(SimTime now, uint64_t arg) override;

private:
    struct Pending {
        uint32_t channel;
        hal_cqe cqe;
        SimTime arrival;
    };
    struct Thread {
        std::deque<Pending> cq;  // by channel: its own CQ
        Pending cur{};           // the CQE in service
        bool busy = false;       // an event of this thread is scheduled
        SimTime free_at = 0;     // end of its last handler's PCIe writes
    };
    struct NicState {
        Nic* nic = nullptr;
        std::vector<Thread> threads;
        std::vector<uint32_t> rr;  // per channel: next of its threads
        std::deque<Pending> cq;    // balanced: the CQ all threads drain
        SimTime shared_free = 0;
        DpaStats stats;
    };
    NicState& state(Nic& nic);
    uint32_t thread_of(NicState& s, uint32_t channel);
    void wake(NicState& s, uint32_t t, SimTime now);
    static uint64_t arg(uint32_t nic, uint32_t t, bool finish) { return (uint64_t{nic} << 33) | (uint64_t{t} << 1) | finish; }

    Simulator& sim_;
    DpaParams p_;
    std::vector<NicState> nics_;
};

}  // namespace sdr::emu
