// Queue pairs and address handles: ibv_create_qp, ibv_modify_qp (the IBTA's attribute rules
// per transition, then the NIC model's state machine), ibv_query_qp, ibv_destroy_qp,
// ibv_attach_mcast, ibv_detach_mcast, ibv_create_ah and ibv_destroy_ah. A peer's GID is resolved to a next-hop MAC before the
// engine's lock is taken (the kernel may need to ask the network), so that the model's own
// resolution under the lock finds the answer at once.
#include "engine.hpp"

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>

namespace sdr::verbs {
namespace {

// SDR_VERBS_SPRAY: 1 sprays every new QP's packets over UDP source ports (VerbsEngine::
// qp_set_spray), unset or 0 does not; anything else is refused (the QP is not created), as a
// typo that silently kept one path would mislead a measurement.
bool spray_from_env(bool* on)
{
    const char* s = std::getenv("SDR_VERBS_SPRAY");
    if (!s || !std::strcmp(s, "0")) return *on = false, true;
    if (!std::strcmp(s, "1")) return *on = true, true;
    std::fprintf(stderr, "sdr verbs: SDR_VERBS_SPRAY='%s': expected 1 (spray packets over UDP source ports) or 0\n", s);
    return false;
}

// The model's transport for a verbs QP type; false for the ones it does not have (XRC, raw
// packet, driver QPs).
bool model_type(ibv_qp_type t, mv::QpType* out)
{
    switch (t) {
    case IBV_QPT_RC: *out = mv::QpType::Rc; return true;
    case IBV_QPT_UC: *out = mv::QpType::Uc; return true;
    case IBV_QPT_UD: *out = mv::QpType::Ud; return true;
    default: return false;
    }
}

enum Transport { kUd, kUc, kRc };
Transport transport_of(mv::QpType t)
{
    switch (t) {
    case mv::QpType::Ud: return kUd;
    case mv::QpType::Uc: return kUc;
    case mv::QpType::Rc: break;
    }
    return kRc;
}

// ibv_modify_qp's attribute rules (IBTA, as the Linux kernel's ib_modify_qp_is_ok applies
// them): per transition and transport the attributes required, and those also allowed. A
// transition absent here is invalid; so is an attribute outside both sets.
struct Rule {
    int req[3], opt[3];  // by Transport
};
constexpr int kInitAttrs[3] = {IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
                               IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
                               IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS};
constexpr int kRtsOpt[3] = {IBV_QP_CUR_STATE | IBV_QP_QKEY,
                            IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE,
                            IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
                                IBV_QP_MIN_RNR_TIMER};

bool rule_for(ibv_qp_state cur, ibv_qp_state next, Rule* r)
{
    *r = Rule{};
    if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) return true;  // from anywhere, no attributes
    if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) {
        std::copy(kInitAttrs, kInitAttrs + 3, r->req);
        return true;
    }
    if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT) {
        std::copy(kInitAttrs, kInitAttrs + 3, r->opt);
        return true;
    }
    if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
        constexpr int uc = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        *r = Rule{{0, uc, uc | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER},
                  {IBV_QP_PKEY_INDEX | IBV_QP_QKEY, IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
                   IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX}};
        return true;
    }
    if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
        *r = Rule{{IBV_QP_SQ_PSN, IBV_QP_SQ_PSN,
                   IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC},
                  {}};
        std::copy(kRtsOpt, kRtsOpt + 3, r->opt);
        return true;
    }
    if (cur == IBV_QPS_RTS && next == IBV_QPS_RTS) {
        std::copy(kRtsOpt, kRtsOpt + 3, r->opt);
        return true;
    }
    return false;  // SQD, SQE and the rest: the model has no such states
}

bool model_state(ibv_qp_state s, mv::QpState* out)
{
    switch (s) {
    case IBV_QPS_RESET: *out = mv::QpState::Reset; return true;
    case IBV_QPS_INIT: *out = mv::QpState::Init; return true;
    case IBV_QPS_RTR: *out = mv::QpState::Rtr; return true;
    case IBV_QPS_RTS: *out = mv::QpState::Rts; return true;
    case IBV_QPS_ERR: *out = mv::QpState::Err; return true;
    default: return false;
    }
}

ibv_qp_state verbs_state(mv::QpState s)
{
    switch (s) {
    case mv::QpState::Reset: return IBV_QPS_RESET;
    case mv::QpState::Init: return IBV_QPS_INIT;
    case mv::QpState::Rtr: return IBV_QPS_RTR;
    case mv::QpState::Rts: return IBV_QPS_RTS;
    case mv::QpState::Err: break;
    }
    return IBV_QPS_ERR;
}

uint32_t mtu_bytes(int mtu) { return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 0; }

mv::Gid gid_of(const ibv_gid& g)
{
    mv::Gid out;
    std::memcpy(out.data(), g.raw, out.size());
    return out;
}

// An address vector RoCEv2 can use: a GRH (the GID is the address) from a usable entry of the
// GID table (our IPv4-mapped RoCE v2 GID), on port 1.
int check_av(const PortInfo& port, const ibv_ah_attr& av)
{
    if (!av.is_global || (av.port_num != 0 && av.port_num != 1)) return EINVAL;
    return check_sgid_index(port, av.grh.sgid_index);
}

// ibv_qp_attr + mask -> the model's attributes, checking the values verbs defines. `port_mtu`
// is the largest path MTU the interface carries. Attributes the model has no use for (P_Key
// index, port, alternate path, migration state) are checked and otherwise accepted. RC's
// timeout, retry counts, RNR timer and READ depths go to the model as libibverbs numbers them.
int to_model_attr(const Qp& q, const ibv_qp_attr& a, int mask, uint32_t port_mtu, mv::QpAttr* out, uint32_t* mmask)
{
    using A = mv::QpAttr;
    *out = A{};
    *mmask = 0;
    if (mask & IBV_QP_STATE) {
        if (!model_state(a.qp_state, &out->state)) return EINVAL;
        *mmask |= A::kState;
    }
    if ((mask & IBV_QP_PKEY_INDEX) && a.pkey_index != 0) return EINVAL;  // one P_Key
    if ((mask & IBV_QP_PORT) && a.port_num != 1) return EINVAL;          // one port
    if (mask & IBV_QP_ACCESS_FLAGS) {
        out->access = static_cast<uint32_t>(a.qp_access_flags);
        *mmask |= A::kAccess;
    }
    if (mask & IBV_QP_QKEY) {
        out->qkey = a.qkey;
        *mmask |= A::kQkey;
    }
    if (mask & IBV_QP_PATH_MTU) {
        out->path_mtu = mtu_bytes(a.path_mtu);
        if (!out->path_mtu || out->path_mtu > port_mtu) return EINVAL;  // its packets would not fit the link
        *mmask |= A::kPathMtu;
    } else if (q.type == mv::QpType::Ud && (mask & IBV_QP_STATE) && a.qp_state == IBV_QPS_INIT) {
        // UD has no path MTU attribute: its messages are bounded by the port's (checked at post).
        out->path_mtu = port_mtu;
        *mmask |= A::kPathMtu;
    }
    if (mask & IBV_QP_RQ_PSN) {
        out->rq_psn = a.rq_psn;
        *mmask |= A::kRqPsn;
    }
    if (mask & IBV_QP_SQ_PSN) {
        out->sq_psn = a.sq_psn;
        *mmask |= A::kSqPsn;
    }
    if (mask & IBV_QP_DEST_QPN) {
        out->dest_qpn = a.dest_qp_num;
        *mmask |= A::kDestQpn;
    }
    if (mask & IBV_QP_AV) {  // checked by modify_qp (check_av)
        out->remote_gid = gid_of(a.ah_attr.grh.dgid);
        *mmask |= A::kAv;
    }
    if (mask & IBV_QP_TIMEOUT) {
        if (a.timeout > 31) return EINVAL;
        out->timeout = a.timeout;
        *mmask |= A::kTimeout;
    }
    if (mask & IBV_QP_RETRY_CNT) {
        if (a.retry_cnt > 7) return EINVAL;
        out->retry_cnt = a.retry_cnt;
        *mmask |= A::kRetryCnt;
    }
    if (mask & IBV_QP_RNR_RETRY) {
        if (a.rnr_retry > 7) return EINVAL;
        out->rnr_retry = a.rnr_retry;
        *mmask |= A::kRnrRetry;
    }
    if (mask & IBV_QP_MIN_RNR_TIMER) {
        if (a.min_rnr_timer > 31) return EINVAL;
        out->min_rnr_timer = a.min_rnr_timer;
        *mmask |= A::kMinRnrTimer;
    }
    // The READ depths: more than the model keeps is EINVAL (query_device reports its maximum).
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC) {
        if (a.max_rd_atomic > Limits::kMaxRdAtom) return EINVAL;
        out->max_rd_atomic = a.max_rd_atomic;
        *mmask |= A::kMaxRdAtomic;
    }
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) {
        if (a.max_dest_rd_atomic > Limits::kMaxRdAtom) return EINVAL;
        out->max_dest_rd_atomic = a.max_dest_rd_atomic;
        *mmask |= A::kMaxDestRdAtomic;
    }
    return 0;
}

// The attributes of a successful modify, kept for ibv_query_qp.
void remember(Qp& q, const ibv_qp_attr& a, int mask)
{
    ibv_qp_attr& c = q.attr;
    if (mask & IBV_QP_ACCESS_FLAGS) c.qp_access_flags = a.qp_access_flags;
    if (mask & IBV_QP_QKEY) c.qkey = a.qkey;
    if (mask & IBV_QP_PATH_MTU) c.path_mtu = a.path_mtu;
    if (mask & IBV_QP_RQ_PSN) c.rq_psn = a.rq_psn & 0xFFFFFF;
    if (mask & IBV_QP_SQ_PSN) c.sq_psn = a.sq_psn & 0xFFFFFF;
    if (mask & IBV_QP_DEST_QPN) c.dest_qp_num = a.dest_qp_num & 0xFFFFFF;
    if (mask & IBV_QP_AV) c.ah_attr = a.ah_attr;
    if (mask & IBV_QP_TIMEOUT) c.timeout = a.timeout;
    if (mask & IBV_QP_RETRY_CNT) c.retry_cnt = a.retry_cnt;
    if (mask & IBV_QP_RNR_RETRY) c.rnr_retry = a.rnr_retry;
    if (mask & IBV_QP_MIN_RNR_TIMER) c.min_rnr_timer = a.min_rnr_timer;
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC) c.max_rd_atomic = a.max_rd_atomic;
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) c.max_dest_rd_atomic = a.max_dest_rd_atomic;
}

Qp* to_qp(ibv_qp* qp) { return reinterpret_cast<Qp*>(qp); }

}  // namespace

ibv_qp* create_qp(ibv_pd* ibpd, ibv_qp_init_attr* attr)
{
    Pd* pd = reinterpret_cast<Pd*>(ibpd);
    mv::QpType type;
    if (!model_type(attr->qp_type, &type)) {  // XRC, raw packet: not here
        errno = EOPNOTSUPP;
        return nullptr;
    }
    Srq* srq = reinterpret_cast<Srq*>(attr->srq);
    if (srq && srq->srq.context != ibpd->context) {
        errno = EINVAL;
        return nullptr;
    }
    const ibv_qp_cap& want = attr->cap;
    if (!attr->send_cq || !attr->recv_cq || attr->send_cq->context != ibpd->context ||
        attr->recv_cq->context != ibpd->context || want.max_send_wr > Limits::kMaxQpWr ||
        (!srq && want.max_recv_wr > Limits::kMaxQpWr) || want.max_send_sge > Limits::kMaxSge ||
        (!srq && want.max_recv_sge > Limits::kMaxSge) || want.max_inline_data > Limits::kMaxInline) {
        errno = EINVAL;
        return nullptr;
    }
    bool spray = false;
    if (!spray_from_env(&spray)) {
        errno = EINVAL;
        return nullptr;
    }
    auto* q = new (std::nothrow) Qp{};
    if (!q) {
        errno = ENOMEM;
        return nullptr;
    }
    Engine* eng = pd->engine;
    q->engine = eng;
    q->type = type;
    q->sq_sig_all = attr->sq_sig_all != 0;
    // What the QP has, at least what was asked (as verbs reports it back in attr->cap).
    q->cap.max_send_wr = std::max(1u, want.max_send_wr);
    // With an SRQ the QP has no receive queue of its own: its receive capacities are 0 (verbs
    // ignores the requested ones) and ibv_post_recv on it is EINVAL.
    q->cap.max_recv_wr = srq ? 0 : std::max(1u, want.max_recv_wr);
    q->cap.max_send_sge = Limits::kMaxSge;
    q->cap.max_recv_sge = srq ? 0 : Limits::kMaxSge;
    q->async_fd = to_context(ibpd->context)->state->async_write_fd;
    q->cap.max_inline_data = Limits::kMaxInline;
    try {
        q->wr_ids.resize(q->cap.max_send_wr);
        q->inline_buf.resize(size_t{q->cap.max_send_wr} * Limits::kMaxInline);
    } catch (const std::bad_alloc&) {
        delete q;
        errno = ENOMEM;
        return nullptr;
    }
    int err = 0;
    {
        std::lock_guard lock(eng->lock());
        emu::Nic& nic = eng->nic();
        q->h = nic.verbs().qp_create(type, pd->h, reinterpret_cast<Cq*>(attr->send_cq)->h,
                                   reinterpret_cast<Cq*>(attr->recv_cq)->h, q->cap.max_send_wr,
                                   std::max(1u, q->cap.max_recv_wr), srq ? srq->h : emu::Nic::kNoHandle);
        if (q->h == emu::Nic::kNoHandle) {
            err = ENOMEM;  // every QP entry is in use (the PD and CQs are ours and live)
        } else {
            q->inline_key = nic.verbs().mr_reg(pd->h, q->inline_buf.data(), q->inline_buf.size(), 0);
            if (!q->inline_key) {
                (void)nic.verbs().qp_destroy(q->h);  // created just now, nothing uses it: cannot be busy
                err = ENOMEM;
            } else {
                (void)nic.verbs().qp_set_spray(q->h, spray);  // EINVAL only for a dead handle: created just now
                eng->set_qp(q->h, q);
                q->qp.qp_num = nic.verbs().qpn(q->h);
            }
        }
    }
    if (err) {
        delete q;
        errno = err;
        return nullptr;
    }
    attr->cap = q->cap;
    ibv_qp& v = q->qp;
    v.context = ibpd->context;
    v.qp_context = attr->qp_context;
    v.pd = ibpd;
    v.send_cq = attr->send_cq;
    v.recv_cq = attr->recv_cq;
    v.srq = attr->srq;
    v.handle = q->h;
    v.state = IBV_QPS_RESET;
    v.qp_type = attr->qp_type;
    pthread_mutex_init(&v.mutex, nullptr);
    pthread_cond_init(&v.cond, nullptr);
    v.events_completed = 0;
    return &v;
}

int modify_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int mask)
{
    Qp* q = to_qp(ibqp);
    Engine* eng = q->engine;
    if (mask & IBV_QP_AV) {
        if (int err = check_av(to_context(ibqp->context)->state->port, attr->ah_attr)) return err;
        if (int err = eng->resolve(attr->ah_attr.grh.dgid)) return err;  // EHOSTUNREACH, ETIMEDOUT
    }
    const ibv_mtu port = ibv_mtu_for(eng->netdev_mtu());
    mv::QpAttr m;
    uint32_t mmask;
    if (int err = to_model_attr(*q, *attr, mask, port ? mtu_bytes(port) : 256, &m, &mmask)) return err;
    // To RESET, the QP's completions leave its CQs, as mlx4 and mlx5 clean them (a QP brought
    // back to RTS would otherwise poll the flushes of its previous life first). Its CQs'
    // pollers are held off: their locks come before the engine's, in address order.
    const bool to_reset = (mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET;
    Cq* cqs[2] = {reinterpret_cast<Cq*>(ibqp->send_cq), reinterpret_cast<Cq*>(ibqp->recv_cq)};
    if (cqs[0] == cqs[1]) cqs[1] = nullptr;
    if (cqs[1] && cqs[1] < cqs[0]) std::swap(cqs[0], cqs[1]);
    std::unique_lock<std::mutex> poll0, poll1;
    if (to_reset) {
        poll0 = std::unique_lock(cqs[0]->mu);
        if (cqs[1]) poll1 = std::unique_lock(cqs[1]->mu);
    }
    std::lock_guard lock(eng->lock());
    emu::Nic& nic = eng->nic();
    const ibv_qp_state cur = verbs_state(nic.verbs().qp_state(q->h));  // the NIC may have moved it to ERR
    const ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
    Rule r;
    const Transport t = transport_of(q->type);
    const int given = mask & ~IBV_QP_STATE;
    if (!rule_for(cur, next, &r) || (given & r.req[t]) != r.req[t] || (given & ~(r.req[t] | r.opt[t])) != 0)
        return EINVAL;
    if (int err = nic.verbs().qp_modify(q->h, m, mmask)) return err;
    remember(*q, *attr, mask);
    if (next == IBV_QPS_RESET) q->retired = q->posted;  // the model emptied the queues
    if (to_reset)
        for (Cq* cq : cqs)
            if (cq) cq->consumed += nic.verbs().cq_clean(cq->h, ibqp->qp_num);  // never to be polled
    return 0;  // libibverbs records qp->state
}

int query_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int /*attr_mask*/, ibv_qp_init_attr* init)
{
    Qp* q = to_qp(ibqp);
    std::lock_guard lock(q->engine->lock());
    *attr = q->attr;
    attr->qp_state = verbs_state(q->engine->nic().verbs().qp_state(q->h));
    attr->cur_qp_state = attr->qp_state;
    attr->path_mig_state = IBV_MIG_MIGRATED;
    attr->cap = q->cap;
    attr->pkey_index = 0;
    attr->port_num = 1;
    *init = ibv_qp_init_attr{};
    init->qp_context = ibqp->qp_context;
    init->send_cq = ibqp->send_cq;
    init->recv_cq = ibqp->recv_cq;
    init->srq = ibqp->srq;
    init->cap = q->cap;
    init->qp_type = ibqp->qp_type;
    init->sq_sig_all = q->sq_sig_all;
    return 0;
}

int attach_mcast(ibv_qp* ibqp, const ibv_gid* gid, uint16_t)
{
    Qp* q = to_qp(ibqp);
    std::lock_guard lock(q->engine->lock());
    return q->engine->verbs().mcast_attach(q->h, gid_of(*gid));
}

int detach_mcast(ibv_qp* ibqp, const ibv_gid* gid, uint16_t)
{
    Qp* q = to_qp(ibqp);
    std::lock_guard lock(q->engine->lock());
    return q->engine->verbs().mcast_detach(q->h, gid_of(*gid));
}

int destroy_qp(ibv_qp* ibqp)
{
    Qp* q = to_qp(ibqp);
    uint64_t events;
    {
        std::lock_guard lock(q->engine->lock());
        emu::Nic& nic = q->engine->nic();
        if (int err = nic.verbs().qp_destroy(q->h)) return err;
        (void)nic.verbs().mr_dereg(q->inline_key);  // the QP's own inline region: nothing else holds it
        q->engine->set_qp(q->h, nullptr);
        events = q->async_read.load();
    }
    wait_async_acks(&ibqp->mutex, &ibqp->cond, &ibqp->events_completed, events);
    pthread_cond_destroy(&ibqp->cond);
    pthread_mutex_destroy(&ibqp->mutex);
    delete q;
    return 0;
}

ibv_ah* create_ah(ibv_pd* ibpd, ibv_ah_attr* attr)
{
    Pd* pd = reinterpret_cast<Pd*>(ibpd);
    int err = check_av(to_context(ibpd->context)->state->port, *attr);
    if (!err) err = pd->engine->resolve(attr->grh.dgid);
    if (err) {
        errno = err;
        return nullptr;
    }
    auto* ah = new (std::nothrow) Ah{};
    if (!ah) {
        errno = ENOMEM;
        return nullptr;
    }
    {
        std::lock_guard lock(pd->engine->lock());
        ah->h = pd->engine->nic().verbs().ah_create(pd->h, gid_of(attr->grh.dgid));
    }
    if (ah->h == emu::Nic::kNoHandle) {
        delete ah;
        errno = EHOSTUNREACH;  // the PD is ours and live: only the (repeated) resolution can fail
        return nullptr;
    }
    ah->ah.handle = ah->h;
    return &ah->ah;  // libibverbs fills context and pd
}

int destroy_ah(ibv_ah* ibah)
{
    Ah* ah = reinterpret_cast<Ah*>(ibah);
    Engine* eng = reinterpret_cast<Pd*>(ibah->pd)->engine;
    {
        std::lock_guard lock(eng->lock());
        if (int err = eng->verbs().ah_destroy(ah->h)) return err;
    }
    delete ah;
    return 0;
}

}  // namespace sdr::verbs
