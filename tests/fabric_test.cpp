// The simulator's datacenter network: topologies, routes, ECMP, switch queues (drop-tail,
// ECN, PFC) and their counters.
#include <sdr/host/sim_hosts.hpp>
#include <sdr_stats.h>

#include <sdr/emu/capture_reader.hpp>
#include <sdr/emu/topology.hpp>
#include <sdr/emu/traffic.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

using namespace sdr;

namespace {

emu::Topology parse(const std::string& spec)
{
    emu::Topology t;
    std::string err;
    EXPECT_TRUE(emu::Topology::parse(spec, emu::LinkParams{}, &t, &err)) << err;
    return t;
}

std::string parse_error(const std::string& spec)
{
    emu::Topology t;
    std::string err;
    EXPECT_FALSE(emu::Topology::parse(spec, emu::LinkParams{}, &t, &err)) << spec;
    return err;
}

emu::FabricParams params(const std::string& topo)
{
    emu::FabricParams p;
    p.link.rtt_ms = 0.01;
    p.topology = parse(topo);
    return p;
}

}  // namespace

TEST(Topology, BuildersGiveTheTextbookShapes)
{
    emu::Topology ft = parse("fat_tree:k=4");
    EXPECT_EQ(ft.hosts, 16u);
    EXPECT_EQ(ft.switches.size(), 20u);  // 4 core, 8 aggregation, 8 edge
    EXPECT_EQ(ft.links.size(), 48u);     // 16 host links, 16 edge-agg, 16 agg-core
    emu::Topology ft8 = parse("fat_tree:k=8");
    EXPECT_EQ(ft8.hosts, 128u);
    EXPECT_EQ(ft8.switches.size(), 80u);
    emu::Topology os = parse("fat_tree:k=4,oversubscription=2");
    EXPECT_EQ(os.hosts, 32u);
    emu::Topology ls = parse("leaf_spine:leaves=4,spines=2,hosts_per_leaf=8,gbps=100,oversubscription=2");
    EXPECT_EQ(ls.hosts, 32u);
    EXPECT_EQ(ls.switches.size(), 6u);
    EXPECT_DOUBLE_EQ(ls.links.back().gbps, 200.0);  // 8 x 100 Gbit/s over 2 spines at 2:1
    emu::Topology dc = parse("two_datacenters:long_haul_rtt_ms=25");
    EXPECT_EQ(dc.hosts, 8u);  // 2 leaves x 2 hosts, in each datacenter
    EXPECT_EQ(dc.links.back().delay_ps, 12'500'000'000u);
    EXPECT_EQ(dc.switches.size(), 10u);
    // host_gbps: the hosts' links alone at their own rate
    emu::Topology slow = parse("two_datacenters:gbps=400,host_gbps=100");
    for (size_t i = 0; i + 1 < slow.links.size(); i++) {  // the last: the long haul
        const emu::TopoLink& l = slow.links[i];
        EXPECT_DOUBLE_EQ(l.gbps, slow.is_host(l.a) || slow.is_host(l.b) ? 100.0 : 400.0) << i;
    }
}

TEST(Topology, JsonFileAndTextReadTheSameKeys)
{
    const std::string path = ::testing::TempDir() + "topo.json";
    std::ofstream(path) << R"({"type": "leaf_spine", "leaves": 3, "spines": 2, "hosts_per_leaf": 2, "ecn": false,
                              "pfc": true, "buffer": "per_port", "buffer_bytes": 100000, "latency_ns": 250})";
    emu::Topology t = parse(path);
    EXPECT_EQ(t.hosts, 6u);
    EXPECT_FALSE(t.sw.ecn);
    EXPECT_TRUE(t.sw.pfc);
    EXPECT_FALSE(t.sw.shared_buffer);
    EXPECT_EQ(t.sw.buffer_bytes, 100000u);
    EXPECT_EQ(t.sw.latency_ps, 250'000u);
    emu::Topology c = parse(R"({"type": "custom", "hosts": 2, "switches": ["s"], "links": [{"a": 0, "b": 2}, {"a": 1, "b": 2, "gbps": 40}]})");
    EXPECT_EQ(c.links[1].gbps, 40.0);
}

TEST(Topology, MistakesAreNamed)
{
    EXPECT_NE(parse_error("fat_tree:k=5").find("k must be even"), std::string::npos);
    EXPECT_NE(parse_error("fat_tree:kk=4").find("unknown key 'kk'"), std::string::npos);
    EXPECT_NE(parse_error("torus").find("type must be"), std::string::npos);
    EXPECT_NE(parse_error("/nonexistent/topo.json").find("cannot be read"), std::string::npos);
    EXPECT_NE(parse_error("leaf_spine:buffer=huge").find("buffer must be"), std::string::npos);
    EXPECT_NE(parse_error(R"({"type": "custom", "hosts": 2, "switches": ["s"], "links": [{"a": 0, "b": 2}]})")
                  .find("host 1 must have exactly one link"),
              std::string::npos);
}

TEST(Network, SdrMessagesCrossALeafSpineByteExact)
{
    SimHosts h(params("leaf_spine:leaves=2,spines=2,hosts_per_leaf=2"));
    size_t a = h.connect(0, 3), b = h.connect(1, 2);
    h.post(a, 1 << 20);
    h.post(b, 3 << 19);
    h.run();
    EXPECT_TRUE(h.arrived(0));
    EXPECT_TRUE(h.arrived(1));
    h.finish();
    // Every packet crossed leaf, spine, leaf: 3 switch arrivals and one NIC arrival.
    EXPECT_EQ(h.net().hops(), 4 * h.net().delivered());
    uint64_t dropped = 0;
    for (size_t s = 0; s < h.net().switches(); s++)
        for (size_t p = 0; p < h.net().sw(s).ports(); p++) dropped += h.net().sw(s).port(p).counters().dropped;
    EXPECT_EQ(dropped, 0u);
}

TEST(Network, SimDeviceBeyondTheTopologyIsRefused)
{
    SimHosts h(params("leaf_spine:leaves=1,spines=1,hosts_per_leaf=2"));
    sdr_dev_attr da{1, 2};
    EXPECT_EQ(sdr_context_create("sim:2", &da), nullptr);
    EXPECT_NE(std::string(sdr_last_error()).find("sim:N with N in 0..1"), std::string::npos) << sdr_last_error();
}

namespace {

// What one switch port saw, by its counters and by its capture.
struct PortView {
    emu::QueueCounters c;
    uint64_t captured = 0, captured_drops = 0, captured_marks = 0;
    uint64_t delivered_to_host = 0;
    uint64_t stat_dropped = 0, stat_enqueued = 0;  // through sdr_context_stats_get
    bool complete[2] = {};
};

// Hosts 0 and 1 each send `bytes` to host 2 at once, all under one switch: the port towards
// host 2 (port 2) takes twice its rate. Captured as pcapng on that port.
PortView incast(const std::string& topo_keys, size_t bytes)
{
    // One file per test: ctest runs the tests of this program side by side.
    const std::string path = ::testing::TempDir() + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".pcapng";
    emu::FabricParams p = params("leaf_spine:leaves=1,spines=1,hosts_per_leaf=3" + topo_keys);
    p.pcap_path = path;
    p.pcap_snaplen = 128;
    p.capture_ports = {"leaf0:2"};
    PortView v;
    {
        SimHosts h(p, 4);
        size_t a = h.connect(0, 2), b = h.connect(1, 2);
        h.post(a, bytes);
        h.post(b, bytes);
        h.run();
        v.complete[0] = h.arrived(0);
        v.complete[1] = h.arrived(1);
        h.finish();
        emu::SimSwitch& leaf = h.net().sw(1);  // the spine is switch 0
        EXPECT_EQ(leaf.peer(2), 2u);
        v.c = leaf.port(2).counters();
        // pauses the leaf sent to hosts 0 and 1 are counted on their ports
        v.c.pauses_sent = leaf.port(0).counters().pauses_sent + leaf.port(1).counters().pauses_sent;
        v.delivered_to_host = leaf.port(2).pipe().delivered();
        // The stats API (and so sdr-stat) shows the same queue.
        size_t n = 0;
        EXPECT_EQ(sdr_context_stats_get(h.ctx(0), nullptr, 0, &n), SDR_SUCCESS);
        std::vector<sdr_stat> st(n);
        EXPECT_EQ(sdr_context_stats_get(h.ctx(0), st.data(), n, &n), SDR_SUCCESS);
        for (const sdr_stat& s : st) {
            if (std::string(s.name) == "switch.leaf0.p2.dropped") v.stat_dropped = s.value;
            if (std::string(s.name) == "switch.leaf0.p2.enqueued") v.stat_enqueued = s.value;
        }
    }
    std::vector<emu::CaptureRecord> recs;
    std::string err;
    EXPECT_TRUE(emu::read_capture(path, &recs, &err)) << err;
    for (const auto& r : recs) {
        if (r.iface != "leaf0:2") continue;
        if (r.flags & (1u << 24)) v.captured_drops++;
        else v.captured++;
        if (r.comment.find("ECN CE marked") != std::string::npos) v.captured_marks++;
    }
    return v;
}

}  // namespace

TEST(Switch, IncastFillsTheQueueAndDropTailDrops)
{
    PortView v = incast(",ecn=0,buffer=per_port,buffer_bytes=200000", 4 << 20);
    EXPECT_GT(v.c.dropped, 0u);
    EXPECT_FALSE(v.complete[0] && v.complete[1]) << "UC without a scheme cannot repair congestion loss";
    EXPECT_GE(v.c.peak_bytes, 200000u - 4200);
    EXPECT_LE(v.c.peak_bytes, 200000u);
    EXPECT_EQ(v.c.marked, 0u);
    // The capture agrees with the counters: a record per frame sent, one per drop.
    EXPECT_EQ(v.captured, v.c.enqueued);
    EXPECT_EQ(v.captured, v.delivered_to_host);
    EXPECT_EQ(v.captured_drops, v.c.dropped);
    EXPECT_EQ(v.stat_dropped, v.c.dropped);
    EXPECT_EQ(v.stat_enqueued, v.c.enqueued);
}

TEST(Switch, IncastUnderEcnMarksAndTheCaptureShowsEachMark)
{
    // Thresholds low enough for a short incast; DCQCN (on with ECN) answers the marks.
    PortView v = incast(",ecn=1,kmin_bytes=20000,kmax_bytes=80000,buffer=per_port,buffer_bytes=2000000", 4 << 20);
    EXPECT_GT(v.c.marked, 0u);
    EXPECT_EQ(v.c.dropped, 0u);
    EXPECT_TRUE(v.complete[0] && v.complete[1]);
    EXPECT_EQ(v.captured, v.c.enqueued);
    EXPECT_EQ(v.captured_marks, v.c.marked);
    EXPECT_EQ(v.captured_drops, 0u);
}

TEST(Switch, IncastUnderPfcPausesAndDropsNothing)
{
    PortView v = incast(",ecn=0,pfc=1,buffer=per_port,buffer_bytes=200000", 4 << 20);
    EXPECT_EQ(v.c.dropped, 0u);
    EXPECT_TRUE(v.complete[0] && v.complete[1]);
    EXPECT_GT(v.c.pauses_sent, 0u);
    EXPECT_LE(v.c.peak_bytes, 200000u);
    EXPECT_EQ(v.captured, v.c.enqueued);
    EXPECT_EQ(v.captured_drops, 0u);
}

// The queue-length log of the incast's port: rows in time order, its peak, and a gnuplot
// script that draws it.
TEST(Switch, QueueLogFollowsTheIncastQueue)
{
    const std::string csv = ::testing::TempDir() + "queue.csv";
    emu::FabricParams p = params("leaf_spine:leaves=1,spines=1,hosts_per_leaf=3,ecn=0,buffer=per_port,buffer_bytes=200000");
    p.queue_log = csv;
    p.queue_log_ports = {"leaf0:2"};
    uint64_t peak = 0;
    {
        SimHosts h(p, 4);
        size_t a = h.connect(0, 2), b = h.connect(1, 2);
        h.post(a, 1 << 20);
        h.post(b, 1 << 20);
        h.run();
        h.finish();
        peak = h.net().sw(1).port(2).counters().peak_bytes;
    }
    std::ifstream in(csv);
    std::string line;
    ASSERT_TRUE(std::getline(in, line));
    EXPECT_EQ(line, "t_us,port,bytes");
    double last_t = -1;
    uint64_t most = 0, rows = 0;
    while (std::getline(in, line)) {
        double t = std::stod(line.substr(0, line.find(',')));
        EXPECT_GE(t, last_t);
        last_t = t;
        EXPECT_NE(line.find(",leaf0:2,"), std::string::npos) << line;
        most = std::max<uint64_t>(most, std::stoull(line.substr(line.rfind(',') + 1)));
        rows++;
    }
    EXPECT_GT(rows, 10u);
    EXPECT_LE(most, peak);
    EXPECT_GT(most, peak / 2);  // sampled every microsecond: near the peak
    std::ifstream gp(csv + ".gp");
    ASSERT_TRUE(gp.good());
    if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
        ASSERT_EQ(std::system(("gnuplot '" + csv + ".gp'").c_str()), 0);
        std::ifstream svg(::testing::TempDir() + "queue.svg");
        EXPECT_TRUE(svg.good());
    }
}

// RC on a lossless fabric: an incast of 4 RC flows into one switch port. Drop-tail drops and
// RC recovers by going back; with PFC nothing is dropped and nothing sent twice.
TEST(Switch, RcIncastIsLosslessUnderPfc)
{
    for (bool pfc : {false, true}) {
        SCOPED_TRACE(pfc ? "pfc" : "drop-tail");
        emu::FabricParams p = params(std::string("leaf_spine:leaves=1,spines=1,hosts_per_leaf=5,ecn=0,buffer=per_port,"
                                                 "buffer_bytes=100000,pfc=") + (pfc ? "1" : "0"));
        emu::SimFabric f(p);
        emu::TrafficParams tp;
        tp.verify_payload = true;
        emu::TrafficGenerator g(f, tp);
        std::string err;
        ASSERT_TRUE(g.add_incast(emu::IncastWorkload{{1, 2, 3, 4}, 0, 2 << 20, 0}, &err)) << err;
        g.run();
        const emu::FctSummary s = g.summary();
        EXPECT_EQ(s.completed, 4u);
        EXPECT_EQ(s.payload_errors, 0u);
        const emu::QueueCounters& q = f.network()->sw(1).port(0).counters();  // leaf0's port to host 0
        // The senders send only data (the receiver the ACKs): beyond 512 frames a flow, resent.
        uint64_t retransmits = 0;
        for (uint32_t h = 1; h <= 4; h++) retransmits += f.find_nic(h)->counters().tx_frames - 512;
        if (pfc) {
            EXPECT_EQ(q.dropped, 0u);
            EXPECT_EQ(retransmits, 0u);
            EXPECT_GT(f.network()->sw(1).port(1).counters().pauses_sent, 0u);
        } else {
            EXPECT_GT(q.dropped, 0u);
            EXPECT_GT(retransmits, 0u);
        }
    }
}

TEST(Network, BaseRttAddsEveryHopOnceEachWay)
{
    // 2 hosts a leaf, 2 spines: uplinks at 100 Gbit/s as the host links
    emu::FabricParams p = params("leaf_spine:leaves=2,spines=2,hosts_per_leaf=2,gbps=100,delay_us=1,latency_ns=500");
    emu::SimFabric f(p);
    // 4 links each way, 3 of them into a switch (+0.5 us); 3 switches serialise a 1000 B frame
    // (+24 B of wire overhead) at 100 Gbit/s one way, a 100 B one back.
    const emu::SimTime want = 2 * (4'000'000 + 3 * 500'000) + 3 * 81'920 + 3 * 9'920;
    EXPECT_EQ(f.network()->base_rtt_ps(0, 2, 1000, 100), want);
}

// The traffic generator's ideal on a network: a flow alone crosses leaf, spine, leaf in its
// ideal time (slowdown 1).
TEST(Network, ALoneRcFlowTakesItsIdealTimeAcrossSwitches)
{
    emu::FabricParams p = params("leaf_spine:leaves=2,spines=2,hosts_per_leaf=2");
    emu::SimFabric f(p);
    emu::TrafficGenerator g(f);
    std::string err;
    for (uint64_t size : {uint64_t{1}, uint64_t{4096}, uint64_t{1} << 20})
        ASSERT_TRUE(g.add_flow(0, 2, size, size * 1000, &err)) << err;  // one after the other
    g.run();
    ASSERT_EQ(g.summary().completed, 3u);
    for (const emu::FlowRecord& r : g.records()) EXPECT_NEAR(r.slowdown, 1.0, 0.01) << r.size_bytes << " bytes";
}
