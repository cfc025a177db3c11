// Erasure codes of the EC scheme (arXiv 2505.05366): a submessage of k data chunks gets m parity
// chunks. XOR: parity i is the XOR of the data chunks j with j mod m == i, so each group of
// about k/m + 1 chunks survives one loss. MDS: Reed-Solomon over GF(2^8) with a Cauchy matrix
// (ISA-L), any m losses among the k + m chunks are repaired. Pure computation, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sdr::rel {

enum class CodeKind : uint8_t { Xor, Mds };

class Codec {
public:
    // false + err if ISA-L (or XOR) cannot do (k, m): MDS needs 1 <= m, 1 <= k, k + m <= 255;
    // XOR needs 1 <= m <= k <= 255.
    [[nodiscard]] static bool valid(CodeKind kind, uint32_t k, uint32_t m, std::string* err);
    Codec(CodeKind kind, uint32_t k, uint32_t m);

    CodeKind kind() const { return kind_; }
    uint32_t k() const { return k_; }
    uint32_t m() const { return m_; }

    // parity[i] (len bytes each, i < m) from data[j] (j < k). A submessage with fewer than k
    // data chunks passes zero-filled chunks for the rest (the code is over k fixed positions).
    void encode(const uint8_t* const* data, uint8_t* const* parity, size_t len);

    // present: k + m flags (data 0..k-1, then parity 0..m-1). True if the missing data chunks can
    // be rebuilt from the present ones.
    bool decodable(const bool* present) const;
    // Rebuild every missing data chunk in place: frag[0..k+m) point at data then parity chunks
    // (missing ones are written). false if not decodable.
    [[nodiscard]] bool decode(const bool* present, uint8_t* const* frag, size_t len);

private:
    CodeKind kind_;
    uint32_t k_, m_;
    std::vector<uint8_t> matrix_;   // (k + m) x k encode matrix (MDS)
    std::vector<uint8_t> tables_;   // ec_init_tables of the parity rows
    std::vector<uint8_t> scratch_;  // decode matrices and tables
};

// XOR of n sources into dst (ISA-L xor_gen where alignment allows).
void xor_into(uint8_t* dst, const uint8_t* const* src, size_t n, size_t len);

}  // namespace sdr::rel
