// The event scheduler alone: ns per event with N events pending (N = 2, 64, 1024, 8192), each
// fired event scheduling its successor in the near future, as a port or a link does. Baseline in
// the same run: a plain binary heap of (t, seq) events with the fired event kept at the root —
// the Simulator before its timing wheel, kept here (only here) to measure against. The two run
// in alternating blocks of events, and each side's fastest block counts, so a neighbour taking
// the core skews neither.
#include <sdr/emu/simulator.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <vector>

#include "report.hpp"

namespace {

using sdr::emu::SimEvent;
using sdr::emu::SimTarget;
using sdr::emu::SimTime;

// The baseline: a binary min-heap; the fired event stays at the root until its target
// schedules the next one, which takes the root with one sift. Out of line, as the Simulator's
// calls are (in the library).
class BinaryHeapScheduler {
public:
    SimTime now() const { return now_; }
    [[gnu::noinline]] void at(SimTime t, SimTarget* target, uint64_t arg)
    {
        const SimEvent e{std::max(t, now_), seq_++, target, arg};
        if (firing_) {
            firing_ = false;
            heap_[0] = e;
            sift_down();
            return;
        }
        size_t i = heap_.size();
        heap_.push_back(e);
        for (; i > 0 && e.before(heap_[(i - 1) / 2]); i = (i - 1) / 2) heap_[i] = heap_[(i - 1) / 2];
        heap_[i] = e;
    }
    [[gnu::noinline]] bool step()
    {
        if (heap_.empty()) return false;
        const SimEvent e = heap_[0];
        now_ = e.t;
        firing_ = true;
        e.target->fire(now_, e.arg);
        if (firing_) {
            firing_ = false;
            heap_[0] = heap_.back();
            heap_.pop_back();
            if (!heap_.empty()) sift_down();
        }
        return true;
    }

private:
    void sift_down()
    {
        const size_t n = heap_.size();
        const SimEvent e = heap_[0];
        size_t i = 0;
        for (size_t c; (c = 2 * i + 1) < n; i = c) {
            if (c + 1 < n && heap_[c + 1].before(heap_[c])) c++;
            if (!heap_[c].before(e)) break;
            heap_[i] = heap_[c];
        }
        heap_[i] = e;
    }
    std::vector<SimEvent> heap_;
    bool firing_ = false;
    SimTime now_ = 0;
    uint64_t seq_ = 0;
};

// Each event schedules one successor: mostly a 4 KiB frame's serialisation at 100 Gbit/s
// (327.68 ns) plus one of 8 steps of 8 ns, 1 in 32 a hop of 0.6-0.9 us, 1 in 1024 a timer
// 5-55 us out (these go to the Simulator's heap). The events start in groups of 16 at one
// time and keep meeting, as the links of a fabric of one rate do. The same seed gives both
// schedulers the same events.
template <class Sched>
class Chain final : public SimTarget {
public:
    explicit Chain(Sched& s) : s_(s) {}
    void fire(SimTime now, uint64_t arg) override
    {
        order = order * 1'000'003 + (now ^ arg);
        rng_ ^= rng_ << 13;
        rng_ ^= rng_ >> 7;
        rng_ ^= rng_ << 17;
        const uint64_t r = rng_;
        SimTime d = 327'680 + (r >> 20 & 7) * 8000;
        if ((r & 31) == 1) d = 600'000 + (r >> 32) % 300'000;
        if ((r & 1023) == 0) d = 5'000'000 + (r >> 32) % 50'000'000;
        s_.at(now + d, this, arg);
    }
    void fill(size_t n)
    {
        for (size_t i = 0; i < n; i++) s_.at(i / 16 * 16 * 400'000 / n, this, i);  // over 400 ns
    }

    uint64_t order = 0;  // a hash of the events run, in order

private:
    Sched& s_;
    uint64_t rng_ = 0x9E3779B97F4A7C15ull;
};

struct Cost {
    double ns = 0, baseline_ns = 0;  // per event, the fastest block of each
};
std::map<int64_t, Cost> g_cost;  // by N

template <class Sched>
double block_ns(Sched& s, int events)
{
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < events; i++) s.step();
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / events;
}

void BM_scheduler(benchmark::State& st)
{
    const size_t n = static_cast<size_t>(st.range(0));
    constexpr int kBlock = 4096;
    sdr::emu::Simulator sim;
    BinaryHeapScheduler heap;
    Chain<sdr::emu::Simulator> a(sim);
    Chain<BinaryHeapScheduler> b(heap);
    a.fill(n);
    b.fill(n);
    block_ns(sim, 4 * kBlock);  // into the steady state: the far timers pending too
    block_ns(heap, 4 * kBlock);
    Cost c{1e9, 1e9};
    for (auto _ : st) {
        c.ns = std::min(c.ns, block_ns(sim, kBlock));
        c.baseline_ns = std::min(c.baseline_ns, block_ns(heap, kBlock));
    }
    if (a.order != b.order) st.SkipWithError("the two schedulers ran different events");
    g_cost[st.range(0)] = c;
    st.counters["ns_per_event"] = c.ns;
    st.counters["baseline_ns_per_event"] = c.baseline_ns;
}

BENCHMARK(BM_scheduler)->Arg(2)->Arg(64)->Arg(1024)->Arg(8192);

}  // namespace

int main(int argc, char** argv)
{
    bool json, smoke;
    sdr::bench::run(argc, argv, &json, &smoke);
    std::vector<sdr::bench::Result> out;
    for (const auto& [n, c] : g_cost) {
        sdr::bench::Result r;
        r.name = "scheduler events/s, " + std::to_string(n) + " pending";
        r.value = 1e3 / c.ns;
        r.baseline = 1e3 / c.baseline_ns;
        r.baseline_name = "binary heap";
        r.unit = "M/s";
        out.push_back(r);
        if (!json) std::printf("%5lld pending: %.1f ns per event, binary heap %.1f ns\n", static_cast<long long>(n), c.ns, c.baseline_ns);
    }
    return sdr::bench::finish(out, json);
}
