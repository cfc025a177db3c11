// The identifiers a frame names on the wire, drawn so that nobody can predict them: transport
// and control QPNs, root keys, lkeys and Q_Keys. Guessable ones let anyone on the link write
// into a posted receive with a frame of its own (the NeVerMore attack, arXiv 2202.08080).
//
// Each QPN and key holds a table index in its low bits, so the receive path finds its QP or
// key in O(1), and random tag bits above it, checked against the stored value. A simulated NIC
// draws them from a generator seeded by the fabric seed and the NIC index (runs stay
// replayable); a real-time NIC draws every one from getrandom(), the kernel's CSPRNG: a seeded
// xoshiro is linear, and enough identifiers seen on the wire would reveal its state and with it
// every other identifier.
#pragma once

#include <sdr/emu/rng.hpp>

#include <cstdint>
#include <optional>

namespace sdr::emu {

class NicIds {
public:
    // QPNs are 24 bits. Bit 23 tells SDR's transport QPs (UC, clear) from the rest, below it a
    // tag of 10 random bits and the index: 2^13 = 8192 transport QPs per NIC, FW_MAX_QPS x
    // FW_GENERATIONS x FW_MAX_CHANNELS. With bit 23 set the index's top bit tells the verbs
    // QPs (set, Nic::kVerbsQpnBit) from the control QPs (clear): 4096 of each.
    static constexpr uint32_t kQpnIndexBits = 13;
    static constexpr uint32_t kCtrlQpnBit = 0x800000;
    // Keys are 32 bits: root keys keep 12 index bits (4096 live, 512 needed today) and 20 random
    // ones; lkeys 16 index bits (65536 live regions) and 16 random ones, as SDR never accepts a
    // remote write by an lkey.
    static constexpr uint32_t kRootKeyIndexBits = 12;
    static constexpr uint32_t kLkeyIndexBits = 16;

    // seed: replayable draws (the simulator); nullopt: getrandom() for every draw.
    explicit NicIds(std::optional<uint64_t> seed);

    // A fresh identifier for table entry `index`, never equal to `previous` (the identifier
    // the entry had before, so that a stale one cannot name its successor). Tags are never
    // 0, so no identifier is 0; a data QPN is never 0 or 1 (QP0/QP1 of the IBTA spec) and a
    // control QPN never 0xFFFFFF (multicast).
    uint32_t data_qpn(uint32_t index, uint32_t previous = 0);
    uint32_t ctrl_qpn(uint32_t index, uint32_t previous = 0);
    uint32_t root_key(uint32_t index, uint32_t previous = 0);
    uint32_t lkey(uint32_t index, uint32_t previous = 0);
    // 31 random bits: the high-order bit stays clear, as the IBTA spec reserves Q_Keys with it
    // set (controlled Q_Keys).
    uint32_t qkey();

    static uint32_t qpn_index(uint32_t qpn) { return qpn & ((1u << kQpnIndexBits) - 1); }
    static uint32_t root_key_index(uint32_t key) { return key & ((1u << kRootKeyIndexBits) - 1); }
    static uint32_t lkey_index(uint32_t key) { return key & ((1u << kLkeyIndexBits) - 1); }

private:
    uint64_t next();
    // index | tag << index_bits, tag uniform in [1, 2^tag_bits), and != previous
    uint32_t draw(uint32_t index, uint32_t index_bits, uint32_t tag_bits, uint32_t high, uint32_t previous);
    std::optional<Rng> rng_;
};

// The UDP source port of a RoCEv2 connection (flow entropy for ECMP, in the range 0xC000-0xFFFF
// the IBTA's RoCEv2 annex recommends), as Linux's RoCE drivers derive it (include/rdma/
// ib_verbs.h, rdma_get_udp_sport with no flow label in the address vector): the product of the
// two QPNs folded to a 20-bit IPv6-style flow label, then the flow label folded to 14 bits. The
// product is symmetric, so both ends of a connection compute the same port: the sender puts it
// on its frames and the receiver accepts no other from its peer (ids.hpp's injection
// resistance: the port carries the random tag bits of both QPNs).
inline uint32_t roce_flow_label(uint32_t lqpn, uint32_t rqpn)
{
    uint64_t v = static_cast<uint64_t>(lqpn) * rqpn;
    v ^= v >> 20;
    v ^= v >> 40;
    return static_cast<uint32_t>(v & 0xFFFFF);
}

inline uint16_t flow_label_udp_src_port(uint32_t flow_label)
{
    return static_cast<uint16_t>(0xC000 | ((flow_label & 0x3FFF) ^ ((flow_label & 0xFC000) >> 14)));
}

// Connected QPs (SDR's transport and control QPs, verbs RC and UC) name their peer's QPN; a UD
// datagram names its destination QPN. For UD Linux has no one rule: the kernel helper takes the
// address handle's flow label when it has one, and hns draws a random port per address handle
// without one, rxe hashes the sender's QPN alone. We use the helper's fallback, the pair of
// QPNs (source QP, destination QP): deterministic (simulated runs replay) and, like a
// connection, one path per pair of QPs, so a UD flow stays in order through an ECMP fabric.
inline uint16_t udp_src_port(uint32_t lqpn, uint32_t rqpn)
{
    return flow_label_udp_src_port(roce_flow_label(lqpn, rqpn));
}

// Packet spraying (as AWS SRD and Ultra Ethernet do): a QP's packet n leaves from its own port,
// so an ECMP fabric that hashes the 5-tuple spreads one QP's packets over every path. The
// connection's port plus n, multiplied by an odd constant (a bijection modulo 2^14: consecutive
// packets land far apart) and xor-shifted (also a bijection: the high bits reach the low ones,
// which switch hashes often weigh most): any 2^14 consecutive packets take every port of
// 0xC000-0xFFFF exactly once.
inline uint16_t sprayed_udp_src_port(uint16_t connection_port, uint32_t n)
{
    uint32_t x = ((connection_port + n) * 0x2F35u) & 0x3FFF;
    x ^= x >> 7;
    return static_cast<uint16_t>(0xC000 | x);
}
// What a spraying QP's receiver accepts: any port of the range. A port p passes when
// (p | kSprayPortMask) == kSprayPeerPort; a QP that does not spray keeps the mask 0 and its one
// port, so the receive path's check is the same OR and compare for both.
inline constexpr uint16_t kSprayPortMask = 0x3FFF;
inline constexpr uint16_t kSprayPeerPort = 0xFFFF;

}  // namespace sdr::emu
