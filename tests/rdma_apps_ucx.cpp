// UCX 1.13 on the verbs device (emu/verbs), unmodified: Debian's ucx_perftest between two of the
// fixture's namespaces (rdma_apps.hpp), over raw: (AF_PACKET) and xdp: (AF_XDP). UCP tag
// matching (tag_bw, tag_lat), UCT put and active messages (put_bw, am_bw) over rc_verbs (UD as
// UCP's auxiliary wireup transport) and ud_verbs (whose UCT has no put: UCP's put, ucp_put_bw).
// Each run must end with status 0 on both sides and report all its iterations; ucx_perftest
// checks no data. RC also runs at 1 % loss both ways (SDR_RT_LOSS), the drops and resends counted.
#include "rdma_apps.hpp"
#include "verbs_stats_util.hpp"

#include <cstdio>
#include <regex>
#include <string>

namespace sdr::test {
namespace {

constexpr unsigned kIters = 1000;
constexpr const char* kRcTls = "rc_verbs,ud_verbs:aux";  // UCP needs an auxiliary transport to wire RC up
constexpr const char* kUdTls = "ud_verbs";

// One ucx_perftest run of test t: server on host 1, client on host 0; `args` the client's test
// options, `iters` its iterations. `loss`: both NICs drop that share of their frames
// (SDR_RT_LOSS) and report their counters (SDR_VERBS_STATS_FILE), whose text (both sides') it returns.
std::string perftest(const RdmaApps& t, const char* tls, const std::string& args, unsigned port,
                     unsigned iters = kIters, const char* loss = nullptr)
{
    std::string ucx = std::string("env UCX_TLS=") + tls + " UCX_NET_DEVICES=sdr0:1", stats[2];
    for (int side = 0; side < 2; side++)
        stats[side] = t.log("ucx_stats_" + std::to_string(port) + "_" + std::to_string(side));
    auto with = [&](int side) {
        return loss ? ucx + " SDR_RT_LOSS=" + loss + " SDR_VERBS_STATS_FILE=" + stats[side] : ucx;
    };
    const std::string perf = " timeout 60 ucx_perftest -p " + std::to_string(port);
    Child server(t.in(1, with(1) + perf));
    EXPECT_TRUE(t.listening(1, port)) << "ucx_perftest server did not start listening";
    const uint64_t t0 = mono_ms();
    Result client = run(t.in(0, with(0) + perf + " " + t.ip(1) + " -n " + std::to_string(iters) + " " + args));
    int server_status = -1;
    const std::string server_out = server.finish(&server_status);
    const uint64_t ms = mono_ms() - t0;
    EXPECT_EQ(client.status, 0) << client.out;
    EXPECT_EQ(server_status, 0) << server_out;
    // "Final:  <iterations>  <latency 50%, avg, overall>  <MB/s avg, overall>  <msg/s avg, overall>"
    std::smatch m;
    EXPECT_TRUE(std::regex_search(client.out, m, std::regex("Final:\\s+([0-9]+)\\s+[0-9.]+.*"))) << client.out;
    if (m.empty()) return {};
    EXPECT_EQ(std::stoul(m[1].str()), iters) << client.out;
    std::printf("ucx_perftest %s over %s (UCX_TLS=%s%s%s), %.1f s: %s\n", args.c_str(), t.GetParam(), tls,
                loss ? ", SDR_RT_LOSS=" : "", loss ? loss : "", ms / 1000.0, m[0].str().c_str());
    return loss ? slurp(stats[0]) + slurp(stats[1]) : std::string();
}

TEST_P(RdmaApps, UcxRcTagBw) { perftest(*this, kRcTls, "-t tag_bw", 18701); }
TEST_P(RdmaApps, UcxRcTagLat) { perftest(*this, kRcTls, "-t tag_lat", 18702); }
TEST_P(RdmaApps, UcxRcPutBw) { perftest(*this, kRcTls, "-t put_bw -d sdr0:1 -x rc_verbs", 18703); }
TEST_P(RdmaApps, UcxRcAmBw) { perftest(*this, kRcTls, "-t am_bw -d sdr0:1 -x rc_verbs", 18704); }
// Large messages: UCP's rendezvous moves them with RDMA READ (zero copy).
TEST_P(RdmaApps, UcxRcTagBwRendezvous) { perftest(*this, kRcTls, "-t tag_bw -s 262144", 18705); }
// RC at 1 % loss both ways: eager tag messages, UCT puts, and rendezvous (256 KiB, zero copy)
// complete with every iteration; what the link dropped RC sent again (go-back-N after a NAK, or
// UCX's retransmission timeout, about 1 s, for a lost last packet). ucx_perftest checks no
// data: tests/rdma_apps_mpi.cpp checks the bytes at this loss.
TEST_P(RdmaApps, UcxRcAtOnePercentLoss)
{
    std::string stats = perftest(*this, kRcTls, "-t tag_bw", 18721, kIters, "0.01");
    stats += perftest(*this, kRcTls, "-t put_bw -d sdr0:1 -x rc_verbs", 18722, kIters, "0.01");
    stats += perftest(*this, kRcTls, "-t tag_bw -s 262144", 18723, 100, "0.01");
    expect_loss_recovered(stats, std::string("ucx_perftest at 1 % loss over ") + GetParam());
}
TEST_P(RdmaApps, UcxUdTagBw) { perftest(*this, kUdTls, "-t tag_bw", 18711); }
TEST_P(RdmaApps, UcxUdTagLat) { perftest(*this, kUdTls, "-t tag_lat", 18712); }
TEST_P(RdmaApps, UcxUdPutBw) { perftest(*this, kUdTls, "-t ucp_put_bw", 18713); }
TEST_P(RdmaApps, UcxUdAmBw) { perftest(*this, kUdTls, "-t am_bw -d sdr0:1 -x ud_verbs", 18714); }

}  // namespace
}  // namespace sdr::test
