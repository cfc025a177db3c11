// sdr-stat: prints the counters a libsdr process (sdr_stats.h) dumps with SDR_STATS_FILE, or a
// program on SDR's verbs device (emu/verbs/README.md, "The engine in the process") with
// SDR_VERBS_STATS_FILE, in the style of `rdma statistic`: one line per device and group, "name
// value" pairs. With -i it prints again every interval, each value followed by its rate since
// the previous print.
#include "common/counters.hpp"
#include "common/options.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

struct Device {
    std::string name;
    bool closed = false;
    std::vector<std::pair<std::string, uint64_t>> counters;
};

// false if the file cannot be read or is not an sdr-stats file.
bool read_file(const std::string& path, std::vector<Device>* out, std::string* pid)
{
    std::ifstream in(path);
    if (!in) return false;
    std::string line;
    if (!std::getline(in, line) || line.rfind("# sdr-stats pid=", 0) != 0) return false;
    *pid = line.substr(16);
    out->clear();
    while (std::getline(in, line)) {
        if (line.rfind("# sdr-stats device=", 0) == 0) {
            out->push_back({line.substr(19), false, {}});
        } else if (line == "# closed" && !out->empty()) {
            out->back().closed = true;
        } else if (!out->empty() && !line.empty() && line[0] != '#') {
            std::istringstream ls(line);
            std::string name;
            uint64_t v;
            if (ls >> name >> v) out->back().counters.emplace_back(name, v);
        }
    }
    return true;
}

// "port.rx_drop.bad_icrc" -> group "port", name "rx_drop.bad_icrc"; "qp.3.tx_bytes" -> "qp 3", "tx_bytes";
// "switch.pod0.edge1.p2.dropped" -> "switch pod0.edge1.p2", "dropped" (switch names hold dots).
std::pair<std::string, std::string> split(const std::string& full)
{
    size_t dot = full.find('.');
    if (dot == std::string::npos) return {"-", full};
    std::string group = full.substr(0, dot), rest = full.substr(dot + 1);
    if (group == "qp") {
        size_t d2 = rest.find('.');
        if (d2 != std::string::npos) return {"qp " + rest.substr(0, d2), rest.substr(d2 + 1)};
    }
    if (group == "switch") {
        size_t last = rest.rfind('.');
        if (last != std::string::npos) return {"switch " + rest.substr(0, last), rest.substr(last + 1)};
    }
    return {group, rest};
}

void print(const std::vector<Device>& devs, const std::map<std::string, uint64_t>* before, double secs, bool zeros)
{
    for (size_t i = 0; i < devs.size(); i++) {
        const Device& d = devs[i];
        if (d.counters.empty()) {  // a device that keeps none ("verbs:"), not one that counted nothing
            std::printf("%s%s %s\n", d.name.c_str(), d.closed ? " (closed)" : "",
                        sdr::tools::counters_unavailable(d.name).c_str());
            continue;
        }
        std::string line, group;
        auto flush = [&] {
            if (!line.empty()) std::printf("%s %s%s%s\n", d.name.c_str(), group.c_str(), d.closed ? " (closed)" : "", line.c_str());
            line.clear();
        };
        for (const auto& [full, v] : d.counters) {
            auto [g, n] = split(full);
            if (g != group) {
                flush();
                group = g;
            }
            if (!v && !zeros) continue;
            line += " " + n + " " + std::to_string(v);
            if (before) {
                auto it = before->find(std::to_string(i) + " " + full);
                if (it != before->end() && secs > 0)
                    line += " (" + std::to_string(static_cast<uint64_t>((v - it->second) / secs)) + "/s)";
            }
        }
        flush();
    }
}

}  // namespace

int main(int argc, char** argv)
{
    double every = 0;
    bool zeros = false;
    std::string path;
    sdr::tools::ToolApp app("sdr-stat", "Prints the counters of a libsdr process, rdma statistic style.");
    app.add_option("FILE", path,
                   "what a process started with SDR_STATS_FILE=FILE writes (refreshed every SDR_STATS_INTERVAL_MS on "
                   "raw:/xdp: devices, and when a context closes)")
        ->required();
    sdr::tools::add_real(app, "-i", &every, 0, 1e9, "print again every SECONDS, with per-second rates (Ctrl-C ends)", true)
        ->type_name("SECONDS");
    app.add_flag("-z", zeros, "also print counters that are 0");
    sdr::tools::parse_or_exit(app, argc, argv, 2);
    std::vector<Device> devs;
    std::string pid;
    if (!read_file(path, &devs, &pid)) {
        std::fprintf(stderr, "sdr-stat: %s: not readable or not an SDR_STATS_FILE dump\n", path.c_str());
        return 1;
    }
    print(devs, nullptr, 0, zeros);
    auto last = std::chrono::steady_clock::now();
    while (every > 0) {
        std::map<std::string, uint64_t> before;
        for (size_t i = 0; i < devs.size(); i++)
            for (const auto& [n, v] : devs[i].counters) before[std::to_string(i) + " " + n] = v;
        std::this_thread::sleep_for(std::chrono::duration<double>(every));
        if (!read_file(path, &devs, &pid)) continue;
        auto now = std::chrono::steady_clock::now();
        std::printf("--- pid %s\n", pid.c_str());
        print(devs, &before, std::chrono::duration<double>(now - last).count(), zeros);
        std::fflush(stdout);
        last = now;
    }
    return 0;
}
