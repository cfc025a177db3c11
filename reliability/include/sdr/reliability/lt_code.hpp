// A small LT code (Luby, "LT codes", FOCS 2002) over the k data chunks of a submessage: the data
// chunks travel as themselves, repair symbol i is the XOR of d data chunks, d drawn from the
// robust soliton distribution and the chunks uniformly without repetition, both from a PRNG
// seeded by (submessage, i) alone, so sender and receiver derive the same graph with no
// payload and a repair symbol can be made on demand for any i (rateless). Decoding is peeling:
// a repair symbol with one unknown neighbour left yields it, which may free others. Pure
// computation, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sdr::rel {

class LtCode {
public:
    // Robust soliton parameters: c scales the spike R = c·ln(k/delta)·√k, delta bounds the
    // probability that decoding fails after k + O(√k·ln²(k/delta)) symbols (Luby 2002, section 4).
    static constexpr double kC = 0.1, kDelta = 0.5;
    explicit LtCode(uint32_t k, double c = kC, double delta = kDelta);

    uint32_t k() const { return k_; }
    // The data chunks repair symbol `esi` of submessage `sub` is the XOR of (ascending).
    void neighbours(uint32_t sub, uint32_t esi, std::vector<uint32_t>* out) const;

    // Repair symbols [from, from + count) of submessage `sub` into parity[0..count).
    void encode(uint32_t sub, const uint8_t* const* data, uint8_t* const* parity, uint32_t from, uint32_t count,
                size_t len) const;
    // present: k data flags, then `repair` flags for repair symbols 0..repair-1. True if peeling
    // recovers every missing data chunk.
    [[nodiscard]] bool decodable(uint32_t sub, const bool* present, uint32_t repair) const;
    // Peels in place: frag[0..k) the data chunks (missing ones are written), frag[k + i] repair
    // symbol i. false (data partly written) if peeling stalls.
    [[nodiscard]] bool decode(uint32_t sub, const bool* present, uint32_t repair, uint8_t* const* frag, size_t len) const;

private:
    // The peeling schedule: (recovered chunk, repair symbol it comes from) in order, or false.
    bool peel(uint32_t sub, const bool* present, uint32_t repair,
              std::vector<std::pair<uint32_t, uint32_t>>* order) const;
    uint32_t k_;
    std::vector<double> cdf_;  // P(degree <= d), d = 1..k
};

}  // namespace sdr::rel
