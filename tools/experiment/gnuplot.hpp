// The gnuplot vocabulary the figures are written in (labels, colours, log axes, data blocks),
// and running gnuplot on a figure's script.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sdr::exp::plot {

bool valid(double v);  // finite and positive: a point a log axis can draw
std::string num(double v, int digits = 6);
std::string gp_string(const std::string& s);
std::string size_label(uint64_t bytes);
std::string drop_label(double p);
std::map<std::string, std::string> series_colours(const std::vector<std::string>& series);
std::string ramp(size_t i, size_t n);
std::string series_style(size_t j);
std::string key_entry(const std::string& style, const std::string& title);
std::string plot(const std::vector<std::string>& elements);
std::pair<size_t, size_t> layout(size_t n);

struct Cell {
    double lo, hi;
};

std::vector<Cell> log_cells(const std::vector<double>& v);
std::string tic_list(const std::vector<double>& at, const std::vector<std::string>& text, size_t labels);
std::string log_axis(const std::string& axis, const std::vector<double>& at, const std::vector<std::string>& text,
                     const std::string& label, size_t labels);
std::string size_axis(const std::string& axis, const std::vector<uint64_t>& sizes);
std::string drop_axis(const std::string& axis, const std::vector<double>& drops);
std::string join(const std::vector<std::string>& v, const std::string& sep);

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

// The script around f's commands, naming `source` (the CSV) in its header.
std::string script(const Figure& f, const std::string& source);
bool write_file(const std::filesystem::path& path, const std::string& text, std::string* err);
bool run_gnuplot(const std::string& dir, const std::string& script_name, std::string* err);

}  // namespace sdr::exp::plot
