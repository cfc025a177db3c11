#include <sdr/reliability/policy.hpp>

#include <algorithm>
#include <cmath>
#include <utility>

namespace sdr::rel {

namespace {

// EC's tail: with fallback rarer than 1 in 1000 messages, p99.9 is the lossless time; otherwise
// a fallback round (FTO wait, NACK, repair: (1 + beta) RTT) is in it.
double ec_p999_s(const model::Params& p, model::Code code)
{
    double t = model::ideal_ec_s(p);
    if (model::p_fallback(p, code) > 1e-3) t += (1 + p.beta) * p.rtt_ms * 1e-3;
    return t;
}

}  // namespace

model::Params model_params(const PathEstimate& path, uint64_t bytes, uint32_t chunk_bytes, uint32_t mtu,
                           const Config& cfg)
{
    model::Params p;
    p.size_bytes = bytes;
    p.chunk_bytes = chunk_bytes;
    p.mtu = mtu;
    p.bw_gbps = path.bw_gbps;
    p.rtt_ms = path.rtt_ms;
    p.drop = path.drop;
    p.header_bytes = path.header_bytes;
    p.k = cfg.k;
    p.m = cfg.m;
    p.beta = 0.5 * cfg.fto_alpha;
    p.packet_memory = true;
    return p;
}

std::vector<SchemeEstimate> estimate_schemes(const PathEstimate& path, uint64_t bytes, uint32_t chunk_bytes,
                                             uint32_t mtu, const Config& cfg)
{
    model::Params p = model_params(path, bytes, chunk_bytes, mtu, cfg);
    std::vector<SchemeEstimate> v;
    for (auto [scheme, rto] : {std::pair{Scheme::Sr, 1 + cfg.alpha}, std::pair{Scheme::SrNack, 1.0}}) {
        p.rto_rtts = rto;
        v.push_back({scheme, 0, 0, model::e_t_sr_s(p) * 1e3, model::t_sr_quantile_s(p, 0.999) * 1e3});
    }
    for (auto code : {model::Code::Xor, model::Code::Mds})
        if (code == model::Code::Mds || cfg.m <= cfg.k) v.push_back({code == model::Code::Xor ? Scheme::EcXor : Scheme::EcMds, cfg.k, cfg.m,
                     model::e_t_ec_s(p, code) * 1e3, ec_p999_s(p, code) * 1e3});
    // Stronger MDS codes: below the bandwidth-delay product their parity costs microseconds
    // against a round trip, and they keep a lossy path's tail free of fallbacks.
    for (uint32_t m = 2 * cfg.m; m <= 4 * cfg.m && cfg.k + m <= 255; m *= 2) {
        p.m = m;
        v.push_back({Scheme::EcMds, cfg.k, m, model::e_t_ec_s(p, model::Code::Mds) * 1e3,
                     ec_p999_s(p, model::Code::Mds) * 1e3});
    }
    return v;
}

SchemeEstimate pick_scheme(const std::vector<SchemeEstimate>& v)
{
    double best_mean = INFINITY, best_tail = INFINITY;
    for (const auto& e : v) {
        best_mean = std::min(best_mean, e.mean_ms);
        best_tail = std::min(best_tail, e.p999_ms);
    }
    auto score = [&](const SchemeEstimate& e) { return std::max(e.mean_ms / best_mean, e.p999_ms / best_tail); };
    return *std::min_element(v.begin(), v.end(), [&](const auto& a, const auto& b) {
        double sa = score(a), sb = score(b);
        return sa != sb ? sa < sb : a.mean_ms < b.mean_ms;
    });
}

}  // namespace sdr::rel
