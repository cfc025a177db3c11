#include "json.hpp"

#include <cmath>
#include <string>

namespace sdr::tools {

Json json_real(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

void print_json(const Json& j, FILE* f)
{
    // Bytes that are not UTF-8 (a device or file name) print as U+FFFD instead of failing.
    const std::string s = j.dump(-1, ' ', false, Json::error_handler_t::replace);
    std::fprintf(f, "%s\n", s.c_str());
}

}  // namespace sdr::tools
