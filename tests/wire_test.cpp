// RoCEv2 wire format: known-answer frames from an independent implementation (scapy), round
// trips, and hostile frames. Runs under ASan in the sanitizer build: every hostile frame lives in
// a heap buffer of exactly its length, so any read past the end is reported.
#include <sdr/emu/wire.hpp>

#include <gtest/gtest.h>
#include <isa-l/crc.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#ifndef SDR_TESTDATA_DIR
#define SDR_TESTDATA_DIR ""
#endif

namespace wire = sdr::emu::wire;
using wire::Verdict;
using Bytes = std::vector<uint8_t>;

namespace {

std::string testdata_dir()
{
    std::string d = SDR_TESTDATA_DIR;
    if (!d.empty()) return d;
    return (std::filesystem::path(__FILE__).parent_path() / "data").string();
}

struct Vector {
    std::string name;
    Bytes frame;
};

std::vector<Vector> load_vectors()
{
    std::vector<Vector> out;
    std::ifstream in(testdata_dir() + "/roce_icrc_vectors.txt");
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream is(line);
        Vector v;
        std::string hex;
        is >> v.name >> hex;
        for (size_t i = 0; i + 1 < hex.size(); i += 2) v.frame.push_back(uint8_t(std::stoul(hex.substr(i, 2), nullptr, 16)));
        out.push_back(std::move(v));
    }
    return out;
}

uint32_t le32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }

// Decodes a copy that owns exactly its bytes, so ASan sees any over-read. The copy is freed on
// return: callers use out->h only, never out->payload.
Verdict decode_exact(const uint8_t* p, size_t n, wire::Parsed* out = nullptr, bool verify = true)
{
    std::unique_ptr<uint8_t[]> copy(new uint8_t[n ? n : 1]);
    if (n) std::memcpy(copy.get(), p, n);
    wire::Parsed scratch;
    return wire::decode(copy.get(), n, out ? out : &scratch, verify);
}
Verdict decode_exact(const Bytes& f, bool verify = true) { return decode_exact(f.data(), f.size(), nullptr, verify); }

// Offsets in a frame (no VLAN, no IP options).
constexpr size_t kIp = 14, kUdp = 34, kBth = 42, kExt = 54;

void fix_ip_checksum(Bytes& f)
{
    f[kIp + 10] = f[kIp + 11] = 0;
    uint32_t sum = 0;
    for (size_t i = 0; i < 20; i += 2) sum += uint32_t(f[kIp + i]) << 8 | f[kIp + i + 1];
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    f[kIp + 10] = uint8_t(~sum >> 8);
    f[kIp + 11] = uint8_t(~sum);
}
void fix_icrc(Bytes& f) { wire::write_icrc(f.data(), f.size() - wire::kIcrcBytes); }

// RFC 768 UDP checksum over the IPv4 pseudo-header (what scapy put in the vectors).
uint16_t udp_checksum(const Bytes& f)
{
    const size_t udp_len = size_t(f[kUdp + 4]) << 8 | f[kUdp + 5];
    uint32_t sum = 0;
    for (size_t i = 12; i < 20; i += 2) sum += uint32_t(f[kIp + i]) << 8 | f[kIp + i + 1];
    sum += 17 + uint32_t(udp_len);
    for (size_t i = 0; i < udp_len; i += 2) {
        if (i == 6) continue;  // the checksum field itself
        uint32_t hi = f[kUdp + i], lo = i + 1 < udp_len ? f[kUdp + i + 1] : 0;
        sum += hi << 8 | lo;
    }
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    uint16_t c = uint16_t(~sum);
    return c ? c : 0xFFFF;
}

wire::Headers sample_headers(uint8_t opcode = wire::kOpUcWriteOnlyImm)
{
    wire::Headers h;
    h.dst_mac = {0x02, 0, 0, 0, 0, 0x02};
    h.src_mac = {0x02, 0, 0, 0, 0, 0x01};
    h.src_ip = 0x0A000001;
    h.dst_ip = 0x0A000002;
    h.ip_tos = 0x68;
    h.ip_ttl = 33;
    h.ip_id = 0xBEEF;
    h.udp_src_port = 0xC123;
    h.opcode = opcode;
    h.solicited = true;
    h.ack_req = true;
    h.pkey = 0x8001;
    h.dest_qp = 0xABCDEF;
    h.psn = 0xFEDCBA;
    h.va = 0x0123456789ABCDEFull;
    h.rkey = 0x13579BDF;
    h.qkey = 0x80010002;
    h.src_qp = 0x00C0FFEE & 0xFFFFFF;
    h.imm = 0xA5A5F00D;
    return h;
}

Bytes pattern(size_t n, uint32_t seed)
{
    std::mt19937 rng(seed);
    Bytes b(n);
    for (auto& x : b) x = uint8_t(rng());
    return b;
}

Bytes encode_frame(wire::Headers h, const Bytes& payload, bool set_dma_len = true)
{
    if (set_dma_len && h.opcode == wire::kOpUcWriteOnlyImm) h.dma_len = uint32_t(payload.size());
    Bytes f(wire::header_bytes(h.opcode) + payload.size() + wire::kIcrcBytes + 16);
    size_t n = wire::encode(h, payload.data(), uint32_t(payload.size()), f.data(), f.size());
    EXPECT_EQ(n, f.size() - 16);
    f.resize(n);
    return f;
}

// The fields a frame carries for its opcode.
void expect_same_headers(const wire::Headers& a, const wire::Headers& b)
{
    EXPECT_EQ(a.dst_mac, b.dst_mac);
    EXPECT_EQ(a.src_mac, b.src_mac);
    EXPECT_EQ(a.src_ip, b.src_ip);
    EXPECT_EQ(a.dst_ip, b.dst_ip);
    EXPECT_EQ(a.ip_tos, b.ip_tos);
    EXPECT_EQ(a.ip_ttl, b.ip_ttl);
    EXPECT_EQ(a.ip_id, b.ip_id);
    EXPECT_EQ(a.udp_src_port, b.udp_src_port);
    EXPECT_EQ(a.opcode, b.opcode);
    EXPECT_EQ(a.solicited, b.solicited);
    EXPECT_EQ(a.ack_req, b.ack_req);
    EXPECT_EQ(a.pkey, b.pkey);
    EXPECT_EQ(a.dest_qp, b.dest_qp & 0xFFFFFF);
    EXPECT_EQ(a.psn, b.psn & 0xFFFFFF);
    if (a.opcode == wire::kOpUcWriteOnlyImm) {
        EXPECT_EQ(a.va, b.va);
        EXPECT_EQ(a.rkey, b.rkey);
        EXPECT_EQ(a.dma_len, b.dma_len);
    } else {
        EXPECT_EQ(a.qkey, b.qkey);
        EXPECT_EQ(a.src_qp, b.src_qp & 0xFFFFFF);
    }
    if (a.opcode != wire::kOpUdSendOnly) {
        EXPECT_EQ(a.imm, b.imm);
    }
}

class KnownAnswer : public ::testing::Test {
protected:
    void SetUp() override
    {
        vectors_ = load_vectors();
        ASSERT_EQ(vectors_.size(), 5u) << "vectors missing from " << testdata_dir();
        for (const auto& v : vectors_) by_name_[v.name] = &v;
    }
    const Bytes& frame(const std::string& name)
    {
        auto it = by_name_.find(name);
        EXPECT_NE(it, by_name_.end()) << name;
        return it->second->frame;
    }
    std::vector<Vector> vectors_;
    std::map<std::string, const Vector*> by_name_;
};

}  // namespace

// ISA-L's crc32_gzip_refl is the reflected IEEE CRC32 (zlib, Ethernet): the standard check value
// of "123456789" is 0xCBF43926, and a previous result continues the CRC over more bytes.
TEST(Crc32, GzipReflIsReflectedIeeeAndContinues)
{
    const unsigned char msg[] = "123456789";
    EXPECT_EQ(crc32_gzip_refl(0, msg, 9), 0xCBF43926u);
    EXPECT_EQ(crc32_gzip_refl(crc32_gzip_refl(0, msg, 4), msg + 4, 5), 0xCBF43926u);
    EXPECT_NE(crc32_ieee(0, msg, 9), 0xCBF43926u);  // the non-reflected variant is not it
}

TEST_F(KnownAnswer, EveryVectorDecodesAndItsIcrcMatches)
{
    for (const auto& v : vectors_) {
        SCOPED_TRACE(v.name);
        const Bytes& f = v.frame;
        wire::Parsed p;
        EXPECT_EQ(decode_exact(f.data(), f.size(), &p), Verdict::Ok);
        // Stored on the wire least significant byte first.
        EXPECT_EQ(wire::icrc(f.data(), f.size() - 4), le32(&f[f.size() - 4]));
        EXPECT_TRUE(wire::icrc_ok(f.data(), f.size()));
        Bytes g = f;
        std::memset(&g[g.size() - 4], 0, 4);
        wire::write_icrc(g.data(), g.size() - 4);
        EXPECT_EQ(g, f);
    }
}

TEST_F(KnownAnswer, HeaderValuesReadOffTheHex)
{
    struct Want {
        const char* name;
        uint8_t opcode, tos, ttl;
        uint16_t ip_id;
        uint32_t dest_qp, psn;
        uint64_t va;
        uint32_t rkey, dma_len, imm, payload_len;
    };
    const Want wants[] = {
        {"uc_write_only_imm_16B", 0x2B, 0, 64, 1, 0x11, 1, 0x10000, 0x1234, 16, 0x00400007, 16},
        {"uc_write_only_imm_256B", 0x2B, 0, 64, 2, 0xA5, 0xFFFF, 0x40000000, 0xDEADBEEF, 256, 0x3FF3FFFF, 256},
        {"uc_write_only_imm_4096B", 0x2B, 0, 64, 3, 0x123456, 0xABCDEF, 0x7F0000001000, 1, 4096, 0, 4096},
        {"uc_write_only_imm_1024B_tos_ttl", 0x2B, 0x28, 0x11, 4, 2, 0x10, 0x100000, 0x42, 1024, 0x80020003, 1024},
        {"ud_send_only_imm_64B", 0x65, 0, 64, 5, 3, 2, 0, 0, 0, 0x12345678, 64},
    };
    for (const Want& w : wants) {
        SCOPED_TRACE(w.name);
        const Bytes& f = frame(w.name);
        wire::Parsed p;
        ASSERT_EQ(decode_exact(f.data(), f.size(), &p), Verdict::Ok);
        EXPECT_EQ(p.h.opcode, w.opcode);
        EXPECT_EQ(p.h.ip_tos, w.tos);
        EXPECT_EQ(p.h.ip_ttl, w.ttl);
        EXPECT_EQ(p.h.ip_id, w.ip_id);
        EXPECT_EQ(p.h.src_ip, 0x0A000001u);
        EXPECT_EQ(p.h.dst_ip, 0x0A000002u);
        EXPECT_EQ(p.h.udp_src_port, 0xC000);
        EXPECT_EQ(p.h.pkey, 0xFFFF);
        EXPECT_FALSE(p.h.solicited);
        EXPECT_FALSE(p.h.ack_req);
        EXPECT_EQ(p.h.dest_qp, w.dest_qp);
        EXPECT_EQ(p.h.psn, w.psn);
        EXPECT_EQ(p.h.va, w.va);
        EXPECT_EQ(p.h.rkey, w.rkey);
        EXPECT_EQ(p.h.dma_len, w.dma_len);
        EXPECT_EQ(p.h.imm, w.imm);
        EXPECT_EQ(p.payload_len, w.payload_len);
        EXPECT_EQ(size_t(p.payload_len) + wire::header_bytes(w.opcode) + 4, f.size());
    }
    const Bytes& f = frame("ud_send_only_imm_64B");
    wire::Parsed ud;
    ASSERT_EQ(wire::decode(f.data(), f.size(), &ud), Verdict::Ok);
    EXPECT_EQ(ud.h.qkey, 0x11111111u);
    EXPECT_EQ(ud.h.src_qp, 3u);
}

// Re-encoding what we parsed gives the vector back, byte for byte, except the UDP checksum:
// scapy fills in a real one, we send 0 (RoCEv2 leaves it outside the ICRC, so the ICRC of our
// frame is the vector's).
TEST_F(KnownAnswer, ReencodeReproducesTheFrame)
{
    for (const auto& v : vectors_) {
        SCOPED_TRACE(v.name);
        const Bytes& f = v.frame;
        wire::Parsed p;
        ASSERT_EQ(wire::decode(f.data(), f.size(), &p), Verdict::Ok);
        ASSERT_EQ(p.payload, f.data() + wire::header_bytes(p.h.opcode));
        EXPECT_EQ(udp_checksum(f), uint16_t(f[kUdp + 6] << 8 | f[kUdp + 7])) << "vector's UDP checksum is genuine";

        Bytes out(f.size() + 8);
        size_t n = wire::encode(p.h, p.payload, p.payload_len, out.data(), out.size());
        ASSERT_EQ(n, f.size());
        out.resize(n);
        EXPECT_EQ(out[kUdp + 6], 0);
        EXPECT_EQ(out[kUdp + 7], 0);
        Bytes want = f;
        want[kUdp + 6] = want[kUdp + 7] = 0;
        EXPECT_EQ(out, want);

        // The header-only form is the same bytes, without payload and ICRC.
        Bytes hdr(128);
        size_t hn = wire::encode_headers(p.h, p.payload_len, hdr.data(), hdr.size());
        ASSERT_EQ(hn, wire::header_bytes(p.h.opcode));
        EXPECT_TRUE(std::equal(hdr.begin(), hdr.begin() + hn, out.begin()));
    }
}

TEST(Wire, HeaderBytesPerOpcode)
{
    EXPECT_EQ(wire::header_bytes(wire::kOpUcWriteOnlyImm), 74u);
    EXPECT_EQ(wire::header_bytes(wire::kOpUdSendOnly), 14u + 20 + 8 + 12 + 8);
    EXPECT_EQ(wire::header_bytes(wire::kOpUdSendOnlyImm), 14u + 20 + 8 + 12 + 8 + 4);
    // the verbs QPs' UC opcodes: BTH (+RETH on WRITE FIRST/ONLY) (+ImmDt on *_IMM)
    const size_t bth = 14 + 20 + 8 + 12;
    for (uint8_t op : {0x20, 0x21, 0x22, 0x24, 0x27, 0x28}) EXPECT_EQ(wire::header_bytes(op), bth) << int(op);
    for (uint8_t op : {0x23, 0x25, 0x29}) EXPECT_EQ(wire::header_bytes(op), bth + 4) << int(op);
    for (uint8_t op : {0x26, 0x2A}) EXPECT_EQ(wire::header_bytes(op), bth + 16) << int(op);
    EXPECT_EQ(wire::header_bytes(0x2C), 0u);  // reserved in UC
    // RC: the same SEND/WRITE layout at 0x00-0x0B, READ request with RETH, READ responses and
    // ACK with AETH (none on READ response MIDDLE); atomics: AtomicETH (28) on COMPARE SWAP and
    // FETCH ADD, AETH + AtomicAckETH (8) on ATOMIC ACK
    for (uint8_t op : {0x00, 0x01, 0x02, 0x04, 0x07, 0x08, 0x0E}) EXPECT_EQ(wire::header_bytes(op), bth) << int(op);
    for (uint8_t op : {0x03, 0x05, 0x09}) EXPECT_EQ(wire::header_bytes(op), bth + 4) << int(op);
    for (uint8_t op : {0x06, 0x0A, 0x0C}) EXPECT_EQ(wire::header_bytes(op), bth + 16) << int(op);
    EXPECT_EQ(wire::header_bytes(0x0B), bth + 20);
    for (uint8_t op : {0x0D, 0x0F, 0x10, 0x11}) EXPECT_EQ(wire::header_bytes(op), bth + 4) << int(op);
    EXPECT_EQ(wire::header_bytes(0x12), bth + 4 + 8);
    for (uint8_t op : {0x13, 0x14}) EXPECT_EQ(wire::header_bytes(op), bth + 28) << int(op);
    for (uint8_t op : {0x15, 0x16, 0x1F}) EXPECT_EQ(wire::header_bytes(op), 0u) << int(op);
    EXPECT_EQ(wire::frame_bytes(0x24, 5, true), bth + 8 + 4);
    EXPECT_EQ(wire::frame_bytes(0x24, 5, false), bth + 5 + 4);
    static_assert(wire::frame_bytes_write_imm(4096) == 4174);
}

TEST(Wire, RoundTripWriteImm)
{
    for (size_t n : {0u, 1u, 64u, 256u, 1024u, 4096u}) {
        SCOPED_TRACE(n);
        wire::Headers h = sample_headers();
        const Bytes pl = pattern(n, uint32_t(n));
        const Bytes f = encode_frame(h, pl);
        ASSERT_EQ(f.size(), wire::frame_bytes_write_imm(n));
        wire::Parsed p;
        ASSERT_EQ(decode_exact(f.data(), f.size(), &p), Verdict::Ok);
        h.dma_len = uint32_t(n);
        expect_same_headers(p.h, h);
        ASSERT_EQ(p.payload_len, n);
        EXPECT_TRUE(std::equal(pl.begin(), pl.end(), f.begin() + 74));
    }
}

TEST(Wire, RoundTripUd)
{
    for (uint8_t op : {wire::kOpUdSendOnly, wire::kOpUdSendOnlyImm}) {
        for (size_t n : {0u, 1u, 64u, 4096u}) {
            SCOPED_TRACE(::testing::Message() << "opcode " << int(op) << " payload " << n);
            const wire::Headers h = sample_headers(op);
            const Bytes pl = pattern(n, uint32_t(n) + op);
            const Bytes f = encode_frame(h, pl);
            ASSERT_EQ(f.size(), wire::header_bytes(op) + n + 4);
            wire::Parsed p;
            std::unique_ptr<uint8_t[]> exact(new uint8_t[f.size()]);
            std::memcpy(exact.get(), f.data(), f.size());
            ASSERT_EQ(wire::decode(exact.get(), f.size(), &p), Verdict::Ok);
            expect_same_headers(p.h, h);
            EXPECT_EQ(p.payload, exact.get() + wire::header_bytes(op));
            ASSERT_EQ(p.payload_len, n);
            EXPECT_TRUE(std::equal(pl.begin(), pl.end(), p.payload));
        }
    }
}

TEST(Wire, TwentyFourBitFieldsAreMasked)
{
    wire::Headers h = sample_headers();
    h.dest_qp = 0xFF000007;
    h.psn = 0x01FFFFFF;
    const Bytes f = encode_frame(h, pattern(8, 1));
    wire::Parsed p;
    ASSERT_EQ(wire::decode(f.data(), f.size(), &p), Verdict::Ok);
    EXPECT_EQ(p.h.dest_qp, 7u);
    EXPECT_EQ(p.h.psn, 0xFFFFFFu);
    EXPECT_EQ(f[kBth + 4], 0) << "resv8a stays zero";
}

TEST(Wire, EncodeRefusesSmallBufferAndUnknownOpcode)
{
    wire::Headers h = sample_headers();
    const Bytes pl = pattern(100, 2);
    h.dma_len = 100;
    Bytes out(wire::frame_bytes_write_imm(100));
    EXPECT_EQ(wire::encode(h, pl.data(), 100, out.data(), out.size() - 1), 0u);
    EXPECT_EQ(wire::encode(h, pl.data(), 100, out.data(), out.size()), out.size());
    EXPECT_EQ(wire::encode_headers(h, 100, out.data(), 73), 0u);
    EXPECT_EQ(wire::encode_headers(h, 100, out.data(), 74), 74u);
    EXPECT_EQ(wire::encode(h, pl.data(), 70000, out.data(), 1 << 20), 0u) << "IP total length overflows";
    h.opcode = 0x15;  // reserved in RC
    EXPECT_EQ(wire::encode(h, pl.data(), 100, out.data(), out.size()), 0u);
    EXPECT_EQ(wire::encode_headers(h, 100, out.data(), out.size()), 0u);
}

// A verbs frame with a payload that is not a multiple of 4: PadCnt zero bytes before the ICRC,
// and decode gives back the exact payload; every UC opcode round-trips its extension headers.
TEST(Wire, PaddedVerbsFramesRoundTrip)
{
    for (uint8_t op = wire::kOpUcSendFirst; op <= wire::kOpUcWriteOnlyImm; op++) {
        SCOPED_TRACE(int(op));
        wire::Headers h = sample_headers();
        h.opcode = op;
        h.pad = true;
        h.dma_len = op == wire::kOpUcWriteFirst ? 12345u : 7u;
        const Bytes pl = pattern(7, op);
        Bytes out(wire::frame_bytes(op, 7, true));
        ASSERT_EQ(wire::encode(h, pl.data(), 7, out.data(), out.size()), out.size());
        EXPECT_EQ((out[kBth + 1] >> 4) & 3, 1) << "PadCnt";
        EXPECT_EQ(out[out.size() - 5], 0) << "pad byte";
        wire::Parsed p;
        ASSERT_EQ(wire::decode(out.data(), out.size(), &p), Verdict::Ok);
        ASSERT_EQ(p.payload_len, 7u);
        EXPECT_TRUE(std::equal(pl.begin(), pl.end(), p.payload));
        EXPECT_EQ(p.h.opcode, op);
        EXPECT_EQ(p.h.psn, h.psn);
        EXPECT_EQ(p.h.imm, wire::has_imm(op) ? h.imm : 0u);
        EXPECT_EQ(p.h.rkey, wire::has_reth(op) ? h.rkey : 0u);
        EXPECT_EQ(p.h.dma_len, wire::has_reth(op) ? h.dma_len : 0u);
        EXPECT_EQ(p.h.va, wire::has_reth(op) ? h.va : 0u);
    }
}

TEST(Wire, EncodeKeepsAWrongDmaLen)
{
    wire::Headers h = sample_headers();
    h.dma_len = 65;
    const Bytes f = encode_frame(h, pattern(64, 3), /*set_dma_len=*/false);
    EXPECT_EQ(f[kExt + 15], 65);
    EXPECT_TRUE(wire::icrc_ok(f.data(), f.size()));
    EXPECT_EQ(decode_exact(f), Verdict::BadLength);
    EXPECT_EQ(decode_exact(f, /*verify=*/false), Verdict::BadLength);
}

// Every prefix of a valid frame is rejected, with the verdict its length calls for.
TEST(Hostile, EveryTruncationIsRejected)
{
    for (uint8_t op : {wire::kOpUcWriteOnlyImm, wire::kOpUdSendOnly, wire::kOpUdSendOnlyImm}) {
        const Bytes f = encode_frame(sample_headers(op), pattern(256, 4));
        const size_t need = wire::header_bytes(op) + 4;
        for (size_t n = 0; n < f.size(); ++n) {
            SCOPED_TRACE(::testing::Message() << "opcode " << int(op) << " length " << n);
            Verdict v = decode_exact(f.data(), n);
            EXPECT_EQ(v, n < need ? Verdict::Truncated : Verdict::BadLength);
        }
    }
}

TEST(Hostile, DecodeToleratesNullOut)
{
    const Bytes f = encode_frame(sample_headers(), pattern(32, 5));
    EXPECT_EQ(wire::decode(f.data(), f.size(), nullptr), Verdict::Ok);
    EXPECT_EQ(wire::decode(nullptr, 0, nullptr), Verdict::Truncated);
}

// One flipped bit anywhere past the Ethernet header is caught — by the IP header checksum, a
// length or opcode check, or the ICRC — except in the three bytes RoCEv2 deliberately leaves
// unprotected because routers may rewrite them: the UDP checksum (which we ignore, as RoCE NICs
// do) and BTH resv8a (FECN/BECN). Flipping those must not disturb decoding.
TEST(Hostile, EveryFlippedBitAfterEthernetIsCaught)
{
    const std::vector<Bytes> frames = {
        encode_frame(sample_headers(), pattern(64, 6)),
        encode_frame(sample_headers(wire::kOpUdSendOnly), pattern(16, 7)),
        encode_frame(sample_headers(wire::kOpUdSendOnlyImm), pattern(24, 8)),
    };
    for (const Bytes& f : frames) {
        for (size_t byte = kIp; byte < f.size(); ++byte) {
            for (int bit = 0; bit < 8; ++bit) {
                SCOPED_TRACE(::testing::Message() << "opcode " << int(f[kBth]) << " byte " << byte << " bit " << bit);
                Bytes g = f;
                g[byte] ^= uint8_t(1u << bit);
                const bool unprotected = byte == kUdp + 6 || byte == kUdp + 7 || byte == kBth + 4;
                Verdict v = decode_exact(g);
                if (unprotected) EXPECT_EQ(v, Verdict::Ok);
                else EXPECT_NE(v, Verdict::Ok);
            }
        }
    }
}

TEST(Hostile, IcrcMismatchAndItsSwitch)
{
    Bytes f = encode_frame(sample_headers(), pattern(128, 9));
    f[100] ^= 0x10;  // payload corruption: every header still consistent
    EXPECT_EQ(decode_exact(f), Verdict::BadIcrc);
    EXPECT_EQ(decode_exact(f, /*verify=*/false), Verdict::Ok);
    Bytes g = encode_frame(sample_headers(), pattern(128, 9));
    g.back() ^= 0x80;
    EXPECT_EQ(decode_exact(g), Verdict::BadIcrc);
    EXPECT_FALSE(wire::icrc_ok(g.data(), g.size()));
    EXPECT_FALSE(wire::icrc_ok(g.data(), 10));
}

TEST(Hostile, EachCheckGivesItsVerdict)
{
    const Bytes good = encode_frame(sample_headers(), pattern(64, 10));
    ASSERT_EQ(decode_exact(good), Verdict::Ok);
    auto mutate = [&](auto&& fn) {
        Bytes f = good;
        fn(f);
        return decode_exact(f);
    };
    EXPECT_EQ(mutate([](Bytes& f) { f[12] = 0x86; f[13] = 0xDD; }), Verdict::NotIpv4);             // IPv6 ethertype
    EXPECT_EQ(mutate([](Bytes& f) { f[12] = 0x81; f[13] = 0x00; }), Verdict::NotIpv4);             // VLAN tag
    EXPECT_EQ(mutate([](Bytes& f) { f[kIp] = 0x65; fix_ip_checksum(f); }), Verdict::NotIpv4);      // version 6
    EXPECT_EQ(mutate([](Bytes& f) { f[kIp] = 0x46; fix_ip_checksum(f); }), Verdict::NotIpv4);      // IHL 6
    EXPECT_EQ(mutate([](Bytes& f) { f[kIp] = 0x44; fix_ip_checksum(f); }), Verdict::NotIpv4);      // IHL 4
    EXPECT_EQ(mutate([](Bytes& f) { f[kIp + 9] = 6; fix_ip_checksum(f); }), Verdict::NotRoce);     // TCP
    EXPECT_EQ(mutate([](Bytes& f) { f[kUdp + 3] = 0xB8; fix_icrc(f); }), Verdict::NotRoce);        // port 4792
    EXPECT_EQ(mutate([](Bytes& f) { f[kUdp + 2] = 0; f[kUdp + 3] = 53; fix_icrc(f); }), Verdict::NotRoce);
    EXPECT_EQ(mutate([](Bytes& f) { f[kIp + 11] ^= 1; }), Verdict::BadIpHeader);                   // checksum
    EXPECT_EQ(mutate([](Bytes& f) { f[kIp + 8] = 1; }), Verdict::BadIpHeader);                     // TTL, stale checksum
    EXPECT_EQ(mutate([](Bytes& f) { f[kIp + 6] |= 0x20; fix_ip_checksum(f); }), Verdict::BadIpHeader);  // MF
    EXPECT_EQ(mutate([](Bytes& f) { f[kIp + 7] = 1; fix_ip_checksum(f); }), Verdict::BadIpHeader);      // offset
    EXPECT_EQ(mutate([](Bytes& f) { f[kIp + 3] += 1; fix_ip_checksum(f); }), Verdict::BadLength);       // IP length
    EXPECT_EQ(mutate([](Bytes& f) { f[kUdp + 5] -= 1; fix_icrc(f); }), Verdict::BadLength);             // UDP length
    EXPECT_EQ(mutate([](Bytes& f) { f[kBth] = 0x2C; fix_icrc(f); }), Verdict::BadOpcode);  // reserved UC opcode
    EXPECT_EQ(mutate([](Bytes& f) { f[kBth] = 0x15; fix_icrc(f); }), Verdict::BadOpcode);  // reserved RC opcode
    EXPECT_EQ(mutate([](Bytes& f) { f[kBth] = 0x14; fix_icrc(f); }), Verdict::BadLength);  // FETCH ADD with payload
    EXPECT_EQ(mutate([](Bytes& f) { f[kBth] = 0x0B; f[kExt + 15] ^= 4; fix_icrc(f); }), Verdict::BadLength);  // RC lie
    EXPECT_EQ(mutate([](Bytes& f) { f[kBth] = 0x0C; fix_icrc(f); }), Verdict::BadLength);  // READ request with payload
    EXPECT_EQ(mutate([](Bytes& f) { f[kBth] = 0x11; fix_icrc(f); }), Verdict::BadLength);  // ACK with payload
    EXPECT_EQ(mutate([](Bytes& f) { f[kExt + 15] ^= 4; fix_icrc(f); }), Verdict::BadLength);  // dma_len lie
    EXPECT_EQ(mutate([](Bytes& f) { f[kExt + 15] ^= 4; }), Verdict::BadIcrc);                 // dma_len corrupted
    EXPECT_EQ(mutate([](Bytes& f) { f.push_back(0); }), Verdict::BadLength);                  // trailing byte
    EXPECT_EQ(mutate([](Bytes& f) { f.insert(f.begin() + 74, 0); }), Verdict::BadLength);     // extra payload byte
}

// A peer may pad its payload to 4 bytes (BTH PadCnt); the pad is not payload.
TEST(Hostile, PadCountIsHonouredAndBounded)
{
    wire::Headers h = sample_headers();
    h.dma_len = 61;
    Bytes f = encode_frame(h, pattern(64, 11), /*set_dma_len=*/false);
    f[kBth + 1] |= 3 << 4;
    fix_icrc(f);
    wire::Parsed p;
    ASSERT_EQ(decode_exact(f.data(), f.size(), &p), Verdict::Ok);
    EXPECT_EQ(p.payload_len, 61u);

    Bytes ud = encode_frame(sample_headers(wire::kOpUdSendOnly), Bytes{0xAB});
    ud[kBth + 1] |= 2 << 4;  // claims 2 pad bytes of a 1-byte body
    fix_icrc(ud);
    EXPECT_EQ(decode_exact(ud), Verdict::BadLength);
}

// Random garbage after a valid Ethernet/IPv4/UDP 4791 prefix never crashes or over-reads.
TEST(Hostile, RandomFramesNeverCrash)
{
    std::mt19937 rng(12345);
    const Bytes good = encode_frame(sample_headers(), pattern(64, 12));
    int ok = 0;
    for (int i = 0; i < 20000; ++i) {
        Bytes f(rng() % 200);
        for (auto& b : f) b = uint8_t(rng());
        const size_t keep = std::min(f.size(), size_t(rng() % 60));
        std::copy(good.begin(), good.begin() + keep, f.begin());
        ok += decode_exact(f) == Verdict::Ok;
    }
    EXPECT_EQ(ok, 0);
}

// RC frames: READ request (RETH, no payload), READ response FIRST (AETH, payload) and ACK (AETH)
// round-trip their headers; MIDDLE carries no AETH.
TEST(Wire, RcReadAndAckRoundTrip)
{
    const Bytes pl = pattern(256, 9);
    struct Case {
        uint8_t op;
        uint32_t len;
    };
    for (Case c : {Case{0x0C, 0}, Case{0x0D, 256}, Case{0x0E, 256}, Case{0x0F, 10}, Case{0x10, 3}, Case{0x11, 0}}) {
        SCOPED_TRACE(int(c.op));
        wire::Headers h = sample_headers();
        h.opcode = c.op;
        h.pad = true;
        h.ack_req = c.op == 0x0C;
        h.aeth = 0x1F000123;
        h.va = 0x1122334455667788ull;
        h.rkey = 0xABCDEF01;
        h.dma_len = 5000;
        Bytes f(wire::frame_bytes(c.op, c.len, true));
        ASSERT_EQ(wire::encode(h, pl.data(), c.len, f.data(), f.size()), f.size());
        wire::Parsed p;
        ASSERT_EQ(wire::decode(f.data(), f.size(), &p), Verdict::Ok);
        EXPECT_EQ(p.h.opcode, c.op);
        EXPECT_EQ(p.h.ack_req, c.op == 0x0C);
        EXPECT_EQ(p.payload_len, c.len);
        EXPECT_TRUE(std::equal(pl.begin(), pl.begin() + c.len, p.payload));
        if (wire::has_reth(c.op)) {
            EXPECT_EQ(p.h.va, h.va);
            EXPECT_EQ(p.h.rkey, h.rkey);
            EXPECT_EQ(p.h.dma_len, 5000u);
        }
        EXPECT_EQ(wire::has_aeth(c.op), c.op != 0x0C && c.op != 0x0E);
        if (wire::has_aeth(c.op)) {
            EXPECT_EQ(p.h.aeth, 0x1F000123u);
        }
        EXPECT_TRUE(wire::icrc_ok(f.data(), f.size()));
    }
}

// RC atomics (IBTA 9.4.5): COMPARE SWAP and FETCH ADD carry the AtomicETH (VA, R_Key, Swap or
// Add data, Compare data, big-endian), ATOMIC ACKNOWLEDGE the AETH and the AtomicAckETH; none
// carries a payload. The bytes sit where the IBTA puts them, and decode gives back every field.
TEST(Wire, RcAtomicsRoundTrip)
{
    for (uint8_t op : {uint8_t(0x12), uint8_t(0x13), uint8_t(0x14)}) {
        SCOPED_TRACE(int(op));
        wire::Headers h = sample_headers();
        h.opcode = op;
        h.pad = true;
        h.ack_req = op != 0x12;
        h.aeth = 0x1F000123;
        h.va = 0x1122334455667788ull;
        h.rkey = 0xABCDEF01;
        h.swap_add = 0x0102030405060708ull;
        h.compare = 0xF0E0D0C0B0A09080ull;
        h.atomic_orig = 0x8877665544332211ull;
        Bytes f(wire::frame_bytes(op, 0, true));
        ASSERT_EQ(wire::encode(h, nullptr, 0, f.data(), f.size()), f.size());
        const size_t ext = 14 + 20 + 8 + 12;
        wire::Parsed p;
        ASSERT_EQ(wire::decode(f.data(), f.size(), &p), Verdict::Ok);
        EXPECT_EQ(p.payload_len, 0u);
        if (op == 0x12) {
            EXPECT_EQ(f.size(), ext + 4 + 8 + 4);
            EXPECT_EQ(p.h.aeth, 0x1F000123u);
            EXPECT_EQ(p.h.atomic_orig, h.atomic_orig);
            EXPECT_EQ(f[ext + 4], 0x88);  // the original value, most significant byte first
            EXPECT_EQ(p.h.va, 0u);
        } else {
            EXPECT_EQ(f.size(), ext + 28 + 4);
            EXPECT_EQ(p.h.va, h.va);
            EXPECT_EQ(p.h.rkey, h.rkey);
            EXPECT_EQ(p.h.swap_add, h.swap_add);
            EXPECT_EQ(p.h.compare, h.compare);
            EXPECT_EQ(p.h.atomic_orig, 0u);
            EXPECT_EQ(f[ext], 0x11);       // VA
            EXPECT_EQ(f[ext + 8], 0xAB);   // R_Key
            EXPECT_EQ(f[ext + 12], 0x01);  // Swap / Add data
            EXPECT_EQ(f[ext + 20], 0xF0);  // Compare data
        }
        EXPECT_TRUE(wire::icrc_ok(f.data(), f.size()));
    }
}

// ECN travels in the TOS byte's low 2 bits, both ways.
TEST(Ecn, EncodeAndDecodeCarryIt)
{
    for (uint8_t e : {wire::kEcnNotEct, wire::kEcnEct1, wire::kEcnEct0, wire::kEcnCe}) {
        wire::Headers h = sample_headers();
        h.set_ecn(e);
        EXPECT_EQ(h.ip_tos, (0x68 & ~3) | e) << "the DSCP bits stay";
        Bytes f = encode_frame(h, pattern(100, e));
        EXPECT_EQ(f[15] & 3, e);
        wire::Parsed p;
        ASSERT_EQ(decode_exact(f.data(), f.size(), &p), Verdict::Ok);
        EXPECT_EQ(p.h.ecn(), e);
    }
}

// A switch's mark: ECT becomes CE, the IPv4 checksum is fixed, the ICRC (which masks TOS and
// the checksum) stays valid; Not-ECT is left alone.
TEST(Ecn, MarkCeFixesTheIpChecksumAndKeepsTheIcrc)
{
    for (uint8_t e : {wire::kEcnEct0, wire::kEcnEct1, wire::kEcnCe}) {
        wire::Headers h = sample_headers(wire::kOpUdSendOnly);
        h.set_ecn(e);
        const Bytes before = encode_frame(h, pattern(64, 3));
        Bytes f = before;
        EXPECT_TRUE(wire::mark_ce(f.data(), f.size()));
        wire::Parsed p;
        ASSERT_EQ(decode_exact(f.data(), f.size(), &p), Verdict::Ok) << "IPv4 checksum and ICRC both hold";
        EXPECT_EQ(p.h.ecn(), wire::kEcnCe);
        EXPECT_EQ(p.h.ip_tos >> 2, 0x68 >> 2);
        for (size_t i = 0; i < f.size(); i++) {
            if (i == 15 || i == 24 || i == 25) continue;  // TOS and the IPv4 checksum
            EXPECT_EQ(f[i], before[i]) << "byte " << i;
        }
    }
    Bytes plain = encode_frame(sample_headers(), pattern(64, 4));
    plain[15] &= ~3;  // Not-ECT (sample TOS 0x68 is already)
    const Bytes kept = plain;
    EXPECT_FALSE(wire::mark_ce(plain.data(), plain.size()));
    EXPECT_EQ(plain, kept);
    EXPECT_FALSE(wire::mark_ce(plain.data(), 33)) << "too short for an IPv4 header";
    Bytes arp = kept;
    arp[12] = 0x08, arp[13] = 0x06;
    arp[15] |= 2;
    EXPECT_FALSE(wire::mark_ce(arp.data(), arp.size())) << "not IPv4";
}

// On the independent known-answer frames: set ECT(0) (fixing only the IPv4 checksum), then mark
// CE: their ICRC, computed elsewhere, still verifies each time.
TEST_F(KnownAnswer, MarkingCeKeepsTheIndependentIcrc)
{
    auto fix_ip_checksum = [](Bytes& f) {
        f[24] = f[25] = 0;
        uint32_t sum = 0;
        for (size_t i = 14; i < 34; i += 2) sum += uint32_t(f[i]) << 8 | f[i + 1];
        while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
        f[24] = uint8_t(~sum >> 8), f[25] = uint8_t(~sum);
    };
    for (const auto& v : vectors_) {
        SCOPED_TRACE(v.name);
        Bytes f = v.frame;
        f[15] = uint8_t((f[15] & ~3) | wire::kEcnEct0);
        fix_ip_checksum(f);
        ASSERT_EQ(decode_exact(f.data(), f.size(), nullptr), Verdict::Ok);
        ASSERT_TRUE(wire::mark_ce(f.data(), f.size()));
        wire::Parsed p;
        ASSERT_EQ(decode_exact(f.data(), f.size(), &p), Verdict::Ok);
        EXPECT_EQ(p.h.ecn(), wire::kEcnCe);
        EXPECT_TRUE(std::equal(f.end() - 4, f.end(), v.frame.end() - 4)) << "the ICRC bytes are the vector's";
    }
}
