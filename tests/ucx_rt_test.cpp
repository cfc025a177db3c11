// UCX 1.13 on the verbs device (emu/verbs), unmodified: Debian's ucx_perftest between two
// network namespaces joined by a veth, each side's device named sdr0 in a state directory of its
// own, run through `sdr-rdma exec` (the devices in /sys/class/infiniband, the interception
// library preloaded), over raw: (AF_PACKET) and xdp: (AF_XDP). UCP tag matching (tag_bw,
// tag_lat), UCT put and active messages (put_bw, am_bw) over rc_verbs (UD as UCP's auxiliary
// wireup transport) and ud_verbs (whose UCT has no put: UCP's put, ucp_put_bw). Each run must
// end with status 0 on both sides and report all its iterations; ucx_perftest checks no data.
// RC also runs at 1 % loss both ways (SDR_RT_LOSS), the drops and resends counted.
#include "child_util.hpp"
#include "netns_util.hpp"
#include "verbs_stats_util.hpp"

#include <gtest/gtest.h>

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>

namespace {

using sdr::test::Child;

using sdr::test::Result;
using sdr::test::run;

uint64_t mono_ms()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1'000'000;
}

std::string slurp(const std::string& path)
{
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

constexpr unsigned kIters = 1000;
constexpr const char* kRcTls = "rc_verbs,ud_verbs:aux";  // UCP needs an auxiliary transport to wire RC up
constexpr const char* kUdTls = "ud_verbs";

class Ucx : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override
    {
        if (std::string why = sdr::test::netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
        if (run("command -v ucx_perftest").status != 0) GTEST_SKIP() << "ucx-utils (ucx_perftest) is not installed";
        // Without it libibverbs' completion channel has no fd until a CQ exists, and UCX makes
        // it non-blocking before that (emu/verbs/SEMANTICS.md, "Completion events").
        const std::string provider = SDR_VERBS_PROVIDER;
        const std::string preload = provider.substr(0, provider.rfind('/')) + "/libsdr_rdma_preload.so";
        if (access(preload.c_str(), R_OK) != 0) GTEST_SKIP() << "the interception library " << preload << " is not built";
        bed_ = std::make_unique<sdr::test::Testbed>("ucx");
        ASSERT_TRUE(bed_->ok()) << "tools/sdr-netns could not build the testbed";  // as root: a failure
        for (int side = 0; side < 2; side++) {
            char tmpl[] = "/tmp/sdr-ucx-test-XXXXXX";
            ASSERT_NE(mkdtemp(tmpl), nullptr);
            dir_[side] = tmpl;
            Result add = run(in(side, "", std::string(SDR_RDMA) + " link add sdr0 netdev " + bed_->ns(side) + " " +
                                              GetParam()));
            ASSERT_EQ(add.status, 0) << add.out;
        }
    }
    void TearDown() override
    {
        for (const std::string& d : dir_) {
            if (d.empty()) continue;
            run("SDR_RDMA_DIR=" + d + " " + SDR_RDMA + " link del sdr0");
            run("rm -rf " + d);
        }
    }
    // `cmd` run by `sdr-rdma exec` in namespace `side` with UCX's environment `ucx`.
    std::string in(int side, const std::string& ucx, const std::string& cmd) const
    {
        return "ip netns exec " + bed_->ns(side) + " env SDR_RDMA_DIR=" + dir_[side] +
               " SDR_RDMA_PROVIDER=" + SDR_VERBS_PROVIDER + " " + ucx + " " + cmd;
    }
    bool listening(int side, unsigned port) const
    {
        char want[16];
        std::snprintf(want, sizeof want, ":%04X ", port);
        for (uint64_t deadline = mono_ms() + 20'000; mono_ms() < deadline;) {
            std::istringstream lines(run("ip netns exec " + bed_->ns(side) + " cat /proc/net/tcp").out);
            for (std::string line; std::getline(lines, line);)
                if (line.find(want) != std::string::npos && line.find(" 0A ") != std::string::npos) return true;
        }
        return false;
    }
    // One ucx_perftest run: server in b, client in a; `args` the client's test options, `iters`
    // its iterations. `loss`: both NICs drop that share of their frames (SDR_RT_LOSS) and
    // report their counters (SDR_STATS_FILE), whose text (both sides') it returns.
    std::string perftest(const char* tls, const std::string& args, unsigned port, unsigned iters = kIters,
                         const char* loss = nullptr)
    {
        std::string ucx[2], stats[2];
        for (int side = 0; side < 2; side++) {
            ucx[side] = std::string("UCX_TLS=") + tls + " UCX_NET_DEVICES=sdr0:1";
            stats[side] = dir_[side] + "/stats." + std::to_string(port);
            if (loss) ucx[side] += std::string(" SDR_RT_LOSS=") + loss + " SDR_STATS_FILE=" + stats[side];
        }
        const std::string exec = std::string(SDR_RDMA) + " exec -- timeout 60 ucx_perftest -p " + std::to_string(port);
        Child server(in(1, ucx[1], exec));
        EXPECT_TRUE(listening(1, port)) << "ucx_perftest server did not start listening";
        const uint64_t t0 = mono_ms();
        Result client = run(in(0, ucx[0], exec + " " + sdr::test::Testbed::ip(1) + " -n " + std::to_string(iters) + " " + args));
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
        std::printf("ucx_perftest %s over %s (UCX_TLS=%s%s%s), %.1f s: %s\n", args.c_str(), GetParam(), tls,
                    loss ? ", SDR_RT_LOSS=" : "", loss ? loss : "", ms / 1000.0, m[0].str().c_str());
        return loss ? slurp(stats[0]) + slurp(stats[1]) : std::string();
    }

    std::unique_ptr<sdr::test::Testbed> bed_;
    std::string dir_[2];
};

TEST_P(Ucx, RcTagBw) { perftest(kRcTls, "-t tag_bw", 18701); }
TEST_P(Ucx, RcTagLat) { perftest(kRcTls, "-t tag_lat", 18702); }
TEST_P(Ucx, RcPutBw) { perftest(kRcTls, "-t put_bw -d sdr0:1 -x rc_verbs", 18703); }
TEST_P(Ucx, RcAmBw) { perftest(kRcTls, "-t am_bw -d sdr0:1 -x rc_verbs", 18704); }
// Large messages: UCP's rendezvous moves them with RDMA READ (zero copy).
TEST_P(Ucx, RcTagBwRendezvous) { perftest(kRcTls, "-t tag_bw -s 262144", 18705); }
// RC at 1 % loss both ways: eager tag messages, UCT puts, and rendezvous (256 KiB, zero copy)
// complete with every iteration; what the link dropped RC sent again (go-back-N after a NAK, or
// UCX's retransmission timeout, about 1 s, for a lost last packet). ucx_perftest checks no
// data: tests/mpi_rt_test.cpp checks the bytes at this loss.
TEST_P(Ucx, RcAtOnePercentLoss)
{
    std::string stats = perftest(kRcTls, "-t tag_bw", 18721, kIters, "0.01");
    stats += perftest(kRcTls, "-t put_bw -d sdr0:1 -x rc_verbs", 18722, kIters, "0.01");
    stats += perftest(kRcTls, "-t tag_bw -s 262144", 18723, 100, "0.01");
    const uint64_t dropped = sdr::test::verbs_counter(stats, "shaper.dropped");
    const uint64_t resent = sdr::test::verbs_counter(stats, "verbs.retransmits");
    EXPECT_GT(dropped, 0u) << stats;
    EXPECT_GT(resent, 0u) << stats;
    std::printf("over %s: %llu frames dropped, %llu packets resent, %llu NAKs, %llu timeouts\n", GetParam(),
                static_cast<unsigned long long>(dropped), static_cast<unsigned long long>(resent),
                static_cast<unsigned long long>(sdr::test::verbs_counter(stats, "verbs.rx_naks")),
                static_cast<unsigned long long>(sdr::test::verbs_counter(stats, "verbs.timeouts")));
}
TEST_P(Ucx, UdTagBw) { perftest(kUdTls, "-t tag_bw", 18711); }
TEST_P(Ucx, UdTagLat) { perftest(kUdTls, "-t tag_lat", 18712); }
TEST_P(Ucx, UdPutBw) { perftest(kUdTls, "-t ucp_put_bw", 18713); }
TEST_P(Ucx, UdAmBw) { perftest(kUdTls, "-t am_bw -d sdr0:1 -x ud_verbs", 18714); }

INSTANTIATE_TEST_SUITE_P(Port, Ucx, ::testing::Values("raw", "xdp"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
