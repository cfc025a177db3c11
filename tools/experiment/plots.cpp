#include "plots.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

namespace sdr::exp {

namespace {

namespace fs = std::filesystem;

// ------------------------------------------------------------------------------------------ CSV

std::vector<std::string> split(const std::string& line)
{
    std::vector<std::string> fields;
    size_t start = 0;
    for (size_t comma; (comma = line.find(',', start)) != std::string::npos; start = comma + 1)
        fields.push_back(line.substr(start, comma - start));
    fields.push_back(line.substr(start));
    return fields;
}

// The rows of a CSV file with a header line, as text; typed reads of a field name the file, the
// line and the column when it is bad, so a user finds it in the sweep's output.
class Csv {
public:
    // Reads path; every column in `needed` must be in its header (others are ignored).
    bool read(const std::string& path, const std::vector<std::string>& needed, std::string* err)
    {
        path_ = path;
        std::ifstream in(path);
        if (!in) {
            *err = path + ": cannot open: " + std::strerror(errno);
            return false;
        }
        std::string line;
        auto next = [&] {
            if (!std::getline(in, line)) return false;
            if (!line.empty() && line.back() == '\r') line.pop_back();
            return true;
        };
        if (!next()) {
            *err = path + ": empty, expected a header line";
            return false;
        }
        std::vector<std::string> header = split(line);
        for (size_t i = 0; i < header.size(); ++i) column_.emplace(header[i], i);
        for (const auto& c : needed) {
            if (!column_.count(c)) {
                *err = path + ": no column '" + c + "' in the header";
                return false;
            }
        }
        for (size_t n = 2; next(); ++n) {
            if (line.empty()) continue;
            std::vector<std::string> fields = split(line);
            if (fields.size() != header.size()) {
                *err = path + ":" + std::to_string(n) + ": " + std::to_string(fields.size()) +
                       " fields, but the header names " + std::to_string(header.size()) + " columns";
                return false;
            }
            rows_.push_back(std::move(fields));
            lines_.push_back(n);
        }
        return true;
    }

    size_t rows() const { return rows_.size(); }
    const std::string& text(size_t r, const std::string& col) const { return rows_[r][column_.at(col)]; }

    bool word(size_t r, const std::string& col, std::string* v, std::string* err) const
    {
        *v = text(r, col);
        if (v->empty()) *err = where(r, col) + ": empty";
        return !v->empty();
    }

    // A number; "nan" (undefined) is one.
    bool number(size_t r, const std::string& col, double* v, std::string* err) const
    {
        const std::string& s = text(r, col);
        char* end = nullptr;
        *v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0') {
            *err = where(r, col) + ": '" + s + "' is not a number";
            return false;
        }
        return true;
    }

    bool count(size_t r, const std::string& col, uint64_t* v, std::string* err) const
    {
        const std::string& s = text(r, col);
        char* end = nullptr;
        errno = 0;
        *v = std::strtoull(s.c_str(), &end, 10);
        if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0])) || *end != '\0' || errno == ERANGE) {
            *err = where(r, col) + ": '" + s + "' is not a whole number";
            return false;
        }
        return true;
    }

private:
    std::string where(size_t r, const std::string& col) const
    {
        return path_ + ":" + std::to_string(lines_[r]) + ": column '" + col + "'";
    }

    std::string path_;
    std::map<std::string, size_t> column_;
    std::vector<std::vector<std::string>> rows_;
    std::vector<size_t> lines_;  // of each row
};

// ------------------------------------------------------------------------ the sweep's points

// A scheme with its code, as sdr_sweep's `chosen` column spells it: "sr", "ec-mds:32/8".
std::string series_label(const std::string& scheme, uint64_t k, uint64_t m)
{
    return k == 0 && m == 0 ? scheme : scheme + ":" + std::to_string(k) + "/" + std::to_string(m);
}

std::string scheme_of(const std::string& series) { return series.substr(0, series.find(':')); }

// The paper's order of schemes, then any other by name: the order of lines and legends.
bool series_before(const std::string& a, const std::string& b)
{
    static const std::array<std::string, 5> order = {"sr", "sr-nack", "ec-xor", "ec-mds", "auto"};
    auto rank = [](const std::string& s) {
        return std::find(order.begin(), order.end(), scheme_of(s)) - order.begin();
    };
    return std::pair(rank(a), a) < std::pair(rank(b), b);
}

template <class T>
void insert_sorted(std::vector<T>& v, const T& x)
{
    auto it = std::lower_bound(v.begin(), v.end(), x);
    if (it == v.end() || *it != x) v.insert(it, x);
}

// The points of a sweep by (series, x, drop), and each axis's values in ascending order; x is
// the message size or the number of Allreduce nodes.
template <class Point>
struct Grid {
    std::vector<uint64_t> xs;
    std::vector<double> drops;
    std::vector<std::string> series;
    std::map<std::tuple<std::string, uint64_t, double>, Point> at;

    void add(const std::string& s, uint64_t x, double drop, const Point& p)
    {
        at.insert_or_assign(std::tuple(s, x, drop), p);
        insert_sorted(xs, x);
        insert_sorted(drops, drop);
        if (std::find(series.begin(), series.end(), s) == series.end()) {
            series.push_back(s);
            std::sort(series.begin(), series.end(), series_before);
        }
    }
    const Point* find(const std::string& s, uint64_t x, double drop) const
    {
        auto it = at.find(std::tuple(s, x, drop));
        return it == at.end() ? nullptr : &it->second;
    }
    // The first series (in legend order) of a scheme, "" if none: the one a ratio figure uses
    // when a sweep ran several codes of it.
    std::string first_of(const std::string& scheme) const
    {
        for (const auto& s : series)
            if (scheme_of(s) == scheme) return s;
        return "";
    }
};

struct MessagePoint {
    double mean = NAN, p999 = NAN, fallback_rate = NAN, model = NAN, ideal = NAN;
    std::string model_kind, chosen;
};
using Messages = Grid<MessagePoint>;

struct Allreduce {
    uint64_t bytes = 0;        // per node; the figure draws one vector size
    Grid<double> p999;         // x = nodes
};

// Rows with drop 0 (a lossless baseline) are left out: every figure's drop axis is logarithmic.
bool read_messages(const std::string& path, Messages* g, std::string* err)
{
    Csv csv;
    if (!csv.read(path, {"size_bytes", "drop", "scheme", "k", "m", "mean_ms", "p999_ms", "fallback_rate", "model_ms",
                         "model_kind", "ideal_ms", "chosen"}, err))
        return false;
    for (size_t r = 0; r < csv.rows(); ++r) {
        uint64_t size, k, m;
        double drop;
        std::string scheme;
        MessagePoint p;
        if (!csv.count(r, "size_bytes", &size, err) || !csv.number(r, "drop", &drop, err) ||
            !csv.word(r, "scheme", &scheme, err) || !csv.count(r, "k", &k, err) || !csv.count(r, "m", &m, err) ||
            !csv.number(r, "mean_ms", &p.mean, err) || !csv.number(r, "p999_ms", &p.p999, err) ||
            !csv.number(r, "fallback_rate", &p.fallback_rate, err) || !csv.number(r, "model_ms", &p.model, err) ||
            !csv.number(r, "ideal_ms", &p.ideal, err))
            return false;
        p.model_kind = csv.text(r, "model_kind");
        p.chosen = csv.text(r, "chosen");
        if (drop > 0) g->add(series_label(scheme, k, m), size, drop, p);
    }
    return true;
}

// Only the rows of the first vector size in the file are kept: the paper's figure holds it fixed.
bool read_allreduce(const std::string& path, Allreduce* a, std::string* err)
{
    Csv csv;
    if (!csv.read(path, {"nodes", "bytes", "drop", "scheme", "k", "m", "p999_ms"}, err)) return false;
    for (size_t r = 0; r < csv.rows(); ++r) {
        uint64_t nodes, bytes, k, m;
        double drop, p999;
        std::string scheme;
        if (!csv.count(r, "nodes", &nodes, err) || !csv.count(r, "bytes", &bytes, err) ||
            !csv.number(r, "drop", &drop, err) || !csv.word(r, "scheme", &scheme, err) ||
            !csv.count(r, "k", &k, err) || !csv.count(r, "m", &m, err) || !csv.number(r, "p999_ms", &p999, err))
            return false;
        if (a->bytes == 0) a->bytes = bytes;
        if (bytes == a->bytes && drop > 0) a->p999.add(series_label(scheme, k, m), nodes, drop, p999);
    }
    return true;
}

// ------------------------------------------------------------------------- gnuplot vocabulary

bool valid(double v) { return std::isfinite(v) && v > 0; }

// A value for a .dat file or a script; gnuplot reads NaN as "no point here".
std::string num(double v, int digits = 6)
{
    if (!std::isfinite(v)) return "NaN";
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    return buf;
}

std::string gp_string(const std::string& s)
{
    std::string q = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') q += '\\';
        q += c;
    }
    return q + "\"";
}

std::string size_label(uint64_t bytes)
{
    static const std::array<std::pair<int, const char*>, 3> units = {{{30, "G"}, {20, "M"}, {10, "K"}}};
    for (auto [shift, unit] : units)
        if (bytes >= (1ull << shift) && bytes % (1ull << shift) == 0) return std::to_string(bytes >> shift) + unit;
    return std::to_string(bytes);
}

// Drop rates always as mantissa and exponent, 1e-4 and 3.16e-5, so a decade reads alike.
std::string drop_label(double p)
{
    int e = static_cast<int>(std::floor(std::log10(p) + 1e-9));
    return num(p / std::pow(10.0, e), 3) + "e" + std::to_string(e);
}

// Colours of the schemes; a second code of one scheme takes the next spare colour.
std::map<std::string, std::string> series_colours(const std::vector<std::string>& series)
{
    static const std::map<std::string, std::string> base = {
        {"sr", "#d62728"}, {"sr-nack", "#ff7f0e"}, {"ec-xor", "#2ca02c"}, {"ec-mds", "#1f77b4"}, {"auto", "#9467bd"}};
    static const std::array<const char*, 5> spare = {"#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
    std::map<std::string, std::string> colour;
    std::set<std::string> taken;
    size_t next_spare = 0;
    for (const auto& s : series) {
        auto it = base.find(scheme_of(s));
        colour[s] = it != base.end() && taken.insert(it->first).second ? it->second : spare[next_spare++ % spare.size()];
    }
    return colour;
}

// Colour i of n along an ordered scale (viridis without its pale end), for drop rates and sizes:
// their order is what a reader follows across the lines.
std::string ramp(size_t i, size_t n)
{
    static const std::array<std::array<double, 3>, 5> anchor = {
        {{68, 1, 84}, {65, 68, 135}, {42, 120, 142}, {34, 168, 132}, {122, 209, 81}}};
    double t = n > 1 ? 4.0 * static_cast<double>(i) / static_cast<double>(n - 1) : 0;
    size_t lo = std::min<size_t>(static_cast<size_t>(t), 3);
    double f = t - static_cast<double>(lo);
    char buf[16];
    auto channel = [&](int c) { return static_cast<int>(std::lround(anchor[lo][c] + f * (anchor[lo + 1][c] - anchor[lo][c]))); };
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", channel(0), channel(1), channel(2));
    return buf;
}

// Dash and point type telling the series apart where colour tells drop rates or sizes apart.
std::string series_style(size_t j)
{
    static const std::array<int, 5> point = {7, 6, 5, 4, 9};
    return "dt " + std::to_string(j % 5 + 1) + " pt " + std::to_string(point[j % 5]);
}

// A legend entry without data: legends say "colour = X, dash = Y" once, whatever a panel holds.
std::string key_entry(const std::string& style, const std::string& title)
{
    return "NaN with linespoints " + style + " title " + gp_string(title);
}

std::string plot(const std::vector<std::string>& elements)
{
    std::string s = "plot ";
    for (size_t i = 0; i < elements.size(); ++i) s += (i ? ", \\\n     " : "") + elements[i];
    return s + "\n";
}

// n panels: one row of up to 3, else 2x2, else rows of 3.
std::pair<size_t, size_t> layout(size_t n)
{
    if (n <= 3) return {1, n};
    if (n == 4) return {2, 2};
    return {(n + 2) / 3, 3};
}

struct Cell {
    double lo, hi;
};

// The geometric midpoints around ascending positive values (the ends mirror their neighbour's
// step; a lone value spans a factor 2 either way): a heat map's cells on a log axis, and every
// log axis's range, so the outer points sit half a step inside the frame.
std::vector<Cell> log_cells(const std::vector<double>& v)
{
    size_t n = v.size();
    double first_step = n > 1 ? std::sqrt(v[1] / v[0]) : 2, last_step = n > 1 ? std::sqrt(v[n - 1] / v[n - 2]) : 2;
    std::vector<Cell> cells(n);
    for (size_t i = 0; i < n; ++i) {
        cells[i].lo = i > 0 ? std::sqrt(v[i - 1] * v[i]) : v[0] / first_step;
        cells[i].hi = i + 1 < n ? std::sqrt(v[i] * v[i + 1]) : v[n - 1] * last_step;
    }
    return cells;
}

// Tics at the given values: at most `labels` of them labelled, evenly from the first, the others
// unlabelled minor tics.
std::string tic_list(const std::vector<double>& at, const std::vector<std::string>& text, size_t labels)
{
    size_t stride = (at.size() + labels - 1) / labels;
    std::string s = "(";
    for (size_t i = 0; i < at.size(); ++i)
        s += (i ? ", " : "") + (i % stride == 0 ? gp_string(text[i]) + " " + num(at[i], 15) : "\"\" " + num(at[i], 15) + " 1");
    return s + ")";
}

std::string log_axis(const std::string& axis, const std::vector<double>& at, const std::vector<std::string>& text,
                     const std::string& label, size_t labels)
{
    std::vector<Cell> cells = log_cells(at);
    return "set logscale " + axis + "\nset " + axis + "range [" + num(cells.front().lo, 15) + ":" +
           num(cells.back().hi, 15) + "]\nset " + axis + "tics " + tic_list(at, text, labels) + "\nset " + axis +
           "label " + gp_string(label) + "\n";
}

std::string size_axis(const std::string& axis, const std::vector<uint64_t>& sizes)
{
    std::vector<double> at(sizes.begin(), sizes.end());
    std::vector<std::string> text;
    for (uint64_t s : sizes) text.push_back(size_label(s));
    return log_axis(axis, at, text, "message size (bytes)", 7);
}

std::string drop_axis(const std::string& axis, const std::vector<double>& drops)
{
    std::vector<std::string> text;
    for (double d : drops) text.push_back(drop_label(d));
    return log_axis(axis, drops, text, "drop rate (per packet)", 8);
}

// A figure's data file: blocks that plot commands pick by `index` (two blank lines part them).
class Dat {
public:
    explicit Dat(const std::string& name) : file_(name + ".dat") {}

    // Starts a block, headed by a comment saying what its columns are; returns its index.
    size_t block(const std::string& comment)
    {
        if (blocks_ > 0) text_ += "\n\n";
        text_ += "# " + comment + "\n";
        return blocks_++;
    }
    void row(const std::vector<std::string>& fields)
    {
        for (size_t i = 0; i < fields.size(); ++i) text_ += (i ? " " : "") + fields[i];
        text_ += "\n";
    }
    std::string ref(size_t block) const { return gp_string(file_) + " index " + std::to_string(block); }
    const std::string& text() const { return text_; }

private:
    std::string file_, text_;
    size_t blocks_ = 0;
};

struct Figure {
    Figure(std::string name_, std::string about_, size_t width_ = 0, size_t height_ = 0)
        : name(std::move(name_)), about(std::move(about_)), width(width_), height(height_)
    {
    }
    std::string name;      // file stem
    std::string about;     // one line for the script's header: what it shows, which paper figure
    size_t width = 0, height = 0;
    std::string data;      // the .dat file
    std::string body;      // the drawing commands, run once per output format
};

std::string join(const std::vector<std::string>& v, const std::string& sep)
{
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
    return s;
}

// ------------------------------------------------------------------------------- the figures

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
    static const std::set<std::string> fixed = {"sr", "sr-nack", "ec-xor", "ec-mds"};
    auto best = [&](uint64_t x, double d, double MessagePoint::*field) {
        double b = NAN;
        for (const auto& s : g.series)
            if (const MessagePoint* p = g.find(s, x, d); p && fixed.count(scheme_of(s)) && valid(p->*field))
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

// ---------------------------------------------------------------------------- running gnuplot

// The script around a figure's commands: a header saying how to redraw it, then the commands
// once into the SVG and once into the PNG (pngcairo where gnuplot has it: antialiased).
std::string script(const Figure& f, const std::string& source)
{
    std::string size = std::to_string(f.width) + "," + std::to_string(f.height);
    std::ostringstream s;
    s << "# " << f.name << ": " << f.about << ".\n"
      << "# Written by write_plots (tools/experiment/plots.cpp) from " << source << "; the numbers are in\n"
      << "# " << f.name << ".dat. Edit this script and redraw " << f.name << ".svg and " << f.name << ".png with\n"
      << "# `gnuplot " << f.name << ".gp` in this directory.\n"
      << "set encoding utf8\n"
      << "do for [fmt in \"svg png\"] {\n"
      << "  if (fmt eq \"svg\") {\n"
      << "    set terminal svg size " << size << " dynamic noenhanced font \"sans,11\" background \"white\"\n"
      << "  } else {\n"
      << "    if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {\n"
      << "      set terminal pngcairo size " << size << " noenhanced font \"sans,10\"\n"
      << "    } else {\n"
      << "      set terminal png size " << size << " noenhanced\n"
      << "    }\n"
      << "  }\n"
      << "  set output \"" << f.name << ".\" . fmt\n";
    std::istringstream body(f.body);
    for (std::string line; std::getline(body, line);) s << "  " << line << "\n";
    s << "  unset multiplot\n  set output\n}\n";
    return s.str();
}

bool write_file(const fs::path& path, const std::string& text, std::string* err)
{
    std::ofstream out(path);
    out << text;
    out.close();
    if (!out) *err = path.string() + ": cannot write: " + std::strerror(errno);
    return static_cast<bool>(out);
}

// Runs `gnuplot script` in dir. gnuplot's stderr becomes *err when it fails; its warnings on
// success (a line with no points) are dropped.
bool run_gnuplot(const std::string& dir, const std::string& script_name, std::string* err)
{
    int pipe_fd[2];
    if (pipe2(pipe_fd, O_CLOEXEC) != 0) {
        *err = std::string("pipe: ") + std::strerror(errno);
        return false;
    }
    pid_t pid = fork();
    if (pid < 0) {
        *err = std::string("fork: ") + std::strerror(errno);
        close(pipe_fd[0]);
        close(pipe_fd[1]);
        return false;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(pipe_fd[1], 2);
        if (chdir(dir.c_str()) != 0) _exit(126);
        execlp("gnuplot", "gnuplot", script_name.c_str(), static_cast<char*>(nullptr));
        _exit(errno == ENOENT ? 127 : 126);
    }
    close(pipe_fd[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = read(pipe_fd[0], buf, sizeof buf)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    close(pipe_fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        *err = "gnuplot not found: install gnuplot-nox (tools/setup.sh does)";
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 126 && out.empty())
        *err = "cannot run gnuplot in " + dir;
    else
        *err = "gnuplot " + (fs::path(dir) / script_name).string() + " failed: " + out;
    return false;
}

}  // namespace

bool write_plots(const std::string& out_dir, const std::string& messages_csv, const std::string& allreduce_csv,
                 std::vector<std::string>* written, std::string* err)
{
    std::string scratch;
    if (!err) err = &scratch;
    std::vector<std::pair<Figure, std::string>> figures;  // and the CSV each came from
    if (!messages_csv.empty()) {
        Messages g;
        if (!read_messages(messages_csv, &g, err)) return false;
        for (auto make : {&completion_vs_size, &slowdown_heatmap, &fallback_rate, &auto_vs_best, &model_vs_sim})
            if (std::optional<Figure> f = make(g)) figures.emplace_back(std::move(*f), messages_csv);
    }
    if (!allreduce_csv.empty()) {
        Allreduce a;
        if (!read_allreduce(allreduce_csv, &a, err)) return false;
        if (std::optional<Figure> f = allreduce(a)) figures.emplace_back(std::move(*f), allreduce_csv);
    }
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) {
        *err = out_dir + ": " + ec.message();
        return false;
    }
    for (const auto& [f, source] : figures) {
        fs::path stem = fs::path(out_dir) / f.name;
        if (!write_file(stem.string() + ".dat", f.data, err) || !write_file(stem.string() + ".gp", script(f, source), err) ||
            !run_gnuplot(out_dir, f.name + ".gp", err))
            return false;
        for (const char* ext : {".svg", ".png"}) {
            std::string path = stem.string() + ext;
            if (!fs::exists(path)) {
                *err = "gnuplot wrote no " + path;
                return false;
            }
            if (written) written->push_back(path);
        }
    }
    return true;
}

}  // namespace sdr::exp
