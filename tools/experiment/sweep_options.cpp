#include "sweep_options.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>

namespace sdr::exp {

namespace {

struct Bad : std::runtime_error {
    using std::runtime_error::runtime_error;
};

uint64_t parse_size(const std::string& s)
{
    char* end;
    double v = std::strtod(s.c_str(), &end);
    std::string suf = end;
    double mul = suf.empty() ? 1 : suf == "K" ? 1024.0 : suf == "M" ? 1048576.0 : suf == "G" ? 1073741824.0 : -1;
    if (end == s.c_str() || mul < 0 || v <= 0) throw Bad("bad size '" + s + "' (e.g. 131072, 128K, 1G)");
    return static_cast<uint64_t>(v * mul);
}

double parse_num(const std::string& opt, const std::string& s)
{
    char* end;
    double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end) throw Bad(opt + " expects a number, got '" + s + "'");
    return v;
}

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

const std::set<std::string> kRunOnly = {"--jobs", "--out", "--no-plots", "--plots", "--summary", "--no-progress", "--merge"};

}  // namespace

void print_sweep_usage(FILE* out)
{
    std::fprintf(out,
        "usage: sdr_sweep [--only messages|allreduce|dpa] [--sizes MIN:MAX] [--drops MIN:MAX] [--per-decade N]\n"
        "                 [--schemes S,...] [--samples N] [--min-samples N] [--bytes-per-point B]\n"
        "                 [--nodes MIN:MAX] [--ar-bytes B] [--ar-samples N] [--ar-schemes S,...]\n"
        "                 [--bw-gbps G] [--rtt-ms R] [--mtu B] [--chunk B] [--channels N] [--alpha A]\n"
        "                 [--seed S] [--jobs J] [--out DIR] [--no-plots] [--no-progress]\n"
        "                 [--shard I/N [--plots] [--summary]]\n"
        "       sdr_sweep --merge DIR... [--out DIR] [--no-plots]\n"
        "Simulated long-haul experiments, payload-free. messages: sizes double from MIN to MAX (K, M, G\n"
        "suffixes), per-packet drops log-spaced N per decade; per point and scheme min(--samples,\n"
        "max(--min-samples, --bytes-per-point / size)) samples. allreduce: ring Allreduce of --ar-bytes\n"
        "per node over MIN..MAX nodes at the same drops. Schemes: sr, sr-nack, ec-xor:k,m, ec-mds:k,m,\n"
        "auto (the model-based choice). Defaults: 128K:1G, 1e-6:1e-2, 1 per decade,\n"
        "sr,sr-nack,ec-xor:32,8,ec-mds:32,8,auto, 1000 samples (at least 100, 128G per point), nodes\n"
        "4:8, 64M, 200 samples, sr,ec-mds:32,8; 400 Gbit/s, 25 ms RTT, MTU 4096, 64K chunks,\n"
        "8 channels, RTO = (1+alpha) RTT with alpha 2, one job per usable core, output in sdr_sweep_out/.\n"
        "--shard I/N runs shard I (0-based) of N: a share of the grid fixed by the grid and N alone,\n"
        "its CSV rows and shard.txt in --out, no figures or summary unless --plots/--summary.\n"
        "--merge joins the directories of all N shards of one grid into the CSVs, summary and figures\n"
        "an unsharded run gives (wall_s aside), refusing a set that is incomplete or mixes grids.\n"
        "dpa (only when asked for): the paper's BlueField-3 DPA figures predicted by the simulator's\n"
        "DPA and PCIe cost model (SDR_SIM_DPA_* override its parameters): dpa.csv and dpa.svg/png.\n");
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
    SweepOptions o;
    *help = false;
    std::set<std::string> given;
    bool plots_asked = false, no_plots = false;
    try {
        for (size_t i = 0; i < args.size(); i++) {
            const std::string& a = args[i];
            if (a == "-h" || a == "--help") {
                *help = true;
                return true;
            }
            given.insert(a);
            if (a == "--no-progress") o.progress = false;
            else if (a == "--no-plots") no_plots = true;
            else if (a == "--plots") plots_asked = true;
            else if (a == "--summary") o.summary = true;
            else if (a == "--merge") {
                // every argument up to the next option is a shard directory
                while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) o.merge.push_back(args[++i]);
                if (o.merge.empty()) throw Bad("--merge needs the shard directories");
            } else {
                if (i + 1 >= args.size()) throw Bad(a + " needs a value");
                const std::string& v = args[++i];
                if (a == "--only") {
                    o.messages = o.allreduce = o.dpa = false;
                    std::stringstream ss(v);
                    for (std::string e; std::getline(ss, e, ',');) {
                        if (e == "messages") o.messages = true;
                        else if (e == "allreduce") o.allreduce = true;
                        else if (e == "dpa") o.dpa = true;
                        else throw Bad("--only: messages, allreduce or dpa");
                    }
                    if (!o.messages && !o.allreduce && !o.dpa) throw Bad("--only: messages, allreduce or dpa");
                } else if (a == "--sizes") {
                    auto [lo, hi] = split(v, ':');
                    o.size_min = parse_size(lo);
                    o.size_max = parse_size(hi);
                } else if (a == "--drops") {
                    auto [lo, hi] = split(v, ':');
                    o.drop_min = parse_num(a, lo);
                    o.drop_max = parse_num(a, hi);
                } else if (a == "--nodes") {
                    auto [lo, hi] = split(v, ':');
                    o.nodes_min = static_cast<uint32_t>(parse_num(a, lo));
                    o.nodes_max = static_cast<uint32_t>(parse_num(a, hi));
                } else if (a == "--per-decade") o.per_decade = static_cast<uint32_t>(parse_num(a, v));
                else if (a == "--schemes") o.schemes = scheme_list(v);
                else if (a == "--ar-schemes") o.ar_schemes = scheme_list(v);
                else if (a == "--samples") o.samples = static_cast<uint32_t>(parse_num(a, v));
                else if (a == "--min-samples") o.min_samples = static_cast<uint32_t>(parse_num(a, v));
                else if (a == "--bytes-per-point") o.bytes_per_point = parse_size(v);
                else if (a == "--ar-bytes") o.ar_bytes = parse_size(v);
                else if (a == "--ar-samples") o.ar_samples = static_cast<uint32_t>(parse_num(a, v));
                else if (a == "--bw-gbps") o.link.bw_gbps = parse_num(a, v);
                else if (a == "--rtt-ms") o.link.rtt_ms = parse_num(a, v);
                else if (a == "--mtu") o.link.mtu = static_cast<uint32_t>(parse_num(a, v));
                else if (a == "--chunk") o.link.chunk_bytes = static_cast<uint32_t>(parse_size(v));
                else if (a == "--channels") o.link.channels = static_cast<uint32_t>(parse_num(a, v));
                else if (a == "--alpha") o.alpha = parse_num(a, v);
                else if (a == "--seed") o.seed = static_cast<uint64_t>(parse_num(a, v));
                else if (a == "--jobs") o.jobs = static_cast<unsigned>(parse_num(a, v));
                else if (a == "--out") o.out = v;
                else if (a == "--shard") {
                    std::string e;
                    if (!parse_shard_id(v, &o.shard, &e)) throw Bad(e);
                    o.sharded = true;
                } else throw Bad("unknown option " + a);
            }
        }
        if (!o.merge.empty()) {
            for (const auto& g : given)
                if (!kRunOnly.count(g)) throw Bad("--merge takes the grid from the shards' shard.txt; " + g + " cannot go with it");
        }
        if (o.dpa && (o.sharded || !o.merge.empty()))
            throw Bad("--only dpa runs whole in seconds: not with --shard or --merge");
        if (o.size_min > o.size_max || o.size_max > (1ull << 32)) throw Bad("--sizes: MIN <= MAX <= 4G");
        if (!(o.drop_min > 0 && o.drop_min <= o.drop_max && o.drop_max < 1)) throw Bad("--drops: 0 < MIN <= MAX < 1");
        if (o.per_decade < 1 || o.samples < 1 || o.ar_samples < 1) throw Bad("--per-decade and sample counts must be >= 1");
        if (o.nodes_min < 2 || o.nodes_min > o.nodes_max || o.nodes_max > 64) throw Bad("--nodes: 2 <= MIN <= MAX <= 64");
        if (o.link.bw_gbps <= 0 || o.link.rtt_ms <= 0) throw Bad("--bw-gbps and --rtt-ms must be > 0");
    } catch (const Bad& e) {
        *err = e.what();
        return false;
    }
    // A shard's job is its CSV rows: figures and summary of a part of the grid only if asked.
    o.plots = (o.sharded ? plots_asked : true) && !no_plots;
    if (o.sharded && !given.count("--summary")) o.summary = false;
    if (o.jobs == 0) o.jobs = usable_cores();
    *out = o;
    return true;
}

std::vector<std::pair<std::string, std::string>> grid_options(const SweepOptions& o)
{
    auto u = [](uint64_t v) { return std::to_string(v); };
    std::string only = o.messages && o.allreduce ? "messages,allreduce" : o.messages ? "messages" : "allreduce";
    return {
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
}

}  // namespace sdr::exp
