// The simulator against the analytic model, and the automatic scheme choice against the fixed
// schemes, at a few points of the paper's setting (400 Gbit/s, 25 ms RTT, payload-free). The full
// comparison is `sdr_sweep` (tools/README.md); these points are chosen to be cheap and to have
// low variance (the number of retransmission rounds nearly fixed), so 5 % is a fair test of a
// mean from 60-120 samples.
#include "message_run.hpp"
#include "stats.hpp"

#include <sdr/reliability/model.hpp>
#include <sdr/reliability/policy.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

namespace {

using sdr::exp::LinkSetup;
using sdr::exp::MessageRun;
namespace model = sdr::rel::model;

model::Params params(const LinkSetup& l, uint64_t size, double rto_rtts)
{
    model::Params p = sdr::exp::model_params(l, size, sdr::rel::Config{});
    p.rto_rtts = rto_rtts;
    return p;
}

// Mean completion of `n` samples of one scheme; every sample must succeed. *code: what the
// last sample was sent with.
double mean_ms(MessageRun& run, const sdr::rel::Config& cfg, uint64_t size, uint32_t n, uint64_t seed,
               sdr::rel::Code* code = nullptr)
{
    std::vector<double> ms;
    for (uint32_t s = 0; s < n; s++) {
        auto r = run.run(cfg, size, seed * 7919 + s);
        EXPECT_TRUE(r.ok) << r.error;
        ms.push_back(r.completion_ms);
        if (code) *code = r.code;
    }
    return sdr::exp::summarize(ms).mean;
}

TEST(ModelAgreement, SrMeansWithinFivePercentWhereTheModelIsExact)
{
    sdr::rel::Config sr;  // RTO = 3 RTT (+ the receiver's ACK interval, RTT/64, which the model is given)
    int points = 0;
    for (double drop : {3e-4, 5e-4, 1e-3})
        for (uint64_t size : {32ull << 20, 64ull << 20, 128ull << 20, 256ull << 20}) {
            LinkSetup l;
            l.drop = drop;
            l.max_bytes = size;
            MessageRun run(l);
            const model::Params p = params(l, size, 3 + 1.0 / 64);
            ASSERT_TRUE(model::sr_exact(p));
            double sim = mean_ms(run, sr, size, size <= (128ull << 20) ? 120 : 60, points + 1);
            double mod = model::e_t_sr_s(p) * 1e3;
            std::printf("  %4llu MiB drop %-6g: simulated %8.3f ms, model %8.3f ms (%+.2f %%)\n",
                        (unsigned long long)(size >> 20), drop, sim, mod, 100 * (sim / mod - 1));
            EXPECT_NEAR(sim / mod, 1.0, 0.05) << size << " B at drop " << drop;
            points++;
        }
    EXPECT_GE(points, 12);
}

// Where retransmissions wait behind first sends (M*T_INJ > RTO) the model is a lower bound. It
// also bounds from above: with the RTO stretched to M*T_INJ (and the ACK interval) every repeat
// is timed after the last first send, so nothing queues and that model is exact; its schedule
// is one the sender could follow, and SR's sender, which sends a repeat once its timer ran and
// the link is free, finishes no later.
TEST(ModelAgreement, SrLiesAboveTheBoundWhereRepeatsQueueBehindFirstSends)
{
    for (double drop : {1e-3, 1e-2}) {
        LinkSetup l;
        l.bw_gbps = 10;
        l.rtt_ms = 1;
        l.drop = drop;
        const uint64_t size = 16ull << 20;  // 13.7 ms of injection against a 3 ms RTO
        l.max_bytes = size;
        MessageRun run(l);
        const model::Params p = params(l, size, 3 + 1.0 / 64);
        ASSERT_FALSE(model::sr_exact(p));
        model::Params stretched = p;
        stretched.rto_rtts = model::chunks(p) * model::t_inj_s(p) / (p.rtt_ms / 1e3) + 1.0 / 64;
        ASSERT_TRUE(model::sr_exact(stretched));
        double sim = mean_ms(run, sdr::rel::Config{}, size, 30, 99), bound = model::e_t_sr_s(p) * 1e3,
               upper = model::e_t_sr_s(stretched) * 1e3;
        std::printf("  16 MiB at 10 Gbit/s, 1 ms, drop %g: simulated %.3f ms, model bound %.3f ms, upper %.3f ms\n", drop,
                    sim, bound, upper);
        EXPECT_GE(sim, bound);
        EXPECT_LE(sim, upper);
    }
}

// auto (the receiver picks per message from the model); its mean is within 10 % of the best fixed scheme's,
// each measured on the same seeds (paired samples).
TEST(AutoScheme, WithinTenPercentOfTheBestFixedScheme)
{
    struct Point {
        uint64_t size;
        double drop;
    };
    for (Point pt : {Point{256ull << 10, 1e-3}, Point{4ull << 20, 1e-2}, Point{64ull << 20, 1e-5},
                     Point{64ull << 20, 1e-3}, Point{128ull << 20, 1e-6}}) {
        LinkSetup l;
        l.drop = pt.drop;
        l.max_bytes = pt.size;
        MessageRun run(l);
        const uint32_t n = 60;
        double best = INFINITY;
        std::string best_name;
        for (const char* name : {"sr", "sr-nack", "ec-xor", "ec-mds"}) {
            sdr::rel::Config c;
            std::string err;
            ASSERT_TRUE(sdr::rel::parse_scheme(name, &c, &err)) << err;
            double m = mean_ms(run, c, pt.size, n, 5);
            if (m < best) best = m, best_name = name;
        }
        sdr::rel::Config a;  // the API's auto; fresh endpoints are told the drop rate
        a.scheme = sdr::rel::Scheme::Auto;
        a.drop_hint = l.drop;
        sdr::rel::Code chosen;
        double mine = mean_ms(run, a, pt.size, n, 5, &chosen);
        std::printf("  %6llu KiB drop %-6g: auto chose %s, %.3f ms; best fixed %s %.3f ms (%.3f)\n",
                    (unsigned long long)(pt.size >> 10), pt.drop, sdr::rel::to_string(chosen).c_str(), mine,
                    best_name.c_str(), best, mine / best);
        EXPECT_LE(mine, 1.10 * best) << pt.size << " B at drop " << pt.drop;
    }
}

}  // namespace
