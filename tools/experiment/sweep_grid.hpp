// The sweep's grid as a list of tasks, each a point that one worker simulates whole: first the
// Allreduce points (nodes x drop, every --ar-scheme), then the message points (size x drop,
// every --scheme). A task's seed comes from its index, so its rows are the same whichever
// process, job count or shard runs it; the CSVs list tasks in index order.
#pragma once

#include "sweep_options.hpp"

#include <sdr/reliability/config.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace sdr::exp {

struct SweepScheme {
    std::string label;  // sr, sr-nack, ec-xor, ec-mds, auto
    rel::Config cfg;
    bool automatic = false;
};

struct SweepGrid {
    std::vector<uint64_t> sizes;
    std::vector<double> drops;
    std::vector<uint32_t> nodes;
    std::vector<SweepScheme> schemes, ar_schemes;
    uint32_t samples = 1000, min_samples = 100, ar_samples = 200;
    uint64_t bytes_per_point = 0, ar_bytes = 0;
    uint32_t mtu = 4096;

    size_t ar_tasks() const { return nodes.size() * drops.size(); }
    size_t msg_tasks() const { return sizes.size() * drops.size(); }
    size_t tasks() const { return ar_tasks() + msg_tasks(); }
    bool is_allreduce(size_t task) const { return task < ar_tasks(); }
    // Task t < ar_tasks(): Allreduce index t; otherwise message index t - ar_tasks().
    uint32_t task_nodes(size_t t) const { return nodes[t % nodes.size()]; }
    uint64_t task_size(size_t t) const { return sizes[(t - ar_tasks()) % sizes.size()]; }
    double task_drop(size_t t) const
    {
        return is_allreduce(t) ? drops[t / nodes.size()] : drops[(t - ar_tasks()) / sizes.size()];
    }
    // Rows a task writes: one per scheme.
    size_t rows(size_t t) const { return is_allreduce(t) ? ar_schemes.size() : schemes.size(); }
    // The key fields that begin row `row` of task t ("131072,0.001,sr," / "4,4194304,0.001,sr,").
    std::string row_key(size_t t, size_t row) const;

    // Samples per message point and scheme: min(samples, max(min_samples, bytes_per_point / size)).
    uint32_t samples_for(uint64_t size) const;
    // Simulated bytes of a task (the progress bar's unit): a message sample moves its size, an
    // Allreduce sample 2(N-1) segments of bytes/N on each of N links.
    uint64_t work_bytes(size_t t) const;
    // A task's simulation cost in packet-equivalents, for spreading tasks over shards and jobs:
    // per sample its data packets, EC's parity (m/k more), and a fixed 100 for the sample's set-up
    // (measured: about 20 us a sample against 0.2 us a packet); an Allreduce packet weighs more
    // (see cost()). Integer arithmetic, so every host computes the same costs.
    uint64_t cost(size_t t) const;
};

// The grid the options describe; false + *err for a scheme that does not parse.
bool make_grid(const SweepOptions& o, SweepGrid* g, std::string* err);

}  // namespace sdr::exp
