// What the traffic generator reports (traffic.hpp): the FCT CSV, one row per completed flow, and
// the slowdown summary, all flows and by size as HPCC's FCT analysis buckets them.
#include <sdr/emu/traffic.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

namespace sdr::emu {

namespace {

// Quantile q of sorted values, interpolating between order statistics (sdr_sweep's "type 7").
double quantile(const std::vector<double>& sorted, double q)
{
    const double h = (static_cast<double>(sorted.size()) - 1) * q;
    const size_t lo = static_cast<size_t>(std::floor(h));
    const size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

FctStats stats(const std::vector<const FlowRecord*>& flows)
{
    FctStats s;
    s.count = flows.size();
    if (flows.empty()) {
        s.mean_fct_ns = s.mean = s.p50 = s.p95 = s.p99 = NAN;
        return s;
    }
    std::vector<double> sd;
    sd.reserve(flows.size());
    double fct = 0, sum = 0;
    for (const FlowRecord* r : flows) {
        sd.push_back(r->slowdown);
        sum += r->slowdown;
        fct += static_cast<double>(r->fct_ns);
    }
    std::sort(sd.begin(), sd.end());
    const double n = static_cast<double>(flows.size());
    s.mean_fct_ns = fct / n;
    s.mean = sum / n;
    s.p50 = quantile(sd, 0.50);
    s.p95 = quantile(sd, 0.95);
    s.p99 = quantile(sd, 0.99);
    return s;
}

}  // namespace

FctSummary TrafficGenerator::summary() const
{
    FctSummary s;
    s.flows = records_.size() + failed_ + unfinished_;  // every flow added
    s.completed = records_.size();
    s.failed = failed_;
    s.payload_errors = payload_errors_;
    std::vector<const FlowRecord*> all, small, medium, large;
    for (const FlowRecord& r : records_) {
        all.push_back(&r);
        (r.size_bytes < FctSummary::kSmallMax ? small : r.size_bytes <= FctSummary::kMediumMax ? medium : large).push_back(&r);
    }
    s.all = stats(all);
    s.small = stats(small);
    s.medium = stats(medium);
    s.large = stats(large);
    return s;
}

void TrafficGenerator::write_csv(std::ostream& out) const
{
    std::vector<const FlowRecord*> rows;
    rows.reserve(records_.size());
    for (const FlowRecord& r : records_) rows.push_back(&r);
    std::sort(rows.begin(), rows.end(), [](const FlowRecord* a, const FlowRecord* b) { return a->id < b->id; });
    out << "flow_id,src,dst,size_bytes,start_ns,fct_ns,ideal_fct_ns,slowdown,rx_fct_ns\n";
    char line[256];
    for (const FlowRecord* r : rows) {
        std::snprintf(line, sizeof line, "%llu,%u,%u,%llu,%llu,%llu,%llu,%.6f,%llu\n", static_cast<unsigned long long>(r->id),
                      r->src, r->dst, static_cast<unsigned long long>(r->size_bytes),
                      static_cast<unsigned long long>(r->start_ns), static_cast<unsigned long long>(r->fct_ns),
                      static_cast<unsigned long long>(r->ideal_fct_ns), r->slowdown,
                      static_cast<unsigned long long>(r->rx_fct_ns));
        out << line;
    }
}

void TrafficGenerator::write_summary(std::ostream& out, const FctSummary& s)
{
    char line[256];
    std::snprintf(line, sizeof line, "flows %llu, completed %llu, failed %llu\n", static_cast<unsigned long long>(s.flows),
                  static_cast<unsigned long long>(s.completed), static_cast<unsigned long long>(s.failed));
    out << line;
    if (s.payload_errors) out << "payload errors in " << s.payload_errors << " flows\n";
    std::snprintf(line, sizeof line, "%-12s %8s %13s %9s %9s %9s %9s\n", "size", "flows", "mean FCT us", "slowdown",
                  "p50", "p95", "p99");
    out << line;
    const std::pair<const char*, const FctStats*> rows[] = {
        {"all", &s.all}, {"<100KB", &s.small}, {"100KB-1MB", &s.medium}, {">1MB", &s.large}};
    for (auto [name, st] : rows) {
        if (!st->count) {
            std::snprintf(line, sizeof line, "%-12s %8d %13s %9s %9s %9s %9s\n", name, 0, "-", "-", "-", "-", "-");
        } else {
            std::snprintf(line, sizeof line, "%-12s %8llu %13.1f %9.3f %9.3f %9.3f %9.3f\n", name,
                          static_cast<unsigned long long>(st->count), st->mean_fct_ns / 1e3, st->mean, st->p50, st->p95,
                          st->p99);
        }
        out << line;
    }
}

}  // namespace sdr::emu
