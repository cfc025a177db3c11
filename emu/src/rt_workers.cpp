#include <sdr/emu/rt_workers.hpp>

#include <pthread.h>

#include <chrono>

namespace sdr::emu {

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
    for (auto& l : lanes_) l->thread.join();
}

void RtWorkers::post(uint32_t worker, const hal_cqe& cqe)
{
    Lane& l = *lanes_[worker % lanes_.size()];
    uint64_t h = l.head.load(std::memory_order_relaxed);
    if (h - l.tail.load(std::memory_order_acquire) == kRing) {
        full_waits_++;
        while (h - l.tail.load(std::memory_order_acquire) == kRing) {}
    }
    l.ring[h % kRing] = Item{worker, cqe};
    l.head.store(h + 1, std::memory_order_release);  // publishes the item and the payload placed before it
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
            // Spin a while (packets come in trains), then nap: a worker with nothing to do
            // must not take a core from the polling thread on a small machine.
            if (++idle_rounds > 2000) std::this_thread::sleep_for(std::chrono::microseconds(20));
            continue;
        }
        idle_rounds = 0;
        for (; t != h; t++) nic_.run_rx_cqe(l.ring[t % kRing].worker, l.ring[t % kRing].cqe);
        l.tail.store(t, std::memory_order_release);
        on_events_();
    }
}

}  // namespace sdr::emu
