// The HAL conformance suite: what hal.h promises, checked through the probe firmware (probe.h)
// on one backend's HAL binding, the backend driven through its harness (harness.hpp). One
// source for every backend: CMakeLists.txt compiles it once per backend with that backend's
// harness, SDR_HAL_BACKEND naming the suite (ctest: HalConformance.<backend>.<test>).
#include "harness.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#ifndef SDR_HAL_BACKEND
#error "SDR_HAL_BACKEND must name the backend (hal/conformance/CMakeLists.txt)"
#endif

namespace sdr::hal_conformance {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kWait = 5'000 * kMs;  // the most a test waits for what must happen
constexpr uint64_t kGuard = 0x5A5A5A5A5A5A5A5Aull;

// Handlers write the probe's state on the backend's threads; the test reads it so.
template <class T>
T get(const T& v)
{
    return __atomic_load_n(&v, __ATOMIC_ACQUIRE);
}

class Conformance : public ::testing::Test {
protected:
    void SetUp() override
    {
        std::string why;
        bool skip = false;
        h_ = make_harness(&why, &skip);
        if (!h_ && skip) GTEST_SKIP() << why;
        ASSERT_TRUE(h_) << "the harness could not be set up: " << why;
        a_ = h_->state(kA);
        b_ = h_->state(kB);
        ASSERT_GE(h_->workers(), 2u);
    }
    // Ring doorbell i of side s and wait until its handler has run once more (tests wrap the
    // helpers in ASSERT_NO_FATAL_FAILURE: an assertion in them returns only from them).
    void ring(Side s, uint32_t i)
    {
        probe* p = h_->state(s);
        const uint32_t before = get(p->doorbells[i]);
        h_->doorbell(s, i);
        ASSERT_TRUE(h_->run_until([&] { return get(p->doorbells[i]) > before; }, kWait))
            << "the doorbell handler of index " << i << " never ran";
    }
    WorkerCounts delta(const WorkerCounts& after, const WorkerCounts& before)
    {
        WorkerCounts d;
        d.window_writes = after.window_writes - before.window_writes;
        d.window_refused = after.window_refused - before.window_refused;
        for (uint32_t c = 0; c < HAL_MAX_COUNTERS; c++) d.counters[c] = after.counters[c] - before.counters[c];
        return d;
    }
    // Doorbells 0 and 1 run on two different workers: what "per worker" is checked with.
    void two_workers()
    {
        w0_ = h_->doorbell_worker(0);
        w1_ = h_->doorbell_worker(1);
        ASSERT_NE(w0_, w1_) << "doorbells 0 and 1 must run on different workers";
    }

    std::unique_ptr<Harness> h_;
    probe* a_ = nullptr;
    probe* b_ = nullptr;
    uint32_t w0_ = 0, w1_ = 0;
};

using SDR_HAL_BACKEND = Conformance;

// ---- host-memory window ---------------------------------------------------------------------

// hal_window_write64 stores the word, hal_window_add64 adds to it, and each is counted once on
// the worker that made it (adds are writes too: each is a PCIe transaction).
TEST_F(SDR_HAL_BACKEND, WindowWritesLandAndAreCountedPerWorker)
{
    ASSERT_NO_FATAL_FAILURE(two_workers());
    HostMemory m = h_->host_memory(64);
    ASSERT_GE(m.nwords, 64u);
    for (size_t i = 0; i < 64; i++) m.words[i] = (i < 16 || (i >= 32 && i < 40)) ? 0 : kGuard;
    a_->window[0] = {{m.host_addr, 16}, 0, 0x1000, 5, 3, 0, 0};                  // words 0..4, 5 += 1,2,4
    a_->window[1] = {{m.host_addr + 32 * sizeof(uint64_t), 8}, 2, 0x2000, 3, 6, 0, 0};  // 34..36, 37 += 1..32
    a_->op[0] = a_->op[1] = PROBE_OP_WINDOW;
    const WorkerCounts b0 = h_->counts(kA, w0_), b1 = h_->counts(kA, w1_);
    ASSERT_NO_FATAL_FAILURE(ring(kA, 0));
    ASSERT_NO_FATAL_FAILURE(ring(kA, 1));
    std::vector<uint64_t> want(64, kGuard);
    for (size_t i = 0; i < 16; i++) want[i] = 0;
    for (size_t i = 32; i < 40; i++) want[i] = 0;
    for (uint64_t k = 0; k < 5; k++) want[k] = 0x1000 + k;
    want[5] = 0x7;
    for (uint64_t k = 0; k < 3; k++) want[34 + k] = 0x2000 + k;
    want[37] = 0x3F;
    for (size_t i = 0; i < 64; i++) EXPECT_EQ(get(m.words[i]), want[i]) << "host word " << i;
    const WorkerCounts d0 = delta(h_->counts(kA, w0_), b0), d1 = delta(h_->counts(kA, w1_), b1);
    EXPECT_EQ(d0.window_writes, 8u) << "worker " << w0_ << ": 5 writes and 3 adds";
    EXPECT_EQ(d1.window_writes, 9u) << "worker " << w1_ << ": 3 writes and 6 adds";
    EXPECT_EQ(d0.window_refused, 0u);
    EXPECT_EQ(d1.window_refused, 0u);
}

// A write or add outside [0, nwords) is refused: counted on its worker, the memory around the
// window untouched (just past the end, and an index near 2^64 that must not wrap), also for an
// empty window.
TEST_F(SDR_HAL_BACKEND, WindowAccessOutsideIsRefusedCountedAndNeverPerformed)
{
    ASSERT_NO_FATAL_FAILURE(two_workers());
    HostMemory m = h_->host_memory(64);
    ASSERT_GE(m.nwords, 64u);
    for (size_t i = 0; i < 64; i++) m.words[i] = kGuard;
    a_->window[0] = {{m.host_addr + 8 * sizeof(uint64_t), 8}, 0, 0x1111, 0, 0, 4, 0};  // words 8..15
    a_->window[1] = {{m.host_addr + 24 * sizeof(uint64_t), 0}, 0, 0x2222, 0, 0, 2, 0};  // empty at 24
    a_->op[0] = a_->op[1] = PROBE_OP_WINDOW;
    const WorkerCounts b0 = h_->counts(kA, w0_), b1 = h_->counts(kA, w1_);
    ASSERT_NO_FATAL_FAILURE(ring(kA, 0));
    ASSERT_NO_FATAL_FAILURE(ring(kA, 1));
    for (size_t i = 0; i < 64; i++) EXPECT_EQ(get(m.words[i]), kGuard) << "host word " << i << " was written";
    const WorkerCounts d0 = delta(h_->counts(kA, w0_), b0), d1 = delta(h_->counts(kA, w1_), b1);
    EXPECT_EQ(d0.window_refused, 4u) << "worker " << w0_;
    EXPECT_EQ(d1.window_refused, 2u) << "worker " << w1_;
    EXPECT_EQ(d0.window_writes, 0u);
    EXPECT_EQ(d1.window_writes, 0u);
}

// ---- counters and clock ----------------------------------------------------------------------

// hal_counter_add adds to the slot of the calling worker, every slot, exactly.
TEST_F(SDR_HAL_BACKEND, CountersArePerWorker)
{
    ASSERT_NO_FATAL_FAILURE(two_workers());
    a_->counters[0] = {1, 2, 0};
    a_->counters[1] = {1000, 1, 0};
    a_->op[0] = a_->op[1] = PROBE_OP_COUNTERS;
    const WorkerCounts b0 = h_->counts(kA, w0_), b1 = h_->counts(kA, w1_);
    ASSERT_NO_FATAL_FAILURE(ring(kA, 0));
    ASSERT_NO_FATAL_FAILURE(ring(kA, 1));
    const WorkerCounts d0 = delta(h_->counts(kA, w0_), b0), d1 = delta(h_->counts(kA, w1_), b1);
    for (uint32_t c = 0; c < HAL_MAX_COUNTERS; c++) {
        EXPECT_EQ(d0.counters[c], 2u * (1 + c)) << "worker " << w0_ << " counter " << c;
        EXPECT_EQ(d1.counters[c], 1000u + c) << "worker " << w1_ << " counter " << c;
    }
}

// hal_clock_ns never goes back, within a handler and from one handler (and worker) to a later
// one, and it moves on with the backend's time.
TEST_F(SDR_HAL_BACKEND, ClockIsMonotonic)
{
    ASSERT_NO_FATAL_FAILURE(two_workers());
    a_->clock[0].reads = 10000;
    a_->clock[1].reads = 100;
    a_->op[0] = a_->op[1] = PROBE_OP_CLOCK;
    ASSERT_NO_FATAL_FAILURE(ring(kA, 0));
    h_->run_for(2 * kMs);
    ASSERT_NO_FATAL_FAILURE(ring(kA, 1));
    EXPECT_EQ(get(a_->clock[0].backwards), 0u);
    EXPECT_EQ(get(a_->clock[1].backwards), 0u);
    EXPECT_LE(get(a_->clock[0].first), get(a_->clock[0].last));
    EXPECT_GE(get(a_->clock[1].first), get(a_->clock[0].last) + 2 * kMs)
        << "2 ms passed between the two handlers";
}

// ---- timers ------------------------------------------------------------------------------------

struct TimerSpec {
    uint32_t arm_on, id;
    uint64_t first_delay_ns, second_delay_ns;
    bool rearm, past;
};

void set_timer(probe* p, uint32_t slot, const TimerSpec& t)
{
    probe_timer_slot& s = p->timer[slot];
    s = probe_timer_slot{};
    s.arm_on = t.arm_on;
    s.id = t.id;
    s.first_delay_ns = t.first_delay_ns;
    s.second_delay_ns = t.second_delay_ns;
    s.rearm = t.rearm;
    s.past = t.past;
}

// The timer handler ran once for each of slots [0, n), on the worker that armed it, at or
// after the deadline in force, and for nothing else, even once `linger` more time has passed.
void expect_fired_once(Harness& h, probe* p, uint32_t n, uint64_t linger)
{
    ASSERT_TRUE(h.run_until(
        [&] {
            for (uint32_t s = 0; s < n; s++)
                if (!get(p->timer[s].fires)) return false;
            return true;
        },
        kWait))
        << "a timer never fired";
    h.run_for(linger);
    for (uint32_t s = 0; s < n; s++) {
        const probe_timer_slot& t = p->timer[s];
        EXPECT_EQ(get(t.fires), 1u) << "timer slot " << s << " (id " << t.id << ")";
        EXPECT_GE(get(t.fired_at_ns), get(t.deadline_ns)) << "timer slot " << s << " fired before its deadline";
        EXPECT_EQ(get(t.fired_on), get(t.armed_by)) << "timer slot " << s << " fired on another worker";
    }
    EXPECT_EQ(get(p->stray_timers), 0u) << "timer handler calls for nothing armed";
}

TEST_F(SDR_HAL_BACKEND, TimerFiresOnceAfterItsDeadline)
{
    set_timer(a_, 0, {0, 5, 10 * kMs, 0, false, false});
    a_->op[0] = PROBE_OP_TIMERS;
    ASSERT_NO_FATAL_FAILURE(ring(kA, 0));
    expect_fired_once(*h_, a_, 1, 30 * kMs);
}

// Re-arming replaces the deadline: brought forward it fires at the new one and not again at
// the old; pushed back it does not fire at the old one.
TEST_F(SDR_HAL_BACKEND, RearmingReplacesTheDeadline)
{
    set_timer(a_, 0, {0, 1, 60 * kMs, 10 * kMs, true, false});
    set_timer(a_, 1, {0, 2, 10 * kMs, 40 * kMs, true, false});
    a_->op[0] = PROBE_OP_TIMERS;
    ASSERT_NO_FATAL_FAILURE(ring(kA, 0));
    expect_fired_once(*h_, a_, 2, 80 * kMs);  // well past slot 0's first deadline
}

// "At or after deadline_ns": a deadline that has already passed when it is armed fires, once.
TEST_F(SDR_HAL_BACKEND, TimerArmedInThePastFiresOnce)
{
    h_->run_for(3 * kMs);  // a clock well past 1 us, so "1 us before now" is a real past
    set_timer(a_, 0, {0, 3, 0, 0, false, true});
    a_->op[0] = PROBE_OP_TIMERS;
    ASSERT_NO_FATAL_FAILURE(ring(kA, 0));
    expect_fired_once(*h_, a_, 1, 20 * kMs);
}

// Timer ids belong to a worker: the same id armed on two workers fires on each, once.
TEST_F(SDR_HAL_BACKEND, TimersArePerWorker)
{
    ASSERT_NO_FATAL_FAILURE(two_workers());
    set_timer(a_, 0, {0, 7, 5 * kMs, 0, false, false});
    set_timer(a_, 1, {1, 7, 15 * kMs, 0, false, false});
    a_->op[0] = a_->op[1] = PROBE_OP_TIMERS;
    ASSERT_NO_FATAL_FAILURE(ring(kA, 0));
    ASSERT_NO_FATAL_FAILURE(ring(kA, 1));
    expect_fired_once(*h_, a_, 2, 20 * kMs);
    EXPECT_NE(get(a_->timer[0].armed_by), get(a_->timer[1].armed_by));
}

// ---- atomics -----------------------------------------------------------------------------------

// hal_atomic_fetch_add32, hal_atomic_cas64 and hal_atomic_fetch_or64 on NIC memory from two
// handler contexts of side B, a receive handler (A sends it a WQE) and a doorbell handler: at
// the same moment where the backend runs them on different threads (the receive handler waits
// for the doorbell's to start). Exact totals, and every bit found clear by exactly one setter.
TEST_F(SDR_HAL_BACKEND, AtomicsAreExactUnderConcurrentHandlers)
{
    constexpr uint32_t kImm = 0xA70A1C5u;
    const uint32_t parties = h_->concurrent_handlers() > 1 ? 2 : 1;
    const uint32_t n = parties > 1 ? 200000 : 20000;
    b_->atomics.iterations = n;
    b_->atomics.parties = parties;
    b_->rx_atomics_imm = kImm;
    b_->op[0] = PROBE_OP_ATOMICS;
    a_->send.n = 1;
    a_->send.wqe[0] = {kImm, 0, 0, 0, 0, 0, 0};
    a_->op[PROBE_TX_QP_INDEX] = PROBE_OP_SEND;
    ASSERT_NO_FATAL_FAILURE(ring(kA, PROBE_TX_QP_INDEX));
    ASSERT_TRUE(h_->run_until([&] { return get(b_->atomics.arrived) >= 1; }, kWait)) << "the receive never came";
    h_->doorbell(kB, 0);
    const probe_atomics_job& j = b_->atomics;
    ASSERT_TRUE(h_->run_until([&] { return get(j.done) == 2; }, 6 * kWait)) << "an atomics handler never ended";
    EXPECT_EQ(get(j.add32), 2 * n);
    EXPECT_EQ(get(j.cas64), uint64_t{2} * n);
    EXPECT_EQ(get(j.or_new), 64u * PROBE_OR_WORDS) << "a bit was set by two contexts (or by none)";
    for (uint32_t i = 0; i < PROBE_OR_WORDS; i++) EXPECT_EQ(get(j.or_bits[i]), ~uint64_t{0}) << "word " << i;
    if (parties > 1) {
        EXPECT_EQ(get(j.met), 2u) << "the two handlers never ran at the same time";
    }
    // Contention shows as failed compare-exchanges; how much depends on the cores free.
    std::printf("atomics: %u contexts met, %u compare-exchange retries\n", get(j.met), get(j.cas_retries));
}

// ---- transmit and completions ----------------------------------------------------------------

// A WQE arrives at the peer's receive handler as a HAL_CQE_RECV_WRITE_IMM CQE with its
// immediate and length and the receiving QP's tag, its payload placed at its remote offset;
// a signalled WQE completes at the sender as a HAL_CQE_SEND CQE with its cookie, status OK,
// the sending QP's tag; an unsignalled one raises no send CQE.
TEST_F(SDR_HAL_BACKEND, CqeFieldsArriveAsPosted)
{
    const probe_path& path = a_->path;
    ASSERT_GE(path.local_len, 1200u);
    ASSERT_GE(path.remote_len, 2048u);
    uint8_t* src = h_->source();
    for (uint32_t i = 0; i < path.local_len; i++) src[i] = static_cast<uint8_t>(i * 7 + 3);
    const probe_send_wqe wqes[3] = {
        {0xA1B2C3D4u, 100, 0, 0, 0, 0, 0},              // unsignalled
        {0x00000001u, 0, 0, 0xC0FFEE01u, 512, 1, 0},    // no payload
        {0xFFFFFFFFu, 1000, 200, 0xC0FFEE02u, 1024, 1, 0},
    };
    a_->send.n = 3;
    std::memcpy(a_->send.wqe, wqes, sizeof wqes);
    a_->op[PROBE_TX_QP_INDEX] = PROBE_OP_SEND;
    ASSERT_NO_FATAL_FAILURE(ring(kA, PROBE_TX_QP_INDEX));
    EXPECT_EQ(get(a_->send.taken), 3u);
    ASSERT_TRUE(h_->run_until([&] { return get(b_->rx.count) >= 3 && get(a_->tx.count) >= 2; }, kWait))
        << "received " << get(b_->rx.count) << " of 3, completed " << get(a_->tx.count) << " of 2";
    h_->run_for(20 * kMs);  // nothing more comes
    ASSERT_EQ(get(b_->rx.count), 3u);
    for (uint32_t k = 0; k < 3; k++) {
        const hal_cqe& c = b_->rx.cqe[k];
        EXPECT_EQ(c.opcode, HAL_CQE_RECV_WRITE_IMM) << "receive " << k;
        EXPECT_EQ(c.status, HAL_CQE_OK) << "receive " << k;
        EXPECT_EQ(c.qp_tag, uint32_t{PROBE_RX_TAG}) << "receive " << k;
        EXPECT_EQ(c.imm, wqes[k].imm) << "receive " << k;
        EXPECT_EQ(c.byte_len, wqes[k].length) << "receive " << k;
    }
    ASSERT_EQ(get(a_->tx.count), 2u) << "one send CQE per signalled WQE, none for the unsignalled";
    for (uint32_t k = 0; k < 2; k++) {
        const hal_cqe& c = a_->tx.cqe[k];
        EXPECT_EQ(c.opcode, HAL_CQE_SEND) << "send completion " << k;
        EXPECT_EQ(c.status, HAL_CQE_OK) << "send completion " << k;
        EXPECT_EQ(c.qp_tag, uint32_t{PROBE_TX_TAG}) << "send completion " << k;
        EXPECT_EQ(c.wr_cookie, wqes[k + 1].cookie) << "send completion " << k;
    }
    const uint8_t* dst = h_->target();
    EXPECT_EQ(std::memcmp(dst, src, 100), 0) << "payload of WQE 0";
    EXPECT_EQ(std::memcmp(dst + 1024, src + 200, 1000), 0) << "payload of WQE 2";
    for (uint32_t i = 100; i < 1024; i++) ASSERT_EQ(dst[i], 0) << "byte " << i << " written by no WQE";
    EXPECT_EQ(get(a_->unknown_cqes) + get(b_->unknown_cqes), 0u);
}

// The burst job on the QP pair: 2 send queues and then some, in bursts of 7.
class Burst {
public:
    static constexpr uint32_t kSize = 7;
    static constexpr uint32_t kImmBase = 0x50000000;
    static constexpr uint32_t kCookie = 0xB0B0CAFE;
    uint32_t start(Harness& h, probe* a, probe* b)
    {
        const uint32_t total = 2 * a->path.sq_depth + 37;
        b->rx_burst.imm_base = kImmBase;
        b->rx_burst.total = total;
        a->burst.total = total;
        a->burst.burst_size = kSize;
        a->burst.imm_base = kImmBase;
        a->burst.cookie = kCookie;
        a->op[PROBE_TX_QP_INDEX] = PROBE_OP_BURST;
        h.doorbell(kA, PROBE_TX_QP_INDEX);
        return total;
    }
};

// hal_tx_post takes the first WQEs of a burst, in order, and returns how many: in one handler
// run exactly a send queue's worth, the burst that meets the full queue cut short.
TEST_F(SDR_HAL_BACKEND, BurstPostTakesWqesUntilTheSendQueueIsFull)
{
    const uint32_t sq = a_->path.sq_depth;
    ASSERT_GT(sq, 0u);
    Burst().start(*h_, a_, b_);
    ASSERT_TRUE(h_->run_until([&] { return get(a_->burst.runs) >= 1; }, kWait));
    EXPECT_EQ(a_->burst.run_taken[0], sq) << "the first run fills the send queue exactly";
    EXPECT_EQ(a_->burst.run_short_ret[0], sq % Burst::kSize) << "the burst that met the full queue";
    EXPECT_EQ(get(a_->burst.bad_return), 0u) << "hal_tx_post returned more than it was offered";
}

// Once the full send queue has room again the backend raises the doorbell; the probe posts the
// rest; every WQE arrives once, in order, with its length, and the one signalled WQE completes.
TEST_F(SDR_HAL_BACKEND, FullSendQueueRingsAgainAndEveryWqeArrivesInOrder)
{
    const uint32_t total = Burst().start(*h_, a_, b_);
    ASSERT_TRUE(h_->run_until([&] { return get(b_->rx_burst.in_order) == total && get(a_->tx.count) >= 1; }, kWait))
        << "posted " << get(a_->burst.next) << " of " << total << " in " << get(a_->burst.runs) << " doorbell runs, "
        << get(b_->rx_burst.in_order) << " arrived in order, " << get(b_->rx_burst.wrong) << " wrong";
    h_->run_for(20 * kMs);
    EXPECT_EQ(get(a_->burst.next), total);
    EXPECT_GE(get(a_->burst.runs), 3u) << "the queue filled twice: two doorbells from the backend";
    EXPECT_EQ(get(a_->burst.bad_return), 0u);
    EXPECT_EQ(get(b_->rx_burst.in_order), total);
    EXPECT_EQ(get(b_->rx_burst.wrong), 0u) << "out of order, duplicated or of the wrong length";
    EXPECT_EQ(get(b_->rx.count), total) << "no receive but the burst's";
    ASSERT_EQ(get(a_->tx.count), 1u) << "only the last WQE is signalled";
    EXPECT_EQ(a_->tx.cqe[0].wr_cookie, Burst::kCookie);
    EXPECT_EQ(a_->tx.cqe[0].status, HAL_CQE_OK);
    EXPECT_EQ(get(a_->stray_doorbells), 0u);
}

}  // namespace
}  // namespace sdr::hal_conformance
