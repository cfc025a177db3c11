// Flow-size CDFs (traffic.hpp): our text format, the built-in distributions, inverse-transform
// sampling with linear interpolation between points.
#include <sdr/emu/traffic.hpp>

#include "traffic_cdf_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace sdr::emu {

namespace {

std::string_view trim(std::string_view s)
{
    const size_t b = s.find_first_not_of(" \t\r");
    if (b == std::string_view::npos) return {};
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// A finite number, and nothing after it but blanks; *rest is what follows.
bool number(std::string_view s, double* v, std::string_view* rest)
{
    s = trim(s);
    std::string tok(s.substr(0, s.find_first_of(" \t")));
    if (tok.empty()) return false;
    char* end = nullptr;
    *v = std::strtod(tok.c_str(), &end);
    if (end != tok.c_str() + tok.size() || !std::isfinite(*v)) return false;
    *rest = s.substr(tok.size());
    return true;
}

std::string num(double v)
{
    std::ostringstream o;
    o << v;
    return o.str();
}

}  // namespace

bool FlowSizeCdf::parse(std::string_view text, FlowSizeCdf* out, std::string* err)
{
    std::vector<Point> pts;
    size_t line_no = 0;
    auto fail = [&](const std::string& what) {
        *err = "line " + std::to_string(line_no) + ": " + what;
        return false;
    };
    while (!text.empty()) {
        line_no++;
        const size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        line = trim(line.substr(0, line.find('#')));
        if (line.empty()) continue;
        Point p;
        std::string_view rest;
        if (!number(line, &p.bytes, &rest) || !number(rest, &p.p, &rest) || !trim(rest).empty())
            return fail("expected 'size_bytes cumulative_probability', got '" + std::string(line) + "'");
        if (p.bytes < 0) return fail("size " + num(p.bytes) + " is negative");
        if (p.p < 0 || p.p > 1)
            return fail("probability " + num(p.p) + " outside [0, 1]" + (p.p > 1 && p.p <= 100 ? " (a percentage?)" : ""));
        if (!pts.empty() && p.bytes < pts.back().bytes)
            return fail("size " + num(p.bytes) + " below the previous point's " + num(pts.back().bytes));
        if (!pts.empty() && p.p < pts.back().p)
            return fail("probability " + num(p.p) + " below the previous point's " + num(pts.back().p));
        pts.push_back(p);
    }
    if (pts.empty()) {
        *err = "no points";
        return false;
    }
    // The last point holds all the mass: a file that ends below 1 has lost its tail.
    if (std::abs(pts.back().p - 1) > 1e-9) {
        *err = "the last probability is " + num(pts.back().p) + ", not 1";
        return false;
    }
    pts.back().p = 1;
    out->points_ = std::move(pts);
    out->name_.clear();
    return true;
}

std::vector<std::string> FlowSizeCdf::builtin_names()
{
    std::vector<std::string> v;
    for (size_t i = 0; i < traffic_data::kNumCdfs; i++) v.emplace_back(traffic_data::kCdfs[i].name);
    return v;
}

bool FlowSizeCdf::named(const std::string& name_or_path, FlowSizeCdf* out, std::string* err)
{
    for (size_t i = 0; i < traffic_data::kNumCdfs; i++) {
        if (name_or_path != traffic_data::kCdfs[i].name) continue;
        if (!parse(traffic_data::kCdfs[i].text, out, err)) return false;
        out->name_ = name_or_path;
        return true;
    }
    std::ifstream in(name_or_path);
    if (!in) {
        std::string names;
        for (const std::string& n : builtin_names()) names += (names.empty() ? "" : ", ") + n;
        *err = name_or_path + ": neither a built-in distribution (" + names + ") nor a readable file";
        return false;
    }
    std::ostringstream text;
    text << in.rdbuf();
    if (!parse(text.str(), out, err)) {
        *err = name_or_path + ": " + *err;
        return false;
    }
    out->name_ = name_or_path;
    return true;
}

uint64_t FlowSizeCdf::sample(Rng& rng) const
{
    const double u = rng.uniform();  // [0, 1): the first point with p > u exists, the last has p = 1
    auto it = std::upper_bound(points_.begin(), points_.end(), u, [](double v, const Point& p) { return v < p.p; });
    double x = it->bytes;
    if (it != points_.begin()) {
        const Point& a = *(it - 1);
        x = a.bytes + (it->bytes - a.bytes) * (u - a.p) / (it->p - a.p);  // it->p > u >= a.p
    }
    return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(x)));
}

double FlowSizeCdf::mean_bytes() const
{
    if (points_.empty()) return 0;
    double m = points_[0].bytes * points_[0].p;
    for (size_t i = 1; i < points_.size(); i++)
        m += (points_[i - 1].bytes + points_[i].bytes) / 2 * (points_[i].p - points_[i - 1].p);
    return m;
}

}  // namespace sdr::emu
