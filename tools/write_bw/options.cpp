#include "options.hpp"

#include "common/options.hpp"

#include <sdr.h>
#include <sdr/reliability/scheme.hpp>
#include <sdr_rel.h>

#include <sched.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

namespace sdr::write_bw {

Options parse(int argc, char** argv)
{
    using namespace sdr::tools;
    Options o;
    ToolApp app("sdr_write_bw",
                "perftest-style bandwidth and latency of SDR writes between two emulated NICs. Without a server\n"
                "address: the server. The client sets the run's parameters (size .. channels, the mode) for both.\n"
                "-d sim: server and client in this process on the simulated fabric (no root needed).");
    app.footer("BYTES take K/M/G (also KiB/MiB/GiB) suffixes, binary: 64K = 65536. A bad option exits 1.");
    app.add_option("SERVER_ADDRESS", o.server, "the server to connect to (the client)");
    app.add_option("-d,--device", o.device, "raw:IFNAME (AF_PACKET), xdp:IFNAME (AF_XDP), verbs:IBDEV (an rdma-core device) or sim (both sides here)")
        ->type_name("NAME")
        ->required();
    add_count(app, "-p,--port", &o.port, 1, 65535, "TCP bootstrap port (not on sim)")->default_str("18515");
    add_size(app, "-s,--size", &o.size, 1, (1ull << 32) - 1, "message size")->default_str("1M");
    app.add_flag("-a,--all", o.all_sizes, "client: every size 2^k from 2 B to 8 MiB, one run each (one table row, one JSON object)");
    add_count(app, "-n,--iters", &o.iters, 1, 1u << 30, "measured messages (latency: round trips)")->default_str("1000");
    add_count(app, "-w,--warmup", &o.warmup, 0, 1u << 30, "messages before measuring")->default_str("100");
    add_count(app, "-q,--in-flight", &o.in_flight, 1, 1024, "messages in flight")->default_str("8");
    add_size(app, "-m,--mtu", &o.mtu, 256, 4096, "payload per packet, a power of two")->default_str("4096");
    add_size(app, "--chunk", &o.chunk, 256, 1u << 30, "bitmap chunk size, a power of two >= MTU")->default_str("64K");
    add_count(app, "-c,--channels", &o.channels, 1, 16, "channels = emulated DPA workers")->default_str("4");
    add_real(app, "--rate_limit", &o.rate_limit_gbps, 0, 4294,
             "pace this side's QP to G Gbit/s (the QP's rate_limit attribute, as perftest's --rate_limit; 0: line rate)")
        ->type_name("G")
        ->default_str("0");
    app.add_flag("--latency", o.latency,
                 "client: ping-pong of one message each way, -n round trips; half the round trip as ib_write_lat reports it");
    app.add_flag("-b,--bidirectional", o.bidirectional,
                 "client: both sides send and receive at once; each reports both directions and their sum");
    bind_option(app, "--scheme", "S", "client: send through the reliability layer (sdr_rel.h): " + rel::scheme_list() + ", auto",
                [&o](const std::string& name, const std::string& v) {
                    sdr_rel_attr a;
                    sdr_rel_attr_default(&a);
                    if (sdr_rel_attr_parse_scheme(&a, v.c_str()) != SDR_SUCCESS)
                        throw OptionError(name + ": " + sdr_rel_last_error());
                    o.scheme = v;
                });
    // Settings the device reads from its environment when it opens: SDR_RT_* on raw:/xdp:/verbs:.
    // -d sim takes every impairment on its link, in both directions: the first six set its
    // SDR_SIM_* of the same name, run_sim puts --delay-ms, --rate-gbps and --snaplen on the link.
    // What only a real device has is refused there (below), never ignored.
    static const std::tuple<const char*, const char*, const char*, const char*> sim_env_opts[] = {
        {"--loss", "LOSS", "P", "i.i.d. loss of what this side sends (sim: both directions)"},
        {"--burst", "BURST", "GB,BG[,LB]", "Gilbert-Elliott burst loss of what this side sends (sim: both directions)"},
        {"--reorder", "REORDER", "P,US", "delay a share P of frames by US microseconds (sim: both directions)"},
        {"--dup", "DUP", "P", "duplicate a share P of frames (sim: both directions)"},
        {"--seed", "SEED", "N", "the impairments' random seed"},
        {"--pcap", "PCAP", "FILE", "capture this NIC's frames (sim: both NICs'); FILE.pcapng also records what the impairments dropped"}};
    for (const auto& [opt, var, type, help] : sim_env_opts)
        app.add_option_function<std::string>(
               opt,
               [var = std::string(var)](const std::string& v) {
                   setenv(("SDR_RT_" + var).c_str(), v.c_str(), 1);
                   setenv(("SDR_SIM_" + var).c_str(), v.c_str(), 1);
               },
               help)
            ->type_name(type);
    bind_option(app, "--delay-ms", "D", "added one-way delay of what this side sends (sim: the link's RTT grows by 2 D)",
                [&o](const std::string& name, const std::string& v) {
                    o.delay_ms = parse_real(name, v, 0, 10'000);
                    setenv("SDR_RT_DELAY_MS", v.c_str(), 1);
                });
    bind_option(app, "--rate-gbps", "G", "shape what this side sends to G Gbit/s, 0: not shaped (sim: the link's rate)",
                [&o](const std::string& name, const std::string& v) {
                    o.rate_gbps = parse_real(name, v, 0, 10'000);
                    setenv("SDR_RT_RATE_GBPS", v.c_str(), 1);
                });
    bind_option(app, "--snaplen", "N", "bytes kept of each data frame in the capture (0: whole frames; default 128)",
                [&o](const std::string& name, const std::string& v) {
                    o.snaplen = static_cast<uint32_t>(parse_count(name, v, 0, UINT32_MAX));
                    setenv("SDR_RT_SNAPLEN", v.c_str(), 1);
                });
    bind_option(app, "--topology", "SPEC",
                "sim: a datacenter network instead of the one link (JSON file, JSON text or type:key=value,...); "
                "sim:0 and sim:1 talk across it",
                [&o](const std::string&, const std::string& v) {
                    o.topology = v;
                    setenv("SDR_SIM_TOPOLOGY", v.c_str(), 1);
                });
    // Only a real device has a polling thread, worker threads and an XDP program; the reason
    // -d sim refuses each.
    std::vector<std::string> real_only;
    static const std::tuple<const char*, const char*, const char*, const char*, const char*> real_env_opts[] = {
        {"--core", "CORE", "N", "pin the NIC's polling thread to core N (not on sim)",
         "the simulator has no polling thread (it runs in this program's thread: --app-core pins that)"},
        {"--workers", "WORKER_THREADS", "N", "DPA workers on N dedicated threads, 0: inline (not on sim)",
         "the simulator runs the DPA workers in its own thread (-c sets how many)"},
        {"--worker-cores", "WORKER_CORES", "LIST", "the workers' cores (not on sim)",
         "the simulator runs the DPA workers in its own thread (-c sets how many)"},
        {"--xdp-mode", "XDP_MODE", "auto|native|generic", "how xdp: attaches its program (not on sim)", "only xdp: attaches an XDP program"}};
    for (const auto& [opt, var, type, help, why] : real_env_opts)
        app.add_option_function<std::string>(
               opt,
               [&real_only, var = std::string(var), refusal = std::string(opt) + ": " + why](const std::string& v) {
                   setenv(("SDR_RT_" + var).c_str(), v.c_str(), 1);
                   real_only.push_back(refusal);
               },
               help)
            ->type_name(type);
    // perftest calls it -c (here -c is the channel count, the published benchmark's name): the
    // per-packet transport; RC unless SDR_USE_UC_QP=1 (as the published SDK).
    app.add_option_function<std::string>(
           "--connection",
           [](const std::string& v) { setenv("SDR_USE_UC_QP", v == "UC" ? "1" : "0", 1); },
           "transport QPs RC (default) or UC; both sides must agree (--scheme always uses UC)")
        ->type_name("RC|UC")
        ->check(CLI::IsMember({"RC", "UC"}));
    app.add_flag_callback(
        "--busy-poll",
        [&real_only] {
            setenv("SDR_RT_BUSY_POLL", "1", 1);
            real_only.push_back("--busy-poll: the simulator has no polling thread (its virtual clock never sleeps)");
        },
        "never sleep the NIC's polling thread (not on sim)");
    add_count(app, "--app-core", &o.app_core, 0, CPU_SETSIZE - 1,
              "pin this program's own threads (and unpinned workers) to core N, keeping them off the polling thread's core");
    add_count(app, "--timeout-ms", &o.timeout_ms, 1, 1u << 30, "bootstrap timeout")->default_str("10000");
    add_real(app, "--rtt-ms", &o.rtt_ms, 0, 1e5,
             "the reliability layer's first RTT estimate, which the endpoint then measures from its ACKs (default: raw:, "
             "xdp:, verbs: 10 ms + 2 x --delay-ms; sim: the simulated link's RTT)",
             true)
        ->type_name("R");
    add_real(app, "--gbps", &o.gbps, 0, 1e6,
             "the reliability layer's first delivery-rate estimate in Gbit/s, which the endpoint then measures from its "
             "ACKs (default: raw:, xdp:, verbs: --rate-gbps or 10; sim: the simulated link's rate)",
             true)
        ->type_name("G");
    add_count(app, "--settle-ms", &o.settle_ms, 0, 1u << 30,
              "server: how long a message the client reported sent still waits for its packets (20 + 2 x --delay-ms)");
    app.add_flag("--json", o.json, "one JSON object per side instead of the table");
    app.add_flag("--verify", o.verify, "receiver: check every complete chunk's (--scheme: delivered message's) bytes (costs CPU)");
    parse_or_exit(app, argc, argv, 1);
    // Without --snaplen the default applies to a real device too, unless SDR_RT_SNAPLEN says otherwise.
    setenv("SDR_RT_SNAPLEN", std::to_string(o.snaplen).c_str(), 0);
    auto bad = [](const std::string& what) {
        std::fprintf(stderr, "sdr_write_bw: %s (see --help)\n", what.c_str());
        std::exit(1);
    };
    if (o.latency && (o.bidirectional || !o.scheme.empty()))
        bad("--latency: ping-pong is one message each way over raw SDR writes; not with -b or --scheme");
    if (o.sim() && !o.server.empty()) bad("-d sim runs server and client in this process: no SERVER_ADDRESS");
    const bool client = o.sim() || !o.server.empty();
    if (client && o.scheme.empty() && (o.rtt_ms > 0 || o.gbps > 0))
        bad(std::string(o.rtt_ms > 0 ? "--rtt-ms" : "--gbps") + ": a first estimate of the reliability layer: only with --scheme");
    if (o.sim()) {
        if (!real_only.empty()) bad("-d sim: " + real_only.front());
        if (app.count("--port")) bad("-d sim: --port: both sides are in this process, with no TCP bootstrap");
    } else {
        if (!o.topology.empty()) bad("--topology: only -d sim has a simulated network");
        // Given in the environment instead, they still shape the path: the settle time and the
        // first estimates count them too.
        if (const char* d = std::getenv("SDR_RT_DELAY_MS"); d && !app.count("--delay-ms")) o.delay_ms = std::atof(d);
        if (const char* r = std::getenv("SDR_RT_RATE_GBPS"); r && !app.count("--rate-gbps")) o.rate_gbps = std::atof(r);
    }
    return o;
}

}  // namespace sdr::write_bw
