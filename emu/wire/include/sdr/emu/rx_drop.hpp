// The NIC's receive drop reasons and their names: the names are also the wire vocabulary of
// captures (pcapng comments, capture_notes.hpp) and of counter reports, so they live here,
// below the NIC, and a capture reader needs no NIC to print them.
#pragma once

#include <cstdint>

namespace sdr::emu {

// Why a received frame was dropped. Every drop is counted; none writes memory.
enum class RxDrop : uint8_t {
    Truncated, NotIpv4, NotRoce, BadIpHeader, BadLength, BadOpcode, BadIcrc,  // frame checks
    UnknownQp,    // destination QPN not a live transport, control or verbs QP
    WrongPeer,    // not from the connected peer's MAC, IP, UDP source port (and control QPN)
    WrongOpcode,  // SDR QP: not a UC WRITE-only-with-immediate; verbs QP: another transport's opcode
    UnknownKey,   // rkey is not the root key bound to that QP
    OutOfBounds,  // slot or offset outside the root key / posted buffer
    BadQkey,      // control datagram whose Q_Key is not the control QP's
    CtrlRingFull, // control datagram arrived while the host had not drained the ring
    CqOverflow,   // its CQE found the DPA thread's CQ full (cost model, dpa_model.hpp)
    // verbs QPs (verbs/rx.cpp, verbs/uc.cpp, verbs/ud.cpp)
    QpNotReady,   // the verbs QP is not in RTR or RTS
    PsnSequence,  // UC: a PSN gap, or a MIDDLE/LAST of a message the responder abandoned
    Duplicate,    // UC: a PSN behind the expected one (a duplicate)
    NoRecvWqe,    // SEND or WRITE-with-immediate found the receive queue empty
    AccessDenied, // the rkey's region or the QP does not allow it, or another PD's region
    // RC (nic_rc_*.cpp)
    StaleAck,     // an ACK, NAK or READ response outside the requester's outstanding PSNs
    InvalidRequest, // a request the responder NAKs as invalid (opcode sequence, length, too many READs)
    McastNoMember, // a multicast frame (QPN 0xFFFFFF) for a group no QP of this NIC is attached to
    Count
};
const char* to_string(RxDrop d);

}  // namespace sdr::emu
