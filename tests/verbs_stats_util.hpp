// Test helper: a counter of the reports an SDR verbs device writes to SDR_VERBS_STATS_FILE (or prints
// with SDR_VERBS_STATS_AT_EXIT; emu/verbs/README.md, "The engine in the process"), summed over every
// device report in the text (one process may report several devices, or one device twice).
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

namespace sdr::test {

inline uint64_t verbs_counter(const std::string& reports, const std::string& name)
{
    uint64_t sum = 0;
    std::istringstream lines(reports);
    for (std::string line; std::getline(lines, line);)
        if (line.rfind(name + " ", 0) == 0) sum += std::stoull(line.substr(name.size() + 1));
    return sum;
}

}  // namespace sdr::test
