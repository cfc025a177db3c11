// The points of sdr_sweep's CSV files (messages.csv, allreduce.csv) as the figures read them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace sdr::exp::plot {

std::string series_label(const std::string& scheme, uint64_t k, uint64_t m);
std::string scheme_of(const std::string& series);
bool series_before(const std::string& a, const std::string& b);
// A fixed scheme auto chooses among (a registered one with a model): the candidates of "the
// best fixed scheme" auto is held against.
bool auto_candidate(const std::string& scheme);

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

// false + *err (the file, its line and the column) when a CSV is missing or malformed.
bool read_messages(const std::string& path, Messages* g, std::string* err);
bool read_allreduce(const std::string& path, Allreduce* a, std::string* err);

}  // namespace sdr::exp::plot
