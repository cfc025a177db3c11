// sdr_write_bw -d sim: server and client in one process on the simulated fabric, no root
// needed. Each mode moves data and both sides' JSON parses with its members: bandwidth (every
// chunk, verified), --latency (the round trips and ib_write_lat's statistics), -b (both
// directions and their sum), --scheme under 1 % loss (every message delivered byte-exact, with
// each message's completion time and both endpoints' path estimate). The options that shape a
// real path shape the simulated link (delay, rate, capture), and those only a real device has
// are refused. Counts, bytes and virtual time only: performance lives in the benchmarks.
#include "child_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <string>

using namespace sdr::test;
using nlohmann::json;

namespace {

struct SimRun {
    int status = -1;
    std::string out;
    json client, server;
};

SimRun run_sim(const std::string& args)
{
    SimRun r;
    r.out = Child(std::string(SDR_WRITE_BW) + " -d sim --json " + args).finish(&r.status);
    const std::string c = json_of(r.out, "client"), s = json_of(r.out, "server");
    if (json::accept(c)) r.client = json::parse(c);
    if (json::accept(s)) r.server = json::parse(s);
    return r;
}

::testing::AssertionResult ran(const SimRun& r)
{
    if (r.status != 0 || !r.client.is_object() || !r.server.is_object())
        return ::testing::AssertionFailure() << "exit " << r.status << ", no valid JSON of both sides:\n" << r.out;
    return ::testing::AssertionSuccess();
}

}  // namespace

TEST(WriteBwSim, BandwidthMovesEveryChunkInOneProcess)
{
    // 20 measured messages of 64 KiB + 1 B: 2 chunks each, the second 1 byte long.
    const SimRun r = run_sim("-s 65537 -n 20 -w 2 -q 4 --verify");
    ASSERT_TRUE(ran(r));
    EXPECT_EQ(r.client["mode"], "bandwidth");
    EXPECT_EQ(r.client["port_mode"], "simulator");
    EXPECT_EQ(r.client["device"], "sim:0");
    EXPECT_EQ(r.server["device"], "sim:1");
    EXPECT_EQ(r.server["chunks_expected"], 40);
    EXPECT_EQ(r.server["chunks_received"], 40);
    EXPECT_EQ(r.server["corrupt_chunks"], 0);
    EXPECT_EQ(r.client["chunk_loss_pct"], 0.0);
    // The server's NIC placed every byte of all 22 messages (the warm-up included).
    EXPECT_EQ(r.server["rx_placed_bytes"], 22 * 65537);
    EXPECT_EQ(r.server["rx_drops_total"], 0);
}

TEST(WriteBwSim, LatencyPingPongReportsIbWriteLatStatistics)
{
    const SimRun r = run_sim("--latency -s 2 -n 50 -w 5");
    ASSERT_TRUE(ran(r));
    EXPECT_EQ(r.client["mode"], "latency");
    EXPECT_EQ(r.client["round_trips"], 50);
    EXPECT_EQ(r.server["messages_echoed"], 55);
    // One 2-byte message each way per round trip: each NIC received 55, one CQE each.
    EXPECT_EQ(r.server["rx_cqes"], 55);
    EXPECT_EQ(r.client["rx_cqes"], 55);
    EXPECT_EQ(r.client["rx_placed_bytes"], 110);
    for (const char* k : {"t_min_us", "t_max_us", "t_typical_us", "t_avg_us", "t_stdev_us", "t_p99_us", "t_p99_9_us"})
        ASSERT_TRUE(r.client[k].is_number()) << k;
    // Order statistics of one sample: their order is definitional, not a timing.
    EXPECT_LE(r.client["t_min_us"].get<double>(), r.client["t_typical_us"].get<double>());
    EXPECT_LE(r.client["t_typical_us"].get<double>(), r.client["t_p99_us"].get<double>());
    EXPECT_LE(r.client["t_p99_us"].get<double>(), r.client["t_p99_9_us"].get<double>());
    EXPECT_LE(r.client["t_p99_9_us"].get<double>(), r.client["t_max_us"].get<double>());
}

TEST(WriteBwSim, BidirectionalReportsBothDirectionsAndTheirSum)
{
    const SimRun r = run_sim("-b -s 128K -n 16 -w 2 -q 4 --verify");
    ASSERT_TRUE(ran(r));
    for (const json* side : {&r.client, &r.server}) {
        const json& j = *side;
        EXPECT_EQ(j["mode"], "bidirectional");
        ASSERT_TRUE(j["send"].is_object() && j["recv"].is_object()) << j.dump();
        EXPECT_EQ(j["recv"]["chunks_expected"], 32);
        EXPECT_EQ(j["recv"]["chunks_received"], 32);
        EXPECT_EQ(j["recv"]["corrupt_chunks"], 0);
        EXPECT_EQ(j["send"]["chunk_loss_pct"], 0.0);
        EXPECT_DOUBLE_EQ(j["goodput_gbps_sum"].get<double>(),
                         j["send"]["goodput_gbps"].get<double>() + j["recv"]["goodput_gbps"].get<double>());
        // Data went both ways: each NIC placed all 18 messages the other sent.
        EXPECT_EQ(j["rx_placed_bytes"], 18 * 128 * 1024);
    }
    // What one side sent is what the other received.
    EXPECT_EQ(r.client["send"]["goodput_gbps"], r.server["recv"]["goodput_gbps"]);
    EXPECT_EQ(r.server["send"]["goodput_gbps"], r.client["recv"]["goodput_gbps"]);
}

// Through the reliability layer at 1 % packet loss in both directions: every message is
// delivered whole and byte-exact, and the scheme had to repair (retransmit or decode).
class WriteBwSimScheme : public ::testing::TestWithParam<const char*> {};

TEST_P(WriteBwSimScheme, DeliversEveryMessageByteExactUnderOnePercentLoss)
{
    const std::string scheme = GetParam();
    const SimRun r = run_sim("--scheme " + scheme + " -s 256K -n 24 -w 2 -q 4 --verify --loss 0.01 --seed 5");
    ASSERT_TRUE(ran(r));
    for (const json* side : {&r.client, &r.server}) {
        EXPECT_EQ((*side)["scheme"], scheme);
        EXPECT_EQ((*side)["messages_delivered"], 24);
        EXPECT_EQ((*side)["messages_failed"], 0);
        EXPECT_EQ((*side)["delivered_bytes"], 24 * 256 * 1024);
    }
    EXPECT_EQ(r.client["acked_failed"], 0);
    EXPECT_EQ(r.server["corrupt_messages"], 0);
    EXPECT_GT(r.client["retransmitted_chunks"].get<double>() + r.server["decoded_chunks"].get<double>(), 0) << r.out;
    // Each message took at least its injection time (256 KiB at 100 Gbit/s: 21 us); p99 bounds the mean.
    EXPECT_GE(r.client["msg_ms_mean"].get<double>(), 0.021);
    EXPECT_LE(r.client["msg_ms_mean"].get<double>(), r.client["msg_ms_p99"].get<double>());
    for (const json* side : {&r.client, &r.server})
        for (const char* k : {"srtt_ms", "rttvar_ms", "rto_ms", "delivery_gbps", "drop", "rtt_samples", "rate_samples"})
            EXPECT_TRUE((*side)["path"][k].is_number()) << k << ": " << (*side).dump();
    // The sender timed its chunks against the ACKs.
    EXPECT_GT(r.client["path"]["rtt_samples"].get<double>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Schemes, WriteBwSimScheme, ::testing::Values("sr", "sr-nack", "ec-xor:4,1", "ec-mds:4,2", "ec-lt:4,2"),
                         [](const auto& info) {
                             std::string n = info.param;
                             for (char& c : n)
                                 if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                             return n;
                         });

TEST(WriteBwSim, BadModesAreClearErrors)
{
    int st;
    std::string out = Child(std::string(SDR_WRITE_BW) + " -d sim --latency -b").finish(&st);
    EXPECT_EQ(st, 1) << out;
    EXPECT_NE(out.find("--latency: ping-pong is one message each way"), std::string::npos) << out;
    out = Child(std::string(SDR_WRITE_BW) + " -d sim --scheme ec-nope").finish(&st);
    EXPECT_EQ(st, 1) << out;
    EXPECT_NE(out.find("--scheme: "), std::string::npos) << out;
    out = Child(std::string(SDR_WRITE_BW) + " -d sim 10.0.0.1").finish(&st);
    EXPECT_EQ(st, 1) << out;
    EXPECT_NE(out.find("no SERVER_ADDRESS"), std::string::npos) << out;
}

namespace {

// One message at a time through SR: the mean completion time (post to acknowledgement).
double sr_msg_ms(const std::string& args, const std::string& env = "")
{
    int st;
    const std::string out =
        Child(env + " " + SDR_WRITE_BW + " -d sim --json --scheme sr -s 1M -n 4 -w 1 -q 1 " + args).finish(&st);
    const std::string c = json_of(out, "client");
    EXPECT_EQ(st, 0) << out;
    return json::accept(c) ? json::parse(c)["msg_ms_mean"].get<double>() : NAN;
}

}  // namespace

// --delay-ms D on sim is both sides' delay on a real path: the link's RTT grows by 2 D, and each
// message (one RTT after its injection here) by as much.
TEST(WriteBwSim, DelayMsAddsTwiceItsValueToTheLinksRtt)
{
    const double base = sr_msg_ms(""), delayed = sr_msg_ms("--delay-ms 12.5");
    // 25 ms, give or take 10 us: on the default 10 us link a lossless message took 5 us beyond its
    // injection and RTT, on the delayed one nothing.
    EXPECT_GE(delayed - base, 25 - 0.01) << base << " ms without, " << delayed << " ms with --delay-ms 12.5";
    // The same link as SDR_SIM_RTT_MS = 10 us + 2 x 12.5 ms: to the picosecond.
    EXPECT_DOUBLE_EQ(delayed, sr_msg_ms("", "SDR_SIM_RTT_MS=25.01"));
}

// --rate-gbps G on sim is the link's rate: 1 MiB at 1 Gbit/s takes 8.4 ms to inject (not 84 us).
TEST(WriteBwSim, RateGbpsIsTheLinksRate)
{
    EXPECT_GE(sr_msg_ms("--rate-gbps 1"), 8.39);
    EXPECT_LT(sr_msg_ms(""), 1);
}

// --pcap and --snaplen on sim: the capture of both NICs, data frames cut at 128 B unless
// --snaplen 0 keeps them whole.
TEST(WriteBwSim, SnaplenCutsTheCapture)
{
    const std::string dir = ::testing::TempDir();
    const std::string whole = dir + "write_bw_sim_whole.pcap", cut = dir + "write_bw_sim_cut.pcap";
    sr_msg_ms("--pcap " + whole + " --snaplen 0");
    sr_msg_ms("--pcap " + cut);
    auto size = [](const std::string& f) {
        FILE* p = std::fopen(f.c_str(), "rb");
        if (!p) return -1L;
        std::fseek(p, 0, SEEK_END);
        const long n = std::ftell(p);
        std::fclose(p);
        return n;
    };
    // 5 MiB of data in 4 KiB frames: whole, over 5 MiB; at 128 B a frame, under a tenth of it.
    EXPECT_GT(size(whole), 5L << 20);
    EXPECT_GT(size(cut), 0);
    EXPECT_LT(size(cut), size(whole) / 10);
    std::remove(whole.c_str());
    std::remove(cut.c_str());
}

// What only a real device has, -d sim refuses by name (exit 1), never ignores.
using Refusal = std::pair<std::string, std::string>;  // the options, the start of the message
class WriteBwSimRefuses : public ::testing::TestWithParam<Refusal> {};

TEST_P(WriteBwSimRefuses, ARealDeviceOption)
{
    const auto [args, message] = GetParam();
    int st;
    const std::string out = Child(std::string(SDR_WRITE_BW) + " -d sim --scheme sr " + args).finish(&st);
    EXPECT_EQ(st, 1) << out;
    EXPECT_NE(out.find(message), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(
    Options, WriteBwSimRefuses,
    ::testing::Values(Refusal{"--core 0", "sdr_write_bw: -d sim: --core: the simulator has no polling thread"},
                      Refusal{"--workers 2", "sdr_write_bw: -d sim: --workers: the simulator runs the DPA workers"},
                      Refusal{"--worker-cores 1", "sdr_write_bw: -d sim: --worker-cores: the simulator runs the DPA"},
                      Refusal{"--xdp-mode native", "sdr_write_bw: -d sim: --xdp-mode: only xdp: attaches an XDP program"},
                      Refusal{"--busy-poll", "sdr_write_bw: -d sim: --busy-poll: the simulator has no polling thread"},
                      Refusal{"-p 18000", "sdr_write_bw: -d sim: --port: both sides are in this process"}),
    [](const auto& info) {
        std::string n;
        for (char c : info.param.first)
            if (isalnum(static_cast<unsigned char>(c))) n += c;
        return n;
    });

// --rtt-ms and --gbps seed the reliability layer: without --scheme a client has none to seed.
TEST(WriteBwSim, FirstEstimatesNeedAScheme)
{
    int st;
    const std::string out = Child(std::string(SDR_WRITE_BW) + " -d sim --gbps 5").finish(&st);
    EXPECT_EQ(st, 1) << out;
    EXPECT_NE(out.find("sdr_write_bw: --gbps: a first estimate of the reliability layer: only with --scheme"), std::string::npos)
        << out;
}
