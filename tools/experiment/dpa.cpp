// The DPA experiment's grid, its CSV and the paper's published points (dpa.hpp).
#include "dpa.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>

namespace sdr::exp {

namespace {

// arXiv 2505.05366, hardware evaluation (BlueField-3 DPA, 400 Gbit/s, 4 KiB MTU).
constexpr double kMppsPerThread = 1.45;
constexpr double kMpps32 = 1.6e12 / (4096.0 * 8) / 1e6;  // "~1.6 Tbit/s worth of packets"
constexpr double kMpps128 = 92;
constexpr double kChunk1Mpps = 15, kChunk64Mpps = 24.5;  // 16 receive threads

std::string g6(double v)
{
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
}

}  // namespace

bool run_dpa_experiment(const emu::DpaParams& dpa, const DpaSweep& s, const std::string& csv_path,
                        std::vector<PaperPoint>* points, std::string* err)
{
    std::ofstream csv(csv_path);
    csv << kDpaHeader << "\n";
    points->clear();
    auto paper_at = [&](const std::string& fig, double x, double v, const std::string& what, bool cal) {
        points->push_back(PaperPoint{fig, what, x, v, 0, cal});
    };
    paper_at("threads", 1, kMppsPerThread, "1 thread", true);
    paper_at("threads", 32, kMpps32, "32 threads (1.6 Tbit/s of 4 KiB packets)", false);
    paper_at("threads", 128, kMpps128, "128 threads", true);
    paper_at("chunk", 1, kChunk1Mpps, "16 threads, 1-packet chunks", false);
    paper_at("chunk", 64, kChunk64Mpps, "16 threads, 64-packet chunks", false);
    paper_at("goodput", double(512 << 10), 1.0, "512 KiB at 20 threads: line rate", false);
    auto paper_of = [&](const std::string& fig, double x) -> PaperPoint* {
        for (auto& p : *points)
            if (p.figure == fig && p.x == x) return &p;
        return nullptr;
    };
    auto row = [&](const std::string& fig, double x, double sdr, double rc, double line) {
        PaperPoint* p = paper_of(fig, x);
        if (p) p->predicted = fig == "goodput" ? sdr / line : sdr;
        csv << fig << "," << g6(x) << "," << g6(sdr) << "," << (rc > 0 ? g6(rc) : "") << "," << (line > 0 ? g6(line) : "")
            << "," << (p ? g6(p->paper) : "") << "," << (p ? g6(p->rel_error()) : "") << "," << (p && p->calibration ? 1 : 0)
            << "\n";
    };
    for (uint32_t t : s.threads) {
        RateResult r = run_rate(dpa, t, 64);
        if (!r.ok) {
            *err = "threads " + std::to_string(t) + ": " + r.error;
            return false;
        }
        row("threads", t, r.mpps, 0, 0);
    }
    for (uint32_t c : s.chunk_packets) {
        RateResult r = run_rate(dpa, s.chunk_threads, c);
        if (!r.ok) {
            *err = "chunk " + std::to_string(c) + ": " + r.error;
            return false;
        }
        row("chunk", c, r.mpps, 0, 0);
    }
    for (uint64_t b : s.sizes) {
        GoodputResult r = run_goodput(dpa, s.goodput_threads, b);
        if (!r.ok) {
            *err = "goodput at " + std::to_string(b) + " B: " + r.error;
            return false;
        }
        row("goodput", double(b), r.sdr_gbps, r.rc_gbps, r.line_gbps);
    }
    if (!csv) {
        *err = "cannot write " + csv_path;
        return false;
    }
    return true;
}

void print_paper_points(FILE* out, const std::vector<PaperPoint>& points)
{
    std::fprintf(out, "%-44s %9s %9s %-6s %8s\n", "the paper's point (arXiv 2505.05366)", "paper", "simulated", "unit", "error");
    for (const auto& p : points)
        std::fprintf(out, "%-44s %9.2f %9.2f %-6s %+7.1f%%%s\n", p.what.c_str(), p.paper, p.predicted,
                     p.figure == "goodput" ? "x line" : "Mpps", 100 * p.rel_error(), p.calibration ? "  (calibration)" : "");
}

}  // namespace sdr::exp
