// sdr_write_bw as a user runs it: a server process in one namespace, a client process in the
// other, over AF_PACKET and AF_XDP, meeting through the TCP bootstrap. Under loss the server
// checks every complete chunk's bytes and the counts add up; its capture dissects as RoCE
// WRITEs. A client without a server fails with a clear message when its timeout ends.
#include "child_util.hpp"
#include "netns_util.hpp"
#include "tshark_util.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>

using namespace sdr::test;

namespace {

// The line of `out` that holds the JSON object of `role`.
std::string json_of(const std::string& out, const std::string& role)
{
    size_t at = out.find("{\"role\":\"" + role + "\"");
    return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

const std::string kTool = SDR_WRITE_BW;

}  // namespace

// Port kind, and DPA worker threads on each side (0: the handlers run on the polling thread).
class WriteBw : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(WriteBw, ServerAndClientAcrossNamespacesUnderLoss)
{
    if (auto why = netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    const std::string kind = std::get<0>(GetParam());
    const int workers = std::get<1>(GetParam());
    const std::string tag = kind + "_w" + std::to_string(workers);
    Testbed tb(std::string("sdrbw") + kind[0] + std::to_string(workers));
    ASSERT_TRUE(tb.ok());
    const std::string pcap = "/tmp/sdr_write_bw_" + std::to_string(getpid()) + "_" + tag + ".pcap";
    const std::string port = std::to_string(18600 + (getpid() % 250) * 4 + (kind == "xdp") * 2 + (workers > 0));
    const std::string w = " --workers " + std::to_string(workers);
    Child server("ip netns exec " + tb.ns(1) + " " + kTool + " -d " + kind + ":" + tb.ns(1) + " -p " + port + w +
                 " --verify --json --pcap " + pcap + " --snaplen 128 --timeout-ms 20000");
    // 1 % loss on what the client sends; 60 messages of 1 MiB + 1 B (a one-byte last chunk).
    Child client("ip netns exec " + tb.ns(0) + " " + kTool + " -d " + kind + ":" + tb.ns(0) + " -p " + port + w +
                 " -s 1048577 -n 50 -w 10 -q 4 --loss 0.01 --seed 11 --json --timeout-ms 20000 " + Testbed::ip(1));
    int cs, ss;
    std::string cout = client.finish(&cs), sout = server.finish(&ss);
    ASSERT_EQ(cs, 0) << cout;
    ASSERT_EQ(ss, 0) << sout;
    std::string cj = json_of(cout, "client"), sj = json_of(sout, "server");
    ASSERT_FALSE(cj.empty()) << cout;
    ASSERT_FALSE(sj.empty()) << sout;
    std::printf("%s\n%s\n", cj.c_str(), sj.c_str());
    const double expected = json_number(sj, "chunks_expected"), received = json_number(sj, "chunks_received");
    EXPECT_EQ(expected, 50 * 17.0) << "16 full chunks and a 1-byte one per message";
    EXPECT_LT(received, expected) << "1 % packet loss makes some chunks incomplete";
    EXPECT_GT(received, 0.5 * expected);
    EXPECT_EQ(json_number(sj, "corrupt_chunks"), 0.0) << "every complete chunk holds the sent bytes";
    EXPECT_GT(json_number(cj, "goodput_gbps"), 0.0);
    EXPECT_NEAR(json_number(cj, "chunk_loss_pct"), 100 * (expected - received) / expected, 1e-3);
    EXPECT_NE(cj.find("\"port_mode\":\"" + std::string(kind == "xdp" ? "AF_XDP" : "AF_PACKET")), std::string::npos);

    // The server's capture holds the data frames it received: RoCE UC WRITE-with-immediate.
    if (tshark_available()) {
        std::string err;
        auto rows = tshark_fields(pcap, {"infiniband.bth.opcode"}, &err);
        ASSERT_TRUE(rows) << err;
        const double packets = 60 * 257.0;  // warm-up included; 256 full packets + 1 byte each
        EXPECT_GT(rows->size(), 0.95 * packets);
        EXPECT_LE(rows->size(), packets);
        for (const auto& r : *rows) ASSERT_EQ(r[0], "43");
    }
    if (!::testing::Test::HasFailure()) std::remove(pcap.c_str());
}

INSTANTIATE_TEST_SUITE_P(Ports, WriteBw, ::testing::Combine(::testing::Values("raw", "xdp"), ::testing::Values(0, 2)),
                         [](const auto& info) {
                             const int w = std::get<1>(info.param);
                             return std::string(std::get<0>(info.param)) + (w ? "_" + std::to_string(w) + "_worker_threads" : "");
                         });

// The published benchmark's pattern with no impairment: 8 channels, 128 messages of 1 MiB in
// flight, the sender at full speed, the receiver's polling thread on core 1 (the sender on
// core 0). Every frame the sender handed to the kernel is either received by the NIC or
// counted as a kernel drop, by cause, on the receiver's NIC. With the receiver on a core of its
// own the count is 0 (measured: README); this 2-core machine is shared, so the test asserts the
// accounting, and 0 only when SDR_TEST_OWN_CORE=1 says core 1 is the receiver's alone.
class WriteBwFullSpeed : public ::testing::TestWithParam<const char*> {};

TEST_P(WriteBwFullSpeed, EveryFrameIsReceivedOrCountedAsAKernelDrop)
{
    if (auto why = netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    const std::string kind = GetParam();
    Testbed tb(std::string("sdrfs") + kind[0]);
    ASSERT_TRUE(tb.ok());
    const std::string port = std::to_string(18400 + (getpid() % 90) * 2 + (kind == "xdp"));
    Child server("ip netns exec " + tb.ns(1) + " " + kTool + " -d " + kind + ":" + tb.ns(1) + " -p " + port +
                 " --core 1 --app-core 1 --json --timeout-ms 20000");
    Child client("ip netns exec " + tb.ns(0) + " taskset -c 0 " + kTool + " -d " + kind + ":" + tb.ns(0) + " -p " + port +
                 " -s 1M -n 200 -w 10 -q 128 -c 8 --json --timeout-ms 20000 " + Testbed::ip(1));
    int cs, ss;
    std::string cout = client.finish(&cs), sout = server.finish(&ss);
    ASSERT_EQ(cs, 0) << cout;
    ASSERT_EQ(ss, 0) << sout;
    std::string cj = json_of(cout, "client"), sj = json_of(sout, "server");
    ASSERT_FALSE(cj.empty()) << cout;
    ASSERT_FALSE(sj.empty()) << sout;
    const double sent = json_number(cj, "kernel.tx_frames"), got = json_number(sj, "kernel.rx_frames");
    const double dropped = json_number(sj, "kernel.rx_dropped");
    std::printf("[ info     ] %s: sent %.0f frames, received %.0f, dropped in the kernel %.0f\n", kind.c_str(), sent, got,
                dropped);
    EXPECT_EQ(sent, 210 * 256.0) << "every packet of 210 messages of 1 MiB at MTU 4096 left the sender";
    EXPECT_EQ(json_number(sj, "port.rx_frames"), got) << "the NIC saw every frame the port took";
    EXPECT_EQ(got + dropped, sent) << "a frame is received or counted";
    if (kind == "raw") {
        EXPECT_EQ(dropped, json_number(sj, "kernel.rx_ring_full"));
    } else {
        EXPECT_EQ(dropped, json_number(sj, "kernel.xdp_rx_dropped") + json_number(sj, "kernel.xdp_rx_ring_full") +
                               json_number(sj, "kernel.xdp_rx_invalid_descs") + json_number(sj, "kernel.rx_oversize"));
    }
    EXPECT_EQ(json_number(sj, "rx_kernel_drops"), dropped);
    const char* own = std::getenv("SDR_TEST_OWN_CORE");
    if (own && std::string(own) == "1") {
        EXPECT_EQ(dropped, 0.0) << "the receiver had a core of its own";
    }
}

INSTANTIATE_TEST_SUITE_P(Ports, WriteBwFullSpeed, ::testing::Values("raw", "xdp"));

// No namespaces needed: the client gives up before it opens a device.
TEST(WriteBwErrors, AbsentServerIsAClearErrorAfterTheTimeout)
{
    int st;
    std::string out = Child(kTool + " -d raw:lo -p 9 --timeout-ms 300 127.0.0.1").finish(&st);
    EXPECT_EQ(st, 1) << out;
    EXPECT_NE(out.find("connecting to the server: sdr_oob_connect(127.0.0.1:9): no connection within 300 ms"),
              std::string::npos)
        << out;
    out = Child(kTool + " -d raw:lo --size 12Q 127.0.0.1").finish(&st);
    EXPECT_EQ(st, 1) << out;
    EXPECT_NE(out.find("--size: bad size '12Q'"), std::string::npos) << out;
}
