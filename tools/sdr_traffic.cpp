// sdr_traffic: background traffic on the simulated fabric, as datacenter studies load their
// networks: Poisson arrivals with flow sizes from the web search or data mining distribution
// (or a CDF file), a permutation, or an incast, each flow an RDMA WRITE over an RC QP of the
// emulated NICs. Prints the flows' slowdown (FCT over the ideal) overall and by size; --fct
// writes one CSV row per flow. The fabric is the process's (SDR_SIM_* variables).
#include "common/options.hpp"

#include <sdr/emu/traffic.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <numeric>
#include <string>

namespace {

using namespace sdr::emu;

struct Options {
    std::string pattern = "poisson";
    uint32_t hosts = 8;
    double load = 0.5, duration_ms = 20;
    std::string cdf = "websearch";
    uint64_t size = 1 << 20;
    uint32_t senders = 0;  // incast: 0 = every host but the receiver
    bool shift = false;
    uint32_t mtu = 4096;
    uint64_t seed = 0;  // 0: the fabric's (SDR_SIM_SEED)
    std::string fct;
};

[[noreturn]] void bad(const std::string& what)
{
    std::fprintf(stderr, "sdr_traffic: %s (see --help)\n", what.c_str());
    std::exit(2);
}

Options parse(int argc, char** argv)
{
    using namespace sdr::tools;
    Options o;
    ToolApp app("sdr_traffic",
                "Background traffic on the simulated fabric: RDMA WRITE flows over RC QPs between NICs 0..hosts-1,\n"
                "their completion times against the ideal (slowdown), overall and by size.");
    app.footer("The fabric comes from SDR_SIM_* (bandwidth, RTT, loss, seed, ...): SDR_SIM_RTT_MS=0.01 for a\n"
               "datacenter round trip. BYTES take K/M/G (also KiB/MiB/GiB) suffixes, binary. A bad option exits 2;\n"
               "a flow that fails or cannot finish exits 1.");
    app.add_option("--pattern", o.pattern, "poisson, permutation or incast")
        ->type_name("P")
        ->check(CLI::IsMember({"poisson", "permutation", "incast"}))
        ->default_str("poisson");
    add_count(app, "--hosts", &o.hosts, 2, 65535, "hosts: NICs 0..N-1, 2..65535")->default_str("8");
    add_real(app, "--load", &o.load, 0, 100, "poisson: offered load per host, a fraction of its link", true)
        ->default_str("0.5");
    app.add_option("--cdf", o.cdf, "poisson: flow sizes, websearch, datamining or a CDF file")
        ->type_name("NAME|FILE")
        ->default_str("websearch");
    add_real(app, "--duration-ms", &o.duration_ms, 0, 1e6, "poisson: arrivals for this long (virtual ms)", true)
        ->default_str("20");
    add_size(app, "--size", &o.size, 1, 1ull << 40, "permutation, incast: bytes per flow")->default_str("1M");
    add_count(app, "--senders", &o.senders, 1, 65534, "incast: senders 1..N to host 0 (default: hosts - 1)");
    app.add_flag("--shift", o.shift, "permutation: host i sends to (i + hosts/2) % hosts (htsim), not a random derangement");
    add_size(app, "--mtu", &o.mtu, 256, 4096, "the QPs' path MTU, a power of two in 256..4096")->default_str("4096");
    add_count(app, "--seed", &o.seed, 1, UINT64_MAX, "the fabric's seed (default: SDR_SIM_SEED, or 1)");
    app.add_option("--fct", o.fct, "write one CSV row per completed flow")->type_name("FILE");
    parse_or_exit(app, argc, argv, 2);
    if (o.mtu & (o.mtu - 1)) bad("--mtu: must be a power of two in 256..4096");
    if (o.pattern == "incast" && o.senders >= o.hosts) bad("--senders: at most hosts - 1");
    return o;
}

std::string mb(double bytes)
{
    char b[32];
    std::snprintf(b, sizeof b, "%.3g MB", bytes / 1e6);
    return b;
}

}  // namespace

int main(int argc, char** argv)
{
    const Options o = parse(argc, argv);
    FabricParams fp;
    std::string err;
    if (!FabricParams::from_env(&fp, &err)) {
        std::fprintf(stderr, "sdr_traffic: %s\n", err.c_str());
        return 2;
    }
    if (o.seed) fp.seed = o.seed;
    SimFabric fabric(fp);
    TrafficParams tp;
    tp.mtu = o.mtu;
    TrafficGenerator gen(fabric, tp);
    std::vector<uint32_t> hosts(o.hosts);
    std::iota(hosts.begin(), hosts.end(), 0u);
    std::string what;
    bool ok = true;
    if (o.pattern == "poisson") {
        PoissonWorkload w;
        w.hosts = hosts;
        w.load = o.load;
        if (!FlowSizeCdf::named(o.cdf, &w.cdf, &err)) bad("--cdf: " + err);
        w.duration = static_cast<SimTime>(o.duration_ms * 1e9);
        ok = gen.add_poisson(w, &err);
        char b[160];
        std::snprintf(b, sizeof b, "poisson, load %g, %s (mean %s), %g ms of arrivals", o.load, w.cdf.name().c_str(),
                      mb(w.cdf.mean_bytes()).c_str(), o.duration_ms);
        what = b;
    } else if (o.pattern == "permutation") {
        ok = gen.add_permutation(PermutationWorkload{hosts, o.size, 0, o.shift}, &err);
        what = std::string(o.shift ? "permutation i -> i + n/2" : "random permutation") + ", " +
               sdr::tools::size_text(o.size) + " each";
    } else {
        const uint32_t n = o.senders ? o.senders : o.hosts - 1;
        ok = gen.add_incast(IncastWorkload{std::vector<uint32_t>(hosts.begin() + 1, hosts.begin() + 1 + n), 0, o.size, 0}, &err);
        what = "incast " + std::to_string(n) + " -> 1, " + sdr::tools::size_text(o.size) + " each";
    }
    if (!ok) bad(err);
    std::printf("sdr_traffic: %s; %u hosts, %g Gbit/s, RTT %g ms, seed %llu\n", what.c_str(), o.hosts,
                fp.link.bandwidth_gbps, fp.link.rtt_ms, static_cast<unsigned long long>(fp.seed));
    std::fflush(stdout);
    const auto t0 = std::chrono::steady_clock::now();
    gen.run();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const FctSummary s = gen.summary();
    TrafficGenerator::write_summary(std::cout, s);
    std::printf("virtual %.3f ms, wall %.2f s\n", static_cast<double>(fabric.sim().now()) / 1e9, wall);
    if (!o.fct.empty()) {
        std::ofstream out(o.fct);
        gen.write_csv(out);
        out.flush();
        if (!out) {
            std::fprintf(stderr, "sdr_traffic: --fct %s: cannot write\n", o.fct.c_str());
            return 1;
        }
    }
    if (s.completed != s.flows) {
        std::fprintf(stderr, "sdr_traffic: %llu of %llu flows did not complete\n",
                     static_cast<unsigned long long>(s.flows - s.completed), static_cast<unsigned long long>(s.flows));
        return 1;
    }
    return 0;
}
