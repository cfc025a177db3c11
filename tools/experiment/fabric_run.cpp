// The fabric experiment's points (fabric.hpp): the background on the samples' fabric, the
// samples on their time grid, and what the network did to SDR's packets, counted from the
// fabric's drop log and the gateway's queue.
#include "fabric.hpp"
#include "fmt.hpp"
#include "job_pool.hpp"
#include "stats.hpp"

#include <sdr/emu/network.hpp>
#include <sdr/emu/traffic.hpp>
#include <sdr/reliability/policy.hpp>
#include <sdr/reliability/scheme.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>

namespace sdr::exp {

namespace {

constexpr uint32_t kPsnMask = 0xFFFFFF;
// Long enough that the background outlasts any run: arrivals are drawn one at a time, so an end
// far away costs nothing, and the generator goes with the samples' fabric.
constexpr emu::SimTime kBackgroundPs = 3600ull * 1'000'000'000'000ull;

// The long haul's queue in DC 0 (towards DC 1), where SDR's data meets the background.
const emu::QueueCounters& gateway_queue(emu::SimNetwork& net)
{
    const auto& names = net.topology().switches;
    const size_t gw0 = std::find(names.begin(), names.end(), "dc0.gw") - names.begin();
    const size_t gw1 = std::find(names.begin(), names.end(), "dc1.gw") - names.begin();
    emu::SimSwitch& sw = net.sw(gw0);
    return sw.port(static_cast<size_t>(sw.port_to(net.topology().hosts + static_cast<uint32_t>(gw1)))).counters();
}

// What the drop log says of SDR's packets from entry `from` on: sim:0's lost frames, the runs of
// consecutive PSNs of one QP among them (a loss burst as that QP sees it: packets of one QP take
// one path, so they meet the gateway in PSN order), and sim:1's lost frames.
void count_sdr_drops(const std::vector<emu::DropRecord>& log, size_t from, FabricRow* r)
{
    std::map<uint32_t, uint32_t> last;  // QP -> PSN of its latest loss
    for (size_t i = from; i < log.size(); i++) {
        const emu::DropRecord& d = log[i];
        if (d.src_nic == 1 && d.dst_nic == 0) r->ack_drops++;
        if (d.src_nic != 0 || d.dst_nic != 1) continue;
        r->sdr_drops++;
        auto [it, fresh] = last.try_emplace(d.meta.dest_qp, d.meta.psn);
        if (fresh || d.meta.psn != ((it->second + 1) & kPsnMask)) r->bursts++;
        it->second = d.meta.psn;
    }
}

std::vector<uint32_t> dc_hosts(const FabricSweep& s, uint32_t dc)
{
    std::vector<uint32_t> v;
    for (uint32_t h = 2 + dc; h < 2 * s.leaves * s.hosts_per_leaf; h += 2) v.push_back(h);
    return v;
}

// One scheme's samples at one point, on a fabric of its own.
bool run_scheme(const FabricSweep& s, double u, uint64_t size, uint64_t seed, const rel::Config& cfg, FabricRow* r,
                std::string* err)
{
    const auto w0 = std::chrono::steady_clock::now();
    const LinkSetup l = s.link(size, seed);
    MessageRun run(l);
    emu::SimFabric& f = run.fabric();
    const double rtt_ps = s.rtt_ms * 1e9;
    const auto warmup = static_cast<emu::SimTime>(s.warmup_rtts * rtt_ps);
    const auto period = static_cast<emu::SimTime>(s.period_rtts * rtt_ps);
    std::unique_ptr<emu::TrafficGenerator> bg;
    if (u > 0) {
        emu::TrafficParams tp;
        tp.mtu = s.mtu;
        tp.host_gbps = s.sender_gbps();
        bg = std::make_unique<emu::TrafficGenerator>(f, tp);
        emu::FlowSizeCdf cdf;
        if (!emu::FlowSizeCdf::named(s.cdf, &cdf, err)) return false;
        // DC 0 to DC 1 only, the way SDR's data goes: the reverse carries the ACKs of both,
        // and simulating a second background there would double the cost for no loss SDR meets.
        if (!bg->add_poisson(emu::PoissonWorkload{dc_hosts(s, 0), s.host_load(u), cdf, 0, kBackgroundPs, dc_hosts(s, 1)}, err))
            return false;
    }
    emu::SimNetwork& net = *f.network();
    const emu::QueueCounters& gw = gateway_queue(net);
    std::vector<double> ms;
    uint64_t retx = 0, decoded = 0, fallbacks = 0;
    // The counters from the first sample on: the warm-up is the background's alone.
    f.advance_to(warmup);
    const uint64_t tx0 = f.find_nic(0)->counters().tx_frames;
    const size_t d0 = f.drop_log().size();
    const uint64_t gw_in0 = gw.enqueued + gw.dropped, gw_drop0 = gw.dropped;
    for (uint32_t k = 0; k < s.samples; k++) {
        const emu::SimTime start = warmup + k * period;
        if (f.sim().now() < start) f.advance_to(start);
        else if (k > 0) r->overruns++;
        // The fabric's own seed: reseeding then leaves the switches' ECMP salts as they are, so
        // no background flow changes its path mid-run (there is no random loss to restart).
        const Sample x = run.run(cfg, size, l.seed);
        if (!x.ok) {
            r->failed++;
            std::fprintf(stderr, "sdr_sweep: fabric: %s at %llu B, utilisation %g, sample %u: %s\n", r->scheme.c_str(),
                         (unsigned long long)size, u, k, x.error.c_str());
            continue;
        }
        ms.push_back(x.completion_ms);
        retx += x.retransmitted;
        decoded += x.decoded;
        fallbacks += x.fallbacks;
    }
    r->samples = s.samples;
    r->sdr_packets = f.find_nic(0)->counters().tx_frames - tx0;
    count_sdr_drops(f.drop_log(), d0, r);
    r->sdr_drop_rate = r->sdr_packets ? static_cast<double>(r->sdr_drops) / static_cast<double>(r->sdr_packets) : 0;
    r->mean_burst = r->bursts ? static_cast<double>(r->sdr_drops) / static_cast<double>(r->bursts) : 0;
    const uint64_t gw_in = gw.enqueued + gw.dropped - gw_in0;
    r->gateway_drop_rate = gw_in ? static_cast<double>(gw.dropped - gw_drop0) / static_cast<double>(gw_in) : 0;
    const Summary st = summarize(ms);
    r->mean_ms = st.mean;
    r->p50_ms = st.p50;
    r->p99_ms = st.p99;
    r->max_ms = st.max;
    r->lossless_ms = lossless_ms(cfg, l, size);
    const double n = static_cast<double>(std::max<size_t>(ms.size(), 1));
    r->retransmitted = static_cast<double>(retx) / n;
    r->decoded = static_cast<double>(decoded) / n;
    r->fallbacks = static_cast<double>(fallbacks) / n;
    if (bg) {
        const emu::FctSummary fs = bg->summary();
        r->bg_flows = fs.completed;
        r->bg_failed = fs.failed;
        r->bg_slowdown_mean = fs.all.mean;
        r->bg_slowdown_p50 = fs.all.p50;
        r->bg_slowdown_p99 = fs.all.p99;
    }
    // The DC links outrun the hosts, so the long haul's queue should be the only one that drops.
    if (const uint64_t all = net.totals().queue_dropped; all != gw.dropped)
        std::fprintf(stderr, "sdr_sweep: fabric: %llu of %llu drops elsewhere than the gateway's long-haul queue\n",
                     (unsigned long long)(all - gw.dropped), (unsigned long long)all);
    bg.reset();  // before the fabric, which runs no further
    r->wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    return true;
}

double field(const std::string& v) { return v.empty() || v == "nan" ? NAN : std::stod(v); }

}  // namespace

std::string FabricSweep::topology() const
{
    emu::TopoLink lh;
    lh.gbps = long_haul_gbps;
    const emu::Topology t = emu::Topology::two_datacenters(leaves, spines, hosts_per_leaf, dc_gbps, lh);
    nlohmann::json links = nlohmann::json::array();
    for (const emu::TopoLink& l : t.links) {
        double gbps = l.gbps, delay_us = static_cast<double>(l.delay_ps) / 1e6;
        if (t.is_host(l.a)) gbps = l.a >= 2 && l.a % 2 == 0 ? sender_gbps() : long_haul_gbps;
        if (&l == &t.links.back()) delay_us = rtt_ms * 1e3 / 2;
        links.push_back({{"a", l.a}, {"b", l.b}, {"gbps", gbps}, {"delay_us", delay_us}});
    }
    return nlohmann::json{{"type", "custom"}, {"hosts", t.hosts}, {"switches", t.switches}, {"links", links},
                          {"ecn", false}, {"buffer_bytes", buffer_bytes}}
        .dump();
}

LinkSetup FabricSweep::link(uint64_t max_bytes, uint64_t s) const
{
    LinkSetup l;
    l.bw_gbps = long_haul_gbps;  // the reliability layer's rate: its NIC's, the long haul's
    l.rtt_ms = rtt_ms;
    l.mtu = mtu;
    l.chunk_bytes = chunk_bytes;
    l.channels = channels;
    l.max_bytes = max_bytes;
    l.seed = s;
    l.topology = topology();
    l.drop_log = true;
    return l;
}

double FabricSweep::host_load(double u) const
{
    return u * long_haul_gbps / (sender_gbps() * senders());
}

std::string FabricRow::csv() const
{
    return fmt("%.6g,%.6g,%llu,%s,%u,%u,%.6f,%.6f,%.6f,%.6f,%.6f,%.4f,", utilisation, host_load,
               (unsigned long long)size, scheme.c_str(), samples, failed, mean_ms, p50_ms, p99_ms, max_ms, lossless_ms,
               over_first) +
           fmt("%llu,%llu,%.6g,%llu,%.4f,%llu,%.3f,%.3f,%.3f,%u,", (unsigned long long)sdr_packets,
               (unsigned long long)sdr_drops, sdr_drop_rate, (unsigned long long)bursts, mean_burst,
               (unsigned long long)ack_drops, retransmitted, decoded, fallbacks, overruns) +
           fmt("%.6g,%llu,%llu,%.4f,%.4f,%.4f,%.2f", gateway_drop_rate, (unsigned long long)bg_flows,
               (unsigned long long)bg_failed, bg_slowdown_mean, bg_slowdown_p50, bg_slowdown_p99, wall_s);
}

bool run_fabric_point(const FabricSweep& s, double u, uint64_t size, uint64_t seed, std::vector<FabricRow>* rows,
                      std::string* err)
{
    rows->clear();
    for (const std::string& text : s.schemes) {
        rel::Config cfg;
        cfg.alpha = s.alpha;
        if (!rel::parse_scheme(text, &cfg, err)) return *err = "scheme: " + *err, false;
        FabricRow r;
        r.utilisation = u;
        r.host_load = s.host_load(u);
        r.size = size;
        r.scheme = text;
        std::replace(r.scheme.begin(), r.scheme.end(), ',', '/');  // one CSV field
        if (!run_scheme(s, u, size, seed, cfg, &r, err)) return false;
        rows->push_back(r);
    }
    for (FabricRow& r : *rows) r.over_first = r.mean_ms / rows->front().mean_ms;
    return true;
}

bool read_fabric_csv(const std::string& path, std::vector<FabricRow>* rows, std::string* err)
{
    std::ifstream f(path);
    std::string line;
    if (!f || !std::getline(f, line) || line != kFabricHeader) return *err = path + ": not a fabric.csv of this version", false;
    rows->clear();
    while (std::getline(f, line)) {
        std::vector<std::string> c;
        std::stringstream ss(line);
        for (std::string v; std::getline(ss, v, ',');) c.push_back(v);
        if (c.size() != 29) return *err = path + ": a row of " + std::to_string(c.size()) + " fields, not 29", false;
        FabricRow r;
        size_t i = 0;
        r.utilisation = field(c[i++]);
        r.host_load = field(c[i++]);
        r.size = std::stoull(c[i++]);
        r.scheme = c[i++];
        r.samples = static_cast<uint32_t>(std::stoul(c[i++]));
        r.failed = static_cast<uint32_t>(std::stoul(c[i++]));
        for (double* d : {&r.mean_ms, &r.p50_ms, &r.p99_ms, &r.max_ms, &r.lossless_ms, &r.over_first}) *d = field(c[i++]);
        r.sdr_packets = std::stoull(c[i++]);
        r.sdr_drops = std::stoull(c[i++]);
        r.sdr_drop_rate = field(c[i++]);
        r.bursts = std::stoull(c[i++]);
        r.mean_burst = field(c[i++]);
        r.ack_drops = std::stoull(c[i++]);
        for (double* d : {&r.retransmitted, &r.decoded, &r.fallbacks}) *d = field(c[i++]);
        r.overruns = static_cast<uint32_t>(std::stoul(c[i++]));
        r.gateway_drop_rate = field(c[i++]);
        r.bg_flows = std::stoull(c[i++]);
        r.bg_failed = std::stoull(c[i++]);
        for (double* d : {&r.bg_slowdown_mean, &r.bg_slowdown_p50, &r.bg_slowdown_p99, &r.wall_s}) *d = field(c[i++]);
        rows->push_back(r);
    }
    return true;
}

bool run_fabric_experiment(const FabricSweep& s, unsigned jobs, const std::string& csv_path,
                           std::vector<FabricRow>* rows, std::string* err)
{
    // A point per utilisation and size, seeded from its index: the numbers do not depend on jobs.
    const size_t points = s.utilisations.size() * s.sizes.size();
    auto util = [&](size_t t) { return s.utilisations[t / s.sizes.size()]; };
    auto size = [&](size_t t) { return s.sizes[t % s.sizes.size()]; };
    // The costliest first (background packets grow with the utilisation, SDR's with the size).
    std::vector<size_t> order(points);
    std::iota(order.begin(), order.end(), 0);
    auto cost = [&](size_t t) { return (util(t) + 0.05) * std::log2(static_cast<double>(size(t)) + 2); };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost(a) > cost(b); });
    auto pr = run_pool(
        points, std::max(1u, jobs),
        [&](size_t i, const std::function<void(const std::string&)>& emit, const std::function<void(uint64_t)>& tick) {
            const size_t t = order[i];
            std::vector<FabricRow> rs;
            std::string e;
            if (!run_fabric_point(s, util(t), size(t), s.seed * 1000003 + t, &rs, &e)) emit("error," + e);
            for (const FabricRow& r : rs) emit(r.csv());
            tick(1);
        },
        [&](uint64_t done) { std::fprintf(stderr, "\rsdr_sweep: fabric: %llu of %zu points ", (unsigned long long)done, points); });
    std::fprintf(stderr, "\n");
    if (!pr.ok) return *err = pr.error, false;
    std::vector<std::vector<std::string>> by_point(points);
    for (size_t i = 0; i < points; i++) by_point[order[i]] = std::move(pr.lines[i]);
    std::ofstream f(csv_path);
    f << kFabricHeader << "\n";
    for (const auto& lines : by_point)
        for (const std::string& l : lines) {
            if (l.rfind("error,", 0) == 0) return *err = l.substr(6), false;
            f << l << "\n";
        }
    if (!f.flush()) return *err = "cannot write " + csv_path, false;
    f.close();
    return read_fabric_csv(csv_path, rows, err);
}

void print_fabric_table(FILE* out, const std::vector<FabricRow>& rows)
{
    std::fprintf(out, "%5s %8s %-12s %9s %9s %9s %7s %9s %6s %7s %9s %8s %8s %4s\n", "util", "size", "scheme", "mean_ms",
                 "p50_ms", "p99_ms", "/first", "sdr_drop", "burst", "ackdrop", "gw_drop", "bg_p50", "bg_p99", "late");
    for (const FabricRow& r : rows) {
        const std::string sz = r.size >= (1ull << 20) ? std::to_string(r.size >> 20) + "MiB" : std::to_string(r.size >> 10) + "KiB";
        std::fprintf(out, "%5.2f %8s %-12s %9.2f %9.2f %9.2f %7.3f %9.2e %6.2f %7llu %9.2e %8.2f %8.2f %4u%s\n", r.utilisation,
                     sz.c_str(), r.scheme.c_str(), r.mean_ms, r.p50_ms, r.p99_ms, r.over_first, r.sdr_drop_rate, r.mean_burst,
                     (unsigned long long)r.ack_drops, r.gateway_drop_rate, r.bg_slowdown_p50, r.bg_slowdown_p99, r.overruns,
                     r.failed ? " FAILED SAMPLES" : "");
    }
}

}  // namespace sdr::exp
