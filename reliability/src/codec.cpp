#include <sdr/reliability/codec.hpp>

#include <cstring>

extern "C" {
#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>
}

namespace sdr::rel {

bool Codec::valid(CodeKind kind, uint32_t k, uint32_t m, std::string* err)
{
    if (kind == CodeKind::Mds && (k < 1 || m < 1 || k + m > 255)) {
        *err = "ec-mds needs k >= 1, m >= 1 and k + m <= 255 (ISA-L GF(2^8)), got k=" + std::to_string(k) +
               " m=" + std::to_string(m);
        return false;
    }
    if (kind == CodeKind::Xor && (m < 1 || m > k || k > 255)) {
        *err = "ec-xor needs 1 <= m <= k <= 255, got k=" + std::to_string(k) + " m=" + std::to_string(m);
        return false;
    }
    return true;
}

Codec::Codec(CodeKind kind, uint32_t k, uint32_t m) : kind_(kind), k_(k), m_(m)
{
    if (kind_ != CodeKind::Mds) return;
    matrix_.resize(size_t{k + m} * k);
    // Cauchy: every k x k submatrix is invertible, so any m erasures are repairable
    // (gf_gen_rs_matrix is not MDS for every (k, m)).
    gf_gen_cauchy1_matrix(matrix_.data(), static_cast<int>(k + m), static_cast<int>(k));
    tables_.resize(size_t{32} * k * m);
    ec_init_tables(static_cast<int>(k), static_cast<int>(m), &matrix_[size_t{k} * k], tables_.data());
}

void xor_into(uint8_t* dst, const uint8_t* const* src, size_t n, size_t len)
{
    if (n == 1) {
        std::memcpy(dst, src[0], len);
        return;
    }
    bool aligned = (reinterpret_cast<uintptr_t>(dst) & 31) == 0 && len % 32 == 0 && len <= 0x7FFFFFFF && n < 254;
    for (size_t i = 0; aligned && i < n; i++) aligned = (reinterpret_cast<uintptr_t>(src[i]) & 31) == 0;
    if (aligned) {
        void* v[256];
        for (size_t i = 0; i < n; i++) v[i] = const_cast<uint8_t*>(src[i]);
        v[n] = dst;
        xor_gen(static_cast<int>(n + 1), static_cast<int>(len), v);
        return;
    }
    // Unaligned chunks (user buffers at any offset): 8 bytes at a time through memcpy, which
    // compiles to plain unaligned loads; a byte loop here ran ~25x slower than xor_gen.
    std::memcpy(dst, src[0], len);
    size_t b = 0;
    for (; b + 8 <= len; b += 8) {
        uint64_t acc;
        std::memcpy(&acc, dst + b, 8);
        for (size_t i = 1; i < n; i++) {
            uint64_t v;
            std::memcpy(&v, src[i] + b, 8);
            acc ^= v;
        }
        std::memcpy(dst + b, &acc, 8);
    }
    for (; b < len; b++)
        for (size_t i = 1; i < n; i++) dst[b] ^= src[i][b];
}

void Codec::encode(const uint8_t* const* data, uint8_t* const* parity, size_t len)
{
    if (kind_ == CodeKind::Mds) {
        ec_encode_data(static_cast<int>(len), static_cast<int>(k_), static_cast<int>(m_), tables_.data(),
                       const_cast<uint8_t**>(data), const_cast<uint8_t**>(parity));
        return;
    }
    const uint8_t* group[256];
    for (uint32_t i = 0; i < m_; i++) {
        size_t n = 0;
        for (uint32_t j = i; j < k_; j += m_) group[n++] = data[j];
        xor_into(parity[i], group, n, len);
    }
}

bool Codec::decodable(const bool* present) const
{
    if (kind_ == CodeKind::Mds) {
        uint32_t lost = 0;
        for (uint32_t i = 0; i < k_ + m_; i++) lost += !present[i];
        return lost <= m_;
    }
    for (uint32_t i = 0; i < m_; i++) {  // each XOR group survives one loss
        uint32_t lost = !present[k_ + i];
        for (uint32_t j = i; j < k_; j += m_) lost += !present[j];
        if (lost > 1) return false;
    }
    return true;
}

bool Codec::decode(const bool* present, uint8_t* const* frag, size_t len)
{
    if (!decodable(present)) return false;
    if (kind_ == CodeKind::Xor) {
        const uint8_t* group[256];
        for (uint32_t i = 0; i < m_; i++) {
            int32_t miss = -1;
            size_t n = 0;
            for (uint32_t j = i; j < k_; j += m_) {
                if (present[j]) group[n++] = frag[j];
                else miss = static_cast<int32_t>(j);
            }
            if (miss < 0) continue;
            group[n++] = frag[k_ + i];
            xor_into(frag[miss], group, n, len);
        }
        return true;
    }
    // Rows of the first k surviving fragments form B; B^-1 maps survivors back to data, and
    // the rows of B^-1 for the missing data chunks are the decode matrix.
    const int k = static_cast<int>(k_);
    scratch_.resize(size_t{3} * k * k + size_t{32} * k * m_);
    uint8_t* b = scratch_.data();
    uint8_t* inv = b + k * k;
    uint8_t* rows = inv + k * k;
    uint8_t* tbls = rows + k * k;
    const uint8_t* src[256];
    uint8_t* out[256];
    int nsrc = 0, nmiss = 0;
    for (uint32_t i = 0; i < k_ + m_ && nsrc < k; i++)
        if (present[i]) {
            std::memcpy(b + nsrc * k, &matrix_[size_t{i} * k_], k_);
            src[nsrc++] = frag[i];
        }
    if (gf_invert_matrix(b, inv, k) != 0) return false;  // cannot happen for a Cauchy matrix
    for (uint32_t j = 0; j < k_; j++)
        if (!present[j]) {
            std::memcpy(rows + nmiss * k, inv + j * k, k_);
            out[nmiss++] = frag[j];
        }
    if (nmiss == 0) return true;
    ec_init_tables(k, nmiss, rows, tbls);
    ec_encode_data(static_cast<int>(len), k, nmiss, tbls, const_cast<uint8_t**>(src), out);
    return true;
}

}  // namespace sdr::rel
