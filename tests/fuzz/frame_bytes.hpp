// Big-endian fields of a RoCEv2 frame, and the IPv4 header checksum, for the targets that repair
// the frames they are given (fuzz_nic_rx, fuzz_verbs_rx) so that mutations reach the checks behind
// the lengths, checksums and keys random bytes rarely get right.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sdr::fuzz {

inline constexpr size_t kIp = 14, kUdp = 34, kBth = 42, kExt = 54;  // header offsets in a frame

inline uint32_t get24(const uint8_t* p) { return uint32_t{p[0]} << 16 | uint32_t{p[1]} << 8 | p[2]; }
inline uint32_t get32(const uint8_t* p) { return get24(p) << 8 | p[3]; }
inline uint64_t get64(const uint8_t* p) { return uint64_t{get32(p)} << 32 | get32(p + 4); }
inline void put16(uint8_t* p, uint32_t v)
{
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}
inline void put24(uint8_t* p, uint32_t v)
{
    p[0] = static_cast<uint8_t>(v >> 16);
    put16(p + 1, v);
}
inline void put32(uint8_t* p, uint32_t v)
{
    put16(p, v >> 16);
    put16(p + 2, v);
}
inline void put64(uint8_t* p, uint64_t v)
{
    put32(p, static_cast<uint32_t>(v >> 32));
    put32(p + 4, static_cast<uint32_t>(v));
}

// The IPv4 header checksum of a frame of at least kUdp bytes, recomputed in place.
inline void fix_ipv4_checksum(uint8_t* f)
{
    put16(f + kIp + 10, 0);
    uint32_t sum = 0;
    for (size_t i = 0; i < 20; i += 2) sum += uint32_t{f[kIp + i]} << 8 | f[kIp + i + 1];
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    put16(f + kIp + 10, ~sum & 0xFFFF);
}

}  // namespace sdr::fuzz
