// sdr_sweep: paper-scale experiments on the simulator, payload-free (the whole stack runs in
// virtual time, only the bytes are left out). Two grids, on one worker process per core:
//  - messages: size x per-packet drop, N seeded samples per point and scheme (sr, sr-nack,
//    ec-xor, ec-mds, auto), with the analytic model's value beside each;
//  - allreduce: ring Allreduce over 4..8 nodes x drop, per scheme.
// Writes messages.csv and allreduce.csv, the figures (gnuplot), and prints the headline numbers.
#include "allreduce.hpp"
#include "job_pool.hpp"
#include "message_run.hpp"
#include "plots.hpp"
#include "stats.hpp"
#include "summary.hpp"

#include <sdr/reliability/config.hpp>
#include <sdr/reliability/model.hpp>
#include <sdr/reliability/policy.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using sdr::exp::LinkSetup;

struct Options {
    uint64_t size_min = 128ull << 10, size_max = 1ull << 30;
    double drop_min = 1e-6, drop_max = 1e-2;
    uint32_t per_decade = 1;
    std::vector<std::string> schemes = {"sr", "sr-nack", "ec-xor:32,8", "ec-mds:32,8", "auto"};
    uint32_t samples = 1000, min_samples = 100;
    uint64_t bytes_per_point = 128ull << 30;  // large messages get fewer samples: equal cost per point
    uint32_t nodes_min = 4, nodes_max = 8;
    uint64_t ar_bytes = 64ull << 20;
    uint32_t ar_samples = 200;
    std::vector<std::string> ar_schemes = {"sr", "ec-mds:32,8"};
    bool messages = true, allreduce = true, plots = true, progress = true;
    LinkSetup link;
    double alpha = 2;
    uint64_t seed = 1;
    unsigned jobs = 0;  // 0: one per core
    std::string out = "sdr_sweep_out";
};

[[noreturn]] void bad(const std::string& msg)
{
    std::fprintf(stderr, "sdr_sweep: %s (--help for usage)\n", msg.c_str());
    std::exit(2);
}

void usage()
{
    std::printf(
        "usage: sdr_sweep [--only messages|allreduce] [--sizes MIN:MAX] [--drops MIN:MAX] [--per-decade N]\n"
        "                 [--schemes S,...] [--samples N] [--min-samples N] [--bytes-per-point B]\n"
        "                 [--nodes MIN:MAX] [--ar-bytes B] [--ar-samples N] [--ar-schemes S,...]\n"
        "                 [--bw-gbps G] [--rtt-ms R] [--mtu B] [--chunk B] [--channels N] [--alpha A]\n"
        "                 [--seed S] [--jobs J] [--out DIR] [--no-plots] [--no-progress]\n"
        "Simulated long-haul experiments, payload-free. messages: sizes double from MIN to MAX (K, M, G\n"
        "suffixes), per-packet drops log-spaced N per decade; per point and scheme min(--samples,\n"
        "max(--min-samples, --bytes-per-point / size)) samples. allreduce: ring Allreduce of --ar-bytes\n"
        "per node over MIN..MAX nodes at the same drops. Schemes: sr, sr-nack, ec-xor:k,m, ec-mds:k,m,\n"
        "auto (the model-based choice). Defaults: 128K:1G, 1e-6:1e-2, 1 per decade,\n"
        "sr,sr-nack,ec-xor:32,8,ec-mds:32,8,auto, 1000 samples (at least 100, 128G per point), nodes\n"
        "4:8, 64M, 200 samples, sr,ec-mds:32,8; 400 Gbit/s, 25 ms RTT, MTU 4096, 64K chunks,\n"
        "8 channels, RTO = (1+alpha) RTT with alpha 2, one job per core, output in sdr_sweep_out/.\n");
}

uint64_t parse_size(const std::string& s)
{
    char* end;
    double v = std::strtod(s.c_str(), &end);
    std::string suf = end;
    double mul = suf.empty() ? 1 : suf == "K" ? 1024.0 : suf == "M" ? 1048576.0 : suf == "G" ? 1073741824.0 : -1;
    if (end == s.c_str() || mul < 0 || v <= 0) bad("bad size '" + s + "' (e.g. 131072, 128K, 1G)");
    return static_cast<uint64_t>(v * mul);
}

double parse_num(const std::string& opt, const std::string& s)
{
    char* end;
    double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end) bad(opt + " expects a number, got '" + s + "'");
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

Options parse(int argc, char** argv)
{
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            usage();
            std::exit(0);
        }
        if (a == "--no-progress" || a == "--no-plots") {
            (a == "--no-plots" ? o.plots : o.progress) = false;
            continue;
        }
        if (i + 1 >= argc) bad(a + " needs a value");
        std::string v = argv[++i];
        if (a == "--only") {
            if (v != "messages" && v != "allreduce") bad("--only: messages or allreduce");
            o.messages = v == "messages";
            o.allreduce = v == "allreduce";
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
        else bad("unknown option " + a);
    }
    if (o.size_min > o.size_max || o.size_max > (1ull << 32)) bad("--sizes: MIN <= MAX <= 4G");
    if (!(o.drop_min > 0 && o.drop_min <= o.drop_max && o.drop_max < 1)) bad("--drops: 0 < MIN <= MAX < 1");
    if (o.per_decade < 1 || o.samples < 1 || o.ar_samples < 1) bad("--per-decade and sample counts must be >= 1");
    if (o.nodes_min < 2 || o.nodes_min > o.nodes_max || o.nodes_max > 64) bad("--nodes: 2 <= MIN <= MAX <= 64");
    if (o.link.bw_gbps <= 0 || o.link.rtt_ms <= 0) bad("--bw-gbps and --rtt-ms must be > 0");
    if (o.jobs == 0) o.jobs = static_cast<unsigned>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
    return o;
}

std::vector<uint64_t> sizes(const Options& o)
{
    std::vector<uint64_t> v;
    for (uint64_t s = o.size_min; s <= o.size_max; s *= 2) v.push_back(s);
    return v;
}

std::vector<double> drops(const Options& o)
{
    std::vector<double> v;
    double lo = std::log10(o.drop_min), hi = std::log10(o.drop_max);
    for (uint32_t i = 0;; i++) {
        double e = lo + i / static_cast<double>(o.per_decade);
        if (e > hi + 1e-9) break;
        v.push_back(std::pow(10.0, e));
    }
    return v;
}

struct Scheme {
    std::string label;  // sr, sr-nack, ec-xor, ec-mds, auto
    sdr::rel::Config cfg;
    bool automatic = false;
};

Scheme parse_scheme(const Options& o, const std::string& text)
{
    Scheme s;
    s.cfg.alpha = o.alpha;
    std::string err;
    if (!sdr::rel::parse_scheme(text, &s.cfg, &err)) bad("scheme: " + err);
    s.label = sdr::rel::to_string(s.cfg.scheme);
    s.automatic = s.cfg.scheme == sdr::rel::Scheme::Auto;
    return s;
}

// "ec-mds:32/8": a code in one CSV field.
std::string code_label(const sdr::rel::Code& c)
{
    std::string s = sdr::rel::to_string(c);
    std::replace(s.begin(), s.end(), ',', '/');
    return s;
}

// EC does not wait for the last submessage's parity (its data completes the message): the
// paper's bound less that parity's injection.
double ec_unwaited_parity_ms(const sdr::rel::model::Params& p)
{
    namespace model = sdr::rel::model;
    uint64_t M = model::chunks(p), L = (M + p.k - 1) / p.k;
    double paper = static_cast<double>((M * p.m + p.k - 1) / p.k), ours = static_cast<double>((L - 1) * p.m);
    return (paper - ours) * model::t_inj_s(p) * 1e3;
}

// The model's value for a scheme (what the simulation is compared with) and whether it is exact
// there or a lower bound.
std::pair<double, const char*> model_of(const sdr::rel::Config& c, const LinkSetup& l, uint64_t size)
{
    namespace model = sdr::rel::model;
    model::Params p = sdr::exp::model_params(l, size, c);
    switch (c.scheme) {
    case sdr::rel::Scheme::Sr:
        p.rto_rtts = 1 + c.alpha + 1.0 / 64;
        return {model::e_t_sr_s(p) * 1e3, model::sr_exact(p) ? "exact" : "lower_bound"};
    case sdr::rel::Scheme::SrNack:
        p.rto_rtts = 1;
        return {model::e_t_sr_s(p) * 1e3, "approx"};
    default:
        return {model::e_t_ec_s(p, c.scheme == sdr::rel::Scheme::EcXor ? model::Code::Xor : model::Code::Mds) * 1e3 -
                    ec_unwaited_parity_ms(p),
                "lower_bound"};
    }
}

double ideal_of(const sdr::rel::Config& c, const LinkSetup& l, uint64_t size)
{
    namespace model = sdr::rel::model;
    model::Params p = sdr::exp::model_params(l, size, c);
    return sdr::rel::is_ec(c.scheme) ? model::ideal_ec_s(p) * 1e3 - ec_unwaited_parity_ms(p) : model::ideal_s(p) * 1e3;
}

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...)
{
    char b[1024];
    va_list ap;
    va_start(ap, f);
    std::vsnprintf(b, sizeof b, f, ap);
    va_end(ap);
    return b;
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

}  // namespace

int main(int argc, char** argv)
{
    Options o = parse(argc, argv);
    std::vector<Scheme> schemes, ar_schemes;
    for (const auto& s : o.schemes) schemes.push_back(parse_scheme(o, s));
    for (const auto& s : o.ar_schemes) {
        ar_schemes.push_back(parse_scheme(o, s));
        if (ar_schemes.back().automatic) bad("--ar-schemes: auto is for single messages");
    }
    const auto sz = o.messages ? sizes(o) : std::vector<uint64_t>{};
    const auto dr = drops(o);
    std::vector<uint32_t> nodes;
    if (o.allreduce)
        for (uint32_t n = o.nodes_min; n <= o.nodes_max; n++) nodes.push_back(n);
    auto samples_for = [&](uint64_t size) {
        return static_cast<uint32_t>(std::min<uint64_t>(o.samples, std::max<uint64_t>(o.min_samples, o.bytes_per_point / size)));
    };
    const size_t msg_tasks = sz.size() * dr.size(), ar_tasks = nodes.size() * dr.size();
    // Work in simulated bytes: a message sample moves its size, an Allreduce sample 2(N-1)
    // segments of bytes/N on each of N links.
    uint64_t total = 0, samples = 0;
    for (uint64_t s : sz) {
        total += uint64_t{samples_for(s)} * schemes.size() * dr.size() * s;
        samples += uint64_t{samples_for(s)} * schemes.size() * dr.size();
    }
    for (uint32_t n : nodes) {
        total += uint64_t{o.ar_samples} * ar_schemes.size() * dr.size() * o.ar_bytes * 2 * (n - 1);
        samples += uint64_t{o.ar_samples} * ar_schemes.size() * dr.size();
    }
    if (mkdir(o.out.c_str(), 0755) != 0 && errno != EEXIST) bad("cannot create " + o.out + ": " + strerror(errno));
    std::fprintf(stderr, "sdr_sweep: messages %zu sizes x %zu drops x %zu schemes; allreduce %zu node counts x %zu drops x %zu schemes; %llu samples on %u jobs\n",
                 sz.size(), dr.size(), schemes.size(), nodes.size(), dr.size(), ar_schemes.size(),
                 (unsigned long long)samples, o.jobs);

    auto message_task = [&](size_t index, const auto& emit, const auto& tick) {
        const uint64_t size = sz[index % sz.size()];
        LinkSetup l = o.link;
        l.drop = dr[index / sz.size()];
        l.max_bytes = size;
        l.seed = o.seed * 1000003 + index;
        sdr::exp::MessageRun run(l);
        const uint32_t n = samples_for(size);
        for (const Scheme& sc : schemes) {
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
            emit(fmt("%llu,%.3g,%s,%u,%u,", (unsigned long long)size, l.drop, sc.label.c_str(), coded ? cfg.k : 0,
                     coded ? cfg.m : 0) +
                 stats_cols(n, failed, ms) +
                 fmt(",%llu,%.6f,%.3f,%.3f,%.6f,%s,%.6f,%s,%.3f,%llu", (unsigned long long)fb_samples, static_cast<double>(fb_samples) / n,
                     static_cast<double>(retx) / n, static_cast<double>(decoded) / n, model_ms, kind,
                     ideal_of(cfg, l, size), sc.automatic ? code_label(chosen).c_str() : "", wall,
                     (unsigned long long)(run.packets() - p0)));
            if (failed)
                std::fprintf(stderr, "\nsdr_sweep: %s at %llu B, drop %g: %llu samples failed: %s\n", sc.label.c_str(),
                             (unsigned long long)size, l.drop, (unsigned long long)failed, err.c_str());
        }
    };
    auto allreduce_task = [&](size_t index, const auto& emit, const auto& tick) {
        const uint32_t n = nodes[index % nodes.size()];
        const double drop = dr[index / nodes.size()];
        for (const Scheme& sc : ar_schemes) {
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
                p.seed = (o.seed * 1000003 + index) * 65537 + s;
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
            emit(fmt("%u,%llu,%.3g,%s,%u,%u,", n, (unsigned long long)o.ar_bytes, drop, sc.label.c_str(),
                     sdr::rel::is_ec(sc.cfg.scheme) ? sc.cfg.k : 0, sdr::rel::is_ec(sc.cfg.scheme) ? sc.cfg.m : 0) +
                 stats_cols(o.ar_samples, failed, ms) + fmt(",%.6f,%.3f,%llu", model_ms, wall, (unsigned long long)packets));
            if (failed)
                std::fprintf(stderr, "\nsdr_sweep: allreduce %s, %u nodes, drop %g: %llu samples failed: %s\n",
                             sc.label.c_str(), n, drop, (unsigned long long)failed, err.c_str());
        }
    };

    auto t0 = std::chrono::steady_clock::now();
    auto secs = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    // Allreduce tasks first: they are the longest, and a pool finishes soonest with those out of the way.
    auto pr = sdr::exp::run_pool(
        msg_tasks + ar_tasks, o.jobs,
        [&](size_t i, const auto& emit, const auto& tick) {
            if (i < ar_tasks) allreduce_task(i, emit, tick);
            else message_task(i - ar_tasks, emit, tick);
        },
        [&](uint64_t done) {
            if (o.progress) progress_bar(done, total, secs());
        });
    if (o.progress) std::fprintf(stderr, "\n");
    if (!pr.ok) {
        std::fprintf(stderr, "sdr_sweep: %s\n", pr.error.c_str());
        return 1;
    }
    const double wall = secs();
    const std::string mcsv = o.messages ? o.out + "/messages.csv" : "", acsv = o.allreduce ? o.out + "/allreduce.csv" : "";
    uint64_t packets = 0;
    auto write = [&](const std::string& path, const char* header, size_t first, size_t count) {
        std::ofstream f(path);
        f << header << "\n";
        for (size_t t = first; t < first + count; t++)
            for (const auto& l : pr.lines[t]) {
                f << l << "\n";
                packets += std::stoull(l.substr(l.rfind(',') + 1));
            }
        if (!f) bad("cannot write " + path);
    };
    if (o.messages)
        write(mcsv, sdr::exp::kMessagesHeader, ar_tasks, msg_tasks);
    if (o.allreduce)
        write(acsv, sdr::exp::kAllreduceHeader, 0, ar_tasks);
    std::printf("sdr_sweep: %llu samples in %.1f s on %u jobs: %.1f M simulated packets (data and control), %.2f M packets/s\n",
                (unsigned long long)samples, wall, o.jobs, packets / 1e6, packets / wall / 1e6);
    if (o.messages) std::printf("%s\n", mcsv.c_str());
    if (o.allreduce) std::printf("%s\n", acsv.c_str());
    std::string err;
    if (!sdr::exp::print_summary(stdout, mcsv, acsv, &err)) std::fprintf(stderr, "sdr_sweep: summary: %s\n", err.c_str());
    if (o.plots) {
        std::vector<std::string> figs;
        if (!sdr::exp::write_plots(o.out, mcsv, acsv, &figs, &err)) {
            std::fprintf(stderr, "sdr_sweep: figures: %s\n", err.c_str());
            return 1;
        }
        for (const auto& f : figs) std::printf("figure: %s\n", f.c_str());
    }
    return 0;
}
