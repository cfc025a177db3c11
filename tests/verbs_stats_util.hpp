// Test helper: a counter of the reports an SDR verbs device writes to SDR_VERBS_STATS_FILE (or prints
// with SDR_VERBS_STATS_AT_EXIT; emu/verbs/README.md, "The engine in the process"), summed over every
// device report in the text (one process may report several devices, or one device twice).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
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

// A lossy run's reports: the link dropped frames and RC sent packets again (both asserted), and
// a line with those counts, the NAKs and the timeouts, after `what`.
inline void expect_loss_recovered(const std::string& reports, const std::string& what)
{
    const uint64_t dropped = verbs_counter(reports, "shaper.dropped");
    const uint64_t resent = verbs_counter(reports, "verbs.retransmits");
    EXPECT_GT(dropped, 0u) << reports;
    EXPECT_GT(resent, 0u) << reports;
    std::printf("%s: %llu frames dropped, %llu packets resent, %llu NAKs, %llu timeouts\n", what.c_str(),
                static_cast<unsigned long long>(dropped), static_cast<unsigned long long>(resent),
                static_cast<unsigned long long>(verbs_counter(reports, "verbs.rx_naks")),
                static_cast<unsigned long long>(verbs_counter(reports, "verbs.timeouts")));
}

}  // namespace sdr::test
