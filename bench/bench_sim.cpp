// Simulator speed: simulated packets per wall-clock second through the whole stack (C API,
// firmware TX and RX handlers, NIC model, link, event scheduler), with full payload + ICRC and
// payload-free (headers and lengths only, the mode of paper-scale experiments). Baselines in
// the same run: for full frames, the bare cost of encoding (with ICRC) and decoding (ICRC
// verified) the same frames; payload-free, a bare event loop of the same Simulator class
// running as many events as the transfer needed.
#include <sdr/emu/wire.hpp>
#include <sdr/host/sim_hosts.hpp>
#include <sdr/host/sim_world.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "report.hpp"

namespace {

constexpr size_t kMsg = 64u << 20;  // one message per iteration: 16384 packets of 4 KiB
constexpr double kPackets = kMsg / 4096.0;
double g_events_per_packet[2];

void BM_sim(benchmark::State& st)
{
    bool payload = st.range(0) != 0;
    sdr::WorldConfig c;
    c.channels = 8;
    c.fabric.payload = payload;
    c.fabric.link.bandwidth_gbps = 400;
    c.fabric.link.rtt_ms = 0.1;
    c.qp = sdr_qp_attr{16, 30, 4, SDR_MTU_4096, 1, 1, 0};  // 16 slots of 64 MiB, 64 KiB chunks
    sdr::SimWorld w(c);
    std::vector<uint8_t> src(kMsg, 1), dst(kMsg, 0);
    uint32_t sk = w.lkey(0, src.data(), kMsg), rk = w.lkey(1, dst.data(), kMsg);
    uint64_t events0 = w.fabric().sim().events_run(), delivered0 = w.fabric().packets_delivered();
    for (auto _ : st) {
        sdr_recv_wr rw{static_cast<uint32_t>(kMsg), rk, reinterpret_cast<uint64_t>(dst.data())};
        sdr_recv_handle* rh;
        sdr_recv_post(w.qp(1), &rw, &rh);
        sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(kMsg), sk, reinterpret_cast<uint64_t>(src.data()), 0};
        sdr_send_handle* sh;
        sdr_send_post(w.qp(0), &sw, &sh);
        int done = 0;
        while (!done) sdr_send_poll(sh, &done, nullptr);
        w.run_until_idle();
        sdr_recv_complete(rh);
    }
    uint64_t delivered = w.fabric().packets_delivered() - delivered0;
    if (delivered != static_cast<uint64_t>(st.iterations() * kPackets)) st.SkipWithError("packets went missing");
    g_events_per_packet[payload] = (w.fabric().sim().events_run() - events0) / static_cast<double>(delivered);
    st.counters["rate"] = benchmark::Counter(static_cast<double>(delivered), benchmark::Counter::kIsRate);
    st.counters["events_per_packet"] = g_events_per_packet[payload];
}

// Baseline for full frames: what every simulated packet must cost at least — building the
// frame with its ICRC and checking it on receipt.
void BM_frame_encode_decode(benchmark::State& st)
{
    std::vector<uint8_t> payload(4096, 7), frame(sdr::emu::wire::frame_bytes_write_imm(4096));
    sdr::emu::wire::Headers h;
    h.dma_len = 4096;
    uint64_t n = 0;
    for (auto _ : st) {
        h.psn = static_cast<uint32_t>(n++) & 0xFFFFFF;
        if (sdr::emu::wire::encode(h, payload.data(), 4096, frame.data(), frame.size()) == 0) {
            st.SkipWithError("wire::encode refused the frame");
            break;
        }
        sdr::emu::wire::Parsed p;
        benchmark::DoNotOptimize(sdr::emu::wire::decode(frame.data(), frame.size(), &p, true));
    }
    st.counters["rate"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
}

// Baseline for payload-free: the bare scheduler, as many events per packet as the transfer used.
class Nop final : public sdr::emu::SimTarget {
public:
    void fire(sdr::emu::SimTime, uint64_t) override { n++; }
    uint64_t n = 0;
};
void BM_bare_event_loop(benchmark::State& st)
{
    double epp = g_events_per_packet[0] > 0 ? g_events_per_packet[0] : 1.0;
    sdr::emu::Simulator sim;
    Nop a, b;
    uint64_t packets = 0;
    for (auto _ : st) {
        // a port and a link: a few events pending at any time, as in the transfer
        for (int i = 0; i < 1024; i++) {
            sim.at(sim.now() + 1000, &a);
            if (i % 4 == 0) sim.at(sim.now() + 25000, &b);
        }
        sim.run(~0ull);
        packets += static_cast<uint64_t>((1024 + 256) / epp);
    }
    st.counters["rate"] = benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate);
}

// A k-ary fat tree, payload-free, under htsim's permutation (host i sends to i + n/2), with ECN
// (DCQCN in the NICs) and packet spraying: every packet crosses edge, aggregation, core,
// aggregation and edge switches. Counts end-to-end
// packets (delivered to a NIC) and packet-hops (arrivals at switches and NICs) per wall second;
// the simulated time, the wall time of the transfer alone and the peak RSS go to the report.
struct FabricRun {
    double sim_ms = 0, wall_ms = 0, rss_mib = 0, hops_per_packet = 0, events_per_packet = 0, lost = 0, hop_rate = 0;
};
std::map<uint32_t, FabricRun> g_fabric;  // by k

// htsim's permutation on the hosts of fabric p (host i sends `bytes` to i + n/2), one SDR QP
// pair each, every channel spraying (SDR's UC channels take packets in any order): what both
// the fat tree and its point-to-point twin measure, into r.
void run_permutation(benchmark::State& st, const sdr::emu::FabricParams& p, uint32_t n, size_t bytes, FabricRun* r)
{
    sdr::SimHosts h(p, 8);
    sdr::emu::SimNetwork* net = h.fabric().network();
    const sdr_qp_attr_ext spray{0, SDR_LIFETIME_FROM_PATH, SDR_TRANSPORT_UC, 1};
    for (uint32_t i = 0; i < n; i++) h.connect(i, (i + n / 2) % n, sdr_qp_attr{16, 27, 1, SDR_MTU_4096, 1, 1, 0}, spray);
    uint64_t packets = 0, hops = 0, wall_ns = 0, sim_ps = 0, lost = 0, events = 0;
    for (auto _ : st) {
        const uint64_t d0 = h.fabric().packets_delivered(), h0 = net ? net->hops() : 0;
        const uint64_t t0 = h.fabric().sim().now(), e0 = h.fabric().sim().events_run();
        const auto w0 = std::chrono::steady_clock::now();
        for (uint32_t i = 0; i < n; i++) h.post(i, bytes);
        h.run();
        wall_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - w0).count();
        sim_ps += h.fabric().sim().now() - t0;
        events += h.fabric().sim().events_run() - e0;
        for (uint32_t i = 0; i < n; i++) lost += !h.arrived(i);
        h.finish();
        packets += h.fabric().packets_delivered() - d0;
        if (net) hops += net->hops() - h0;
    }
    st.counters["rate"] = benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate);
    if (net) st.counters["hop_rate"] = benchmark::Counter(static_cast<double>(hops), benchmark::Counter::kIsRate);
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    r->hop_rate = static_cast<double>(hops) / (static_cast<double>(wall_ns) / 1e9);
    r->sim_ms = sim_ps / 1e9 / static_cast<double>(st.iterations());
    r->wall_ms = wall_ns / 1e6 / static_cast<double>(st.iterations());
    r->rss_mib = ru.ru_maxrss / 1024.0;
    r->hops_per_packet = static_cast<double>(hops) / static_cast<double>(packets);
    r->events_per_packet = static_cast<double>(events) / static_cast<double>(packets);
    r->lost = static_cast<double>(lost) / static_cast<double>(st.iterations() * n);
}

void BM_fabric(benchmark::State& st)
{
    const uint32_t k = static_cast<uint32_t>(st.range(0));
    sdr::emu::FabricParams p;
    p.payload = false;
    p.topology = sdr::emu::Topology::fat_tree(k, 100.0);
    p.topology->sw.ecn = true;  // DCQCN answers ECN
    run_permutation(st, p, p.topology->hosts, static_cast<size_t>(st.range(1)), &g_fabric[k]);
}

// The fat tree's hosts and traffic without the tree: every pair of NICs on its own 100 Gbit/s
// link, a round trip like the tree's. What the NICs, firmware and links cost per packet with
// many hosts, apart from the switches.
FabricRun g_p2p;

void BM_p2p_permutation(benchmark::State& st)
{
    const uint32_t k = static_cast<uint32_t>(st.range(0));
    sdr::emu::FabricParams p;
    p.payload = false;
    p.link.bandwidth_gbps = 100;
    p.link.rtt_ms = 0.006;
    run_permutation(st, p, k * k * k / 4, static_cast<size_t>(st.range(1)), &g_p2p);
}

BENCHMARK(BM_sim)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_frame_encode_decode);
BENCHMARK(BM_bare_event_loop);

}  // namespace

// k=8: 128 hosts, 12 MiB each (about 1 ms of a 100 Gbit/s link); k=16: 1024 hosts, 1 MiB each.
// A smoke run (CI) takes a k=4 tree of 16 hosts instead, 1 MiB each.
struct FabricCase {
    uint32_t k;
    size_t bytes;
    const char* what;
};
const FabricCase kFabric[] = {{8, 12u << 20, "fat tree k=8 (128 hosts)"}, {16, 1u << 20, "fat tree k=16 (1024 hosts)"}};
const FabricCase kFabricSmoke[] = {{4, 1u << 20, "fat tree k=4 (16 hosts)"}};

int main(int argc, char** argv)
{
    const bool smoke_run = std::any_of(argv + 1, argv + argc, [](const char* a) { return !std::strcmp(a, "--smoke"); });
    std::vector<FabricCase> cases(smoke_run ? std::begin(kFabricSmoke) : std::begin(kFabric),
                                  smoke_run ? std::end(kFabricSmoke) : std::end(kFabric));
    for (const FabricCase& c : cases)
        benchmark::RegisterBenchmark(c.what, BM_fabric)
            ->Args({c.k, static_cast<int64_t>(c.bytes)})
            ->Iterations(1)
            ->Unit(benchmark::kMillisecond);
    const FabricCase p2p = smoke_run ? FabricCase{4, 1u << 20, "point-to-point k=4 permutation (16 hosts)"}
                                     : FabricCase{8, 12u << 20, "point-to-point k=8 permutation (128 hosts)"};
    benchmark::RegisterBenchmark(p2p.what, BM_p2p_permutation)
        ->Args({p2p.k, static_cast<int64_t>(p2p.bytes)})
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
    bool json, smoke;
    auto rate = sdr::bench::run(argc, argv, &json, &smoke);
    std::vector<sdr::bench::Result> out;
    sdr::bench::Result full, free;
    full.name = "sim packets/s, full payload+ICRC";
    full.value = rate["BM_sim/1"] / 1e6;
    full.baseline = rate["BM_frame_encode_decode"] / 1e6;
    full.baseline_name = "bare encode+ICRC+decode";
    free.name = "sim packets/s, payload-free";
    free.value = rate["BM_sim/0"] / 1e6;
    free.baseline = rate["BM_bare_event_loop"] / 1e6;
    free.baseline_name = "bare event loop";
    full.unit = free.unit = "Mpps";
    full.floor = 0.12;  // bench/README.md, "Floors"
    free.floor = 0.22;
    free.target = 25;  // twice real time for 400 Gbit/s at 4 KiB MTU (11.6 Mpps)
    out.push_back(full);
    out.push_back(free);
    for (size_t i = 0; i < cases.size(); i++) {
        sdr::bench::Result r;
        r.name = std::string(cases[i].what) + ", payload-free, end-to-end packets/s";
        r.value = rate[std::string(cases[i].what) + "/" + std::to_string(cases[i].k) + "/" + std::to_string(cases[i].bytes) +
                       "/iterations:1"] /
                  1e6;
        r.baseline = rate["BM_sim/0"] / 1e6;
        r.baseline_name = "point-to-point, payload-free";
        r.unit = "Mpps";
        out.push_back(r);
    }
    {
        sdr::bench::Result r;
        r.name = std::string(p2p.what) + ", payload-free, end-to-end packets/s";
        r.value = rate[std::string(p2p.what) + "/" + std::to_string(p2p.k) + "/" + std::to_string(p2p.bytes) + "/iterations:1"] / 1e6;
        r.baseline = rate["BM_sim/0"] / 1e6;
        r.baseline_name = "point-to-point, payload-free";
        r.unit = "Mpps";
        out.push_back(r);
    }
    if (!json)
    {
        std::printf("\nevents per packet: %.2f (payload-free), %.2f (full); simulated 400 Gbit/s at 4 KiB MTU = 11.6 Mpps\n",
                    g_events_per_packet[0], g_events_per_packet[1]);
        for (const FabricCase& c : cases) {
            const FabricRun& f = g_fabric[c.k];
            std::printf("%s: %.3f ms simulated in %.1f ms of wall time (%.1f ms per simulated ms), %.2f Mhops/s, %.2f hops "
                        "and %.2f events per packet, %.0f %% of messages incomplete (congestion drops), peak RSS %.0f MiB\n",
                        c.what, f.sim_ms, f.wall_ms, f.wall_ms / f.sim_ms, f.hop_rate / 1e6, f.hops_per_packet,
                        f.events_per_packet, 100 * f.lost, f.rss_mib);
        }
    }
    if (!json)
        std::printf("%s: %.3f ms simulated in %.1f ms of wall time, %.2f events per packet, %.0f %% of messages incomplete\n",
                    p2p.what, g_p2p.sim_ms, g_p2p.wall_ms, g_p2p.events_per_packet, 100 * g_p2p.lost);
    return sdr::bench::finish(out, json);
}
