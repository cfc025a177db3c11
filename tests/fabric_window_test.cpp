// The switches' windows (emu/sim network_sweep.cpp): as wide as the shortest hop between two
// switches, and what the switches do does not depend on that width.
#include <sdr/host/sim_hosts.hpp>

#include <sdr/emu/capture_reader.hpp>
#include <sdr/emu/topology.hpp>

#include <gtest/gtest.h>

#include <tuple>

using namespace sdr;

namespace {

emu::FabricParams params(const std::string& topo, bool payload)
{
    emu::FabricParams p;
    p.link.rtt_ms = 0.01;
    p.payload = payload;
    p.topology.emplace();
    std::string err;
    EXPECT_TRUE(emu::Topology::parse(topo, p.link, &*p.topology, &err)) << err;
    return p;
}

// Everything the switches did, port by port, and what the hosts saw.
struct Outcome {
    std::vector<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t, emu::SimTime, uint64_t>> ports;
    uint64_t hops = 0, delivered = 0, windows = 0;
    emu::SimTime end = 0;
    std::vector<bool> complete;
    bool operator==(const Outcome& o) const
    {
        return ports == o.ports && hops == o.hops && delivered == o.delivered && end == o.end && complete == o.complete;
    }
};

// Hosts 0, 1 and 2 send 2 MiB each to host 3 at once; window_ps narrows the windows (0: as built).
Outcome incast(const std::string& topo, emu::SimTime window_ps)
{
    SimHosts h(params(topo, false));
    if (window_ps) h.net().narrow_windows(window_ps);
    for (uint32_t s = 0; s < 3; s++) h.connect(s, 3);
    for (uint32_t s = 0; s < 3; s++) h.post(s, 2 << 20);
    h.run();
    Outcome o;
    for (size_t k = 0; k < 3; k++) o.complete.push_back(h.arrived(k));
    h.finish();
    for (size_t s = 0; s < h.net().switches(); s++)
        for (size_t p = 0; p < h.net().sw(s).ports(); p++) {
            const emu::QueueCounters& c = h.net().sw(s).port(p).counters();
            o.ports.emplace_back(c.enqueued, c.dropped, c.marked, c.peak_bytes, c.paused_ps, c.pauses_sent);
        }
    o.hops = h.net().hops();
    o.delivered = h.net().delivered();
    o.windows = h.net().windows();
    o.end = h.fabric().sim().now();
    return o;
}

const char* kLeafSpine = "leaf_spine:leaves=2,spines=2,hosts_per_leaf=2";

}  // namespace

TEST(Windows, AreAsWideAsTheShortestHop)
{
    // 1 us of propagation and 0.5 us of hop latency; a PFC pause crosses the link alone.
    EXPECT_EQ(SimHosts(params(kLeafSpine, false)).net().lookahead_ps(), 1'500'000u);
    EXPECT_EQ(SimHosts(params(std::string(kLeafSpine) + ",pfc=1", false)).net().lookahead_ps(), 1'000'000u);
    EXPECT_EQ(SimHosts(params(std::string(kLeafSpine) + ",delay_us=2,latency_ns=250", false)).net().lookahead_ps(),
              2'250'000u);
    // One window serves many hops.
    Outcome o = incast(std::string(kLeafSpine) + ",ecn=0", 0);
    EXPECT_GT(o.hops, 0u);
    EXPECT_LT(o.windows * 4, o.hops);
}

// Marks (RED's draws), drop-tail in a shared buffer, and PFC pauses: the same, port by port and
// to the picosecond, in windows a third to a fifth as wide (and not a divisor of the hops' times).
TEST(Windows, NarrowerWindowsChangeNothing)
{
    for (const char* sw : {",ecn=1,kmin_bytes=20000,kmax_bytes=80000", ",ecn=0,buffer_bytes=300000,reserve_bytes=4096",
                           ",ecn=0,pfc=1,buffer=per_port,buffer_bytes=200000"}) {
        const std::string topo = std::string(kLeafSpine) + sw;
        Outcome wide = incast(topo, 0), narrow = incast(topo, 297'000);
        EXPECT_GT(narrow.windows, wide.windows * 2) << topo;
        EXPECT_TRUE(wide == narrow) << topo << ": hops " << wide.hops << " / " << narrow.hops << ", end " << wide.end
                                    << " / " << narrow.end;
        uint64_t dropped = 0, marked = 0, pauses = 0;
        for (const auto& p : wide.ports) dropped += std::get<1>(p), marked += std::get<2>(p), pauses += std::get<5>(p);
        EXPECT_GT(dropped + marked + pauses, 0u) << topo << ": the incast must congest the port";
    }
}

// Links without delay leave no lookahead: a window is one instant, run again until nothing more
// is due in it.
TEST(Windows, LinksWithoutDelayStillDeliverEveryByte)
{
    {
        SimHosts h(params(std::string(kLeafSpine) + ",delay_us=0,latency_ns=0", true));
        EXPECT_EQ(h.net().lookahead_ps(), 0u);
        size_t a = h.connect(0, 3), b = h.connect(1, 2);
        h.post(a, 1 << 20);
        h.post(b, 1 << 20);
        h.run();
        EXPECT_TRUE(h.arrived(0));
        EXPECT_TRUE(h.arrived(1));
        h.finish();
        EXPECT_EQ(h.net().hops(), 4 * h.net().delivered());
    }  // one SimHosts at a time: each makes the process's fabric
    // PFC without delay: pause frames reach the upstream port in the same instant.
    Outcome o = incast(std::string(kLeafSpine) + ",delay_us=0,latency_ns=0,ecn=0,pfc=1,buffer=per_port,buffer_bytes=200000", 0);
    uint64_t dropped = 0, pauses = 0;
    for (const auto& p : o.ports) dropped += std::get<1>(p), pauses += std::get<5>(p);
    EXPECT_GT(pauses, 0u);
    EXPECT_EQ(dropped, 0u);
    EXPECT_EQ(o.complete, std::vector<bool>(3, true));
}

// At equal times arrivals go by the port they came in by, then in their pipe's order: the order is
// the packets' own, not the order in which a window happens to take them. Hosts 0 and 1 (leaf
// ports 0 and 1) send at once over equal links, so pairs of their packets reach the leaf at the
// same picosecond; the capture of the port towards host 2 shows host 0's leaving first each time.
// Without PFC the switch merges its ports' arrivals; with PFC it takes every step in one time
// order: the same rule both ways.
TEST(Windows, ArrivalsAtEqualTimesGoByTheirPort)
{
    for (const char* sw : {",ecn=0", ",ecn=0,pfc=1"}) {
        SCOPED_TRACE(sw);
        const std::string path = ::testing::TempDir() + "equal_times.pcapng";
        emu::FabricParams p = params(std::string("leaf_spine:leaves=1,spines=1,hosts_per_leaf=3") + sw, false);
        p.pcap_path = path;
        p.pcap_snaplen = 64;
        p.capture_ports = {"leaf0:2"};
        {
            SimHosts h(p, 4);
            size_t a = h.connect(0, 2), b = h.connect(1, 2);
            h.post(a, 256 << 10);
            h.post(b, 256 << 10);
            h.run();
            EXPECT_TRUE(h.arrived(0));
            EXPECT_TRUE(h.arrived(1));
            h.finish();
        }
        std::vector<emu::CaptureRecord> recs;
        std::string err;
        ASSERT_TRUE(emu::read_capture(path, &recs, &err)) << err;
        std::string order;
        for (const emu::CaptureRecord& r : recs)
            if (r.origlen > 1000 && r.bytes.size() > 29) order += static_cast<char>('0' + r.bytes[29] - 1);  // IPv4 source 10.0.0.(host + 1)
        // The k-th packet of host 0 leaves before the k-th of host 1, every time.
        std::vector<size_t> at[2];
        for (size_t i = 0; i < order.size(); i++)
            if (order[i] == '0' || order[i] == '1') at[order[i] - '0'].push_back(i);
        ASSERT_GE(at[0].size(), 64u) << order;  // 256 KiB, in packets of at most 4 KiB
        ASSERT_EQ(at[0].size(), at[1].size()) << order;
        for (size_t k = 0; k < at[0].size(); k++) EXPECT_LT(at[0][k], at[1][k]) << "packet " << k << ": " << order;
    }
}
