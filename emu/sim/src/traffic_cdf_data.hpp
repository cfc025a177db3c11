// The built-in flow-size distributions: the text of emu/sim/data/*.cdf, compiled in by CMake
// (traffic_cdf_data.cpp.in), so a program needs no data path, installed or not.
#pragma once

#include <cstddef>

namespace sdr::emu::traffic_data {

struct BuiltinCdf {
    const char* name;  // the file's name without .cdf
    const char* text;  // the file, as FlowSizeCdf::parse reads it
};
extern const BuiltinCdf kCdfs[];
extern const size_t kNumCdfs;

}  // namespace sdr::emu::traffic_data
