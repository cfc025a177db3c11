// The Allreduce figure (allreduce.csv).
#include "figures.hpp"

#include <cmath>
#include <sstream>

namespace sdr::exp::plot {

// Ring Allreduce: p99.9 vs nodes (a colour per drop rate, a dash per scheme), and EC's speedup.
std::optional<Figure> allreduce(const Allreduce& a)
{
    const Grid<double>& g = a.p999;
    if (g.at.empty()) return std::nullopt;
    Figure f("allreduce", "ring Allreduce p99.9 completion and EC's speedup vs nodes (the paper's Fig. 13)");
    Dat dat(f.name);
    std::vector<std::string> drops;
    for (double d : g.drops) drops.push_back(drop_label(d));
    std::vector<std::string> completion;
    for (size_t i = 0; i < g.drops.size(); ++i)
        completion.push_back(key_entry("lc rgb " + gp_string(ramp(i, g.drops.size())) + " dt 1 pt -1", "drop " + drops[i]));
    for (size_t j = 0; j < g.series.size(); ++j) completion.push_back(key_entry("lc rgb \"black\" " + series_style(j), g.series[j]));
    size_t keys = completion.size();
    for (size_t j = 0; j < g.series.size(); ++j) {
        size_t b = dat.block(g.series[j] + ": nodes, then p999_ms at drop " + join(drops, ", "));
        std::vector<bool> has(g.drops.size(), false);
        for (uint64_t n : g.xs) {
            std::vector<std::string> row{std::to_string(n)};
            for (size_t i = 0; i < g.drops.size(); ++i) {
                const double* p = g.find(g.series[j], n, g.drops[i]);
                has[i] = has[i] || (p && valid(*p));
                row.push_back(num(p ? *p : NAN));
            }
            dat.row(row);
        }
        for (size_t i = 0; i < g.drops.size(); ++i)
            if (has[i])
                completion.push_back(dat.ref(b) + " using 1:" + std::to_string(i + 2) + " with linespoints lc rgb " +
                                     gp_string(ramp(i, g.drops.size())) + " " + series_style(j) + " ps 0.8 notitle");
    }
    if (completion.size() == keys) return std::nullopt;
    std::vector<std::string> speedup;
    std::string mds = g.first_of("ec-mds");
    if (!mds.empty() && g.first_of("sr") == "sr") {
        size_t b = dat.block("nodes, then sr p999_ms / " + mds + " p999_ms at drop " + join(drops, ", "));
        std::vector<bool> has(g.drops.size(), false);
        for (uint64_t n : g.xs) {
            std::vector<std::string> row{std::to_string(n)};
            for (size_t i = 0; i < g.drops.size(); ++i) {
                const double *sr = g.find("sr", n, g.drops[i]), *ec = g.find(mds, n, g.drops[i]);
                double ratio = sr && ec && valid(*sr) && valid(*ec) ? *sr / *ec : NAN;
                has[i] = has[i] || valid(ratio);
                row.push_back(num(ratio));
            }
            dat.row(row);
        }
        for (size_t i = 0; i < g.drops.size(); ++i)
            if (has[i])
                speedup.push_back(dat.ref(b) + " using 1:" + std::to_string(i + 2) + " with linespoints lc rgb " +
                                  gp_string(ramp(i, g.drops.size())) + " dt 1 pt 7 title " + gp_string("drop " + drops[i]));
        if (!speedup.empty()) speedup.push_back("1 with lines lc rgb \"#999999\" dt 2 notitle");
    }
    size_t panels = speedup.empty() ? 1 : 2;
    f.width = 500 * panels;
    f.height = 440;
    std::vector<double> nodes(g.xs.begin(), g.xs.end());
    std::vector<std::string> node_text;
    for (uint64_t n : g.xs) node_text.push_back(std::to_string(n));
    std::ostringstream s;
    s << "set multiplot layout 1," << panels << " title "
      << gp_string("Ring Allreduce of " + size_label(a.bytes) + " per node over long-haul links") << "\n"
      << "set xrange [" << num(nodes.front() - 0.5) << ":" << num(nodes.back() + 0.5) << "]\n"
      << "set xtics " << tic_list(nodes, node_text, 12) << "\nset xlabel \"nodes (ring)\"\nset grid\n"
      << "set key top left font \",9\" opaque\n"
      << "set title \"p99.9 completion\"\nset logscale y\nset format y \"%g\"\nset ylabel \"p99.9 completion (ms)\"\n"
      << plot(completion);
    if (!speedup.empty())
        s << "set title " << gp_string("EC speedup: sr p99.9 / " + mds + " p99.9") << "\nunset logscale y\n"
          << "set ylabel \"speedup\"\n" << plot(speedup);
    f.data = dat.text();
    f.body = s.str();
    return f;
}

}  // namespace sdr::exp::plot
