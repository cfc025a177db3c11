#include "sweep_options.hpp"

#include <sdr/emu/fabric.hpp>
#include <sdr/emu/topology.hpp>

#include "common/options.hpp"

#include <sdr/reliability/scheme.hpp>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <iterator>

namespace sdr::exp {

namespace {

std::pair<std::string, std::string> split(const std::string& s, char c)
{
    auto at = s.find(c);
    if (at == std::string::npos) return {s, s};
    return {s.substr(0, at), s.substr(at + 1)};
}

// "sr,ec-mds:32,8": a token of digits is the m of the EC scheme before it.
std::vector<std::string> scheme_list(const std::string& v)
{
    std::vector<std::string> out;
    std::stringstream ss(v);
    for (std::string s; std::getline(ss, s, ',');) {
        if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos && !out.empty()) out.back() += "," + s;
        else out.push_back(s);
    }
    return out;
}

std::string join(const std::vector<std::string>& v)
{
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
    return s;
}

std::string exact(double v)
{
    char b[40];
    std::snprintf(b, sizeof b, "%.17g", v);
    return b;
}

// The cores this process may run on (a Slurm allocation or taskset narrows them), not the host's.
unsigned usable_cores()
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return static_cast<unsigned>(CPU_COUNT(&set));
    return static_cast<unsigned>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

const char* const kRunOnly[] = {"--jobs", "--out", "--no-plots", "--plots", "--summary", "--no-progress", "--merge"};

// What the command line says beside the options themselves.
struct Given {
    std::string only, sizes, drops, nodes, schemes, ar_schemes, utilisations, fabric_sizes;
    bool plots = false, no_plots = false, summary = false, no_progress = false;
    std::string shard;
};

// "MIN:MAX" (or one value for both) through `parse`.
template <class T, class Parse>
void range(const std::string& opt, const std::string& v, T* lo, T* hi, Parse parse)
{
    auto [a, b] = split(v, ':');
    *lo = static_cast<T>(parse(opt, a));
    *hi = static_cast<T>(parse(opt, b));
}

void build(CLI::App& app, SweepOptions& o, Given& g)
{
    using namespace sdr::tools;
    app.footer(
        "messages: sizes double from MIN to MAX, per-packet drops log-spaced N per decade; per point and scheme\n"
        "min(--samples, max(--min-samples, --bytes-per-point / size)) samples. allreduce: ring Allreduce of\n"
        "--ar-bytes per node over MIN..MAX nodes at the same drops.\n"
        "Schemes: " + sdr::rel::scheme_list() + ", and auto (the model-based choice; messages only).\n"
        "RTO = (1+alpha) RTT. BYTES take K/M/G (also KiB/MiB/GiB) suffixes, binary: 128K = 131072.\n"
        "--shard I/N runs shard I (0-based) of N: a share of the grid fixed by the grid and N alone, its CSV rows\n"
        "and shard.txt in --out, no figures or summary unless --plots/--summary.\n"
        "--merge DIR... joins the directories of all N shards of one grid into the CSVs, summary and figures an\n"
        "unsharded run gives (wall_s aside), refusing a set that is incomplete or mixes grids.\n"
        "dpa (only when asked for): the paper's BlueField-3 DPA figures predicted by the simulator's DPA and PCIe\n"
        "cost model (SDR_SIM_DPA_* override its parameters): dpa.csv and dpa.svg/png.\n"
        "fabric (only when asked for): SR and EC between sim:0 and sim:1 over two datacenters (2 leaves, 2 spines,\n"
        "4 hosts a leaf each) whose long haul (--long-haul-gbps, --rtt-ms, drop-tail at the gateways' 12 MB\n"
        "buffer) carries Poisson web-search RC flows from the other hosts of DC 0 to those of DC 1 at each\n"
        "--utilisations value; losses come from congestion alone. DC links at --bw-gbps, sim:0 and sim:1 at the\n"
        "long haul's rate, the background's senders at --host-gbps (all 7 together: the long haul's).\n"
        "--samples (default 20 here) and --schemes (default sr,ec-mds:32,8) apply: fabric.csv and\n"
        "fabric.svg/png.");
    app.add_option("--only", g.only, "messages, allreduce, dpa or fabric (comma-separated)")->type_name("WHAT")
        ->default_str("messages,allreduce");
    app.add_option("--sizes", g.sizes, "message sizes, doubling from MIN to MAX (<= 4G)")->type_name("MIN:MAX")
        ->default_str("128K:1G");
    app.add_option("--drops", g.drops, "per-packet drop rates, 0 < MIN <= MAX < 1")->type_name("MIN:MAX")
        ->default_str("1e-6:1e-2");
    add_count(app, "--per-decade", &o.per_decade, 1, 1000, "drop rates per decade")->default_str("1");
    app.add_option("--schemes", g.schemes, "the message schemes")->type_name("S,...")
        ->default_str("sr,sr-nack,ec-xor:32,8,ec-mds:32,8,auto");
    add_count(app, "--samples", &o.samples, 1, UINT32_MAX, "samples per point and scheme, at most")->default_str("1000");
    add_count(app, "--min-samples", &o.min_samples, 0, UINT32_MAX, "samples per point and scheme, at least")
        ->default_str("100");
    add_size(app, "--bytes-per-point", &o.bytes_per_point, 1, UINT64_MAX, "bytes a point's samples of one scheme move")
        ->default_str("128G");
    app.add_option("--nodes", g.nodes, "Allreduce ring sizes, 2 <= MIN <= MAX <= 64")->type_name("MIN:MAX")
        ->default_str("4:8");
    add_size(app, "--ar-bytes", &o.ar_bytes, 1, UINT64_MAX, "Allreduce bytes per node")->default_str("64M");
    add_count(app, "--ar-samples", &o.ar_samples, 1, UINT32_MAX, "Allreduce samples per point")->default_str("200");
    app.add_option("--ar-schemes", g.ar_schemes, "the Allreduce schemes")->type_name("S,...")->default_str("sr,ec-mds:32,8");
    add_real(app, "--bw-gbps", &o.link.bw_gbps, 0, 1e6, "link bandwidth, Gbit/s", true)->default_str("400");
    add_real(app, "--rtt-ms", &o.link.rtt_ms, 0, 1e6, "round-trip time, ms", true)->default_str("25");
    add_size(app, "--mtu", &o.link.mtu, 64, 4096, "payload per packet")->default_str("4096");
    add_size(app, "--chunk", &o.link.chunk_bytes, 64, 1u << 31, "chunk size")->default_str("64K");
    add_count(app, "--channels", &o.link.channels, 1, 16, "channels")->default_str("8");
    app.add_option("--topology", o.link.topology,
                   "a datacenter network in the simulator (JSON file, JSON text or type:key=value,...); sim:0 and "
                   "sim:1 talk across it, its long haul takes --bw-gbps, --rtt-ms and the drop rate")
        ->type_name("SPEC");
    app.add_option("--utilisations", g.utilisations, "fabric: long-haul utilisations by the background, each in [0, 1)")
        ->type_name("U,...")->default_str("0,0.3,0.5,0.7,0.9");
    app.add_option("--fabric-sizes", g.fabric_sizes, "fabric: message sizes")->type_name("BYTES,...")
        ->default_str("1M,16M,64M");
    add_real(app, "--long-haul-gbps", &o.fab.long_haul_gbps, 0, 1e6, "fabric: the long haul's rate, Gbit/s", true)
        ->default_str("100");
    add_real(app, "--host-gbps", &o.fab.host_gbps, 0, 1e6, "fabric: the background senders' links, Gbit/s", true)
        ->default_str("long haul / 7");
    add_real(app, "--alpha", &o.alpha, 0, 1e6, "RTO = (1 + alpha) RTT")->default_str("2");
    add_count(app, "--seed", &o.seed, 0, UINT64_MAX, "the seed of every point's fabric")->default_str("1");
    add_count(app, "--jobs", &o.jobs, 0, 4096, "worker processes (0: one per usable core)")->default_str("0");
    app.add_option("--out", o.out, "output directory")->type_name("DIR")->default_str("sdr_sweep_out");
    app.add_flag("--no-plots", g.no_plots, "draw no figures");
    app.add_flag("--plots", g.plots, "a shard draws the figures of its rows");
    app.add_flag("--summary", g.summary, "a shard prints the summary of its rows");
    app.add_flag("--no-progress", g.no_progress, "no progress bar");
    app.add_option("--shard", g.shard, "run shard I (0 <= I < N) of the grid")->type_name("I/N");
    app.add_option("--merge", o.merge, "join these shard directories")->type_name("DIR...")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->expected(1, -1);
}

}  // namespace

void print_sweep_usage(FILE* out)
{
    SweepOptions o;
    Given g;
    sdr::tools::ToolApp app("sdr_sweep", "Simulated long-haul experiments, payload-free.");
    build(app, o, g);
    std::fputs(app.help().c_str(), out);
}

bool parse_shard_id(const std::string& text, ShardId* id, std::string* err)
{
    auto slash = text.find('/');
    auto digits = [](const std::string& s) { return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos; };
    if (slash != std::string::npos && digits(text.substr(0, slash)) && digits(text.substr(slash + 1))) {
        uint32_t i = static_cast<uint32_t>(std::stoul(text.substr(0, slash))), n = static_cast<uint32_t>(std::stoul(text.substr(slash + 1)));
        if (n >= 1 && i < n) {
            *id = {i, n};
            return true;
        }
    }
    *err = "--shard: expected I/N with 0 <= I < N (shards count from 0, e.g. 0/3 1/3 2/3), got '" + text + "'";
    return false;
}

bool parse_sweep_options(const std::vector<std::string>& args, SweepOptions* out, bool* help, std::string* err)
{
    using namespace sdr::tools;
    SweepOptions o;
    Given g;
    sdr::tools::ToolApp app("sdr_sweep", "Simulated long-haul experiments, payload-free.");
    build(app, o, g);
    if (!parse_args(app, args, help, err)) return false;
    if (*help) return true;
    auto fail = [err](const std::string& what) {
        *err = what;
        return false;
    };
    try {
        if (app.count("--only")) {
            o.messages = o.allreduce = o.dpa = o.fabric = false;
            std::stringstream ss(g.only);
            for (std::string e; std::getline(ss, e, ',');) {
                if (e == "messages") o.messages = true;
                else if (e == "allreduce") o.allreduce = true;
                else if (e == "dpa") o.dpa = true;
                else if (e == "fabric") o.fabric = true;
                else return fail("--only: messages, allreduce, dpa or fabric");
            }
            if (!o.messages && !o.allreduce && !o.dpa && !o.fabric) return fail("--only: messages, allreduce, dpa or fabric");
        }
        if (app.count("--utilisations")) {
            o.fab.utilisations.clear();
            std::stringstream ss(g.utilisations);
            for (std::string e; std::getline(ss, e, ',');) {
                const double u = parse_real("--utilisations", e, 0, 1);
                if (u >= 1) return fail("--utilisations: each in [0, 1) (the long haul saturates at 1), got " + e);
                o.fab.utilisations.push_back(u);
            }
        }
        if (app.count("--fabric-sizes")) {
            o.fab.sizes.clear();
            std::stringstream ss(g.fabric_sizes);
            for (std::string e; std::getline(ss, e, ',');) o.fab.sizes.push_back(parse_size("--fabric-sizes", e, 1, 1ull << 32));
        }
        if (app.count("--sizes"))
            range(std::string("--sizes"), g.sizes, &o.size_min, &o.size_max,
                  [](const std::string& opt, const std::string& v) { return parse_size(opt, v, 1, UINT64_MAX); });
        if (app.count("--drops"))
            range(std::string("--drops"), g.drops, &o.drop_min, &o.drop_max,
                  [](const std::string& opt, const std::string& v) { return parse_real(opt, v, 0, 1, true); });
        if (app.count("--nodes"))
            range(std::string("--nodes"), g.nodes, &o.nodes_min, &o.nodes_max,
                  [](const std::string& opt, const std::string& v) { return parse_count(opt, v, 2, 64); });
    } catch (const OptionError& e) {
        return fail(e.what());
    }
    if (app.count("--schemes")) o.schemes = scheme_list(g.schemes);
    if (app.count("--ar-schemes")) o.ar_schemes = scheme_list(g.ar_schemes);
    if (app.count("--shard")) {
        if (!parse_shard_id(g.shard, &o.shard, err)) return false;
        o.sharded = true;
    }
    o.progress = !g.no_progress;
    o.summary = !o.sharded || g.summary;
    if (!o.merge.empty()) {
        for (const CLI::Option* opt : app.get_options()) {
            const std::string name = opt->get_name();
            if (!opt->count() || name.empty() || name == "--help" || name == "-h") continue;
            if (std::find(std::begin(kRunOnly), std::end(kRunOnly), name) == std::end(kRunOnly))
                return fail("--merge takes the grid from the shards' shard.txt; " + name + " cannot go with it");
        }
    }
    if (o.dpa && (o.sharded || !o.merge.empty())) return fail("--only dpa runs whole in seconds: not with --shard or --merge");
    if (o.fabric && (o.sharded || !o.merge.empty())) return fail("--only fabric runs whole: not with --shard or --merge");
    if (o.fabric && !o.link.topology.empty()) return fail("--only fabric builds its own topology: not with --topology");
    if (o.fabric && o.fab.host_gbps > o.fab.long_haul_gbps)
        return fail("--host-gbps: at most --long-haul-gbps");
    if (o.fabric && (o.fab.utilisations.empty() || o.fab.sizes.empty()))
        return fail("--only fabric: --utilisations and --fabric-sizes need at least one value");
    // The fabric experiment's grid from the sweep's options where they were given.
    if (app.count("--samples")) o.fab.samples = o.samples;
    if (app.count("--schemes")) o.fab.schemes = o.schemes;
    if (app.count("--bw-gbps")) o.fab.dc_gbps = o.link.bw_gbps;
    o.fab.rtt_ms = o.link.rtt_ms;
    o.fab.mtu = o.link.mtu;
    o.fab.chunk_bytes = o.link.chunk_bytes;
    o.fab.channels = o.link.channels;
    o.fab.alpha = o.alpha;
    o.fab.seed = o.seed;
    if (o.size_min > o.size_max || o.size_max > (1ull << 32)) return fail("--sizes: MIN <= MAX <= 4G");
    if (!(o.drop_min > 0 && o.drop_min <= o.drop_max && o.drop_max < 1)) return fail("--drops: 0 < MIN <= MAX < 1");
    if (o.nodes_min > o.nodes_max) return fail("--nodes: 2 <= MIN <= MAX <= 64");
    if (!o.link.topology.empty()) {
        emu::Topology t;
        emu::LinkParams lp;
        lp.bandwidth_gbps = o.link.bw_gbps;
        lp.rtt_ms = o.link.rtt_ms;
        std::string err;
        if (!emu::Topology::parse(o.link.topology, lp, &t, &err)) return fail("--topology: " + err);
        if (t.hosts < 2) return fail("--topology: the sweep needs hosts sim:0 and sim:1");
        if (o.allreduce) return fail("--topology applies to message points: add --only messages");
    }
    // A shard's job is its CSV rows: figures and summary of a part of the grid only if asked.
    o.plots = (o.sharded ? g.plots : true) && !g.no_plots;
    if (o.jobs == 0) o.jobs = usable_cores();
    *out = o;
    return true;
}

std::vector<std::pair<std::string, std::string>> grid_options(const SweepOptions& o)
{
    auto u = [](uint64_t v) { return std::to_string(v); };
    std::string only = o.messages && o.allreduce ? "messages,allreduce" : o.messages ? "messages" : "allreduce";
    std::vector<std::pair<std::string, std::string>> v = {
        {"--only", only},
        {"--sizes", u(o.size_min) + ":" + u(o.size_max)},
        {"--drops", exact(o.drop_min) + ":" + exact(o.drop_max)},
        {"--per-decade", u(o.per_decade)},
        {"--schemes", join(o.schemes)},
        {"--samples", u(o.samples)},
        {"--min-samples", u(o.min_samples)},
        {"--bytes-per-point", u(o.bytes_per_point)},
        {"--nodes", u(o.nodes_min) + ":" + u(o.nodes_max)},
        {"--ar-bytes", u(o.ar_bytes)},
        {"--ar-samples", u(o.ar_samples)},
        {"--ar-schemes", join(o.ar_schemes)},
        {"--bw-gbps", exact(o.link.bw_gbps)},
        {"--rtt-ms", exact(o.link.rtt_ms)},
        {"--mtu", u(o.link.mtu)},
        {"--chunk", u(o.link.chunk_bytes)},
        {"--channels", u(o.link.channels)},
        {"--alpha", exact(o.alpha)},
        {"--seed", u(o.seed)},
    };
    if (!o.link.topology.empty()) v.push_back({"--topology", o.link.topology});
    return v;
}

}  // namespace sdr::exp
