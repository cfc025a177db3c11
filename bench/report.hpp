// Shared by the benchmarks: run Google Benchmark, then print every result beside the baseline
// measured in the same run (and a published reference where one exists), as a table or as one
// JSON object per line (--json, through tools/common's JSON writer, as every tool prints it). A
// result may carry a floor for its ratio (bench/README.md): finish() makes the program fail when
// a ratio falls under it, so CI's smoke runs catch a regression that halves a ratio, and when a
// benchmark failed its own check (SkipWithError), which leaves no rate to judge.
#pragma once

#include <benchmark/benchmark.h>

#include <common/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace sdr::bench {

// Benchmarks that failed their own check (State::SkipWithError), "name: message", from run()
// for finish(): such a run reports no rate, so no result would show it, and the program must
// still fail.
inline std::vector<std::string>& errored()
{
    static std::vector<std::string> e;
    return e;
}

// Whether a run ended in SkipWithError, and its message: Google Benchmark 1.7 has
// error_occurred, 1.8 on a `skipped` kind.
template <class Run>
bool run_erred(const Run& r, std::string* message)
{
    if constexpr (requires { r.error_occurred; }) {
        *message = r.error_message;
        return r.error_occurred;
    } else {
        *message = r.skip_message;
        return r.skipped == decltype(r.skipped)::SkippedWithError;
    }
}

// Rates per benchmark name (counter "rate", per second), captured from the runs; errored runs
// go to errored() instead.
class Capture : public benchmark::ConsoleReporter {
public:
    explicit Capture(bool quiet) : quiet_(quiet) {}
    bool ReportContext(const Context& c) override { return quiet_ ? true : ConsoleReporter::ReportContext(c); }
    void ReportRuns(const std::vector<Run>& runs) override
    {
        for (const auto& r : runs) {
            if (std::string why; run_erred(r, &why)) {
                const std::string e = r.benchmark_name() + ": " + why;  // once, whatever the repetitions
                if (std::find(errored().begin(), errored().end(), e) == errored().end()) errored().push_back(e);
                continue;
            }
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

// A number at the precision of printf format `fmt` ("%.6g", "%.4f"): the JSON carries those
// digits, not the double's noise, as the hand-written JSON before it did; a whole number stays
// whole (50, not 50.0).
inline tools::Json json_at_precision(double v, const char* fmt)
{
    if (!std::isfinite(v)) return tools::json_real(v);
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, v);
    const double r = std::strtod(buf, nullptr);
    if (r == std::trunc(r) && std::fabs(r) < 9.0e15) return tools::Json(static_cast<int64_t>(r));
    return tools::json_real(r);
}

// One result as one JSON object: name, value and unit, then each comparison the result has.
inline tools::Json to_json(const Result& r)
{
    const double ratio = r.ratio();
    tools::Json j;
    j["name"] = r.name;
    j["value"] = json_at_precision(r.value, "%.6g");
    j["unit"] = r.unit;
    if (r.baseline > 0) {
        j["baseline"] = json_at_precision(r.baseline, "%.6g");
        j["baseline_name"] = r.baseline_name;
        j["ratio"] = json_at_precision(ratio, "%.4f");
        if (r.paired_ratio > 0) j["ratio_paired"] = true;
    }
    if (r.reference > 0) {
        j["reference"] = json_at_precision(r.reference, "%.6g");
        j["reference_name"] = r.reference_name;
        j["reference_ratio"] = json_at_precision(r.value / r.reference, "%.3f");
    }
    if (r.target > 0) {
        j["target"] = json_at_precision(r.target, "%.6g");
        j["meets_target"] = r.value >= r.target;
    }
    if (r.ratio_target > 0) {
        j["ratio_target"] = json_at_precision(r.ratio_target, "%.3g");
        j["meets_target"] = ratio >= r.ratio_target;
    }
    if (r.floor > 0) {
        j["floor"] = json_at_precision(r.floor * Result::floor_scale(), "%.3g");
        j["above_floor"] = !r.below_floor();
    }
    return j;
}

inline void print(const std::vector<Result>& rs, bool json)
{
    for (const auto& r : rs) {
        double ratio = r.ratio();
        const char* ratio_name = r.paired_ratio > 0 ? "paired ratio" : "ratio";
        if (json) {
            tools::print_json(to_json(r));
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

// Print the results; the exit status: 1 if a ratio fell under its floor or a benchmark failed
// its own check (each named on stderr).
inline int finish(const std::vector<Result>& rs, bool json)
{
    print(rs, json);
    int status = 0;
    for (const std::string& e : errored()) {
        std::fprintf(stderr, "%s: the benchmark failed its check; its result is missing\n", e.c_str());
        status = 1;
    }
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
