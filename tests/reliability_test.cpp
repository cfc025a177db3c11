// Reliable delivery on the simulator: every scheme, sizes, loss models, fallback, dead links.
#include <sdr/reliability/codec.hpp>
#include <sdr/reliability/endpoint.hpp>
#include <sdr/reliability/scheme.hpp>

#include "sim_util.hpp"

#include <chrono>
#include <memory>

using namespace sdr;
using namespace sdr::rel;

namespace {

struct Link {
    double loss = 0, burst_enter = 0, burst_leave = 0, reorder = 0, dup = 0;
    double reverse_loss = -1;     // loss on the control direction (NIC 1 -> 0); < 0: as forward
    uint64_t late_max_us = 20;    // a reordered packet arrives up to this much late
    double rtt_ms = 1, bw_gbps = 100;
    bool wall_clock = false;      // pace the fabric by the wall clock (real time)
    uint64_t seed = 1;
};

struct Outcome {
    std::vector<MessageStats> tx_all, rx_all;  // per message, in posting order
    MessageStats tx, rx;                       // the first message's
    bool finished = false;
    bool bytes_equal = false;                  // every message
    uint64_t ctrl_frames = 0;                  // control datagrams the receiver sent
    uint64_t reverse_dropped = 0;              // packets the control direction dropped
    uint64_t stale = 0, duplicates = 0;        // the receiver firmware's counts
};

struct Shape {
    uint32_t chunk_log = 16, max_rounds = 16, channels = 4, messages = 1;
};

// `messages` reliable messages of `bytes` from side 0 to side 1 over a fresh world, all posted
// at once (receives first).
Outcome transfer(const std::string& scheme, uint64_t bytes, const Link& l, const Shape& sh = {})
{
    WorldConfig wc = test::config(sh.chunk_log, 30, 2, sh.channels);  // 4 slots of 256 MiB
    wc.fabric.link.rtt_ms = l.rtt_ms;
    wc.fabric.link.bandwidth_gbps = l.bw_gbps;
    wc.fabric.wall_clock = l.wall_clock;
    wc.fabric.seed = l.seed;
    auto& imp = wc.fabric.link.impairment;
    imp.loss = l.loss;
    imp.ge_p_good_bad = l.burst_enter;
    imp.ge_p_bad_good = l.burst_leave;
    imp.reorder = l.reorder;
    imp.reorder_max_ps = l.late_max_us * 1'000'000;
    imp.duplicate = l.dup;
    if (l.reverse_loss >= 0) {
        emu::ImpairmentParams rev = imp;
        rev.loss = l.reverse_loss;
        wc.fabric.directed[{1, 0}] = rev;
    }
    SimWorld w(wc);
    Config cfg;
    std::string err;
    EXPECT_TRUE(parse_scheme(scheme, &cfg, &err)) << err;
    cfg.rtt_ms = l.rtt_ms;
    cfg.bw_gbps = l.bw_gbps;
    cfg.max_rounds = sh.max_rounds;
    auto a = Endpoint::create(w.ctx(0), w.qp(0), wc.qp, cfg, &err);
    auto b = Endpoint::create(w.ctx(1), w.qp(1), wc.qp, cfg, &err);
    EXPECT_TRUE(a && b) << err;
    Outcome o;
    if (!a || !b) return o;
    const uint32_t n = sh.messages;
    std::vector<std::vector<uint8_t>> src(n, std::vector<uint8_t>(bytes)), dst(n, std::vector<uint8_t>(bytes, 0xEE));
    std::vector<uint64_t> rid(n), sid(n);
    for (uint32_t i = 0; i < n; i++) {
        test::fill(src[i], l.seed + bytes + i);
        uint32_t lk = bytes ? w.lkey(1, dst[i].data(), bytes) : 0;
        EXPECT_EQ(b->recv(dst[i].data(), bytes, lk, &rid[i]), SDR_SUCCESS) << last_error();
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t lk = bytes ? w.lkey(0, src[i].data(), bytes) : 0;
        EXPECT_EQ(a->send(src[i].data(), bytes, lk, &sid[i]), SDR_SUCCESS) << last_error();
    }
    o.tx_all.resize(n);
    o.rx_all.resize(n);
    std::vector<bool> rx_done(n), tx_done(n);
    o.finished = drive(w.ctx(0), {a.get(), b.get()}, [&] {
        bool all = true;
        for (uint32_t i = 0; i < n; i++) {
            if (!rx_done[i]) rx_done[i] = b->recv_result(rid[i], &o.rx_all[i]) == SDR_SUCCESS;
            if (!tx_done[i]) tx_done[i] = a->send_result(sid[i], &o.tx_all[i]) == SDR_SUCCESS;
            all = all && rx_done[i] && tx_done[i];
        }
        return all;
    }, 600'000'000'000ull);
    o.tx = o.tx_all[0];
    o.rx = o.rx_all[0];
    o.bytes_equal = src == dst;
    o.ctrl_frames = w.nic(1).counters().tx_ctrl;
    o.reverse_dropped = w.fabric().link(1, 0) ? w.fabric().link(1, 0)->dropped() : 0;
    o.stale = w.nic(1).fw_counter(FW_CNT_RX_STALE);
    o.duplicates = w.nic(1).fw_counter(FW_CNT_RX_DUPLICATE);
    return o;
}

void expect_delivered(const Outcome& o)
{
    ASSERT_TRUE(o.finished);
    for (size_t i = 0; i < o.rx_all.size(); i++) {
        EXPECT_TRUE(o.rx_all[i].ok) << "message " << i << ": " << o.rx_all[i].error;
        EXPECT_TRUE(o.tx_all[i].ok) << "message " << i << ": " << o.tx_all[i].error;
    }
    EXPECT_TRUE(o.bytes_equal);
}

// Every registered scheme (k = 8, m = 2 where it takes them) and auto: a new scheme runs here
// with no edit.
const std::vector<std::string> kSchemeNames = [] {
    std::vector<std::string> v;
    for (const SchemeOps* s : registered_schemes()) v.push_back(std::string(s->name()) + (s->takes_params ? ":8,2" : ""));
    v.push_back("auto:8,2");
    return v;
}();
const std::vector<const char*> kSchemes = [] {
    std::vector<const char*> v;
    for (const std::string& s : kSchemeNames) v.push_back(s.c_str());
    return v;
}();

}  // namespace

class EveryScheme : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Reliability, EveryScheme, ::testing::ValuesIn(kSchemes),
                         [](const auto& i) {
                             std::string s = i.param;
                             for (char& c : s)
                                 if (c == '-' || c == ':' || c == ',') c = '_';
                             return s;
                         });

TEST_P(EveryScheme, SizesAtDropRates)
{
    for (double p : {0.0, 1e-5, 1e-3, 1e-2, 0.1})
        for (uint64_t size : {uint64_t{64} << 10, uint64_t{1} << 20, (uint64_t{4} << 20) + 12345}) {
            SCOPED_TRACE(std::to_string(p) + " " + std::to_string(size));
            Link l;
            l.loss = p;
            l.seed = 7 + size;
            Outcome o = transfer(GetParam(), size, l);
            expect_delivered(o);
            if (p == 0) {
                EXPECT_EQ(o.tx.retransmitted_chunks, 0u);
                EXPECT_EQ(o.rx.decoded_chunks, 0u);
            }
            if (p >= 1e-2 && size >= (1u << 20)) {  // losses happened and were repaired
                EXPECT_GT(o.tx.retransmitted_chunks + o.rx.decoded_chunks, 0u);
            }
            if ((p == 0.1 || p == 0) && size == (1u << 20))
                std::printf("%s 1 MiB at %g: rx %.3f tx %.3f ms, %u retransmitted, %u decoded, %u fallbacks, %lu ctrl frames\n",
                            GetParam(), p, (o.rx.done_ns - o.rx.post_ns) / 1e6, (o.tx.done_ns - o.tx.post_ns) / 1e6, o.tx.retransmitted_chunks,
                            o.rx.decoded_chunks, o.rx.fallbacks, static_cast<unsigned long>(o.ctrl_frames));
        }
}

TEST_P(EveryScheme, BurstLossReorderingDuplicates)
{
    Link l;
    l.loss = 1e-3;
    l.burst_enter = 2e-4;
    l.burst_leave = 0.2;
    l.reorder = 0.02;
    l.dup = 0.01;
    l.seed = 3;
    expect_delivered(transfer(GetParam(), uint64_t{8} << 20, l));
}

TEST_P(EveryScheme, AckAndNackLossSurvived)
{
    // A third of the control datagrams (CTS, ACK, NACK) die on the way back; data loses 1 %.
    Link l;
    l.loss = 1e-2;
    l.reverse_loss = 0.3;
    l.seed = 4;
    Outcome o = transfer(GetParam(), uint64_t{4} << 20, l, {.messages = 3});
    expect_delivered(o);
    EXPECT_GT(o.reverse_dropped, 0u);  // control was lost, and repaired (re-sent CTS, probes)
    std::printf("%s: %lu of %lu control datagrams lost\n", GetParam(), static_cast<unsigned long>(o.reverse_dropped),
                static_cast<unsigned long>(o.ctrl_frames));
}

TEST_P(EveryScheme, LatePacketsOnTheReliablePath)
{
    // 5 % of packets arrive up to 3 RTT late: after their retransmission, after their message
    // completed, while the next messages (and reused receive slots) are in flight.
    Link l;
    l.loss = 1e-3;
    l.reorder = 0.05;
    l.late_max_us = 3000;
    l.seed = 6;
    Outcome o = transfer(GetParam(), uint64_t{2} << 20, l, {.messages = 6});
    expect_delivered(o);
    EXPECT_GT(o.stale + o.duplicates, 0u);  // late packets did arrive and were set aside
    std::printf("%s: %lu stale, %lu duplicate packets at the receiver\n", GetParam(),
                static_cast<unsigned long>(o.stale), static_cast<unsigned long>(o.duplicates));
}

TEST_P(EveryScheme, RunsInRealTime)
{
    // The in-memory fabric paced by the wall clock: the same engines, binding and drive loop,
    // but every wait blocks for real, and timers and RTT samples are wall time. 10 Gbit/s,
    // 2 ms RTT, 1 % packet loss (15 % of 16-packet chunks).
    Link l;
    l.loss = 1e-2;
    l.rtt_ms = 2;
    l.bw_gbps = 10;
    l.wall_clock = true;
    l.seed = 8;
    auto t0 = std::chrono::steady_clock::now();
    // A re-NACK goes out every 1.25 RTT (2.5 ms here) until repair arrives, and each counts as
    // a round: a process that a loaded machine (ASan, other jobs) stalls for 40 ms spends 16
    // rounds waiting for the wall clock, not for the link. The bound is not what this test is
    // about, so it is the largest allowed.
    Outcome o = transfer(GetParam(), uint64_t{4} << 20, l, {.max_rounds = 1000, .messages = 2});
    double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    expect_delivered(o);
    EXPECT_GT(o.tx.retransmitted_chunks + o.rx.decoded_chunks, 0u);
    // Real time passed: the clear-to-send, the data and the final ACK each cross half an RTT,
    // and the message's own clock (sdr_now_ns) agrees with the wall.
    double msg_ms = (o.tx.done_ns - o.tx.post_ns) / 1e6;
    EXPECT_GE(msg_ms, 1.5 * l.rtt_ms);
    EXPECT_LE(msg_ms, wall_ms);
    std::printf("%s in real time: first message %.2f ms (%u retransmitted, %u decoded), both in %.2f ms of wall time\n",
                GetParam(), msg_ms, o.tx.retransmitted_chunks, o.rx.decoded_chunks, wall_ms);
}

TEST_P(EveryScheme, LargeMessage)
{
    Link l;
    l.loss = 1e-4;
    l.seed = 11;
    expect_delivered(transfer(GetParam(), uint64_t{256} << 20, l, {.channels = 8}));
}

TEST_P(EveryScheme, DeadLinkEndsWithAnErrorNotAHang)
{
    Link l;
    l.loss = 1.0;
    Outcome o = transfer(GetParam(), uint64_t{1} << 20, l, {.max_rounds = 4});
    ASSERT_TRUE(o.finished);
    EXPECT_FALSE(o.tx.ok);
    EXPECT_FALSE(o.rx.ok);
    EXPECT_NE(o.tx.error, "");
    EXPECT_NE(o.rx.error, "");
    std::printf("sender: %s\nreceiver: %s\n", o.tx.error.c_str(), o.rx.error.c_str());
}

TEST(Reliability, EcFallsBackToSrWhenASubmessageLosesTooMuch)
{
    // Bursts that wipe out several chunks of one submessage: more than m = 2 losses.
    Link l;
    l.burst_enter = 1e-3;
    l.burst_leave = 0.01;  // bursts of ~100 packets: 6 chunks of 16 packets
    l.seed = 5;
    Outcome o = transfer("ec-mds:8,2", uint64_t{16} << 20, l);
    expect_delivered(o);
    EXPECT_GT(o.rx.fallbacks, 0u);
    EXPECT_GT(o.tx.retransmitted_chunks, 0u);
}

TEST(Reliability, EcDecodesWithoutRetransmission)
{
    Link l;
    l.loss = 1e-3;
    l.seed = 9;
    Outcome o = transfer("ec-mds:8,2", uint64_t{16} << 20, l);
    expect_delivered(o);
    EXPECT_GT(o.rx.decoded_chunks, 0u);
    EXPECT_EQ(o.rx.fallbacks, 0u);
}

// The fountain code: bursts beyond the m = 2 repair symbols sent with each submessage make the
// receiver ask for more (rateless rounds) and rebuild from them; bytes arrive exact.
TEST(Reliability, FountainAsksForMoreRepairSymbolsUnderBursts)
{
    Link l;
    l.burst_enter = 1e-3;
    l.burst_leave = 0.05;  // bursts of ~20 packets: one or two chunks of 16 packets
    l.seed = 5;
    Outcome o = transfer("ec-lt:8,2", uint64_t{16} << 20, l);
    expect_delivered(o);
    EXPECT_GT(o.rx.fallbacks, 0u);      // submessages that needed repair symbols beyond the first m
    EXPECT_GT(o.rx.decoded_chunks, 0u); // rebuilt by peeling
    EXPECT_GT(o.rx.rounds, 0u);
}

TEST(Reliability, SchemeMismatchIsAClearError)
{
    WorldConfig wc = test::config(16, 30, 2, 4);
    SimWorld w(wc);
    Config ca, cb;
    std::string err;
    ASSERT_TRUE(parse_scheme("sr", &ca, &err));
    ASSERT_TRUE(parse_scheme("ec-mds:8,2", &cb, &err));
    ca.rtt_ms = cb.rtt_ms = 0.01;
    auto a = Endpoint::create(w.ctx(0), w.qp(0), wc.qp, ca, &err);
    auto b = Endpoint::create(w.ctx(1), w.qp(1), wc.qp, cb, &err);
    std::vector<uint8_t> src(1 << 20), dst(1 << 20);
    uint64_t sid, rid;
    ASSERT_EQ(b->recv(dst.data(), dst.size(), w.lkey(1, dst.data(), dst.size()), &rid), SDR_SUCCESS);
    ASSERT_EQ(a->send(src.data(), src.size(), w.lkey(0, src.data(), src.size()), &sid), SDR_SUCCESS);
    MessageStats ts, rs;
    bool td = false, rd = false;
    ASSERT_TRUE(drive(w.ctx(0), {a.get(), b.get()}, [&] {
        if (!td) td = a->send_result(sid, &ts) == SDR_SUCCESS;
        if (!rd) rd = b->recv_result(rid, &rs) == SDR_SUCCESS;
        return td && rd;
    }, 10'000'000'000ull));
    EXPECT_FALSE(ts.ok);
    EXPECT_NE(ts.error.find("scheme"), std::string::npos) << ts.error;
    EXPECT_FALSE(rs.ok);
}

TEST(Reliability, ConfigValidation)
{
    Config c;
    std::string err;
    EXPECT_FALSE(parse_scheme("ec-mds:250,10", &c, &err));
    EXPECT_NE(err.find("k + m <= 255"), std::string::npos) << err;
    EXPECT_FALSE(parse_scheme("ec-xor:2,4", &c, &err));
    EXPECT_FALSE(parse_scheme("sr:3,1", &c, &err));
    EXPECT_FALSE(parse_scheme("rc", &c, &err));
    EXPECT_TRUE(parse_scheme("ec-mds:32,8", &c, &err)) << err;
    EXPECT_EQ(c.k, 32u);
    EXPECT_EQ(c.m, 8u);
}

TEST(Codec, MdsRepairsAnyMErasures)
{
    const uint32_t k = 10, m = 4, len = 4096;
    Codec codec(CodeKind::Mds, k, m);
    std::vector<std::vector<uint8_t>> frag(k + m, std::vector<uint8_t>(len));
    for (uint32_t i = 0; i < k; i++) test::fill(frag[i], i);
    std::vector<uint8_t*> p(k + m);
    for (uint32_t i = 0; i < k + m; i++) p[i] = frag[i].data();
    codec.encode(p.data(), p.data() + k, len);
    auto orig = frag;
    for (uint32_t mask = 0; mask < (1u << (k + m)); mask += 37) {  // a spread of loss patterns
        if (__builtin_popcount(mask) > static_cast<int>(m)) continue;
        bool present[k + m];
        for (uint32_t i = 0; i < k + m; i++) {
            present[i] = !((mask >> i) & 1);
            if (!present[i] && i < k) std::fill(frag[i].begin(), frag[i].end(), 0);
        }
        ASSERT_TRUE(codec.decode(present, p.data(), len));
        for (uint32_t i = 0; i < k; i++) ASSERT_EQ(frag[i], orig[i]) << "mask " << mask;
    }
    bool five_lost[k + m];
    for (uint32_t i = 0; i < k + m; i++) five_lost[i] = i >= 5;
    EXPECT_FALSE(codec.decodable(five_lost));
}

TEST(Codec, XorRepairsOneLossPerGroup)
{
    const uint32_t k = 8, m = 2, len = 1000;  // odd length: the portable path
    Codec codec(CodeKind::Xor, k, m);
    std::vector<std::vector<uint8_t>> frag(k + m, std::vector<uint8_t>(len));
    for (uint32_t i = 0; i < k; i++) test::fill(frag[i], 100 + i);
    std::vector<uint8_t*> p(k + m);
    for (uint32_t i = 0; i < k + m; i++) p[i] = frag[i].data();
    codec.encode(p.data(), p.data() + k, len);
    auto orig = frag;
    bool present[k + m];
    std::fill(present, present + k + m, true);
    present[2] = present[5] = false;  // groups 0 and 1 each lose one
    std::fill(frag[2].begin(), frag[2].end(), 0);
    std::fill(frag[5].begin(), frag[5].end(), 0);
    ASSERT_TRUE(codec.decode(present, p.data(), len));
    EXPECT_EQ(frag[2], orig[2]);
    EXPECT_EQ(frag[5], orig[5]);
    present[4] = false;  // group 0 now lost two
    EXPECT_FALSE(codec.decodable(present));
}
