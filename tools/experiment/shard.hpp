// Sharding a sweep over hosts: which tasks a shard runs, the shard.txt a shard leaves beside its
// CSVs, and the checks a merge makes on a set of shards before it joins their rows.
#pragma once

#include "sweep_options.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sdr::exp {

// The shard (0..count-1) of every task: tasks by cost, largest first (ties: lower index first),
// each to the shard with the least cost so far (ties: lower shard). Depends on the costs and
// count alone, never on timing or jobs, so every shard computes the same assignment.
std::vector<uint32_t> assign_shards(const std::vector<uint64_t>& cost, uint32_t count);

// shard.txt: what a merge needs to know about a shard, written after its CSVs (a directory
// without it holds no finished shard).
struct ShardManifest {
    ShardId id;
    std::vector<std::pair<std::string, std::string>> options;  // grid_options() of the run
    std::vector<size_t> tasks;                                 // the tasks it ran, ascending
    uint64_t samples = 0;
    unsigned jobs = 0;
    double wall_s = 0;
};

inline constexpr const char* kManifestName = "shard.txt";

bool write_manifest(const std::string& dir, const ShardManifest& m, std::string* err);
// false + *err naming the file (and line) when it is absent or malformed.
bool read_manifest(const std::string& dir, ShardManifest* m, std::string* err);

// A set of shards a merge accepts: the same options (else the first that differs and the
// directories that disagree), the same shard count, every index 0..N-1 exactly once (else the
// missing ones or the directories holding the same index). false + *err otherwise.
bool check_shard_set(const std::vector<std::string>& dirs, const std::vector<ShardManifest>& m, std::string* err);

}  // namespace sdr::exp
