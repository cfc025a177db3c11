// The fabric figure (fabric.csv): mean completion time against the long haul's utilisation by
// the background, per size and scheme; and each scheme's mean over the first's (EC over SR).
#include "fabric.hpp"
#include "gnuplot.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

namespace sdr::exp {

namespace fs = std::filesystem;
using namespace plot;

bool write_fabric_plots(const std::string& out_dir, const std::string& csv_path, std::vector<std::string>* figs,
                        std::string* err)
{
    std::vector<FabricRow> rows;
    if (!read_fabric_csv(csv_path, &rows, err)) return false;
    std::vector<std::string> schemes;
    std::set<uint64_t> sizes;
    for (const FabricRow& r : rows) {
        if (std::find(schemes.begin(), schemes.end(), r.scheme) == schemes.end()) schemes.push_back(r.scheme);
        sizes.insert(r.size);
    }
    Figure f("fabric", "SR and EC over two datacenters whose long haul carries background traffic: congestion loss", 1200, 460);
    Dat dat(f.name);
    std::vector<std::string> times, ratios;
    size_t i = 0;
    for (uint64_t size : sizes) {
        const std::string colour = ramp(i++, sizes.size());
        for (size_t j = 0; j < schemes.size(); j++) {
            size_t b = dat.block(size_label(size) + " " + schemes[j] + ": utilisation, mean ms, mean over " + schemes[0]);
            for (const FabricRow& r : rows)
                if (r.size == size && r.scheme == schemes[j]) dat.row({num(r.utilisation), num(r.mean_ms), num(r.over_first)});
            const std::string style = "lc rgb " + gp_string(colour) + (j ? " dt 2 pt 6" : " dt 1 pt 7");
            times.push_back(dat.ref(b) + " using 1:2 with linespoints " + style + " title " +
                            gp_string(size_label(size) + " " + schemes[j]));
            if (j) ratios.push_back(dat.ref(b) + " using 1:3 with linespoints lc rgb " + gp_string(colour) + " pt 7 title " +
                                    gp_string(size_label(size) + " " + schemes[j] + " / " + schemes[0]));
        }
    }
    ratios.push_back("1 with lines dt 3 lc rgb \"#777777\" notitle");
    std::ostringstream s;
    s << "set multiplot layout 1,2 title \"Two datacenters, the long haul shared with web-search background "
         "(drop-tail gateway): loss from congestion\"\n"
      << "set grid\nset key top left font \",9\"\nset xlabel \"long-haul utilisation by the background\"\n"
      << "set xrange [-0.05:1]\n"
      << "set title \"mean completion time\"\nset logscale y\nset yrange [10:*]\nset ylabel \"ms\"\n" << plot::plot(times)
      << "unset logscale y\nset autoscale y\n"
      << "set title \"mean completion over " << schemes[0] << "'s (below 1: faster)\"\nset ylabel \"ratio\"\n"
      << "set yrange [0:*]\n" << plot::plot(ratios);
    f.data = dat.text();
    f.body = s.str();
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    fs::path stem = fs::path(out_dir) / f.name;
    if (!write_file(stem.string() + ".dat", f.data, err) || !write_file(stem.string() + ".gp", script(f, csv_path), err) ||
        !run_gnuplot(out_dir, f.name + ".gp", err))
        return false;
    for (const char* ext : {".svg", ".png"}) {
        if (!fs::exists(stem.string() + ext)) return *err = "gnuplot wrote no " + stem.string() + ext, false;
        if (figs) figs->push_back(stem.string() + ext);
    }
    return true;
}

}  // namespace sdr::exp
