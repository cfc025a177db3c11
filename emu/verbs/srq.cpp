// Shared receive queues: ibv_create_srq, ibv_modify_srq, ibv_query_srq, ibv_destroy_srq and
// ibv_post_srq_recv (verbs.h's inline call through the context's ops), each onto the NIC
// model's SRQ (nic.hpp, "Shared receive queues") under the engine's lock.
#include "engine.hpp"

#include <cerrno>
#include <new>

namespace sdr::verbs {
namespace {

Srq* to_srq(ibv_srq* s) { return reinterpret_cast<Srq*>(s); }

}  // namespace

ibv_srq* create_srq(ibv_pd* ibpd, ibv_srq_init_attr* attr)
{
    Pd* pd = reinterpret_cast<Pd*>(ibpd);
    ibv_srq_attr& a = attr->attr;
    if (a.max_wr < 1 || a.max_wr > Limits::kMaxSrqWr || a.max_sge > Limits::kMaxSge || a.srq_limit > a.max_wr) {
        errno = EINVAL;
        return nullptr;
    }
    auto* s = new (std::nothrow) Srq{};
    if (!s) {
        errno = ENOMEM;
        return nullptr;
    }
    s->engine = pd->engine;
    s->max_wr = a.max_wr;
    s->max_sge = Limits::kMaxSge;
    s->async_fd = to_context(ibpd->context)->state->async_write_fd;
    {
        std::lock_guard lock(s->engine->lock());
        s->h = s->engine->nic().verbs().srq_create(pd->h, a.max_wr, a.srq_limit);
        if (s->h != emu::Nic::kNoHandle) s->engine->set_srq(s->h, s);
    }
    if (s->h == emu::Nic::kNoHandle) {
        delete s;
        errno = ENOMEM;  // every SRQ entry is in use (the PD is ours and live)
        return nullptr;
    }
    a.max_sge = s->max_sge;  // what it has, as verbs reports back
    s->srq.handle = s->h;
    return &s->srq;  // libibverbs fills context, srq_context, pd, the event counter and its mutex
}

// IBV_SRQ_LIMIT arms the limit (0 disarms). IBV_SRQ_MAX_WR would resize, which the device does
// not offer (no IBV_DEVICE_SRQ_RESIZE): EINVAL, as verbs specifies without that capability.
int modify_srq(ibv_srq* ibsrq, ibv_srq_attr* attr, int mask)
{
    Srq* s = to_srq(ibsrq);
    if ((mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) || (mask & IBV_SRQ_MAX_WR)) return EINVAL;
    if (!(mask & IBV_SRQ_LIMIT)) return 0;
    std::lock_guard lock(s->engine->lock());
    return s->engine->nic().verbs().srq_arm(s->h, attr->srq_limit);  // EINVAL above max_wr
}

int query_srq(ibv_srq* ibsrq, ibv_srq_attr* attr)
{
    Srq* s = to_srq(ibsrq);
    std::lock_guard lock(s->engine->lock());
    attr->max_wr = s->max_wr;
    attr->max_sge = s->max_sge;
    attr->srq_limit = s->engine->nic().verbs().srq_limit(s->h);  // 0 once the event fired
    return 0;
}

int destroy_srq(ibv_srq* ibsrq)
{
    Srq* s = to_srq(ibsrq);
    uint64_t events;
    {
        std::lock_guard lock(s->engine->lock());
        if (int err = s->engine->nic().verbs().srq_destroy(s->h)) return err;  // EBUSY while a QP uses it
        s->engine->set_srq(s->h, nullptr);
        events = s->async_read.load();
    }
    wait_async_acks(&ibsrq->mutex, &ibsrq->cond, &ibsrq->events_completed, events);
    delete s;
    return 0;
}

int post_srq_recv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr)
{
    Srq* s = to_srq(ibsrq);
    std::lock_guard lock(s->engine->lock());
    for (; wr; wr = wr->next) {
        int err = EINVAL;
        if (wr->num_sge >= 0 && static_cast<uint32_t>(wr->num_sge) <= s->max_sge) {
            mv::RecvWr r;
            r.wr_id = wr->wr_id;
            r.num_sge = static_cast<uint32_t>(wr->num_sge);
            for (int i = 0; i < wr->num_sge; i++)
                r.sg[i] = mv::Sge{wr->sg_list[i].addr, wr->sg_list[i].length, wr->sg_list[i].lkey};
            err = s->engine->nic().verbs().post_srq_recv(s->h, r);  // ENOMEM: the SRQ is full
        }
        if (err) {
            *bad_wr = wr;
            return err;
        }
    }
    return 0;
}

}  // namespace sdr::verbs
