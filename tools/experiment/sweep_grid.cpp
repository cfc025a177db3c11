#include "sweep_grid.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sdr::exp {

namespace {

bool parse_schemes(const std::vector<std::string>& texts, double alpha, std::vector<SweepScheme>* out, std::string* err)
{
    for (const auto& text : texts) {
        SweepScheme s;
        s.cfg.alpha = alpha;
        if (!rel::parse_scheme(text, &s.cfg, err)) return *err = "scheme: " + *err, false;
        s.label = rel::to_string(s.cfg.scheme);
        s.automatic = s.cfg.scheme == rel::Scheme::Auto;
        out->push_back(s);
    }
    return true;
}

// Packets a sample of a scheme sends for `bytes` of data, plus the sample's fixed set-up.
uint64_t sample_cost(const SweepScheme& s, uint64_t bytes, uint32_t mtu)
{
    const uint64_t kSetupPackets = 100;
    uint64_t data = (bytes + mtu - 1) / mtu;
    bool coded = rel::is_ec(s.cfg.scheme) || s.automatic;  // auto mostly picks a code where loss costs
    return data + (coded && s.cfg.k ? data * s.cfg.m / s.cfg.k : 0) + kSetupPackets;
}

}  // namespace

bool make_grid(const SweepOptions& o, SweepGrid* g, std::string* err)
{
    SweepGrid r;
    if (!parse_schemes(o.schemes, o.alpha, &r.schemes, err) || !parse_schemes(o.ar_schemes, o.alpha, &r.ar_schemes, err))
        return false;
    for (const auto& s : r.ar_schemes)
        if (s.automatic) return *err = "--ar-schemes: auto is for single messages", false;
    if (o.messages)
        for (uint64_t s = o.size_min; s <= o.size_max; s *= 2) r.sizes.push_back(s);
    double lo = std::log10(o.drop_min), hi = std::log10(o.drop_max);
    for (uint32_t i = 0;; i++) {
        double e = lo + i / static_cast<double>(o.per_decade);
        if (e > hi + 1e-9) break;
        r.drops.push_back(std::pow(10.0, e));
    }
    if (o.allreduce)
        for (uint32_t n = o.nodes_min; n <= o.nodes_max; n++) r.nodes.push_back(n);
    r.samples = o.samples;
    r.min_samples = o.min_samples;
    r.ar_samples = o.ar_samples;
    r.bytes_per_point = o.bytes_per_point;
    r.ar_bytes = o.ar_bytes;
    r.mtu = o.link.mtu;
    *g = std::move(r);
    return true;
}

uint32_t SweepGrid::samples_for(uint64_t size) const
{
    return static_cast<uint32_t>(std::min<uint64_t>(samples, std::max<uint64_t>(min_samples, bytes_per_point / size)));
}

std::string SweepGrid::row_key(size_t t, size_t row) const
{
    char b[128];
    if (is_allreduce(t))
        std::snprintf(b, sizeof b, "%u,%llu,%.3g,%s,", task_nodes(t), (unsigned long long)ar_bytes, task_drop(t),
                      ar_schemes[row].label.c_str());
    else
        std::snprintf(b, sizeof b, "%llu,%.3g,%s,", (unsigned long long)task_size(t), task_drop(t), schemes[row].label.c_str());
    return b;
}

uint64_t SweepGrid::work_bytes(size_t t) const
{
    if (is_allreduce(t)) return uint64_t{ar_samples} * ar_schemes.size() * ar_bytes * 2 * (task_nodes(t) - 1);
    return uint64_t{samples_for(task_size(t))} * schemes.size() * task_size(t);
}

uint64_t SweepGrid::cost(size_t t) const
{
    uint64_t c = 0;
    if (is_allreduce(t)) {
        // 2N-2 rounds of N transfers; a packet of a ring of N NICs costs (N+14)/6 packets of a
        // single message (measured: 2.9 at 4 nodes, 3.6 at 8).
        const uint64_t n = task_nodes(t), transfers = 2 * (n - 1) * n;
        for (const auto& s : ar_schemes)
            c += uint64_t{ar_samples} * transfers * sample_cost(s, ar_bytes / n, mtu) * (n + 14) / 6;
    } else {
        for (const auto& s : schemes) c += uint64_t{samples_for(task_size(t))} * sample_cost(s, task_size(t), mtu);
    }
    return c;
}

}  // namespace sdr::exp
