// Protection domains, memory regions and completion queues with their completion channels:
// each one the NIC model's object (nic.hpp, "verbs objects"), created and destroyed under the
// engine's lock.
#include "engine.hpp"

#include <sdr/verbs/sdr_ucma.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <new>

namespace sdr::verbs {
namespace {

// The access the NIC model checks (IBV_ACCESS_* numbering is the model's, mv::Access); the
// bits of IBV_ACCESS_OPTIONAL_RANGE (relaxed ordering) are hints a device may ignore, as the
// kernel's drivers do.
constexpr int kSupportedAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// 0, or the errno ibv_reg_mr and ibv_rereg_mr give for an access value.
int check_access(int access)
{
    // IBTA: remote write or atomic access needs local write access.
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
        return EINVAL;
    if (access & ~(kSupportedAccess | IBV_ACCESS_OPTIONAL_RANGE)) return EOPNOTSUPP;  // MW bind, ODP, zero-based ...
    return 0;
}

bool range_ok(const void* addr, size_t length)
{
    return length != 0 && length <= Limits::kMaxMrSize && reinterpret_cast<uintptr_t>(addr) + length >= length;
}

}  // namespace

ibv_pd* alloc_pd(ibv_context* context)
{
    Engine* eng = context_engine(context);
    if (!eng) return nullptr;
    auto* pd = new (std::nothrow) Pd{};
    if (!pd) {
        errno = ENOMEM;
        return nullptr;
    }
    pd->engine = eng;
    {
        std::lock_guard lock(eng->lock());
        pd->h = eng->verbs().pd_alloc();
    }
    if (pd->h == emu::Nic::kNoHandle) {
        delete pd;
        errno = ENOMEM;
        return nullptr;
    }
    pd->pd.handle = pd->h;
    return &pd->pd;  // libibverbs fills context
}

int dealloc_pd(ibv_pd* ibpd)
{
    auto* pd = reinterpret_cast<Pd*>(ibpd);
    int err;
    {
        std::lock_guard lock(pd->engine->lock());
        err = pd->engine->nic().verbs().pd_dealloc(pd->h);  // EBUSY while a region, AH or QP uses it
    }
    if (err) return err;
    delete pd;
    return 0;
}

ibv_mr* reg_mr(ibv_pd* ibpd, void* addr, size_t length, uint64_t hca_va, int access)
{
    if (int err = check_access(access)) {
        errno = err;
        return nullptr;
    }
    if (!range_ok(addr, length)) {
        errno = EINVAL;
        return nullptr;
    }
    auto* mr = new (std::nothrow) Mr{};
    if (!mr) {
        errno = ENOMEM;
        return nullptr;
    }
    Pd* pd = reinterpret_cast<Pd*>(ibpd);
    uint32_t key;
    {
        std::lock_guard lock(pd->engine->lock());
        // An iova other than the address (ibv_reg_mr_iova: a zero-based region, say) is where
        // remote requests address it; local SGEs cannot name such a region (VerbsEngine::mr_reg).
        key = pd->engine->nic().verbs().mr_reg(pd->h, addr, length, static_cast<uint32_t>(access & kSupportedAccess),
                                               hca_va);
    }
    if (key == 0) {  // all 2^16 keys live
        delete mr;
        errno = ENOMEM;
        return nullptr;
    }
    mr->vmr.mr_type = SDR_IBV_MR_TYPE_MR;
    mr->vmr.access = access;
    mr->iova = hca_va;
    mr->vmr.ibv_mr.lkey = key;
    mr->vmr.ibv_mr.rkey = key;
    mr->vmr.ibv_mr.handle = key;
    return &mr->vmr.ibv_mr;  // libibverbs fills context, pd, addr and length
}

namespace {

int rereg(verbs_mr* vmr, int flags, ibv_pd* new_pd, void* addr, size_t length, int access)
{
    // libibverbs has checked the flags and that addr/length come exactly with
    // CHANGE_TRANSLATION; it updates mr->pd, addr and length after success.
    ibv_mr& m = vmr->ibv_mr;
    Pd* pd = reinterpret_cast<Pd*>(m.pd);
    if (flags & IBV_REREG_MR_CHANGE_PD) {
        if (!new_pd || new_pd->context != m.context) return EINVAL;
        pd = reinterpret_cast<Pd*>(new_pd);
    }
    if (!(flags & IBV_REREG_MR_CHANGE_ACCESS)) access = vmr->access;
    if (int err = check_access(access)) return err;
    if (!(flags & IBV_REREG_MR_CHANGE_TRANSLATION)) {
        addr = m.addr;
        length = m.length;
    } else if (!range_ok(addr, length)) {
        return EINVAL;
    }
    Mr* mr = reinterpret_cast<Mr*>(vmr);
    uint64_t iova = mr->iova;
    Engine* eng = pd->engine;
    int err;
    {
        std::lock_guard lock(eng->lock());
        // The key stays: what the peer holds addresses the new translation from now on. Remote
        // requests address a new translation at its own address (as the kernel's hca_va);
        // otherwise the IOVA stays.
        if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) iova = reinterpret_cast<uint64_t>(addr);
        err = eng->verbs().mr_rereg(m.lkey, pd->h, addr, length, static_cast<uint32_t>(access & kSupportedAccess), iova);
    }
    if (err) return err;
    vmr->access = access;
    mr->iova = iova;
    return 0;
}

}  // namespace

int rereg_mr(verbs_mr* vmr, int flags, ibv_pd* pd, void* addr, size_t length, int access)
{
    const int err = rereg(vmr, flags, pd, addr, length, access);
    if (err) errno = err;  // libibverbs answers IBV_REREG_MR_ERR_CMD; errno says why
    return err;
}

int dereg_mr(verbs_mr* vmr)
{
    ibv_mr& m = vmr->ibv_mr;
    Engine* eng = reinterpret_cast<Pd*>(m.pd)->engine;
    int err;
    {
        std::lock_guard lock(eng->lock());
        err = eng->verbs().mr_dereg(m.lkey);
    }
    if (err) return err;
    delete reinterpret_cast<Mr*>(vmr);
    return 0;
}

namespace {

// The interception library's answer for a channel it made (sdr_ucma.h), or -1: found once, in
// the global scope LD_PRELOAD puts it in.
int preloaded_channel_writer(int fd)
{
    static const auto writer =
        reinterpret_cast<sdr_rdma_comp_channel_writer_fn>(dlsym(RTLD_DEFAULT, SDR_RDMA_COMP_CHANNEL_WRITER));
    return writer ? writer(fd) : -1;
}

// The write end of the pipe behind `channel`, giving the channel that pipe on first use.
//
// libibverbs 44 creates a completion channel with a write() to the device node and takes the
// fd from the kernel's answer. With the interception library (libsdr_rdma_preload.so) that
// answer is the read end of a pipe of the library's, valid from creation on: its write end is
// used as is. Without it the node is the null device, which answers nothing, so channel->fd is
// undefined until a CQ is attached to the channel: the first CQ created on such a channel gives
// it a pipe of the provider's own; the channel keeps it (ibv_destroy_comp_channel closes it),
// and later CQs on the same channel share it.
int channel_write_fd(ContextState* st, ibv_comp_channel* channel)
{
    std::lock_guard lock(st->mu);
    struct stat sb{};
    for (const ChannelPipe& p : st->channels)
        if (p.channel == channel && channel->fd == p.read_fd && fstat(p.read_fd, &sb) == 0 && sb.st_ino == p.read_ino)
            return fcntl(p.write_fd, F_DUPFD_CLOEXEC, 0);
    if (int mine = preloaded_channel_writer(channel->fd); mine >= 0) return mine;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    if (fstat(fds[0], &sb) != 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    const int mine = fcntl(fds[1], F_DUPFD_CLOEXEC, 0);
    if (mine < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    try {
        st->channels.push_back({channel, fds[0], sb.st_ino, fds[1]});
    } catch (const std::bad_alloc&) {
        close(fds[0]);
        close(fds[1]);
        close(mine);
        errno = ENOMEM;
        return -1;
    }
    channel->fd = fds[0];
    return mine;
}

}  // namespace

ibv_cq* create_cq(ibv_context* context, int cqe, ibv_comp_channel* channel, int comp_vector)
{
    if (cqe < 1 || static_cast<uint32_t>(cqe) > Limits::kMaxCqe || comp_vector < 0 ||
        comp_vector >= context->num_comp_vectors || (channel && channel->context != context)) {
        errno = EINVAL;
        return nullptr;
    }
    Engine* eng = context_engine(context);
    if (!eng) return nullptr;
    auto* cq = new (std::nothrow) Cq{};
    if (!cq) {
        errno = ENOMEM;
        return nullptr;
    }
    cq->engine = eng;
    cq->event_fd = -1;
    cq->async_fd = to_context(context)->state->async_write_fd;
    if (channel) {
        cq->event_fd = channel_write_fd(to_context(context)->state, channel);
        // The NIC's thread writes events: it must never block on a full pipe.
        if (cq->event_fd < 0 || fcntl(cq->event_fd, F_SETFL, O_NONBLOCK) != 0) {
            const int err = errno;
            if (cq->event_fd >= 0) close(cq->event_fd);
            delete cq;
            errno = err;
            return nullptr;
        }
    }
    {
        std::lock_guard lock(eng->lock());
        cq->h = eng->live_cqs < Limits::kMaxCq ? eng->verbs().cq_create(static_cast<uint32_t>(cqe))
                                               : emu::Nic::kNoHandle;
        if (cq->h != emu::Nic::kNoHandle) {
            eng->set_cq(cq->h, cq);
            eng->live_cqs++;
        }
    }
    if (cq->h == emu::Nic::kNoHandle) {
        if (cq->event_fd >= 0) close(cq->event_fd);
        delete cq;
        errno = ENOMEM;
        return nullptr;
    }
    cq->vcq.cq.cqe = cqe;
    return &cq->vcq.cq;  // libibverbs fills context, channel, cq_context, the event counters and their mutex
}

int destroy_cq(ibv_cq* ibcq)
{
    auto* cq = reinterpret_cast<Cq*>(ibcq);
    Engine* eng = cq->engine;
    uint64_t events, async_events;
    {
        std::lock_guard lock(eng->lock());
        if (int err = eng->verbs().cq_destroy(cq->h)) return err;  // EBUSY while a QP uses it
        eng->set_cq(cq->h, nullptr);
        eng->live_cqs--;
        events = cq->events_read.load();
        async_events = cq->async_read.load();
    }
    // As with a kernel provider: every event of this CQ the program read must have been
    // acknowledged (ibv_ack_cq_events) before it goes. Read, not raised: the kernel counts an
    // event when it reaches the program (comp_events_reported), and a program may end with one
    // raised but never read (an armed CQ whose last completion it had already polled) and ack
    // only what it read, as ibv_rc_pingpong -e does. An unread event stays in the pipe (the
    // kernel would drop it with the CQ): a channel is not to be read after its CQs are gone.
    pthread_mutex_lock(&ibcq->mutex);
    while (ibcq->comp_events_completed < events) pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
    pthread_mutex_unlock(&ibcq->mutex);
    wait_async_acks(&ibcq->mutex, &ibcq->cond, &ibcq->async_events_completed, async_events);  // IBV_EVENT_CQ_ERR
    if (cq->event_fd >= 0) close(cq->event_fd);
    delete cq;
    return 0;
}

int resize_cq(ibv_cq* ibcq, int cqe)
{
    if (cqe < 1 || static_cast<uint32_t>(cqe) > Limits::kMaxCqe) return EINVAL;
    auto* cq = reinterpret_cast<Cq*>(ibcq);
    std::lock_guard poll(cq->mu);  // no poller between the model's CQ and ibcq->cqe
    int err;
    {
        std::lock_guard lock(cq->engine->lock());
        err = cq->engine->verbs().cq_resize(cq->h, static_cast<uint32_t>(cqe));  // EINVAL below what it holds
    }
    if (err) return err;
    ibcq->cqe = cqe;
    return 0;
}

int req_notify_cq(ibv_cq* ibcq, int solicited_only)
{
    // Armed until the next completion raises an event on the channel (Engine::on_completion).
    reinterpret_cast<Cq*>(ibcq)->armed.store(solicited_only ? 2 : 1);
    return 0;
}

// ibv_get_cq_event read an event of this CQ off the channel.
void cq_event(ibv_cq* ibcq) { reinterpret_cast<Cq*>(ibcq)->events_read.fetch_add(1); }

}  // namespace sdr::verbs
