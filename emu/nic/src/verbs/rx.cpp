// The verbs QPs' receive dispatch: a frame whose QPN names a verbs QP (nic_core.hpp, kVerbsQpnBit)
// goes to its QP, which must be ready to receive (RTR or RTS), and to the rules of its
// transport (verbs/uc.cpp, verbs/ud.cpp, verbs/rc_*.cpp), or a DCQCN CNP to its reaction point
// (verbs/dcqcn.cpp); a datagram to QP1 to the management agent (verbs/gsi.cpp). SDR's own
// frames never come here.

#include <sdr/emu/verbs_engine.hpp>

namespace sdr::emu {

void VerbsEngine::verbs_drop(RxDrop d, VerbsQp* q)
{
    port_.rx_drops[static_cast<size_t>(d)]++;
    if (q) q->counters.rx_drops++;
}

void VerbsEngine::receive(const PacketMeta& m, const uint8_t* payload, const NicAddress& src, const uint8_t* ip_header,
                        const wire::Headers& hd)
{
    if (m.dest_qp == wire::kMcastQpn) [[unlikely]] return mcast_receive(m, payload, ip_header);
    if (m.dest_qp == wire::kGsiQpn) [[unlikely]] return gsi_receive(m, payload, src, hd);  // QP1: the CM's
    const uint32_t h = NicIds::qpn_index(m.dest_qp) & (kVerbsQpnBit - 1);
    VerbsQp* q = vqp(h);
    if (!q || !q->live || q->qpn != m.dest_qp || !payload) return verbs_drop(RxDrop::UnknownQp, nullptr);
    if (q->state != verbs::QpState::Rtr && q->state != verbs::QpState::Rts) return verbs_drop(RxDrop::QpNotReady, q);
    if (m.opcode == wire::kOpCnp) [[unlikely]] return dcqcn_cnp(*q, src);  // DCQCN: slow this QP
    // The opcode's top three bits name its transport (IBTA table 38): 000 RC, 001 UC, 011 UD.
    static constexpr uint8_t kTransport[] = {1, 3, 0};  // by QpType: Uc, Ud, Rc
    if ((m.opcode >> 5) != kTransport[static_cast<uint8_t>(q->type)]) return verbs_drop(RxDrop::WrongOpcode, q);
    switch (q->type) {
    case verbs::QpType::Ud: return ud_receive(*q, m, payload, ip_header, &src);
    case verbs::QpType::Uc: return uc_receive(*q, m, payload, src, hd.dma_len);
    case verbs::QpType::Rc: return rc_receive(*q, h, m, payload, src, hd);
    }
}

}  // namespace sdr::emu
