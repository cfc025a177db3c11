// UC responder rules (IBTA vol. 1, ch. 9 for UC): PSN sequence checking, where a gap silently
// abandons the message in progress and only a FIRST or ONLY starts the next; SEND scattered into
// the receive WQE it consumes; RDMA WRITE checked against its rkey's region (PD, access,
// bounds) or root key (an indirect key: slot, entry, NULL entry); SEND and WRITE-with-immediate complete a receive WQE. Every rule that refuses a
// packet counts a drop and writes nothing of it.

#include <sdr/emu/verbs_engine.hpp>
#include <sdr/emu/psn.hpp>

#include <cstring>

namespace sdr::emu {

using verbs::WcOpcode;
using verbs::WcStatus;

namespace {

bool is_first(uint8_t op)
{
    return op == wire::kOpUcSendFirst || op == wire::kOpUcSendOnly || op == wire::kOpUcSendOnlyImm ||
           op == wire::kOpUcWriteFirst || op == wire::kOpUcWriteOnly || op == wire::kOpUcWriteOnlyImm;
}
bool is_last(uint8_t op)
{
    return op == wire::kOpUcSendLast || op == wire::kOpUcSendLastImm || op == wire::kOpUcSendOnly ||
           op == wire::kOpUcSendOnlyImm || op == wire::kOpUcWriteLast || op == wire::kOpUcWriteLastImm ||
           op == wire::kOpUcWriteOnly || op == wire::kOpUcWriteOnlyImm;
}

}  // namespace

void VerbsEngine::uc_receive(VerbsQp& q, const PacketMeta& m, const uint8_t* payload, const NicAddress& src,
                     uint32_t reth_len)
{
    // The connected peer's IP (its GID) only. Unlike SDR's QPs the MAC (a router rewrites it)
    // and UDP source port (any RoCEv2 sender picks its own) are not checked.
    if (src.ip != q.remote.ip) return verbs_drop(RxDrop::WrongPeer, &q);
    if (m.ecn == wire::kEcnCe) [[unlikely]] dcqcn_notify(q, q.dest_qpn, q.remote);  // congested on the way
    const uint8_t op = m.opcode;
    const bool first = is_first(op), last = is_last(op), write = op >= wire::kOpUcWriteFirst;
    auto abandon = [&] {
        if (q.in_msg) q.counters.rx_aborted++;
        q.in_msg = false;  // a SEND's receive WQE stays at the head of the queue for the next one
    };
    // PSN: 24-bit serial numbers. Behind ePSN (within half the space) is a duplicate: dropped,
    // the message in progress goes on. Ahead is a gap: the message in progress is lost.
    const uint32_t diff = psn::diff(m.psn, q.epsn);
    if (diff >= psn::kHalf) return verbs_drop(RxDrop::Duplicate, &q);
    if (diff != 0) abandon();
    q.epsn = psn::next(m.psn);
    if (first) {
        abandon();  // a FIRST/ONLY while a message is open: that one lost its LAST
    } else if (!q.in_msg || q.msg_write != write) {
        abandon();
        return verbs_drop(RxDrop::PsnSequence, &q);
    }
    // Packet sizes (IBTA): FIRST and MIDDLE carry exactly the path MTU, LAST and ONLY up to it.
    const uint32_t len = m.dma_len;
    if (len > q.pmtu || (!last && len != q.pmtu)) {
        abandon();
        return verbs_drop(RxDrop::BadLength, &q);
    }
    if (first) {
        q.msg_write = write;
        q.msg_off = 0;
    }

    if (!write) {
        const verbs::RecvWr* head = verbs_rq_head(q);  // its own queue's or its SRQ's
        if (!head) {  // an empty receive queue: the message is dropped (UC has no RNR)
            abandon();
            return verbs_drop(RxDrop::NoRecvWqe, &q);
        }
        const verbs::RecvWr& r = *head;
        uint32_t room;
        if (!verbs_sges_ok(verbs_rq_pd(q), r.sg.data(), r.num_sge, verbs::kLocalWrite, &room)) {
            verbs::Wc wc{r.wr_id, WcStatus::LocProtErr, WcOpcode::Recv, false, false, 0, 0, q.qpn, 0};
            verbs_rq_take(q);
            abandon();
            verbs_complete(q.recv_cq, wc);
            return verbs_drop(RxDrop::AccessDenied, &q);
        }
        if (q.msg_off + len > room) {  // longer than the receive WQE: it completes in error
            verbs::Wc wc{r.wr_id, WcStatus::LocLenErr, WcOpcode::Recv, false, false, 0, 0, q.qpn, 0};
            verbs_rq_take(q);
            abandon();
            verbs_complete(q.recv_cq, wc);
            return verbs_drop(RxDrop::OutOfBounds, &q);
        }
        verbs_scatter(r, q.msg_off, payload, len);
        q.msg_off += len;
        q.in_msg = !last;
        q.counters.rx_packets++;
        port_.rx_placed_bytes += len;
        if (last) {
            verbs::Wc wc{r.wr_id, WcStatus::Success, WcOpcode::Recv, wire::has_imm(op), false, q.msg_off,
                         wire::has_imm(op) ? m.imm : 0, q.qpn, 0, m.solicited};
            verbs_rq_take(q);
            q.counters.rx_messages++;
            verbs_complete(q.recv_cq, wc);
        }
        return;
    }

    // RDMA WRITE: the FIRST/ONLY names the region; every packet is checked against it again
    // (it may have been deregistered since).
    if (first) {
        q.write_va = m.va;
        q.write_len = reth_len;  // FIRST: the whole message; ONLY: its payload (decode checked)
        q.write_key = m.rkey;
    }
    uint8_t* dst = nullptr;
    if (RxDrop bad = verbs_write_target(q, q.write_key, q.write_va, q.write_len, &dst); bad != RxDrop::Count) {
        abandon();
        return verbs_drop(bad, &q);
    }
    if (q.msg_off + len > q.write_len || (last && q.msg_off + len != q.write_len)) {
        abandon();
        return verbs_drop(RxDrop::OutOfBounds, &q);
    }
    const bool imm = wire::has_imm(op);
    if (imm && !verbs_rq_head(q)) {  // checked before the last bytes land: the message is dropped
        abandon();
        return verbs_drop(RxDrop::NoRecvWqe, &q);
    }
    if (len && dst) std::memcpy(dst + q.msg_off, payload, len);  // the DMA (none on a NULL entry)
    if (len && !dst) port_.rx_null_key++;
    q.msg_off += len;
    q.in_msg = !last;
    q.counters.rx_packets++;
    port_.rx_placed_bytes += len;
    if (!last) return;
    q.counters.rx_messages++;
    if (imm) {
        verbs::Wc wc{verbs_rq_head(q)->wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm, true, false, q.msg_off,
                     m.imm, q.qpn, 0, m.solicited};
        verbs_rq_take(q);
        verbs_complete(q.recv_cq, wc);
    }
}

}  // namespace sdr::emu
