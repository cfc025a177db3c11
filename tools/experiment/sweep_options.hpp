// sdr_sweep's command line: the grid (sizes, drops, schemes, samples, Allreduce nodes), the link,
// the seed, and how a run is carried out (jobs, output, progress, a shard of the grid, a merge of
// shards). Only the first three decide the numbers; grid_options() names them for shards.
#pragma once

#include "fabric.hpp"
#include "message_run.hpp"

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace sdr::exp {

struct ShardId {
    uint32_t index = 0, count = 1;  // shard `index` of `count` (0 <= index < count)
};

struct SweepOptions {
    uint64_t size_min = 128ull << 10, size_max = 1ull << 30;
    double drop_min = 1e-6, drop_max = 1e-2;
    uint32_t per_decade = 1;
    std::vector<std::string> schemes = {"sr", "sr-nack", "ec-xor:32,8", "ec-mds:32,8", "auto"};
    uint32_t samples = 1000, min_samples = 100;
    uint64_t bytes_per_point = 128ull << 30;  // large messages get fewer samples: equal cost per point
    uint32_t nodes_min = 4, nodes_max = 8;
    uint64_t ar_bytes = 64ull << 20;
    uint32_t ar_samples = 200;
    std::vector<std::string> ar_schemes = {"sr", "ec-mds:32,8"};
    bool messages = true, allreduce = true;
    bool dpa = false;  // the DPA cost-model experiment: only with --only dpa
    bool fabric = false;  // the congestion-loss experiment over two datacenters: only with --only fabric
    FabricSweep fab;      // its grid: --utilisations, --fabric-sizes, --long-haul-gbps; --samples,
                          // --schemes, --bw-gbps (DC links), --rtt-ms, --seed, ... where given
    LinkSetup link;
    double alpha = 2;
    uint64_t seed = 1;

    unsigned jobs = 0;  // 0: one per core this process may run on
    std::string out = "sdr_sweep_out";
    bool plots = true, summary = true, progress = true;
    bool sharded = false;  // --shard: run only shard's share of the grid
    ShardId shard;
    std::vector<std::string> merge;  // --merge: join these shard directories instead of simulating
};

// Parses the arguments after the program name. false + *err (what is wrong, without the program
// name) on a bad option or value; *help = true (and true) for -h/--help. A shard defaults to no
// figures and no summary (--plots, --summary ask for them); --merge takes the grid from its
// shards, so grid options beside it are an error.
bool parse_sweep_options(const std::vector<std::string>& args, SweepOptions* o, bool* help, std::string* err);
void print_sweep_usage(FILE* out);

// "I/N" with 0 <= I < N; false + *err otherwise.
bool parse_shard_id(const std::string& text, ShardId* id, std::string* err);

// The options that decide the grid and its numbers, as ("--name", value) pairs that
// parse_sweep_options reads back to the same values: what a shard records and a merge compares.
std::vector<std::pair<std::string, std::string>> grid_options(const SweepOptions& o);

}  // namespace sdr::exp
