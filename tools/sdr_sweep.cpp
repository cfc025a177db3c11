// sdr_sweep: paper-scale experiments on the simulator, payload-free (the whole stack runs in
// virtual time, only the bytes are left out). Two grids, on one worker process per core:
//  - messages: size x per-packet drop, N seeded samples per point and scheme (any registered
//    scheme, and auto), with the analytic model's value beside each;
//  - allreduce: ring Allreduce over 4..8 nodes x drop, per scheme;
//  - dpa (only when asked for): the paper's DPA hardware figures from the DPA cost model.
// Writes messages.csv and allreduce.csv, the figures (gnuplot), and prints the headline numbers.
// --shard I/N runs a fixed share of the grid for one host of many; --merge joins the shards.
#include "allreduce.hpp"
#include "dpa.hpp"
#include "fmt.hpp"
#include "job_pool.hpp"
#include "message_run.hpp"
#include "plots.hpp"
#include "shard.hpp"
#include "stats.hpp"
#include "summary.hpp"
#include "sweep_grid.hpp"
#include "sweep_options.hpp"

#include <sdr/reliability/config.hpp>
#include <sdr/reliability/model.hpp>
#include <sdr/reliability/policy.hpp>
#include <sdr/reliability/scheme.hpp>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <malloc.h>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

namespace {

namespace fs = std::filesystem;
using sdr::exp::fmt;
using sdr::exp::LinkSetup;
using sdr::exp::SweepGrid;
using sdr::exp::SweepOptions;
using Emit = std::function<void(const std::string&)>;
using Tick = std::function<void(uint64_t)>;

[[noreturn]] void bad(const std::string& msg)
{
    std::fprintf(stderr, "sdr_sweep: %s (--help for usage)\n", msg.c_str());
    std::exit(2);
}

[[noreturn]] void fail(const std::string& msg)
{
    std::fprintf(stderr, "sdr_sweep: %s\n", msg.c_str());
    std::exit(1);
}

// "ec-mds:32/8": a code in one CSV field.
std::string code_label(const sdr::rel::Code& c)
{
    std::string s = sdr::rel::to_string(c);
    std::replace(s.begin(), s.end(), ',', '/');
    return s;
}

// The model_kind column.
const char* fit_name(sdr::rel::ModelFit f)
{
    switch (f) {
    case sdr::rel::ModelFit::Exact:
        return "exact";
    case sdr::rel::ModelFit::LowerBound:
        return "lower_bound";
    case sdr::rel::ModelFit::Approx:
        return "approx";
    }
    return "?";
}

// The model's value for a scheme (what the simulation is compared with) and what it is to the
// protocol; a scheme without a model has its lossless time there, "none".
std::pair<double, const char*> model_of(const sdr::rel::Config& c, const LinkSetup& l, uint64_t size)
{
    const sdr::rel::SchemeOps& o = sdr::rel::ops(c.scheme);
    if (!o.mean) return {sdr::exp::lossless_ms(c, l, size), "none"};
    const sdr::rel::model::Params p = sdr::exp::model_params(l, size, c);
    const sdr::rel::ModelMean m = o.mean(p, c);
    return {o.coded() ? m.s * 1e3 - sdr::exp::ec_unwaited_parity_ms(p) : m.s * 1e3, fit_name(m.fit)};
}

// samples,failed,mean_ms,p50_ms,p99_ms,p999_ms,min_ms,max_ms
std::string stats_cols(uint32_t samples, uint64_t failed, const std::vector<double>& ms)
{
    auto st = sdr::exp::summarize(ms);
    return fmt("%u,%llu,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f", samples, (unsigned long long)failed, st.mean, st.p50, st.p99,
               st.p999, st.min, st.max);
}

// Progress counts simulated bytes, not samples: a 1 GiB sample costs 8192 of 128 KiB, so only
// bytes make the time left an estimate.
void progress_bar(uint64_t done, uint64_t total, double secs)
{
    const int width = 40;
    double f = total ? static_cast<double>(done) / static_cast<double>(total) : 1;
    int fill = static_cast<int>(f * width);
    double eta = f > 0 ? secs / f - secs : 0;
    std::fprintf(stderr, "\r[%.*s%*s] %5.1f%% of %.0f GiB simulated  %.0f s, ~%.0f s left ", fill,
                 "########################################", width - fill, "", 100 * f,
                 static_cast<double>(total) / (1 << 30), secs, eta);
}


// A message point (size x drop): every scheme, the same seeds per sample (paired comparison).
void message_task(const SweepOptions& o, const SweepGrid& g, size_t t, const Emit& emit, const Tick& tick)
{
    const size_t index = t - g.ar_tasks();
    const uint64_t size = g.task_size(t);
    LinkSetup l = o.link;
    l.drop = g.task_drop(t);
    l.max_bytes = size;
    l.seed = o.seed * 1000003 + index;
    sdr::exp::MessageRun run(l);
    const uint32_t n = g.samples_for(size);
    for (size_t row = 0; row < g.schemes.size(); row++) {
        const sdr::exp::SweepScheme& sc = g.schemes[row];
        sdr::rel::Config cfg = sc.cfg;
        // auto is the reliability API's: the receiver picks per message. Each sample has
        // fresh endpoints, so it is told the drop rate a long-running connection would have
        // measured.
        if (sc.automatic) cfg.drop_hint = l.drop;
        sdr::rel::Code chosen;
        std::vector<double> ms;
        uint64_t failed = 0, fb_samples = 0, retx = 0, decoded = 0;
        std::string err;
        auto w0 = std::chrono::steady_clock::now();
        uint64_t p0 = run.packets();
        for (uint32_t s = 0; s < n; s++) {
            sdr::exp::Sample r = run.run(cfg, size, l.seed * 65537 + s);
            if (r.ok) ms.push_back(r.completion_ms);
            else failed++, err = r.error;
            if (s == 0) chosen = r.code;
            else if (!(r.code == chosen)) chosen.scheme = sdr::rel::Scheme::Auto;  // varied: "auto"
            fb_samples += r.fallbacks > 0;
            retx += r.retransmitted;
            decoded += r.decoded;
            tick(size);
        }
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
        if (sc.automatic && chosen.scheme != sdr::rel::Scheme::Auto) {  // the model of what it picked
            cfg.scheme = chosen.scheme;
            if (sdr::rel::is_ec(chosen.scheme)) cfg.k = chosen.k, cfg.m = chosen.m;
        }
        auto [model_ms, kind] = model_of(cfg, l, size);
        if (sc.automatic) kind = "none";
        // auto's code varies by point: k, m stay 0 (one series), `chosen` says what it picked.
        const bool coded = sdr::rel::is_ec(cfg.scheme) && !sc.automatic;
        emit(g.row_key(t, row) + fmt("%u,%u,", coded ? cfg.k : 0, coded ? cfg.m : 0) + stats_cols(n, failed, ms) +
             fmt(",%llu,%.6f,%.3f,%.3f,%.6f,%s,%.6f,%s,%.3f,%llu", (unsigned long long)fb_samples,
                 static_cast<double>(fb_samples) / n, static_cast<double>(retx) / n, static_cast<double>(decoded) / n,
                 model_ms, kind, sdr::exp::lossless_ms(cfg, l, size), sc.automatic ? code_label(chosen).c_str() : "", wall,
                 (unsigned long long)(run.packets() - p0)));
        if (failed)
            std::fprintf(stderr, "\nsdr_sweep: %s at %llu B, drop %g: %llu samples failed: %s\n", sc.label.c_str(),
                         (unsigned long long)size, l.drop, (unsigned long long)failed, err.c_str());
    }
}

// An Allreduce point (nodes x drop): every scheme.
void allreduce_task(const SweepOptions& o, const SweepGrid& g, size_t t, const Emit& emit, const Tick& tick)
{
    const uint32_t n = g.task_nodes(t);
    const double drop = g.task_drop(t);
    for (size_t row = 0; row < g.ar_schemes.size(); row++) {
        const sdr::exp::SweepScheme& sc = g.ar_schemes[row];
        sdr::exp::AllreduceParams p;
        p.nodes = n;
        p.bytes = o.ar_bytes;
        p.chunk_bytes = o.link.chunk_bytes;
        p.mtu = o.link.mtu;
        p.channels = o.link.channels;
        p.bw_gbps = o.link.bw_gbps;
        p.rtt_ms = o.link.rtt_ms;
        p.drop = drop;
        p.rel = sc.cfg;
        std::vector<double> ms;
        uint64_t failed = 0, packets = 0;
        std::string err;
        auto w0 = std::chrono::steady_clock::now();
        for (uint32_t s = 0; s < o.ar_samples; s++) {
            p.seed = (o.seed * 1000003 + t) * 65537 + s;
            auto r = sdr::exp::run_allreduce(p);
            if (r.ok) ms.push_back(r.completion_ms);
            else failed++, err = r.error;
            packets += r.packets;
            tick(o.ar_bytes * 2 * (n - 1));
        }
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
        // The model's bound with the round's transfer counted to delivery (our rounds wait for
        // the receive, not for the ACK): (2N-2)(E[T](segment) - RTT/2) + RTT/2.
        LinkSetup l = o.link;
        l.drop = drop;
        double seg_ms = model_of(sc.cfg, l, o.ar_bytes / n).first;
        double model_ms = sdr::rel::model::allreduce_lower_bound_s(n, (seg_ms - l.rtt_ms / 2) / 1e3) * 1e3 + l.rtt_ms / 2;
        const bool coded = sdr::rel::is_ec(sc.cfg.scheme);
        emit(g.row_key(t, row) + fmt("%u,%u,", coded ? sc.cfg.k : 0, coded ? sc.cfg.m : 0) +
             stats_cols(o.ar_samples, failed, ms) + fmt(",%.6f,%.3f,%llu", model_ms, wall, (unsigned long long)packets));
        if (failed)
            std::fprintf(stderr, "\nsdr_sweep: allreduce %s, %u nodes, drop %g: %llu samples failed: %s\n",
                         sc.label.c_str(), n, drop, (unsigned long long)failed, err.c_str());
    }
}

// Rows per task, in task order; a shard holds only its own tasks' rows.
using TaskRows = std::vector<std::vector<std::string>>;

struct CsvPaths {
    std::string messages, allreduce;  // empty: that experiment is off
};

CsvPaths csv_paths(const SweepOptions& o, const std::string& dir)
{
    return {o.messages ? dir + "/messages.csv" : "", o.allreduce ? dir + "/allreduce.csv" : ""};
}

// Writes the CSVs of the tasks that have rows, in task order; returns the packets they count.
uint64_t write_csvs(const CsvPaths& p, const SweepGrid& g, const TaskRows& rows)
{
    uint64_t packets = 0;
    auto write = [&](const std::string& path, const char* header, size_t first, size_t count) {
        std::ofstream f(path);
        f << header << "\n";
        for (size_t t = first; t < first + count; t++)
            for (const auto& l : rows[t]) {
                f << l << "\n";
                packets += std::stoull(l.substr(l.rfind(',') + 1));
            }
        if (!f) fail("cannot write " + path);
    };
    if (!p.messages.empty()) write(p.messages, sdr::exp::kMessagesHeader, g.ar_tasks(), g.msg_tasks());
    if (!p.allreduce.empty()) write(p.allreduce, sdr::exp::kAllreduceHeader, 0, g.ar_tasks());
    return packets;
}

// The CSV paths, the headline numbers (if asked) and the figures (if asked), as every run ends.
int report(const SweepOptions& o, const CsvPaths& p, bool summary)
{
    if (!p.messages.empty()) std::printf("%s\n", p.messages.c_str());
    if (!p.allreduce.empty()) std::printf("%s\n", p.allreduce.c_str());
    std::string err;
    if (summary && !sdr::exp::print_summary(stdout, p.messages, p.allreduce, &err))
        std::fprintf(stderr, "sdr_sweep: summary: %s\n", err.c_str());
    if (o.plots) {
        std::vector<std::string> figs;
        if (!sdr::exp::write_plots(o.out, p.messages, p.allreduce, &figs, &err)) {
            std::fprintf(stderr, "sdr_sweep: figures: %s\n", err.c_str());
            return 1;
        }
        for (const auto& f : figs) std::printf("figure: %s\n", f.c_str());
    }
    return 0;
}

void make_out_dir(const std::string& dir)
{
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) bad("cannot create " + dir + ": " + ec.message());
}

// The whole grid, or with --shard one share of it.
int run(const SweepOptions& o)
{
    SweepGrid g;
    std::string err;
    if (!sdr::exp::make_grid(o, &g, &err)) bad(err);
    std::vector<uint64_t> cost(g.tasks());
    for (size_t t = 0; t < g.tasks(); t++) cost[t] = g.cost(t);
    std::vector<size_t> mine;  // ascending
    if (o.sharded) {
        auto shard = sdr::exp::assign_shards(cost, o.shard.count);
        for (size_t t = 0; t < g.tasks(); t++)
            if (shard[t] == o.shard.index) mine.push_back(t);
    } else {
        mine.resize(g.tasks());
        std::iota(mine.begin(), mine.end(), 0);
    }
    uint64_t total = 0, samples = 0;
    for (size_t t : mine) {
        total += g.work_bytes(t);
        samples += g.rows(t) * (g.is_allreduce(t) ? g.ar_samples : g.samples_for(g.task_size(t)));
    }
    make_out_dir(o.out);
    // A shard.txt left from an earlier shard run would describe CSVs this run replaces.
    std::error_code ec;
    fs::remove(fs::path(o.out) / sdr::exp::kManifestName, ec);
    std::string share = o.sharded ? "shard " + std::to_string(o.shard.index) + "/" + std::to_string(o.shard.count) + ": " +
                                        std::to_string(mine.size()) + " of " + std::to_string(g.tasks()) + " points; "
                                  : "";
    std::fprintf(stderr, "sdr_sweep: messages %zu sizes x %zu drops x %zu schemes; allreduce %zu node counts x %zu drops x %zu schemes; %s%llu samples on %u jobs\n",
                 g.sizes.size(), g.drops.size(), g.schemes.size(), g.nodes.size(), g.drops.size(), g.ar_schemes.size(),
                 share.c_str(), (unsigned long long)samples, o.jobs);

    // The costliest points first: a pool finishes soonest with those out of the way.
    std::vector<size_t> order = mine;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
    auto t0 = std::chrono::steady_clock::now();
    auto secs = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    auto pr = sdr::exp::run_pool(
        order.size(), o.jobs,
        [&](size_t i, const Emit& emit, const Tick& tick) {
            if (g.is_allreduce(order[i])) allreduce_task(o, g, order[i], emit, tick);
            else message_task(o, g, order[i], emit, tick);
        },
        [&](uint64_t done) {
            if (o.progress) progress_bar(done, total, secs());
        });
    if (o.progress) std::fprintf(stderr, "\n");
    if (!pr.ok) fail(pr.error);
    const double wall = secs();
    TaskRows rows(g.tasks());
    for (size_t i = 0; i < order.size(); i++) rows[order[i]] = std::move(pr.lines[i]);
    const CsvPaths paths = csv_paths(o, o.out);
    const uint64_t packets = write_csvs(paths, g, rows);
    std::printf("sdr_sweep: %s%llu samples in %.1f s on %u jobs: %.1f M simulated packets (data and control), %.2f M packets/s\n",
                share.c_str(), (unsigned long long)samples, wall, o.jobs, packets / 1e6, packets / wall / 1e6);
    if (o.sharded) {
        sdr::exp::ShardManifest m;
        m.id = o.shard;
        m.options = sdr::exp::grid_options(o);
        m.tasks = mine;
        m.samples = samples;
        m.jobs = o.jobs;
        m.wall_s = wall;
        if (!sdr::exp::write_manifest(o.out, m, &err)) fail(err);
        std::printf("%s/%s\n", o.out.c_str(), sdr::exp::kManifestName);
    }
    return report(o, paths, o.summary);
}

std::vector<std::string> read_lines(const std::string& path)
{
    std::ifstream f(path);
    if (!f) fail("merge: " + path + ": cannot read");
    std::vector<std::string> v;
    for (std::string l; std::getline(f, l);) v.push_back(l);
    return v;
}

// Joins shard directories into the CSVs of the whole grid, then reports as a whole run does.
int merge(const SweepOptions& cli)
{
    std::vector<sdr::exp::ShardManifest> ms(cli.merge.size());
    std::string err;
    for (size_t i = 0; i < cli.merge.size(); i++)
        if (!sdr::exp::read_manifest(cli.merge[i], &ms[i], &err)) fail("merge: " + err);
    if (!sdr::exp::check_shard_set(cli.merge, ms, &err)) fail("merge: " + err);
    // Never write over a shard: its rows are the input.
    if (fs::exists(fs::path(cli.out) / sdr::exp::kManifestName))
        fail("merge: --out " + cli.out + " holds a shard (" + sdr::exp::kManifestName + "); merge into another directory");
    // The grid, as the shards ran it.
    std::vector<std::string> args;
    for (const auto& [name, value] : ms[0].options) args.insert(args.end(), {name, value});
    SweepOptions o;
    bool help = false;
    if (!sdr::exp::parse_sweep_options(args, &o, &help, &err)) fail("merge: " + cli.merge[0] + "/shard.txt: " + err);
    o.out = cli.out;
    o.plots = cli.plots;
    SweepGrid g;
    if (!sdr::exp::make_grid(o, &g, &err)) fail("merge: " + cli.merge[0] + "/shard.txt: " + err);
    std::vector<uint64_t> cost(g.tasks());
    for (size_t t = 0; t < g.tasks(); t++) cost[t] = g.cost(t);
    const auto shard = sdr::exp::assign_shards(cost, ms[0].id.count);
    TaskRows rows(g.tasks());
    uint64_t samples = 0;
    double wall_sum = 0, wall_max = 0;
    for (size_t i = 0; i < ms.size(); i++) {
        const std::string& dir = cli.merge[i];
        std::vector<size_t> expect;
        for (size_t t = 0; t < g.tasks(); t++)
            if (shard[t] == ms[i].id.index) expect.push_back(t);
        if (ms[i].tasks != expect)
            fail("merge: " + dir + ": shard " + std::to_string(ms[i].id.index) + "/" + std::to_string(ms[i].id.count) + " ran " +
                 std::to_string(ms[i].tasks.size()) + " points, not the " + std::to_string(expect.size()) +
                 " this sdr_sweep assigns it (a different sdr_sweep build?)");
        // Its rows, task by task, each checked against the grid's key fields.
        const CsvPaths in = csv_paths(o, dir);
        for (const auto& [path, header, allreduce] :
             {std::tuple{in.messages, sdr::exp::kMessagesHeader, false}, std::tuple{in.allreduce, sdr::exp::kAllreduceHeader, true}}) {
            if (path.empty()) continue;
            auto lines = read_lines(path);
            if (lines.empty() || lines[0] != header) fail("merge: " + path + ": not an sdr_sweep CSV of this version (header differs)");
            size_t next = 1;
            for (size_t t : expect) {
                if (g.is_allreduce(t) != allreduce) continue;
                for (size_t r = 0; r < g.rows(t); r++, next++) {
                    if (next >= lines.size())
                        fail("merge: " + path + ": ends after " + std::to_string(next - 1) + " rows, without the row of " +
                             g.row_key(t, r));
                    if (lines[next].rfind(g.row_key(t, r), 0) != 0)
                        fail("merge: " + path + ":" + std::to_string(next + 1) + ": expected a row for " + g.row_key(t, r) +
                             " got '" + lines[next].substr(0, 60) + "'");
                    rows[t].push_back(lines[next]);
                }
            }
            if (next != lines.size())
                fail("merge: " + path + ": " + std::to_string(lines.size() - next) + " rows beyond the shard's points");
        }
        samples += ms[i].samples;
        wall_sum += ms[i].wall_s;
        wall_max = std::max(wall_max, ms[i].wall_s);
    }
    make_out_dir(o.out);
    const CsvPaths paths = csv_paths(o, o.out);
    const uint64_t packets = write_csvs(paths, g, rows);
    std::printf("sdr_sweep: merged %zu shards: %llu samples, %.1f M simulated packets (data and control); the shards ran %.1f s in all, the longest %.1f s\n",
                ms.size(), (unsigned long long)samples, packets / 1e6, wall_sum, wall_max);
    return report(o, paths, true);
}

// The DPA experiment: small (seconds), always whole, on one core.
int run_dpa(const SweepOptions& o)
{
    sdr::emu::DpaParams dpa;
    std::string err;
    if (!sdr::emu::DpaParams::from_env(&dpa, &err)) bad(err);
    make_out_dir(o.out);
    const std::string csv = o.out + "/dpa.csv";
    std::vector<sdr::exp::PaperPoint> points;
    auto t0 = std::chrono::steady_clock::now();
    if (!sdr::exp::run_dpa_experiment(dpa, sdr::exp::DpaSweep{}, csv, &points, &err)) fail("dpa: " + err);
    std::printf("sdr_sweep: dpa experiment in %.1f s\n%s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), csv.c_str());
    sdr::exp::print_paper_points(stdout, points);
    if (o.plots) {
        std::vector<std::string> figs;
        if (!sdr::exp::write_dpa_plots(o.out, csv, &figs, &err)) {
            std::fprintf(stderr, "sdr_sweep: figures: %s\n", err.c_str());
            return 1;
        }
        for (const auto& f : figs) std::printf("figure: %s\n", f.c_str());
    }
    return 0;
}

// The fabric experiment: congestion loss over two datacenters, whole, on --jobs processes.
int run_fabric(const SweepOptions& o)
{
    make_out_dir(o.out);
    const std::string csv = o.out + "/fabric.csv";
    std::vector<sdr::exp::FabricRow> rows;
    std::string err;
    auto t0 = std::chrono::steady_clock::now();
    const sdr::exp::FabricSweep& f = o.fab;
    std::fprintf(stderr,
                 "sdr_sweep: fabric %zu utilisations x %zu sizes x %zu schemes, %u samples each, on %u jobs; two "
                 "datacenters of %u hosts, DC links %g Gbit/s, long haul %g Gbit/s %g ms, background senders %g "
                 "Gbit/s, switch buffer %llu B\n",
                 f.utilisations.size(), f.sizes.size(), f.schemes.size(), f.samples, o.jobs,
                 f.leaves * f.hosts_per_leaf, f.dc_gbps, f.long_haul_gbps, f.rtt_ms, f.sender_gbps(),
                 (unsigned long long)f.buffer_bytes);
    if (!sdr::exp::run_fabric_experiment(o.fab, o.jobs, csv, &rows, &err)) fail("fabric: " + err);
    std::printf("sdr_sweep: fabric experiment in %.1f s\n%s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), csv.c_str());
    sdr::exp::print_fabric_table(stdout, rows);
    if (o.plots) {
        std::vector<std::string> figs;
        if (!sdr::exp::write_fabric_plots(o.out, csv, &figs, &err)) {
            std::fprintf(stderr, "sdr_sweep: figures: %s\n", err.c_str());
            return 1;
        }
        for (const auto& f : figs) std::printf("figure: %s\n", f.c_str());
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    SweepOptions o;
    bool help = false;
    std::string err;
    if (!sdr::exp::parse_sweep_options(std::vector<std::string>(argv + 1, argv + argc), &o, &help, &err)) bad(err);
    if (help) {
        sdr::exp::print_sweep_usage(stdout);
        return 0;
    }
    if (!o.merge.empty()) return merge(o);
    // Every sample builds a fresh fabric whose links hold a 25 ms path's packets in flight (MBs
    // each). glibc would hand such blocks back to the kernel when a sample ends and fault them in
    // again for the next; kept in the heap they are reused (a tenth of a ring Allreduce's time
    // was page faults, perf). The worker processes inherit the setting.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    int rc = o.dpa ? run_dpa(o) : 0;
    if (o.fabric) rc |= run_fabric(o);
    if (o.messages || o.allreduce) rc |= run(o);
    return rc;
}
