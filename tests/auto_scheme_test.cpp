// The auto scheme end to end: the receiver measures the drop rate from arrivals, picks a code per
// message with the model, names it in the CTS, and an auto sender follows it.
#include <sdr/reliability/drop_meter.hpp>
#include <sdr/reliability/endpoint.hpp>

#include "sim_util.hpp"
#include <sdr_sim.h>

#include <cmath>

using namespace sdr;
using namespace sdr::rel;

namespace {

struct Path {
    double loss = 0, rtt_ms = 25, bw_gbps = 100;
    uint64_t seed = 1;
};

WorldConfig world_config(const Path& p)
{
    WorldConfig wc = test::config(16, 30, 2, 4);  // 4 slots of 256 MiB
    wc.fabric.link.rtt_ms = p.rtt_ms;
    wc.fabric.link.bandwidth_gbps = p.bw_gbps;
    wc.fabric.link.impairment.loss = p.loss;
    wc.fabric.seed = p.seed;
    return wc;
}

struct AutoRun {
    WorldConfig wc;
    SimWorld world;
    std::unique_ptr<Endpoint> tx, rx;
    AutoRun(const Path& p, const std::string& tx_scheme, const std::string& rx_scheme, double drop_hint)
        : wc(world_config(p)), world(wc)
    {
        std::string err;
        tx = Endpoint::create(world.ctx(0), world.qp(0), wc.qp, config(p, tx_scheme, drop_hint), &err);
        rx = Endpoint::create(world.ctx(1), world.qp(1), wc.qp, config(p, rx_scheme, drop_hint), &err);
        EXPECT_TRUE(tx && rx) << err;
    }
    static Config config(const Path& p, const std::string& scheme, double drop_hint)
    {
        Config c;
        std::string err;
        EXPECT_TRUE(parse_scheme(scheme, &c, &err)) << err;
        c.rtt_ms = p.rtt_ms;
        c.bw_gbps = p.bw_gbps;
        c.drop_hint = drop_hint;
        return c;
    }
    // One message, receive posted first; both sides' stats. bytes_equal: delivered byte-exact.
    std::pair<MessageStats, MessageStats> message(uint64_t bytes, uint64_t seed, bool* bytes_equal)
    {
        std::vector<uint8_t> src(bytes), dst(bytes, 0xEE);
        test::fill(src, seed);
        uint64_t rid = 0, sid = 0;
        MessageStats ts, rs;
        EXPECT_EQ(rx->recv(dst.data(), bytes, world.lkey(1, dst.data(), bytes), &rid), SDR_SUCCESS) << last_error();
        EXPECT_EQ(tx->send(src.data(), bytes, world.lkey(0, src.data(), bytes), &sid), SDR_SUCCESS) << last_error();
        bool td = false, rd = false;
        EXPECT_TRUE(drive(world.ctx(0), {tx.get(), rx.get()}, [&] {
            if (!td) td = tx->send_result(sid, &ts) == SDR_SUCCESS;
            if (!rd) rd = rx->recv_result(rid, &rs) == SDR_SUCCESS;
            return td && rd;
        }, sdr_now_ns(world.ctx(0)) + 60'000'000'000ull));
        *bytes_equal = src == dst;
        return {ts, rs};
    }
};

}  // namespace

TEST(DropMeter, TurnsChunkLossIntoPacketLossAndForgetsItsHint)
{
    DropMeter d(0.01, 16);  // the hint: 1 % of packets, 14.9 % of 16-packet chunks
    EXPECT_NEAR(d.packet_drop(), 0.01, 1e-12);
    EXPECT_EQ(d.judged(), 0u);
    d.add(100000, 1590);  // 1.59 % of chunks: 0.1 % of packets
    EXPECT_NEAR(d.packet_drop(), 1 - std::pow(1 - (1590 + 0.149 * DropMeter::kPriorChunks) / (100000 + DropMeter::kPriorChunks), 1.0 / 16), 1e-5);
    for (int i = 0; i < 64; i++) d.add(100000, 1603);  // the window halves: the hint fades
    EXPECT_NEAR(d.packet_drop(), 1e-3, 2e-5);
    EXPECT_EQ(d.judged(), 6500000u);
    DropMeter clean(0, 16);
    clean.add(5000, 0);
    EXPECT_EQ(clean.packet_drop(), 0);
}

TEST(AutoScheme, LearnsTheDropRateAndTurnsToErasureCoding)
{
    // 25 ms, 100 Gbit/s, 0.1 % packet loss; the receiver starts believing the path is clean.
    Path p;
    p.loss = 1e-3;
    p.seed = 21;
    AutoRun r(p, "auto", "auto", 0);
    std::vector<Code> codes;
    for (int i = 0; i < 24; i++) {
        bool same = false;
        auto [ts, rs] = r.message(uint64_t{4} << 20, i, &same);
        ASSERT_TRUE(ts.ok && rs.ok) << ts.error << " / " << rs.error;
        EXPECT_TRUE(same) << "message " << i;
        EXPECT_EQ(ts.code, rs.code) << "message " << i;
        codes.push_back(rs.code);
    }
    PathEstimate e = r.rx->path_estimate();
    std::printf("codes: first %s, last %s; drop estimate %.3g from %llu chunks; RTT %.1f ms\n",
                to_string(codes.front()).c_str(), to_string(codes.back()).c_str(), e.drop,
                (unsigned long long)r.rx->drop_samples(), e.rtt_ms);
    EXPECT_FALSE(is_ec(codes.front().scheme));  // nothing measured yet, the hint says clean: no parity
    EXPECT_EQ(codes.back().scheme, Scheme::EcMds);
    EXPECT_GT(e.drop, 0.4e-3);
    EXPECT_LT(e.drop, 2.5e-3);
    EXPECT_GE(r.rx->drop_samples(), 24u * 64);
}

TEST(AutoScheme, SenderFollowsAFixedReceiver)
{
    Path p;
    p.loss = 1e-2;
    p.rtt_ms = 1;
    p.seed = 5;
    AutoRun r(p, "auto", "ec-xor:8,2", 0);
    bool same = false;
    auto [ts, rs] = r.message((uint64_t{3} << 20) + 777, 1, &same);
    ASSERT_TRUE(ts.ok && rs.ok) << ts.error << " / " << rs.error;
    EXPECT_TRUE(same);
    EXPECT_EQ(ts.code, (Code{Scheme::EcXor, 8, 2}));
    EXPECT_EQ(rs.code, ts.code);
    EXPECT_GT(rs.decoded_chunks, 0u);
}

TEST(AutoScheme, FixedSenderThatDisagreesGetsAClearError)
{
    // The auto receiver believes in 1 % loss and picks EC; a fixed SR sender refuses, opens and
    // closes empty both SDR messages the receiver posted, so later messages still match.
    Path p;
    p.rtt_ms = 1;
    AutoRun r(p, "sr", "auto", 1e-2);
    bool same = false;
    auto [ts, rs] = r.message(uint64_t{1} << 20, 1, &same);
    EXPECT_FALSE(ts.ok);
    EXPECT_NE(ts.error.find("the receiver uses scheme ec-mds"), std::string::npos) << ts.error;
    EXPECT_FALSE(rs.ok);
    EXPECT_TRUE(is_ec(rs.code.scheme));
    // New endpoints on the same QPs: had the sender opened one SDR message for the receiver's
    // two, this one would land in the stale parity receive and never complete.
    std::string err;
    r.tx = Endpoint::create(r.world.ctx(0), r.world.qp(0), r.wc.qp, AutoRun::config(p, "sr", 0), &err);
    r.rx = Endpoint::create(r.world.ctx(1), r.world.qp(1), r.wc.qp, AutoRun::config(p, "sr", 0), &err);
    ASSERT_TRUE(r.tx && r.rx) << err;
    auto [ts2, rs2] = r.message(uint64_t{1} << 20, 2, &same);
    EXPECT_TRUE(ts2.ok && rs2.ok) << ts2.error << " / " << rs2.error;
    EXPECT_TRUE(same);
}
