// The verbs QPs (RC, UC and UD): creation with a random QPN in the verbs half of the control QPN
// space, the state machine RESET -> INIT -> RTR -> RTS (and ERR, which flushes both queues),
// posting to the send and receive queues.

#include <sdr/emu/verbs_engine.hpp>

#include <algorithm>
#include <cerrno>

namespace sdr::emu {

using verbs::QpAttr;
using verbs::QpState;
using verbs::QpType;
using verbs::WcOpcode;
using verbs::WcStatus;
using verbs::WrOpcode;

uint32_t VerbsEngine::qp_create(QpType type, uint32_t pd, uint32_t send_cq, uint32_t recv_cq, uint32_t sq_depth,
                              uint32_t rq_depth, uint32_t srq)
{
    if (pd >= vpds_.size() || !vpds_[pd].live) return kNoHandle;
    for (uint32_t cq : {send_cq, recv_cq})
        if (cq >= vcqs_.size() || !vcqs_[cq]) return kNoHandle;
    if (srq != kNoHandle) {
        if (srq >= vsrqs_.size() || !vsrqs_[srq]) return kNoHandle;
        rq_depth = 1;  // never used: its receives come from the SRQ
    }
    if (!sq_depth || !rq_depth || sq_depth > 16384 || rq_depth > 16384) return kNoHandle;
    size_t h = 0;
    while (h < vqps_.size() && vqps_[h] && vqps_[h]->live) h++;
    if (h >= kMaxVerbsQps) return kNoHandle;
    if (h == vqps_.size()) vqps_.emplace_back();
    uint32_t previous = vqps_[h] ? vqps_[h]->qpn : 0;
    if (vqps_[h]) retired_.add(vqps_[h]->counters);
    auto q = std::make_unique<VerbsQp>(sq_depth, rq_depth);
    q->queued = vqps_[h] && vqps_[h]->queued;  // the handle may still wait in verbs_active_
    q->type = type;
    // On a shared port the QPN must be ours alone: frames find their QP by it in every model.
    // 1023 tags per entry: a full draw fails only when other models hold them all.
    uint32_t tries = 0;
    do {
        q->qpn = ids_.ctrl_qpn(kVerbsQpnBit | static_cast<uint32_t>(h), previous);
    } while (share_ && !share_->claim_qpn(q->qpn) && ++tries < 4096);
    if (tries == 4096) return kNoHandle;
    q->pd = pd;
    q->send_cq = send_cq;
    q->recv_cq = recv_cq;
    q->srq = srq;
    if (type == QpType::Rc) {
        q->resp.resize(kRcRespDepth);
        q->atomic_cache.resize(kRcAtomicCache);
    }
    q->rp.reset(core_.dcqcn_, exec_->now_ns());  // line rate; DCQCN may be on now or later
    vqps_[h] = std::move(q);
    vpds_[pd].users++;
    if (srq != kNoHandle) vsrqs_[srq]->users++;
    vcqs_[send_cq]->users++;
    vcqs_[recv_cq]->users++;
    return static_cast<uint32_t>(h);
}

int VerbsEngine::qp_destroy(uint32_t h)
{
    VerbsQp* q = vqp(h);
    if (!q || !q->live) return EINVAL;
    if (q->mcast_groups) return EBUSY;  // as the kernel's uverbs: detach from every group first
    q->live = false;  // the entry keeps its QPN so that the next QP in it draws another
    if (share_) share_->release_qpn(q->qpn);
    vpds_[q->pd].users--;
    vcqs_[q->send_cq]->users--;
    vcqs_[q->recv_cq]->users--;
    if (q->srq != kNoHandle) vsrqs_[q->srq]->users--;
    return 0;
}

bool VerbsEngine::owns_qpn(uint32_t qpn) const
{
    if (!is_verbs_qpn(qpn)) return false;
    const VerbsQp* q = vqp(NicIds::qpn_index(qpn) & (kVerbsQpnBit - 1));
    return q && q->live && q->qpn == qpn;
}

uint32_t VerbsEngine::qpn(uint32_t h) const
{
    const VerbsQp* q = vqp(h);
    return q && q->live ? q->qpn : 0;
}

int VerbsEngine::qp_set_spray(uint32_t h, bool on)
{
    VerbsQp* q = vqp(h);
    if (!q || !q->live) return EINVAL;
    q->spray = on;
    return 0;
}

QpState VerbsEngine::qp_state(uint32_t h) const
{
    const VerbsQp* q = vqp(h);
    return q && q->live ? q->state : QpState::Reset;
}

const verbs::QpCountersVerbs* VerbsEngine::qp_counters(uint32_t h) const
{
    const VerbsQp* q = vqp(h);
    return q ? &q->counters : nullptr;
}

verbs::QpCountersVerbs VerbsEngine::qp_counters_total() const
{
    verbs::QpCountersVerbs t = retired_;
    for (const auto& q : vqps_)
        if (q) t.add(q->counters);
    return t;
}

static bool valid_mtu(uint32_t mtu) { return mtu >= 256 && mtu <= 4096 && (mtu & (mtu - 1)) == 0; }

// The transitions of the IBTA QP state machine this model has, and the attributes each one
// needs (ibv_modify_qp's required masks for RC, UC and UD); anything else is EINVAL.
int VerbsEngine::qp_modify(uint32_t h, const QpAttr& a, uint32_t mask)
{
    VerbsQp* q = vqp(h);
    if (!q || !q->live) return EINVAL;
    const QpState cur = q->state, next = (mask & QpAttr::kState) ? a.state : cur;
    const bool ud = q->type == QpType::Ud, rc = q->type == QpType::Rc;
    if ((mask & QpAttr::kPathMtu) && !valid_mtu(a.path_mtu)) return EINVAL;
    if (((mask & QpAttr::kTimeout) && a.timeout > 31) || ((mask & QpAttr::kRetryCnt) && a.retry_cnt > 7) ||
        ((mask & QpAttr::kRnrRetry) && a.rnr_retry > 7) || ((mask & QpAttr::kMinRnrTimer) && a.min_rnr_timer > 31) ||
        ((mask & QpAttr::kMaxRdAtomic) && a.max_rd_atomic > kRcMaxRdAtomic) ||
        ((mask & QpAttr::kMaxDestRdAtomic) && a.max_dest_rd_atomic > kRcMaxRdAtomic))
        return EINVAL;
    auto needs = [&](uint32_t m) { return (mask & m) == m; };
    switch (next) {
    case QpState::Reset:
        q->sq.clear();
        q->rq.clear();
        q->srq_bound = false;  // an SRQ's WQE taken for a message goes as the QP's own would
        q->state = QpState::Reset;  // rc_enter_err: no last-WQE event for a reset
        q->sq_next = q->sq.head();
        q->wqe_off = 0;
        q->in_msg = false;
        rc_enter_err(*q);  // RC: no timer, no queued responses
        q->msn = 0;
        q->resp_head = 0;
        std::fill(q->atomic_cache.begin(), q->atomic_cache.end(), AtomicResult{});  // a new connection's PSNs
        q->rd_rewound = 0xFFFFFFFF;
        q->state = QpState::Reset;
        return 0;
    case QpState::Err:
        rc_enter_err(*q);
        return 0;
    case QpState::Init:
        if (cur != QpState::Reset && cur != QpState::Init) return EINVAL;
        if (cur == QpState::Reset && !needs(ud ? QpAttr::kQkey : QpAttr::kAccess)) return EINVAL;
        break;
    case QpState::Rtr:
        if (cur != QpState::Init) return EINVAL;
        if (!ud && !needs(QpAttr::kPathMtu | QpAttr::kDestQpn | QpAttr::kRqPsn | QpAttr::kAv)) return EINVAL;
        if (rc && !needs(QpAttr::kMaxDestRdAtomic | QpAttr::kMinRnrTimer)) return EINVAL;
        break;
    case QpState::Rts:
        if (cur != QpState::Rtr && cur != QpState::Rts) return EINVAL;
        if (cur == QpState::Rtr && !needs(QpAttr::kSqPsn)) return EINVAL;
        if (rc && cur == QpState::Rts && (mask & QpAttr::kSqPsn)) return EINVAL;  // PSNs in flight
        if (rc && cur == QpState::Rtr &&
            !needs(QpAttr::kTimeout | QpAttr::kRetryCnt | QpAttr::kRnrRetry | QpAttr::kMaxRdAtomic))
            return EINVAL;
        break;
    }
    NicAddress remote = q->remote;
    if ((mask & QpAttr::kAv) && !resolve_gid(a.remote_gid, &remote)) return EINVAL;
    if (mask & QpAttr::kAccess) q->access = a.access;
    if (mask & QpAttr::kQkey) q->qkey = a.qkey;
    if (mask & QpAttr::kPathMtu) q->pmtu = a.path_mtu;
    if (mask & QpAttr::kRqPsn) q->epsn = a.rq_psn & 0xFFFFFF;
    if (mask & QpAttr::kSqPsn) q->sq_psn = a.sq_psn & 0xFFFFFF;
    if (mask & QpAttr::kDestQpn) q->dest_qpn = a.dest_qpn & 0xFFFFFF;
    if (mask & QpAttr::kTimeout) q->timeout = a.timeout;
    if (mask & QpAttr::kRetryCnt) q->retry_left = q->retry_cnt = a.retry_cnt;
    if (mask & QpAttr::kRnrRetry) q->rnr_left = q->rnr_retry = a.rnr_retry;
    if (mask & QpAttr::kMinRnrTimer) q->min_rnr_timer = a.min_rnr_timer;
    if (mask & QpAttr::kMaxRdAtomic) q->max_rd = a.max_rd_atomic;
    if (mask & QpAttr::kMaxDestRdAtomic) q->max_dest_rd = a.max_dest_rd_atomic;
    if (rc && next == QpState::Rts && cur == QpState::Rtr) q->una = q->psn_high = q->sq_psn;
    q->remote = remote;
    q->state = next;
    if (next == QpState::Rts && verbs_has_tx(*q)) verbs_doorbell(h);
    return 0;
}

// Every WQE still queued completes with WR_FLUSH_ERR, in order: sends first, then receives
// (a receive bound to a message in progress too: that message will never complete). An
// SRQ-attached QP flushes only the SRQ's WQE it had taken; the SRQ's others stay for its other QPs.
void VerbsEngine::verbs_flush(VerbsQp& q)
{
    for (uint64_t i = q.sq.tail(); i != q.sq.head(); i++) {
        verbs::Wc wc;
        wc.wr_id = q.sq.at(i).wr.wr_id;
        wc.status = WcStatus::WrFlushErr;
        wc.opcode = verbs::send_wc_opcode(q.sq.at(i).wr.opcode);
        wc.qp_num = q.qpn;
        verbs_complete(q.send_cq, wc);
        q.sq.pop();
    }
    q.sq_next = q.sq.tail();
    q.wqe_off = 0;
    while (!q.rq.empty()) {
        verbs::Wc wc;
        wc.wr_id = q.rq.front().wr_id;
        wc.status = WcStatus::WrFlushErr;
        wc.opcode = WcOpcode::Recv;
        wc.qp_num = q.qpn;
        verbs_complete(q.recv_cq, wc);
        q.rq.pop();
    }
    if (q.srq_bound) {
        verbs::Wc wc;
        wc.wr_id = q.srq_wqe.wr_id;
        wc.status = WcStatus::WrFlushErr;
        wc.opcode = WcOpcode::Recv;
        wc.qp_num = q.qpn;
        q.srq_bound = false;
        verbs_complete(q.recv_cq, wc);
    }
    q.in_msg = false;
}

int VerbsEngine::post_send(uint32_t h, const verbs::SendWr& wr)
{
    VerbsQp* q = vqp(h);
    if (!q || !q->live || wr.num_sge > verbs::kMaxSge) return EINVAL;
    const bool ud = q->type == QpType::Ud;
    const bool send = wr.opcode == WrOpcode::Send || wr.opcode == WrOpcode::SendWithImm;
    const bool rd_atomic = verbs::is_rd_atomic(wr.opcode);
    if (wr.opcode > WrOpcode::AtomicFetchAndAdd || (ud && !send)) return EINVAL;
    // RDMA READ and atomics: RC only, and only with READs and atomics allowed in flight
    // (max_rd_atomic > 0).
    if (rd_atomic && (q->type != QpType::Rc || (q->state == QpState::Rts && q->max_rd == 0))) return EINVAL;
    if (q->state != QpState::Rts && q->state != QpState::Err) return EINVAL;
    uint64_t total = 0;
    for (uint32_t i = 0; i < wr.num_sge; i++) total += wr.sg[i].length;
    if (total > (1u << 31)) return EINVAL;  // the IBTA's largest message
    // An atomic returns 8 bytes (IBTA 9.4.5): its SGEs must hold them; it is 8 bytes long.
    if (verbs::is_atomic(wr.opcode)) {
        if (total < 8) return EINVAL;
        total = 8;
    }
    if (ud && (total > q->pmtu || wr.ah >= vahs_.size() || !vahs_[wr.ah].live || vahs_[wr.ah].pd != q->pd))
        return EINVAL;
    if (!q->sq.push(VerbsSend{wr, static_cast<uint32_t>(total)})) return ENOMEM;
    if (q->state == QpState::Err) {
        verbs_flush(*q);  // verbs: a WQE posted in ERR completes flushed
        return 0;
    }
    verbs_doorbell(h);
    return 0;
}

int VerbsEngine::post_recv(uint32_t h, const verbs::RecvWr& wr)
{
    VerbsQp* q = vqp(h);
    if (!q || !q->live || wr.num_sge > verbs::kMaxSge || q->state == QpState::Reset) return EINVAL;
    if (q->srq != kNoHandle) return EINVAL;  // its receives are posted to the SRQ
    if (!q->rq.push(wr)) return ENOMEM;
    if (q->state == QpState::Err) verbs_flush(*q);
    return 0;
}

// Something for the requester to send: UC/UD a WQE in RTS; RC also a queued ACK or READ
// response (in RTR and RTS, and a last NAK in ERR), and its requests only while not paused.
bool VerbsEngine::verbs_has_tx(const VerbsQp& q) const
{
    if (q.type == QpType::Rc) return q.resp_n != 0 || rc_requester_ready(q);
    return q.state == QpState::Rts && q.sq_next != q.sq.head();
}

void VerbsEngine::verbs_doorbell(uint32_t h)
{
    VerbsQp& q = *vqps_[h];
    if (q.queued || !verbs_has_tx(q)) return;
    q.queued = true;
    verbs_active_.push_slot() = h;
    core_.engine_tx_ = true;
    exec_->tx_ready(nic_);
}

}  // namespace sdr::emu
