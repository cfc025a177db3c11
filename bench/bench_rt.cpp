// bench_rt: the real-time emulator's goodput against the raw packet ceiling of the same port,
// measured in one run on one veth pair (tools/sdr-netns, MTU 4200).
//
// Ceiling: a bare blaster in namespace A and a bare sink in namespace B on our own port layer
// (sdr::emu::Port, the code the emulated NIC sends and receives through), one thread each,
// sending one prebuilt RoCEv2 UC WRITE frame with a 4096 B payload (4174 B, exactly what SDR
// sends at MTU 4096) as fast as the port takes it. The rate is what the sink receives. On veth
// the kernel's work for a frame (both directions) runs on the sending core, so this is the
// most frames/s a sender core can push through the port, with nothing of SDR on top.
//
// SDR: sdr_write_bw, server in B and client in A (separate processes, TCP bootstrap), 1 MiB
// messages, with the firmware's CQE handlers inline on the polling thread and on 1 and 2
// dedicated worker threads. Goodput counts payload bytes of complete chunks at the receiver.
// Each run is set against the ceiling's payload rate measured just before and after it (the
// mean of the two), and the median of these paired ratios is judged. Target: >= 80 %.
#include "report.hpp"

#include "../tests/child_util.hpp"
#include "../tests/netns_util.hpp"

#include <sdr/emu/port.hpp>
#include <sdr/emu/wire.hpp>

#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace sdr;
using sdr::test::Child;
using sdr::test::InNetns;
using sdr::test::json_number;
using sdr::test::Testbed;

namespace {

constexpr uint32_t kPayload = 4096;
constexpr double kTargetRatio = 0.8;
// The floor CI holds a smoke run to (one short round, so noisier than the target's 5 rounds):
// about half of the 0.83-0.95 measured, so a halving fails (bench/README.md, "Floors").
constexpr double kFloorRatio = 0.5;

double now_s()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Sender and receiver each own a core, in both measurements: on two cores, a spinning receiver
// that the scheduler parks beside the sender would halve either rate.
void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

struct Ceiling {
    double pps = 0;
    std::string mode, error;
};

// Blaster (side 0) and sink (side 1) on `kind` ports; frames per second the sink received over
// `seconds`, after a quarter second of warm-up.
Ceiling raw_ceiling(const Testbed& tb, const std::string& kind, double seconds)
{
    Ceiling c;
    std::mutex mu;
    std::condition_variable cv;
    emu::PortInfo sink_info;
    bool sink_ready = false, failed = false;
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> received{0};

    auto fail = [&](const std::string& e) {
        std::lock_guard<std::mutex> g(mu);
        if (c.error.empty()) c.error = e;
        failed = true;
        cv.notify_all();
    };
    std::thread sink([&] {
        pin(1);
        InNetns in(tb.ns(1));
        std::string err;
        auto port = in.ok() ? emu::open_port(kind, tb.ns(1), emu::PortOptions{}, &err) : nullptr;
        if (!port) return fail("sink: " + (in.ok() ? err : "cannot enter " + tb.ns(1)));
        {
            std::lock_guard<std::mutex> g(mu);
            sink_info = port->info();
            sink_ready = true;
            cv.notify_all();
        }
        uint64_t n = 0;
        while (!stop.load(std::memory_order_relaxed)) {
            n += port->rx_burst(64, [](const uint8_t*, size_t) {});
            received.store(n, std::memory_order_relaxed);
        }
    });
    std::thread blaster([&] {
        {
            std::unique_lock<std::mutex> g(mu);
            cv.wait(g, [&] { return sink_ready || failed; });
            if (failed) return;
        }
        pin(0);
        InNetns in(tb.ns(0));
        std::string err;
        auto port = in.ok() ? emu::open_port(kind, tb.ns(0), emu::PortOptions{}, &err) : nullptr;
        if (!port) return fail("blaster: " + (in.ok() ? err : "cannot enter " + tb.ns(0)));
        emu::wire::Headers h;
        h.src_mac = port->info().addr.mac;
        h.src_ip = port->info().addr.ip;
        h.dst_mac = sink_info.addr.mac;
        h.dst_ip = sink_info.addr.ip;
        h.dest_qp = 0x100;
        h.dma_len = kPayload;
        std::vector<uint8_t> payload(kPayload, 0x5A), frame(emu::wire::frame_bytes_write_imm(kPayload));
        size_t len = emu::wire::encode(h, payload.data(), kPayload, frame.data(), frame.size());
        {
            std::lock_guard<std::mutex> g(mu);
            c.mode = port->info().mode;
        }
        for (uint32_t i = 0; !stop.load(std::memory_order_relaxed); i++) {
            uint8_t* b = port->tx_alloc();
            if (!b) {
                port->tx_flush();
                continue;
            }
            std::memcpy(b, frame.data(), len);
            port->tx_commit(len);
            if (i % 32 == 31) port->tx_flush();
        }
    });
    {
        std::unique_lock<std::mutex> g(mu);
        cv.wait(g, [&] { return sink_ready || failed; });
    }
    if (!failed) {
        // The measurement window itself: wall time, not synchronisation.
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        uint64_t n0 = received.load();
        double t0 = now_s();
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
        c.pps = (received.load() - n0) / (now_s() - t0);
    }
    stop = true;
    blaster.join();
    sink.join();
    return c;
}

struct Sdr {
    double goodput_gbps = 0;  // payload of complete chunks at the receiver
    std::string error;
};

// One sdr_write_bw run, server in B and client in A.
Sdr sdr_run(const Testbed& tb, const std::string& kind, uint32_t workers, uint32_t iters, int port)
{
    const std::string tool = SDR_WRITE_BW, p = " -p " + std::to_string(port);
    const std::string w = " --workers " + std::to_string(workers);
    // Core 0 belongs to the client's polling thread (the sending core, which carries the veth's
    // work both ways); everything else of both sides, applications and workers, runs on core 1.
    const std::string app = std::thread::hardware_concurrency() >= 2 ? " --app-core 1" : "";
    Child server("ip netns exec " + tb.ns(1) + " " + tool + " -d " + kind + ":" + tb.ns(1) + p + w +
                 " --core 1" + app + " --json");
    Child client("ip netns exec " + tb.ns(0) + " " + tool + " -d " + kind + ":" + tb.ns(0) + p + w +
                 " --core 0" + app + " --json -s 1M -w 100 -n " + std::to_string(iters) + " " + Testbed::ip(1));
    int cs, ss;
    std::string cout = client.finish(&cs), sout = server.finish(&ss);
    Sdr r;
    if (cs != 0 || ss != 0) {
        r.error = "sdr_write_bw failed:\nclient: " + cout + "\nserver: " + sout;
        return r;
    }
    r.goodput_gbps = json_number(cout, "goodput_gbps");
    return r;
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string list(const std::vector<double>& v, double scale)
{
    std::string s;
    char b[32];
    for (double x : v) {
        std::snprintf(b, sizeof b, "%s%.3g", s.empty() ? "" : " ", x * scale);
        s += b;
    }
    return s;
}

bench::Result result(const std::string& name, double value, const std::string& unit, double baseline,
                     const std::string& baseline_name, double ratio_target = 0)
{
    bench::Result r{};
    r.name = name;
    r.value = value;
    r.unit = unit;
    r.baseline = baseline;
    r.baseline_name = baseline_name;
    r.ratio_target = ratio_target;
    return r;
}

}  // namespace

int main(int argc, char** argv)
{
    bool json = false, smoke = false;
    double seconds = 2;
    int reps = 5;
    std::vector<std::string> kinds = {"raw", "xdp"};
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--json") json = true;
        else if (a == "--smoke") smoke = true;
        else if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
        else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
        else if (a == "--kinds" && i + 1 < argc) {
            kinds.clear();
            for (std::string s = argv[++i]; !s.empty();) {
                size_t c = s.find(',');
                kinds.push_back(s.substr(0, c));
                s = c == std::string::npos ? "" : s.substr(c + 1);
            }
        } else {
            std::fprintf(stderr, "usage: bench_rt [--json] [--smoke] [--seconds D] [--reps N] [--kinds raw,xdp]\n");
            return 2;
        }
    }
    if (smoke) seconds = 0.3, reps = 1;
    if (std::string why = sdr::test::netns_unavailable(); !why.empty()) {
        if (json) std::printf("{\"name\":\"bench_rt\",\"skipped\":\"%s\",\"ratio\":0}\n", why.c_str());
        else std::printf("bench_rt: skipped: %s\n", why.c_str());
        return 0;
    }
    Testbed tb("sdrbench", 4200);
    if (!tb.ok()) {
        std::fprintf(stderr, "bench_rt: tools/sdr-netns up failed\n");
        return 1;
    }
    // About `seconds` of 1 MiB messages at the ≈ 7 Gbit/s a veth core moves.
    const uint32_t iters = static_cast<uint32_t>(std::max(20.0, seconds * 850));
    std::vector<bench::Result> rs;
    int port = 18700 + getpid() % 1000;
    const std::vector<uint32_t> worker_counts = {0, 1, 2};
    for (const auto& kind : kinds) {
        // The ceiling is measured before every round and after the last, and each SDR run is
        // judged against the mean of the two ceilings around it: this shared machine drifts by
        // 10-20 % within a minute, and a ratio taken across that drift measures the drift.
        std::vector<double> ceil_pps;
        std::vector<std::vector<double>> gbps(worker_counts.size()), ratios(worker_counts.size());
        std::string mode;
        auto ceiling = [&] {
            Ceiling c = raw_ceiling(tb, kind, seconds);
            if (!c.error.empty()) {
                std::fprintf(stderr, "bench_rt: %s ceiling: %s\n", kind.c_str(), c.error.c_str());
                return false;
            }
            ceil_pps.push_back(c.pps);
            mode = c.mode;
            return true;
        };
        if (!ceiling()) return 1;
        for (int round = 0; round < reps; round++) {
            std::vector<double> g(worker_counts.size());
            for (size_t i = 0; i < worker_counts.size(); i++) {
                Sdr s = sdr_run(tb, kind, worker_counts[i], iters, port++);
                if (!s.error.empty()) {
                    std::fprintf(stderr, "bench_rt: %s\n", s.error.c_str());
                    return 1;
                }
                g[i] = s.goodput_gbps;
            }
            if (!ceiling()) return 1;
            const double around = (ceil_pps[round] + ceil_pps[round + 1]) / 2 * kPayload * 8 / 1e9;
            for (size_t i = 0; i < worker_counts.size(); i++) {
                gbps[i].push_back(g[i]);
                ratios[i].push_back(g[i] / around);
            }
        }
        const double pps = median(ceil_pps), ceil_gbps = pps * kPayload * 8 / 1e9;
        const std::string base = kind == "xdp" ? "bare AF_XDP" : "bare AF_PACKET";
        if (!json)
            std::printf("%s (%s), %d rounds: ceiling median %.3f Mpps = %.2f Gbit/s payload (%.2f Gbit/s of 4174 B "
                        "frames), measured %s Mpps\n",
                        kind.c_str(), mode.c_str(), reps, pps / 1e6, ceil_gbps, pps * 4174 * 8 / 1e9,
                        list(ceil_pps, 1e-6).c_str());
        rs.push_back(result(kind + " ceiling", pps / 1e6, "Mpps", 0, ""));
        for (size_t i = 0; i < worker_counts.size(); i++) {
            const uint32_t w = worker_counts[i];
            std::string name = kind + " sdr_write_bw, " + (w ? std::to_string(w) + " worker thr" : "inline");
            double g = median(gbps[i]);
            if (!json)
                std::printf("%s: rounds %s Gbit/s, ratios %s\n", name.c_str(), list(gbps[i], 1).c_str(),
                            list(ratios[i], 1).c_str());
            bench::Result r = result(name, g, "Gbit/s", ceil_gbps, base + " ceiling", kTargetRatio);
            r.paired_ratio = median(ratios[i]);
            r.floor = kFloorRatio;
            rs.push_back(r);
            rs.push_back(result(name + " Mpps", g * 1e9 / 8 / kPayload / 1e6, "Mpps", pps / 1e6, base + " ceiling"));
        }
    }
    return bench::finish(rs, json);
}
