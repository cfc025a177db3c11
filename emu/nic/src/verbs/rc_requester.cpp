// RC requester (IBTA vol. 1, 9.7): request packets of the send queue's WQEs, retirement at the
// ACK that covers a WQE's last PSN, go-back-N from a NAK'd or timed-out PSN, the retransmission
// timer with retry_cnt, RNR NAKs with rnr_retry and the responder's RNR timer, and the error
// completions that move the QP to ERR.

#include <sdr/emu/verbs_engine.hpp>
#include <sdr/emu/psn.hpp>

#include <algorithm>

namespace sdr::emu {

using verbs::QpState;
using verbs::WcOpcode;
using verbs::WcStatus;
using verbs::WrOpcode;

namespace {

// b - a in 24-bit serial arithmetic (how far b is past a).
// PSNs outstanding at most: well inside half the 24-bit space, where serial comparisons hold
// (a READ's request takes as many PSNs as it has responses, up to 2^23 for 2 GiB at MTU 256).
constexpr uint32_t kMaxOutstandingPsns = 1u << 22;

// The RNR NAK timer codes of the IBTA (table 45), in microseconds: 0 is the longest.
constexpr uint32_t kRnrTimerUs[32] = {655360, 10,    20,    30,    40,    60,     80,     120,
                                      160,    240,   320,   480,   640,   960,    1280,   1920,
                                      2560,   3840,  5120,  7680,  10240, 15360,  20480,  30720,
                                      40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};

// The local ACK timeout: 4.096 us * 2^timeout (IBTA), at least VerbsEngine::kRcMinTimeoutNs.
uint64_t timeout_ns(uint8_t timeout) { return std::max<uint64_t>(uint64_t{4096} << timeout, VerbsEngine::kRcMinTimeoutNs); }

}  // namespace

// The requester may send its next request: RTS, not waiting out an RNR NAK, a WQE left, fewer
// than kMaxOutstandingPsns outstanding, a READ or atomic only while fewer than max_rd_atomic
// of them are, and a fenced WQE only once none is (rd_out counts those before sq_next).
bool VerbsEngine::rc_requester_ready(const VerbsQp& q) const
{
    if (q.state != QpState::Rts || q.rnr_wait || q.sq_next == q.sq.head()) return false;
    if (psn::diff(q.sq_psn, q.una) >= kMaxOutstandingPsns) return false;
    const VerbsSend& e = q.sq.at(q.sq_next);
    if (e.wr.fence && q.rd_out) return false;
    return !verbs::is_rd_atomic(e.wr.opcode) || q.rd_out < q.max_rd;
}

bool VerbsEngine::rc_tx_next(VerbsQp& q, uint32_t h, TxPacket* out)
{
    if (q.resp_n) return rc_resp_next(q, h, out);  // ACKs and READ responses go first
    if (!rc_requester_ready(q)) return false;
    VerbsSend& e = q.sq.at(q.sq_next);
    const verbs::SendWr& w = e.wr;
    const bool read = w.opcode == WrOpcode::RdmaRead, atomic = verbs::is_atomic(w.opcode);
    *out = TxPacket{};
    out->kind = TxPacket::Kind::Verbs;
    out->qp = h;
    out->cookie = static_cast<uint32_t>(q.sq_next);
    out->meta.src_qp = q.qpn;  // tx_done's check that the QP is still the same
    if (q.wqe_off == 0) {
        // Local protection once per (re)start of a WQE: a READ's and an atomic's SGEs need
        // local write (the response lands there).
        uint32_t total;
        const uint32_t need = read || atomic ? uint32_t{verbs::kLocalWrite} : 0u;
        if (!verbs_sges_ok(q.pd, w.sg.data(), w.num_sge, need, &total)) {
            out->local_error = true;
            out->signaled = true;
            q.state = QpState::Err;  // nothing more leaves; tx_done fails the WQE and flushes
            return true;
        }
        e.psn = q.sq_psn;
        e.rd_done = 0;
        e.sent = true;
    }
    PacketMeta& m = out->meta;
    m.dest_qp = q.dest_qpn;
    m.psn = q.sq_psn;
    m.udp_src_port = tx_port(q, q.dest_qpn);
    out->remote_ip = q.remote.ip;
    out->remote_mac = q.remote.mac;
    out->ack_req = true;
    if (read) {
        // One request for the rest of the READ (all of it, or from the first response missing
        // after a rewind); its responses take one PSN each.
        m.opcode = wire::kOpRcReadRequest;
        m.va = w.remote_addr + q.wqe_off;
        m.rkey = w.rkey;
        out->reth_len = e.total - q.wqe_off;
        q.sq_psn = (q.sq_psn + rc_npkts(out->reth_len, q.pmtu)) & psn::kMask;
        q.sq_next++;
        q.wqe_off = 0;
        q.rd_out++;
    } else if (atomic) {
        // One packet, one PSN; the AtomicETH's data travel through the payload pointer
        // (encode_padded), the WQE's own copy, which stays until the ATOMIC ACK retires it.
        m.opcode = w.opcode == WrOpcode::AtomicCmpAndSwp ? wire::kOpRcCmpSwap : wire::kOpRcFetchAdd;
        m.va = w.remote_addr;
        m.rkey = w.rkey;
        e.atomic_eth[0] = w.opcode == WrOpcode::AtomicCmpAndSwp ? w.swap : w.compare_add;
        e.atomic_eth[1] = w.opcode == WrOpcode::AtomicCmpAndSwp ? w.compare_add : 0;
        out->payload = reinterpret_cast<const uint8_t*>(e.atomic_eth);
        q.sq_psn = psn::next(q.sq_psn);
        q.sq_next++;
        q.rd_out++;
    } else {
        const uint32_t len = std::min(q.pmtu, e.total - q.wqe_off);
        const bool first = q.wqe_off == 0, last = q.wqe_off + len == e.total;
        m.opcode = verbs_data_opcode(w.opcode, first, last, true);
        if (first && (w.opcode == WrOpcode::RdmaWrite || w.opcode == WrOpcode::RdmaWriteWithImm)) {
            m.va = w.remote_addr;
            m.rkey = w.rkey;
            out->reth_len = e.total;
        }
        m.dma_len = len;
        if (wire::has_imm(m.opcode)) m.imm = w.imm;
        m.solicited = last && w.solicited;
        out->payload = verbs_payload(w, q.wqe_off, len);
        // AckReq: at the end of every message, and every kRcAckReqEvery packets of a long one,
        // so that its ACKs keep the retransmission timer from expiring while it streams.
        out->ack_req = last || psn::diff(m.psn, e.psn) % kRcAckReqEvery == kRcAckReqEvery - 1;
        q.sq_psn = psn::next(q.sq_psn);
        if (last) {
            q.sq_next++;
            q.wqe_off = 0;
        } else {
            q.wqe_off += len;
        }
    }
    if (psn::diff(m.psn, q.una) < psn::diff(q.psn_high, q.una)) q.counters.retransmits++;
    if (psn::diff(q.sq_psn, q.una) > psn::diff(q.psn_high, q.una)) q.psn_high = q.sq_psn;
    if (!q.timer_ns && q.timeout) {
        rc_arm(q, h, exec_->now_ns() + timeout_ns(q.timeout));
    }
    return true;
}

// The deadline moves with every ACK that makes progress, but the executor's timer is armed only
// when none is pending or the new deadline is earlier: a timer that fires early re-arms itself
// for the deadline then in force (timer). So an ACK costs no executor call.
void VerbsEngine::rc_arm(VerbsQp& q, uint32_t h, uint64_t deadline_ns)
{
    q.timer_ns = deadline_ns;
    if (q.timer_set && q.timer_set <= deadline_ns) return;
    q.timer_set = deadline_ns;
    exec_->arm_timer(nic_, kVerbsTimerWorker, h, deadline_ns);  // re-arming replaces the earlier one
}

// Every PSN up to `psn` is acknowledged: sent WQEs whose last PSN it covers complete in order
// (also ones a rewind is about to send again: the requester then skips ahead). A READ completes
// only with its last response (verbs/rc_read.cpp) and is acknowledged only as far as its
// responses landed: an ACK past a READ whose responses did not all arrive means they were
// lost, so the requester asks again from the first one missing (false: it rewound). An atomic
// is a READ of one response, its ATOMIC ACK (verbs/rc_atomic.cpp): an ACK past it asks again,
// and the responder answers from its result cache.
bool VerbsEngine::rc_retire(VerbsQp& q, uint32_t h, uint32_t psn)
{
    const uint32_t outstanding = psn::diff(q.psn_high, q.una);
    if (psn::diff(psn + 1, q.una) > outstanding) return true;  // behind una (nothing new) or stale
    uint32_t una = psn::next(psn);
    bool rewound = false;
    while (!q.sq.empty() && q.sq.front().sent) {
        VerbsSend& e = q.sq.front();
        if (verbs::is_rd_atomic(e.wr.opcode)) {
            // acknowledged up to its first missing response at most
            const uint32_t missing = (e.psn + e.rd_done / q.pmtu) & psn::kMask;
            if (psn::diff(una, missing) - 1 < outstanding) {
                una = missing;
                if (q.rd_rewound != missing) {  // once per gap (the timer covers a lost request)
                    q.rd_rewound = missing;
                    rewound = true;
                }
            }
            break;
        }
        const uint32_t k = psn::diff(psn, e.psn);
        if (k >= psn::kHalf || k < rc_npkts(e.total, q.pmtu) - 1) break;  // its last PSN is not covered
        verbs::Wc wc;
        wc.wr_id = e.wr.wr_id;
        wc.opcode = verbs::send_wc_opcode(e.wr.opcode);
        wc.byte_len = e.total;
        wc.qp_num = q.qpn;
        q.counters.tx_messages++;
        const bool signaled = e.wr.signaled;
        if (q.sq.tail() == q.sq_next) {  // it was about to go again: skip it
            q.sq_next++;
            q.wqe_off = 0;
        }
        q.sq.pop();
        if (signaled) verbs_complete(q.send_cq, wc);
    }
    if (psn::diff(una, q.una) == 0 && !rewound) return true;
    if (psn::diff(una, q.una) != 0) {
        q.una = una;
        // Progress: the retry budgets start again, the timer restarts (or stops: all acknowledged).
        q.retry_left = q.retry_cnt;
        q.rnr_left = q.rnr_retry;
        if (q.una == q.psn_high) {
            q.timer_ns = 0;
        } else if (q.timeout) {
            rc_arm(q, h, exec_->now_ns() + timeout_ns(q.timeout));
        }
    }
    // A rewound requester never sends what is acknowledged: it resumes at una at the earliest.
    if (rewound || psn::diff(q.sq_psn, q.una) > psn::diff(q.psn_high, q.una)) rc_rewind(q, h, q.una);
    verbs_doorbell(h);  // a READ slot or the window may have opened
    return !rewound;
}

// Go-back-N: the next packet sent is `psn`, in whichever sent WQE holds it (or the first WQE
// not sent yet).
void VerbsEngine::rc_rewind(VerbsQp& q, uint32_t h, uint32_t psn)
{
    uint64_t i = q.sq.tail();
    uint32_t off = 0;
    for (; i != q.sq.head() && q.sq.at(i).sent; i++) {
        const VerbsSend& e = q.sq.at(i);
        const uint32_t k = psn::diff(psn, e.psn);
        if (k < rc_npkts(e.total, q.pmtu)) {
            off = std::min(e.total, k * q.pmtu);
            break;
        }
    }
    q.sq_next = i;
    q.wqe_off = off;
    if (i != q.sq.head() && q.sq.at(i).wr.opcode == WrOpcode::RdmaRead) q.sq.at(i).rd_done = off;
    q.sq_psn = psn & psn::kMask;
    q.rd_out = 0;
    for (uint64_t j = q.sq.tail(); j != i; j++) q.rd_out += verbs::is_rd_atomic(q.sq.at(j).wr.opcode);
    verbs_doorbell(h);
}

// ACK, RNR NAK or NAK from the responder for `psn` (IBTA 9.7.5.1).
void VerbsEngine::rc_ack_received(VerbsQp& q, uint32_t h, uint32_t psn, uint32_t aeth)
{
    // Valid: from una - 1 (a repeated ACK) to the last PSN sent.
    if (psn::diff(psn + 1, q.una) > psn::diff(q.psn_high, q.una)) return verbs_drop(RxDrop::StaleAck, &q);
    const uint32_t syndrome = aeth >> 24;
    switch (syndrome >> 5) {
    case 0:  // ACK
        q.counters.rx_acks++;
        rc_retire(q, h, psn);
        return;
    case 1: {  // RNR NAK: wait the responder's timer, then go back to psn
        q.counters.rx_naks++;
        q.counters.rx_rnr_naks++;
        if (!rc_retire(q, h, psn - 1)) return;
        if (q.rnr_retry != 7) {  // 7: retry forever
            if (q.rnr_left == 0) return rc_fail(q, q.sq.tail(), WcStatus::RnrRetryExcErr);
            q.rnr_left--;
        }
        rc_rewind(q, h, psn);
        q.rnr_wait = true;
        rc_arm(q, h, exec_->now_ns() + uint64_t{kRnrTimerUs[syndrome & 31]} * 1000);
        return;
    }
    case 3: {  // NAK
        q.counters.rx_naks++;
        if (!rc_retire(q, h, psn - 1)) return;
        switch (syndrome & 31) {
        case wire::kNakPsnSequence:
            if (q.retry_left == 0) return rc_fail(q, q.sq.tail(), WcStatus::RetryExcErr);
            q.retry_left--;
            // una behind the NAK's PSN: a READ or atomic before it still misses responses (its
            // request asked again once already, and lost again). Go back to it, or the NAKs
            // of the requests after it would spend the retries while it waits for the timer.
            return rc_rewind(q, h, q.una);
        case wire::kNakInvalidRequest: return rc_fail(q, q.sq.tail(), WcStatus::RemInvReqErr);
        case wire::kNakRemoteAccess: return rc_fail(q, q.sq.tail(), WcStatus::RemAccessErr);
        default: return rc_fail(q, q.sq.tail(), WcStatus::RemOpErr);
        }
    }
    default: return verbs_drop(RxDrop::StaleAck, &q);  // reserved syndromes
    }
}

// The retransmission timer (no ACK for the oldest outstanding PSN in time) or the end of an
// RNR wait.
void VerbsEngine::timer(uint32_t h)
{
    if (h == kGsiTimerId) [[unlikely]] {  // QP1's agent (gsi.hpp)
        if (gsi_) gsi_->gsi_timer();
        return core_.note_host_event();
    }
    VerbsQp* qp = vqp(h);
    if (!qp || qp->type != verbs::QpType::Rc) return;
    qp->timer_set = 0;  // (executors deliver only the timer armed last)
    if (!qp->live || qp->state != QpState::Rts || !qp->timer_ns) return;  // stopped
    VerbsQp& q = *qp;
    if (exec_->now_ns() < q.timer_ns) {  // moved later since: wait for that
        q.timer_set = q.timer_ns;
        exec_->arm_timer(nic_, kVerbsTimerWorker, h, q.timer_ns);
        return;
    }
    q.timer_ns = 0;
    if (q.rnr_wait) {
        q.rnr_wait = false;
        verbs_doorbell(h);
        return;
    }
    if (q.una == q.psn_high) return;  // all acknowledged
    q.counters.timeouts++;
    if (q.retry_left == 0) return rc_fail(q, q.sq.tail(), WcStatus::RetryExcErr);
    q.retry_left--;
    rc_rewind(q, h, q.una);
    if (q.timeout) rc_arm(q, h, exec_->now_ns() + timeout_ns(q.timeout));
}

// WQE idx fails with `st` (the ones before it, still unacknowledged, are flushed); the QP goes
// to ERR and everything else is flushed.
void VerbsEngine::rc_fail(VerbsQp& q, uint64_t idx, WcStatus st)
{
    while (!q.sq.empty() && q.sq.tail() <= idx) {
        const VerbsSend& e = q.sq.front();
        verbs::Wc wc;
        wc.wr_id = e.wr.wr_id;
        wc.status = q.sq.tail() == idx ? st : WcStatus::WrFlushErr;
        wc.opcode = verbs::send_wc_opcode(e.wr.opcode);
        wc.qp_num = q.qpn;
        verbs_complete(q.send_cq, wc);
        q.sq.pop();
    }
    rc_enter_err(q);
}

// ERR (or RESET): the timer stops, queued responses are dropped, both queues flush. An
// SRQ-attached QP that enters ERR from a working state raises the last-WQE-reached event
// (IBTA 10.2.9.5): it takes no more WQEs of the SRQ, and the one it had is flushed here.
void VerbsEngine::rc_enter_err(VerbsQp& q)
{
    const bool last_wqe = q.srq != kNoHandle && q.state != QpState::Err && q.state != QpState::Reset;
    q.timer_ns = 0;
    q.rnr_wait = false;
    q.rd_out = 0;
    q.resp_n = 0;
    q.rd_queued = 0;
    q.rd_dups = 0;
    q.nak_sent = false;
    q.state = QpState::Err;
    verbs_flush(q);
    if (last_wqe)
        exec_->verbs_async_event(verbs::AsyncEvent::QpLastWqeReached,
                                 NicIds::qpn_index(q.qpn) & (kVerbsQpnBit - 1));  // its handle
}

}  // namespace sdr::emu
