// QP1, the General Services Interface (IBTA vol. 1 chapter 13), as the verbs engine offers it
// to a management agent above the NIC (the Communication Manager, emu/cm): UD datagrams to
// QPN 1 go to the one agent attached, never to a user's UD QP, and the agent's MADs leave as UD
// SEND Only packets from QPN 1 with the GSI Q_Key. The engine only carries them: the agent
// parses.
#pragma once

#include <sdr/emu/nic_core.hpp>

#include <cstdint>

namespace sdr::emu {

// A datagram to QP1 as received: the MAD bytes (valid during the call), who sent it (the frame's
// source MAC and IP, the DETH's source QP) and what it claimed (Q_Key, P_Key).
struct GsiDatagram {
    const uint8_t* mad = nullptr;
    uint32_t len = 0;
    NicAddress src;
    uint32_t src_qp = 0, qkey = 0;
    uint16_t pkey = 0;
};

// What the engine calls, on the NIC's thread with the executor's lock held.
class GsiAgent {
public:
    virtual void gsi_receive(const GsiDatagram& d) = 0;
    virtual void gsi_timer() = 0;  // the deadline of VerbsEngine::gsi_arm_timer came

protected:
    ~GsiAgent() = default;
};

}  // namespace sdr::emu
