// The pcap tap, checked two ways: read back with libpcap (exact records and timestamps), and
// dissected by tshark (Wireshark must see the RoCEv2 fields we meant, including in a header-only
// truncated capture as the payload-free simulator writes them).
#include "tshark_util.hpp"

#include <sdr/emu/pcap_writer.hpp>
#include <sdr/emu/wire.hpp>

#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace wire = sdr::emu::wire;
using sdr::emu::PcapWriter;
using Bytes = std::vector<uint8_t>;

namespace {

std::string temp_pcap(const char* tag)
{
    return ::testing::TempDir() + "sdr_" + tag + "_" + std::to_string(getpid()) + ".pcap";
}

// Removes the file when the test ends, pass or fail.
struct TempFile {
    std::string path;
    ~TempFile() { std::remove(path.c_str()); }
};

struct Sent {
    wire::Headers h;
    uint32_t payload_len;
    bool header_only;
    uint64_t ts_ps;
    Bytes frame;  // what was written to the pcap (whole frame, or the headers)
};

wire::Headers write_imm(uint32_t qp, uint32_t psn, uint64_t va, uint32_t rkey, uint32_t len, uint32_t imm)
{
    wire::Headers h;
    h.src_mac = {0x02, 0, 0, 0, 0, 0x01};
    h.dst_mac = {0x02, 0, 0, 0, 0, 0x02};
    h.src_ip = 0x0A000001;
    h.dst_ip = 0x0A000002;
    h.dest_qp = qp;
    h.psn = psn;
    h.va = va;
    h.rkey = rkey;
    h.dma_len = len;
    h.imm = imm;
    return h;
}

// A few frames with known QPN/PSN/VA: three whole UC WRITE-with-IMM frames, one header-only
// truncated capture of a 4 KiB packet, and a UD SEND-with-IMM.
std::vector<Sent> write_sample_pcap(const std::string& path)
{
    std::vector<Sent> sent = {
        {write_imm(0x000101, 0, 0x1000, 0x00ABCDEF, 64, 0x00000001), 64, false, 1'000'000, {}},
        {write_imm(0x000102, 0x123456, 0x7F0012345000, 0xCAFEBABE, 1024, 0x80000002), 1024, false, 2'500'123, {}},
        {write_imm(0xFFFFFF, 0xFFFFFF, 0xFFFFFFFFFFFFF000, 0xFFFFFFFF, 4096, 0xFFFFFFFF), 4096, false, 1'234'567'890'123, {}},
        {write_imm(0x000200, 77, 0x40000000, 0x11, 4096, 0x0ABC0DEF), 4096, true, 1'234'567'891'000, {}},
    };
    wire::Headers ud = write_imm(0x000003, 9, 0, 0, 0, 0x12345678);
    ud.opcode = wire::kOpUdSendOnlyImm;
    ud.qkey = 0x11111111;
    ud.src_qp = 1;
    sent.push_back({ud, 32, false, 2'000'000'000'000, {}});

    PcapWriter w;
    std::string err;
    EXPECT_TRUE(w.open(path, &err)) << err;
    for (Sent& s : sent) {
        Bytes payload(s.payload_len);
        for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(i * 7);
        s.frame.resize(wire::header_bytes(s.h.opcode) + s.payload_len + wire::kIcrcBytes);
        size_t origlen = s.frame.size();
        size_t n = s.header_only ? wire::encode_headers(s.h, s.payload_len, s.frame.data(), s.frame.size())
                                 : wire::encode(s.h, payload.data(), s.payload_len, s.frame.data(), s.frame.size());
        EXPECT_GT(n, 0u);
        s.frame.resize(n);
        w.write(s.ts_ps, s.frame.data(), uint32_t(n), uint32_t(origlen));
    }
    w.close();
    return sent;
}

}  // namespace

TEST(PcapWriter, RecordsReadBackWithNanosecondStamps)
{
    TempFile f{temp_pcap("readback")};
    const std::vector<Sent> sent = write_sample_pcap(f.path);

    char errbuf[PCAP_ERRBUF_SIZE];
    pcap_t* p = pcap_open_offline_with_tstamp_precision(f.path.c_str(), PCAP_TSTAMP_PRECISION_NANO, errbuf);
    ASSERT_NE(p, nullptr) << errbuf;
    EXPECT_EQ(pcap_datalink(p), DLT_EN10MB);
    EXPECT_EQ(pcap_get_tstamp_precision(p), PCAP_TSTAMP_PRECISION_NANO);
    for (const Sent& s : sent) {
        pcap_pkthdr* hdr;
        const u_char* data;
        ASSERT_EQ(pcap_next_ex(p, &hdr, &data), 1);
        const uint64_t ns = s.ts_ps / 1000;
        EXPECT_EQ(uint64_t(hdr->ts.tv_sec), ns / 1'000'000'000);
        EXPECT_EQ(uint64_t(hdr->ts.tv_usec), ns % 1'000'000'000);
        EXPECT_EQ(hdr->caplen, s.frame.size());
        EXPECT_EQ(hdr->len, wire::header_bytes(s.h.opcode) + s.payload_len + wire::kIcrcBytes);
        EXPECT_EQ(Bytes(data, data + hdr->caplen), s.frame);
    }
    pcap_pkthdr* hdr;
    const u_char* data;
    EXPECT_EQ(pcap_next_ex(p, &hdr, &data), PCAP_ERROR_BREAK);
    pcap_close(p);
}

TEST(PcapWriter, OpenFailureSaysWhy)
{
    PcapWriter w;
    std::string err;
    EXPECT_FALSE(w.open("/nonexistent-dir/x.pcap", &err));
    EXPECT_FALSE(w.is_open());
    EXPECT_NE(err.find("/nonexistent-dir/x.pcap"), std::string::npos) << err;
    EXPECT_FALSE(w.open("/nonexistent-dir/x.pcap", nullptr));
    const uint8_t b[4] = {};
    w.write(0, b, 4, 4);  // a closed writer ignores writes
    w.close();
}

TEST(PcapWriter, MoveTransfersTheFile)
{
    TempFile f{temp_pcap("move")};
    PcapWriter a;
    ASSERT_TRUE(a.open(f.path, nullptr));
    PcapWriter b(std::move(a));
    EXPECT_FALSE(a.is_open());
    ASSERT_TRUE(b.is_open());
    const Bytes frame(60, 0xAB);
    b.write(5'000, frame.data(), 60, 60);
    PcapWriter c;
    c = std::move(b);
    EXPECT_FALSE(b.is_open());
    c.write(6'000, frame.data(), 60, 60);
    c.close();
    EXPECT_FALSE(c.is_open());

    char errbuf[PCAP_ERRBUF_SIZE];
    pcap_t* p = pcap_open_offline_with_tstamp_precision(f.path.c_str(), PCAP_TSTAMP_PRECISION_NANO, errbuf);
    ASSERT_NE(p, nullptr) << errbuf;
    int records = 0;
    pcap_pkthdr* hdr;
    const u_char* data;
    while (pcap_next_ex(p, &hdr, &data) == 1) ++records;
    pcap_close(p);
    EXPECT_EQ(records, 2);
}

TEST(PcapTshark, DissectsOurRoceFrames)
{
    if (!sdr::test::tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to dissect our pcaps";
    TempFile f{temp_pcap("tshark")};
    const std::vector<Sent> sent = write_sample_pcap(f.path);

    const std::vector<std::string> fields = {
        "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",    "infiniband.reth.va",
        "infiniband.reth.r_key", "infiniband.reth.dmalen", "infiniband.immdt",     "infiniband.invariant.crc",
        "infiniband.deth.q_key", "infiniband.deth.srcqp",  "frame.len",            "frame.cap_len",
        "frame.time_epoch"};
    enum { kOp, kQp, kPsn, kVa, kRkey, kDmaLen, kImm, kIcrc, kQkey, kSrcQp, kLen, kCapLen, kTime };
    std::string err;
    auto rows = sdr::test::tshark_fields(f.path, fields, &err);
    ASSERT_TRUE(rows) << err;
    ASSERT_EQ(rows->size(), sent.size());

    using sdr::test::parse_tshark_bytes_be;
    using sdr::test::parse_tshark_uint;
    for (size_t i = 0; i < sent.size(); ++i) {
        const Sent& s = sent[i];
        const auto& r = (*rows)[i];
        SCOPED_TRACE(::testing::Message() << "frame " << i + 1);
        ASSERT_EQ(r.size(), fields.size());
        EXPECT_EQ(parse_tshark_uint(r[kOp]), s.h.opcode);  // decimal: 43 for 0x2B
        EXPECT_EQ(parse_tshark_uint(r[kQp]), s.h.dest_qp);
        EXPECT_EQ(parse_tshark_uint(r[kPsn]), s.h.psn);
        EXPECT_EQ(parse_tshark_bytes_be(r[kImm]), s.h.imm);  // FT_BYTES: bare hex digits
        EXPECT_EQ(parse_tshark_uint(r[kLen]), wire::header_bytes(s.h.opcode) + s.payload_len + 4);
        EXPECT_EQ(parse_tshark_uint(r[kCapLen]), s.frame.size());
        const uint64_t ns = s.ts_ps / 1000;
        char want_time[40];
        std::snprintf(want_time, sizeof want_time, "%llu.%09llu", (unsigned long long)(ns / 1'000'000'000),
                      (unsigned long long)(ns % 1'000'000'000));
        EXPECT_EQ(r[kTime], want_time);
        if (s.h.opcode == wire::kOpUcWriteOnlyImm) {
            EXPECT_EQ(parse_tshark_uint(r[kVa]), s.h.va);
            EXPECT_EQ(parse_tshark_uint(r[kRkey]), s.h.rkey);
            EXPECT_EQ(parse_tshark_uint(r[kDmaLen]), s.h.dma_len);
        } else {
            EXPECT_EQ(r[kVa], "");
            EXPECT_EQ(parse_tshark_uint(r[kQkey]), s.h.qkey);
            EXPECT_EQ(parse_tshark_uint(r[kSrcQp]), s.h.src_qp);
        }
        if (s.header_only) {
            EXPECT_EQ(r[kIcrc], "") << "a header-only capture has no ICRC";
        } else if (s.h.opcode == wire::kOpUdSendOnlyImm) {
            // tshark 4.0 shows no ICRC for a UD SEND on a QP it has not seen before: it hands
            // payload and ICRC to its payload sub-dissectors. Our own check must hold.
            EXPECT_TRUE(wire::icrc_ok(s.frame.data(), s.frame.size()));
        } else {
            // tshark shows the 4 ICRC bytes as a big-endian number; we store the CRC LSB first.
            const uint8_t* c = s.frame.data() + s.frame.size() - 4;
            const uint32_t as_shown = uint32_t(c[0]) << 24 | uint32_t(c[1]) << 16 | uint32_t(c[2]) << 8 | c[3];
            EXPECT_EQ(parse_tshark_uint(r[kIcrc]), as_shown);
            EXPECT_TRUE(wire::icrc_ok(s.frame.data(), s.frame.size()));
        }
    }
}
