#include <sdr/emu/impairment.hpp>

#include <cmath>

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

uint64_t Impairment::threshold(double p)
{
    if (!(p > 0.0)) return 0;
    if (p >= 1.0) return 1ull << 53;
    return static_cast<uint64_t>(std::ceil(p * 0x1p53));
}

Impairment::Impairment(const ImpairmentParams& p)
    : p_(p), rng_(p.seed), t_loss_(threshold(p.loss)), t_good_bad_(threshold(p.ge_p_good_bad)),
      t_bad_good_(threshold(p.ge_p_bad_good)), t_loss_bad_(threshold(p.ge_loss_bad)),
      t_reorder_(threshold(p.reorder)), t_duplicate_(threshold(p.duplicate))
{
    none_ = !t_loss_ && !t_good_bad_ && !t_reorder_ && !t_duplicate_;
}

ImpairmentVerdict Impairment::decide()
{
    ImpairmentVerdict v;
    if (t_good_bad_) {
        bad_ = bad_ ? !chance(t_bad_good_) : chance(t_good_bad_);
        if (bad_ && chance(t_loss_bad_)) v.drop = v.burst = true;
    }
    // Drawn even after a burst drop, so a run's random stream does not depend on the state.
    if (chance(t_loss_)) v.drop = true;
    if (v.drop) return v;
    if (chance(t_reorder_) && p_.reorder_max_ps) v.extra_delay_ps = 1 + rng_.next() % p_.reorder_max_ps;
    v.duplicate = chance(t_duplicate_);
    return v;
}

}  // namespace sdr::emu
