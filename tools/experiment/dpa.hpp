// The DPA experiment (sdr_sweep --only dpa): the paper's BlueField-3 figures (arXiv 2505.05366,
// hardware evaluation) predicted by the simulator's DPA and PCIe cost model (emu dpa_model.hpp)
// with the real firmware and host library running:
//  - receive packet rate against DPA threads (1..128),
//  - receive packet rate against chunk size in packets (1..64) at 16 threads,
//  - goodput against message size (64 KiB..8 MiB) at 20 threads, SDR and an RC-write baseline.
#pragma once

#include <sdr/emu/dpa_model.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace sdr::exp {

// One receive-rate measurement: a burst of 4 messages of 2048 packets (4 KiB MTU) from one SDR
// QP on 16 channels over a link fast enough never to be the limit, with CQs deep enough to hold
// the burst; the rate is CQEs handled over the time from the first arrival to the last
// handler's end. The sender's per-WQE cost is left out: the paper's rates are the receiver's.
struct RateResult {
    bool ok = false;
    std::string error;
    double mpps = 0;
    uint64_t cqes = 0, overflows = 0;
};
RateResult run_rate(const emu::DpaParams& dpa, uint32_t threads, uint32_t chunk_packets);

// Goodput of a stream of messages of `bytes` at 400 Gbit/s, 2 us RTT, `threads` DPA threads,
// two messages in flight. SDR: the receiver reposts a slot (repost cost) once its message is
// complete, and the sender learns of it half an RTT later (clear-to-send); all in the
// simulator. RC write: the same link, one CQE per message, no repost and no per-packet handler;
// the next write goes when the ACK of the one two back returns (a recurrence on the same
// parameters, not a simulation).
struct GoodputResult {
    bool ok = false;
    std::string error;
    double sdr_gbps = 0, rc_gbps = 0, line_gbps = 0;  // line: payload rate of the full wire
    uint32_t messages = 0;
};
GoodputResult run_goodput(const emu::DpaParams& dpa, uint32_t threads, uint64_t bytes);

// The paper's published points and what the experiment predicts for each.
struct PaperPoint {
    std::string figure;   // threads | chunk | goodput
    std::string what;     // e.g. "1 thread"
    double x = 0;         // threads, packets per chunk, or message bytes
    double paper = 0;     // Mpps, or goodput / line rate
    double predicted = 0;
    bool calibration = false;
    double rel_error() const { return paper ? (predicted - paper) / paper : 0; }
};

struct DpaSweep {
    std::vector<uint32_t> threads{1, 2, 4, 8, 16, 20, 32, 64, 96, 128};
    std::vector<uint32_t> chunk_packets{1, 2, 4, 8, 16, 32, 64};
    uint32_t chunk_threads = 16;
    std::vector<uint64_t> sizes{64ull << 10, 128ull << 10, 256ull << 10, 512ull << 10,
                                1ull << 20, 2ull << 20, 4ull << 20, 8ull << 20};
    uint32_t goodput_threads = 20;
};

inline constexpr const char* kDpaHeader = "figure,x,sdr,rc_gbps,line_gbps,paper,rel_error,calibration";

// dpa.csv: one row per measurement (kDpaHeader: sdr is Mpps for threads and chunk, Gbit/s of
// goodput for goodput); returns false + err.
// `points` gets the published points with their predictions.
bool run_dpa_experiment(const emu::DpaParams& dpa, const DpaSweep& s, const std::string& csv_path,
                        std::vector<PaperPoint>* points, std::string* err);
// The published points' table (stdout of sdr_sweep --only dpa).
void print_paper_points(FILE* out, const std::vector<PaperPoint>& points);
// The figures (gnuplot, beside the paper's points); false + err if gnuplot failed.
bool write_dpa_plots(const std::string& out_dir, const std::string& csv_path, std::vector<std::string>* figs,
                     std::string* err);

}  // namespace sdr::exp
