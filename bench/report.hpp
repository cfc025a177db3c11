// Shared by the benchmarks: run Google Benchmark, then print every result beside the baseline
// measured in the same run (and a published reference where one exists), as a table or as one
// JSON object per line (--json). A result may carry a floor for its ratio (bench/README.md):
// finish() makes the program fail when a ratio falls under it, so CI's smoke runs catch a
// regression that halves a ratio.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace sdr::bench {

// Rates per benchmark name (counter "rate", per second), captured from the runs.
class Capture : public benchmark::ConsoleReporter {
public:
    explicit Capture(bool quiet) : quiet_(quiet) {}
    bool ReportContext(const Context& c) override { return quiet_ ? true : ConsoleReporter::ReportContext(c); }
    void ReportRuns(const std::vector<Run>& runs) override
    {
        for (const auto& r : runs) {
            auto it = r.counters.find("rate");
            if (it != r.counters.end()) rate[r.benchmark_name()] = it->second.value;
        }
        if (!quiet_) ConsoleReporter::ReportRuns(runs);
    }
    std::map<std::string, double> rate;

private:
    bool quiet_;
};

struct Result {
    std::string name;
    double value;
    std::string unit;
    double baseline;       // measured in the same run; 0 if none
    std::string baseline_name;
    double reference = 0;  // published figure, 0 if none
    std::string reference_name;
    double target = 0;     // 0 if none
    double ratio_target = 0;  // the least value / baseline wanted; 0 if none
    // value / baseline measured pairwise (each run against the baseline measured beside it),
    // then summarised; when set, it is the ratio printed and judged. 0: value / baseline.
    double paired_ratio = 0;
    // The least ratio this machine kind may show (bench/README.md, "Floors"): today's value less
    // its noise. Under it the program exits 1. 0: none.
    double floor = 0;
    double ratio() const { return paired_ratio > 0 ? paired_ratio : baseline > 0 ? value / baseline : 0; }
    bool below_floor() const { return floor > 0 && ratio() < floor * floor_scale(); }
    // SDR_BENCH_FLOOR_SCALE multiplies every floor (default 1): a stricter local check, and the
    // test that a ratio under its floor fails its ctest.
    static double floor_scale()
    {
        const char* e = std::getenv("SDR_BENCH_FLOOR_SCALE");
        double v = e ? std::atof(e) : 1.0;
        return v > 0 ? v : 1.0;
    }
};

inline void print(const std::vector<Result>& rs, bool json)
{
    for (const auto& r : rs) {
        double ratio = r.ratio();
        const char* ratio_name = r.paired_ratio > 0 ? "paired ratio" : "ratio";
        if (json) {
            std::printf("{\"name\":\"%s\",\"value\":%.6g,\"unit\":\"%s\"", r.name.c_str(), r.value, r.unit.c_str());
            if (r.baseline > 0)
                std::printf(",\"baseline\":%.6g,\"baseline_name\":\"%s\",\"ratio\":%.4f%s", r.baseline,
                            r.baseline_name.c_str(), ratio, r.paired_ratio > 0 ? ",\"ratio_paired\":true" : "");
            if (r.reference > 0)
                std::printf(",\"reference\":%.6g,\"reference_name\":\"%s\",\"reference_ratio\":%.3f", r.reference,
                            r.reference_name.c_str(), r.value / r.reference);
            if (r.target > 0) std::printf(",\"target\":%.6g,\"meets_target\":%s", r.target, r.value >= r.target ? "true" : "false");
            if (r.ratio_target > 0)
                std::printf(",\"ratio_target\":%.3g,\"meets_target\":%s", r.ratio_target,
                            ratio >= r.ratio_target ? "true" : "false");
            if (r.floor > 0)
                std::printf(",\"floor\":%.3g,\"above_floor\":%s", r.floor * Result::floor_scale(),
                            r.below_floor() ? "false" : "true");
            std::printf("}\n");
        } else {
            std::printf("%-34s %10.2f %-8s", r.name.c_str(), r.value, r.unit.c_str());
            if (r.baseline > 0) std::printf(" | %s %.2f, %s %.3f", r.baseline_name.c_str(), r.baseline, ratio_name, ratio);
            if (r.reference > 0) std::printf(" | %s %.2f (x%.1f)", r.reference_name.c_str(), r.reference, r.value / r.reference);
            if (r.target > 0) std::printf(" | target >= %.0f: %s", r.target, r.value >= r.target ? "PASS" : "MISS");
            if (r.ratio_target > 0)
                std::printf(" | target ratio >= %.2f: %s", r.ratio_target, ratio >= r.ratio_target ? "PASS" : "MISS");
            if (r.below_floor()) std::printf(" | BELOW FLOOR %.2f", r.floor * Result::floor_scale());
            std::printf("\n");
        }
    }
}

// Print the results; the exit status: 1 if a ratio fell under its floor (named on stderr).
inline int finish(const std::vector<Result>& rs, bool json)
{
    print(rs, json);
    int status = 0;
    for (const auto& r : rs)
        if (r.below_floor()) {
            std::fprintf(stderr, "%s: ratio %.3f to %s is below its floor %.3f (bench/README.md)\n", r.name.c_str(),
                         r.ratio(), r.baseline_name.c_str(), r.floor * Result::floor_scale());
            status = 1;
        }
    return status;
}

// Strip our own flags, hand the rest to Google Benchmark, run, return the captured rates.
inline std::map<std::string, double> run(int argc, char** argv, bool* json, bool* smoke)
{
    std::vector<char*> args;
    *json = *smoke = false;
    for (int i = 0; i < argc; i++) {
        if (!std::strcmp(argv[i], "--json")) *json = true;
        else if (!std::strcmp(argv[i], "--smoke")) *smoke = true;
        else args.push_back(argv[i]);
    }
    static char min_time[] = "--benchmark_min_time=0.05";
    if (*smoke) args.push_back(min_time);
    int n = static_cast<int>(args.size());
    benchmark::Initialize(&n, args.data());
    Capture cap(*json);
    benchmark::RunSpecifiedBenchmarks(&cap);
    return cap.rate;
}

}  // namespace sdr::bench
