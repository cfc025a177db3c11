// Helpers the two engines share (internal to the reliability room).
#pragma once

#include <sdr/reliability/engine.hpp>

#include <algorithm>

namespace sdr::rel {

// Wire bytes a packet carries beyond its payload: 78 of RoCEv2 headers + ICRC and 24 of
// Ethernet preamble, gap and FCS.
inline constexpr double kPacketOverheadBytes = 102;

double wire_ns_per_byte(const Config& c, const Geometry& g);
uint64_t message_timeout_ns(const Config& c, uint64_t rto_ns, double ns_per_byte, uint64_t bytes);

inline bool bit(const uint8_t* b, uint32_t i) { return (b[i >> 3] >> (i & 7)) & 1; }
inline void set_bit(std::vector<uint8_t>& b, uint32_t i) { b[i >> 3] |= static_cast<uint8_t>(1u << (i & 7)); }

// Chunks held, one bit each in 64-bit words (the same order as the SDR bitmap bytes).
inline bool held(const std::vector<uint64_t>& w, uint32_t i) { return (w[i >> 6] >> (i & 63)) & 1; }
inline void hold(std::vector<uint64_t>& w, uint32_t i) { w[i >> 6] |= 1ull << (i & 63); }

// For each bit of the live bitmap `live` (nbits, bytes as SDR lays them out) that `have` lacks:
// set it in `have` and call f(i). Called on every host event, so the scan over whole words is
// kept to one load, one and-not and one well-predicted branch per 64 chunks; only new bits
// cost more. `full` counts the leading words of `have` that hold every chunk: they cannot gain
// a bit, so the scan starts after them (a message's bitmap fills from the front).
template <class F>
void take_new_bits(const uint8_t* live, uint32_t nbits, std::vector<uint64_t>& have, uint32_t& full, F&& f)
{
    const uint32_t words = (nbits + 63) / 64;
    for (uint32_t w = full; w < words; w++) {
        // The NIC sets bits while we read: atomic acquire loads (a set bit publishes its chunk's
        // payload), little-endian words as the firmware writes them.
        uint64_t v = 0;
        if (w * 64 + 64 <= nbits) {
            v = __atomic_load_n(reinterpret_cast<const uint64_t*>(live) + w, __ATOMIC_ACQUIRE);
        } else {
            for (uint32_t b = 0; b < (nbits - w * 64 + 7) / 8; b++)
                v |= uint64_t{__atomic_load_n(live + size_t{w} * 8 + b, __ATOMIC_ACQUIRE)} << (8 * b);
            v &= (1ull << (nbits - w * 64)) - 1;
        }
        uint64_t fresh = v & ~have[w];
        if (!fresh) [[likely]]
            continue;
        have[w] |= fresh;
        for (; fresh; fresh &= fresh - 1) f(w * 64 + static_cast<uint32_t>(__builtin_ctzll(fresh)));
    }
    while (full < words && have[full] == (full * 64 + 64 <= nbits ? ~0ull : (1ull << (nbits - full * 64)) - 1)) full++;
}

}  // namespace sdr::rel
