#include <sdr/emu/impairment.hpp>

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

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t Rng::next()
{
    uint64_t r = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
}

ImpairmentVerdict Impairment::decide()
{
    ImpairmentVerdict v;
    if (p_.ge_p_good_bad > 0.0) {
        bad_ = bad_ ? !rng_.chance(p_.ge_p_bad_good) : rng_.chance(p_.ge_p_good_bad);
        if (bad_ && rng_.chance(p_.ge_loss_bad)) v.drop = true;
    }
    if (rng_.chance(p_.loss)) v.drop = true;
    if (v.drop) return v;
    if (rng_.chance(p_.reorder) && p_.reorder_max_ps)
        v.extra_delay_ps = 1 + rng_.next() % p_.reorder_max_ps;
    v.duplicate = rng_.chance(p_.duplicate);
    return v;
}

}  // namespace sdr::emu
