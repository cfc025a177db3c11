// The event scheduler (emu/sim simulator.hpp) against a model: a sorted set of (time, seq).
// Events run in exactly (t, seq) order whichever structure holds them — the heap with few
// pending, the timing wheel for the near future with many, the heap again for the far future —
// and across the wheel's window edge, its turn, equal times, and times in the past.
#include <sdr/emu/event_wheel.hpp>
#include <sdr/emu/simulator.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace {

using sdr::emu::EventWheel;
using sdr::emu::SimTarget;
using sdr::emu::SimTime;
using sdr::emu::Simulator;

constexpr SimTime kWindow = EventWheel::kBuckets << EventWheel::kWidthBits;  // ps

// Schedules through the simulator and the model alike; each fired event checks it was the
// model's earliest, then schedules `fanout` successors at times drawn from a mix (the same
// times again and again among them, as links of one rate make).
class Checker final : public SimTarget {
public:
    explicit Checker(Simulator& s) : sim(s) {}
    void at(SimTime t, uint64_t id)
    {
        model.insert({std::max(t, sim.now()), seq++});
        sim.at(t, this, id);
    }
    void fire(SimTime now, uint64_t id) override
    {
        ASSERT_FALSE(model.empty());
        const auto first = *model.begin();
        model.erase(model.begin());
        EXPECT_EQ(first.first, now);
        EXPECT_EQ(first.second, id) << "at " << now << " ps";
        ran++;
        for (int i = 0; i < fanout; i++) at(now + delta(), seq);
    }
    SimTime delta()
    {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        switch (rng % 8) {
        case 0: return 0;                                   // now: the front bucket
        case 1: return rng >> 40 & 255;                     // the same 256 ps bucket
        case 2: return kWindow - 512 + (rng >> 40) % 1024;  // about the window's edge
        case 3: return 1'000'000'000 + (rng >> 40);         // far: 1 ms on
        case 4: return (rng >> 20) % 8 * 100;               // a few times shared by many
        default: return (rng >> 20) % 2'000'000;            // within 2 us
        }
    }
    Simulator& sim;
    std::set<std::pair<SimTime, uint64_t>> model;
    uint64_t seq = 0;  // the Simulator's own: one per at()
    uint64_t rng = 0x2545F4914F6CDD1Dull, ran = 0;
    int fanout = 1;
};

TEST(Simulator, RunsInTimeThenSchedulingOrderAsPendingGrowsAndShrinks)
{
    Simulator sim;
    Checker c(sim);
    c.at(5, 0);
    c.at(5, 1);  // equal times: scheduling order
    c.at(3, 2);
    // Grow from 3 pending to thousands (each event schedules two), hold, then drain to none.
    for (int phase = 0; phase < 3; phase++) {
        c.fanout = phase == 0 ? 2 : phase == 1 ? 1 : 0;
        for (int i = 0; i < (phase == 2 ? 1 << 30 : 12'000) && !HasFailure() && sim.step(); i++) {
        }
        if (phase == 0) {
            EXPECT_GT(c.model.size(), 5000u);
        }
    }
    EXPECT_TRUE(sim.idle());
    EXPECT_TRUE(c.model.empty());
    EXPECT_EQ(sim.events_run(), c.ran);
    EXPECT_FALSE(sim.step());
}

TEST(Simulator, ManyTurnsOfTheWheel)
{
    // 40 pending (enough for the wheel), each scheduled most of a window ahead: the buckets
    // are reused turn after turn.
    Simulator sim;
    Checker c(sim);
    c.fanout = 0;
    for (int i = 0; i < 40; i++) c.at(i * 100'000, c.seq);
    for (int i = 0; i < 20'000 && !HasFailure() && sim.step(); i++) c.at(sim.now() + kWindow * 9 / 10 + c.delta() % 4096, c.seq);
    EXPECT_EQ(c.ran, 20'000u);
    EXPECT_GT(sim.now(), 100 * kWindow);
}

TEST(Simulator, NextEventAlmostATurnAhead)
{
    // The wheel's search for the next event goes round past its last word to the clock's own
    // bitmap word, below the clock's bucket.
    Simulator sim;
    Checker c(sim);
    c.fanout = 0;
    for (int i = 0; i < 32; i++) c.at(1'000'000'000 + i, c.seq);  // far: the heap; now the wheel is on
    const SimTime t0 = SimTime{1000} << EventWheel::kWidthBits;     // bucket 1000 of bitmap word 15
    sim.run_until(t0);
    c.at(t0 + 100, c.seq);
    c.at(t0 + kWindow - 512, c.seq);  // bucket 998: the same word, below the clock's bucket
    c.at(t0 + kWindow - 300, c.seq);
    for (int i = 0; i < 100 && sim.step(); i++) {
    }
    EXPECT_EQ(c.ran, 35u);
    EXPECT_TRUE(c.model.empty());
}

TEST(Simulator, PastTimesRunNowAfterWhatIsDueNow)
{
    Simulator sim;
    Checker c(sim);
    c.fanout = 0;
    c.at(1000, 0);
    ASSERT_TRUE(sim.step());
    c.at(10, c.seq);  // in the past: runs at 1000
    c.at(1000, c.seq);
    EXPECT_EQ(sim.next_time(), 1000u);
    sim.run(10);
    EXPECT_EQ(c.ran, 3u);
    EXPECT_EQ(sim.now(), 1000u);
}

// run_ahead_to, pending_by's strictness, next_time, idle and run_until, with few pending (the
// heap) and with many (the wheel in front).
class Nop final : public SimTarget {
public:
    void fire(SimTime, uint64_t) override { n++; }
    int n = 0;
};

TEST(Simulator, RunAheadAndRunUntilWithFewAndManyPending)
{
    for (int background : {0, 100}) {
        Simulator sim;
        Nop nop;
        for (int i = 0; i < background; i++) sim.at(1'000'000 + i, &nop);
        sim.at(500, &nop);
        EXPECT_EQ(sim.next_time(), 500u);
        EXPECT_TRUE(sim.run_ahead_to(400));   // nothing due by 400
        EXPECT_FALSE(sim.run_ahead_to(500));  // an event at 500 was scheduled first
        EXPECT_FALSE(sim.run_ahead_to(300));  // the past
        EXPECT_EQ(sim.now(), 400u);
        EXPECT_EQ(sim.events_run(), 1u);
        sim.run_until(999'999);
        EXPECT_EQ(nop.n, 1);
        EXPECT_EQ(sim.now(), 999'999u);
        EXPECT_EQ(sim.idle(), background == 0);
        sim.run_until(2'000'000);
        EXPECT_EQ(nop.n, 1 + background);
        EXPECT_TRUE(sim.idle());
        EXPECT_EQ(sim.next_time(), sim.now());
    }
}

// A target that steps the simulator from inside its fire (the fired heap root is retired first).
class Nested final : public SimTarget {
public:
    explicit Nested(Simulator& s) : sim(s) {}
    void fire(SimTime now, uint64_t arg) override
    {
        order.push_back(arg);
        if (arg == 0) {
            sim.at(now + 10, this, 2);
            while (sim.step()) {
            }
        }
    }
    Simulator& sim;
    std::vector<uint64_t> order;
};

TEST(Simulator, StepInsideFire)
{
    Simulator sim;
    Nested n(sim);
    sim.at(100, &n, 0);
    sim.at(105, &n, 1);
    sim.run(10);
    EXPECT_EQ(n.order, (std::vector<uint64_t>{0, 1, 2}));
    EXPECT_TRUE(sim.idle());
}

}  // namespace
