// Ring Allreduce over SDR on the simulator, payload-free: N emulated NICs (sim:0..sim:N-1 of one
// fresh fabric) on a ring, each node sending reliably to its right neighbour with a reliability
// scheme over its own long-haul link. Reduce-scatter (N-1 rounds), then all-gather (N-1 rounds):
// in round r node i sends segment (i - r) mod N and receives segment (i - r - 1) mod N, and its
// round r+1 send waits for its round r receive (plus the reduction time in reduce-scatter), so
// the 2N-2 rounds are dependent (arXiv 2505.05366, appendix). Only the bytes are left out: the whole stack
// (engines, binding, C API, firmware, NIC model, links) runs in virtual time.
#pragma once

#include <sdr/reliability/config.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace sdr::exp {

struct AllreduceParams {
    uint32_t nodes = 4;               // 2..256 (one NIC each)
    uint64_t bytes = 64ull << 20;     // the vector each node reduces; each round moves bytes/nodes
    uint32_t chunk_bytes = 65536, mtu = 4096, channels = 8;
    double bw_gbps = 400, rtt_ms = 25;  // every ring link
    double drop = 0;                    // per-packet loss on every link (data and control)
    uint64_t seed = 1;
    rel::Config rel;                  // scheme, k, m, alpha...; compute is forced false; rtt_ms/bw_gbps copied from above
    double compute_us = 0;            // C: reduction time a node spends per received segment before sending on
};

struct AllreduceResult {
    bool ok = false;
    std::string error;
    double completion_ms = 0;       // first send post to the last node's last segment delivered AND acknowledged
    std::vector<double> round_ms;   // per round: latest finish among nodes minus previous round's latest finish (diagnostics)
    uint64_t retransmitted_chunks = 0, decoded_chunks = 0, fallbacks = 0;
    uint64_t packets = 0;           // frames the fabric delivered (data and control), for simulator speed
};

// Segment s covers chunks [s*T/N, (s+1)*T/N) of the vector's T chunks: segments differ by at
// most one chunk when bytes/N is not a whole number of chunks (64 MiB over 6 nodes).
uint64_t segment_offset(const AllreduceParams& p, uint32_t s);
uint64_t segment_bytes(const AllreduceParams& p, uint32_t s);

// One whole Allreduce; installs (and at the end removes) the process's simulated fabric, so one
// run at a time per process. Bad parameters, a failed transfer (dead link, timeout) or a stall
// give ok = false and the reason.
AllreduceResult run_allreduce(const AllreduceParams& p);

}  // namespace sdr::exp
