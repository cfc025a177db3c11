// printf into a std::string: the experiments' table rows and progress lines (up to 1 KiB).
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

namespace sdr::exp {

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
inline std::string fmt(const char* f, ...)
{
    char b[1024];
    va_list ap;
    va_start(ap, f);
    std::vsnprintf(b, sizeof b, f, ap);
    va_end(ap);
    return b;
}

}  // namespace sdr::exp
