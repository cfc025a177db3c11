// The unfilled operation of the backend seam (device.hpp): what every operation a backend does
// not override records, as rdma-core's dummy ops do.
#include <sdr/host/device.hpp>

namespace sdr::host {

void Device::unfilled(const char* op) const
{
    failure_ = "the '" + backend_ + "' backend of " + name_ + " does not provide " + op;
}

std::string Device::take_failure()
{
    std::string s;
    s.swap(failure_);
    return s;
}

}  // namespace sdr::host
