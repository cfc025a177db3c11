// Counter reports of a context (sdr_stats.h) and the SDR_STATS_FILE / SDR_STATS_AT_EXIT dumps.
#pragma once

#include <sdr.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sdr::host {

struct Stat {
    std::string name;
    uint64_t value;
};

// Every counter of the context, in a fixed order (sdr_stats.h names them).
std::vector<Stat> collect_stats(sdr_context* ctx);
// "# sdr-stats device=NAME" and one "name value" line per counter, or, for a device that keeps
// none, "# counters not available on KIND:".
std::string format_stats(sdr_context* ctx);

// The dumps the environment asks for (no-ops without SDR_STATS_FILE / SDR_STATS_AT_EXIT).
void stats_context_opened(sdr_context* ctx);
void stats_context_closing(sdr_context* ctx);

}  // namespace sdr::host
