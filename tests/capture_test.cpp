// pcapng captures with the link's and the NIC's decisions, and sdr-pcap summary. sdr_demo moves
// one 4 MiB message with sr, sr-nack and ec-mds:8,2 over a lossy 1 ms path into a pcapng (and,
// same seed, a classic pcap): capinfos and tshark read it, exactly the frames the link dropped
// carry the drop flag and their cause, and sdr-pcap's per-message retransmissions equal the
// reliability layer's own counts. In process, a link with bursts, reordering and duplication
// and hostile frames injected into a NIC: every decision is in the capture, matching the
// link's and the NIC's counters. A CTS the reliability layer cannot decode is counted and listed,
// and its SDR message joins no other message.
#include "child_util.hpp"
#include "sim_util.hpp"
#include "tshark_util.hpp"

#include <gtest/gtest.h>
#include <sdr/emu/capture_notes.hpp>
#include <sdr/emu/capture_reader.hpp>
#include <sdr/emu/pcap_writer.hpp>
#include <sdr/emu/pcapng.hpp>
#include <sdr/emu/dcqcn.hpp>
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

using namespace sdr;
using namespace sdr::test;

namespace {

struct SchemeStats {
    uint32_t retransmitted = 0, decoded = 0, fallbacks = 0;
};

std::string run(const std::string& cmd, int* status)
{
    Child c(cmd);
    return c.finish(status);
}

uint64_t count_of(const std::string& hay, const std::string& needle)
{
    uint64_t n = 0;
    for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) n++;
    return n;
}

// The members of each reliable message in sdr-pcap's --json, one string per message (up to its
// list of SDR messages), in capture order.
std::vector<std::string> json_messages(const std::string& json)
{
    std::vector<std::string> out;
    for (size_t at = json.find("{\"src\":"); at != std::string::npos; at = json.find("{\"src\":", at + 1)) {
        size_t end = json.find(",\"sdr_messages\"", at);
        if (end == std::string::npos) break;  // the unattributed list
        out.push_back(json.substr(at, end - at));
    }
    return out;
}

std::string json_text(const std::string& json, const std::string& key)
{
    size_t at = json.find("\"" + key + "\":\"");
    if (at == std::string::npos) return "";
    at += key.size() + 4;
    return json.substr(at, json.find('"', at) - at);
}

class PcapngDemo : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        dir_ = "/tmp/sdr_capture_" + std::to_string(getpid());
        int st;
        run("mkdir -p " + shell_quote(dir_), &st);
        ng_ = dir_ + "/demo.pcapng";
        classic_ = dir_ + "/demo.pcap";
        const std::string args = " --size 4M --rtt-ms 1 --loss 0.002 --seed 3 --scheme sr --scheme sr-nack --scheme ec-mds:8,2";
        out_ = run(std::string(SDR_DEMO) + args + " --pcap " + shell_quote(ng_) + " --drop-log " +
                       shell_quote(dir_ + "/drops.tsv"),
                   &st);
        if (st != 0) return;
        std::string classic_out = run(std::string(SDR_DEMO) + args + " --pcap " + shell_quote(classic_), &st);
        if (st != 0) return;
        std::istringstream in(out_);
        for (std::string line; std::getline(in, line);) {
            char name[32];
            double t, ideal, ratio;
            SchemeStats s;
            unsigned long long delivered, dropped;
            if (std::sscanf(line.c_str(), "%31s %lf ms %lf ms %lfx %u chunks %u %u", name, &t, &ideal, &ratio,
                            &s.retransmitted, &s.decoded, &s.fallbacks) == 7) {
                stats_[name] = s;
                order_.push_back(name);
            }
            if (std::sscanf(line.c_str(), "link: %llu packets delivered, %llu dropped", &delivered, &dropped) == 2) {
                delivered_ = delivered;
                dropped_ = dropped;
            }
        }
        std::ifstream drops(dir_ + "/drops.tsv");
        std::string header;
        std::getline(drops, header);
        for (std::string line; std::getline(drops, line);) {
            unsigned long long t;
            unsigned src, dst, op, qp, rkey, imm;
            if (std::sscanf(line.c_str(), "%llu %u %u %x %x %x %x", &t, &src, &dst, &op, &qp, &rkey, &imm) == 7)
                drop_log_.insert({t, rkey, imm});
        }
        // The same seed loses the same frames: the classic run is the same run.
        ok_ = stats_.size() == 3 && dropped_ > 0 && classic_out == out_.substr(0, out_.find("pcap:")) +
                                                                  classic_out.substr(classic_out.find("pcap:"));
        if (!ok_) out_ += "\n--- classic run ---\n" + classic_out;
    }
    static void TearDownTestSuite()
    {
        int st;
        if (!dir_.empty() && !::testing::Test::HasFailure()) run("rm -rf " + shell_quote(dir_), &st);
    }
    void SetUp() override { ASSERT_TRUE(ok_) << "sdr_demo failed or printed something unexpected:\n" << out_; }

    static std::string summary(const std::string& file)
    {
        int st;
        std::string out = run(std::string(SDR_PCAP) + " summary " + shell_quote(file) + " --json", &st);
        EXPECT_EQ(st, 0) << out;
        return out;
    }

    static std::string dir_, ng_, classic_, out_;
    static std::map<std::string, SchemeStats> stats_;
    static std::vector<std::string> order_;
    static std::set<std::tuple<uint64_t, uint32_t, uint32_t>> drop_log_;
    static uint64_t delivered_, dropped_;
    static bool ok_;
};
std::string PcapngDemo::dir_, PcapngDemo::ng_, PcapngDemo::classic_, PcapngDemo::out_;
std::map<std::string, SchemeStats> PcapngDemo::stats_;
std::vector<std::string> PcapngDemo::order_;
std::set<std::tuple<uint64_t, uint32_t, uint32_t>> PcapngDemo::drop_log_;
uint64_t PcapngDemo::delivered_ = 0, PcapngDemo::dropped_ = 0;
bool PcapngDemo::ok_ = false;

}  // namespace

TEST_F(PcapngDemo, CapinfosAndTsharkReadEveryFrameDeliveredOrDropped)
{
    if (!tshark_available()) GTEST_SKIP() << "tshark/capinfos are not on PATH; install tshark to run this test";
    int st;
    std::string info = run("capinfos -t -c -I " + shell_quote(ng_) + " 2>&1", &st);
    ASSERT_EQ(st, 0) << info;
    EXPECT_NE(info.find("pcapng"), std::string::npos) << info;
    EXPECT_NE(info.find("Number of packets:   " + std::to_string(delivered_ + dropped_)), std::string::npos) << info;
    EXPECT_NE(info.find("Name = nic0.rx"), std::string::npos) << info;
    EXPECT_NE(info.find("Name = nic1.rx"), std::string::npos) << info;
    EXPECT_NE(info.find("Time precision = nanoseconds (9)"), std::string::npos) << info;
    std::vector<emu::CaptureRecord> recs;
    std::string err;
    ASSERT_TRUE(emu::read_capture(ng_, &recs, &err)) << err;
    EXPECT_EQ(recs.size(), delivered_ + dropped_);
    std::vector<emu::CaptureRecord> classic;
    ASSERT_TRUE(emu::read_capture(classic_, &classic, &err)) << err;
    EXPECT_EQ(classic.size(), delivered_) << "a classic pcap holds only what arrived";
    for (size_t i = 1; i < recs.size(); i++) ASSERT_LE(recs[i - 1].ts_ns, recs[i].ts_ns) << "frame " << i + 1;
}

TEST_F(PcapngDemo, ExactlyTheFramesTheLinkDroppedAreFlaggedWithTheirCause)
{
    if (!tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to run this test";
    std::string err;
    auto rows = tshark_fields(ng_,
                              {"frame.time_epoch", "frame.interface_name", "frame.packet_flags_direction",
                               "frame.packet_flags_crc_error", "frame.comment", "ip.dst", "infiniband.reth.r_key",
                               "infiniband.immdt"},
                              &err);
    ASSERT_TRUE(rows) << err;
    ASSERT_EQ(rows->size(), delivered_ + dropped_);
    std::set<std::tuple<uint64_t, uint32_t, uint32_t>> flagged;
    for (const auto& r : *rows) {
        ASSERT_EQ(r.size(), 8u);
        EXPECT_EQ(r[1], r[5] == "10.0.0.1" ? "nic0.rx" : "nic1.rx") << "the tap sits where the frame arrives";
        EXPECT_EQ(parse_tshark_uint(r[2]).value_or(0), emu::pcapng::kFlagInbound);
        const bool drop = r[3] == "1" || r[3] == "True";
        if (!drop) {
            EXPECT_EQ(r[4].find("link drop"), std::string::npos) << r[4];
            continue;
        }
        EXPECT_EQ(r[4], emu::capture_note::kLossDrop) << "the demo's link has i.i.d. loss only";
        size_t dot = r[0].find('.');
        std::string frac = r[0].substr(dot + 1);
        frac.resize(9, '0');
        uint64_t t = std::stoull(r[0].substr(0, dot)) * 1'000'000'000ull + std::stoull(frac);
        flagged.insert({t, static_cast<uint32_t>(parse_tshark_uint(r[6]).value_or(0)),
                        static_cast<uint32_t>(*parse_tshark_bytes_be(r[7]))});
    }
    EXPECT_EQ(flagged.size(), dropped_) << "flagged frames = the link's drop counter";
    EXPECT_EQ(flagged, drop_log_) << "the flagged frames are the drop log's, at the time they would have arrived";
}

TEST_F(PcapngDemo, SummaryRetransmissionsEqualTheReliabilityLayersCounts)
{
    std::string json = summary(ng_);
    auto msgs = json_messages(json);
    ASSERT_EQ(msgs.size(), order_.size()) << json;
    const uint32_t ppc = 16;  // 64 KiB chunks of 4 KiB packets
    uint64_t lost = 0;
    for (size_t i = 0; i < msgs.size(); i++) {
        SCOPED_TRACE(order_[i]);
        EXPECT_EQ(json_text(msgs[i], "code"), order_[i]);
        EXPECT_EQ(json_number(msgs[i], "length"), 4 << 20);
        EXPECT_EQ(json_number(msgs[i], "retransmitted_chunks"), stats_[order_[i]].retransmitted);
        EXPECT_EQ(json_number(msgs[i], "retransmitted"), stats_[order_[i]].retransmitted * ppc)
            << "SR repeats whole chunks";
        EXPECT_EQ(msgs[i].find("\"complete\":true"), msgs[i].find("\"complete\":")) << "every message completed";
        EXPECT_EQ(json_number(msgs[i], "lost_inferred"), 0) << "a pcapng records its drops";
        lost += static_cast<uint64_t>(json_number(msgs[i], "lost"));
        // Data packets: 1024 once, plus the repeats; EC adds 2 parity chunks per 8 data chunks.
        const double parity = order_[i] == "ec-mds:8,2" ? 64 / 8 * 2 * ppc : 0;
        EXPECT_EQ(json_number(msgs[i], "packets_sent"), 1024 + parity + stats_[order_[i]].retransmitted * ppc);
    }
    EXPECT_EQ(lost, dropped_) << "the demo's link dropped data frames only";
    EXPECT_EQ(json_number(json, "link_dropped"), dropped_);
    EXPECT_EQ(json.find("\"unattributed\":[]"), json.size() - std::string("\"unattributed\":[]}\n").size());
    // sr-nack's NACKs name the chunks it repeated; sr and EC send none.
    EXPECT_EQ(count_of(msgs[1], "\"chunks\":"), 0u);
    size_t nacks = json.find("\"nacks\":[", json.find("\"code\":\"sr-nack\""));
    EXPECT_EQ(count_of(json.substr(nacks, json.find(']', nacks) - nacks), "\"chunks\":"),
              stats_["sr-nack"].retransmitted);
}

TEST_F(PcapngDemo, ClassicPcapSummaryInfersTheSameRetransmissions)
{
    std::string json = summary(classic_);
    auto msgs = json_messages(json);
    ASSERT_EQ(msgs.size(), order_.size()) << json;
    EXPECT_EQ(json_number(json, "link_dropped"), 0);
    for (size_t i = 0; i < msgs.size(); i++) {
        SCOPED_TRACE(order_[i]);
        EXPECT_EQ(json_number(msgs[i], "retransmitted_chunks"), stats_[order_[i]].retransmitted);
        EXPECT_EQ(json_number(msgs[i], "lost"), 0);
    }
}

// The demo's capture with every CTS of its second connection (sr-nack) naming scheme id 200, as
// from a build with a scheme this one lacks.
TEST_F(PcapngDemo, SummaryListsUndecodableCtsAndMergesNoMessage)
{
    constexpr uint8_t kUnknownScheme = 200;
    ASSERT_EQ(rel::find_scheme(kUnknownScheme), nullptr);
    std::vector<emu::CaptureRecord> recs;
    std::string err;
    ASSERT_TRUE(emu::read_capture(ng_, &recs, &err)) << err;
    std::vector<uint32_t> receivers;  // the receiver incarnations, in the order their CTS came
    uint64_t changed = 0;
    for (auto& r : recs) {
        emu::wire::Parsed p;
        rel::CtrlMsg c;
        if (emu::wire::decode(r.bytes.data(), r.bytes.size(), &p) != emu::wire::Verdict::Ok ||
            !emu::wire::has_deth(p.h.opcode) || !rel::decode(p.payload, p.payload_len, &c) || c.type != rel::CtrlType::Cts)
            continue;
        if (std::find(receivers.begin(), receivers.end(), c.from) == receivers.end()) receivers.push_back(c.from);
        if (receivers.size() < 2 || c.from != receivers[1]) continue;
        r.bytes[p.payload - r.bytes.data() + 3] = kUnknownScheme;  // byte 3: the scheme (ctrl_msg.hpp)
        changed++;
    }
    ASSERT_GT(changed, 0u);
    const std::string bad = dir_ + "/unknown_scheme.pcapng";
    {
        emu::PcapWriter w;
        ASSERT_TRUE(w.open(bad, &err)) << err;
        for (const auto& r : recs)
            w.write_ns(r.ts_ns, r.bytes.data(), static_cast<uint32_t>(r.bytes.size()), r.origlen,
                       emu::pcapng::FrameNote{w.interface(r.iface), r.flags, r.comment});
    }
    const std::string json = summary(bad), good = summary(ng_);
    EXPECT_EQ(json_number(json, "ctrl_undecoded"), changed);
    EXPECT_EQ(count_of(json, "scheme " + std::to_string(kUnknownScheme) + ", seq 0"), changed) << "each listed";
    auto msgs = json_messages(json), good_msgs = json_messages(good);
    ASSERT_EQ(msgs.size(), 3u) << json;
    ASSERT_EQ(good_msgs.size(), 3u) << good;
    EXPECT_EQ(msgs[0], good_msgs[0]) << "sr keeps its own SDR message only";
    EXPECT_EQ(msgs[2], good_msgs[2]) << "so does ec-mds:8,2";
    EXPECT_EQ(json_text(msgs[1], "code"), "") << "sr-nack: no CTS decoded";
    EXPECT_EQ(json_number(msgs[1], "packets_sent"), 0);
    const std::string unattributed = json.substr(json.find("\"unattributed\":"));
    EXPECT_EQ(count_of(unattributed, "\"msg_id\":"), 1u) << "sr-nack's SDR message, on its own";
    EXPECT_EQ(json_number(unattributed, "packets_sent"), json_number(good_msgs[1], "packets_sent"));
}

TEST_F(PcapngDemo, TheDissectorFlagsTheRepeatsAndTheLinksDropsOfAPcapngExactly)
{
    if (!tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to run this test";
    std::string err;
    auto rows = tshark_fields(ng_, {"frame.number"}, &err,
                              {"-X", "lua_script:" + std::string(SDR_SOURCE_DIR) + "/tools/wireshark/sdr.lua", "-Y",
                               "sdr.retransmission"});
    ASSERT_TRUE(rows) << err;
    uint64_t repeats = 0;
    for (const auto& [name, s] : stats_) repeats += s.retransmitted * 16;
    EXPECT_EQ(rows->size(), repeats) << "every transmission is a frame, so every repeat is seen as one";
    rows = tshark_fields(ng_, {"frame.number", "frame.packet_flags_crc_error"}, &err,
                         {"-X", "lua_script:" + std::string(SDR_SOURCE_DIR) + "/tools/wireshark/sdr.lua", "-Y",
                          "sdr.link_drop"});
    ASSERT_TRUE(rows) << err;
    EXPECT_EQ(rows->size(), dropped_) << "sdr.link_drop on exactly the flagged frames";
    for (const auto& r : *rows) EXPECT_TRUE(r[1] == "1" || r[1] == "True") << "frame " << r[0];
}

TEST(PcapngSim, BurstsReorderingDuplicatesAndHostileFramesAreRecorded)
{
    const std::string path = "/tmp/sdr_capture_sim_" + std::to_string(getpid()) + ".pcapng";
    WorldConfig c = config(16, 30, 7);
    c.fabric.pcap_path = path;
    c.fabric.seed = 77;
    auto& imp = c.fabric.link.impairment;
    imp.loss = 0.002;
    imp.ge_p_good_bad = 0.002;
    imp.ge_p_bad_good = 0.3;
    imp.reorder = 0.02;
    imp.reorder_max_ps = 5'000'000;
    imp.duplicate = 0.01;
    uint64_t dropped = 0, burst = 0, reordered = 0, duplicated = 0, wrong_peer = 0, unknown_qp = 0;
    {
        SimWorld w(c);
        const size_t size = 8u << 20;
        std::vector<uint8_t> src(size), dst(size);
        fill(src, 5);
        uint32_t rk = w.lkey(1, dst.data(), size), sk = w.lkey(0, src.data(), size);
        sdr_recv_wr rw{static_cast<uint32_t>(size), rk, reinterpret_cast<uint64_t>(dst.data())};
        sdr_recv_handle* rh;
        ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS);
        sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(size), sk, reinterpret_cast<uint64_t>(src.data()), 0};
        sdr_send_handle* sh;
        ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS) << sdr_last_error();
        wait_send(sh);
        w.run_until_idle();
        // Two hostile frames: the right QP and key from a host that is not the peer, and an
        // unknown QP.
        emu::wire::Headers h;
        h.src_mac = emu::SimFabric::address_of(0).mac;
        h.dst_mac = emu::SimFabric::address_of(1).mac;
        h.src_ip = emu::SimFabric::address_of(7).ip;
        h.dst_ip = emu::SimFabric::address_of(1).ip;
        h.udp_src_port = emu::udp_src_port(w.nic(0).qpn(0), w.nic(1).qpn(0));
        h.dest_qp = w.nic(1).qpn(0);
        h.rkey = w.nic(1).qp_root_key(0);
        h.dma_len = 64;
        h.imm = fw_imm_encode(FW_IMM_DEFAULT_LAYOUT, 0, 0, 0);
        std::vector<uint8_t> payload(64, 0x5A), f(emu::wire::frame_bytes_write_imm(64));
        f.resize(emu::wire::encode(h, payload.data(), 64, f.data(), f.size()));
        w.fabric().inject_frame(1, f, w.fabric().sim().now());
        h.src_ip = emu::SimFabric::address_of(0).ip;
        h.dest_qp ^= 0x1234;
        f.resize(emu::wire::frame_bytes_write_imm(64));
        f.resize(emu::wire::encode(h, payload.data(), 64, f.data(), f.size()));
        w.fabric().inject_frame(1, f, w.fabric().sim().now() + 1000);
        w.run_until_idle();
        for (auto [a, b] : {std::pair{0u, 1u}, std::pair{1u, 0u}}) {
            if (auto* l = w.fabric().link(a, b)) {
                dropped += l->dropped();
                burst += l->dropped_burst();
                reordered += l->reordered();
                duplicated += l->duplicated();
            }
        }
        wrong_peer = w.nic(1).counters().rx_drop(emu::RxDrop::WrongPeer);
        unknown_qp = w.nic(1).counters().rx_drop(emu::RxDrop::UnknownQp);
    }  // the fabric closes the capture
    ASSERT_GT(burst, 0u);
    ASSERT_GT(dropped, burst);
    ASSERT_GT(reordered, 0u);
    ASSERT_GT(duplicated, 0u);
    EXPECT_EQ(wrong_peer, 1u);
    EXPECT_EQ(unknown_qp, 1u);

    std::vector<emu::CaptureRecord> recs;
    std::string err;
    ASSERT_TRUE(emu::read_capture(path, &recs, &err)) << err;
    std::map<std::string, uint64_t> notes;
    uint64_t flagged = 0, delayed_originals = 0;
    for (const auto& r : recs) {
        flagged += (r.flags & emu::pcapng::kFlagLinkDrop) != 0;
        std::istringstream in(r.comment);
        for (std::string n; std::getline(in, n, ';');) notes[n.substr(n[0] == ' ')]++;
        if (r.comment.find(emu::capture_note::kDelayed) != std::string::npos &&
            r.comment.find(emu::capture_note::kDuplicateCopy) == std::string::npos)
            delayed_originals++;
        if (r.flags & emu::pcapng::kFlagLinkDrop) {
            EXPECT_TRUE(r.comment == emu::capture_note::kLossDrop || r.comment == emu::capture_note::kBurstDrop)
                << r.comment;
        }
    }
    EXPECT_EQ(flagged, dropped) << "flagged frames = the links' drop counters";
    EXPECT_EQ(notes[emu::capture_note::kBurstDrop], burst);
    EXPECT_EQ(notes[emu::capture_note::kLossDrop], dropped - burst);
    EXPECT_EQ(delayed_originals, reordered);
    EXPECT_EQ(notes[emu::capture_note::kDuplicated], duplicated);
    EXPECT_EQ(notes[emu::capture_note::kDuplicateCopy], duplicated);
    EXPECT_EQ(notes[emu::capture_note::kInjected], 2u);
    EXPECT_EQ(notes["nic drop: wrong_peer"], 1u);
    EXPECT_EQ(notes["nic drop: unknown_qp"], 1u);

    if (tshark_available()) {  // tshark reads the same flags and comments
        auto rows = tshark_fields(path, {"frame.packet_flags_crc_error", "frame.comment"}, &err);
        ASSERT_TRUE(rows) << err;
        ASSERT_EQ(rows->size(), recs.size());
        uint64_t t_flagged = 0, t_hostile = 0;
        for (const auto& r : *rows) {
            t_flagged += r[0] == "1" || r[0] == "True";
            t_hostile += r[1].find("injected; nic drop: ") == 0;
        }
        EXPECT_EQ(t_flagged, dropped);
        EXPECT_EQ(t_hostile, 2u);
    }
    if (!::testing::Test::HasFailure()) std::remove(path.c_str());
}

// DCQCN on the wire (Nic::set_dcqcn, marks from the link): data frames leave ECT(0) and arrive
// CE-marked, and tshark dissects the receiver's answers as RoCEv2 CNPs: BTH opcode 0x81 to the
// sending QP, 74 bytes (16 reserved after the BTH), not ECN-capable, one per CNP the NICs
// counted. Wireshark 4.0 (Debian 12's) has no name for opcode 0x81 yet ("Unknown OpCode",
// the reserved bytes as vendor data); later versions call it CNP, which the test also takes.
TEST(PcapSim, TsharkDissectsDcqcnsCnpsAndTheEcnMarks)
{
    if (!tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to run this test";
    const std::string path = "/tmp/sdr_capture_cnp_" + std::to_string(getpid()) + ".pcap";
    WorldConfig c = config(16, 30, 7, 1);
    c.fabric.pcap_path = path;
    c.fabric.pcap_snaplen = 128;
    c.fabric.directed[{0, 1}].ce_mark = 1;
    uint64_t cnps = 0;
    uint32_t sender_qpn = 0;
    {
        SimWorld w(c);
        emu::DcqcnParams p = emu::DcqcnParams::for_line_rate(100);
        p.enabled = true;
        w.nic(0).set_dcqcn(p);
        w.nic(1).set_dcqcn(p);
        const size_t size = 1u << 20;
        std::vector<uint8_t> src(size), dst(size);
        fill(src, 9);
        uint32_t rk = w.lkey(1, dst.data(), size), sk = w.lkey(0, src.data(), size);
        sdr_recv_wr rw{static_cast<uint32_t>(size), rk, reinterpret_cast<uint64_t>(dst.data())};
        sdr_recv_handle* rh;
        ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS);
        sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(size), sk, reinterpret_cast<uint64_t>(src.data()), 0};
        sdr_send_handle* sh;
        ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS) << sdr_last_error();
        wait_send(sh);
        w.run_until_idle();
        EXPECT_EQ(dst, src);
        cnps = w.nic(1).counters().cnp_sent;
        sender_qpn = w.nic(0).qpn(0);
        ASSERT_GE(cnps, 1u);
        ASSERT_EQ(w.nic(0).counters().cnp_received, cnps);
        ASSERT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
    }
    std::string err;
    auto rows = tshark_fields(path, {"infiniband.bth.opcode", "ip.dsfield.ecn", "_ws.col.Info", "infiniband.bth.destqp",
                                     "frame.len"}, &err);
    ASSERT_TRUE(rows) << err;
    uint64_t cnp_rows = 0, ce_data = 0;
    for (const auto& r : *rows) {
        if (r[0] == "129") {
            cnp_rows++;
            EXPECT_TRUE(r[2].find("CNP") != std::string::npos || r[2].find("Unknown OpCode") == 0) << r[2];
            EXPECT_EQ(std::stoul(r[3], nullptr, 0), sender_qpn) << r[3];
            EXPECT_EQ(r[4], "74");
            EXPECT_EQ(r[1], "0") << "a CNP is not ECN-capable";
        } else if (r[0] == "43") {
            ce_data += r[1] == "3";
        }
    }
    EXPECT_EQ(cnp_rows, cnps);
    EXPECT_EQ(ce_data, 256u) << "every data frame marked CE on the way";
    if (!::testing::Test::HasFailure()) std::remove(path.c_str());
}
