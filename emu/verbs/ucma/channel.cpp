// The rdma_cm device's channels (ucma.hpp): what open(), write() and close() of the kernel's
// rdma_ucm file do, and the exported table the interception library calls (sdr_ucma.h).
//
// A channel is an eventfd whose counter is 1 while events wait and 0 otherwise, so that poll()
// and epoll on the fd librdmacm hands out (rdma_event_channel.fd) behave as on the kernel's file;
// the counter changes only under the server lock. GET_EVENT blocks in poll() on that fd without
// the lock, unless the program made the fd O_NONBLOCK (EAGAIN then), as the kernel reads
// f_flags.
#include "ucma.hpp"

#include <sdr/verbs/sdr_ucma.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace sdr::verbs::ucma {

std::mutex& mu()
{
    static auto* m = new std::mutex;  // never destroyed: the CM event thread may outlive exit's destructors
    return *m;
}

std::map<int, Channel>& channels()
{
    static auto* c = new std::map<int, Channel>;
    return *c;
}

std::map<uint32_t, std::unique_ptr<Id>>& ids()
{
    static auto* m = new std::map<uint32_t, std::unique_ptr<Id>>;
    return *m;
}

Id* find_id(uint32_t handle)
{
    auto it = ids().find(handle);
    return it == ids().end() ? nullptr : it->second.get();
}

uint32_t new_handle()
{
    // Small numbers, as the kernel's idr gives (librdmacm indexes IDs by handle up to 0xFFFF),
    // taken in turn so that a destroyed ID's number is not reused at once.
    static uint32_t cursor = 0;
    for (;;) {
        cursor = cursor + 1 == 0 ? 1 : cursor + 1;
        if (!ids().count(cursor)) return cursor;
    }
}

namespace {

void set_readable(const Channel& ch, bool readable)
{
    // eventfd_write/_read, not write(): the interception library takes a write() on this fd
    // for a command. 1 added to 0 cannot overflow; reading a counter of 1 cannot block.
    eventfd_t v = 1;
    if (readable) (void)eventfd_write(ch.fd, v);
    else (void)eventfd_read(ch.fd, &v);
}

}  // namespace

void post_event(Id& owner, Event ev)
{
    auto it = channels().find(owner.channel);
    if (it == channels().end()) return;  // the channel closed under a request in flight
    Channel& ch = it->second;
    ev.owner = owner.handle;
    try {
        ch.events.push_back(ev);
    } catch (const std::bad_alloc&) {
        return;  // lost, as the kernel loses an event it cannot allocate
    }
    if (ch.events.size() == 1) set_readable(ch, true);
}

std::vector<uint32_t> drop_events(uint32_t handle)
{
    std::vector<uint32_t> requests;
    for (auto& [fd, ch] : channels()) {
        const bool had = !ch.events.empty();
        for (auto it = ch.events.begin(); it != ch.events.end();) {
            if (it->owner == handle) {
                if (it->request) requests.push_back(it->request);
                it = ch.events.erase(it);
            } else {
                ++it;
            }
        }
        if (had && ch.events.empty()) set_readable(ch, false);
    }
    return requests;
}

// GET_EVENT: the oldest event, waiting for one unless the fd is non-blocking. The wait holds
// a reference of its own to the eventfd, as the kernel's write holds its file: a close() by
// another thread then wakes nothing (closing an eventfd would wake its pollers), the channel and
// its IDs go, and the write sleeps on until a signal (EINTR), as the kernel's does. So rping's
// event thread, blocked here while its main thread closes the channel and returns, never sees
// an error.
ssize_t get_event(Channel* ch, const rdma_ucm_get_event& cmd, size_t out, std::unique_lock<std::mutex>& lock)
{
    if (out < sizeof(rdma_ucm_event_resp)) return -ENOSPC;
    const int fd = ch->fd;
    const auto ino = ch->ino;
    struct Held {  // our reference to the eventfd while we wait
        int fd = -1;
        ~Held()
        {
            if (fd >= 0) close(fd);
        }
    } held;
    bool interrupted = false;
    for (;;) {
        auto it = channels().find(fd);
        // Closed while we waited (channel_write found it; a channel opened since may have its
        // number): a signal ended the wait, or an event had arrived just before the close.
        if (it == channels().end() || it->second.ino != ino) return interrupted ? -EINTR : -EBADF;
        ch = &it->second;
        if (!ch->events.empty()) break;
        const int fl = fcntl(fd, F_GETFL);
        if (fl < 0) return -errno;
        if (fl & O_NONBLOCK) return -EAGAIN;
        if (held.fd < 0 && (held.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) return -errno;
        lock.unlock();
        pollfd p{held.fd, POLLIN, 0};
        const int r = poll(&p, 1, -1);
        const int err = errno;
        lock.lock();
        interrupted = r < 0 && err == EINTR;  // on a live channel: wait again, as the kernel restarts
        if (r < 0 && err != EINTR) return -err;
    }
    Event ev = ch->events.front();
    ch->events.pop_front();
    if (ch->events.empty()) set_readable(*ch, false);
    Id* owner = find_id(ev.owner);
    if (owner) owner->events_reported++;
    if (owner && ev.mcast)
        for (Mcast& m : owner->mcasts)
            if (m.handle == ev.mcast) m.events_reported++;
    if (ev.request) {
        if (Id* req = find_id(ev.request)) req->handed_out = true;
        if (owner) owner->backlog++;
    }
    std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(cmd.response)), &ev.resp, sizeof ev.resp);
    trace_event(ev.resp);
    return 0;
}

namespace {

// A channel and its IDs go: closed, or found to be another file behind its number (closed by
// a call the library does not see), as closing the kernel's file destroys its IDs.
void drop_channel(int fd)
{
    std::vector<uint32_t> mine;
    for (const auto& [h, id] : ids())
        if (id->channel == fd) mine.push_back(h);
    for (uint32_t h : mine) (void)destroy_id(h);
    channels().erase(fd);
}

int channel_open(int flags)
{
    const int fd = eventfd(0, EFD_CLOEXEC);
    if (fd < 0) return -errno;
    // The open flags the program chose: O_NONBLOCK (GET_EVENT's EAGAIN), not O_CLOEXEC.
    if (((flags & O_NONBLOCK) && fcntl(fd, F_SETFL, O_NONBLOCK) != 0) ||
        (!(flags & O_CLOEXEC) && fcntl(fd, F_SETFD, 0) != 0)) {
        const int err = errno;
        close(fd);
        return -err;
    }
    struct stat st{};
    if (fstat(fd, &st) != 0) {
        const int err = errno;
        close(fd);
        return -err;
    }
    std::lock_guard g(mu());
    drop_channel(fd);  // a channel that had this number and was closed unseen
    try {
        Channel& ch = channels()[fd];
        ch.fd = fd;
        ch.ino = st.st_ino;
    } catch (const std::bad_alloc&) {
        close(fd);
        return -ENOMEM;
    }
    return fd;
}

// The channel behind fd, if fd still is the eventfd we made (not a file that took its number).
Channel* channel_of(int fd)
{
    auto it = channels().find(fd);
    if (it == channels().end()) return nullptr;
    struct stat st{};
    if (fstat(fd, &st) != 0 || st.st_ino != it->second.ino) {
        drop_channel(fd);
        return nullptr;
    }
    return &it->second;
}

ssize_t channel_write(int fd, const void* buf, size_t len)
{
    std::unique_lock lock(mu());
    Channel* ch = channel_of(fd);
    if (!ch) return -EBADF;
    return serve(*ch, buf, len, lock);
}

// As closing the kernel's file: every ID of the channel is destroyed.
void channel_close(int fd)
{
    std::lock_guard g(mu());
    if (channel_of(fd)) drop_channel(fd);
}

}  // namespace

}  // namespace sdr::verbs::ucma

extern "C" __attribute__((visibility("default"))) const struct sdr_ucma_ops sdr_ucma_ops = {
    SDR_UCMA_ABI,
    sdr::verbs::ucma::channel_open,
    sdr::verbs::ucma::channel_write,
    sdr::verbs::ucma::channel_close,
};
