#include <sdr/reliability/policy.hpp>
#include <sdr/reliability/scheme.hpp>

#include <algorithm>
#include <cmath>
#include <utility>

namespace sdr::rel {

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
    const model::Params p = model_params(path, bytes, chunk_bytes, mtu, cfg);
    std::vector<SchemeEstimate> v;
    for (const SchemeOps* s : registered_schemes())
        if (s->estimate) s->estimate(p, cfg, &v);
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
