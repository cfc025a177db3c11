// Real-time captures a person can line up: sdr_write_bw over raw: between two namespaces with 8
// messages of 1 MiB in flight, both sides capturing (a classic pcap on one, a pcapng on the
// other), with raw SDR writes and with --scheme sr. Every frame carries a wall-clock stamp of
// its own, in nanoseconds, the first within a second of the clock when the run began; sdr-pcap
// summary reports each of the n + warm-up messages with its packets, whatever is in flight.
#include "child_util.hpp"
#include "netns_util.hpp"
#include "write_bw_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sdr/emu/capture_reader.hpp>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <ostream>
#include <set>

using namespace sdr;
using namespace sdr::test;

namespace {

uint64_t wall_ns()
{
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

uint32_t magic_of(const std::string& path)
{
    uint32_t m = 0;
    std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(&m), sizeof m);
    return m;
}

struct Case {
    const char* name;
    const char* scheme;  // "" for raw SDR writes
    const char* server_ext;
    const char* client_ext;
};

// Test names and failure messages show the case's name, not its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

constexpr uint32_t kMessages = 20 + 2;  // -n 20 -w 2

class CaptureStamps : public ::testing::TestWithParam<Case> {};

TEST_P(CaptureStamps, EveryFrameHasItsOwnWallClockStampAndEveryMessageItsPackets)
{
    if (auto why = netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    const Case& c = GetParam();
    const bool scheme = *c.scheme != 0;
    Testbed tb(std::string("sdrst") + (scheme ? "s" : "w"));
    ASSERT_TRUE(tb.ok());
    const std::string base = "/tmp/sdr_capture_stamps_" + std::to_string(getpid());
    const std::string server_cap = base + "_server." + c.server_ext, client_cap = base + "_client." + c.client_ext;
    const std::string port = std::to_string(19200 + getpid() % 200);
    const uint64_t began = wall_ns();
    const WriteBwRun r =
        run_write_bw(tb, "raw", port, "--pcap " + server_cap + " --timeout-ms 20000",
                     "-s 1M -n 20 -w 2 -q 8 --pcap " + client_cap + (scheme ? " --scheme " + std::string(c.scheme) : "") +
                         " --timeout-ms 20000");
    ASSERT_TRUE(r.ok());

    for (const std::string& cap : {server_cap, client_cap}) {
        SCOPED_TRACE(cap);
        if (cap.ends_with(".pcap")) {
            EXPECT_EQ(magic_of(cap), 0xa1b23c4du) << "the nanosecond pcap magic";
        }
        std::vector<emu::CaptureRecord> recs;
        std::string err;
        ASSERT_TRUE(emu::read_capture(cap, &recs, &err)) << err;
        ASSERT_GE(recs.size(), 0.95 * kMessages * 256) << "a message's 256 packets each, bar kernel drops";
        std::set<uint64_t> stamps;
        for (const auto& rec : recs) stamps.insert(rec.ts_ns);
        EXPECT_GE(stamps.size(), 0.95 * recs.size()) << "frames whose stamp no other frame has";
        const int64_t skew = static_cast<int64_t>(recs.front().ts_ns - began);
        EXPECT_LT(std::llabs(skew), 1'000'000'000) << "the first stamp, from the wall clock when the run began";
        std::printf("%s: %zu frames, %zu distinct stamps (%.2f %%), first %+.3f ms from the run's start\n", cap.c_str(),
                    recs.size(), stamps.size(), 100.0 * stamps.size() / recs.size(), skew / 1e6);

        int st;
        Child pcap(std::string(SDR_PCAP) + " summary " + cap + " --json");
        const std::string out = pcap.finish(&st);
        ASSERT_EQ(st, 0) << out;
        ASSERT_TRUE(nlohmann::json::accept(out)) << out;
        const auto j = nlohmann::json::parse(out);
        EXPECT_EQ(j["ctrl_undecoded"], 0) << out;
        if (scheme) {
            ASSERT_EQ(j["messages"].size(), kMessages) << out;
            for (const auto& m : j["messages"]) {
                EXPECT_EQ(m["code"], c.scheme) << m.dump();
                EXPECT_EQ(m["sdr_messages"].size(), 1u) << m.dump();
                EXPECT_GT(m["packets_sent"], 0) << m.dump();
            }
            EXPECT_TRUE(j["unattributed"].empty()) << "every SDR message in its reliable message: " << out;
        } else {
            EXPECT_TRUE(j["messages"].empty()) << out;
            ASSERT_EQ(j["unattributed"].size(), kMessages) << out;
            for (const auto& m : j["unattributed"]) {
                EXPECT_GT(m["message"]["packets_sent"], 0) << m.dump();
            }
        }
    }
    if (!::testing::Test::HasFailure()) {
        std::remove(server_cap.c_str());
        std::remove(client_cap.c_str());
    }
}

INSTANTIATE_TEST_SUITE_P(Raw, CaptureStamps,
                         ::testing::Values(Case{"writes_server_pcapng_client_pcap", "", "pcapng", "pcap"},
                                           Case{"sr_server_pcap_client_pcapng", "sr", "pcap", "pcapng"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
