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

// The UDP source port a RoCEv2 sender puts on the frames of QP `qpn` (flow entropy, in the
// range 0xC000-0xFFFF the IBTA spec recommends). The receiver derives the same port from the
// QPN of the peer it is connected to and accepts no other. Index and tag bits are folded
// together so that the QPs of one NIC spread over ports and the port carries the tag's
// randomness.
inline uint16_t udp_src_port(uint32_t qpn)
{
    return static_cast<uint16_t>(0xC000 | ((qpn ^ (qpn >> 10)) & 0x3FFF));
}

}  // namespace sdr::emu
