#include "shard.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

namespace sdr::exp {

namespace {

constexpr int kFormat = 1;

std::string shard_name(const ShardId& id) { return std::to_string(id.index) + "/" + std::to_string(id.count); }

}  // namespace

std::vector<uint32_t> assign_shards(const std::vector<uint64_t>& cost, uint32_t count)
{
    std::vector<size_t> order(cost.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
    std::vector<uint64_t> load(count, 0);
    std::vector<uint32_t> shard(cost.size(), 0);
    for (size_t t : order) {
        uint32_t least = static_cast<uint32_t>(std::min_element(load.begin(), load.end()) - load.begin());
        shard[t] = least;
        load[least] += cost[t];
    }
    return shard;
}

bool write_manifest(const std::string& dir, const ShardManifest& m, std::string* err)
{
    const std::string path = dir + "/" + kManifestName, tmp = path + ".tmp";
    {
        std::ofstream f(tmp);
        f << "# sdr_sweep shard: sdr_sweep --merge reads this beside the shard's CSVs\n";
        f << "format " << kFormat << "\n";
        f << "shard " << shard_name(m.id) << "\n";
        for (const auto& [name, value] : m.options) f << "option " << name << " " << value << "\n";
        f << "tasks";
        for (size_t t : m.tasks) f << " " << t;
        f << "\nsamples " << m.samples << "\njobs " << m.jobs << "\n";
        char wall[32];
        std::snprintf(wall, sizeof wall, "%.3f", m.wall_s);
        f << "wall_s " << wall << "\n";
        if (!f) return *err = "cannot write " + tmp, false;
    }
    // Renamed into place last: a shard cut short leaves no shard.txt, and a merge says so.
    if (std::rename(tmp.c_str(), path.c_str()) != 0) return *err = "cannot rename " + tmp + " to " + path, false;
    return true;
}

bool read_manifest(const std::string& dir, ShardManifest* out, std::string* err)
{
    const std::string path = dir + "/" + kManifestName;
    std::ifstream f(path);
    if (!f) return *err = path + ": cannot read (not a finished sdr_sweep --shard directory?)", false;
    ShardManifest m;
    bool format = false, shard = false, tasks = false;
    std::string line;
    for (int n = 1; std::getline(f, line); n++) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream in(line);
        std::string key;
        in >> key;
        auto bad = [&](const std::string& what) { return *err = path + ":" + std::to_string(n) + ": " + what, false; };
        if (key == "format") {
            int v = 0;
            if (!(in >> v) || v != kFormat)
                return bad("format " + line.substr(7) + ", this sdr_sweep reads format " + std::to_string(kFormat));
            format = true;
        } else if (key == "shard") {
            std::string v, e;
            in >> v;
            if (!parse_shard_id(v, &m.id, &e)) return bad(e);
            shard = true;
        } else if (key == "option") {
            std::string name, value;
            in >> name;
            std::getline(in >> std::ws, value);
            if (name.rfind("--", 0) != 0) return bad("expected 'option --NAME VALUE'");
            m.options.emplace_back(name, value);
        } else if (key == "tasks") {
            for (size_t t; in >> t;) m.tasks.push_back(t);
            if (!in.eof()) return bad("task indices are numbers");
            tasks = true;
        } else if (key == "samples") in >> m.samples;
        else if (key == "jobs") in >> m.jobs;
        else if (key == "wall_s") in >> m.wall_s;
        else return bad("unknown line '" + key + "'");
    }
    if (!format || !shard || !tasks) return *err = path + ": incomplete (needs format, shard and tasks lines)", false;
    *out = std::move(m);
    return true;
}

bool check_shard_set(const std::vector<std::string>& dirs, const std::vector<ShardManifest>& m, std::string* err)
{
    if (m.empty()) return *err = "no shards to merge", false;
    // Options: every shard against the first.
    std::map<std::string, std::string> first(m[0].options.begin(), m[0].options.end());
    for (size_t i = 1; i < m.size(); i++) {
        std::map<std::string, std::string> mine(m[i].options.begin(), m[i].options.end());
        for (const auto& [name, value] : first) {
            auto it = mine.find(name);
            std::string theirs = it == mine.end() ? "(not recorded)" : it->second;
            if (theirs != value)
                return *err = "the shards are of different sweeps: " + name + " is " + value + " in " + dirs[0] + " but " +
                              theirs + " in " + dirs[i],
                       false;
        }
        for (const auto& [name, value] : mine)
            if (!first.count(name))
                return *err = "the shards are of different sweeps: " + name + " is " + value + " in " + dirs[i] +
                              " but not recorded in " + dirs[0],
                       false;
    }
    const uint32_t n = m[0].id.count;
    for (size_t i = 1; i < m.size(); i++)
        if (m[i].id.count != n)
            return *err = "the shards split the grid differently: " + dirs[0] + " is shard " + shard_name(m[0].id) + ", " +
                          dirs[i] + " is shard " + shard_name(m[i].id),
                   false;
    std::vector<long> holder(n, -1);
    for (size_t i = 0; i < m.size(); i++) {
        long& h = holder[m[i].id.index];
        if (h >= 0)
            return *err = "shard " + shard_name(m[i].id) + " given twice: " + dirs[static_cast<size_t>(h)] + " and " + dirs[i],
                   false;
        h = static_cast<long>(i);
    }
    std::string missing;
    for (uint32_t s = 0; s < n; s++)
        if (holder[s] < 0) missing += (missing.empty() ? "" : ", ") + shard_name({s, n});
    if (!missing.empty()) return *err = "incomplete set of shards: missing " + missing, false;
    return true;
}

}  // namespace sdr::exp
