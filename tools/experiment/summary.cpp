#include "summary.hpp"

#include "plot_points.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

namespace sdr::exp {

namespace {

std::vector<std::string> split_csv(const std::string& line)
{
    std::vector<std::string> v;
    std::stringstream ss(line);
    for (std::string f; std::getline(ss, f, ',');) v.push_back(f);
    if (!line.empty() && line.back() == ',') v.emplace_back();
    return v;
}

std::vector<std::string> header_of(const char* h) { return split_csv(h); }

std::string size_label(double b)
{
    char s[32];
    if (b >= 1 << 30) std::snprintf(s, sizeof s, "%gG", b / (1 << 30));
    else if (b >= 1 << 20) std::snprintf(s, sizeof s, "%gM", b / (1 << 20));
    else std::snprintf(s, sizeof s, "%gK", b / 1024);
    return s;
}

// (size, drop) -> scheme -> row
using Grid = std::map<std::pair<double, double>, std::map<std::string, size_t>>;

void print_messages(FILE* out, const Table& t)
{
    Grid g;
    std::set<double> sizes, drops;
    for (size_t r = 0; r < t.rows.size(); r++) {
        double s = t.num(r, "size_bytes"), d = t.num(r, "drop");
        g[{s, d}][t.at(r, "scheme")] = r;
        sizes.insert(s);
        drops.insert(d);
    }
    auto val = [&](const std::map<std::string, size_t>& p, const char* scheme, const char* col) {
        auto it = p.find(scheme);
        return it == p.end() ? NAN : t.num(it->second, col);
    };
    // 1. SR (RTO 3 RTT) over EC-MDS, mean and p99.9, the largest over the grid.
    for (const char* col : {"mean_ms", "p999_ms"}) {
        double best = 0, bs = 0, bd = 0;
        for (const auto& [key, p] : g) {
            double r = val(p, "sr", col) / val(p, "ec-mds", col);
            if (r > best) std::tie(best, bs, bd) = std::make_tuple(r, key.first, key.second);
        }
        if (best > 0)
            std::fprintf(out, "SR / EC-MDS %s: largest %.2fx at %s, drop %g (paper: up to %s)\n",
                         col[0] == 'm' ? "mean " : "p99.9", best, size_label(bs).c_str(), bd, col[0] == 'm' ? "6.5x" : "12.2x");
    }
    if (auto it = g.find({128.0 * (1 << 20), 1e-5}); it != g.end())
        std::fprintf(out, "at 128M, drop 1e-5: SR / EC-MDS mean %.2fx, p99.9 %.2fx\n",
                     val(it->second, "sr", "mean_ms") / val(it->second, "ec-mds", "mean_ms"),
                     val(it->second, "sr", "p999_ms") / val(it->second, "ec-mds", "p999_ms"));
    // 2. SR-NACK's gain over SR.
    double gain = 0, gs = 0, gd = 0;
    for (const auto& [key, p] : g) {
        double r = val(p, "sr", "mean_ms") / val(p, "sr-nack", "mean_ms");
        if (r > gain) std::tie(gain, gs, gd) = std::make_tuple(r, key.first, key.second);
    }
    if (gain > 0) std::fprintf(out, "SR-NACK: mean up to %.2fx sooner than SR (%s, drop %g; paper: up to 4x)\n", gain, size_label(gs).c_str(), gd);
    // 3. Where EC-MDS wins against SR and against the better SR variant (means).
    for (double d : drops) {
        std::string vs_sr, vs_both;
        for (double s : sizes) {
            auto it = g.find({s, d});
            if (it == g.end()) continue;
            double ec = val(it->second, "ec-mds", "mean_ms");
            if (ec < val(it->second, "sr", "mean_ms")) vs_sr += " " + size_label(s);
            if (ec < std::fmin(val(it->second, "sr", "mean_ms"), val(it->second, "sr-nack", "mean_ms"))) vs_both += " " + size_label(s);
        }
        std::fprintf(out, "drop %-7g EC-MDS mean beats SR at:%s\n%18s beats SR and SR-NACK at:%s\n", d,
                     vs_sr.empty() ? " none" : vs_sr.c_str(), "", vs_both.empty() ? " none" : vs_both.c_str());
    }
    // 4. Fallback rates at 128 MiB (or the largest size below it).
    double fs = 0;
    for (double s : sizes)
        if (s <= 128.0 * (1 << 20)) fs = s;
    if (fs > 0) {
        std::fprintf(out, "fallback rate at %s (share of messages with an SR repair):", size_label(fs).c_str());
        for (double d : drops)
            if (auto it = g.find({fs, d}); it != g.end())
                std::fprintf(out, "  %g: xor %.3f mds %.3f", d, val(it->second, "ec-xor", "fallback_rate"),
                             val(it->second, "ec-mds", "fallback_rate"));
        std::fprintf(out, "\n");
        std::fprintf(out, "SR at %s, completion / lossless (mean):", size_label(fs).c_str());
        for (double d : drops)
            if (auto it = g.find({fs, d}); it != g.end())
                std::fprintf(out, "  %g: %.2fx", d, val(it->second, "sr", "mean_ms") / val(it->second, "sr", "ideal_ms"));
        std::fprintf(out, "\n");
    }
    // 5. auto against the best fixed scheme.
    for (const char* col : {"mean_ms", "p999_ms"}) {
        double worst = 0, ws = 0, wd = 0;
        int over = 0, points = 0;
        for (const auto& [key, p] : g) {
            double a = val(p, "auto", col), best = INFINITY;
            for (const auto& [scheme, row] : p)
                if (plot::auto_candidate(scheme)) best = std::fmin(best, t.num(row, col));
            if (std::isnan(a) || !std::isfinite(best)) continue;
            points++;
            over += a / best > 1.10;
            if (a / best > worst) std::tie(worst, ws, wd) = std::make_tuple(a / best, key.first, key.second);
        }
        if (points)
            std::fprintf(out, "auto / best fixed %s: worst %.3f (%s, drop %g); %d of %d points above 1.10\n",
                         col[0] == 'm' ? "mean " : "p99.9", worst, size_label(ws).c_str(), wd, over, points);
    }
    // 6. The model: exact for SR where M*T_INJ <= RTO, a lower bound for EC.
    int exact = 0, within = 0, lb = 0, above = 0;
    double dev = 0;
    for (size_t r = 0; r < t.rows.size(); r++) {
        double sim = t.num(r, "mean_ms"), mod = t.num(r, "model_ms");
        if (std::isnan(sim) || std::isnan(mod)) continue;
        if (t.at(r, "model_kind") == "exact") {
            exact++;
            within += std::fabs(sim / mod - 1) <= 0.05;
            dev = std::fmax(dev, std::fabs(sim / mod - 1));
        } else if (t.at(r, "model_kind") == "lower_bound") {
            lb++;
            above += sim >= mod * (1 - 1e-6);
        }
    }
    if (exact) std::fprintf(out, "model (SR, exact): %d of %d points within 5 %%, largest deviation %.2f %%\n", within, exact, 100 * dev);
    if (lb) std::fprintf(out, "model (lower bound): simulation at or above it at %d of %d points\n", above, lb);
}

void print_allreduce(FILE* out, const Table& t)
{
    std::map<std::pair<double, double>, std::map<std::string, size_t>> g;  // (drop, nodes)
    for (size_t r = 0; r < t.rows.size(); r++) g[{t.num(r, "drop"), t.num(r, "nodes")}][t.at(r, "scheme")] = r;
    std::map<double, std::pair<double, double>> by_drop;  // drop -> min, max speedup
    for (const auto& [key, p] : g) {
        if (!p.count("sr") || !p.count("ec-mds")) continue;
        double s = t.num(p.at("sr"), "p999_ms") / t.num(p.at("ec-mds"), "p999_ms");
        auto [it, fresh] = by_drop.try_emplace(key.first, s, s);
        if (!fresh) it->second = {std::fmin(it->second.first, s), std::fmax(it->second.second, s)};
    }
    if (by_drop.empty()) return;
    std::fprintf(out, "Allreduce p99.9 speedup of EC-MDS over SR (paper: 3x to >6x):");
    for (const auto& [d, mm] : by_drop) std::fprintf(out, "  %g: %.2f-%.2fx", d, mm.first, mm.second);
    std::fprintf(out, "\n");
}

}  // namespace

bool Table::load(const std::string& path, const std::vector<std::string>& required, std::string* err)
{
    std::ifstream f(path);
    std::string line;
    if (!f || !std::getline(f, line)) return *err = path + ": cannot read", false;
    columns = split_csv(line);
    for (size_t i = 0; i < columns.size(); i++) index_[columns[i]] = i;
    for (const auto& c : required)
        if (!index_.count(c)) return *err = path + ": no column '" + c + "'", false;
    for (size_t n = 2; std::getline(f, line); n++) {
        if (line.empty()) continue;
        rows.push_back(split_csv(line));
        if (rows.back().size() != columns.size())
            return *err = path + ":" + std::to_string(n) + ": " + std::to_string(rows.back().size()) + " fields, header has " +
                          std::to_string(columns.size()),
                   false;
    }
    return true;
}

const std::string& Table::at(size_t row, const std::string& col) const { return rows[row][index_.at(col)]; }

double Table::num(size_t row, const std::string& col) const
{
    const std::string& s = at(row, col);
    return s.empty() ? NAN : std::strtod(s.c_str(), nullptr);
}

bool print_summary(FILE* out, const std::string& messages_csv, const std::string& allreduce_csv, std::string* err)
{
    if (!messages_csv.empty()) {
        Table t;
        if (!t.load(messages_csv, header_of(kMessagesHeader), err)) return false;
        print_messages(out, t);
    }
    if (!allreduce_csv.empty()) {
        Table t;
        if (!t.load(allreduce_csv, header_of(kAllreduceHeader), err)) return false;
        print_allreduce(out, t);
    }
    return true;
}

}  // namespace sdr::exp
