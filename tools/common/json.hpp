// The JSON every SDR tool prints (--json): built as an nlohmann::ordered_json, so strings are
// escaped and members keep the order a tool inserts them in; printed compact, one line.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>

namespace sdr::tools {

using Json = nlohmann::ordered_json;

// JSON has no infinity or NaN: a value without bound (a hopeless link's expectation) is null.
Json json_real(double v);
// The object on one line, then a newline.
void print_json(const Json& j, FILE* f = stdout);

}  // namespace sdr::tools
