#include <sdr/reliability/model.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

namespace sdr::rel::model {

namespace {

// Beyond this chunk drop probability E[T_SR] is reported as +infinity: the sweep's cost grows as
// 1/(1 - p) rounds, and such a message needs millions of retransmission rounds anyway.
constexpr double kMaxChunkDrop = 1 - 1e-6;
// The sweep stops once what it leaves out is provably below this fraction of the result.
constexpr double kTolerance = 1e-13;

double rtt_s(const Params& P) { return P.rtt_ms * 1e-3; }

uint64_t parity_chunks(const Params& P)
{
    uint64_t M = chunks(P);
    return (M * P.m + P.k - 1) / P.k;
}

// A chunk at level n has had n transmissions by now, so it is through with probability 1 - p^n.
// A chunk at level n has had n transmissions by now. It is through with probability 1 - p^n
// (paper: a whole chunk is resent, p per try) or, with packet memory, (1 - P^n)^N (each of its N
// packets must have arrived once in n tries). log_f(n) = log P(through by level n) and step(n) =
// log_f(n + 1) - log_f(n), what a chunk moving up from level n adds to log prod F. Tabulated on
// demand: the sweep reaches levels in increasing order.
class Levels {
public:
    Levels(double p, double P, uint32_t N, bool packet_memory)
        : log_p_(std::log(packet_memory ? P : p)), one_minus_p_(1 - (packet_memory ? P : p)),
          per_(packet_memory ? N : 1)
    {
    }
    double log_f(uint64_t n)
    {
        grow(n);
        return log_f_[n];
    }
    double step(uint64_t n)
    {
        grow(n);
        return step_[n];
    }

private:
    // With packet memory the per-packet terms are the paper's chunk terms at p = P, N times over.
    void grow(uint64_t n)
    {
        while (log_f_.size() <= n) {
            double q = static_cast<double>(log_f_.size());
            double pn = std::exp(q * log_p_);
            log_f_.push_back(per_ * std::log1p(-pn));
            // log((1 - p^(n+1)) / (1 - p^n)), without subtracting two nearly equal logs.
            step_.push_back(per_ * std::log1p(pn * one_minus_p_ / -std::expm1(q * log_p_)));
        }
    }

    double log_p_, one_minus_p_, per_;
    // Level 0 (never sent) is never reached: the sweep starts once every chunk has been sent.
    std::vector<double> log_f_{-HUGE_VAL}, step_{HUGE_VAL};
};

// E[max_i X_i] for n chunks = the integral over t of 1 - prod_i F_i(t). Until t = n*T the last
// chunk is not even sent, so the integrand is 1. After that write t = n*T + s: chunk i moves up a
// level whenever s + (n - i)*T crosses a multiple of O, so round q >= 1 (every chunk's q-th
// retransmission opportunity) is a train of n events T apart, event e at s = q*O - (n-1-e)*T, and
// the integrand is constant between events. Rounds overlap when n*T > O. Between the start or end
// of a round the events of the rounds in flight repeat with period T, each period adding the same
// amount to log prod F, so whole periods are summed as a geometric series: the cost is per round
// (times the rounds in flight, n*T/O + 1), not per event.
double expected_max_s(uint64_t n, double T, double O, double p, double P, uint32_t N, bool packet_memory)
{
    const double nT = static_cast<double>(n) * T;
    if (p <= 0) return nT;
    if (p >= kMaxChunkDrop) return HUGE_VAL;
    Levels lv(p, P, N, packet_memory);
    auto at = [&](uint64_t q, uint64_t e) { return static_cast<double>(q) * O - static_cast<double>(n - 1 - e) * T; };
    // Events of round q at or before s: floor() up to rounding, `at` has the last word, so no event
    // is counted twice or skipped.
    auto due = [&](uint64_t q, double s) {
        double x = std::floor((s - at(q, 0)) / T) + 1;
        uint64_t e = x <= 0 ? 0 : x >= static_cast<double>(n) ? n : static_cast<uint64_t>(x);
        while (e < n && at(q, e) <= s) e++;
        while (e > 0 && at(q, e - 1) > s) e--;
        return e;
    };

    // Rounds lo..hi are in flight; done[q] = events of round q so far (rounds below lo: all n).
    std::vector<uint64_t> done{n};
    uint64_t lo = 1, hi = 0;
    double s = 0, area = 0;  // area = the integral over [n*T, n*T + s)
    auto start_due = [&] {
        while (at(hi + 1, 0) <= s) {
            hi++;
            done.push_back(due(hi, s));
        }
    };
    // n - done[q] chunks are at level <= q, so the difference of neighbours is at level exactly q.
    auto log_prod = [&] {
        double L = 0, below = 0;
        for (uint64_t q = lo; q <= hi; q++) {
            double upto = static_cast<double>(n - done[q]);
            L += (upto - below) * lv.log_f(q);
            below = upto;
        }
        return L + (static_cast<double>(n) - below) * lv.log_f(hi + 1);
    };

    start_due();
    std::vector<std::pair<double, uint64_t>> next;  // (time, round) of each in-flight round's next event
    for (;;) {
        while (lo <= hi && done[lo] == n) lo++;
        double L = log_prod();
        // What is left: 1 - prod F <= sum_i p^level_i <= -L, and every further level lasts at most O
        // and multiplies a chunk's p^level by p.
        if (-L * O / (1 - p) <= kTolerance * (nT + area)) break;
        double t_new = at(hi + 1, 0);
        if (lo > hi) {  // nothing in flight: constant until the next round starts
            area += (t_new - s) * -std::expm1(L);
            s = t_new;
            start_due();
            continue;
        }
        next.clear();
        uint64_t periods = n;
        for (uint64_t q = lo; q <= hi; q++) {
            next.emplace_back(at(q, done[q]), q);
            periods = std::min(periods, n - done[q]);
        }
        std::sort(next.begin(), next.end());
        double fit = std::floor((t_new - s) / T);
        if (fit < static_cast<double>(periods)) periods = fit > 0 ? static_cast<uint64_t>(fit) : 0;
        while (periods > 0 && s + static_cast<double>(periods) * T > t_new) periods--;

        if (periods == 0) {  // the next round starts within one period: step to it event by event
            for (auto [t, q] : next) {
                if (t > t_new) break;
                area += (t - s) * -std::expm1(L);
                s = t;
                L += lv.step(q);
                done[q]++;
            }
            area += (t_new - s) * -std::expm1(L);
            s = t_new;
            start_due();
            continue;
        }
        // Period j in 0..periods-1 has pieces between the events in `next` order, where the integrand
        // is 1 - exp(L + j*D + c_r). Summed from the last period backwards (factor e^-D each), so no
        // exponent is positive: e^-L alone overflows for long lossy messages.
        double D = 0;
        for (auto [t, q] : next) D += lv.step(q);
        double last = L + static_cast<double>(periods - 1) * D, c = 0, prev = s, w = 0;
        for (auto [t, q] : next) {
            w += (t - prev) * std::exp(last + c);
            c += lv.step(q);
            prev = t;
        }
        w += (s + T - prev) * std::exp(last + c);
        double k = static_cast<double>(periods);
        double series = D > 0 ? std::expm1(-k * D) / std::expm1(-D) : k;
        area += k * T - w * series;
        s += k * T;
        for (uint64_t q = lo; q <= hi; q++) done[q] += periods;
    }
    return nT + area;
}

// log P_EC, accurate both when P_EC is tiny and when it is within 1e-300 of 1 (what P_fallback needs).
double log_p_ec(double p, uint32_t k, uint32_t m, Code code)
{
    if (p <= 0) return 0;
    if (code == Code::Xor) {
        // Per group of g = k/m + 1 chunks: (1-p)^g + g p (1-p)^(g-1) = (1-p)^(g-1) (1 + (g-1) p).
        double g1 = static_cast<double>(k) / m;
        return m * (g1 * std::log1p(-p) + std::log1p(g1 * p));
    }
    if (p >= 1) return -HUGE_VAL;
    // The binomial terms with at most m losses (head) and more (tail), each summed on its own so the
    // smaller keeps its precision.
    uint32_t n = k + m;
    double lp = std::log(p), lq = std::log1p(-p), log_choose = 0, head = 0, tail = 0;
    for (uint32_t i = 0; i <= n; i++) {
        (i <= m ? head : tail) += std::exp(log_choose + i * lp + (n - i) * lq);
        if (i < n) log_choose += std::log(static_cast<double>(n - i) / (i + 1));
    }
    return tail < 0.5 ? std::log1p(-tail) : std::log(head);
}

std::string num(double v)
{
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return b;
}

}  // namespace

uint32_t packets_per_chunk(const Params& P) { return P.chunk_bytes / P.mtu + (P.chunk_bytes % P.mtu != 0); }

uint64_t chunks(const Params& P) { return P.size_bytes / P.chunk_bytes + (P.size_bytes % P.chunk_bytes != 0); }

double chunk_drop(const Params& P) { return -std::expm1(packets_per_chunk(P) * std::log1p(-P.drop)); }

double t_inj_s(const Params& P)
{
    return (P.chunk_bytes + packets_per_chunk(P) * P.header_bytes) * 8 / (P.bw_gbps * 1e9);
}

bool sr_exact(const Params& P) { return static_cast<double>(chunks(P)) * t_inj_s(P) <= P.rto_rtts * rtt_s(P); }

double e_t_sr_chunks_s(const Params& P, double n_chunks)
{
    if (!(n_chunks > 0)) return rtt_s(P);
    double T = t_inj_s(P), O = P.rto_rtts * rtt_s(P) + T, p = chunk_drop(P);
    if (p >= kMaxChunkDrop) return HUGE_VAL;
    double lo = std::floor(n_chunks), hi = std::ceil(n_chunks);
    auto e_max = [&](double n) {
        return n > 0 ? expected_max_s(static_cast<uint64_t>(n), T, O, p, P.drop, packets_per_chunk(P), P.packet_memory) : 0;
    };
    double at_lo = e_max(lo);
    double e = lo == hi ? at_lo : at_lo + (n_chunks - lo) * (e_max(hi) - at_lo);
    return e + rtt_s(P);
}

double e_t_sr_s(const Params& P) { return e_t_sr_chunks_s(P, static_cast<double>(chunks(P))); }

// log P(max_i X_i <= t): chunk i has had n_i(t) = floor((t - i*T)/O) + 1 transmissions by t; the
// chunks sharing a level j form one run of consecutive i, so the sum costs one term per level.
static double log_cdf_max(uint64_t M, double T, double O, Levels& lv, double t)
{
    if (t < static_cast<double>(M) * T) return -INFINITY;
    double sum = 0;
    for (uint64_t j = 1;; j++) {
        double hi = std::floor((t - static_cast<double>(j - 1) * O) / T);
        if (hi < 1) break;
        double lo = std::max(1.0, std::floor((t - static_cast<double>(j) * O) / T) + 1);
        double count = std::min(static_cast<double>(M), hi) - lo + 1;
        if (count > 0) sum += count * lv.log_f(j);
    }
    return sum;
}

double t_sr_quantile_s(const Params& P, double q)
{
    const double p = chunk_drop(P);
    if (p >= kMaxChunkDrop) return INFINITY;
    const uint64_t M = chunks(P);
    const double T = t_inj_s(P), O = P.rto_rtts * rtt_s(P) + T, log_q = std::log(q);
    if (p <= 0) return static_cast<double>(M) * T + rtt_s(P);
    Levels lv(p, P.drop, packets_per_chunk(P), P.packet_memory);
    double lo = static_cast<double>(M) * T, hi = lo;
    if (log_cdf_max(M, T, O, lv, lo) >= log_q) return lo + rtt_s(P);
    while (log_cdf_max(M, T, O, lv, hi) < log_q) hi += O;
    // The cdf is a step function: bisect to well below a microsecond.
    for (int i = 0; i < 64 && hi - lo > 1e-9; i++) {
        double mid = (lo + hi) / 2;
        (log_cdf_max(M, T, O, lv, mid) >= log_q ? hi : lo) = mid;
    }
    return hi + rtt_s(P);
}

double p_mds(double p, uint32_t k, uint32_t m) { return std::exp(log_p_ec(p, k, m, Code::Mds)); }

double p_xor(double p, uint32_t k, uint32_t m) { return std::exp(log_p_ec(p, k, m, Code::Xor)); }

double p_fallback(const Params& P, Code code)
{
    double L = static_cast<double>(chunks(P)) / P.k;
    return -std::expm1(L * log_p_ec(chunk_drop(P), P.k, P.m, code));
}

double e_t_ec_s(const Params& P, Code code)
{
    uint64_t M = chunks(P);
    double lpe = log_p_ec(chunk_drop(P), P.k, P.m, code);
    double fallback = -std::expm1(static_cast<double>(M) / P.k * lpe);
    double to_sr = static_cast<double>(M) * -std::expm1(lpe);  // L * (1 - P_EC) * k chunks
    return static_cast<double>(M + parity_chunks(P)) * t_inj_s(P) + fallback * (1 + P.beta) * rtt_s(P) +
           e_t_sr_chunks_s(P, to_sr);
}

double ideal_s(const Params& P) { return static_cast<double>(chunks(P)) * t_inj_s(P) + rtt_s(P); }

double ideal_ec_s(const Params& P)
{
    return static_cast<double>(chunks(P) + parity_chunks(P)) * t_inj_s(P) + rtt_s(P);
}

double allreduce_lower_bound_s(uint32_t nodes, double per_round_s, double compute_s)
{
    if (nodes < 2) return 0;  // one node has nothing to exchange
    return (2.0 * nodes - 2) * (compute_s + per_round_s);
}

Result evaluate(const Params& P)
{
    Result r;
    r.chunks = chunks(P);
    r.t_inj_us = t_inj_s(P) * 1e6;
    r.sr_exact = sr_exact(P);
    r.e_t_sr_ms = e_t_sr_s(P) * 1e3;
    Params nack = P;
    nack.rto_rtts = 1;
    r.e_t_sr_nack_ms = e_t_sr_s(nack) * 1e3;
    r.p_chunk = chunk_drop(P);
    r.p_mds = p_mds(r.p_chunk, P.k, P.m);
    r.p_xor = p_xor(r.p_chunk, P.k, P.m);
    r.p_fallback_mds = p_fallback(P, Code::Mds);
    r.p_fallback_xor = p_fallback(P, Code::Xor);
    r.e_t_ec_mds_ms = e_t_ec_s(P, Code::Mds) * 1e3;
    r.e_t_ec_xor_ms = e_t_ec_s(P, Code::Xor) * 1e3;
    r.ideal_ms = ideal_s(P) * 1e3;
    r.ideal_ec_ms = ideal_ec_s(P) * 1e3;
    return r;
}

bool validate(const Params& P, std::string* err)
{
    auto fail = [&](std::string msg) {
        *err = std::move(msg);
        return false;
    };
    if (P.size_bytes == 0) return fail("size_bytes: must be > 0");
    if (P.mtu < 256 || P.mtu > 4096 || (P.mtu & (P.mtu - 1)))
        return fail("mtu: must be a power of two in 256..4096, got " + std::to_string(P.mtu));
    if (P.chunk_bytes < P.mtu)
        return fail("chunk_bytes: must be >= the MTU (" + std::to_string(P.mtu) + "), got " + std::to_string(P.chunk_bytes));
    if (!(P.drop >= 0 && P.drop < 1)) return fail("drop: must be in [0, 1), got " + num(P.drop));
    if (!(P.bw_gbps > 0 && std::isfinite(P.bw_gbps)))
        return fail("bw_gbps: must be > 0 and finite, got " + num(P.bw_gbps));
    if (!(P.rtt_ms >= 0 && std::isfinite(P.rtt_ms))) return fail("rtt_ms: must be >= 0 and finite, got " + num(P.rtt_ms));
    if (!(P.rto_rtts > 0 && std::isfinite(P.rto_rtts)))
        return fail("rto_rtts: must be > 0 and finite, got " + num(P.rto_rtts));
    if (P.k < 1) return fail("k: must be >= 1, got 0");
    if (P.m < 1) return fail("m: must be >= 1, got 0");
    if (uint64_t{P.k} + P.m > 255)
        return fail("k+m: must be <= 255 (a Reed-Solomon code over GF(2^8)), got k=" + std::to_string(P.k) +
                    " m=" + std::to_string(P.m));
    if (!(P.beta >= 0 && std::isfinite(P.beta))) return fail("beta: must be >= 0 and finite, got " + num(P.beta));
    if (!(P.header_bytes >= 0 && std::isfinite(P.header_bytes)))
        return fail("header_bytes: must be >= 0 and finite, got " + num(P.header_bytes));
    return true;
}

}  // namespace sdr::rel::model
