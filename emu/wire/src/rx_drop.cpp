#include <sdr/emu/rx_drop.hpp>

namespace sdr::emu {

const char* to_string(RxDrop d)
{
    switch (d) {
    case RxDrop::Truncated: return "truncated";
    case RxDrop::NotIpv4: return "not_ipv4";
    case RxDrop::NotRoce: return "not_roce";
    case RxDrop::BadIpHeader: return "bad_ip_header";
    case RxDrop::BadLength: return "bad_length";
    case RxDrop::BadOpcode: return "bad_opcode";
    case RxDrop::BadIcrc: return "bad_icrc";
    case RxDrop::UnknownQp: return "unknown_qp";
    case RxDrop::WrongPeer: return "wrong_peer";
    case RxDrop::WrongOpcode: return "wrong_opcode";
    case RxDrop::UnknownKey: return "unknown_key";
    case RxDrop::OutOfBounds: return "out_of_bounds";
    case RxDrop::BadQkey: return "bad_qkey";
    case RxDrop::CtrlRingFull: return "ctrl_ring_full";
    case RxDrop::CqOverflow: return "cq_overflow";
    case RxDrop::QpNotReady: return "qp_not_ready";
    case RxDrop::PsnSequence: return "psn_sequence";
    case RxDrop::Duplicate: return "duplicate";
    case RxDrop::NoRecvWqe: return "no_recv_wqe";
    case RxDrop::AccessDenied: return "access_denied";
    case RxDrop::StaleAck: return "stale_ack";
    case RxDrop::InvalidRequest: return "invalid_request";
    case RxDrop::McastNoMember: return "mcast_no_member";
    case RxDrop::Count: break;
    }
    return "?";
}

}  // namespace sdr::emu
