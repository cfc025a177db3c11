// What a tool prints for a device that keeps no NIC counters: sdr_stats.h lists none on
// "verbs:" (they are the emulated NIC's), and zeros under an empty heading would read as a NIC
// that saw nothing.
#pragma once

#include <string>

namespace sdr::tools {

// "counters not available on verbs:" for device "verbs:mlx5_0": its kind, the name up to the
// colon (the whole name if it has none).
std::string counters_unavailable(const std::string& device);

}  // namespace sdr::tools
