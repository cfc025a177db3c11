// Helpers the two engines share (internal to the reliability room).
#pragma once

#include <sdr/reliability/engine.hpp>

namespace sdr::rel {

double wire_ns_per_byte(const Config& c, const Geometry& g);
uint64_t message_timeout_ns(const Config& c, uint64_t rto_ns, double ns_per_byte, uint64_t bytes);

inline bool bit(const uint8_t* b, uint32_t i) { return (b[i >> 3] >> (i & 7)) & 1; }
inline void set_bit(std::vector<uint8_t>& b, uint32_t i) { b[i >> 3] |= static_cast<uint8_t>(1u << (i & 7)); }

}  // namespace sdr::rel
