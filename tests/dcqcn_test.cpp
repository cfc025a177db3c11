// DCQCN's reaction and notification points (dcqcn.hpp) against what the paper's rules and the
// parameters predict, step by step.
#include <sdr/emu/dcqcn.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>
#include <vector>

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

namespace {

// The reaction point and pacing as first written (before pace() kept the gap per packet size
// and the byte counter counted down): every packet's gap from Rc in double arithmetic, the
// byte counter counted up. The reference the cached form must match bit for bit.
class PlainRp {
public:
    PlainRp(const DcqcnParams& p, uint64_t now_ns) : p_(p), rc_(p.line_gbps), rt_(p.line_gbps) { restart(now_ns); }
    void on_cnp(uint64_t now_ns)
    {
        advance(now_ns);
        rt_ = rc_;
        rc_ = std::max(p_.min_gbps, rc_ * (1 - alpha_ / 2));
        alpha_ = (1 - p_.g) * alpha_ + p_.g;
        restart(now_ns);
    }
    // The send engine's pacing: the next send time after a packet of `bytes` on the wire.
    uint64_t paced(uint64_t now_ns, uint64_t next_send_ns, uint64_t bytes)
    {
        advance(now_ns);
        const uint64_t next = std::max(next_send_ns, now_ns) + static_cast<uint64_t>(std::ceil(bytes * 8 / rc_));
        bytes_ += bytes;
        while (bytes_ >= p_.byte_counter) {
            bytes_ -= p_.byte_counter;
            bc_++;
            increase();
        }
        return next;
    }
    double rate_gbps(uint64_t now_ns)
    {
        advance(now_ns);
        return rc_;
    }
    double target_gbps() const { return rt_; }
    double alpha() const { return alpha_; }

private:
    void restart(uint64_t now_ns)
    {
        timer_stage_ = bc_ = 0;
        bytes_ = 0;
        next_alpha_ns_ = now_ns + p_.alpha_timer_ns;
        next_increase_ns_ = now_ns + p_.increase_timer_ns;
    }
    void advance(uint64_t now_ns)
    {
        if (now_ns >= next_alpha_ns_) {
            const uint64_t k = (now_ns - next_alpha_ns_) / p_.alpha_timer_ns + 1;
            alpha_ *= std::pow(1 - p_.g, static_cast<double>(k));
            next_alpha_ns_ += k * p_.alpha_timer_ns;
        }
        while (now_ns >= next_increase_ns_) {
            if (rc_ >= p_.line_gbps) {
                next_increase_ns_ += ((now_ns - next_increase_ns_) / p_.increase_timer_ns + 1) * p_.increase_timer_ns;
                break;
            }
            next_increase_ns_ += p_.increase_timer_ns;
            timer_stage_++;
            increase();
        }
    }
    void increase()
    {
        const uint32_t f = p_.fast_recovery;
        if (std::max(timer_stage_, bc_) < f) {
        } else if (std::min(timer_stage_, bc_) > f) {
            rt_ += (std::min(timer_stage_, bc_) - f) * p_.rhai_gbps;
        } else {
            rt_ += p_.rai_gbps;
        }
        rt_ = std::min(rt_, p_.line_gbps);
        rc_ = (rt_ + rc_) / 2;
        if (p_.line_gbps - rc_ < 1e-9 * p_.line_gbps) rc_ = p_.line_gbps;
    }

    const DcqcnParams& p_;
    double rc_, rt_, alpha_ = 1;
    uint64_t bytes_ = 0, next_alpha_ns_ = 0, next_increase_ns_ = 0;
    uint32_t timer_stage_ = 0, bc_ = 0;
};

}  // namespace

// pace() against the plain formula over random runs of sends (mostly one frame size, as a
// transfer's are, some others), CNPs in bursts and alone, rate queries, and time steps from
// nothing to many timer periods: the same next send times and the same Rc, Rt and alpha, bit
// for bit, at every step.
TEST(Dcqcn, PacingMatchesThePlainFormulaOverRandomRuns)
{
    std::vector<DcqcnParams> params{DcqcnParams::for_line_rate(100), DcqcnParams::for_line_rate(400),
                                    DcqcnParams::for_line_rate(25)};
    DcqcnParams small_b = DcqcnParams::for_line_rate(100);
    small_b.byte_counter = 150'000;  // the byte counter's events among the timers'
    small_b.min_gbps = 0.5;
    params.push_back(small_b);
    DcqcnParams odd = DcqcnParams::for_line_rate(56);
    odd.g = 1.0 / 16;
    odd.fast_recovery = 2;
    odd.byte_counter = 40'000;
    params.push_back(odd);
    std::mt19937_64 rng(2015);
    const uint64_t kSizes[] = {4096 + 82, 4096 + 82, 4096 + 82, 1024 + 82, 66 + 24, 9000};
    uint64_t packets = 0, cnps = 0;
    for (const DcqcnParams& p : params) {
        for (int run = 0; run < 40; run++) {
            uint64_t now = rng() % 1'000'000;
            DcqcnRp rp(p, now);
            PlainRp ref(p, now);
            uint64_t next = 0, ref_next = 0;
            for (int step = 0; step < 5000; step++) {
                const uint64_t r = rng() % 1000;
                if (r < 5) now += rng() % (4 * p.increase_timer_ns);  // idle: timers due
                else if (r < 300) now += rng() % 500;
                else if (r < 600) now = std::max(now, next);  // the engine sends when paced to
                if (r < 20) {
                    const int burst = r < 3 ? 1 + static_cast<int>(rng() % 8) : 1;
                    for (int k = 0; k < burst; k++) {
                        rp.on_cnp(now);
                        ref.on_cnp(now);
                        cnps++;
                    }
                } else if (r < 40) {
                    ASSERT_EQ(rp.rate_gbps(now), ref.rate_gbps(now));
                } else {
                    const uint64_t bytes = rng() % 16 ? kSizes[0] : kSizes[rng() % std::size(kSizes)];
                    next = std::max(next, now) + rp.pace(now, bytes);
                    ref_next = ref.paced(now, ref_next, bytes);
                    ASSERT_EQ(next, ref_next) << "run " << run << " step " << step;
                    packets++;
                }
                ASSERT_EQ(rp.rate_gbps(now), ref.rate_gbps(now)) << "run " << run << " step " << step;
                ASSERT_EQ(rp.target_gbps(), ref.target_gbps());
                ASSERT_EQ(rp.alpha(), ref.alpha());
            }
        }
    }
    EXPECT_GT(packets, 500'000u);
    EXPECT_GT(cnps, 10'000u);
}
