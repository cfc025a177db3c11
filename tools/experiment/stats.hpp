// Summary statistics of a sweep point's samples.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace sdr::exp {

struct Summary {
    size_t n = 0;
    double mean = NAN, p50 = NAN, p99 = NAN, p999 = NAN, min = NAN, max = NAN;
};

// Quantile q of sorted samples, interpolating between order statistics (the usual "type 7"
// estimator): with n samples p99.9 only means something for n well above 1000, which the
// sweep's sample counts are chosen for.
inline double quantile(const std::vector<double>& sorted, double q)
{
    if (sorted.empty()) return NAN;
    double h = (static_cast<double>(sorted.size()) - 1) * q;
    size_t lo = static_cast<size_t>(std::floor(h));
    size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

inline Summary summarize(std::vector<double> v)
{
    Summary s;
    s.n = v.size();
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    double sum = 0;
    for (double x : v) sum += x;
    s.mean = sum / static_cast<double>(v.size());
    s.p50 = quantile(v, 0.5);
    s.p99 = quantile(v, 0.99);
    s.p999 = quantile(v, 0.999);
    s.min = v.front();
    s.max = v.back();
    return s;
}

}  // namespace sdr::exp
