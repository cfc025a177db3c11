// 24-bit packet sequence numbers as serial numbers (IBTA 9.7.1): the one place their arithmetic
// lives, for SDR's RC transport QPs and the verbs engine's UC and RC QPs alike.
#pragma once

#include <cstdint>

namespace sdr::emu::psn {

inline constexpr uint32_t kMask = 0xFFFFFF;
// Half the space: a PSN this far or more past another is behind it (a duplicate).
inline constexpr uint32_t kHalf = 0x800000;

// How far b is past a, modulo 2^24.
constexpr uint32_t diff(uint32_t b, uint32_t a) { return (b - a) & kMask; }
constexpr uint32_t next(uint32_t p) { return (p + 1) & kMask; }
// p lies behind the expected PSN (within half the space): a duplicate, not a gap.
constexpr bool behind(uint32_t p, uint32_t expected) { return diff(p, expected) >= kHalf; }

}  // namespace sdr::emu::psn
