// The verbs QPs' receive dispatch: a frame whose QPN names a verbs QP (nic.hpp, kVerbsQpnBit)
// goes to its QP, which must be ready to receive (RTR or RTS), and to the rules of its
// transport (nic_uc.cpp, nic_ud.cpp). SDR's own frames never come here.

#include <sdr/emu/nic.hpp>

namespace sdr::emu {

void Nic::verbs_drop(RxDrop d, VerbsQp* q)
{
    port_.rx_drops[static_cast<size_t>(d)]++;
    if (q) q->counters.rx_drops++;
}

void Nic::verbs_receive(const PacketMeta& m, const uint8_t* payload, const NicAddress& src, const uint8_t* ip_header,
                        uint32_t reth_len)
{
    const uint32_t h = NicIds::qpn_index(m.dest_qp) & (kVerbsQpnBit - 1);
    VerbsQp* q = vqp(h);
    if (!q || !q->live || q->qpn != m.dest_qp || !payload) return verbs_drop(RxDrop::UnknownQp, nullptr);
    if (q->state != verbs::QpState::Rtr && q->state != verbs::QpState::Rts) return verbs_drop(RxDrop::QpNotReady, q);
    const bool ud_op = wire::has_deth(m.opcode);
    if (ud_op != (q->type == verbs::QpType::Ud)) return verbs_drop(RxDrop::WrongOpcode, q);
    if (ud_op) return ud_receive(*q, m, payload, ip_header);
    uc_receive(*q, m, payload, src, reth_len);
}

}  // namespace sdr::emu
