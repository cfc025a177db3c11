#include "plot_points.hpp"

#include <sdr/reliability/scheme.hpp>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace sdr::exp::plot {

namespace {

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

}  // namespace

// A scheme with its code, as sdr_sweep's `chosen` column spells it: "sr", "ec-mds:32/8".
std::string series_label(const std::string& scheme, uint64_t k, uint64_t m)
{
    return k == 0 && m == 0 ? scheme : scheme + ":" + std::to_string(k) + "/" + std::to_string(m);
}

std::string scheme_of(const std::string& series) { return series.substr(0, series.find(':')); }

bool auto_candidate(const std::string& scheme)
{
    const rel::SchemeOps* o = rel::find_scheme(scheme);
    return o && o->estimate;
}

// The paper's order of schemes, then any other by name: the order of lines and legends.
bool series_before(const std::string& a, const std::string& b)
{
    static const std::array<std::string, 5> order = {"sr", "sr-nack", "ec-xor", "ec-mds", "auto"};
    auto rank = [](const std::string& s) {
        return std::find(order.begin(), order.end(), scheme_of(s)) - order.begin();
    };
    return std::pair(rank(a), a) < std::pair(rank(b), b);
}


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

}  // namespace sdr::exp::plot
