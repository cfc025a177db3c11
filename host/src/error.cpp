#include "internal.hpp"

namespace {
thread_local std::string last_error;
}

namespace sdr::host {

int set_error(const std::string& msg)
{
    last_error = msg;
    return SDR_ERROR;
}

int device_error(Device& dev, const std::string& msg)
{
    const std::string why = dev.take_failure();
    return set_error(why.empty() ? msg : msg + " (" + why + ")");
}

int set_retry(const std::string& msg)
{
    last_error = msg;
    return SDR_RETRY;
}

}  // namespace sdr::host

extern "C" const char* sdr_last_error(void) { return last_error.c_str(); }
