// The DPA figure (dpa.csv): the simulated curves beside the paper's published points, each
// labelled with the relative error there.
#include "dpa.hpp"
#include "gnuplot.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace sdr::exp {

namespace fs = std::filesystem;
using namespace plot;

namespace {

struct Row {
    double x = 0, sdr = NAN, rc = NAN, line = NAN, paper = NAN, err = NAN;
    bool calibration = false;
};

double field(const std::string& s) { return s.empty() ? NAN : std::stod(s); }

bool read_dpa(const std::string& path, std::map<std::string, std::vector<Row>>* out, std::string* err)
{
    std::ifstream f(path);
    std::string line;
    if (!f || !std::getline(f, line) || line != kDpaHeader) {
        *err = path + ": not a dpa.csv of this version";
        return false;
    }
    while (std::getline(f, line)) {
        std::vector<std::string> c;
        std::stringstream ss(line);
        for (std::string v; std::getline(ss, v, ',');) c.push_back(v);
        while (c.size() < 8) c.emplace_back();
        Row r{field(c[1]), field(c[2]), field(c[3]), field(c[4]), field(c[5]), field(c[6]), c[7] == "1"};
        (*out)[c[0]].push_back(r);
    }
    return true;
}

// The paper's points of a panel, labelled with the simulation's error (or "calibration").
void paper_points(Dat& dat, const std::vector<Row>& rows, double scale, std::vector<std::string>* plots,
                  std::string* labels)
{
    size_t b = dat.block("x, the paper's value, label");
    bool any = false;
    for (const Row& r : rows) {
        if (!std::isfinite(r.paper)) continue;
        std::string text = r.calibration ? "calibration" : num(100 * r.err, 3) + " %";
        dat.row({num(r.x, 15), num(r.paper * scale), gp_string(text)});
        *labels += "set label " + gp_string(text) + " at " + num(r.x, 15) + "," + num(r.paper * scale) +
                   " offset 1,-1 font \",9\"\n";
        any = true;
    }
    if (any)
        plots->push_back(dat.ref(b) + " using 1:2 with points pt 6 ps 1.6 lw 2 lc rgb \"#d62728\" title \"paper (BlueField-3)\"");
}

}  // namespace

bool write_dpa_plots(const std::string& out_dir, const std::string& csv_path, std::vector<std::string>* figs,
                     std::string* err)
{
    std::map<std::string, std::vector<Row>> d;
    if (!read_dpa(csv_path, &d, err)) return false;
    Figure f("dpa", "DPA packet rate vs threads and chunk size, goodput vs message size (the paper's hardware figures)",
             1500, 440);
    Dat dat(f.name);
    std::ostringstream s;
    s << "set multiplot layout 1,3 title \"DPA and PCIe cost model against the paper's BlueField-3 points (400 Gbit/s, 4 KiB MTU)\"\n"
      << "set grid\nset key top left font \",9\"\n";
    // 1. threads
    {
        std::vector<std::string> p;
        size_t b = dat.block("threads, simulated Mpps");
        std::vector<double> at;
        std::vector<std::string> text;
        for (const Row& r : d["threads"]) {
            dat.row({num(r.x), num(r.sdr)});
            at.push_back(r.x);
            text.push_back(num(r.x));
        }
        p.push_back(dat.ref(b) + " using 1:2 with linespoints pt 7 lc rgb \"#1f77b4\" title \"simulated\"");
        std::string labels;
        paper_points(dat, d["threads"], 1, &p, &labels);
        s << "set title \"receive rate vs DPA threads (64-packet chunks)\"\n"
          << (at.empty() ? "" : log_axis("x", at, text, "DPA threads", 10)) << "set logscale y\nset ylabel \"Mpps\"\n"
          << labels << plot::plot(p) << "unset label\nunset logscale\n";
    }
    // 2. chunk
    {
        std::vector<std::string> p;
        size_t b = dat.block("packets per chunk, simulated Mpps at 16 threads");
        std::vector<double> at;
        std::vector<std::string> text;
        for (const Row& r : d["chunk"]) {
            dat.row({num(r.x), num(r.sdr)});
            at.push_back(r.x);
            text.push_back(num(r.x));
        }
        p.push_back(dat.ref(b) + " using 1:2 with linespoints pt 7 lc rgb \"#1f77b4\" title \"simulated\"");
        p.push_back("11.6 with lines dt 2 lc rgb \"#777777\" title \"400 Gbit/s at 4 KiB\"");
        std::string labels;
        paper_points(dat, d["chunk"], 1, &p, &labels);
        s << "set title \"receive rate vs chunk size, 16 threads\"\n"
          << (at.empty() ? "" : log_axis("x", at, text, "packets per chunk", 10)) << "set yrange [0:*]\nset ylabel \"Mpps\"\n"
          << labels << plot::plot(p) << "unset label\nunset logscale\nset autoscale y\n";
    }
    // 3. goodput
    {
        std::vector<std::string> p;
        size_t b = dat.block("message bytes, SDR Gbit/s, RC write Gbit/s, line Gbit/s");
        std::vector<uint64_t> sizes;
        double line = NAN;
        for (const Row& r : d["goodput"]) {
            dat.row({num(r.x, 15), num(r.sdr), num(r.rc), num(r.line)});
            sizes.push_back(static_cast<uint64_t>(r.x));
            line = r.line;
        }
        p.push_back(dat.ref(b) + " using 1:2 with linespoints pt 7 lc rgb \"#1f77b4\" title \"SDR (simulated)\"");
        p.push_back(dat.ref(b) + " using 1:3 with linespoints pt 5 lc rgb \"#2ca02c\" title \"RC write (model)\"");
        p.push_back(dat.ref(b) + " using 1:4 with lines dt 2 lc rgb \"#777777\" title \"line rate (payload)\"");
        std::string labels;
        paper_points(dat, d["goodput"], std::isfinite(line) ? line : 1, &p, &labels);
        s << "set title \"goodput vs message size, 20 threads\"\n" << (sizes.empty() ? "" : size_axis("x", sizes))
          << "set yrange [0:*]\nset ylabel \"Gbit/s\"\nset key bottom right\n" << labels << plot::plot(p) << "unset label\n";
    }
    f.data = dat.text();
    f.body = s.str();
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    fs::path stem = fs::path(out_dir) / f.name;
    if (!write_file(stem.string() + ".dat", f.data, err) || !write_file(stem.string() + ".gp", script(f, csv_path), err) ||
        !run_gnuplot(out_dir, f.name + ".gp", err))
        return false;
    for (const char* ext : {".svg", ".png"}) {
        if (!fs::exists(stem.string() + ext)) {
            *err = "gnuplot wrote no " + stem.string() + ext;
            return false;
        }
        if (figs) figs->push_back(stem.string() + ext);
    }
    return true;
}

}  // namespace sdr::exp
