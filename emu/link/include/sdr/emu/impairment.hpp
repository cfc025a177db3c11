// The link impairment stage: decides, per packet, drop / duplicate / extra delay.
// Shared by the simulator's links and the real-time ports, so both lose packets the
// same way from the same seed. Deterministic: one xoshiro256** stream per link.
#pragma once

#include <sdr/emu/rng.hpp>

#include <cstdint>

namespace sdr::emu {

struct ImpairmentParams {
    double loss = 0.0;            // i.i.d. drop probability per packet
    // Gilbert-Elliott burst loss (enabled when ge_p_good_bad > 0): per packet, a good state
    // moves to bad with p_good_bad, bad back to good with p_bad_good; in bad state packets
    // drop with ge_loss_bad (on top of nothing: the i.i.d. loss above applies in both).
    double ge_p_good_bad = 0.0;
    double ge_p_bad_good = 0.0;
    double ge_loss_bad = 1.0;
    double reorder = 0.0;         // probability a packet is held back by extra delay
    uint64_t reorder_max_ps = 0;  // extra delay uniform in (0, reorder_max_ps]
    double duplicate = 0.0;       // probability a packet is delivered twice
    // Probability a packet is marked CE (ECN) instead of anything else happening to it: a
    // congested switch's mark without the switch, to drive DCQCN. Only ECT packets change.
    double ce_mark = 0.0;
    uint64_t seed = 1;
};

struct ImpairmentVerdict {
    bool drop = false;
    bool burst = false;  // the drop came from the Gilbert-Elliott bad state (else: i.i.d. loss)
    bool duplicate = false;
    bool ce = false;  // mark CE (wire::mark_ce on a frame, PacketMeta::ecn without one)
    uint64_t extra_delay_ps = 0;
};

class Impairment {
public:
    explicit Impairment(const ImpairmentParams& p);
    ImpairmentVerdict decide()  // inline: every packet of a lossy link asks
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
        v.ce = chance(t_ce_);  // last, and no draw when off: runs without it replay unchanged
        return v;
    }
    // No probability is set: every verdict is "deliver as is" and draws nothing from the
    // stream, so a caller may skip decide() and the run stays the same.
    bool none() const { return none_; }
    const ImpairmentParams& params() const { return p_; }
    // Start the random stream afresh, as if created with this seed.
    void reseed(uint64_t seed)
    {
        rng_ = Rng(seed);
        bad_ = false;
    }

private:
    // Rng::chance(p) without a float per packet: uniform() < p exactly when the top 53 bits
    // of the draw are below ceil(p * 2^53); 0 when p <= 0 (no draw).
    static uint64_t threshold(double p);
    bool chance(uint64_t t) { return t && (rng_.next() >> 11) < t; }
    ImpairmentParams p_;
    Rng rng_;
    bool bad_ = false;
    bool none_;
    uint64_t t_loss_, t_good_bad_, t_bad_good_, t_loss_bad_, t_reorder_, t_duplicate_, t_ce_;
};

}  // namespace sdr::emu
