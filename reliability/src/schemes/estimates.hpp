// What the scheme files share (internal): model candidates and the k, m parity of the paper's
// EC codes.
#pragma once

#include <sdr/reliability/codec.hpp>
#include <sdr/reliability/policy.hpp>
#include <sdr/reliability/scheme.hpp>

namespace sdr::rel {

// SR's mean and p99.9 with the RTO given in RTTs.
inline SchemeEstimate sr_estimate(Scheme s, model::Params p, double rto_rtts)
{
    p.rto_rtts = rto_rtts;
    return {s, 0, 0, model::e_t_sr_s(p) * 1e3, model::t_sr_quantile_s(p, 0.999) * 1e3};
}

// EC's mean (the model's lower bound) and p99.9: with fallback rarer than 1 in 1000 messages
// the lossless time; otherwise a fallback round (FTO wait, NACK, repair: (1 + beta) RTT) is in it.
// The chunks left to SR repair are named by NACKs, so they are repaired after one RTT (as sr-nack).
inline SchemeEstimate ec_estimate(Scheme s, model::Params p, model::Code code)
{
    p.rto_rtts = 1;
    double tail = model::ideal_ec_s(p);
    if (model::p_fallback(p, code) > 1e-3) tail += (1 + p.beta) * p.rtt_ms * 1e-3;
    return {s, p.k, p.m, model::e_t_ec_s(p, code) * 1e3, tail * 1e3};
}

// The paper's codes send all m parity chunks of a submessage with its data.
inline uint32_t m_parity(const Code& c) { return c.m; }

// Codec (ISA-L XOR or Reed-Solomon) behind the Coder hooks; the whole parity at once.
class CodecCoder final : public Coder {
public:
    CodecCoder(CodeKind kind, uint32_t k, uint32_t m) : codec_(kind, k, m) {}
    void encode(uint32_t, const uint8_t* const* data, uint8_t* const* parity, uint32_t, uint32_t, size_t len) override
    {
        codec_.encode(data, parity, len);
    }
    bool decode(uint32_t, const bool* present, uint8_t* const* frag, size_t len) override
    {
        return codec_.decode(present, frag, len);
    }

private:
    Codec codec_;
};

}  // namespace sdr::rel
