// DCQCN's reaction and notification points (dcqcn.hpp) against what the paper's rules and the
// parameters predict, step by step.
#include <sdr/emu/dcqcn.hpp>

#include <gtest/gtest.h>

#include <cmath>

using sdr::emu::DcqcnNp;
using sdr::emu::DcqcnParams;
using sdr::emu::DcqcnRp;

namespace {
constexpr uint64_t kUs = 1000;
}

// alpha starts at 1: the first CNP halves the rate, and alpha stays 1 ((1 - g) + g).
TEST(Dcqcn, FirstCnpHalvesTheRateAndASecondHalvesAgain)
{
    const DcqcnParams p = DcqcnParams::for_line_rate(100);
    DcqcnRp rp(p, 0);
    EXPECT_EQ(rp.rate_gbps(0), 100.0);
    rp.on_cnp(10 * kUs);
    EXPECT_DOUBLE_EQ(rp.rate_gbps(10 * kUs), 50.0);
    EXPECT_DOUBLE_EQ(rp.target_gbps(), 100.0);
    EXPECT_DOUBLE_EQ(rp.alpha(), 1.0);
    rp.on_cnp(20 * kUs);
    EXPECT_DOUBLE_EQ(rp.rate_gbps(20 * kUs), 25.0);
    EXPECT_DOUBLE_EQ(rp.target_gbps(), 50.0);
    for (int i = 0; i < 20; i++) rp.on_cnp(30 * kUs);
    EXPECT_EQ(rp.rate_gbps(30 * kUs), p.min_gbps) << "never below the minimum rate";
    EXPECT_EQ(rp.cnps(), 22u);
}

// Without CNPs alpha decays by (1 - g) per alpha period.
TEST(Dcqcn, AlphaDecaysPerPeriodWithoutCnps)
{
    const DcqcnParams p = DcqcnParams::for_line_rate(100);
    DcqcnRp rp(p, 0);
    rp.on_cnp(0);
    (void)rp.rate_gbps(10 * p.alpha_timer_ns - 1);
    EXPECT_DOUBLE_EQ(rp.alpha(), std::pow(1 - p.g, 9));
    (void)rp.rate_gbps(10 * p.alpha_timer_ns);
    EXPECT_DOUBLE_EQ(rp.alpha(), std::pow(1 - p.g, 10));
}

// After one CNP from line rate (Rc = line/2, Rt = line), each timer event halves the distance
// to Rt (fast recovery for F events, then additive increase with Rt capped at line rate): Rc =
// line - line / 2^(k+1) after k events. Within 0.1 % of line rate takes 2^(k+1) >= 1000, k = 9:
// 9 x 300 us = 2.7 ms, not one event sooner.
TEST(Dcqcn, RecoversToLineRateWhenTheTimersPredict)
{
    const DcqcnParams p = DcqcnParams::for_line_rate(100);
    DcqcnRp rp(p, 0);
    rp.on_cnp(0);
    for (uint64_t k = 1; k <= 12; k++)
        EXPECT_DOUBLE_EQ(rp.rate_gbps(k * p.increase_timer_ns), 100.0 - 100.0 / std::pow(2.0, k + 1)) << k;
    DcqcnRp again(p, 0);
    again.on_cnp(0);
    EXPECT_LT(again.rate_gbps(8 * p.increase_timer_ns), 0.999 * 100);
    EXPECT_GE(again.rate_gbps(9 * p.increase_timer_ns), 0.999 * 100);
    EXPECT_EQ(again.rate_gbps(1'000'000'000), 100.0) << "home at last, and the timers rest";
}

// The byte counter is a second clock: every B bytes sent is an increase event too.
TEST(Dcqcn, ByteCounterRaisesTheRateToo)
{
    const DcqcnParams p = DcqcnParams::for_line_rate(100);
    DcqcnRp rp(p, 0);
    rp.on_cnp(0);
    rp.on_sent(1 * kUs, p.byte_counter - 1);
    EXPECT_DOUBLE_EQ(rp.rate_gbps(1 * kUs), 50.0);
    rp.on_sent(2 * kUs, 1);
    EXPECT_DOUBLE_EQ(rp.rate_gbps(2 * kUs), 75.0);
}

// Hyper increase once both stages passed F: Rt grows by R_HAI per event instead of R_AI.
TEST(Dcqcn, HyperIncreaseOnceBothStagesPassF)
{
    DcqcnParams p = DcqcnParams::for_line_rate(100);
    p.line_gbps = 1000;  // a ceiling far away, so Rt's growth shows
    DcqcnRp rp(p, 0);
    rp.on_cnp(0);  // Rc 500, Rt 1000
    rp.on_cnp(0);  // Rc 250, Rt 500
    for (uint32_t i = 0; i <= p.fast_recovery; i++) rp.on_sent(0, p.byte_counter);  // BC = F + 1
    const double rt_before = rp.target_gbps();
    EXPECT_DOUBLE_EQ(rt_before, 500 + 2 * p.rai_gbps) << "BC 1..4 fast recovery (Rt stays), BC 5 and 6 additive";
    (void)rp.rate_gbps(6 * p.increase_timer_ns);  // T = 6 > F too: min(T, BC) - F = 1
    EXPECT_NEAR(rp.target_gbps(), rt_before + 5 * p.rai_gbps + p.rhai_gbps, 1e-9)
        << "T = 1..5 additive (BC > F, T <= F), T = 6 hyper";
}

// Under 100 % marking, one CNP per QP per 50 us: 1000 marked packets 1 us apart give 20.
TEST(Dcqcn, NotificationPointSendsOneCnpPerInterval)
{
    const DcqcnParams p;
    DcqcnNp np;
    int cnps = 0;
    for (uint64_t t = 0; t < 1000; t++) cnps += np.on_ce(t * kUs, p.cnp_interval_ns);
    EXPECT_EQ(cnps, 20);
}
