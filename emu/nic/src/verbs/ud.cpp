// UD responder rules: SEND Only (+immediate) with a DETH whose Q_Key must be the QP's, at most
// the path MTU of payload, into the receive WQE it consumes after the 40-byte GRH that verbs
// places first. For RoCEv2 over IPv4 the GRH slot holds 20 bytes of zero and then the packet's
// IPv4 header as received (the layout rdma-core's ibv_wc_read/rxe use: the IPv4 header in the
// last 20 bytes).

#include <sdr/emu/verbs_engine.hpp>

#include <cstring>

namespace sdr::emu {

using verbs::WcOpcode;
using verbs::WcStatus;

void VerbsEngine::ud_receive(VerbsQp& q, const PacketMeta& m, const uint8_t* payload, const uint8_t* ip_header,
                             const NicAddress* src)
{
    // A controlled Q_Key (high bit) is the sender's own QP's, sent for it by its NIC: it is
    // compared like any other, so a host can only reach a QP whose Q_Key it was told.
    if (m.qkey != q.qkey) return verbs_drop(RxDrop::BadQkey, &q);
    // Congested on the way: the CNP goes to the sending QP (the DETH's) at the frame's source.
    // Not for a group's copies: every member would answer the one sender.
    if (m.ecn == wire::kEcnCe && src) [[unlikely]] dcqcn_notify(q, m.src_qp, *src);
    if (m.dma_len > q.pmtu) return verbs_drop(RxDrop::BadLength, &q);
    const verbs::RecvWr* head = verbs_rq_head(q);  // its own queue's or its SRQ's
    if (!head) return verbs_drop(RxDrop::NoRecvWqe, &q);
    const verbs::RecvWr r = *head;
    verbs_rq_take(q);
    verbs::Wc wc{r.wr_id, WcStatus::Success, WcOpcode::Recv, wire::has_imm(m.opcode), true,
                 verbs::kGrhBytes + m.dma_len, wire::has_imm(m.opcode) ? m.imm : 0, q.qpn, m.src_qp, m.solicited};
    uint32_t room;
    if (!verbs_sges_ok(verbs_rq_pd(q), r.sg.data(), r.num_sge, verbs::kLocalWrite, &room)) {
        wc.status = WcStatus::LocProtErr;
        verbs_complete(q.recv_cq, wc);
        return verbs_drop(RxDrop::AccessDenied, &q);
    }
    if (verbs::kGrhBytes + m.dma_len > room) {
        wc.status = WcStatus::LocLenErr;
        verbs_complete(q.recv_cq, wc);
        return verbs_drop(RxDrop::OutOfBounds, &q);
    }
    uint8_t grh[verbs::kGrhBytes] = {};
    std::memcpy(grh + 20, ip_header, wire::kIpv4Bytes);
    verbs_scatter(r, 0, grh, sizeof grh);
    verbs_scatter(r, verbs::kGrhBytes, payload, m.dma_len);
    q.counters.rx_packets++;
    q.counters.rx_messages++;
    port_.rx_placed_bytes += m.dma_len;
    verbs_complete(q.recv_cq, wc);
}

}  // namespace sdr::emu
