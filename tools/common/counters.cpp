#include "common/counters.hpp"

namespace sdr::tools {

std::string counters_unavailable(const std::string& device)
{
    const size_t colon = device.find(':');
    return "counters not available on " + (colon == std::string::npos ? device : device.substr(0, colon + 1));
}

}  // namespace sdr::tools
