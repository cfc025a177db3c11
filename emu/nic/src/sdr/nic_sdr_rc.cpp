// RC for SDR's transport QPs (IBTA vol. 1, 9.7, for single-packet WRITE-with-immediate
// messages): the published SDK sends its packets over RC unless SDR_USE_UC_QP is set, so that a
// lost packet is sent again by the NIC and a bare sdr_send never waits for it forever.
//
// Every SDR packet is a whole message (RDMA WRITE Only with Immediate), so the rules are short:
// - requester: PSNs [una, psn) are outstanding, their WQEs kept by PSN; an ACK retires them in
//   order (each signalled one completes to the firmware then, not when it left the port); a NAK
//   (PSN sequence error) retires what it covers and goes back to the PSN it names; a timeout
//   goes back to una, kSdrRcRetries times, then the QP fails and every WQE completes in error.
//   Packets sent again go ahead of new ones.
// - responder: the expected PSN is placed (the UC responder's root-key placement and CQE), a
//   duplicate is dropped and acknowledged again if it asks, a gap is dropped and NAK'd once.
//   ACKs are coalesced: one per kSdrRcAckEvery packets, or at a packet with AckReq, which the
//   requester sets when its queue for the QP runs dry (so the last packet of a burst is
//   acknowledged at once, not at the timeout).
// The UC path pays one test of the QP's rc flag per packet.

#include <sdr/emu/nic.hpp>
#include <sdr/emu/psn.hpp>

namespace sdr::emu {

namespace {

// AETH syndromes (IBTA 9.7.5.2.1): ACK with no credit limit, NAK with a code.
constexpr uint32_t kAethAck = 0x1F, kAethNak = 0x60;
constexpr uint8_t kNakPsnSequence = 0, kNakRemoteAccess = 2;

}  // namespace

// A WQE of an RC QP got its PSN (tx_next): kept until acknowledged; the timer runs while any is.
void Nic::sdr_rc_sent(TransportQp& q, uint32_t h, const hal_tx_wqe& w, TxPacket* out)
{
    out->meta.opcode = wire::kOpRcWriteOnlyImm;
    q.sent[out->meta.psn & (kSqDepth - 1)] = w;
    q.resend = q.psn;  // nothing older waits to be sent again (tx_next serves those first)
    q.in_port++;
    // AckReq when this QP has nothing more queued behind it, and every kSdrRcAckEvery packets.
    const uint32_t outstanding = psn::diff(q.psn, q.una);
    out->meta.ack_req = q.sq_used == outstanding || out->meta.psn % kSdrRcAckEvery == kSdrRcAckEvery - 1;
    if (!q.timer_ns) {
        q.timer_ns = exec_->now_ns() + q.rc_timeout_ns;
        sdr_rc_arm(q, h);
    }
}

bool Nic::sdr_rc_tx_next(TxPacket* out)
{
    while (!rc_acks_.empty()) {
        const uint32_t h = rc_acks_.front();
        rc_acks_.pop_front();
        rc_queued_--;
        TransportQp& q = qps_[h];
        q.ack_queued = false;
        if (!q.live) continue;
        *out = TxPacket{};
        out->kind = TxPacket::Kind::SdrAck;
        out->qp = h;
        PacketMeta& m = out->meta;
        m.opcode = wire::kOpRcAck;
        m.dest_qp = q.remote_qpn;
        // An ACK names the last PSN received in order; a NAK the one expected.
        m.psn = q.nak_code ? q.epsn : (q.epsn - 1) & psn::kMask;
        m.imm = ((q.nak_code ? kAethNak | (q.nak_code - 1u) : kAethAck) << 24) | (q.msn & psn::kMask);
        m.udp_src_port = tx_port(q);
        out->remote_ip = q.remote_ip;
        out->remote_mac = q.remote_mac;
        q.nak_code = 0;
        q.unacked_rx = 0;
        return true;
    }
    while (!rc_resends_.empty()) {
        const uint32_t h = rc_resends_.front();
        TransportQp& q = qps_[h];
        if (!q.live || q.rc_failed || psn::diff(q.resend, q.una) >= psn::diff(q.psn, q.una)) {
            rc_resends_.pop_front();
            rc_queued_--;
            q.resend_queued = false;
            continue;
        }
        const uint32_t psn = q.resend;
        q.resend = (q.resend + 1) & psn::kMask;
        const bool last = q.resend == q.psn;
        if (last) {
            rc_resends_.pop_front();
            rc_queued_--;
            q.resend_queued = false;
        }
        const hal_tx_wqe& w = q.sent[psn & (kSqDepth - 1)];
        if (w.length && !mr_covers(w.lkey, w.local_addr, w.length)) {  // deregistered since
            sdr_rc_fail(q);
            continue;
        }
        *out = TxPacket{};
        out->kind = TxPacket::Kind::Sdr;
        out->qp = h;
        out->cookie = w.cookie;
        PacketMeta& m = out->meta;
        m.opcode = wire::kOpRcWriteOnlyImm;
        m.dest_qp = q.remote_qpn;
        m.psn = psn;
        m.va = w.remote_va;
        m.rkey = w.rkey;
        m.dma_len = w.length;
        m.imm = w.imm;
        m.udp_src_port = tx_port(q);
        m.ack_req = last || psn % kSdrRcAckEvery == kSdrRcAckEvery - 1;
        if (dcqcn_on_) m.ecn = wire::kEcnEct0;  // a resend is data too (not paced: it repairs)
        out->remote_ip = q.remote_ip;
        out->remote_mac = q.remote_mac;
        out->payload = reinterpret_cast<const uint8_t*>(w.local_addr);
        q.in_port++;
        q.tx_retransmits++;
        return true;
    }
    return false;
}

void Nic::sdr_rc_queue_ack(TransportQp& q, uint32_t h, uint8_t nak_code)
{
    if (nak_code) q.nak_code = nak_code;
    if (q.ack_queued) return;  // the queued one will say the latest
    q.ack_queued = true;
    rc_acks_.push_back(h);
    rc_queued_++;
    exec_->tx_ready(*this);
}

void Nic::sdr_rc_receive(TransportQp& q, uint32_t h, const PacketMeta& m, const uint8_t* payload)
{
    const uint32_t d = psn::diff(m.psn, q.epsn);
    if (d == 0) {
        if (!place(q, m, payload)) return sdr_rc_queue_ack(q, h, 1 + kNakRemoteAccess);  // counted there
        q.epsn = psn::next(q.epsn);
        q.msn++;
        q.nak_sent = false;
        if (m.ack_req || ++q.unacked_rx >= kSdrRcAckEvery) sdr_rc_queue_ack(q, h, 0);
        return;
    }
    if (d < psn::kHalf) {  // ahead: a packet before it was lost; ask for it once
        drop(RxDrop::PsnSequence, &q);
        if (!q.nak_sent) {
            q.nak_sent = true;
            sdr_rc_queue_ack(q, h, 1 + kNakPsnSequence);
        }
        return;
    }
    drop(RxDrop::Duplicate, &q);  // behind: its ACK was lost or late
    if (m.ack_req) sdr_rc_queue_ack(q, h, 0);
}

void Nic::sdr_rc_ack(const PacketMeta& m, uint32_t aeth, const NicAddress& src)
{
    const uint32_t h = NicIds::qpn_index(m.dest_qp);
    if (m.dest_qp & NicIds::kCtrlQpnBit || h >= qps_.size() || qps_[h].rx.qpn != m.dest_qp || !qps_[h].live)
        return drop(RxDrop::UnknownQp, nullptr);
    TransportQp& q = qps_[h];
    if ((m.udp_src_port | q.rx.port_mask) != q.rx.peer_port || src.ip != q.remote_ip || src.mac != q.remote_mac)
        return drop(RxDrop::WrongPeer, &q);
    if (!q.rc) return drop(RxDrop::WrongOpcode, &q);
    const uint32_t outstanding = psn::diff(q.psn, q.una), syndrome = aeth >> 24;
    if ((syndrome >> 5) == 0) {  // ACK of every PSN up to m.psn
        if (psn::diff(m.psn, q.una) >= outstanding) return drop(RxDrop::StaleAck, &q);
        return sdr_rc_retire(q, m.psn);
    }
    if ((syndrome >> 5) != 3 || psn::diff(m.psn, q.una) > outstanding) return drop(RxDrop::StaleAck, &q);
    if ((syndrome & 0x1F) != kNakPsnSequence) return sdr_rc_fail(q);  // an access error is not retried
    // PSN sequence error: everything before m.psn arrived; send again from it.
    if (m.psn != q.una) sdr_rc_retire(q, (m.psn - 1) & psn::kMask);
    if (q.live && !q.rc_failed && m.psn != q.psn) sdr_rc_rewind(q, h, m.psn);
}

// PSNs up to through_psn are acknowledged: their WQEs complete in order.
void Nic::sdr_rc_retire(TransportQp& q, uint32_t through_psn)
{
    const uint32_t n = psn::diff(through_psn, q.una) + 1;
    for (uint32_t i = 0; i < n; i++) {
        const hal_tx_wqe& w = q.sent[q.una & (kSqDepth - 1)];
        q.una = (q.una + 1) & psn::kMask;
        q.sq_used--;
        complete_send(q, w.cookie, w.signaled, false);
    }
    if (psn::diff(q.resend, q.una) > psn::diff(q.psn, q.una)) q.resend = q.una;
    q.retry_left = kSdrRcRetries;
    q.timer_ns = q.una != q.psn ? exec_->now_ns() + q.rc_timeout_ns : 0;  // the armed timer re-arms to it
}

void Nic::sdr_rc_rewind(TransportQp& q, uint32_t h, uint32_t psn)
{
    q.resend = psn;
    if (!q.resend_queued) {
        q.resend_queued = true;
        rc_resends_.push_back(h);
        rc_queued_++;
    }
    exec_->tx_ready(*this);
}

// Retries exhausted, or the responder refused: every outstanding WQE completes in error, and so
// does every one still queued (tx_next fails them), as a verbs QP in the error state flushes.
void Nic::sdr_rc_fail(TransportQp& q)
{
    q.rc_failed = true;
    q.timer_ns = 0;
    while (q.una != q.psn) {
        const hal_tx_wqe& w = q.sent[q.una & (kSqDepth - 1)];
        q.una = (q.una + 1) & psn::kMask;
        q.sq_used--;
        port_.tx_local_errors++;
        complete_send(q, w.cookie, w.signaled, true);
    }
    q.resend = q.psn;
}

// The executor holds one timer per QP: armed when none is, and on firing it re-arms itself for
// the deadline then in force (every ACK moves the deadline; no executor call per ACK).
void Nic::sdr_rc_arm(TransportQp& q, uint32_t h)
{
    if (q.timer_armed) return;
    q.timer_armed = true;
    exec_->arm_timer(*this, kSdrRcTimerWorker, h, q.timer_ns);
}

void Nic::sdr_rc_timer(uint32_t h)
{
    if (h >= qps_.size()) return;
    TransportQp& q = qps_[h];
    q.timer_armed = false;
    if (!q.live || !q.rc || q.rc_failed || !q.timer_ns) return;
    if (exec_->now_ns() < q.timer_ns) return sdr_rc_arm(q, h);
    if (q.retry_left == 0) return sdr_rc_fail(q);
    q.retry_left--;
    sdr_rc_rewind(q, h, q.una);
    q.timer_ns = exec_->now_ns() + q.rc_timeout_ns;
    sdr_rc_arm(q, h);
}

}  // namespace sdr::emu
