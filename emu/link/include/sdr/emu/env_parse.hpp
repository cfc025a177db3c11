// Environment-variable parsing shared by FabricParams::from_env and RtParams::from_env.
#pragma once

#include <sdr/emu/impairment.hpp>

#include <cstdint>
#include <string>

namespace sdr::emu {

// A number in [lo, hi]; false + *err naming the variable otherwise.
[[nodiscard]] bool parse_double(const char* name, const char* s, double lo, double hi, double* out, std::string* err);
// "a,b[,c]" → up to three fields; returns how many there were.
int split3(const char* s, std::string parts[3]);
// PREFIX + LOSS, DUP, CE_MARK, REORDER ("probability,max_delay_us"), BURST ("p_good_bad,p_bad_good[,loss_bad]").
[[nodiscard]] bool impairment_from_env(const std::string& prefix, ImpairmentParams* imp, std::string* err);
// An unsigned integer variable, if set.
[[nodiscard]] bool u64_from_env(const char* name, uint64_t* out, std::string* err);

}  // namespace sdr::emu
