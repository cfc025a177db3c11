// Emulated DPA workers on dedicated threads ("dedicated cores" mode of the real-time executor):
// the polling thread places a packet's payload and hands the receive CQE to the channel's worker
// through a single-producer ring; the worker thread runs the firmware's receive handler (which
// touches only firmware receive state, with atomics, and its own hal_worker). Channel c runs on
// thread c mod threads. Send completions, doorbells and timers stay on the polling thread.
//
// An idle worker pinned to a core spins briefly (packets come in trains), then blocks until the
// polling thread rings its bell; an unpinned one blocks at once. On a machine with fewer cores
// than threads, a worker that spins or naps in a loop takes the core from the polling thread.
#pragma once

#include <sdr/emu/nic.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace sdr::emu {

class RtWorkers {
public:
    // on_events runs on a worker thread after a batch that wrote to host memory.
    RtWorkers(Nic& nic, uint32_t threads, const std::vector<int>& cores, std::function<void()> on_events);
    ~RtWorkers();
    RtWorkers(const RtWorkers&) = delete;
    RtWorkers& operator=(const RtWorkers&) = delete;

    // From the polling thread only; waits while the worker's ring is full (back-pressure).
    void post(uint32_t worker, const hal_cqe& cqe);
    uint32_t threads() const { return static_cast<uint32_t>(lanes_.size()); }
    // Waits until every CQE posted so far has been handled (the caller stops posts meanwhile).
    void drain();

private:
    struct Item {
        uint32_t worker;
        hal_cqe cqe;
    };
    static constexpr uint32_t kRing = 8192;
    struct Lane {
        std::vector<Item> ring = std::vector<Item>(kRing);
        alignas(64) std::atomic<uint64_t> head{0};  // next to write (producer)
        alignas(64) std::atomic<uint64_t> tail{0};  // next to read (consumer)
        alignas(64) std::atomic<bool> asleep{false};  // the worker waits on bell
        std::atomic<uint32_t> bell{0};
        std::thread thread;
    };
    void run(Lane& lane, int core);
    static void ring(Lane& lane);

    Nic& nic_;
    std::function<void()> on_events_;
    std::vector<std::unique_ptr<Lane>> lanes_;
    std::atomic<bool> stop_{false};
};

}  // namespace sdr::emu
