// Runs a sweep's tasks on worker processes, one per core: the simulator is one fabric per
// process, so parallelism is by fork. Tasks are handed out one at a time (the costs of points
// differ by orders of magnitude); a worker writes lines back, and "+N" lines count work units for
// the progress bar. The parent collects every other line per task, in task order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sdr::exp {

// Called in a worker for task `index`; emit(line) sends one line (no '\n') to the parent,
// tick(n) reports n more units of work done (the caller chooses the unit).
using TaskFn = std::function<void(size_t index, const std::function<void(const std::string&)>& emit,
                                  const std::function<void(uint64_t)>& tick)>;

struct PoolResult {
    bool ok = true;
    std::string error;                          // a worker that died, and how
    std::vector<std::vector<std::string>> lines;  // per task
};

// on_progress(units done so far) is called in the parent as ticks arrive.
PoolResult run_pool(size_t tasks, unsigned jobs, const TaskFn& fn, const std::function<void(uint64_t)>& on_progress);

}  // namespace sdr::exp
