// The traffic generator (emu/sim/include/sdr/emu/traffic.hpp) on the simulator: flow-size CDFs
// (our format, the built-in web search and data mining distributions, errors that name the
// line), sampling against the CDF's mean, Poisson arrivals against the load formula, every flow
// completing with its bytes exact (with and without loss), the ideal FCT on an idle fabric,
// permutations (derangement, htsim's shift), incast, the CSV, and replay from the seed.
#include <sdr/emu/traffic.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace sdr::emu;

namespace {

FabricParams fabric_params(uint64_t seed = 1, double loss = 0, bool payload = true)
{
    FabricParams p;
    p.link.rtt_ms = 0.01;  // 10 us: a datacenter round trip
    p.link.bandwidth_gbps = 100;
    p.link.impairment.loss = loss;
    p.payload = payload;
    p.seed = seed;
    return p;
}

FlowSizeCdf cdf(const std::string& text)
{
    FlowSizeCdf c;
    std::string err;
    EXPECT_TRUE(FlowSizeCdf::parse(text, &c, &err)) << err;
    return c;
}

std::vector<uint32_t> range(uint32_t n, uint32_t first = 0, uint32_t step = 1)
{
    std::vector<uint32_t> v;
    for (uint32_t i = 0; i < n; i++) v.push_back(first + i * step);
    return v;
}

std::string csv(const TrafficGenerator& g)
{
    std::ostringstream o;
    g.write_csv(o);
    return o.str();
}

std::vector<std::string> split(const std::string& s, char sep)
{
    std::vector<std::string> v;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, sep)) v.push_back(cur);
    return v;
}

constexpr SimTime kUs = 1'000'000;  // ps

// ---- CDFs ---------------------------------------------------------------------------------

TEST(FlowSizeCdf, BuiltinsParseWithTheirPublishedPoints)
{
    EXPECT_EQ(FlowSizeCdf::builtin_names(), (std::vector<std::string>{"websearch", "datamining"}));
    FlowSizeCdf ws, dm;
    std::string err;
    ASSERT_TRUE(FlowSizeCdf::named("websearch", &ws, &err)) << err;
    ASSERT_TRUE(FlowSizeCdf::named("datamining", &dm, &err)) << err;
    EXPECT_EQ(ws.name(), "websearch");
    ASSERT_EQ(ws.points().size(), 12u);
    EXPECT_EQ(ws.points()[5].bytes, 80000);
    EXPECT_DOUBLE_EQ(ws.points()[5].p, 0.53);
    EXPECT_EQ(ws.points().back().bytes, 30e6);
    ASSERT_EQ(dm.points().size(), 13u);
    EXPECT_EQ(dm.points()[5].bytes, 1100);
    EXPECT_DOUBLE_EQ(dm.points()[5].p, 0.5);
    EXPECT_EQ(dm.points().back().bytes, 1e9);
    // The mean under linear interpolation: sum of segment midpoints times their probability.
    EXPECT_DOUBLE_EQ(ws.mean_bytes(), 1711250);
    EXPECT_NEAR(dm.mean_bytes(), 12658198.6, 1e-3);
}

TEST(FlowSizeCdf, BadTextIsRefusedNamingTheLine)
{
    struct Case {
        const char* text;
        const char* error;
    } cases[] = {
        {"", "no points"},
        {"# only a comment\n\n", "no points"},
        {"0 0\n100 abc\n", "line 2: expected 'size_bytes cumulative_probability', got '100 abc'"},
        {"0 0\n100 0.5 7\n", "line 2: expected 'size_bytes cumulative_probability', got '100 0.5 7'"},
        {"0 0\n100 15\n200 100\n", "line 2: probability 15 outside [0, 1] (a percentage?)"},
        {"0 0\n-5 0.5\n", "line 2: size -5 is negative"},
        {"0 0\n100 0.5\n50 1\n", "line 3: size 50 below the previous point's 100"},
        {"0 0\n100 0.5\n200 0.4\n300 1\n", "line 3: probability 0.4 below the previous point's 0.5"},
        {"0 0\n100 0.5\n", "the last probability is 0.5, not 1"},
    };
    for (const Case& c : cases) {
        FlowSizeCdf out = cdf("7 1");
        std::string err;
        EXPECT_FALSE(FlowSizeCdf::parse(c.text, &out, &err)) << c.text;
        EXPECT_EQ(err, c.error) << c.text;
        ASSERT_EQ(out.points().size(), 1u);  // kept as it was
        EXPECT_EQ(out.points()[0].bytes, 7);
    }
    FlowSizeCdf out;
    std::string err;
    EXPECT_FALSE(FlowSizeCdf::named("/nonexistent/x.cdf", &out, &err));
    EXPECT_EQ(err, "/nonexistent/x.cdf: neither a built-in distribution (websearch, datamining) nor a readable file");
}

TEST(FlowSizeCdf, AFileInOurFormatLoads)
{
    const std::string path = testing::TempDir() + "traffic_test.cdf";
    {
        FILE* f = std::fopen(path.c_str(), "w");
        ASSERT_TRUE(f);
        std::fputs("# a comment\n  1000 0   # sizes in bytes\n\n3000\t1\n", f);
        std::fclose(f);
    }
    FlowSizeCdf c;
    std::string err;
    ASSERT_TRUE(FlowSizeCdf::named(path, &c, &err)) << err;
    EXPECT_EQ(c.name(), path);
    EXPECT_DOUBLE_EQ(c.mean_bytes(), 2000);
    std::ofstream(path) << "0 0\n5 2\n";
    EXPECT_FALSE(FlowSizeCdf::named(path, &c, &err));
    EXPECT_EQ(err, path + ": line 2: probability 2 outside [0, 1] (a percentage?)");
    std::remove(path.c_str());
}

TEST(FlowSizeCdf, SamplesMatchTheMeanAndInterpolateLinearly)
{
    for (const char* name : {"websearch", "datamining"}) {
        FlowSizeCdf c;
        std::string err;
        ASSERT_TRUE(FlowSizeCdf::named(name, &c, &err)) << err;
        Rng rng(42);
        const int n = 1'000'000;
        double sum = 0;
        uint64_t lo = UINT64_MAX, hi = 0;
        for (int i = 0; i < n; i++) {
            const uint64_t s = c.sample(rng);
            sum += static_cast<double>(s);
            lo = std::min(lo, s);
            hi = std::max(hi, s);
        }
        EXPECT_NEAR(sum / n / c.mean_bytes(), 1.0, 0.02) << name;
        EXPECT_GE(lo, 1u) << name;
        EXPECT_LE(static_cast<double>(hi), c.points().back().bytes) << name;
    }
    // Linear within a segment: 0..1000 uniform, so a quarter falls below 250; a first point with
    // probability 0.5 is a mass there.
    FlowSizeCdf u = cdf("0 0\n1000 1\n"), mass = cdf("64 0.5\n128 1\n");
    Rng rng(7);
    int below = 0, at64 = 0;
    for (int i = 0; i < 100'000; i++) {
        below += u.sample(rng) < 250;
        at64 += mass.sample(rng) == 64;
    }
    EXPECT_NEAR(below / 1e5, 0.25, 0.01);
    EXPECT_NEAR(at64 / 1e5, 0.5 + 0.5 / 64, 0.01);  // the mass, and the segment's first 1/64 rounding to 64
}

// ---- workloads ----------------------------------------------------------------------------

TEST(TrafficGenerator, PoissonArrivalsMatchTheLoad)
{
    // 1000-byte flows: mean_gap = 1000 * 8 / (0.5 * 100 Gbit/s * 8 hosts) = 20 ns, so 200 us
    // hold 10000 arrivals (Poisson: sd 100).
    SimFabric f(fabric_params(3, 0, false));
    TrafficGenerator g(f);
    std::string err;
    ASSERT_TRUE(g.add_poisson(PoissonWorkload{range(8), 0.5, cdf("1000 1"), 0, 200 * kUs, {}}, &err)) << err;
    g.run();
    ASSERT_TRUE(g.done());
    const FctSummary s = g.summary();
    EXPECT_EQ(s.failed, 0u);
    EXPECT_EQ(s.completed, s.flows);
    EXPECT_NEAR(static_cast<double>(s.flows), 10000, 400);
    std::vector<bool> seen(8 * 8);
    for (const FlowRecord& r : g.records()) {
        EXPECT_NE(r.src, r.dst);
        EXPECT_LT(r.start_ns, 200'000u);
        seen[r.src * 8 + r.dst] = true;
    }
    for (uint32_t a = 0; a < 8; a++)  // every ordered pair drawn
        for (uint32_t b = 0; b < 8; b++) EXPECT_EQ(seen[a * 8 + b], a != b) << a << "->" << b;
}

// With destinations, every flow goes from a host of one set to a host of the other (two
// datacenters' hosts across their long haul), and the senders offer the load as before.
TEST(TrafficGenerator, PoissonWithDestinationsCrossesBetweenTheSets)
{
    SimFabric f(fabric_params(5, 0, false));
    TrafficGenerator g(f);
    std::string err;
    // 2, 4, 6, 8 send to 3, 5, 7, 9
    PoissonWorkload w{range(4, 2, 2), 0.5, cdf("1000 1"), 0, 200 * kUs, range(4, 3, 2)};
    ASSERT_TRUE(g.add_poisson(w, &err)) << err;
    g.run();
    ASSERT_TRUE(g.done());
    const FctSummary s = g.summary();
    EXPECT_EQ(s.completed, s.flows);
    // mean_gap = 1000 * 8 / (0.5 * 100 Gbit/s * 4 senders) = 40 ns: 5000 arrivals (sd 71)
    EXPECT_NEAR(static_cast<double>(s.flows), 5000, 300);
    std::set<std::pair<uint32_t, uint32_t>> pairs;
    for (const FlowRecord& r : g.records()) {
        EXPECT_EQ(r.src % 2, 0u);
        EXPECT_EQ(r.dst % 2, 1u);
        pairs.insert({r.src, r.dst});
    }
    EXPECT_EQ(pairs.size(), 16u);  // every sender to every destination
    w.dsts = {3, 4};
    EXPECT_FALSE(g.add_poisson(w, &err));
    EXPECT_EQ(err, "poisson: at least 1 host and 1 destination, each once, none both");
    w.hosts.clear();
    EXPECT_FALSE(g.add_poisson(w, &err));
}

TEST(TrafficGenerator, EveryFlowCompletesWithItsBytesExact)
{
    // Sizes 1 B..3 MB in WQEs of 256 KiB, at most 4 outstanding: split messages, a refilled
    // window, WRITE with immediate last; lossless and at 1 % loss (RC's go-back-N).
    for (double loss : {0.0, 0.01}) {
        SimFabric f(fabric_params(5, loss));
        TrafficParams tp;
        tp.wqe_bytes = 256 << 10;
        tp.max_outstanding = 4;
        tp.verify_payload = true;
        TrafficGenerator g(f, tp);
        std::string err;
        ASSERT_TRUE(g.add_poisson(PoissonWorkload{range(4), 0.4, cdf("1 0\n3000000 1"), 0, 2000 * kUs, {}}, &err)) << err;
        ASSERT_TRUE(g.add_flow(0, 1, 1, 10 * kUs, &err)) << err;
        g.run();
        ASSERT_TRUE(g.done());
        const FctSummary s = g.summary();
        EXPECT_GT(s.flows, 15u);  // about 27
        EXPECT_EQ(s.completed, s.flows) << "loss " << loss;
        EXPECT_EQ(s.failed, 0u);
        EXPECT_EQ(s.payload_errors, 0u);
        uint64_t multi = 0;
        for (const FlowRecord& r : g.records()) {
            EXPECT_GT(r.rx_fct_ns, 0u);
            EXPECT_LT(r.rx_fct_ns, r.fct_ns);  // the receiver sees the end before the ACK returns
            multi += r.size_bytes > 4 * tp.wqe_bytes;
        }
        EXPECT_GT(multi, 0u);  // some flows needed the window refilled
        uint64_t dropped = 0;
        for (uint32_t a = 0; a < 4; a++)
            for (uint32_t b = 0; b < 4; b++)
                if (SimLink* l = a != b ? f.link(a, b) : nullptr) dropped += l->dropped();
        EXPECT_EQ(dropped > 0, loss > 0);
    }
}

TEST(TrafficGenerator, AFlowAloneTakesItsIdealTime)
{
    // Every wire byte at the link rate plus one round trip and its ACK: slowdown 1 (the port
    // serialises to the picosecond; the ideal is rounded to it).
    for (uint64_t size : {uint64_t{1}, uint64_t{4096}, uint64_t{100'000}, uint64_t{3} << 20}) {
        SimFabric f(fabric_params());
        TrafficGenerator g(f);
        std::string err;
        ASSERT_TRUE(g.add_flow(2, 5, size, 7 * kUs, &err)) << err;
        g.run();
        ASSERT_EQ(g.records().size(), 1u);
        const FlowRecord& r = g.records()[0];
        EXPECT_EQ(r.start_ns, 7000u);
        EXPECT_EQ(r.ideal_fct_ns, g.ideal_fct_ps(2, 5, size) / kPsPerNs);
        EXPECT_NEAR(r.slowdown, 1.0, 2e-3) << size;
        EXPECT_GE(r.slowdown, 1.0 - 1e-6) << size;
    }
    // A topology's base RTT replaces the fabric's.
    SimFabric f(fabric_params());
    TrafficParams tp;
    tp.base_rtt = [](uint32_t, uint32_t) { return SimTime{1'000'000}; };
    TrafficGenerator g(f, tp);
    TrafficGenerator plain(f);
    // The fabric's: 10 us of propagation and an ACK frame (62 B + 24 B of preamble, gap, FCS)
    // at 100 Gbit/s, 6880 ps.
    EXPECT_EQ(plain.ideal_fct_ps(0, 1, 1000) - g.ideal_fct_ps(0, 1, 1000), 10'000'000u + 6880u - 1'000'000u);
}

TEST(TrafficGenerator, PermutationIsADerangementOrHtsimsShift)
{
    const std::vector<uint32_t> hosts = range(16, 3, 2);  // 3, 5, ..., 33: not the NICs 0..n-1
    for (bool shift : {false, true}) {
        SimFabric f(fabric_params(11));
        TrafficGenerator g(f);
        std::string err;
        ASSERT_TRUE(g.add_permutation(PermutationWorkload{hosts, 64 << 10, 5 * kUs, shift}, &err)) << err;
        g.run();
        ASSERT_EQ(g.records().size(), hosts.size());
        std::set<uint32_t> srcs, dsts;
        for (const FlowRecord& r : g.records()) {
            EXPECT_NE(r.src, r.dst);
            EXPECT_EQ(r.start_ns, 5000u);
            EXPECT_EQ(r.size_bytes, 64u << 10);
            srcs.insert(r.src);
            dsts.insert(r.dst);
            if (shift) {
                const size_t i = (r.src - 3) / 2;
                EXPECT_EQ(r.dst, hosts[(i + hosts.size() / 2) % hosts.size()]);
            }
        }
        EXPECT_EQ(srcs, std::set<uint32_t>(hosts.begin(), hosts.end()));
        EXPECT_EQ(dsts, srcs);  // a permutation: every host receives once
    }
}

TEST(TrafficGenerator, IncastSendsFromEverySenderToOneReceiver)
{
    SimFabric f(fabric_params());
    TrafficGenerator g(f);
    std::string err;
    ASSERT_TRUE(g.add_incast(IncastWorkload{range(8, 1), 0, 256 << 10, 2 * kUs}, &err)) << err;
    g.run();
    ASSERT_EQ(g.records().size(), 8u);
    std::set<uint32_t> srcs;
    for (const FlowRecord& r : g.records()) {
        EXPECT_EQ(r.dst, 0u);
        EXPECT_EQ(r.start_ns, 2000u);
        EXPECT_EQ(r.size_bytes, 256u << 10);
        srcs.insert(r.src);
    }
    EXPECT_EQ(srcs, std::set<uint32_t>({1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(TrafficGenerator, BadWorkloadsAreRefusedAndAddNothing)
{
    SimFabric f(fabric_params());
    TrafficGenerator g(f);
    std::string err;
    EXPECT_FALSE(g.add_poisson(PoissonWorkload{{1}, 0.5, cdf("100 1"), 0, kUs, {}}, &err));
    EXPECT_EQ(err, "poisson: at least 2 hosts, each once");
    EXPECT_FALSE(g.add_poisson(PoissonWorkload{{1, 2}, 0, cdf("100 1"), 0, kUs, {}}, &err));
    EXPECT_EQ(err, "poisson: load must be > 0");
    EXPECT_FALSE(g.add_poisson(PoissonWorkload{{1, 2}, 0.5, FlowSizeCdf{}, 0, kUs, {}}, &err));
    EXPECT_EQ(err, "poisson: no flow-size distribution");
    EXPECT_FALSE(g.add_permutation(PermutationWorkload{{1, 2, 1}, 10, 0, false}, &err));
    EXPECT_EQ(err, "permutation: at least 2 hosts, each once");
    EXPECT_FALSE(g.add_incast(IncastWorkload{{1, 2}, 2, 10, 0}, &err));
    EXPECT_EQ(err, "incast: the receiver is also a sender");
    EXPECT_FALSE(g.add_flow(3, 3, 10, 0, &err));
    EXPECT_EQ(err, "flow: source and destination are the same host");
    EXPECT_FALSE(g.add_flow(3, 4, 0, 0, &err));
    EXPECT_EQ(err, "size 0: at least 1 byte and below 2^32 WQEs");
    EXPECT_FALSE(g.add_flow(1, 70000, 10, 0, &err));
    EXPECT_EQ(err, "host 70000: NIC indices are 0..65534");
    EXPECT_TRUE(g.done());
    EXPECT_EQ(g.summary().flows, 0u);
    TrafficParams tp;
    tp.mtu = 1000;
    TrafficGenerator bad(f, tp);
    EXPECT_FALSE(bad.add_flow(0, 1, 10, 0, &err));
    EXPECT_EQ(err, "mtu 1000: a power of two in 256..4096");
}

// ---- output -------------------------------------------------------------------------------

// Small flows among 4 hosts for 100 us: about 76 flows.
std::string small_run_csv(uint64_t seed, FctSummary* summary = nullptr)
{
    SimFabric f(fabric_params(seed, 0, false));
    TrafficGenerator g(f);
    std::string err;
    EXPECT_TRUE(g.add_poisson(PoissonWorkload{range(4), 0.5, cdf("1024 0\n65536 1"), 0, 100 * kUs, {}}, &err)) << err;
    g.run();
    if (summary) *summary = g.summary();
    return csv(g);
}

TEST(TrafficGenerator, CsvHasOneRowPerFlowWithConsistentFields)
{
    FctSummary s;
    const std::vector<std::string> lines = split(small_run_csv(1, &s), '\n');
    ASSERT_GT(lines.size(), 30u);
    EXPECT_EQ(lines[0], "flow_id,src,dst,size_bytes,start_ns,fct_ns,ideal_fct_ns,slowdown,rx_fct_ns");
    EXPECT_EQ(lines.size() - 1, s.completed);
    uint64_t prev_id = 0;
    for (size_t i = 1; i < lines.size(); i++) {
        const std::vector<std::string> v = split(lines[i], ',');
        ASSERT_EQ(v.size(), 9u) << lines[i];
        const uint64_t id = std::stoull(v[0]), size = std::stoull(v[3]), fct = std::stoull(v[5]),
                       ideal = std::stoull(v[6]), rx = std::stoull(v[8]);
        if (i > 1) {
            EXPECT_GT(id, prev_id);  // by flow id
        }
        prev_id = id;
        EXPECT_LT(std::stoul(v[1]), 4u);
        EXPECT_LT(std::stoul(v[2]), 4u);
        EXPECT_NE(v[1], v[2]);
        EXPECT_GE(size, 1024u);
        EXPECT_LE(size, 65536u);
        EXPECT_LT(std::stoull(v[4]), 100'000u);
        EXPECT_NEAR(std::stod(v[7]), static_cast<double>(fct) / static_cast<double>(ideal), 1e-3);
        EXPECT_GE(std::stod(v[7]), 0.999);
        EXPECT_LT(rx, fct);
    }
    // The summary's buckets: every flow here is below 100 KB.
    EXPECT_EQ(s.all.count, s.completed);
    EXPECT_EQ(s.small.count, s.completed);
    EXPECT_EQ(s.medium.count + s.large.count, 0u);
    EXPECT_TRUE(std::isnan(s.large.p99));
    EXPECT_LE(s.all.p50, s.all.p95);
    EXPECT_LE(s.all.p95, s.all.p99);
    std::ostringstream text;
    TrafficGenerator::write_summary(text, s);
    EXPECT_NE(text.str().find("completed " + std::to_string(s.completed) + ", failed 0\n"), std::string::npos) << text.str();
    EXPECT_NE(text.str().find("\n>1MB                0             -"), std::string::npos) << text.str();
}

TEST(TrafficGenerator, TheSameSeedReplaysAndAnotherDiffers)
{
    const std::string a = small_run_csv(1), b = small_run_csv(1), c = small_run_csv(2);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
}

}  // namespace
