// sdr_write_bw: perftest-style bandwidth and latency of SDR writes between two emulated NICs,
// one per process (two network namespaces or two hosts), or both in this process on the
// simulated fabric (-d sim). The server (no address given) listens on a TCP bootstrap port,
// takes each run's parameters from the client and exchanges QP-info blobs; then each side plays
// its roles (write_bw/: bw.cpp raw writes with clear-to-send credits, latency.cpp ping-pong,
// scheme.cpp through the reliability layer; -b: a sender and a receiver on each side) and
// reports what it measured and what its NIC counted.
#include "write_bw/bw.hpp"
#include "write_bw/latency.hpp"
#include "write_bw/scheme.hpp"
#include "write_bw/sim_link.hpp"

#include <sched.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace sdr::write_bw;

namespace {

// The path the reliability layer starts from (it measures RTT and delivery rate from its ACKs
// afterwards): --rtt-ms and --gbps, else the path's own (first_estimates' callers).
struct PathGuess {
    double rtt_ms = 0, bw_gbps = 0;
};
PathGuess g_path;

PathGuess first_estimates(const Options& o, double path_rtt_ms, double path_gbps)
{
    return {o.rtt_ms > 0 ? o.rtt_ms : path_rtt_ms, o.gbps > 0 ? o.gbps : path_gbps};
}

RunParams params(const Options& o, uint64_t size)
{
    RunParams rp;
    rp.size = size;
    rp.iters = o.iters;
    rp.warmup = o.warmup;
    rp.in_flight = o.in_flight;
    rp.mtu = o.mtu;
    rp.chunk = o.chunk;
    rp.channels = o.channels;
    rp.mode = o.latency ? Mode::Latency : Mode::Bandwidth;
    rp.bidirectional = o.bidirectional;
    std::snprintf(rp.scheme, sizeof rp.scheme, "%s", o.scheme.c_str());
    return rp;
}

// The roles of one side: the client sends (and pings), the server receives (and echoes); with
// -b both do both.
void cast(const Options& o, Party* p, const RunParams& rp, bool client)
{
    if (rp.scheme[0]) p->side->open_endpoint(rp, g_path.rtt_ms, g_path.bw_gbps);
    if (rp.mode == Mode::Latency) {
        p->roles.push_back(client ? pinger(o, *p->side, *p->peer, rp) : ponger(o, *p->side, *p->peer, rp));
        return;
    }
    auto sender = rp.scheme[0] ? rel_sender : bw_sender;
    auto receiver = rp.scheme[0] ? rel_receiver : bw_receiver;
    if (client || rp.bidirectional) p->roles.push_back(sender(o, *p->side, *p->peer, rp));
    if (!client || rp.bidirectional) p->roles.push_back(receiver(o, *p->side, *p->peer, rp));
}

const char* mode_name(const RunParams& rp)
{
    return rp.mode == Mode::Latency ? "latency" : rp.bidirectional ? "bidirectional" : "bandwidth";
}

void print_header(const Options& o, const RunParams& rp, const Side& s, const char* role)
{
    if (o.json) return;
    std::printf("sdr_write_bw %s: %s (%s) | %s%s%s | %llu B messages, MTU %u, chunk %u, %u channels, %u in flight, "
                "%u iterations (+%u warm-up)\n",
                role, s.device.c_str(), s.port_mode().c_str(), mode_name(rp), rp.scheme[0] ? ", scheme " : "", rp.scheme,
                (unsigned long long)rp.size, rp.mtu, rp.chunk, rp.channels, rp.in_flight, rp.iters, rp.warmup);
}

// One side's report of one run: a JSON object, or its table row / lines (first and last: of the
// sizes of -a, for the table's header and the NIC's counters).
void print_report(const Options& o, const RunParams& rp, const Party& p, const char* role, bool first, bool last)
{
    if (o.json) {
        sdr::tools::Json j{{"role", role},
                           {"device", p.side->device},
                           {"port_mode", p.side->port_mode()},
                           {"mode", mode_name(rp)},
                           {"size", rp.size},
                           {"mtu", rp.mtu},
                           {"chunk", rp.chunk},
                           {"channels", rp.channels},
                           {"in_flight", rp.in_flight},
                           {"iters", rp.iters},
                           {"warmup", rp.warmup},
                           {"rate_limit_gbps", o.rate_limit_gbps}};
        if (p.roles.size() == 1)
            p.roles[0]->report(&j);
        else {  // -b: the sender's direction, the receiver's, and the sum of their goodputs
            sdr::tools::Json send = sdr::tools::Json::object(), recv = sdr::tools::Json::object();
            p.roles[0]->report(&send);
            p.roles[1]->report(&recv);
            j["send"] = std::move(send);
            j["recv"] = std::move(recv);
            j["goodput_gbps_sum"] = sdr::tools::json_real(p.roles[0]->goodput_gbps() + p.roles[1]->goodput_gbps());
        }
        nic_report(p.side->ctx, &j);
        sdr::tools::print_json(j);
        std::fflush(stdout);
        return;
    }
    const bool client = std::strcmp(role, "client") == 0;
    if (client && first && p.roles.size() == 1) {
        if (rp.mode == Mode::Latency)
            std::printf(" %12s %10s %10s %10s %10s %10s %10s %10s %10s\n", "bytes", "iterations", "t_min[us]", "t_max[us]",
                        "t_typical", "t_avg[us]", "t_stdev", "99%[us]", "99.9%[us]");
        else if (rp.scheme[0])
            std::printf(" %12s %10s %-14s %12s %16s %10s %10s %14s %12s %12s\n", "bytes", "iterations", "scheme",
                        "Gbit/s sent", "goodput Gbit/s", "delivered", "failed", "retransmitted", "msg mean[ms]",
                        "msg p99[ms]");
        else
            std::printf(" %12s %10s %12s %10s %12s %16s %12s\n", "bytes", "iterations", "Gbit/s sent", "Mpps", "msgs/s",
                        "goodput Gbit/s", "chunks lost");
    }
    if (p.roles.size() == 1)
        std::printf("%s\n", p.roles[0]->text().c_str());
    else
        std::printf("send:%s\nrecv: %s\ngoodput, both directions: %.2f Gbit/s\n", p.roles[0]->text().c_str(),
                    p.roles[1]->text().c_str(), p.roles[0]->goodput_gbps() + p.roles[1]->goodput_gbps());
    if (last || !client) std::printf("%s\n", nic_report(p.side->ctx).c_str());
    std::fflush(stdout);
}

// The sizes of a client's runs: -a is every power of two from 2 B to 8 MiB, as perftest's -a,
// each size a run of its own (fresh contexts and QPs shaped by it).
std::vector<uint64_t> sizes(const Options& o)
{
    std::vector<uint64_t> v;
    if (o.all_sizes)
        for (uint64_t b = 2; b <= (8u << 20); b *= 2) v.push_back(b);
    else
        v.push_back(o.size);
    return v;
}

// The next run's parameters, or false when the client hung up (after its last run).
bool next_run(sdr_oob* oob, RunParams* rp, int timeout_ms)
{
    uint8_t b[256];
    size_t len;
    if (sdr_oob_recv(oob, b, sizeof b, &len, timeout_ms) != SDR_SUCCESS) return false;
    if (len != sizeof *rp) die("the client did not send this program's run parameters");
    std::memcpy(rp, b, sizeof *rp);
    if (!rp->valid()) die("the client sent run parameters of another version of this program");
    rp->scheme[sizeof rp->scheme - 1] = 0;
    return true;
}

int run_server(const Options& o)
{
    sdr_oob* oob = sdr_oob_listen(nullptr, o.port, o.timeout_ms);
    if (!oob) die_sdr("waiting for a client");
    auto peer = oob_peer(oob);
    RunParams rp;
    if (!next_run(oob, &rp, o.timeout_ms)) die("the client did not send this program's run parameters");
    do {
        Side s(o, o.device, rp);
        s.connect(*peer, o.timeout_ms);
        print_header(o, rp, s, "server");
        Party p{&s, peer.get(), {}};
        cast(o, &p, rp, false);
        run({&p}, o.timeout_ms);
        print_report(o, rp, p, "server", true, true);
    } while (next_run(oob, &rp, o.timeout_ms));
    sdr_oob_close(oob);
    return 0;
}

int run_client(const Options& o)
{
    sdr_oob* oob = sdr_oob_connect(o.server.c_str(), o.port, o.timeout_ms);
    if (!oob) die_sdr("connecting to the server");
    auto peer = oob_peer(oob);
    const auto all = sizes(o);
    for (size_t i = 0; i < all.size(); i++) {
        const RunParams rp = params(o, all[i]);
        peer->send(rp);
        Side s(o, o.device, rp);
        s.connect(*peer, o.timeout_ms);
        if (i == 0) print_header(o, rp, s, "client");
        Party p{&s, peer.get(), {}};
        cast(o, &p, rp, true);
        run({&p}, o.timeout_ms);
        print_report(o, rp, p, "client", i == 0, i + 1 == all.size());
    }
    sdr_oob_close(oob);
    return 0;
}

// -d sim[:N]: the client on NIC N, the server on NIC N+1 of this process's simulated fabric, in
// one thread; the control messages go through a queue instead of TCP. The link: sim_link.hpp.
int run_sim(const Options& o)
{
    const sdr::emu::FabricParams fp = sim_fabric_params(o);
    g_path = first_estimates(o, fp.link.rtt_ms, fp.link.bandwidth_gbps);
    sdr::emu::SimFabric::install(std::make_unique<sdr::emu::SimFabric>(fp));
    const uint32_t n = o.device == "sim" ? 0 : static_cast<uint32_t>(std::atoi(o.device.c_str() + 4));
    if (n > 254) die("-d sim:N: N must be 0..254 (the server takes N+1)");
    const std::string cdev = "sim:" + std::to_string(n), sdev = "sim:" + std::to_string(n + 1);
    const auto all = sizes(o);
    for (size_t i = 0; i < all.size(); i++) {
        const RunParams rp = params(o, all[i]);
        Side cs(o, cdev, rp), ss(o, sdev, rp);
        cs.connect(ss);
        if (i == 0) print_header(o, rp, cs, "client"), print_header(o, rp, ss, "server");
        auto [cpeer, speer] = local_peers();
        Party c{&cs, cpeer.get(), {}}, s{&ss, speer.get(), {}};
        cast(o, &c, rp, true);
        cast(o, &s, rp, false);
        run({&c, &s}, o.timeout_ms);
        print_report(o, rp, c, "client", i == 0, i + 1 == all.size());
        // The table keeps one row per size (-a); the server's lines follow the last.
        if (o.json || i + 1 == all.size()) print_report(o, rp, s, "server", i == 0, i + 1 == all.size());
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    Options o = parse(argc, argv);
    // Before the device opens: threads it starts without a core of their own inherit this mask.
    if (o.app_core >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(o.app_core, &set);
        if (sched_setaffinity(0, sizeof set, &set)) die("--app-core " + std::to_string(o.app_core) + ": " + std::strerror(errno));
    }
    if (o.sim()) return run_sim(o);
    // 10 ms of RTT plus both sides' added delay, 10 Gbit/s unless shaped.
    g_path = first_estimates(o, 10 + 2 * o.delay_ms, o.rate_gbps > 0 ? o.rate_gbps : 10);
    return o.server.empty() ? run_server(o) : run_client(o);
}
