// The published benchmark's pattern with no impairment, over AF_PACKET and AF_XDP: sdr_write_bw
// with 8 channels and 128 messages of 1 MiB in flight, the sender at full speed on core 0, the
// receiver's polling thread on core 1. Every frame the sender's kernel took is either received
// by the NIC or counted as a kernel drop, by cause, on the receiver's NIC; and with the
// receiver on a core of its own, none is dropped. ctest runs this test alone (RUN_SERIAL) and
// sets SDR_TEST_OWN_CORE=1, which asserts the 0; run by hand on a busy machine without it, the
// test asserts the accounting only.
#include "write_bw_util.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace sdr::test;

class WriteBwFullSpeed : public ::testing::TestWithParam<const char*> {};

TEST_P(WriteBwFullSpeed, EveryFrameIsReceivedOrCountedAsAKernelDrop)
{
    if (auto why = netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    const std::string kind = GetParam();
    Testbed tb(std::string("sdrfs") + kind[0]);
    ASSERT_TRUE(tb.ok());
    const std::string port = std::to_string(18400 + (getpid() % 90) * 2 + (kind == "xdp"));
    const WriteBwRun r = run_write_bw(tb, kind, port, "--core 1 --app-core 1 --timeout-ms 20000",
                                      "-s 1M -n 200 -w 10 -q 128 -c 8 --timeout-ms 20000", "taskset -c 0 ");
    ASSERT_TRUE(r.ok());
    const std::string &cj = r.cj, &sj = r.sj;
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
