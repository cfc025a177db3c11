// Asynchronous events (ibv_get_async_event, ibv_ack_async_event). libibverbs reads the kernel's
// record, struct ib_uverbs_async_event_desc (element u64, event_type u32, reserved u32), from
// context.async_fd, maps element to the CQ, QP or SRQ pointer by the event's type, and calls
// the provider's async_event op. With no kernel the provider makes that fd a pipe of its own,
// and the NIC model's events (emu::NicExecutor::verbs_async_event, under the engine's lock)
// write records into it: the CQ's, QP's or SRQ's verbs pointer as element. The pipe is
// pollable as the kernel's fd is, and blocking for the reader as the kernel's is by default.
#include "engine.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sdr::verbs {
namespace {

// The kernel's record (include/uapi/rdma/ib_user_verbs.h), as libibverbs reads it.
struct AsyncRecord {
    uint64_t element;
    uint32_t event_type;
    uint32_t reserved;
};
static_assert(sizeof(AsyncRecord) == 16);

}  // namespace

int open_async_pipe(ContextState* st, int* read_fd)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return errno;
    // The NIC's thread writes: it must never block on a pipe the program does not read.
    if (fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0) {
        const int err = errno;
        close(fds[0]);
        close(fds[1]);
        return err;
    }
    *read_fd = fds[0];
    st->async_write_fd = fds[1];
    return 0;
}

// 16 bytes, below PIPE_BUF: written whole or not at all. A pipe full of 4096 unread records
// loses the next rather than stopping the NIC.
void write_async_event(int fd, const void* element, uint32_t event_type)
{
    if (fd < 0) return;
    const AsyncRecord r{reinterpret_cast<uintptr_t>(element), event_type, 0};
    const ssize_t n = write(fd, &r, sizeof r);
    (void)n;
}

void wait_async_acks(pthread_mutex_t* mu, pthread_cond_t* cond, const uint32_t* completed, uint64_t read)
{
    pthread_mutex_lock(mu);
    while (*completed < read) pthread_cond_wait(cond, mu);
    pthread_mutex_unlock(mu);
}

// ibv_get_async_event read a record: count it on its object, for destroy to wait for its ack.
void async_event(ibv_context*, ibv_async_event* event)
{
    switch (event->event_type) {
    case IBV_EVENT_CQ_ERR: reinterpret_cast<Cq*>(event->element.cq)->async_read.fetch_add(1); break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED: reinterpret_cast<Qp*>(event->element.qp)->async_read.fetch_add(1); break;
    case IBV_EVENT_SRQ_LIMIT_REACHED: reinterpret_cast<Srq*>(event->element.srq)->async_read.fetch_add(1); break;
    default: break;  // no other event is raised
    }
}

// Lock held: an event of the model's object `h`, to the context that owns the object.
void Engine::on_async(mv::AsyncEvent ev, uint32_t h)
{
    const uint32_t type = static_cast<uint32_t>(ev);
    switch (ev) {
    case mv::AsyncEvent::CqErr:
        if (Cq* cq = h < cqs_.size() ? cqs_[h] : nullptr) write_async_event(cq->async_fd, &cq->vcq.cq, type);
        return;
    case mv::AsyncEvent::SrqLimitReached:
        if (Srq* s = h < srqs_.size() ? srqs_[h] : nullptr) write_async_event(s->async_fd, &s->srq, type);
        return;
    case mv::AsyncEvent::QpFatal:
    case mv::AsyncEvent::QpReqErr:
    case mv::AsyncEvent::QpAccessErr:
    case mv::AsyncEvent::QpLastWqeReached:
        if (Qp* q = h < qps_.size() ? qps_[h] : nullptr) write_async_event(q->async_fd, &q->qp, type);
        return;
    }
}

}  // namespace sdr::verbs
