#include "plots.hpp"

#include "figures.hpp"

#include <filesystem>
#include <optional>

namespace sdr::exp {

namespace fs = std::filesystem;
using namespace plot;

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
