// RoCEv2 wire format of the emulated NIC: Ethernet / IPv4 / UDP 4791 / BTH / (RETH | DETH | AETH
// [AtomicAckETH] | AtomicETH) / ImmDt / payload / pad / ICRC: SDR's UC WRITE-only-with-immediate,
// the verbs QPs' RC and UC SEND and RDMA WRITE (FIRST/MIDDLE/LAST/ONLY, with and without
// immediate), RC READ requests, READ responses and ACKs, RC atomics (COMPARE SWAP, FETCH ADD and
// their ATOMIC ACKNOWLEDGE), and UD SEND Only (+Imm). Encode builds a whole frame; decode treats a frame as hostile and
// says why it is not usable. Per-packet path: no allocation, no exceptions, no virtual calls.
//
// Deliberate limits (all frames we emit are within them):
//  - IPv4 only, no IP options (IHL 5), no fragments, no VLAN tag.
//  - encode pads only when asked (Headers::pad, the verbs QPs' frames: PadCnt bytes of zero bring
//    the payload to a multiple of 4, as the IBTA spec requires); SDR's frames keep PadCnt 0 and
//    their exact length (MTU-sized SDR packets need no pad). decode honours a peer's PadCnt and
//    excludes the pad bytes.
//  - The UDP checksum is sent as 0 and ignored on receipt: RoCEv2 leaves it outside the ICRC
//    (it is a variant field), and verifying it would cost a second pass over the payload.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace sdr::emu::wire {

inline constexpr uint16_t kRoceUdpPort = 4791;
// RoCEv2 multicast over IPv4 (IBTA vol. 1 10.5, RoCEv2 annex A17): a group is an address in
// 224.0.0.0/4, its MGID ::ffff:a.b.c.d, its frames go to the Ethernet address 01:00:5e + the
// group's low 23 bits (RFC 1112, 6.4) with BTH destination QPN 0xFFFFFF.
inline constexpr uint32_t kMcastQpn = 0xFFFFFF;
// QP1, the General Services Interface (IBTA vol. 1 chapter 13): the Communication Manager's MADs
// arrive at it as UD SENDs with the well-known GSI Q_Key (no data QPN is ever 1, ids.hpp).
inline constexpr uint32_t kGsiQpn = 1;
inline constexpr uint32_t kGsiQkey = 0x80010000u;
inline constexpr bool is_ipv4_multicast(uint32_t ip) { return (ip >> 28) == 0xE; }  // host order
inline constexpr std::array<uint8_t, 6> ipv4_multicast_mac(uint32_t ip)
{
    return {0x01, 0x00, 0x5e, static_cast<uint8_t>((ip >> 16) & 0x7F), static_cast<uint8_t>(ip >> 8),
            static_cast<uint8_t>(ip)};
}
// BTH opcodes (IBTA vol. 1, table 38): RC is 0x00-0x14, UC 0x20-0x2B, UD 0x64-0x65.
inline constexpr uint8_t kOpRcSendFirst = 0x00, kOpRcSendMiddle = 0x01, kOpRcSendLast = 0x02,
                         kOpRcSendLastImm = 0x03, kOpRcSendOnly = 0x04, kOpRcSendOnlyImm = 0x05;
inline constexpr uint8_t kOpRcWriteFirst = 0x06, kOpRcWriteMiddle = 0x07, kOpRcWriteLast = 0x08,
                         kOpRcWriteLastImm = 0x09, kOpRcWriteOnly = 0x0A, kOpRcWriteOnlyImm = 0x0B;
inline constexpr uint8_t kOpRcReadRequest = 0x0C;  // RETH, no payload
inline constexpr uint8_t kOpRcReadRespFirst = 0x0D, kOpRcReadRespMiddle = 0x0E, kOpRcReadRespLast = 0x0F,
                         kOpRcReadRespOnly = 0x10;  // AETH on FIRST, LAST and ONLY
inline constexpr uint8_t kOpRcAck = 0x11;           // AETH, no payload (ACK and NAK)
// Atomics (IBTA 9.4.5): a request carries the AtomicETH (VA, R_Key, Swap or Add data, Compare
// data), its answer the AETH and the AtomicAckETH (the original 8 bytes); neither has a payload.
inline constexpr uint8_t kOpRcAtomicAck = 0x12, kOpRcCmpSwap = 0x13, kOpRcFetchAdd = 0x14;
inline constexpr uint8_t kOpUcSendFirst = 0x20, kOpUcSendMiddle = 0x21, kOpUcSendLast = 0x22,
                         kOpUcSendLastImm = 0x23, kOpUcSendOnly = 0x24, kOpUcSendOnlyImm = 0x25;
inline constexpr uint8_t kOpUcWriteFirst = 0x26, kOpUcWriteMiddle = 0x27, kOpUcWriteLast = 0x28,
                         kOpUcWriteLastImm = 0x29, kOpUcWriteOnly = 0x2A;
inline constexpr uint8_t kOpUcWriteOnlyImm = 0x2B;  // UC RDMA WRITE Only with Immediate (SDR's)
inline constexpr uint8_t kOpUdSendOnly = 0x64, kOpUdSendOnlyImm = 0x65;  // UD SEND Only (+Imm), carry DETH
// RoCEv2 CNP (the IBTA's RoCEv2 annex A17): congestion notification to the QP named in the BTH,
// 16 reserved bytes (zero) after the BTH, then the ICRC.
inline constexpr uint8_t kOpCnp = 0x81;
inline constexpr uint32_t kCnpReservedBytes = 16;
inline constexpr size_t kEthBytes = 14, kIpv4Bytes = 20, kUdpBytes = 8, kBthBytes = 12, kRethBytes = 16,
                        kDethBytes = 8, kImmBytes = 4, kIcrcBytes = 4, kAethBytes = 4, kAtomicEthBytes = 28,
                        kAtomicAckEthBytes = 8;
inline constexpr size_t kWriteImmHeaderBytes = 74;  // Eth..ImmDt for 0x2B
static_assert(kWriteImmHeaderBytes == kEthBytes + kIpv4Bytes + kUdpBytes + kBthBytes + kRethBytes + kImmBytes);

// AETH (IBTA 9.3.5): syndrome in the top byte, MSN below. Syndrome: 000ccccc ACK (c: credits,
// 0x1F = not flow controlled), 001ttttt RNR NAK (t: the RNR timer code), 011nnnnn NAK (n: kNak*).
inline constexpr uint32_t kAethAck = 0x1Fu << 24, kAethRnrNak = 0x20u << 24, kAethNak = 0x60u << 24;
inline constexpr uint32_t kNakPsnSequence = 0, kNakInvalidRequest = 1, kNakRemoteAccess = 2, kNakRemoteOp = 3;
constexpr uint32_t aeth(uint32_t syndrome, uint32_t msn) { return syndrome | (msn & 0xFFFFFF); }

// What each opcode carries, one table lookup (0: unsupported opcode).
namespace op {
inline constexpr uint8_t kValid = 1, kReth = 2, kDeth = 4, kImm = 8, kAeth = 16,
                         kRethLenIsPayload = 32,  // WRITE ONLY: the RETH's DMA length is the payload's
                         kNoPayload = 64,         // READ request, ACK, atomics
                         kAtomicEth = 128;        // atomic request (0x13, 0x14); on 0x12 (kAeth): AtomicAckETH
struct Table {
    uint8_t f[256] = {};
    constexpr Table()
    {
        for (uint8_t base : {uint8_t(0x00), uint8_t(0x20)}) {  // RC and UC SEND and WRITE
            for (int i = 0; i < 12; i++) f[base + i] = kValid;
            for (int i : {0x03, 0x05, 0x09, 0x0B}) f[base + i] |= kImm;
            for (int i : {0x06, 0x0A, 0x0B}) f[base + i] |= kReth;
            for (int i : {0x0A, 0x0B}) f[base + i] |= kRethLenIsPayload;
        }
        f[kOpRcReadRequest] = kValid | kReth | kNoPayload;
        f[kOpRcReadRespFirst] = f[kOpRcReadRespLast] = f[kOpRcReadRespOnly] = kValid | kAeth;
        f[kOpRcReadRespMiddle] = kValid;
        f[kOpRcAck] = kValid | kAeth | kNoPayload;
        f[kOpRcAtomicAck] = kValid | kAeth | kAtomicEth | kNoPayload;
        f[kOpRcCmpSwap] = f[kOpRcFetchAdd] = kValid | kAtomicEth | kNoPayload;
        f[kOpUdSendOnly] = kValid | kDeth;
        f[kOpUdSendOnlyImm] = kValid | kDeth | kImm;
        f[kOpCnp] = kValid;  // its 16 reserved bytes travel as the payload
    }
};
inline constexpr Table kTable{};
}  // namespace op

// Which extension headers an opcode carries (false for an unsupported one).
constexpr bool has_reth(uint8_t o) { return op::kTable.f[o] & op::kReth; }
constexpr bool has_deth(uint8_t o) { return op::kTable.f[o] & op::kDeth; }
constexpr bool has_imm(uint8_t o) { return op::kTable.f[o] & op::kImm; }
constexpr bool has_aeth(uint8_t o) { return op::kTable.f[o] & op::kAeth; }
constexpr bool is_atomic_request(uint8_t o) { return o == kOpRcCmpSwap || o == kOpRcFetchAdd; }

// Eth..ImmDt: 74 for 0x2B, 54 + RETH/DETH/AETH/AtomicETH/AtomicAckETH/ImmDt for the others, 0 for
// an unsupported opcode.
size_t header_bytes(uint8_t opcode);
// A whole frame of `payload` bytes, with its pad when `pad` (0 for an unsupported opcode).
constexpr size_t pad_bytes(size_t payload) { return (4 - (payload & 3)) & 3; }
size_t frame_bytes(uint8_t opcode, size_t payload, bool pad);
constexpr size_t frame_bytes_write_imm(size_t payload) { return kWriteImmHeaderBytes + payload + kIcrcBytes; }
// Whole frame of a UD SEND Only (control datagram): Eth..DETH, payload, ICRC.
inline constexpr size_t kUdSendHeaderBytes = kEthBytes + kIpv4Bytes + kUdpBytes + kBthBytes + kDethBytes;
constexpr size_t frame_bytes_ud_send(size_t payload) { return kUdSendHeaderBytes + payload + kIcrcBytes; }

// ECN, the low 2 bits of the IPv4 TOS byte (RFC 3168). A NIC with DCQCN on sends ECT(0), as
// RoCEv2 NICs do; a congested switch rewrites ECT to CE instead of dropping.
inline constexpr uint8_t kEcnNotEct = 0, kEcnEct1 = 1, kEcnEct0 = 2, kEcnCe = 3;

struct Headers {
    std::array<uint8_t, 6> dst_mac{}, src_mac{};
    uint32_t src_ip = 0, dst_ip = 0;  // host byte order
    uint8_t ip_tos = 0, ip_ttl = 64;  // TOS: DSCP << 2 | ECN
    uint16_t ip_id = 0;
    uint16_t udp_src_port = 0xC000;  // flow entropy
    uint8_t opcode = kOpUcWriteOnlyImm;
    bool solicited = false, ack_req = false;
    bool pad = false;  // encode: pad the payload to a multiple of 4 (PadCnt); decode: PadCnt != 0
    uint16_t pkey = 0xFFFF;
    uint32_t dest_qp = 0;                                        // 24 bits
    uint32_t psn = 0;                                            // 24 bits
    uint64_t va = 0;  uint32_t rkey = 0;  uint32_t dma_len = 0;  // RETH (WRITE FIRST/ONLY)
    uint32_t qkey = 0; uint32_t src_qp = 0;                      // DETH (UD)
    uint32_t imm = 0;                                            // ImmDt, host order
    uint32_t aeth = 0;  // AETH (RC ACK, READ response FIRST/LAST/ONLY, ATOMIC ACK); decode sets it only for those
    // AtomicETH (with va and rkey above): Swap (COMPARE SWAP) or Add (FETCH ADD) data, Compare
    // data; AtomicAckETH: the original value. Host order; the wire carries them big-endian.
    uint64_t swap_add = 0, compare = 0, atomic_orig = 0;
    uint8_t ecn() const { return ip_tos & 3; }
    void set_ecn(uint8_t e) { ip_tos = static_cast<uint8_t>((ip_tos & ~3u) | (e & 3u)); }
};

// A switch's ECN mark (RFC 3168), in place: an ECT(0) or ECT(1) IPv4 frame becomes CE and its
// IPv4 header checksum is recomputed; the ICRC stays valid, as it masks the TOS byte (and
// the checksum). True if the frame carries CE now (marked, or already CE); false, unchanged,
// for a Not-ECT frame or one too short or not IPv4 with a 20-byte header.
bool mark_ce(uint8_t* frame, size_t len);

// Writes a whole frame (headers, payload, ICRC) into out. IPv4 total length, header checksum and
// UDP length come from payload_len; UDP checksum 0. h.dma_len is written as given (tests build
// hostile frames with a wrong one). Returns bytes written, 0 if cap is too small or the opcode
// unsupported.
[[nodiscard]] size_t encode(const Headers& h, const uint8_t* payload, uint32_t payload_len, uint8_t* out, size_t cap);

// Headers only (no payload, no ICRC) exactly as they would precede a payload of payload_len
// bytes: payload-free simulation records them as a truncated pcap capture. Returns header bytes
// written, 0 if cap is too small or the opcode unsupported.
[[nodiscard]] size_t encode_headers(const Headers& h, uint32_t payload_len, uint8_t* out, size_t cap);

enum class Verdict : uint8_t { Ok, Truncated, NotIpv4, NotRoce, BadIpHeader, BadLength, BadOpcode, BadIcrc };
const char* to_string(Verdict v);

struct Parsed {
    Headers h;
    const uint8_t* payload = nullptr;  // points into the frame given to decode
    uint32_t payload_len = 0;          // excludes BTH PadCnt bytes
};

// Never reads outside [frame, frame+len). Checks, in this order:
//   Truncated    shorter than the header needed for the next check, or than the opcode's
//                headers + ICRC;
//   NotIpv4      ethertype != 0x0800, IP version != 4 or IHL != 5;
//   NotRoce      IP protocol not UDP, or UDP destination port != 4791;
//   BadIpHeader  IPv4 header checksum wrong, or the packet is a fragment;
//   BadOpcode    not 0x00-0x14, 0x20-0x2B, 0x64 or 0x65;
//   BadLength    IP total length != len - 14, UDP length != IP payload, PadCnt > payload;
//   BadIcrc      ICRC mismatch (only if verify_icrc);
//   BadLength    (WRITE ONLY, 0x0A/0x0B/0x2A/0x2B) RETH dma_len != payload length, or a
//                payload on a READ request, ACK or atomic — checked after the ICRC, so a corrupted
//                dma_len counts as BadIcrc and a well-formed lie as BadLength. (A WRITE FIRST's
//                and a READ request's dma_len is the whole message: the responder checks it.)
// On Ok, *out holds the headers (UDP checksum, TVer, BTH reserved bits are not reported).
[[nodiscard]] Verdict decode(const uint8_t* frame, size_t len, Parsed* out, bool verify_icrc = true);

// RoCEv2 ICRC (IPv4): reflected IEEE CRC32 over 8 bytes of 0xFF (standing in for the LRH),
// the IP header with TOS, TTL and header checksum set to ones, the UDP header with its checksum
// set to ones, the BTH with its resv8a byte (FECN/BECN) set to ones, then the rest of the packet
// up to the ICRC. len_without_icrc excludes the 4 ICRC bytes and must cover at least the BTH.
uint32_t icrc(const uint8_t* frame, size_t len_without_icrc);
// Store / check the 4 ICRC bytes exactly as on the wire (the CRC little-endian: its low byte first).
void write_icrc(uint8_t* frame, size_t len_without_icrc);
bool icrc_ok(const uint8_t* frame, size_t len);

}  // namespace sdr::emu::wire
