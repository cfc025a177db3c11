// The two-datacenter topology with nothing else running is today's point-to-point link: SR and
// EC complete in the same time within 1 % (the datacenter hops add microseconds to 25 ms), with
// loss drawn on the long haul alone. The long haul draws the point-to-point link's random
// streams, so both meet the same losses as long as their packets cross in the same order.
#include "message_run.hpp"
#include "stats.hpp"

#include <sdr/reliability/config.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

namespace {

using sdr::exp::LinkSetup;
using sdr::exp::MessageRun;

double mean_ms(const LinkSetup& l, const sdr::rel::Config& cfg, uint64_t size, uint32_t n)
{
    MessageRun run(l);
    std::vector<double> ms;
    for (uint32_t s = 0; s < n; s++) {
        auto r = run.run(cfg, size, 1000 + s);
        EXPECT_TRUE(r.ok) << r.error;
        ms.push_back(r.completion_ms);
    }
    return sdr::exp::summarize(ms).mean;
}

}  // namespace

TEST(TwoDatacenters, SrAndEcCompleteAsOverThePointToPointLink)
{
    sdr::rel::Config sr, ec;
    ec.scheme = sdr::rel::Scheme::EcMds;  // k = 32, m = 8
    for (double drop : {0.0, 1e-3})
        for (uint64_t size : {1ull << 20, 64ull << 20}) {
            LinkSetup p2p;
            p2p.drop = drop;
            p2p.max_bytes = size;
            LinkSetup dc = p2p;
            dc.topology = "two_datacenters";
            for (const sdr::rel::Config* cfg : {&sr, &ec}) {
                const uint32_t n = drop > 0 ? 40 : 3;
                const double a = mean_ms(p2p, *cfg, size, n), b = mean_ms(dc, *cfg, size, n);
                std::printf("  %s %4llu MiB drop %g: point-to-point %.3f ms, two datacenters %.3f ms (%+.2f %%)\n",
                            cfg == &sr ? "SR" : "EC", (unsigned long long)(size >> 20), drop, a, b, 100 * (b / a - 1));
                EXPECT_NEAR(b / a, 1.0, 0.01);
            }
        }
}
