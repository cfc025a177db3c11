// Reliable delivery on the simulator: every scheme, sizes, loss models, fallback, dead links.
#include <sdr/reliability/codec.hpp>
#include <sdr/reliability/endpoint.hpp>

#include "sim_util.hpp"

#include <memory>

using namespace sdr;
using namespace sdr::rel;

namespace {

struct Link {
    double loss = 0, burst_enter = 0, burst_leave = 0, reorder = 0, dup = 0;
    double rtt_ms = 1;
    uint64_t seed = 1;
};

struct Outcome {
    MessageStats tx, rx;
    bool finished = false;
    bool bytes_equal = false;
    uint64_t ctrl_frames = 0;
};

// One reliable message of `bytes` from side 0 to side 1 over a fresh world.
Outcome transfer(const std::string& scheme, uint64_t bytes, const Link& l, uint32_t chunk_log = 16,
                 uint32_t max_rounds = 16, uint32_t channels = 4)
{
    WorldConfig wc = test::config(chunk_log, 30, 2, channels);  // 4 slots of 256 MiB
    wc.fabric.link.rtt_ms = l.rtt_ms;
    wc.fabric.link.bandwidth_gbps = 100;
    wc.fabric.seed = l.seed;
    auto& imp = wc.fabric.link.impairment;
    imp.loss = l.loss;
    imp.ge_p_good_bad = l.burst_enter;
    imp.ge_p_bad_good = l.burst_leave;
    imp.reorder = l.reorder;
    imp.reorder_max_ps = 20'000'000;  // up to 20 us late
    imp.duplicate = l.dup;
    SimWorld w(wc);
    Config cfg;
    std::string err;
    EXPECT_TRUE(parse_scheme(scheme, &cfg, &err)) << err;
    cfg.rtt_ms = l.rtt_ms;
    cfg.bw_gbps = 100;
    cfg.max_rounds = max_rounds;
    auto a = Endpoint::create(w.ctx(0), w.qp(0), wc.qp, cfg, &err);
    auto b = Endpoint::create(w.ctx(1), w.qp(1), wc.qp, cfg, &err);
    EXPECT_TRUE(a && b) << err;
    Outcome o;
    if (!a || !b) return o;
    std::vector<uint8_t> src(bytes), dst(bytes, 0xEE);
    test::fill(src, l.seed + bytes);
    uint32_t lk_src = bytes ? w.lkey(0, src.data(), bytes) : 0, lk_dst = bytes ? w.lkey(1, dst.data(), bytes) : 0;
    uint64_t rid = 0, sid = 0;
    EXPECT_EQ(b->recv(dst.data(), bytes, lk_dst, &rid), SDR_SUCCESS) << last_error();
    EXPECT_EQ(a->send(src.data(), bytes, lk_src, &sid), SDR_SUCCESS) << last_error();
    bool rx_done = false, tx_done = false;
    o.finished = drive(w.ctx(0), {a.get(), b.get()}, [&] {
        if (!rx_done) rx_done = b->recv_result(rid, &o.rx) == SDR_SUCCESS;
        if (!tx_done) tx_done = a->send_result(sid, &o.tx) == SDR_SUCCESS;
        return rx_done && tx_done;
    }, 600'000'000'000ull);
    o.bytes_equal = src == dst;
    o.ctrl_frames = w.nic(1).counters().tx_ctrl;
    return o;
}

void expect_delivered(const Outcome& o)
{
    ASSERT_TRUE(o.finished);
    EXPECT_TRUE(o.rx.ok) << o.rx.error;
    EXPECT_TRUE(o.tx.ok) << o.tx.error;
    EXPECT_TRUE(o.bytes_equal);
}

const char* kSchemes[] = {"sr", "sr-nack", "ec-xor:8,2", "ec-mds:8,2"};

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

TEST_P(EveryScheme, LargeMessage)
{
    Link l;
    l.loss = 1e-4;
    l.seed = 11;
    expect_delivered(transfer(GetParam(), uint64_t{256} << 20, l, 16, 16, 8));
}

TEST_P(EveryScheme, DeadLinkEndsWithAnErrorNotAHang)
{
    Link l;
    l.loss = 1.0;
    Outcome o = transfer(GetParam(), uint64_t{1} << 20, l, 16, 4);
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
