#include <sdr/emu/rt_workers.hpp>

#include <pthread.h>

namespace sdr::emu {

namespace {
constexpr uint32_t kSpinRounds = 4000;  // a few microseconds of an empty ring before sleeping
}

RtWorkers::RtWorkers(Nic& nic, uint32_t threads, const std::vector<int>& cores, std::function<void()> on_events)
    : nic_(nic), on_events_(std::move(on_events))
{
    for (uint32_t t = 0; t < threads; t++) lanes_.push_back(std::make_unique<Lane>());
    for (uint32_t t = 0; t < threads; t++) {
        int core = t < cores.size() ? cores[t] : -1;
        lanes_[t]->thread = std::thread([this, t, core] { run(*lanes_[t], core); });
    }
}

RtWorkers::~RtWorkers()
{
    stop_ = true;
    for (auto& l : lanes_) {
        l->asleep = true;  // so ring() wakes it whatever it is doing
        ring(*l);
        l->thread.join();
    }
}

// Wakes the lane's worker if it sleeps. Only the first post after it fell asleep pays for the
// system call.
void RtWorkers::ring(Lane& l)
{
    if (!l.asleep.load(std::memory_order_seq_cst) || !l.asleep.exchange(false)) return;
    l.bell.fetch_add(1);
    l.bell.notify_one();
}

void RtWorkers::post(uint32_t worker, const hal_cqe& cqe)
{
    Lane& l = *lanes_[worker % lanes_.size()];
    uint64_t h = l.head.load(std::memory_order_relaxed);
    if (h - l.tail.load(std::memory_order_acquire) == kRing) {
        ring(l);
        // The worker may share this core: give it the core rather than spin against it.
        while (h - l.tail.load(std::memory_order_acquire) == kRing) std::this_thread::yield();
    }
    l.ring[h % kRing] = Item{worker, cqe};
    // Publishes the item and the payload placed before it. Sequentially consistent with the
    // worker's "asleep, then check head": one of the two sees the other.
    l.head.store(h + 1, std::memory_order_seq_cst);
    ring(l);
}

void RtWorkers::drain()
{
    for (auto& l : lanes_) {
        const uint64_t h = l->head.load(std::memory_order_relaxed);
        ring(*l);  // a sleeping worker with work left wakes up
        while (l->tail.load(std::memory_order_acquire) != h) std::this_thread::yield();
    }
}

void RtWorkers::run(Lane& l, int core)
{
    if (core >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(core, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    uint32_t idle_rounds = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
        uint64_t t = l.tail.load(std::memory_order_relaxed), h = l.head.load(std::memory_order_acquire);
        if (t == h) {
            // Only a worker on a core of its own spins: one that shares a core would spin against
            // the polling thread that has to run for any work to arrive.
            if (core >= 0 && ++idle_rounds < kSpinRounds) continue;
            uint32_t bell = l.bell.load();
            l.asleep.store(true, std::memory_order_seq_cst);
            if (l.head.load(std::memory_order_seq_cst) == t && !stop_.load()) l.bell.wait(bell);
            l.asleep.store(false, std::memory_order_relaxed);
            idle_rounds = 0;
            continue;
        }
        idle_rounds = 0;
        for (; t != h; t++) nic_.run_rx_cqe(l.ring[t % kRing].worker, l.ring[t % kRing].cqe);
        l.tail.store(t, std::memory_order_release);
        on_events_();
    }
}

}  // namespace sdr::emu
