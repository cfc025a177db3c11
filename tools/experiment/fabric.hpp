// The fabric experiment (sdr_sweep --only fabric): SR and EC over two datacenters whose long
// haul is shared with background traffic, so that the losses SDR meets come from congestion
// (drop-tail at the gateway's queue onto the long haul), bursty and correlated with the load,
// not from a random draw. Only a simulator with switches, queues and traffic can run it.
//
// Per point (long-haul utilisation x message size), every scheme runs on a fabric of its own
// seeded alike: the background's arrivals are a function of the seed and the clock, and sample
// s of every scheme starts at the same time (warm-up + s x period), so the schemes meet the same
// background (paired, as far as their own packets leave it alike).
#pragma once

#include "message_run.hpp"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace sdr::exp {

struct FabricSweep {
    std::vector<double> utilisations{0, 0.3, 0.5, 0.7, 0.9};  // of the long haul by the background
    std::vector<uint64_t> sizes{1ull << 20, 16ull << 20, 64ull << 20};
    std::vector<std::string> schemes{"sr", "ec-mds:32,8"};  // the first is the ratios' base
    uint32_t samples = 20;
    double alpha = 2;        // RTO = (1 + alpha) RTT
    uint64_t seed = 1;
    // Two leaf-spines of `leaves` x `hosts_per_leaf` hosts, DC links at dc_gbps, the long haul at
    // long_haul_gbps, drop-tail (no ECN, no PFC), the switches' 12 MB shared buffer. sim:0, sim:1
    // and the receivers at the long haul's rate: SDR runs at line rate, as in the paper, and
    // alone loses nothing. The background's senders at host_gbps (0: long haul / senders), so
    // that together they never outrun the long haul: RC flows have no congestion control, and
    // with the senders at line rate two flows at once overflow the gateway, go-back-N resends
    // all that follows each loss, and from 0.7 on the background collapses (measured: 64 % of
    // the gateway's packets dropped at 0.9 at 100 Gbit/s, 42 % at 0.7 at 25 Gbit/s). Losses
    // then happen while SDR's message crosses: the background's load decides how soon the
    // buffer fills and what share of the arrivals it refuses.
    uint32_t leaves = 2, spines = 2, hosts_per_leaf = 4;
    double dc_gbps = 400, host_gbps = 0, long_haul_gbps = 100, rtt_ms = 25;
    uint64_t buffer_bytes = 12ull << 20;
    uint32_t mtu = 4096, chunk_bytes = 65536, channels = 8;
    std::string cdf = "websearch";  // the background's flow sizes (emu FlowSizeCdf::named)
    double warmup_rtts = 4;         // background alone before the first sample
    double period_rtts = 6;         // between sample starts (a sample that overruns delays the next)

    // The topology (a custom one in JSON: two_datacenters with the senders' links slower) and
    // the link the samples run on.
    std::string topology() const;
    LinkSetup link(uint64_t max_bytes, uint64_t seed) const;
    // The per-host load of the background's senders for a long-haul utilisation u: the hosts of
    // DC 0 but sim:0 send to those of DC 1 but sim:1 (SDR's direction), each offering
    //   load = u x long_haul_gbps / (host_gbps x senders)
    // of its link (u by default). The utilisation counts the flows' bytes, not their headers
    // or retransmissions.
    double host_load(double utilisation) const;
    uint32_t senders() const { return leaves * hosts_per_leaf - 1; }
    double sender_gbps() const { return host_gbps > 0 ? host_gbps : long_haul_gbps / senders(); }
};

inline constexpr const char* kFabricHeader =
    "utilisation,host_load,size_bytes,scheme,samples,failed,mean_ms,p50_ms,p99_ms,max_ms,lossless_ms,over_first,"
    "sdr_packets,sdr_drops,sdr_drop_rate,bursts,mean_burst,ack_drops,retransmitted,decoded,fallbacks,overruns,"
    "gateway_drop_rate,bg_flows,bg_failed,bg_slowdown_mean,bg_slowdown_p50,bg_slowdown_p99,wall_s";

// One row of fabric.csv (kFabricHeader).
struct FabricRow {
    double utilisation = 0, host_load = 0;
    uint64_t size = 0;
    std::string scheme;
    uint32_t samples = 0, failed = 0;
    double mean_ms = 0, p50_ms = 0, p99_ms = 0, max_ms = 0, lossless_ms = 0;
    double over_first = 0;      // mean / the first scheme's mean at this point
    uint64_t sdr_packets = 0;   // frames sim:0 sent during the samples (data and control)
    uint64_t sdr_drops = 0;     // of them, lost in the network
    double sdr_drop_rate = 0;
    uint64_t bursts = 0;        // runs of consecutive PSNs of one SDR QP lost
    double mean_burst = 0;      // sdr_drops / bursts
    uint64_t ack_drops = 0;     // sim:1's frames (ACKs, NACKs) lost on the way back
    double retransmitted = 0, decoded = 0, fallbacks = 0;  // per sample
    uint32_t overruns = 0;      // samples that started late: the one before ran past its slot
    double gateway_drop_rate = 0;  // all packets at the long haul's queue in DC 0, during the samples
    uint64_t bg_flows = 0, bg_failed = 0;
    double bg_slowdown_mean = 0, bg_slowdown_p50 = 0, bg_slowdown_p99 = 0;
    double wall_s = 0;
    std::string csv() const;
};

// One point: every scheme at this utilisation and size. false + err if a scheme does not parse
// or the fabric cannot be built.
bool run_fabric_point(const FabricSweep& s, double utilisation, uint64_t size, uint64_t seed,
                      std::vector<FabricRow>* rows, std::string* err);

// The whole grid on `jobs` worker processes; fabric.csv at csv_path. progress(done, total) after
// each point.
bool run_fabric_experiment(const FabricSweep& s, unsigned jobs, const std::string& csv_path,
                           std::vector<FabricRow>* rows, std::string* err);
// The table sdr_sweep prints.
void print_fabric_table(FILE* out, const std::vector<FabricRow>& rows);
// fabric.svg/png: completion time and EC-over-SR against utilisation, per size.
bool write_fabric_plots(const std::string& out_dir, const std::string& csv_path, std::vector<std::string>* figs,
                        std::string* err);
// Reads fabric.csv back (the figure's input, tests).
bool read_fabric_csv(const std::string& path, std::vector<FabricRow>* rows, std::string* err);

}  // namespace sdr::exp
