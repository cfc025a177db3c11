// sdr_sweep's fabric experiment (tools/experiment/fabric.hpp) on a tiny grid: one size, no
// background and a heavy one. Without background nothing is lost and SR and EC take their
// lossless times (they differ by EC's parity alone); with the long haul 90 % busy, SDR's packets
// are dropped at the gateway's queue, in bursts. Counters, not timings, decide.
#include "fabric.hpp"

#include <sdr/emu/fabric.hpp>
#include <sdr/emu/topology.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace {

using sdr::exp::FabricRow;

TEST(FabricExperiment, CongestionAloneLosesSdrPackets)
{
    sdr::exp::FabricSweep s;
    s.utilisations = {0, 0.9};
    s.sizes = {16ull << 20};  // 1 MiB crosses before the gateway's buffer fills
    s.samples = 3;
    s.warmup_rtts = 2;
    s.period_rtts = 4;
    const std::string csv = ::testing::TempDir() + "fabric.csv";
    std::vector<FabricRow> rows;
    std::string err;
    ASSERT_TRUE(sdr::exp::run_fabric_experiment(s, 1, csv, &rows, &err)) << err;
    std::ifstream f(csv);
    std::string header;
    ASSERT_TRUE(std::getline(f, header));
    EXPECT_EQ(header, sdr::exp::kFabricHeader);
    ASSERT_EQ(rows.size(), 4u);  // utilisation x scheme, in grid order
    const FabricRow &sr0 = rows[0], &ec0 = rows[1], &sr9 = rows[2], &ec9 = rows[3];
    EXPECT_EQ(sr0.scheme, "sr");
    EXPECT_EQ(ec0.scheme, "ec-mds:32/8");
    EXPECT_EQ(sr9.utilisation, 0.9);
    EXPECT_NEAR(sr9.host_load, 0.9, 1e-9);  // 7 senders in DC 0 besides sim:0, at 100/7 Gbit/s
    for (const FabricRow& r : rows) {
        EXPECT_EQ(r.samples, 3u);
        EXPECT_EQ(r.failed, 0u) << r.scheme;
        EXPECT_GT(r.sdr_packets, 3u * 4096) << r.scheme;  // 16 MiB is 4096 packets of 4 KiB
    }
    for (const FabricRow* r : {&sr0, &ec0}) {
        EXPECT_EQ(r->sdr_drops, 0u) << r->scheme;
        EXPECT_EQ(r->bursts, 0u);
        EXPECT_EQ(r->ack_drops, 0u);
        EXPECT_EQ(r->gateway_drop_rate, 0.0);
        EXPECT_EQ(r->bg_flows, 0u);
        EXPECT_EQ(r->retransmitted, 0.0);
        EXPECT_EQ(r->decoded, 0.0);
        EXPECT_EQ(r->mean_ms, r->max_ms);  // every sample alike
        EXPECT_NEAR(r->mean_ms / r->lossless_ms, 1.0, 0.01) << r->scheme;
    }
    // SR and EC differ by the lossless difference alone (EC's waited-for parity).
    EXPECT_NEAR(ec0.mean_ms - sr0.mean_ms, ec0.lossless_ms - sr0.lossless_ms, 0.01 * sr0.lossless_ms);
    for (const FabricRow* r : {&sr9, &ec9}) {
        EXPECT_GT(r->sdr_drops, 0u) << r->scheme;
        EXPECT_GT(r->bursts, 0u);
        EXPECT_LE(r->bursts, r->sdr_drops);
        EXPECT_GT(r->sdr_drop_rate, 0.0);
        EXPECT_GT(r->gateway_drop_rate, 0.0);
        EXPECT_GT(r->bg_flows, 0u);
    }
    EXPECT_GT(sr9.retransmitted, 0.0);
    EXPECT_DOUBLE_EQ(sr0.over_first, 1.0);
}

TEST(FabricExperiment, TheLongHaulIsTheBottleneck)
{
    sdr::exp::FabricSweep s;
    sdr::emu::Topology t;
    std::string err;
    ASSERT_TRUE(sdr::emu::Topology::parse(s.topology(), sdr::emu::LinkParams{}, &t, &err)) << err;
    EXPECT_EQ(t.hosts, 16u);
    EXPECT_FALSE(t.sw.ecn);
    EXPECT_FALSE(t.sw.pfc);
    double senders = 0;
    for (const sdr::emu::TopoLink& l : t.links) {
        if (!t.is_host(l.a)) continue;
        const bool sender = l.a >= 2 && l.a % 2 == 0;  // DC 0's hosts but sim:0
        EXPECT_DOUBLE_EQ(l.gbps, sender ? 100.0 / 7 : 100.0) << l.a;
        senders += sender ? l.gbps : 0;
    }
    EXPECT_NEAR(senders, 100.0, 1e-9);  // together, the long haul's rate
    EXPECT_DOUBLE_EQ(t.links.back().gbps, 100.0);
    EXPECT_EQ(t.links.back().delay_ps, 12'500'000'000u);
    const sdr::exp::LinkSetup l = s.link(1 << 20, 7);
    EXPECT_EQ(l.bw_gbps, 100.0);
    EXPECT_EQ(l.drop, 0.0);
    EXPECT_TRUE(l.drop_log);
}

}  // namespace
