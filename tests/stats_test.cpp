// sdr_stats.h on the simulator: every counter by name, consistent with what was sent; the
// size query and truncation; errors; and the SDR_STATS_FILE dump that sdr-stat prints, also for
// a device that keeps no counters.
#include "child_util.hpp"
#include "sim_util.hpp"

#include <sdr_stats.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

using namespace sdr;
using namespace sdr::test;

namespace {

std::map<std::string, uint64_t> stats(sdr_context* ctx)
{
    size_t n = 0;
    EXPECT_EQ(sdr_context_stats_get(ctx, nullptr, 0, &n), SDR_SUCCESS) << sdr_last_error();
    std::vector<sdr_stat> v(n);
    size_t again = 0;
    EXPECT_EQ(sdr_context_stats_get(ctx, v.data(), v.size(), &again), SDR_SUCCESS) << sdr_last_error();
    EXPECT_EQ(again, n);
    std::map<std::string, uint64_t> m;
    for (const sdr_stat& s : v) {
        EXPECT_LT(std::strlen(s.name), sizeof s.name);
        EXPECT_TRUE(m.emplace(s.name, s.value).second) << "duplicate name " << s.name;
    }
    return m;
}

// One 1 MiB message from side 0 to side 1 (256 packets at MTU 4096).
void send_one(SimWorld& w)
{
    std::vector<uint8_t> src(1 << 20), dst(1 << 20);
    fill(src, 7);
    uint32_t sk = w.lkey(0, src.data(), src.size()), rk = w.lkey(1, dst.data(), dst.size());
    sdr_recv_wr rw{static_cast<uint32_t>(dst.size()), rk, reinterpret_cast<uint64_t>(dst.data())};
    sdr_recv_handle* rh = nullptr;
    ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS) << sdr_last_error();
    sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(src.size()), sk, reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh = nullptr;
    ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS) << sdr_last_error();
    wait_send(sh);
    w.run_until_idle();
    ASSERT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
    ASSERT_EQ(dst, src);
}

}  // namespace

TEST(Stats, EveryCounterByNameMatchesTheTransfer)
{
    SimWorld w(config());
    send_one(w);
    auto tx = stats(w.ctx(0)), rx = stats(w.ctx(1));
    EXPECT_EQ(tx.at("port.tx_frames"), 256u);
    EXPECT_EQ(tx.at("fw.tx_packets"), 256u);
    EXPECT_EQ(tx.at("qp.0.tx_packets"), 256u);
    EXPECT_EQ(tx.at("qp.0.tx_bytes"), uint64_t{1} << 20);
    EXPECT_EQ(rx.at("port.rx_frames"), 256u);
    EXPECT_EQ(rx.at("port.rx_cqes"), 256u);
    EXPECT_EQ(rx.at("port.rx_placed_bytes"), uint64_t{1} << 20);
    EXPECT_EQ(rx.at("fw.rx_cqe"), 256u);
    EXPECT_EQ(rx.at("fw.chunk_complete"), 16u);
    EXPECT_EQ(rx.at("qp.0.rx_packets"), 256u);
    EXPECT_EQ(rx.at("port.rx_drops_total"), 0u);
    EXPECT_EQ(rx.count("port.rx_drop.bad_icrc"), 1u) << "every drop reason is listed, also at 0";
    EXPECT_EQ(rx.count("kernel.rx_dropped"), 0u) << "no kernel behind a simulated NIC";
}

TEST(Stats, SizeQueryTruncationAndErrors)
{
    SimWorld w(config());
    size_t n = 0;
    ASSERT_EQ(sdr_context_stats_get(w.ctx(0), nullptr, 0, &n), SDR_SUCCESS);
    ASSERT_GT(n, 20u);
    sdr_stat two[2] = {};
    size_t total = 0;
    EXPECT_EQ(sdr_context_stats_get(w.ctx(0), two, 2, &total), SDR_SUCCESS);
    EXPECT_EQ(total, n) << "the count says how many exist, whatever fits";
    EXPECT_STREQ(two[0].name, "port.rx_frames");
    EXPECT_EQ(sdr_context_stats_get(nullptr, two, 2, &total), SDR_ERROR);
    EXPECT_NE(std::string(sdr_last_error()).find("context is NULL"), std::string::npos);
    EXPECT_EQ(sdr_context_stats_get(w.ctx(0), nullptr, 2, &total), SDR_ERROR);
    EXPECT_NE(std::string(sdr_last_error()).find("stats is NULL"), std::string::npos);
    EXPECT_EQ(sdr_context_stats_get(w.ctx(0), two, 2, nullptr), SDR_ERROR);
    EXPECT_EQ(sdr_context_stats_print(w.ctx(0), nullptr), SDR_ERROR);
}

// SDR_STATS_FILE: the file holds each context's last counters once it is destroyed, and
// sdr-stat prints them one line per device and group.
TEST(Stats, StatsFileKeepsEveryContextAndSdrStatPrintsIt)
{
    const std::string path = "/tmp/sdr_stats_test_" + std::to_string(getpid()) + ".txt";
    setenv("SDR_STATS_FILE", "/tmp/sdr_stats_test_%p.txt", 1);
    {
        SimWorld w(config());
        send_one(w);
    }
    unsetenv("SDR_STATS_FILE");
    std::ifstream in(path);
    ASSERT_TRUE(in) << path;
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    EXPECT_EQ(text.rfind("# sdr-stats pid=" + std::to_string(getpid()) + "\n", 0), 0u) << text;
    EXPECT_NE(text.find("# sdr-stats device=sim:0\n# closed\n"), std::string::npos) << text;
    EXPECT_NE(text.find("# sdr-stats device=sim:1\n# closed\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\nport.rx_frames 256\n"), std::string::npos) << text;
    int st;
    std::string out = Child(std::string(SDR_STAT) + " " + path).finish(&st);
    EXPECT_EQ(st, 0) << out;
    EXPECT_NE(out.find("sim:0 port (closed) tx_frames 256 tx_bytes "), std::string::npos) << out;
    EXPECT_NE(out.find("sim:1 fw (closed) rx_cqe 256 chunk_complete 16"), std::string::npos) << out;
    EXPECT_EQ(out.find("rx_drop.bad_icrc"), std::string::npos) << "zeros only with -z\n" << out;
    out = Child(std::string(SDR_STAT) + " -z " + path).finish(&st);
    EXPECT_NE(out.find("rx_drop.bad_icrc 0"), std::string::npos) << out;
    out = Child(std::string(SDR_STAT) + " /nonexistent/file").finish(&st);
    EXPECT_EQ(st, 1);
    EXPECT_NE(out.find("not readable or not an SDR_STATS_FILE dump"), std::string::npos) << out;
    std::remove(path.c_str());
}

// A device without counters ("verbs:" writes its heading and "# counters not available on
// verbs:") is said to have none, not printed as an empty line or as zeros; the others as usual.
TEST(Stats, SdrStatSaysWhenADeviceKeepsNoCounters)
{
    const std::string path = "/tmp/sdr_stats_test_none_" + std::to_string(getpid()) + ".txt";
    std::ofstream(path) << "# sdr-stats pid=1\n"
                           "# sdr-stats device=verbs:sdr0\n# counters not available on verbs:\n# closed\n"
                           "# sdr-stats device=sim:0\nport.rx_frames 3\n";
    for (const char* z : {"", "-z "}) {
        int st;
        const std::string out = Child(std::string(SDR_STAT) + " " + z + path).finish(&st);
        EXPECT_EQ(st, 0) << out;
        EXPECT_EQ(out, "verbs:sdr0 (closed) counters not available on verbs:\nsim:0 port rx_frames 3\n") << z;
    }
    std::remove(path.c_str());
}
