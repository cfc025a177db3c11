// The real-time emulator's pcapng: sdr_write_bw over raw: between two namespaces, 1 % loss on
// what the client sends, both sides capturing. The client's capture holds every frame it sent
// on "IF.tx", the ones its shaper dropped flagged with their cause, as many as its shaper
// counted; the server's holds what arrived on "IF.rx", and SDR's Wireshark dissector names each
// data packet's message, offset, fragment and chunk as fw_imm_decode does, as on the simulator.
#include "child_util.hpp"
#include "netns_util.hpp"
#include "tshark_util.hpp"

#include <gtest/gtest.h>
#include <sdr/emu/capture_notes.hpp>
#include <sdr/emu/capture_reader.hpp>
#include <sdr/emu/pcapng.hpp>
#include <sdr/emu/wire.hpp>
#include <sdr/firmware/imm.h>
#include <unistd.h>

#include <cstdio>

using namespace sdr;
using namespace sdr::test;

TEST(PcapngRealtime, RawCapturesCarryTheShapersDropsAndDissectAsSdr)
{
    if (auto why = netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    if (!tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to run this test";
    Testbed tb("sdrcap");
    ASSERT_TRUE(tb.ok());
    const std::string base = "/tmp/sdr_capture_rt_" + std::to_string(getpid());
    const std::string server_cap = base + "_server.pcapng", client_cap = base + "_client.pcapng";
    const std::string port = std::to_string(18900 + getpid() % 200);
    const std::string tool = SDR_WRITE_BW;
    Child server("ip netns exec " + tb.ns(1) + " " + tool + " -d raw:" + tb.ns(1) + " -p " + port +
                 " --connection UC --json --pcap " + server_cap + " --snaplen 128 --timeout-ms 20000");
    // 20 messages of 256 KiB (64 packets, 4 chunks each), 1 % loss.
    Child client("ip netns exec " + tb.ns(0) + " " + tool + " -d raw:" + tb.ns(0) + " -p " + port +
                 " --connection UC -s 262144 -n 20 -w 2 -q 4 --loss 0.01 --seed 5 --json --pcap " + client_cap +
                 " --snaplen 128 --timeout-ms 20000 " + Testbed::ip(1));
    int cs, ss;
    std::string cout = client.finish(&cs), sout = server.finish(&ss);
    ASSERT_EQ(cs, 0) << cout;
    ASSERT_EQ(ss, 0) << sout;
    const std::string cj = json_of(cout, "client");
    ASSERT_FALSE(cj.empty()) << cout;
    const double shaper_dropped = json_number(cj, "shaper.dropped");
    ASSERT_GT(shaper_dropped, 0) << cj;

    // The client's capture: what it sent, on its ".tx" interface; the drops flagged.
    std::vector<emu::CaptureRecord> recs;
    std::string err;
    ASSERT_TRUE(emu::read_capture(client_cap, &recs, &err)) << err;
    uint64_t flagged = 0, tx = 0, rx = 0, tx_data_arrived = 0;
    constexpr size_t kBthOpcode = emu::wire::kEthBytes + emu::wire::kIpv4Bytes + emu::wire::kUdpBytes;
    for (const auto& r : recs) {
        if (r.iface == tb.ns(0) + ".tx") {
            tx++;
            tx_data_arrived += r.bytes.size() > kBthOpcode && r.bytes[kBthOpcode] == emu::wire::kOpUcWriteOnlyImm &&
                               !(r.flags & emu::pcapng::kFlagLinkDrop);
            EXPECT_EQ(r.flags & 3, emu::pcapng::kFlagOutbound);
        } else {
            EXPECT_EQ(r.iface, tb.ns(0) + ".rx");
            EXPECT_EQ(r.flags & 3, emu::pcapng::kFlagInbound);
            rx++;
        }
        if (r.flags & emu::pcapng::kFlagLinkDrop) {
            flagged++;
            EXPECT_EQ(r.comment, emu::capture_note::kLossDrop);
        }
    }
    EXPECT_EQ(flagged, static_cast<uint64_t>(shaper_dropped)) << "flagged frames = shaper.dropped";
    EXPECT_GE(tx, 22u * 64) << "warm-up and measured messages, every packet";
    EXPECT_EQ(rx, 0u) << "sdr_write_bw's credits travel over its TCP bootstrap: the client receives no frame";
    auto flagged_rows = tshark_fields(client_cap, {"frame.number"}, &err, {"-Y", "frame.packet_flags_crc_error == 1"});
    ASSERT_TRUE(flagged_rows) << err;
    EXPECT_EQ(flagged_rows->size(), flagged);

    // The server's capture through the dissector: the same sdr.* fields as on the simulator.
    const std::string script = std::string(SDR_SOURCE_DIR) + "/tools/wireshark/sdr.lua";
    auto rows = tshark_fields(server_cap,
                              {"frame.interface_name", "infiniband.bth.opcode", "infiniband.immdt", "sdr.msg_id",
                               "sdr.pkt_offset", "sdr.imm_frag", "sdr.chunk"},
                              &err, {"-X", "lua_script:" + script});
    ASSERT_TRUE(rows) << err;
    uint64_t data = 0;
    for (const auto& r : *rows) {
        ASSERT_EQ(r.size(), 7u);
        EXPECT_EQ(r[0], tb.ns(1) + ".rx");
        if (r[1] != std::to_string(emu::wire::kOpUcWriteOnlyImm)) continue;
        data++;
        fw_imm d = fw_imm_decode(FW_IMM_DEFAULT_LAYOUT, static_cast<uint32_t>(*parse_tshark_bytes_be(r[2])));
        EXPECT_EQ(parse_tshark_uint(r[3]), d.msg_id);
        EXPECT_EQ(parse_tshark_uint(r[4]), d.packet_offset);
        EXPECT_EQ(parse_tshark_uint(r[5]), d.frag);
        EXPECT_EQ(parse_tshark_uint(r[6]), d.packet_offset / 16) << "64 KiB chunks of 4 KiB packets";
    }
    const std::string sj = json_of(sout, "server");
    if (json_number(sj, "rx_kernel_drops") == 0)
        EXPECT_EQ(data, tx_data_arrived) << "every data packet the client's shaper let through arrived";
    else
        EXPECT_LE(data, tx_data_arrived) << sj;
    if (!::testing::Test::HasFailure()) {
        std::remove(server_cap.c_str());
        std::remove(client_cap.c_str());
    }
}
