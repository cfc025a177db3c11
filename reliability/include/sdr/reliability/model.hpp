// The paper's analytic model of reliable delivery (arXiv 2505.05366, appendix): expected completion time of
// Selective Repeat and the lower bound of Erasure Coding with SR fallback, for one message over a
// link of bandwidth BW and round-trip time RTT that drops each packet independently. Pure math,
// no I/O: the test oracle for the simulator, the engine behind `sdr-model`. Times in seconds
// unless a name says otherwise.
#pragma once

#include <cstdint>
#include <string>

namespace sdr::rel::model {

struct Params {
    uint64_t size_bytes = 128ull << 20;
    uint32_t chunk_bytes = 65536;
    uint32_t mtu = 4096;           // payload bytes per packet
    double bw_gbps = 400;
    double rtt_ms = 25;
    double drop = 1e-5;            // per-PACKET drop probability P
    double rto_rtts = 3;           // SR: RTO = rto_rtts * RTT
    uint32_t k = 32, m = 8;        // EC code
    double beta = 0.5;             // EC fallback: wait beta*RTT after injection before NACKing (FTO = M/BW + beta*RTT)
    double header_bytes = 0;       // per-packet wire overhead added to injection time (paper: 0; our simulator: pass its real overhead)
    // The paper's model resends a chunk whole and loses it with p again. SDR's per-packet bitmap
    // keeps what arrived, so a repeat completes the chunk unless one of its still-missing packets
    // is lost again: P(chunk incomplete after r sends) = 1 - (1 - P^r)^N instead of p^r. Equal
    // for r = 1; true here gives what our implementation does.
    bool packet_memory = false;
};

uint32_t packets_per_chunk(const Params&);   // N = ceil(chunk / mtu)
uint64_t chunks(const Params&);              // M = ceil(size / chunk); a short last chunk counts as a whole one
double chunk_drop(const Params&);            // p = 1 - (1 - P)^N
double t_inj_s(const Params&);               // T_INJ = (chunk + N*header_bytes) * 8 / BW

// SR. Chunk i (1..M) is done at X_i = i*T_INJ + O*(Y_i - 1), O = RTO + T_INJ, Y_i ~ Geometric(1 - p)
// transmissions; T_SR = max_i X_i + RTT. E[max_i X_i] is computed exactly (to ~1e-13 relative),
// +infinity when 1 - p < 1e-6 (its cost grows as 1/(1 - p); such a chunk needs a million rounds).
bool sr_exact(const Params&);                // M*T_INJ <= RTO: no retransmission waits behind first sends
double e_t_sr_s(const Params&);              // E[T_SR]
// Quantile q of T_SR (e.g. 0.999): P(max_i X_i <= t) = prod_i P(X_i <= t), the smallest t where it
// reaches q, plus RTT. +infinity where E[T_SR] is.
double t_sr_quantile_s(const Params&, double q);
// E[T_SR] of a message of n_chunks chunks (of the Params' chunk size): n = 0 gives RTT; a fractional
// n interpolates linearly between floor(n) and ceil(n) chunks.
double e_t_sr_chunks_s(const Params&, double n_chunks);

// EC: probability that a submessage of k data + m parity chunks is decodable.
double p_mds(double p, uint32_t k, uint32_t m);   // at most m of the k + m chunks lost
double p_xor(double p, uint32_t k, uint32_t m);   // each of m groups of n = k/m + 1 chunks loses at most one
enum class Code { Xor, Mds };
double p_fallback(const Params&, Code);      // 1 - P_EC^L, L = M/k (fractional, as in the paper)
// The paper's lower bound: (M + ceil(M*m/k))*T_INJ + P_fallback*(1 + beta)*RTT + E[T_SR(M*(1 - P_EC))].
double e_t_ec_s(const Params&, Code);

double ideal_s(const Params&);               // lossless SR: M*T_INJ + RTT
double ideal_ec_s(const Params&);            // lossless EC: (M + ceil(M*m/k))*T_INJ + RTT

// Ring Allreduce over `nodes` nodes: 2N - 2 dependent rounds, each computing for compute_s and
// then moving one transfer of mean per_round_s: (2N - 2)(C + mu_X).
double allreduce_lower_bound_s(uint32_t nodes, double per_round_s, double compute_s = 0);

// Every number above for one Params.
struct Result {
    double e_t_sr_ms = 0;        // RTO = rto_rtts * RTT
    double e_t_sr_nack_ms = 0;   // RTO = 1 * RTT: the receiver names the lost chunk
    double p_chunk = 0;
    double p_mds = 0, p_xor = 0;
    double p_fallback_mds = 0, p_fallback_xor = 0;
    double e_t_ec_mds_ms = 0, e_t_ec_xor_ms = 0;
    double ideal_ms = 0, ideal_ec_ms = 0;
    double t_inj_us = 0;
    uint64_t chunks = 0;
    bool sr_exact = false;
};
Result evaluate(const Params&);

// false + err ("<field>: ...", naming the Params member and its allowed range) unless: sizes > 0,
// mtu a power of two in 256..4096, chunk >= mtu, 0 <= drop < 1, bw > 0, rtt >= 0, rto_rtts > 0,
// k >= 1, m >= 1, k + m <= 255, beta >= 0, header_bytes >= 0 (all finite).
[[nodiscard]] bool validate(const Params&, std::string* err);

}  // namespace sdr::rel::model
