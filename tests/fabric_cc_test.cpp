// Congestion control and path diversity on the simulator's network: ECMP over SDR's channels,
// packet spraying, ECN marks, and DCQCN's fair share and short queues.
#include <sdr/emu/topology.hpp>
#include <sdr/host/sim_hosts.hpp>
#include <sdr_stats.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

using namespace sdr;

namespace {

emu::FabricParams params(const std::string& topo)
{
    emu::FabricParams p;
    p.link.rtt_ms = 0.01;
    p.payload = false;
    std::string err;
    emu::Topology t;
    EXPECT_TRUE(emu::Topology::parse(topo, p.link, &t, &err)) << err;
    p.topology = t;
    return p;
}

// Data packets a switch sent out of each of its ports to the spines (ports 1..n: the host's is 0).
std::vector<uint64_t> per_path(emu::SimSwitch& leaf, size_t paths)
{
    std::vector<uint64_t> n;
    for (size_t p = 1; p <= paths; p++) n.push_back(leaf.port(p).counters().enqueued);
    return n;
}

// Receive packets of each SDR QP of a context, by the stats API.
std::map<std::string, uint64_t> stats(sdr_context* ctx)
{
    size_t n = 0;
    sdr_context_stats_get(ctx, nullptr, 0, &n);
    std::vector<sdr_stat> v(n);
    sdr_context_stats_get(ctx, v.data(), n, &n);
    std::map<std::string, uint64_t> m;
    for (const sdr_stat& s : v) m[s.name] = s.value;
    return m;
}

}  // namespace

// 8 channels between two hosts whose leaves 8 spines join: each channel is a QP with its own
// UDP source port (Linux's fold of the QPN pair), so ECMP spreads the channels over the spines.
TEST(Ecmp, SpreadsEightChannelsOverEightPaths)
{
    SimHosts h(params("leaf_spine:leaves=2,spines=8,hosts_per_leaf=1"), 8);
    const size_t bytes = 8 << 20;  // 128 chunks of 64 KiB: 16 per channel
    h.post(h.connect(0, 1), bytes);
    h.run();
    ASSERT_TRUE(h.arrived(0));
    emu::SimSwitch& leaf0 = h.net().sw(8);  // spines come first
    ASSERT_EQ(h.net().switch_name(8), "leaf0");
    const uint64_t per_channel = bytes / 4096 / 8;
    uint64_t total = 0, used = 0;
    for (uint64_t n : per_path(leaf0, 8)) {
        // Control datagrams go their own way; data packets come in whole channels.
        const uint64_t channels = n / per_channel;
        EXPECT_LE(channels, 3u) << "a path carries more than 3 channels";
        total += channels;
        used += channels > 0;
        std::printf("  path: %llu packets, %llu channels\n", (unsigned long long)n, (unsigned long long)channels);
    }
    EXPECT_EQ(total, 8u);
    EXPECT_GE(used, 4u);
}

// One QP that sprays: its packets spread over the 8 spines within 10 % of an even share.
TEST(Spray, SpreadsOneQpOverAllPathsWithinTenPercent)
{
    SimHosts h(params("leaf_spine:leaves=2,spines=8,hosts_per_leaf=1"), 1);
    sdr_qp_attr_ext ext{0, SDR_LIFETIME_FROM_PATH, SDR_TRANSPORT_UC, 1};
    const size_t bytes = 64 << 20;  // 16384 packets: 2048 a path if even
    h.post(h.connect(0, 1, sdr_qp_attr{16, 30, 4, SDR_MTU_4096, 1, 1, 0}, ext), bytes);
    h.run();
    ASSERT_TRUE(h.arrived(0)) << "a UC QP takes packets out of order";
    const std::vector<uint64_t> n = per_path(h.net().sw(8), 8);
    uint64_t total = 0;
    for (uint64_t x : n) total += x;
    ASSERT_GE(total, bytes / 4096);
    for (uint64_t x : n) {
        EXPECT_NEAR(static_cast<double>(x), total / 8.0, total / 8.0 * 0.10);
        std::printf("  path: %llu packets (even share %.0f)\n", (unsigned long long)x, total / 8.0);
    }
}

// Two long flows into one 100 Gbit/s port, the second starting 2 ms after the first: DCQCN
// (on with ECN) brings them to within 10 % of a fair share, with no drop, by marks alone.
TEST(Dcqcn, TwoLongFlowsConvergeToAFairShare)
{
    SimHosts h(params("leaf_spine:leaves=1,spines=1,hosts_per_leaf=3"), 1);
    const sdr_qp_attr big{16, 31, 1, SDR_MTU_4096, 1, 1, 0};  // 1 GiB slots
    const size_t a = h.connect(0, 2, big), b = h.connect(1, 2, big);
    h.post(a, size_t{1} << 30);
    h.fabric().advance_to(2'000'000'000);  // 2 ms
    h.post(b, size_t{1} << 30);
    auto rx = [&] {
        auto s = stats(h.ctx(2));
        return std::pair{s["qp.0.rx_packets"], s["qp.1.rx_packets"]};
    };
    h.fabric().advance_to(20'000'000'000);  // converged
    auto [a0, b0] = rx();
    h.fabric().advance_to(40'000'000'000);
    auto [a1, b1] = rx();
    const double da = static_cast<double>(a1 - a0), db = static_cast<double>(b1 - b0), fair = (da + db) / 2;
    std::printf("  20-40 ms: flow A %.0f packets, flow B %.0f (fair share %.0f)\n", da, db, fair);
    EXPECT_NEAR(da, fair, 0.1 * fair);
    EXPECT_NEAR(db, fair, 0.1 * fair);
    EXPECT_GT(da + db, 0.9 * 20e-3 * 100e9 / 8 / 4174) << "the link stays busy";
    const emu::QueueCounters& q = h.net().sw(1).port(2).counters();
    EXPECT_EQ(q.dropped, 0u);
    EXPECT_GT(q.marked, 0u);
    EXPECT_GT(h.fabric().find_nic(2)->counters().cnp_sent, 0u);
    h.run();
}

// A 4:1 incast of long flows: the queue rises past Kmax as it starts, and DCQCN brings it back
// under Kmax to stay (sampled every 10 us over the second half).
TEST(Dcqcn, IncastQueueSettlesUnderKmax)
{
    SimHosts h(params("leaf_spine:leaves=1,spines=1,hosts_per_leaf=5"), 1);
    for (uint32_t s = 1; s <= 4; s++) h.post(h.connect(s, 0, sdr_qp_attr{16, 29, 1, SDR_MTU_4096, 1, 1, 0}), size_t{256} << 20);
    emu::Egress& q = h.net().sw(1).port(0);
    ASSERT_EQ(h.net().sw(1).peer(0), 0u);
    uint64_t late_max = 0;
    for (uint64_t t = 10'000'000; t <= 40'000'000'000; t += 10'000'000) {
        h.fabric().advance_to(t);
        if (t > 20'000'000'000) late_max = std::max(late_max, q.counters().bytes);
    }
    std::printf("  peak %llu bytes, after 20 ms at most %llu, Kmax %llu\n", (unsigned long long)q.counters().peak_bytes,
                (unsigned long long)late_max, (unsigned long long)q.kmax());
    EXPECT_GT(q.counters().peak_bytes, q.kmin());
    EXPECT_LT(late_max, q.kmax());
    EXPECT_EQ(q.counters().dropped, 0u);
    h.run();
}
