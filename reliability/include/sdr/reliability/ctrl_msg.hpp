// Control messages of the reliability layer, carried as sdr_ctrl.h datagrams. Little-endian,
// a 48-byte header, then (version 2 only) the scheme's parameter area, then an optional chunk
// bitmap (bit i%8 of byte i/8):
//
//   0  u8  version (1, 2)   1  u8 type           2  u8 flags        3  u8 scheme
//   4  u8  k                5  u8 m              6  u16 v1: reserved (0); v2: P, parameter bytes
//   8  u64 seq              reliable message number on this connection (per direction)
//  16  u64 length           CTS: posted receive length; REQ: send length
//  24  u32 base             ACK: cumulative chunk (all below are held); NACK: first chunk listed
//  28  u32 nbits            bitmap bits that follow (chunks base .. base+nbits-1)
//  32  u32 newest           ACK: the newest chunk it reports (RTT sample)
//  36  u32 ack_delay_us     ACK: time the receiver held that chunk before this ACK
//  40  u32 from             incarnation of the endpoint that sent this message
//  44  u32 to               incarnation of the endpoint it is meant for (0: not known yet)
//  48  v2: P bytes          the scheme's parameters (SchemeOps::cts_params), at most kCtrlMaxParams
//  48(+P) bitmap            ACK: 1 = held; NACK: 1 = please repeat (flag REPAIR: 1 = send this
//                           submessage more repair symbols, up to `newest` parity chunks in all)
//
// Version 1 is every message without a parameter area, byte for byte what it always was;
// version 2 is written only when the scheme has parameters beyond k and m. A decoder refuses any
// other version, and a parameter area that is too long or disagrees with the datagram's length.
//
// Incarnations keep a later endpoint on the same QP from acting on a late message meant for
// an earlier one (both restart at seq 0): a sender takes ACK/NACK only from the receiver
// incarnation whose CTS it followed, a receiver takes REQ/ABORT only if addressed to it.
//
// scheme: a registered scheme's wire id (scheme.hpp: 1 sr, 2 sr-nack, 3 ec-xor, 4 ec-mds, 6 ec-lt)
// or 5 auto (only from a sender that has no CTS yet).
// CTS (receiver → sender): receive `seq` of `length` bytes is posted with code scheme/k/m (never
//      auto: an auto receiver names the code it picked); a fixed sender must use the same one,
//      an auto sender adopts it.
// ACK (receiver → sender): progress of `seq`; flags FINAL (whole, delivered) or FAILED.
// NACK (receiver → sender): repeat the chunks listed.
// REQ (sender → receiver): "where is seq?" — answered by an ACK (FINAL from history if done);
//      for EC an incomplete message falls back to SR at once.
// ABORT (sender → receiver): the send of `seq` failed (length mismatch); give up the receive.
#pragma once

#include <sdr/reliability/config.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sdr::rel {

enum class CtrlType : uint8_t { Cts = 1, Ack = 2, Nack = 3, Req = 4, Abort = 5 };
inline constexpr uint8_t kAckFinal = 1, kAckFailed = 2;
// ACK: the answer to a REQ; it holds every chunk that arrived before the REQ, which the sender
// sent after the chunks that had left its NIC: those it lacks were lost.
inline constexpr uint8_t kAckReply = 8;
inline constexpr uint8_t kNackRepair = 4;  // NACK: the bitmap names submessages that need repair symbols
inline constexpr size_t kCtrlHeaderBytes = 48;
inline constexpr size_t kCtrlMaxParams = 64;  // bytes of a version-2 parameter area

struct CtrlMsg {
    CtrlType type = CtrlType::Ack;
    uint8_t flags = 0;
    Scheme scheme = Scheme::Sr;
    uint8_t k = 0, m = 0;
    uint64_t seq = 0, length = 0;
    uint32_t base = 0, nbits = 0, newest = 0, ack_delay_us = 0;
    uint32_t from = 0, to = 0;
    std::vector<uint8_t> params;  // the scheme's parameters (version 2 if not empty)
    std::vector<uint8_t> bits;    // (nbits + 7) / 8 bytes
};

std::vector<uint8_t> encode(const CtrlMsg& m);
// false if the datagram is not a well-formed control message (hostile input: ignored).
[[nodiscard]] bool decode(const uint8_t* p, size_t len, CtrlMsg* out);

}  // namespace sdr::rel
