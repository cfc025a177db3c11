// The figures of single messages (messages.csv).
#include "figures.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace sdr::exp::plot {

// Completion time vs size, a panel per drop rate (at most 6: else 5 evenly spaced with both
// ends), a colour per series; mean solid, p99.9 dashed, SR's lossless ideal grey.
std::optional<Figure> completion_vs_size(const Messages& g)
{
    std::vector<double> with_data;
    for (double d : g.drops) {
        bool any = false;
        for (const auto& s : g.series)
            for (uint64_t x : g.xs)
                if (const MessagePoint* p = g.find(s, x, d)) any |= valid(p->mean) || valid(p->p999);
        if (any) with_data.push_back(d);
    }
    if (with_data.empty()) return std::nullopt;
    std::vector<double> drops = with_data;
    if (drops.size() > 6) {
        drops.clear();
        for (size_t i = 0; i < 5; ++i)
            drops.push_back(with_data[static_cast<size_t>(std::lround(static_cast<double>(i * (with_data.size() - 1)) / 4))]);
    }
    Figure f("completion_vs_size", "completion time vs message size per drop rate (the paper's Fig. 3a and 9)");
    auto [rows, cols] = layout(drops.size());
    f.width = 440 * cols;
    f.height = 360 * rows + 30;
    auto colour = series_colours(g.series);
    Dat dat(f.name);
    std::ostringstream s;
    s << "set multiplot layout " << rows << "," << cols
      << " title \"Completion time vs message size: mean (solid), p99.9 (dashed)\"\n"
      << size_axis("x", g.xs) << "set logscale y\nset format y \"%g\"\nset ylabel \"completion (ms)\"\nset grid\n"
      << "set key top left font \",9\" opaque\n";
    for (size_t panel = 0; panel < drops.size(); ++panel) {
        double drop = drops[panel];
        size_t b = dat.block("drop " + drop_label(drop) + ": size_bytes, then mean_ms and p999_ms of each of " +
                             join(g.series, ", ") + ", then sr's ideal_ms");
        std::vector<bool> has(2 * g.series.size() + 1, false);  // per column after the size
        for (uint64_t x : g.xs) {
            std::vector<double> v;
            for (const auto& series : g.series) {
                const MessagePoint* p = g.find(series, x, drop);
                v.push_back(p ? p->mean : NAN);
                v.push_back(p ? p->p999 : NAN);
            }
            const MessagePoint* sr = g.find("sr", x, drop);
            v.push_back(sr ? sr->ideal : NAN);
            std::vector<std::string> row{std::to_string(x)};
            for (size_t c = 0; c < v.size(); ++c) {
                has[c] = has[c] || valid(v[c]);
                row.push_back(num(v[c]));
            }
            dat.row(row);
        }
        std::vector<std::string> el;
        if (panel == 0) {
            for (const auto& series : g.series) el.push_back(key_entry("lc rgb " + gp_string(colour[series]) + " dt 1 pt 7 ps 0.6", series));
            el.push_back(key_entry("lc rgb \"black\" dt 2 pt -1", "p99.9"));
            el.push_back(key_entry("lc rgb \"#999999\" dt 1 pt -1", "sr lossless ideal"));
        }
        for (size_t j = 0; j < g.series.size(); ++j) {
            std::string lc = " lc rgb " + gp_string(colour[g.series[j]]);
            if (has[2 * j]) el.push_back(dat.ref(b) + " using 1:" + std::to_string(2 * j + 2) + " with linespoints" + lc + " dt 1 pt 7 ps 0.6 notitle");
            if (has[2 * j + 1]) el.push_back(dat.ref(b) + " using 1:" + std::to_string(2 * j + 3) + " with lines" + lc + " dt 2 notitle");
        }
        if (has.back()) el.push_back(dat.ref(b) + " using 1:" + std::to_string(has.size() + 1) + " with lines lc rgb \"#999999\" lw 1 notitle");
        s << "set title " << gp_string("drop " + drop_label(drop)) << "\n" << plot(el);
        if (panel == 0) s << "unset key\n";
    }
    f.data = dat.text();
    f.body = s.str();
    return f;
}

namespace {

// Tics 1, 2, 5, 10, ... and their reciprocals within 1/spread..spread: a log colour scale's
// default tics are decades, which leave a scale of 0.3..3 with only "1".
std::string ratio_tics(double spread)
{
    std::vector<std::string> tics;
    for (double decade = 1; decade <= spread; decade *= 10)
        for (double m : {1.0, 2.0, 5.0})
            if (m * decade <= spread) {
                tics.push_back(num(m * decade));
                if (m * decade > 1) tics.insert(tics.begin(), num(1 / (m * decade)));
            }
    return "(" + join(tics, ", ") + ")";
}

}  // namespace

// SR's completion over EC-MDS's per (size, drop) as a heat map, mean and p99.9.
std::optional<Figure> slowdown_heatmap(const Messages& g)
{
    std::string mds = g.first_of("ec-mds");
    if (mds.empty() || g.first_of("sr") != "sr") return std::nullopt;
    std::vector<double> sizes(g.xs.begin(), g.xs.end());
    std::vector<Cell> xcell = log_cells(sizes), ycell = log_cells(g.drops);
    Figure f("slowdown_heatmap", "SR's completion time over EC-MDS's per size and drop rate (the paper's Fig. 9 and 10)");
    Dat dat(f.name);
    struct Stat {
        const char* name;
        double MessagePoint::*field;
    };
    double spread = 2;  // the colour scale spans 1/spread..spread, so 1 (a tie) is white
    std::vector<std::pair<std::string, size_t>> panels;
    for (Stat stat : {Stat{"mean", &MessagePoint::mean}, Stat{"p99.9", &MessagePoint::p999}}) {
        size_t b = dat.block(std::string(stat.name) + ": size_bytes drop, the cell's x and y bounds, sr / " + mds);
        bool any = false;
        for (size_t i = 0; i < g.xs.size(); ++i) {
            for (size_t j = 0; j < g.drops.size(); ++j) {
                const MessagePoint* sr = g.find("sr", g.xs[i], g.drops[j]);
                const MessagePoint* ec = g.find(mds, g.xs[i], g.drops[j]);
                if (!sr || !ec || !valid(sr->*stat.field) || !valid(ec->*stat.field)) continue;
                double ratio = sr->*stat.field / ec->*stat.field;
                spread = std::max({spread, ratio, 1 / ratio});
                any = true;
                dat.row({std::to_string(g.xs[i]), num(g.drops[j]), num(xcell[i].lo, 15), num(xcell[i].hi, 15),
                         num(ycell[j].lo, 15), num(ycell[j].hi, 15), num(ratio)});
            }
        }
        if (any) panels.emplace_back(stat.name, b);
    }
    if (panels.empty()) return std::nullopt;
    f.width = panels.size() * std::max<size_t>(460, 46 * g.xs.size() + 200);
    f.height = std::max<size_t>(400, 30 * g.drops.size() + 160);
    std::ostringstream s;
    s << "set multiplot layout 1," << panels.size()
      << " title " << gp_string("Slowdown of SR vs EC: sr / " + mds + " (above 1: EC completes sooner)") << "\n"
      << size_axis("x", g.xs) << drop_axis("y", g.drops)
      << "set logscale cb\nset cbrange [" << num(1 / spread) << ":" << num(spread) << "]\n"
      << "set palette defined (0 \"#2166ac\", 0.5 \"#f7f7f7\", 1 \"#b2182b\")\n"
      << "set cbtics " << ratio_tics(spread) << "\nset cblabel " << gp_string("sr / " + mds) << "\nunset key\n";
    for (const auto& [name, b] : panels) {
        s << "set title " << gp_string(name) << "\n"
          << plot({dat.ref(b) + " using 1:2:3:4:5:6:7 with boxxyerror fs solid 1.0 noborder lc palette",
                   dat.ref(b) + " using 1:2:(sprintf(\"%.1f\", $7)) with labels font \",8\""});
    }
    f.data = dat.text();
    f.body = s.str();
    return f;
}

namespace {

// The sizes the fallback figure draws: the paper's 1M, 16M, 128M, 1G where present; every size
// of a sweep with fewer than 4; else, for a sweep over other sizes, 4 evenly spaced ones.
std::vector<uint64_t> fallback_sizes(const std::vector<uint64_t>& sizes)
{
    if (sizes.size() < 4) return sizes;
    std::vector<uint64_t> pick;
    for (uint64_t s : {1ull << 20, 16ull << 20, 128ull << 20, 1ull << 30})
        if (std::binary_search(sizes.begin(), sizes.end(), s)) pick.push_back(s);
    if (pick.empty())
        for (size_t i = 0; i < 4; ++i) pick.push_back(sizes[i * (sizes.size() - 1) / 3]);
    return pick;
}

}  // namespace

// How often EC fell back to SR vs drop rate: a colour per size, a dash per code.
std::optional<Figure> fallback_rate(const Messages& g)
{
    std::vector<std::string> ec;
    for (const auto& s : g.series)
        if (scheme_of(s) == "ec-xor" || scheme_of(s) == "ec-mds") ec.push_back(s);
    std::vector<uint64_t> sizes = fallback_sizes(g.xs);
    Figure f("fallback_rate", "how often EC falls back to SR vs drop rate (the paper's Fig. 11)", 820, 480);
    Dat dat(f.name);
    std::vector<std::string> el;
    for (size_t i = 0; i < sizes.size(); ++i) el.push_back(key_entry("lc rgb " + gp_string(ramp(i, sizes.size())) + " dt 1 pt -1", size_label(sizes[i])));
    for (size_t j = 0; j < ec.size(); ++j) el.push_back(key_entry("lc rgb \"black\" " + series_style(j), ec[j]));
    size_t keys = el.size();
    for (size_t j = 0; j < ec.size(); ++j) {
        std::vector<std::string> names;
        for (uint64_t x : sizes) names.push_back(size_label(x));
        size_t b = dat.block(ec[j] + ": drop, then fallback_rate at " + join(names, ", "));
        std::vector<bool> has(sizes.size(), false);
        for (double d : g.drops) {
            std::vector<std::string> row{num(d)};
            for (size_t i = 0; i < sizes.size(); ++i) {
                const MessagePoint* p = g.find(ec[j], sizes[i], d);
                double rate = p ? p->fallback_rate : NAN;
                has[i] = has[i] || std::isfinite(rate);
                row.push_back(num(rate));
            }
            dat.row(row);
        }
        for (size_t i = 0; i < sizes.size(); ++i)
            if (has[i])
                el.push_back(dat.ref(b) + " using 1:" + std::to_string(i + 2) + " with linespoints lc rgb " +
                             gp_string(ramp(i, sizes.size())) + " " + series_style(j) + " ps 0.8 notitle");
    }
    if (el.size() == keys) return std::nullopt;
    f.data = dat.text();
    f.body = "set multiplot layout 1,1 title \"EC fallback to SR vs drop rate\"\n" + drop_axis("x", g.drops) +
             "set yrange [-0.02:1.02]\nset ylabel \"fallback rate (fraction of samples)\"\nset grid\n"
             "set key outside right top font \",9\"\n" + plot(el);
    return f;
}

// Auto's completion over the best fixed scheme's at each point, mean and p99.9, with the 10 %
// target; points above it are labelled with the ratio (what auto chose there is in the .dat: a
// label per point would bury the figure when many miss).
std::optional<Figure> auto_vs_best(const Messages& g)
{
    std::string automatic = g.first_of("auto");
    if (automatic.empty()) return std::nullopt;
    auto best = [&](uint64_t x, double d, double MessagePoint::*field) {
        double b = NAN;
        for (const auto& s : g.series)
            if (const MessagePoint* p = g.find(s, x, d); p && auto_candidate(scheme_of(s)) && valid(p->*field))
                b = std::isnan(b) ? p->*field : std::min(b, p->*field);
        return b;
    };
    Figure f("auto_vs_best", "auto's completion time over the best fixed scheme's, per drop rate (target: within 10 %)", 1120, 460);
    Dat dat(f.name);
    std::vector<std::string> mean_el, p999_el, keys;
    for (size_t i = 0; i < g.drops.size(); ++i) {
        double d = g.drops[i];
        size_t b = dat.block("drop " + drop_label(d) + ": size_bytes, auto mean / best mean, auto p99.9 / best p99.9, auto's choice");
        bool has_mean = false, has_p999 = false;
        for (uint64_t x : g.xs) {
            const MessagePoint* a = g.find(automatic, x, d);
            double mean = a ? a->mean / best(x, d, &MessagePoint::mean) : NAN;
            double p999 = a ? a->p999 / best(x, d, &MessagePoint::p999) : NAN;
            has_mean = has_mean || valid(mean);
            has_p999 = has_p999 || valid(p999);
            dat.row({std::to_string(x), num(mean), num(p999), a && !a->chosen.empty() ? a->chosen : "-"});
        }
        std::string colour = "rgb " + gp_string(ramp(i, g.drops.size()));
        if (has_mean || has_p999) keys.push_back(key_entry("lc " + colour + " dt 1 pt 7", "drop " + drop_label(d)));
        auto lines = [&](int col) {
            std::string c = std::to_string(col);
            return std::vector<std::string>{
                dat.ref(b) + " using 1:" + c + " with linespoints lc " + colour + " pt 7 ps 0.6 notitle",
                dat.ref(b) + " using 1:($" + c + " > 1.10 ? $" + c + " : NaN):(sprintf(\"%.2f\", $" + c +
                    ")) with labels offset 0,0.8 font \",8\" tc " + colour + " notitle"};
        };
        if (has_mean) for (auto& e : lines(2)) mean_el.push_back(e);
        if (has_p999) for (auto& e : lines(3)) p999_el.push_back(e);
    }
    if (keys.empty()) return std::nullopt;
    const std::string target = "1.10 with lines lc rgb \"black\" dt 2 title \"target 1.10\"";
    std::vector<std::pair<std::string, std::vector<std::string>>> panels;
    for (auto& [name, el] : {std::pair{"mean", mean_el}, std::pair{"p99.9", p999_el}})
        if (!el.empty()) panels.emplace_back(name, el);
    // The panels end at 84 % of the width and the legend (a line per drop rate) stands right of
    // them: inside a panel it would cover the points near the target.
    std::ostringstream s;
    s << "set multiplot layout 1," << panels.size()
      << " title \"auto vs the best fixed scheme (min of sr, sr-nack, ec-xor, ec-mds) at each point\""
      << " margins 0.07,0.84,0.14,0.86 spacing 0.07,0.1\n"
      << size_axis("x", g.xs) << "set ylabel \"auto / best fixed\"\nset grid\n"
      << "set key at screen 0.855,0.86 top left font \",9\"\n"
      << "set offsets 0, 0, graph 0.15, graph 0.05  # room for the labels above the highest points\n";
    bool first = true;
    for (auto& [name, el] : panels) {
        if (first) el.insert(el.begin(), keys.begin(), keys.end());
        el.push_back(first ? target : "1.10 with lines lc rgb \"black\" dt 2 notitle");
        s << "set title " << gp_string(name) << "\n" << plot(el);
        if (first) s << "unset key\n";
        first = false;
    }
    f.data = dat.text();
    f.body = s.str();
    return f;
}

// SR's simulated mean over the analytic model where the model is exact, with the ±5 % band the
// paper's stochastic simulation met.
std::optional<Figure> model_vs_sim(const Messages& g)
{
    Figure f("model_vs_sim", "SR's simulated mean completion time over the analytic model, where the model is exact", 820, 480);
    Dat dat(f.name);
    std::vector<std::string> el;
    for (size_t i = 0; i < g.drops.size(); ++i) {
        double d = g.drops[i];
        size_t b = dat.block("drop " + drop_label(d) + ": size_bytes, sr mean_ms / model_ms (exact model only)");
        bool any = false;
        for (uint64_t x : g.xs) {
            const MessagePoint* p = g.find("sr", x, d);
            double ratio = p && p->model_kind == "exact" && valid(p->model) ? p->mean / p->model : NAN;
            any = any || valid(ratio);
            dat.row({std::to_string(x), num(ratio)});
        }
        if (any)
            el.push_back(dat.ref(b) + " using 1:2 with linespoints lc rgb " + gp_string(ramp(i, g.drops.size())) +
                         " pt 7 ps 0.7 title " + gp_string("drop " + drop_label(d)));
    }
    if (el.empty()) return std::nullopt;
    el.push_back("0.95 with lines lc rgb \"#999999\" dt 2 title \"model ±5 %\"");
    el.push_back("1.05 with lines lc rgb \"#999999\" dt 2 notitle");
    f.data = dat.text();
    f.body = "set multiplot layout 1,1 title \"SR: simulation vs analytic model\"\n" + size_axis("x", g.xs) +
             "set ylabel \"simulated mean / model\"\nset grid\nset key outside right top font \",9\"\n" + plot(el);
    return f;
}

}  // namespace sdr::exp::plot
