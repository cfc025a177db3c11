// The project's one pseudo-random generator: link impairments draw from it per packet, and
// the NIC's identifiers (ids.hpp) from a seeded one, so a whole run replays from its seeds.
#pragma once

#include <cstdint>

namespace sdr::emu {

// xoshiro256** (Blackman & Vigna): fast, good quality, and its state is four words.
class Rng {
public:
    explicit Rng(uint64_t seed);
    uint64_t next()  // xoshiro256**; inline: a lossy link draws for every packet
    {
        const uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return r;
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0,1)
    bool chance(double p) { return p > 0.0 && uniform() < p; }

private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t s_[4];
};

}  // namespace sdr::emu
