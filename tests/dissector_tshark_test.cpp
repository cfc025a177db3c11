// The SDR Wireshark dissector (tools/wireshark/sdr.lua) on captures the current code makes:
// sdr_demo moves one 4 MiB message with sr, sr-nack and ec-mds:8,2 over a lossy 1 ms path and
// writes its pcap and the link's drop log; tshark with the script must name every data packet's
// message, offset, fragment and chunk as fw_imm_decode does, every control datagram's fields as
// rel::decode does, and flag as retransmissions exactly the captured packets that were not the
// first transmission of their (message, offset) — what the link dropped included — in numbers
// that add up to the reliability layer's own retransmission counts. Hand-made captures check
// hostile control datagrams (expert errors, never Lua errors) and message-id wrap.
#include "child_util.hpp"
#include "tshark_util.hpp"

#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <sdr/emu/pcap_writer.hpp>
#include <sdr/emu/wire.hpp>
#include <sdr/firmware/imm.h>
#include <sdr/reliability/ctrl_msg.hpp>
#include <sdr/reliability/scheme.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

using namespace sdr;
using namespace sdr::test;

namespace {

const std::string kScript = std::string(SDR_SOURCE_DIR) + "/tools/wireshark/sdr.lua";
constexpr uint32_t kPacketsPerChunk = 16;  // 64 KiB chunks of 4 KiB packets (the demo's default)
constexpr uint32_t kPackets = 1024;        // 4 MiB
constexpr uint32_t kEcK = 8, kEcM = 2;

std::vector<std::string> lua(std::vector<std::string> more = {})
{
    std::vector<std::string> o{"-X", "lua_script:" + kScript, "-E", "occurrence=a"};
    o.insert(o.end(), more.begin(), more.end());
    return o;
}

// Field columns of the main tshark run.
enum Col {
    kFrame, kTime, kOpcode, kImm, kRkey, kMsg, kOff, kFrag, kFragIdx, kChunk, kRetrans, kRetransOf, kMsgFirst,
    kType, kVersion, kFlags, kScheme, kK, kM, kSeq, kLength, kBase, kNbits, kNewest, kAckDelay, kFrom, kTo,
    kAcked, kHoles, kNackChunk, kReserved, kCols
};
const std::vector<std::string> kFields = {
    "frame.number", "frame.time_epoch", "infiniband.bth.opcode", "infiniband.immdt", "infiniband.reth.r_key",
    "sdr.msg_id", "sdr.pkt_offset", "sdr.imm_frag", "sdr.imm_frag_index", "sdr.chunk", "sdr.retransmission",
    "sdr.retransmission.of_frame", "sdr.msg_first_frame", "sdr.ctrl.type", "sdr.ctrl.version", "sdr.ctrl.flags",
    "sdr.ctrl.scheme", "sdr.ctrl.k", "sdr.ctrl.m", "sdr.ctrl.seq", "sdr.ctrl.length", "sdr.ctrl.base",
    "sdr.ctrl.nbits", "sdr.ctrl.newest", "sdr.ctrl.ack_delay_us", "sdr.ctrl.from", "sdr.ctrl.to", "sdr.ctrl.acked",
    "sdr.ctrl.holes", "sdr.ctrl.nack_chunk", "sdr.ctrl.reserved"};

uint64_t num(const std::string& s)
{
    auto v = parse_tshark_uint(s);
    EXPECT_TRUE(v) << "not a number: '" << s << "'";
    return v.value_or(~0ull);
}

// "0.001000324" (seconds) -> ns.
uint64_t epoch_ns(const std::string& s)
{
    size_t dot = s.find('.');
    std::string frac = dot == std::string::npos ? "" : s.substr(dot + 1);
    frac.resize(9, '0');
    return std::stoull(s.substr(0, dot)) * 1'000'000'000ull + std::stoull(frac);
}

std::string first_of(const std::string& s) { return s.substr(0, s.find(',')); }

std::vector<uint64_t> list_of(const std::string& s)
{
    std::vector<uint64_t> out;
    std::stringstream in(s);
    for (std::string item; std::getline(in, item, ',');) out.push_back(num(item));
    return out;
}

// "0-11,13" as the dissector writes chunk lists.
std::string ranges(const std::vector<uint32_t>& v)
{
    std::string out;
    for (size_t i = 0; i < v.size();) {
        size_t j = i;
        while (j + 1 < v.size() && v[j + 1] == v[j] + 1) j++;
        if (!out.empty()) out += ",";
        out += j == i ? std::to_string(v[i]) : std::to_string(v[i]) + "-" + std::to_string(v[j]);
        i = j + 1;
    }
    return out;
}

bool bit(const std::vector<uint8_t>& bits, uint32_t i) { return bits[i / 8] >> (i % 8) & 1; }

struct SchemeStats {
    uint32_t retransmitted = 0, decoded = 0, fallbacks = 0;
};

struct Drop {
    uint64_t arrival_ns;
    uint32_t rkey, imm;
};

// Frames tshark counted as anything SDR's dissector reports an error about, plus Lua errors.
std::string errors_in(const std::string& pcap, std::vector<std::string> more = {})
{
    std::string cmd = "tshark -n -r " + shell_quote(pcap) + " -V";
    for (const auto& o : lua(std::move(more))) cmd += " " + shell_quote(o);
    Child c(cmd);
    int status;
    std::string out = c.finish(&status);
    std::string found;
    if (status != 0) found += "tshark exit " + std::to_string(status) + "\n";
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
        if (line.find("Lua Error") != std::string::npos || line.find("Lua: Error") != std::string::npos)
            found += line + "\n";
    return found;
}

// The frame numbers a display filter selects.
std::set<uint64_t> frames_matching(const std::string& pcap, const std::string& filter)
{
    std::string err;
    auto rows = tshark_fields(pcap, {"frame.number"}, &err, lua({"-Y", filter}));
    EXPECT_TRUE(rows) << err;
    std::set<uint64_t> out;
    if (rows)
        for (const auto& r : *rows) out.insert(num(r[0]));
    return out;
}

class Dissector : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        if (!tshark_available()) return;
        dir_ = "/tmp/sdr_dissector_" + std::to_string(getpid());
        Child mk("mkdir -p " + shell_quote(dir_));
        mk.finish();
        pcap_ = dir_ + "/demo.pcap";
        const std::string drops = dir_ + "/drops.tsv";
        Child demo(std::string(SDR_DEMO) + " --size 4M --rtt-ms 1 --loss 0.002 --seed 3 --scheme sr --scheme sr-nack" +
                   " --scheme ec-mds:8,2 --pcap " + shell_quote(pcap_) + " --drop-log " + shell_quote(drops));
        int status;
        demo_out_ = demo.finish(&status);
        if (status != 0) return;
        std::istringstream out(demo_out_);
        for (std::string line; std::getline(out, line);) {
            char name[32];
            double t, ideal, ratio;
            SchemeStats s;
            if (std::sscanf(line.c_str(), "%31s %lf ms %lf ms %lfx %u chunks %u %u", name, &t, &ideal, &ratio,
                            &s.retransmitted, &s.decoded, &s.fallbacks) == 7)
                stats_[name] = s;
        }
        std::ifstream in(drops);
        std::string header;
        std::getline(in, header);
        for (std::string line; std::getline(in, line);) {
            unsigned long long t;
            unsigned src, dst, op, qp, rkey, imm;
            if (std::sscanf(line.c_str(), "%llu %u %u %x %x %x %x", &t, &src, &dst, &op, &qp, &rkey, &imm) == 7 &&
                op == emu::wire::kOpUcWriteOnlyImm)
                drops_.push_back({t, rkey, imm});
        }
        std::string err;
        auto rows = tshark_fields(pcap_, kFields, &err, lua());
        if (rows) rows_ = std::move(*rows);
        ok_ = rows.has_value() && stats_.size() == 3;
    }
    static void TearDownTestSuite()
    {
        if (!dir_.empty()) {
            Child rm("rm -rf " + shell_quote(dir_));
            rm.finish();
        }
    }
    void SetUp() override
    {
        if (!tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to run the dissector tests";
        ASSERT_TRUE(ok_) << "sdr_demo or tshark failed:\n" << demo_out_;
    }
    // The scheme that sent SDR message `msg`: one per reliable message, EC adds its parity.
    static std::string scheme_of(uint32_t msg) { return msg == 0 ? "sr" : msg == 1 ? "sr-nack" : "ec-mds:8,2"; }

    static std::string dir_, pcap_, demo_out_;
    static std::map<std::string, SchemeStats> stats_;
    static std::vector<Drop> drops_;
    static std::vector<std::vector<std::string>> rows_;
    static bool ok_;
};
std::string Dissector::dir_, Dissector::pcap_, Dissector::demo_out_;
std::map<std::string, SchemeStats> Dissector::stats_;
std::vector<Drop> Dissector::drops_;
std::vector<std::vector<std::string>> Dissector::rows_;
bool Dissector::ok_ = false;

TEST_F(Dissector, DataPacketsCarryMessageOffsetFragmentAndChunk)
{
    const fw_imm_layout l = FW_IMM_DEFAULT_LAYOUT;
    std::map<uint64_t, std::set<uint64_t>> offsets;  // per message id
    size_t data = 0;
    for (const auto& r : rows_) {
        ASSERT_EQ(r.size(), size_t{kCols});
        if (r[kOpcode] != "43") continue;
        data++;
        auto imm = parse_tshark_bytes_be(first_of(r[kImm]));
        ASSERT_TRUE(imm) << "frame " << r[kFrame];
        fw_imm d = fw_imm_decode(l, static_cast<uint32_t>(*imm));
        ASSERT_EQ(num(r[kMsg]), d.msg_id) << "frame " << r[kFrame];
        ASSERT_EQ(num(r[kOff]), d.packet_offset) << "frame " << r[kFrame];
        ASSERT_EQ(num(r[kFrag]), d.frag) << "frame " << r[kFrame];
        ASSERT_EQ(num(r[kFragIdx]), d.packet_offset % 8) << "frame " << r[kFrame];
        ASSERT_EQ(num(r[kChunk]), d.packet_offset / kPacketsPerChunk) << "frame " << r[kFrame];
        offsets[d.msg_id].insert(d.packet_offset);
    }
    EXPECT_GT(data, 3000u);
    // sr, sr-nack and EC's data are messages 0, 1, 2 with every packet of 4 MiB (every one
    // arrives in the end); EC's parity is message 3, m chunks per submessage of k.
    ASSERT_EQ(offsets.size(), 4u);
    for (uint64_t msg : {0, 1}) {
        EXPECT_EQ(offsets[msg].size(), kPackets) << "message " << msg;
        EXPECT_EQ(*offsets[msg].rbegin(), kPackets - 1) << "message " << msg;
    }
    // EC rebuilt its lost data from parity: the packets missing from the capture are exactly
    // ones the link dropped.
    std::set<uint64_t> ec_data = offsets[2];
    for (const auto& d : drops_) {
        fw_imm x = fw_imm_decode(l, d.imm);
        if (x.msg_id == 2) ec_data.insert(x.packet_offset);
    }
    EXPECT_LT(offsets[2].size(), kPackets);
    EXPECT_EQ(ec_data.size(), kPackets);
    EXPECT_EQ(*ec_data.rbegin(), kPackets - 1);
    const uint32_t parity = kPackets / kPacketsPerChunk / kEcK * kEcM * kPacketsPerChunk;
    EXPECT_EQ(*offsets[3].rbegin(), parity - 1);
    EXPECT_GE(offsets[3].size(), parity - 4);  // a few parity packets may be lost for good
    // The first data frame is message 0, offset 0.
    auto first = std::find_if(rows_.begin(), rows_.end(), [](const auto& r) { return r[kOpcode] == "43"; });
    EXPECT_EQ(num((*first)[kMsg]), 0u);
    EXPECT_EQ(num((*first)[kOff]), 0u);
    EXPECT_EQ((*first)[kMsgFirst], (*first)[kFrame]);
}

TEST_F(Dissector, PreferencesChangeTheSplitAndTheChunk)
{
    const fw_imm_layout l{8, 20, 4};
    std::string err;
    auto rows = tshark_fields(pcap_, {"infiniband.bth.opcode", "infiniband.immdt", "sdr.msg_id", "sdr.pkt_offset",
                                      "sdr.imm_frag", "sdr.chunk"},
                              &err,
                              lua({"-o", "sdr.msg_bits:8", "-o", "sdr.offset_bits:20", "-o", "sdr.chunk_bytes:16384",
                                   "-c", "300"}));
    ASSERT_TRUE(rows) << err;
    size_t data = 0;
    for (const auto& r : *rows) {
        if (r[0] != "43") continue;
        data++;
        fw_imm d = fw_imm_decode(l, static_cast<uint32_t>(*parse_tshark_bytes_be(first_of(r[1]))));
        ASSERT_EQ(num(r[2]), d.msg_id);
        ASSERT_EQ(num(r[3]), d.packet_offset);
        ASSERT_EQ(num(r[4]), d.frag);
        ASSERT_EQ(num(r[5]), d.packet_offset / 4);  // 16 KiB of 4 KiB packets
    }
    EXPECT_GT(data, 200u);
    // An impossible split is an expert error on every data packet, not a Lua error.
    const std::string bad = dir_ + "/first.pcap";
    Child cut("tshark -r " + shell_quote(pcap_) + " -c 20 -w " + shell_quote(bad) + " 2>/dev/null");
    cut.finish();
    EXPECT_EQ(errors_in(bad, {"-o", "sdr.msg_bits:9"}), "");
    std::set<uint64_t> data_frames = frames_matching(bad, "infiniband.bth.opcode == 0x2b");
    auto rows2 = tshark_fields(bad, {"frame.number"}, &err, lua({"-o", "sdr.msg_bits:9", "-Y", "sdr.bad_prefs"}));
    ASSERT_TRUE(rows2) << err;
    EXPECT_EQ(rows2->size(), data_frames.size());
    EXPECT_GT(data_frames.size(), 10u);
}

TEST_F(Dissector, ControlDatagramsShowEveryFieldAsTheCodeEncodesIt)
{
    std::map<uint64_t, const std::vector<std::string>*> by_frame;
    for (const auto& r : rows_) by_frame[num(r[kFrame])] = &r;
    char errbuf[PCAP_ERRBUF_SIZE];
    pcap_t* p = pcap_open_offline(pcap_.c_str(), errbuf);
    ASSERT_NE(p, nullptr) << errbuf;
    pcap_pkthdr* h;
    const u_char* fr;
    std::map<rel::CtrlType, int> types;
    std::set<uint64_t> with_holes;
    for (uint64_t frame = 1; pcap_next_ex(p, &h, &fr) == 1; frame++) {
        if (h->caplen < emu::wire::kUdSendHeaderBytes || fr[emu::wire::kEthBytes + 28] != emu::wire::kOpUdSendOnly)
            continue;
        rel::CtrlMsg m;
        ASSERT_TRUE(rel::decode(fr + emu::wire::kUdSendHeaderBytes, h->caplen - emu::wire::kUdSendHeaderBytes - 4, &m));
        types[m.type]++;
        const auto& r = *by_frame.at(frame);
        SCOPED_TRACE("frame " + std::to_string(frame));
        EXPECT_EQ(num(r[kVersion]), 1u);
        EXPECT_EQ(num(r[kType]), static_cast<uint64_t>(m.type));
        EXPECT_EQ(num(r[kFlags]), m.flags);
        EXPECT_EQ(num(r[kScheme]), static_cast<uint64_t>(m.scheme));
        EXPECT_EQ(num(r[kK]), m.k);
        EXPECT_EQ(num(r[kM]), m.m);
        EXPECT_EQ(num(r[kReserved]), 0u);
        EXPECT_EQ(num(r[kSeq]), m.seq);
        EXPECT_EQ(num(r[kLength]), m.length);
        EXPECT_EQ(num(r[kBase]), m.base);
        EXPECT_EQ(num(r[kNbits]), m.nbits);
        EXPECT_EQ(num(r[kNewest]), m.newest);
        EXPECT_EQ(num(r[kAckDelay]), m.ack_delay_us);
        EXPECT_EQ(num(r[kFrom]), m.from);
        EXPECT_EQ(num(r[kTo]), m.to);
        if (m.type == rel::CtrlType::Ack) {
            std::vector<uint32_t> held, holes;
            for (uint32_t c = 0; c < m.base; c++) held.push_back(c);
            uint32_t last = 0;
            for (uint32_t i = 0; i < m.nbits; i++)
                if (bit(m.bits, i)) held.push_back(last = m.base + i);
            for (uint32_t c = m.base; c < last; c++)
                if (!bit(m.bits, c - m.base)) holes.push_back(c);
            EXPECT_EQ(r[kAcked], held.empty() ? "none" : ranges(held));
            EXPECT_EQ(r[kHoles], ranges(holes));
            if (!holes.empty()) with_holes.insert(frame);
        } else if (m.type == rel::CtrlType::Nack) {
            std::vector<uint64_t> named;
            for (uint32_t i = 0; i < m.nbits; i++)
                if (bit(m.bits, i)) named.push_back(m.base + i);
            EXPECT_EQ(list_of(r[kNackChunk]), named);
        } else {
            EXPECT_EQ(r[kAcked], "");
            EXPECT_EQ(r[kNackChunk], "");
        }
    }
    pcap_close(p);
    EXPECT_GT(types[rel::CtrlType::Cts], 0);
    EXPECT_GT(types[rel::CtrlType::Ack], 0);
    EXPECT_GT(types[rel::CtrlType::Nack], 0);
    EXPECT_FALSE(with_holes.empty());
    // "ACK with holes" on exactly those; no malformed message, no Lua error anywhere.
    EXPECT_EQ(frames_matching(pcap_, "sdr.ack_holes"), with_holes);
    EXPECT_TRUE(frames_matching(pcap_, "sdr.malformed || sdr.bad_prefs").empty());
    EXPECT_EQ(errors_in(pcap_), "");
    std::printf("control datagrams: %d CTS, %d ACK (%zu with holes), %d NACK, %d REQ\n", types[rel::CtrlType::Cts],
                types[rel::CtrlType::Ack], with_holes.size(), types[rel::CtrlType::Nack], types[rel::CtrlType::Req]);
}

TEST_F(Dissector, RetransmissionsAreExactlyThePacketsTheRunRetransmitted)
{
    const fw_imm_layout l = FW_IMM_DEFAULT_LAYOUT;
    // Every transmission of a data packet, captured or dropped by the link, in time order.
    struct Tx {
        uint64_t t;
        uint64_t frame;  // 0: dropped
    };
    using Key = std::tuple<uint32_t, uint32_t, uint32_t>;  // rkey, message, offset
    std::map<Key, std::vector<Tx>> txs;
    std::map<uint64_t, const std::vector<std::string>*> by_frame;
    for (const auto& r : rows_) {
        by_frame[num(r[kFrame])] = &r;
        if (r[kOpcode] != "43") continue;
        fw_imm d = fw_imm_decode(l, static_cast<uint32_t>(*parse_tshark_bytes_be(first_of(r[kImm]))));
        txs[{static_cast<uint32_t>(num(r[kRkey])), d.msg_id, d.packet_offset}].push_back({epoch_ns(r[kTime]), num(r[kFrame])});
    }
    for (const auto& d : drops_) {
        fw_imm x = fw_imm_decode(l, d.imm);
        txs[{d.rkey, x.msg_id, x.packet_offset}].push_back({d.arrival_ns, 0});
    }
    std::set<uint64_t> expected;
    std::map<uint32_t, uint64_t> repeats;  // per message: transmissions after the first
    for (auto& [key, v] : txs) {
        std::stable_sort(v.begin(), v.end(), [](const Tx& a, const Tx& b) { return a.t < b.t; });
        repeats[std::get<1>(key)] += v.size() - 1;
        for (size_t i = 1; i < v.size(); i++)
            if (v[i].frame) expected.insert(v[i].frame);
    }
    // The capture-side count is the sender's: whole chunks repeated (EC's parity is never).
    for (uint32_t msg : {0u, 1u, 2u})
        EXPECT_EQ(repeats[msg], uint64_t{stats_[scheme_of(msg)].retransmitted} * kPacketsPerChunk) << "message " << msg;
    EXPECT_EQ(repeats[3], 0u);
    EXPECT_GT(stats_["sr"].retransmitted, 0u);
    EXPECT_GT(stats_["sr-nack"].retransmitted, 0u);
    EXPECT_GT(stats_["ec-mds:8,2"].decoded, 0u);

    std::set<uint64_t> flagged;
    for (const auto& r : rows_) {
        if (r[kRetrans].empty()) continue;
        uint64_t frame = num(r[kFrame]);
        flagged.insert(frame);
        if (!r[kRetransOf].empty()) {  // the earlier copy it names is the same packet
            const auto& e = *by_frame.at(num(r[kRetransOf]));
            EXPECT_LT(num(r[kRetransOf]), frame);
            EXPECT_EQ(e[kMsg], r[kMsg]);
            EXPECT_EQ(e[kOff], r[kOff]);
            EXPECT_EQ(e[kRkey], r[kRkey]);
        }
    }
    EXPECT_EQ(flagged, expected);
    EXPECT_EQ(frames_matching(pcap_, "sdr.retransmission.expert"), expected);

    // sr-nack (message 1): a NACK names chunks with a packet the link dropped, and the sender
    // repeats each after it.
    size_t nacks = 0;
    for (const auto& r : rows_) {
        if (r[kType] != "3" || num(r[kSeq]) != 0 || r[kScheme] != "2") continue;
        nacks++;
        const uint64_t frame = num(r[kFrame]), t = epoch_ns(r[kTime]);
        for (uint64_t c : list_of(r[kNackChunk])) {
            bool dropped = std::any_of(drops_.begin(), drops_.end(), [&](const Drop& d) {
                fw_imm x = fw_imm_decode(l, d.imm);
                return x.msg_id == 1 && x.packet_offset / kPacketsPerChunk == c && d.arrival_ns < t;
            });
            EXPECT_TRUE(dropped) << "NACK in frame " << frame << " names chunk " << c;
            bool repeated = std::any_of(rows_.begin(), rows_.end(), [&](const auto& x) {
                return num(x[kFrame]) > frame && x[kOpcode] == "43" && x[kMsg] == "1" && !x[kRetrans].empty() &&
                       num(x[kChunk]) == c;
            });
            EXPECT_TRUE(repeated) << "chunk " << c << " of the NACK in frame " << frame << " is repeated";
        }
    }
    EXPECT_GT(nacks, 0u);
    std::printf("retransmitted chunks: sr %u, sr-nack %u, ec %u (decoded %u); flagged %zu captured packets, "
                "%zu data packets dropped\n",
                stats_["sr"].retransmitted, stats_["sr-nack"].retransmitted, stats_["ec-mds:8,2"].retransmitted,
                stats_["ec-mds:8,2"].decoded, flagged.size(), drops_.size());
}

// Hand-made captures: frames as the NIC would send them.
struct Capture {
    explicit Capture(const std::string& path)
    {
        std::string err;
        EXPECT_TRUE(w.open(path, &err)) << err;
    }
    void add(const emu::wire::Headers& h, const std::vector<uint8_t>& payload)
    {
        std::vector<uint8_t> f(payload.size() + 128);
        size_t n = emu::wire::encode(h, payload.data(), static_cast<uint32_t>(payload.size()), f.data(), f.size());
        ASSERT_GT(n, 0u);
        w.write(t += 1'000'000, f.data(), static_cast<uint32_t>(n), static_cast<uint32_t>(n));
    }
    emu::PcapWriter w;
    uint64_t t = 0;
};

emu::wire::Headers ctrl_headers(uint32_t dest_qp)
{
    emu::wire::Headers h;
    h.opcode = emu::wire::kOpUdSendOnly;
    h.src_ip = 0x0A000002;
    h.dst_ip = 0x0A000001;
    h.dest_qp = dest_qp;
    h.qkey = 0x1234;
    h.src_qp = 0x800456;
    return h;
}

TEST(DissectorInput, HostileControlDatagramsAreExpertErrorsNotLuaErrors)
{
    if (!tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to run the dissector tests";
    const std::string path = "/tmp/sdr_dissector_hostile_" + std::to_string(getpid()) + ".pcap";
    rel::CtrlMsg ack;
    ack.type = rel::CtrlType::Ack;
    ack.seq = 7;
    ack.base = 3;
    ack.nbits = 10;
    ack.bits = {0x0A, 0x00};  // chunks 4 and 6 held: 3 and 5 are holes
    const std::vector<uint8_t> good = rel::encode(ack);
    std::vector<std::vector<uint8_t>> bad;
    bad.push_back(std::vector<uint8_t>(good.begin(), good.begin() + 10));  // short
    bad.push_back(good);
    bad.back()[1] = 9;  // unknown type
    bad.push_back(good);
    bad.back()[0] = 2;  // version 2 with an empty parameter area
    bad.push_back(good);
    bad.back()[3] = 0;  // unknown scheme
    bad.push_back(good);
    bad.back()[28] = 0xFF, bad.back()[29] = 0xFF, bad.back()[30] = 0xFF, bad.back()[31] = 0xFF;  // nbits 2^32-1
    bad.push_back(std::vector<uint8_t>(good.begin(), good.end() - 1));  // bitmap cut short
    bad.push_back({});  // empty
    bad.push_back(good);
    bad.back()[0] = 3;  // unknown version
    // Version 2 with more parameter bytes than the area holds (65), and with 4 that the datagram
    // does not carry.
    bad.push_back(good);
    bad.back()[0] = 2, bad.back()[6] = 65;
    bad.back().insert(bad.back().begin() + 48, 65, 0);
    bad.push_back(good);
    bad.back()[0] = 2, bad.back()[6] = 4;
    {
        Capture c(path);
        c.add(ctrl_headers(0x800123), good);                           // frame 1
        for (const auto& b : bad) c.add(ctrl_headers(0x800123), b);    // frames 2..11
        c.add(ctrl_headers(0x000123), good);                           // 12: not to a control QP
    }
    EXPECT_EQ(errors_in(path), "");
    std::set<uint64_t> malformed;
    for (uint64_t f = 2; f <= 11; f++) malformed.insert(f);
    EXPECT_EQ(frames_matching(path, "sdr.malformed"), malformed);
    EXPECT_EQ(frames_matching(path, "sdr.ack_holes"), std::set<uint64_t>{1});
    EXPECT_EQ(frames_matching(path, "sdr.ctrl.holes == \"3,5\" && sdr.ctrl.acked == \"0-2,4,6\""), std::set<uint64_t>{1});
    std::set<uint64_t> ours = malformed;
    ours.insert(1);
    EXPECT_EQ(frames_matching(path, "sdr"), ours);
    std::remove(path.c_str());
}

// Version 2: the clear-to-send of ec-lt carries the scheme's parameter area (the robust soliton
// distribution's c and delta, so both ends draw the same LT graph), and an ACK and a REPAIR NACK
// of the same connection read their bitmaps after it. Every field as rel::encode wrote it.
TEST(DissectorInput, Version2ClearToSendCarriesEcLtParameters)
{
    if (!tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to run the dissector tests";
    const std::string path = "/tmp/sdr_dissector_v2_" + std::to_string(getpid()) + ".pcap";
    const rel::SchemeOps* lt = rel::find_scheme(static_cast<uint8_t>(rel::Scheme::EcLt));
    ASSERT_NE(lt, nullptr);
    ASSERT_NE(lt->cts_params, nullptr);
    rel::CtrlMsg cts;
    cts.type = rel::CtrlType::Cts;
    cts.scheme = rel::Scheme::EcLt;
    cts.k = 8, cts.m = 2;
    cts.seq = 5;
    cts.length = 1 << 20;
    cts.from = 0x11223344;
    cts.to = 0x55667788;
    cts.params = lt->cts_params(rel::Code{rel::Scheme::EcLt, 8, 2});
    ASSERT_EQ(cts.params.size(), 4u);
    const uint16_t c_milli = static_cast<uint16_t>(cts.params[0] | cts.params[1] << 8);
    const uint16_t delta_milli = static_cast<uint16_t>(cts.params[2] | cts.params[3] << 8);
    EXPECT_EQ(c_milli, 100);      // LtCode::kC = 0.1
    EXPECT_EQ(delta_milli, 500);  // LtCode::kDelta = 0.5
    const std::vector<uint8_t> cts_bytes = rel::encode(cts);
    ASSERT_EQ(cts_bytes[0], 2);  // the encoder picks version 2 for a parameter area
    // A version-2 ACK (chunks 4 and 6 held behind base 3) and a REPAIR NACK: their bitmaps follow
    // the parameter area.
    rel::CtrlMsg ack = cts;
    ack.type = rel::CtrlType::Ack;
    ack.base = 3, ack.nbits = 10, ack.bits = {0x0A, 0x00};
    rel::CtrlMsg nack = cts;
    nack.type = rel::CtrlType::Nack;
    nack.flags = rel::kNackRepair;
    nack.base = 16, nack.nbits = 9, nack.newest = 6, nack.bits = {0x05, 0x01};  // submessages 16, 18, 24
    {
        Capture c(path);
        c.add(ctrl_headers(0x800123), cts_bytes);
        c.add(ctrl_headers(0x800123), rel::encode(ack));
        c.add(ctrl_headers(0x800123), rel::encode(nack));
    }
    EXPECT_EQ(errors_in(path), "");
    EXPECT_TRUE(frames_matching(path, "sdr.malformed").empty());
    std::string err;
    auto rows = tshark_fields(path,
                              {"sdr.ctrl.version", "sdr.ctrl.type", "sdr.ctrl.scheme", "sdr.ctrl.k", "sdr.ctrl.m",
                               "sdr.ctrl.params_len", "sdr.ctrl.params", "sdr.ctrl.lt.c", "sdr.ctrl.lt.delta",
                               "sdr.ctrl.seq", "sdr.ctrl.length", "sdr.ctrl.from", "sdr.ctrl.to", "sdr.ctrl.reserved",
                               "sdr.ctrl.acked", "sdr.ctrl.holes", "sdr.ctrl.nack_chunk", "sdr.ctrl.flags.repair",
                               "_ws.col.Info"},
                              &err, lua());
    ASSERT_TRUE(rows) << err;
    ASSERT_EQ(rows->size(), 3u);
    const auto& r = (*rows)[0];
    ASSERT_EQ(r.size(), 19u);
    EXPECT_EQ(num(r[0]), 2u);
    EXPECT_EQ(num(r[1]), 1u);  // CTS
    EXPECT_EQ(num(r[2]), 6u);  // ec-lt
    EXPECT_EQ(num(r[3]), 8u);
    EXPECT_EQ(num(r[4]), 2u);
    EXPECT_EQ(num(r[5]), 4u);
    EXPECT_EQ(*parse_tshark_bytes_be(r[6]), 0x6400f401u);  // c 100, delta 500, little-endian u16 each
    EXPECT_EQ(num(r[7]), c_milli);
    EXPECT_EQ(num(r[8]), delta_milli);
    EXPECT_EQ(num(r[9]), 5u);
    EXPECT_EQ(num(r[10]), 1u << 20);
    EXPECT_EQ(num(r[11]), 0x11223344u);
    EXPECT_EQ(num(r[12]), 0x55667788u);
    EXPECT_EQ(r[13], "");  // version 2 has P where version 1 has its reserved field
    EXPECT_NE(r[18].find("SDR CTS seq=5 length=1048576 ec-lt:8,2 c=0.100 delta=0.500"), std::string::npos) << r[18];
    const auto& a = (*rows)[1];
    EXPECT_EQ(num(a[0]), 2u);
    EXPECT_EQ(num(a[5]), 4u);
    EXPECT_EQ(a[14], "0-2,4,6");
    EXPECT_EQ(a[15], "3,5");
    const auto& n = (*rows)[2];
    EXPECT_EQ(num(n[1]), 3u);  // NACK
    EXPECT_EQ(n[16], "16,18,24");
    EXPECT_EQ(n[17], "1");  // REPAIR
    std::remove(path.c_str());
}

// The dissector's scheme names are the registry's (sdr_rel_schemes.def): a clear-to-send of every
// registered scheme, and of auto, shows its name (with k,m where the scheme takes them, and its
// parameter area where it has one) and is not malformed.
TEST(DissectorInput, ClearToSendNamesEveryRegisteredScheme)
{
    if (!tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to run the dissector tests";
    const std::string path = "/tmp/sdr_dissector_schemes_" + std::to_string(getpid()) + ".pcap";
    std::vector<const rel::SchemeOps*> all(rel::registered_schemes().begin(), rel::registered_schemes().end());
    all.push_back(&rel::kAutoOps);
    std::vector<std::string> want;
    {
        Capture c(path);
        for (const rel::SchemeOps* o : all) {
            rel::CtrlMsg cts;
            cts.type = rel::CtrlType::Cts;
            cts.scheme = o->id;
            const bool coded = o->coded();
            cts.k = coded ? 8 : 0, cts.m = coded ? 2 : 0;
            cts.seq = 1;
            cts.length = 4096;
            if (o->cts_params) cts.params = o->cts_params(rel::Code{o->id, cts.k, cts.m});
            c.add(ctrl_headers(0x800123), rel::encode(cts));
            want.push_back("SDR CTS seq=1 length=4096 " + std::string(o->name()) + (coded ? ":8,2" : ""));
        }
    }
    EXPECT_EQ(errors_in(path), "");
    EXPECT_TRUE(frames_matching(path, "sdr.malformed").empty());
    std::string err;
    auto rows = tshark_fields(path, {"sdr.ctrl.scheme", "_ws.col.Info"}, &err, lua());
    ASSERT_TRUE(rows) << err;
    ASSERT_EQ(rows->size(), all.size());
    for (size_t i = 0; i < all.size(); i++) {
        EXPECT_EQ(num((*rows)[i][0]), static_cast<uint64_t>(all[i]->id)) << want[i];
        // The name ends the scheme's part of the Info column (a parameter area follows after a space).
        const std::string& info = (*rows)[i][1];
        const size_t at = info.find(want[i]);
        EXPECT_TRUE(at != std::string::npos && (at + want[i].size() == info.size() || info[at + want[i].size()] == ' '))
            << info;
    }
    std::remove(path.c_str());
}

TEST(DissectorInput, MessageIdWrapStartsANewMessage)
{
    if (!tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to run the dissector tests";
    const std::string path = "/tmp/sdr_dissector_wrap_" + std::to_string(getpid()) + ".pcap";
    const fw_imm_layout l = FW_IMM_DEFAULT_LAYOUT;
    emu::wire::Headers h;
    h.src_ip = 0x0A000001;
    h.dst_ip = 0x0A000002;
    h.dest_qp = 0x1234;
    h.rkey = 0xAB00;
    const std::vector<uint8_t> payload(64, 0x5A);
    h.dma_len = 64;
    std::set<uint64_t> expected;
    uint64_t frame = 0, new_id0 = 0;
    {
        Capture c(path);
        auto send = [&](uint32_t n, uint32_t off) {
            h.imm = fw_imm_encode(l, n % 1024, off, 0);
            c.add(h, payload);
            return ++frame;
        };
        // Messages 0..1099 of one packet; message 1024 reuses id 0 after 1023 others started.
        for (uint32_t n = 0; n < 1100; n++) {
            uint64_t f = send(n, 0);
            if (n == 1024) new_id0 = f;
            if (n == 1060) expected.insert(send(1050, 0));  // a repeat of message 1050
        }
        // Message 1100 (id 76, used before by message 76): offsets 0, 2, 3, then 1 (its first
        // copy never captured) and 2 again.
        send(1100, 0);
        send(1100, 2);
        send(1100, 3);
        expected.insert(send(1100, 1));
        expected.insert(send(1100, 2));
    }
    EXPECT_EQ(errors_in(path), "");
    EXPECT_EQ(frames_matching(path, "sdr.retransmission"), expected);
    EXPECT_EQ(frames_matching(path, "sdr.msg_id == 0 && sdr.msg_first_frame == " + std::to_string(new_id0)),
              std::set<uint64_t>{new_id0});
    std::remove(path.c_str());
}

}  // namespace
