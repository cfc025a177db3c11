// RoCEv2 frame encode/decode and ICRC. See wire.hpp for the contract.
#include <sdr/emu/wire.hpp>

#include <isa-l/crc.h>

#include <cstring>

namespace sdr::emu::wire {
namespace {

// Offsets of each header inside a frame (no VLAN, no IP options).
constexpr size_t kIpOff = kEthBytes;               // 14
constexpr size_t kUdpOff = kIpOff + kIpv4Bytes;    // 34
constexpr size_t kBthOff = kUdpOff + kUdpBytes;    // 42
constexpr size_t kExtOff = kBthOff + kBthBytes;    // 54: RETH or DETH
constexpr size_t kIcrcPrefixBytes = 8 + kIpv4Bytes + kUdpBytes + kBthBytes;  // 48: masked part

constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint8_t kIpProtoUdp = 17;
constexpr uint16_t kIpFlagDf = 0x4000;
constexpr uint16_t kIpFragMask = 0x3FFF;  // MF flag + fragment offset

// Big-endian (network order) loads and stores; compilers turn these into bswap + mov.
inline void put16(uint8_t* p, uint16_t v) { p[0] = uint8_t(v >> 8); p[1] = uint8_t(v); }
inline void put24(uint8_t* p, uint32_t v) { p[0] = uint8_t(v >> 16); p[1] = uint8_t(v >> 8); p[2] = uint8_t(v); }
inline void put32(uint8_t* p, uint32_t v) { put16(p, uint16_t(v >> 16)); put16(p + 2, uint16_t(v)); }
inline void put64(uint8_t* p, uint64_t v) { put32(p, uint32_t(v >> 32)); put32(p + 4, uint32_t(v)); }
inline uint16_t get16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
inline uint32_t get24(const uint8_t* p) { return uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2]; }
inline uint32_t get32(const uint8_t* p) { return uint32_t(get16(p)) << 16 | get16(p + 2); }
inline uint64_t get64(const uint8_t* p) { return uint64_t(get32(p)) << 32 | get32(p + 4); }

// RFC 1071 ones'-complement sum of the 20-byte IPv4 header.
inline uint32_t ipv4_sum(const uint8_t* ip)
{
    uint32_t sum = 0;
    for (size_t i = 0; i < kIpv4Bytes; i += 2) sum += get16(ip + i);
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return sum;
}

// Writes Eth..ImmDt for a payload of payload_len bytes; caller checked cap >= header_bytes.
void put_headers(const Headers& h, size_t hdr, uint32_t payload_len, uint32_t pad, uint8_t* out)
{
    const size_t ip_total = hdr - kEthBytes + payload_len + pad + kIcrcBytes;

    std::memcpy(out, h.dst_mac.data(), 6);
    std::memcpy(out + 6, h.src_mac.data(), 6);
    put16(out + 12, kEtherTypeIpv4);

    uint8_t* ip = out + kIpOff;
    ip[0] = 0x45;  // version 4, IHL 5
    ip[1] = h.ip_tos;
    put16(ip + 2, uint16_t(ip_total));
    put16(ip + 4, h.ip_id);
    put16(ip + 6, kIpFlagDf);  // RoCE packets must not be fragmented
    ip[8] = h.ip_ttl;
    ip[9] = kIpProtoUdp;
    put16(ip + 10, 0);
    put32(ip + 12, h.src_ip);
    put32(ip + 16, h.dst_ip);
    put16(ip + 10, uint16_t(~ipv4_sum(ip)));

    uint8_t* udp = out + kUdpOff;
    put16(udp, h.udp_src_port);
    put16(udp + 2, kRoceUdpPort);
    put16(udp + 4, uint16_t(ip_total - kIpv4Bytes));
    put16(udp + 6, 0);  // no UDP checksum: the ICRC protects the packet

    uint8_t* bth = out + kBthOff;
    bth[0] = h.opcode;
    bth[1] = uint8_t((h.solicited ? 0x80 : 0) | pad << 4);  // MigReq 0, TVer 0
    put16(bth + 2, h.pkey);
    bth[4] = 0;  // resv8a (FECN/BECN in RoCEv2)
    put24(bth + 5, h.dest_qp & 0xFFFFFF);
    bth[8] = h.ack_req ? 0x80 : 0;
    put24(bth + 9, h.psn & 0xFFFFFF);

    uint8_t* ext = out + kExtOff;
    if (has_reth(h.opcode)) {
        put64(ext, h.va);
        put32(ext + 8, h.rkey);
        put32(ext + 12, h.dma_len);
        ext += kRethBytes;
    } else if (has_deth(h.opcode)) {
        put32(ext, h.qkey);
        ext[4] = 0;
        put24(ext + 5, h.src_qp & 0xFFFFFF);
        ext += kDethBytes;
    } else if (has_aeth(h.opcode)) {
        put32(ext, h.aeth);
        ext += kAethBytes;
        if (op::kTable.f[h.opcode] & op::kAtomicEth) put64(ext, h.atomic_orig);  // AtomicAckETH
    } else if (op::kTable.f[h.opcode] & op::kAtomicEth) {
        put64(ext, h.va);
        put32(ext + 8, h.rkey);
        put64(ext + 12, h.swap_add);
        put64(ext + 20, h.compare);
    }
    if (has_imm(h.opcode)) put32(ext, h.imm);
}

}  // namespace

size_t header_bytes(uint8_t opcode)
{
    if (opcode == kOpUcWriteOnlyImm) return kWriteImmHeaderBytes;  // SDR's: first, no arithmetic
    if (!(op::kTable.f[opcode] & op::kValid)) return 0;
    const bool atomic = op::kTable.f[opcode] & op::kAtomicEth;
    return kExtOff + (has_reth(opcode) ? kRethBytes : 0) + (has_deth(opcode) ? kDethBytes : 0) +
           (has_aeth(opcode) ? kAethBytes : 0) + (has_imm(opcode) ? kImmBytes : 0) +
           (atomic ? (has_aeth(opcode) ? kAtomicAckEthBytes : kAtomicEthBytes) : 0);
}

size_t frame_bytes(uint8_t opcode, size_t payload, bool pad)
{
    size_t hdr = header_bytes(opcode);
    return hdr ? hdr + payload + (pad ? pad_bytes(payload) : 0) + kIcrcBytes : 0;
}

uint32_t icrc(const uint8_t* frame, size_t len_without_icrc)
{
    if (len_without_icrc < kExtOff) return 0;  // no whole BTH: not a RoCE packet
    // The variant fields (those a router may rewrite) are replaced by ones in a small copy of
    // the headers; ISA-L then continues the same CRC over the invariant rest in one call.
    uint8_t prefix[kIcrcPrefixBytes];
    std::memset(prefix, 0xFF, 8);  // stands in for the LRH that RoCEv2 does not carry
    std::memcpy(prefix + 8, frame + kIpOff, kIcrcPrefixBytes - 8);
    uint8_t* ip = prefix + 8;
    ip[1] = 0xFF;                    // TOS (DSCP/ECN)
    ip[8] = 0xFF;                    // TTL
    ip[10] = ip[11] = 0xFF;          // header checksum
    uint8_t* udp = ip + kIpv4Bytes;
    udp[6] = udp[7] = 0xFF;          // UDP checksum
    udp[kUdpBytes + 4] = 0xFF;       // BTH resv8a
    // crc32_gzip_refl is the reflected IEEE CRC32 (zlib's crc32): it inverts on entry and exit
    // itself, so seed 0 starts a CRC and a previous result continues one.
    uint32_t crc = crc32_gzip_refl(0, prefix, sizeof prefix);
    return crc32_gzip_refl(crc, frame + kExtOff, len_without_icrc - kExtOff);
}

void write_icrc(uint8_t* frame, size_t len_without_icrc)
{
    // The CRC goes on the wire least significant byte first (as the Ethernet FCS does), which is
    // what rxe, scapy and the known-answer vectors do.
    uint32_t c = icrc(frame, len_without_icrc);
    uint8_t* p = frame + len_without_icrc;
    p[0] = uint8_t(c);
    p[1] = uint8_t(c >> 8);
    p[2] = uint8_t(c >> 16);
    p[3] = uint8_t(c >> 24);
}

bool icrc_ok(const uint8_t* frame, size_t len)
{
    if (len < kExtOff + kIcrcBytes) return false;
    const uint8_t* p = frame + len - kIcrcBytes;
    uint32_t wire = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    return wire == icrc(frame, len - kIcrcBytes);
}

size_t encode_headers(const Headers& h, uint32_t payload_len, uint8_t* out, size_t cap)
{
    const size_t hdr = header_bytes(h.opcode);
    // The IP total length field is 16 bits: refuse a payload it cannot describe.
    const uint32_t pad = h.pad ? uint32_t(pad_bytes(payload_len)) : 0;
    if (hdr == 0 || cap < hdr || hdr - kEthBytes + size_t(payload_len) + pad + kIcrcBytes > 0xFFFF) return 0;
    put_headers(h, hdr, payload_len, pad, out);
    return hdr;
}

size_t encode(const Headers& h, const uint8_t* payload, uint32_t payload_len, uint8_t* out, size_t cap)
{
    const size_t hdr = header_bytes(h.opcode);
    const uint32_t pad = h.pad ? uint32_t(pad_bytes(payload_len)) : 0;
    const size_t total = hdr + size_t(payload_len) + pad + kIcrcBytes;
    if (hdr == 0 || cap < total || total - kEthBytes > 0xFFFF) return 0;
    put_headers(h, hdr, payload_len, pad, out);
    if (payload_len) std::memcpy(out + hdr, payload, payload_len);
    if (pad) std::memset(out + hdr + payload_len, 0, pad);
    write_icrc(out, hdr + payload_len + pad);
    return total;
}

const char* to_string(Verdict v)
{
    switch (v) {
    case Verdict::Ok: return "ok";
    case Verdict::Truncated: return "truncated";
    case Verdict::NotIpv4: return "not IPv4";
    case Verdict::NotRoce: return "not RoCEv2";
    case Verdict::BadIpHeader: return "bad IPv4 header";
    case Verdict::BadLength: return "bad length";
    case Verdict::BadOpcode: return "unsupported opcode";
    case Verdict::BadIcrc: return "bad ICRC";
    }
    return "unknown verdict";
}

Verdict decode(const uint8_t* frame, size_t len, Parsed* out, bool verify_icrc)
{
    // Each length check comes before the first read it guards.
    if (len < kIpOff) return Verdict::Truncated;
    if (get16(frame + 12) != kEtherTypeIpv4) return Verdict::NotIpv4;

    if (len < kUdpOff) return Verdict::Truncated;
    const uint8_t* ip = frame + kIpOff;
    if (ip[0] != 0x45) return Verdict::NotIpv4;  // version 4 and IHL 5 (no options) in one byte
    if (ip[9] != kIpProtoUdp) return Verdict::NotRoce;
    if (ipv4_sum(ip) != 0xFFFF) return Verdict::BadIpHeader;
    if (get16(ip + 6) & kIpFragMask) return Verdict::BadIpHeader;  // RoCE is never fragmented

    if (len < kBthOff) return Verdict::Truncated;
    const uint8_t* udp = frame + kUdpOff;
    if (get16(udp + 2) != kRoceUdpPort) return Verdict::NotRoce;

    if (len < kExtOff) return Verdict::Truncated;
    const uint8_t* bth = frame + kBthOff;
    const uint8_t op = bth[0];
    const size_t hdr = header_bytes(op);
    if (hdr == 0) return Verdict::BadOpcode;
    if (len < hdr + kIcrcBytes) return Verdict::Truncated;

    // Frames are at least 66 bytes, so Ethernet never pads them: the lengths must match exactly.
    const size_t ip_total = get16(ip + 2);
    if (ip_total != len - kIpOff) return Verdict::BadLength;
    if (get16(udp + 4) != ip_total - kIpv4Bytes) return Verdict::BadLength;
    const uint32_t pad = (bth[1] >> 4) & 3;
    const size_t body = len - hdr - kIcrcBytes;
    if (pad > body) return Verdict::BadLength;
    const uint32_t payload_len = uint32_t(body - pad);

    if (verify_icrc && !icrc_ok(frame, len)) return Verdict::BadIcrc;

    const uint8_t* ext = frame + kExtOff;
    const uint8_t flags = op::kTable.f[op];
    if ((flags & op::kRethLenIsPayload) && get32(ext + 12) != payload_len) return Verdict::BadLength;
    if ((flags & op::kNoPayload) && payload_len) return Verdict::BadLength;

    if (!out) return Verdict::Ok;  // a validity check only
    Headers& h = out->h;
    std::memcpy(h.dst_mac.data(), frame, 6);
    std::memcpy(h.src_mac.data(), frame + 6, 6);
    h.ip_tos = ip[1];
    h.ip_id = get16(ip + 4);
    h.ip_ttl = ip[8];
    h.src_ip = get32(ip + 12);
    h.dst_ip = get32(ip + 16);
    h.udp_src_port = get16(udp);
    h.opcode = op;
    h.solicited = (bth[1] & 0x80) != 0;
    h.pkey = get16(bth + 2);
    h.dest_qp = get24(bth + 5);
    h.ack_req = (bth[8] & 0x80) != 0;
    h.psn = get24(bth + 9);
    h.pad = pad != 0;
    h.va = h.swap_add = h.compare = h.atomic_orig = 0;
    h.rkey = h.dma_len = h.qkey = h.src_qp = 0;
    if (has_reth(op)) {
        h.va = get64(ext);
        h.rkey = get32(ext + 8);
        h.dma_len = get32(ext + 12);
        ext += kRethBytes;
    } else if (has_deth(op)) {
        h.qkey = get32(ext);
        h.src_qp = get24(ext + 5);
        ext += kDethBytes;
    } else if (has_aeth(op)) {
        h.aeth = get32(ext);
        ext += kAethBytes;
        if (flags & op::kAtomicEth) h.atomic_orig = get64(ext);  // AtomicAckETH
    } else if (flags & op::kAtomicEth) {
        h.va = get64(ext);
        h.rkey = get32(ext + 8);
        h.swap_add = get64(ext + 12);
        h.compare = get64(ext + 20);
    }
    h.imm = has_imm(op) ? get32(ext) : 0;
    out->payload = frame + hdr;
    out->payload_len = payload_len;
    return Verdict::Ok;
}

bool mark_ce(uint8_t* frame, size_t len)
{
    if (len < kIpOff + kIpv4Bytes || get16(frame + 12) != kEtherTypeIpv4) return false;
    uint8_t* ip = frame + kIpOff;
    if (ip[0] != 0x45) return false;
    const uint8_t ecn = ip[1] & 3;
    if (ecn == kEcnNotEct) return false;
    if (ecn == kEcnCe) return true;
    ip[1] |= kEcnCe;
    put16(ip + 10, 0);
    put16(ip + 10, uint16_t(~ipv4_sum(ip)));
    return true;
}

}  // namespace sdr::emu::wire
