#include <sdr/emu/rng.hpp>

namespace sdr::emu {

static uint64_t splitmix64(uint64_t& x)
{
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

Rng::Rng(uint64_t seed)
{
    for (auto& w : s_) w = splitmix64(seed);  // never all-zero
}

}  // namespace sdr::emu
