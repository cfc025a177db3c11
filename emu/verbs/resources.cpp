// Protection domains, memory regions and completion queues with their completion channels.
// Nothing here moves data: the data path (QPs, post/poll) is the next slice, so no completion
// is ever produced yet; what exists is the bookkeeping that slice checks every access against.
#include "provider.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <new>

namespace sdr::verbs {
namespace {

constexpr uint32_t kKeyIndexBits = 16;
constexpr uint32_t kKeyIndexMask = (1u << kKeyIndexBits) - 1;

// 16 random tag bits above the table index (as the emulated NIC's lkeys, ids.hpp): a key is
// not guessable from another, and a reused entry never gets its previous key back.
uint32_t fresh_key(uint32_t index, uint32_t previous)
{
    for (;;) {
        uint16_t tag = 0;
        if (getrandom(&tag, sizeof(tag), 0) != static_cast<ssize_t>(sizeof(tag))) continue;
        uint32_t key = (uint32_t{tag} << kKeyIndexBits) | index;
        if (tag != 0 && key != previous) return key;
    }
}

constexpr int kSupportedAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

}  // namespace

uint32_t MrTable::add(const MrEntry& e)
{
    std::lock_guard lock(mu_);
    uint32_t index;
    if (!free_.empty()) {
        index = free_.back();
        free_.pop_back();
    } else {
        if (entries_.size() >= Limits::kMaxMr) return 0;
        index = static_cast<uint32_t>(entries_.size());
        entries_.emplace_back();
    }
    MrEntry& slot = entries_[index];
    const uint32_t key = fresh_key(index, slot.key);
    slot = e;
    slot.key = key;
    slot.live = true;
    return key;
}

bool MrTable::remove(uint32_t key)
{
    std::lock_guard lock(mu_);
    const uint32_t index = key & kKeyIndexMask;
    if (index >= entries_.size() || !entries_[index].live || entries_[index].key != key) return false;
    entries_[index].live = false;  // keeps the key, so the next one differs
    free_.push_back(index);
    return true;
}

size_t MrTable::live() const
{
    std::lock_guard lock(mu_);
    return entries_.size() - free_.size();
}

ibv_pd* alloc_pd(ibv_context* context)
{
    auto* pd = new (std::nothrow) Pd{};
    if (!pd) {
        errno = ENOMEM;
        return nullptr;
    }
    pd->id = to_device(context->device)->next_pd_id->fetch_add(1);
    pd->pd.handle = pd->id;
    return &pd->pd;
}

int dealloc_pd(ibv_pd* ibpd)
{
    auto* pd = reinterpret_cast<Pd*>(ibpd);
    if (pd->mrs.load() != 0) return EBUSY;  // as the kernel: regions still use it
    delete pd;
    return 0;
}

ibv_mr* reg_mr(ibv_pd* ibpd, void* addr, size_t length, uint64_t hca_va, int access)
{
    // IBTA: remote write (or atomic) access needs local write access.
    if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
        errno = EINVAL;
        return nullptr;
    }
    if (access & ~kSupportedAccess) {  // atomics, memory windows, ODP, zero-based ...
        errno = EOPNOTSUPP;
        return nullptr;
    }
    if (length == 0 || length > Limits::kMaxMrSize || reinterpret_cast<uintptr_t>(addr) + length < length) {
        errno = EINVAL;
        return nullptr;
    }
    auto* mr = new (std::nothrow) Mr{};
    if (!mr) {
        errno = ENOMEM;
        return nullptr;
    }
    MrEntry e;
    e.addr = reinterpret_cast<uintptr_t>(addr);
    e.length = length;
    e.iova = hca_va;
    e.access = access;
    e.pd = ibpd;
    const uint32_t key = to_device(ibpd->context->device)->mrs->add(e);
    if (key == 0) {
        delete mr;
        errno = ENOMEM;
        return nullptr;
    }
    reinterpret_cast<Pd*>(ibpd)->mrs.fetch_add(1);
    mr->vmr.mr_type = SDR_IBV_MR_TYPE_MR;
    mr->vmr.access = access;
    mr->vmr.ibv_mr.lkey = key;
    mr->vmr.ibv_mr.rkey = key;
    mr->vmr.ibv_mr.handle = key;
    return &mr->vmr.ibv_mr;  // libibverbs fills context, pd, addr and length
}

int dereg_mr(verbs_mr* vmr)
{
    ibv_mr& m = vmr->ibv_mr;
    if (!to_device(m.context->device)->mrs->remove(m.lkey)) return EINVAL;
    reinterpret_cast<Pd*>(m.pd)->mrs.fetch_sub(1);
    delete reinterpret_cast<Mr*>(vmr);
    return 0;
}

namespace {

// The write end of the pipe behind `channel`, giving the channel that pipe on first use.
//
// libibverbs 44 creates a completion channel with a write() to the device node and takes the
// fd from the kernel's answer; the node here is the null device, which answers nothing, so
// channel->fd is undefined until a CQ is attached to the channel. The first CQ created on a
// channel gives it a pipe of the provider's own; the channel keeps it (ibv_destroy_comp_channel
// closes it), and later CQs on the same channel share it.
int channel_write_fd(ContextState* st, ibv_comp_channel* channel)
{
    std::lock_guard lock(st->mu);
    struct stat sb{};
    for (const ChannelPipe& p : st->channels)
        if (p.channel == channel && channel->fd == p.read_fd && fstat(p.read_fd, &sb) == 0 && sb.st_ino == p.read_ino)
            return fcntl(p.write_fd, F_DUPFD_CLOEXEC, 0);
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
        comp_vector >= context->num_comp_vectors) {
        errno = EINVAL;
        return nullptr;
    }
    auto* cq = new (std::nothrow) Cq{};
    if (!cq) {
        errno = ENOMEM;
        return nullptr;
    }
    cq->event_fd = -1;
    if (channel) {
        if (channel->context != context) {
            delete cq;
            errno = EINVAL;
            return nullptr;
        }
        cq->event_fd = channel_write_fd(to_context(context)->state, channel);
        if (cq->event_fd < 0) {
            const int err = errno;
            delete cq;
            errno = err;
            return nullptr;
        }
    }
    cq->vcq.cq.cqe = cqe;
    return &cq->vcq.cq;  // libibverbs fills context, channel, cq_context and the event counters
}

int destroy_cq(ibv_cq* ibcq)
{
    auto* cq = reinterpret_cast<Cq*>(ibcq);
    if (cq->event_fd >= 0) close(cq->event_fd);
    delete cq;
    return 0;
}

int req_notify_cq(ibv_cq* ibcq, int solicited_only)
{
    // Armed until the next completion (solicited only: the next solicited one) raises an event
    // on the channel; the data path of the next slice delivers it.
    reinterpret_cast<Cq*>(ibcq)->armed.store(solicited_only ? 2 : 1);
    return 0;
}

void cq_event(ibv_cq*) {}  // an event read off the channel needs no provider bookkeeping

void async_event(ibv_context*, ibv_async_event*) {}

}  // namespace sdr::verbs
