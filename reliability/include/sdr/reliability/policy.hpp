// Automatic scheme choice: which of SR, SR-NACK, EC-XOR(k,m) and EC-MDS(k,m) to use for a message,
// from the path (RTT, bandwidth, packet drop rate) and the analytic model (model.hpp). Pure:
// the caller supplies the path estimate, measured or configured.
#pragma once

#include <sdr/reliability/config.hpp>
#include <sdr/reliability/model.hpp>

#include <cstdint>
#include <vector>

namespace sdr::rel {

struct PathEstimate {
    double rtt_ms = 25, bw_gbps = 100;
    double drop = 0;            // per-packet drop probability
    double header_bytes = 0;    // wire bytes per packet beyond its payload
};

struct SchemeEstimate {
    Scheme scheme = Scheme::Sr;
    uint32_t k = 0, m = 0;      // EC only
    double mean_ms = 0, p999_ms = 0;
};

// The model's parameters for a message of `bytes` on this path as our implementation behaves:
// packet memory (a repeat needs only the chunk's missing packets, the per-packet bitmap keeps
// the rest); k, m and beta (0.5 fto_alpha) from cfg. rto_rtts is the caller's.
model::Params model_params(const PathEstimate& path, uint64_t bytes, uint32_t chunk_bytes, uint32_t mtu,
                           const Config& cfg);

// The model's mean and p99.9 of every candidate: sr and sr-nack (RTO from cfg.alpha; the NACK
// variant repairs after one RTT), ec-xor (if m <= k) and ec-mds with cfg.k, cfg.m, and ec-mds
// with 2m and 4m parity chunks (k + m <= 255).
std::vector<SchemeEstimate> estimate_schemes(const PathEstimate& path, uint64_t bytes, uint32_t chunk_bytes,
                                             uint32_t mtu, const Config& cfg);

// The estimate whose worse ratio to the best estimate of v, in mean or in p99.9, is smallest
// (v not empty).
SchemeEstimate pick_scheme(const std::vector<SchemeEstimate>& v);

}  // namespace sdr::rel
