#include <sdr/reliability/ctrl_msg.hpp>
#include <sdr/reliability/scheme.hpp>

#include <cstring>

namespace sdr::rel {

namespace {
template <class T>
void put(uint8_t* p, T v)
{
    for (size_t i = 0; i < sizeof(T); i++) p[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}
template <class T>
T get(const uint8_t* p)
{
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); i++) v |= uint64_t{p[i]} << (8 * i);
    return static_cast<T>(v);
}
}  // namespace

std::vector<uint8_t> encode(const CtrlMsg& m)
{
    const size_t P = m.params.size();
    std::vector<uint8_t> out(kCtrlHeaderBytes + P + (m.nbits + 7) / 8, 0);
    uint8_t* p = out.data();
    p[0] = P ? 2 : 1;
    p[1] = static_cast<uint8_t>(m.type);
    p[2] = m.flags;
    p[3] = static_cast<uint8_t>(m.scheme);
    p[4] = m.k;
    p[5] = m.m;
    put<uint16_t>(p + 6, static_cast<uint16_t>(P));
    put<uint64_t>(p + 8, m.seq);
    put<uint64_t>(p + 16, m.length);
    put<uint32_t>(p + 24, m.base);
    put<uint32_t>(p + 28, m.nbits);
    put<uint32_t>(p + 32, m.newest);
    put<uint32_t>(p + 36, m.ack_delay_us);
    put<uint32_t>(p + 40, m.from);
    put<uint32_t>(p + 44, m.to);
    if (P) std::memcpy(p + kCtrlHeaderBytes, m.params.data(), P);
    if (m.nbits) std::memcpy(p + kCtrlHeaderBytes + P, m.bits.data(), (m.nbits + 7) / 8);
    return out;
}

bool decode(const uint8_t* p, size_t len, CtrlMsg* out)
{
    if (len < kCtrlHeaderBytes || (p[0] != 1 && p[0] != 2) || p[1] < 1 || p[1] > 5 || !find_scheme(p[3])) return false;
    const size_t P = p[0] == 2 ? get<uint16_t>(p + 6) : 0;  // version 1: bytes 6..7 reserved, ignored
    if (p[0] == 2 && (P == 0 || P > kCtrlMaxParams)) return false;
    CtrlMsg m;
    m.type = static_cast<CtrlType>(p[1]);
    m.flags = p[2];
    m.scheme = static_cast<Scheme>(p[3]);
    m.k = p[4];
    m.m = p[5];
    m.seq = get<uint64_t>(p + 8);
    m.length = get<uint64_t>(p + 16);
    m.base = get<uint32_t>(p + 24);
    m.nbits = get<uint32_t>(p + 28);
    m.newest = get<uint32_t>(p + 32);
    m.ack_delay_us = get<uint32_t>(p + 36);
    m.from = get<uint32_t>(p + 40);
    m.to = get<uint32_t>(p + 44);
    if (len != kCtrlHeaderBytes + P + (uint64_t{m.nbits} + 7) / 8) return false;
    m.params.assign(p + kCtrlHeaderBytes, p + kCtrlHeaderBytes + P);
    m.bits.assign(p + kCtrlHeaderBytes + P, p + len);
    *out = std::move(m);
    return true;
}

}  // namespace sdr::rel
