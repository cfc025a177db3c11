// RC responder (IBTA vol. 1, 9.7.4 and 9.7.5): PSN checks (expected: executed; duplicate:
// ACKed again, a READ run again; ahead: one PSN sequence error NAK until the sequence resumes),
// SEND into receive WQEs with RNR NAKs when none is posted, RDMA WRITE checked against its
// rkey's region, coalesced ACKs, and the NAKs that move the QP to ERR (remote access error,
// invalid request, remote operational error). Also the dispatch of an RC frame to the requester
// (ACKs, READ responses, ATOMIC ACKs) or the responder, and the responder's output queue.

#include <sdr/emu/verbs_engine.hpp>
#include <sdr/emu/psn.hpp>

#include <algorithm>
#include <cstring>

namespace sdr::emu {

using verbs::QpState;
using verbs::WcOpcode;
using verbs::WcStatus;

namespace {


bool is_first(uint8_t op)
{
    return op == wire::kOpRcSendFirst || op == wire::kOpRcSendOnly || op == wire::kOpRcSendOnlyImm ||
           op == wire::kOpRcWriteFirst || op == wire::kOpRcWriteOnly || op == wire::kOpRcWriteOnlyImm;
}
bool is_last(uint8_t op)
{
    return op == wire::kOpRcSendLast || op == wire::kOpRcSendLastImm || op == wire::kOpRcSendOnly ||
           op == wire::kOpRcSendOnlyImm || op == wire::kOpRcWriteLast || op == wire::kOpRcWriteLastImm ||
           op == wire::kOpRcWriteOnly || op == wire::kOpRcWriteOnlyImm;
}

}  // namespace

void VerbsEngine::rc_receive(VerbsQp& q, uint32_t h, const PacketMeta& m, const uint8_t* payload, const NicAddress& src,
                     const wire::Headers& hd)
{
    // The connected peer's IP (its GID) only, as for UC.
    if (src.ip != q.remote.ip) return verbs_drop(RxDrop::WrongPeer, &q);
    // Congested on the way: requests slow the peer's requester, READ responses its responder,
    // which is the same connected QP.
    if (m.ecn == wire::kEcnCe) [[unlikely]] dcqcn_notify(q, q.dest_qpn, q.remote);
    if (m.opcode >= wire::kOpRcReadRespFirst && m.opcode <= wire::kOpRcAtomicAck) {  // to the requester
        if (q.state != QpState::Rts) return verbs_drop(RxDrop::QpNotReady, &q);
        if (m.opcode == wire::kOpRcAck) return rc_ack_received(q, h, m.psn, hd.aeth);
        if (m.opcode == wire::kOpRcAtomicAck) return rc_atomic_ack(q, h, m, hd);
        return rc_read_response(q, h, m, payload, hd.aeth);
    }
    rc_request(q, h, m, payload, hd);
}

// Queue an ACK or NAK for `psn`. Coalescing: a plain ACK still waiting at the end of the queue
// is replaced by the newer one (ACK or NAK), which covers it, since the responder's PSNs only
// grow; so at most one ACK waits behind each NAK or READ.
void VerbsEngine::rc_queue_ack(VerbsQp& q, uint32_t h, uint32_t psn, uint32_t syndrome)
{
    const uint32_t aeth = wire::aeth(syndrome, q.msn);
    if (q.resp_n) {
        RcResp& last = q.resp[(q.resp_head + q.resp_n - 1) % kRcRespDepth];
        if (last.kind == RcResp::Kind::Ack && (last.aeth >> 29) == 0) {
            last.psn = psn & psn::kMask;
            last.aeth = aeth;
            return;
        }
    }
    if (q.resp_n == kRcRespDepth) return;  // full: the requester's timer covers a lost ACK
    RcResp& r = q.resp[(q.resp_head + q.resp_n++) % kRcRespDepth];
    r = RcResp{};
    r.psn = psn & psn::kMask;
    r.aeth = aeth;
    verbs_doorbell(h);
}

// Responder resources (IBTA 9.7.5.1.x, max_dest_rd_atomic): READs whose responses and atomics
// whose ATOMIC ACKs have not all left, within the queue's depth. The answers to duplicates are
// counted apart, up to max_dest_rd_atomic of them: the requester sent each new one with fewer
// than max_rd_atomic of its own in flight, but a retry sends requests again whose first answers
// may still be queued here, and those must not make the next new request look like one too many.
VerbsEngine::RcResp* VerbsEngine::rc_queue_rd_atomic(VerbsQp& q, bool duplicate)
{
    const uint32_t taken = duplicate ? q.rd_dups : q.rd_queued - q.rd_dups;
    if (taken >= q.max_dest_rd || q.resp_n == kRcRespDepth) return nullptr;
    RcResp& r = q.resp[(q.resp_head + q.resp_n++) % kRcRespDepth];
    r = RcResp{};
    r.dup = duplicate;
    q.rd_queued++;
    q.rd_dups += duplicate;
    return &r;
}

// A request the responder cannot execute: NAK with `nak_code` for `psn`, then the QP goes to ERR
// (both queues flush); the NAK is its last packet. It takes the queue's head entry: the ones
// before it may still be read by the encoder (an ATOMIC ACK's value) in the same batch.
void VerbsEngine::rc_responder_error(VerbsQp& q, uint32_t h, uint32_t psn, uint32_t nak_code)
{
    const bool was_err = q.state == QpState::Err;
    rc_enter_err(q);
    q.resp_n = 0;
    rc_queue_ack(q, h, psn, wire::kAethNak | (nak_code << 24));
    // The responder's affiliated error (IBTA 11.6.3.1): a remote access violation is its
    // local access violation, an invalid request its invalid request error, an operational
    // error (a receive WQE it cannot use) its catastrophic error.
    if (!was_err)
        exec_->verbs_async_event(nak_code == wire::kNakRemoteAccess    ? verbs::AsyncEvent::QpAccessErr
                                 : nak_code == wire::kNakInvalidRequest ? verbs::AsyncEvent::QpReqErr
                                                                        : verbs::AsyncEvent::QpFatal,
                                 h);
}

void VerbsEngine::rc_request(VerbsQp& q, uint32_t h, const PacketMeta& m, const uint8_t* payload, const wire::Headers& hd)
{
    const uint8_t op = m.opcode;
    // PSN: behind ePSN (within half the space) a duplicate, ahead a sequence error.
    const uint32_t diff = psn::diff(m.psn, q.epsn);
    if (diff >= psn::kHalf) {
        if (op == wire::kOpRcReadRequest) return rc_read_request(q, h, m, hd, true);
        if (wire::is_atomic_request(op)) return rc_atomic_request(q, h, m, hd, true);
        verbs_drop(RxDrop::Duplicate, &q);
        return rc_queue_ack(q, h, q.epsn - 1, wire::kAethAck);  // its ACK may have been lost
    }
    if (diff != 0) {
        if (!q.nak_sent) {
            q.nak_sent = true;
            rc_queue_ack(q, h, q.epsn, wire::kAethNak | (wire::kNakPsnSequence << 24));
        }
        return verbs_drop(RxDrop::PsnSequence, &q);
    }
    q.nak_sent = false;  // the expected PSN: the sequence resumed
    if (op == wire::kOpRcReadRequest || wire::is_atomic_request(op)) {
        if (q.in_msg) {  // a READ or atomic inside a SEND or WRITE: an opcode sequence error
            verbs_drop(RxDrop::InvalidRequest, &q);
            return rc_responder_error(q, h, m.psn, wire::kNakInvalidRequest);
        }
        if (op == wire::kOpRcReadRequest) return rc_read_request(q, h, m, hd, false);
        return rc_atomic_request(q, h, m, hd, false);
    }
    const bool first = is_first(op), last = is_last(op), write = op >= wire::kOpRcWriteFirst;
    const uint32_t len = m.dma_len;
    // Opcode sequence (a FIRST/ONLY only between messages, a MIDDLE/LAST only inside one of its
    // kind) and packet sizes (FIRST/MIDDLE exactly the MTU, LAST/ONLY up to it): invalid request.
    if (first == q.in_msg || (!first && q.msg_write != write) || len > q.pmtu || (!last && len != q.pmtu)) {
        verbs_drop(RxDrop::InvalidRequest, &q);
        return rc_responder_error(q, h, m.psn, wire::kNakInvalidRequest);
    }
    auto rnr = [&](RxDrop d) {  // no receive WQE: RNR NAK, the requester sends this PSN again
        q.nak_sent = true;
        rc_queue_ack(q, h, m.psn, wire::kAethRnrNak | (uint32_t{q.min_rnr_timer} << 24));
        verbs_drop(d, &q);
    };

    if (!write) {
        const verbs::RecvWr* head = verbs_rq_head(q);  // its own queue's or its SRQ's
        if (first && !head) return rnr(RxDrop::NoRecvWqe);
        if (!head) {  // the WQE its FIRST bound is gone (only a reset does that)
            verbs_drop(RxDrop::InvalidRequest, &q);
            return rc_responder_error(q, h, m.psn, wire::kNakInvalidRequest);
        }
        const verbs::RecvWr& r = *head;
        uint32_t room;
        if (!verbs_sges_ok(verbs_rq_pd(q), r.sg.data(), r.num_sge, verbs::kLocalWrite, &room)) {
            verbs::Wc wc{r.wr_id, WcStatus::LocProtErr, WcOpcode::Recv, false, false, 0, 0, q.qpn, 0};
            verbs_rq_take(q);
            verbs_complete(q.recv_cq, wc);
            verbs_drop(RxDrop::AccessDenied, &q);
            return rc_responder_error(q, h, m.psn, wire::kNakRemoteOp);
        }
        if ((first ? 0 : q.msg_off) + len > room) {  // longer than the receive WQE
            verbs::Wc wc{r.wr_id, WcStatus::LocLenErr, WcOpcode::Recv, false, false, 0, 0, q.qpn, 0};
            verbs_rq_take(q);
            verbs_complete(q.recv_cq, wc);
            verbs_drop(RxDrop::OutOfBounds, &q);
            return rc_responder_error(q, h, m.psn, wire::kNakInvalidRequest);
        }
        if (first) {
            q.msg_write = false;
            q.msg_off = 0;
        }
        verbs_scatter(r, q.msg_off, payload, len);
        q.msg_off += len;
        if (last) {
            verbs::Wc wc{r.wr_id, WcStatus::Success, WcOpcode::Recv, wire::has_imm(op), false, q.msg_off,
                         wire::has_imm(op) ? m.imm : 0, q.qpn, 0, m.solicited};
            verbs_rq_take(q);
            verbs_complete(q.recv_cq, wc);
        }
    } else {
        // RDMA WRITE: the FIRST/ONLY's RETH names the region; every packet is checked against it
        // again (it may have been deregistered since). A violation is a remote access error.
        const uint32_t write_va_len = first ? hd.dma_len : q.write_len;
        const uint64_t write_va = first ? m.va : q.write_va;
        const uint32_t write_key = first ? m.rkey : q.write_key;
        const uint32_t off = first ? 0 : q.msg_off;
        uint8_t* dst = nullptr;
        if (RxDrop bad = verbs_write_target(q, write_key, write_va, write_va_len, &dst); bad != RxDrop::Count) {
            verbs_drop(bad, &q);
            return rc_responder_error(q, h, m.psn, wire::kNakRemoteAccess);
        }
        if (off + len > write_va_len || (last && off + len != write_va_len)) {  // not the RETH's length
            verbs_drop(RxDrop::InvalidRequest, &q);
            return rc_responder_error(q, h, m.psn, wire::kNakInvalidRequest);
        }
        // WRITE with immediate needs a receive WQE: checked before its last bytes land. The
        // message stays open: the requester sends this last packet again after the RNR wait.
        if (wire::has_imm(op) && !verbs_rq_head(q)) return rnr(RxDrop::NoRecvWqe);
        if (first) {
            q.msg_write = true;
            q.write_va = write_va;
            q.write_len = write_va_len;
            q.write_key = write_key;
            q.msg_off = 0;
        }
        if (len && dst) std::memcpy(dst + off, payload, len);  // the DMA (none on a root key's NULL entry)
        if (len && !dst) port_.rx_null_key++;
        q.msg_off += len;
        if (last && wire::has_imm(op)) {
            verbs::Wc wc{verbs_rq_head(q)->wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm, true, false,
                         q.msg_off, m.imm, q.qpn, 0, m.solicited};
            verbs_rq_take(q);
            verbs_complete(q.recv_cq, wc);
        }
    }
    q.in_msg = !last;
    q.epsn = psn::next(m.psn);
    q.counters.rx_packets++;
    port_.rx_placed_bytes += len;
    if (last) {
        q.msn = (q.msn + 1) & psn::kMask;
        q.counters.rx_messages++;
    }
    // ACK at the end of every message and whenever the requester asks; never per packet.
    if (last || hd.ack_req) rc_queue_ack(q, h, m.psn, wire::kAethAck);
}

// The responder's next packet: the ACK/NAK, READ response or ATOMIC ACK at the head of its queue.
bool VerbsEngine::rc_resp_next(VerbsQp& q, uint32_t h, TxPacket* out)
{
    RcResp& r = q.resp[q.resp_head];
    *out = TxPacket{};
    out->kind = TxPacket::Kind::Verbs;
    out->qp = h;
    out->meta.src_qp = q.qpn;
    out->meta.dest_qp = q.dest_qpn;
    out->meta.udp_src_port = tx_port(q, q.dest_qpn);
    out->remote_ip = q.remote.ip;
    out->remote_mac = q.remote.mac;
    if (r.kind == RcResp::Kind::Read) {
        // One READ response per MTU, each read from the region as it is now (checked again: it
        // may have been deregistered since the request).
        const VerbsMr* mr = verbs_mr(r.key);
        const uint8_t* at = mr ? mr->remote(r.va, r.len) : nullptr;
        if (!mr || mr->pd != q.pd || !(mr->access & verbs::kRemoteRead) || !at) {
            rc_responder_error(q, h, (r.psn + r.off / q.pmtu) & psn::kMask, wire::kNakRemoteAccess);
            return rc_resp_next(q, h, out);
        }
        const uint32_t n = std::min(q.pmtu, r.len - r.off);
        const bool first = r.off == 0, last = r.off + n == r.len;
        out->meta.opcode = first && last ? wire::kOpRcReadRespOnly
                           : first       ? wire::kOpRcReadRespFirst
                           : last        ? wire::kOpRcReadRespLast
                                         : wire::kOpRcReadRespMiddle;
        out->meta.psn = (r.psn + r.off / q.pmtu) & psn::kMask;
        out->meta.dma_len = n;
        out->meta.imm = wire::aeth(wire::kAethAck, q.msn);  // the AETH (verbs_encode)
        out->payload = n ? at + r.off : nullptr;
        q.counters.tx_read_responses++;
        r.off += n;
        if (!last) return true;
        q.rd_queued--;
        q.rd_dups -= r.dup;
    } else if (r.kind == RcResp::Kind::Atomic) {
        // AETH (ACK, MSN) and the AtomicAckETH: the original value, read by the encoder from
        // this entry (encode_padded), which nothing takes again before the packet is encoded.
        out->meta.opcode = wire::kOpRcAtomicAck;
        out->meta.psn = r.psn;
        out->meta.imm = wire::aeth(wire::kAethAck, q.msn);
        out->payload = reinterpret_cast<const uint8_t*>(&r.orig);
        q.rd_queued--;
        q.rd_dups -= r.dup;
    } else {
        out->meta.opcode = wire::kOpRcAck;
        out->meta.psn = r.psn;
        out->meta.imm = r.aeth;
        const uint32_t kind = r.aeth >> 29;  // 0 ACK, 1 RNR NAK, 3 NAK
        if (kind == 0) {
            q.counters.tx_acks++;
        } else {
            q.counters.tx_naks++;
            if (kind == 1) q.counters.tx_rnr_naks++;
        }
    }
    q.resp_head = (q.resp_head + 1) % kRcRespDepth;
    q.resp_n--;
    return true;
}

}  // namespace sdr::emu
