#include "gnuplot.hpp"

#include "plot_points.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace sdr::exp::plot {

namespace fs = std::filesystem;

bool valid(double v) { return std::isfinite(v) && v > 0; }

// A value for a .dat file or a script; gnuplot reads NaN as "no point here".
std::string num(double v, int digits)
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



std::string join(const std::vector<std::string>& v, const std::string& sep)
{
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
    return s;
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

}  // namespace sdr::exp::plot
