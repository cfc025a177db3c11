// The worker threads (worker.hpp): poll, run handlers, post what they chained, repost receives,
// sleep on the CQ's completion channel and a doorbell eventfd when there is nothing to do.
#include "worker.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sdr::hal_verbs {

namespace {

constexpr int kPollBatch = 64;
constexpr uint32_t kMaxCqe = 1u << 17;
constexpr uint32_t kIdleSpins = 2;     // empty polls before the thread sleeps
constexpr int kSleepMaxMs = 100;       // a sleeping worker still looks at its stop flag

uint64_t now_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

void wake(hal_worker* w)
{
    uint64_t one = 1;
    ssize_t n = write(w->event_fd, &one, sizeof one);
    (void)n;  // a full counter (never, at 2^64 - 1) still wakes the worker
}

}  // namespace

Executor::Executor(ibv_context* ctx, fw_device* fw, const ExecutorParams& p, std::string* err)
    : ctx_(ctx), fw_(fw), params_(p), tags_(1u << 16)
{
    ibv_device_attr da{};
    if (ibv_query_device(ctx, &da)) {
        *err = std::string("ibv_query_device: ") + std::strerror(errno);
        return;
    }
    if ((host_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        *err = std::string("eventfd: ") + std::strerror(errno);
        return;
    }
    const uint32_t depth = std::min<uint32_t>(kMaxCqe, static_cast<uint32_t>(da.max_cqe));
    for (uint32_t i = 0; i < std::max(1u, p.workers); i++) {
        auto w = std::make_unique<hal_worker>();
        w->ex = this;
        w->index = i;
        w->channel = ibv_create_comp_channel(ctx);
        w->cq = w->channel ? ibv_create_cq(ctx, static_cast<int>(depth), w.get(), w->channel, 0) : nullptr;
        w->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        // The channel's fd is valid only once a CQ uses it (emu/verbs/README.md): made in that order.
        if (!w->channel || !w->cq || w->event_fd < 0) {
            *err = std::string("creating worker ") + std::to_string(i) + "'s completion queue: " + std::strerror(errno);
            workers_.push_back(std::move(w));
            return;
        }
        w->cqe_budget = depth;
        workers_.push_back(std::move(w));
    }
    ok_ = true;
}

Executor::~Executor()
{
    for (auto& w : workers_) {
        w->stop.store(true);
        if (w->event_fd >= 0) wake(w.get());
    }
    for (auto& w : workers_) {
        if (w->thread.joinable()) w->thread.join();
        if (w->cq) ibv_destroy_cq(w->cq);
        if (w->channel) ibv_destroy_comp_channel(w->channel);
        if (w->event_fd >= 0) close(w->event_fd);
    }
    if (host_fd_ >= 0) close(host_fd_);
}

void Executor::start()
{
    for (auto& w : workers_) w->thread = std::thread([this, p = w.get()] { run(p); });
}

bool Executor::repost(ChannelQp* q, uint32_t n)
{
    // WRITE-with-immediate consumes a receive WQE and writes nothing into it: no SGE.
    std::vector<ibv_recv_wr> wrs(n);
    for (uint32_t i = 0; i < n; i++) {
        wrs[i].wr_id = kRecvWrId | q->tag;
        wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    return n == 0 || ibv_post_recv(q->qp, wrs.data(), &bad) == 0;
}

bool Executor::attach(ChannelQp* q, std::string* err)
{
    const bool full = q->rx == q->tx ? q->rx->cqe_budget < q->rq_depth + q->sq_depth
                                     : q->rx->cqe_budget < q->rq_depth || q->tx->cqe_budget < q->sq_depth;
    if (full) {
        *err = "the workers' completion queues are full: fewer transport QPs (channels x generations x QPs), or more workers";
        return false;
    }
    q->rx->cqe_budget -= q->rq_depth;
    q->tx->cqe_budget -= q->sq_depth;
    tags_[q->tag & 0xFFFF].store(q, std::memory_order_release);
    if (!repost(q, q->rq_depth)) {
        *err = std::string("ibv_post_recv: ") + std::strerror(errno);
        detach(q);
        return false;
    }
    return true;
}

void Executor::detach(ChannelQp* q)
{
    if (tags_[q->tag & 0xFFFF].load() == q) {
        tags_[q->tag & 0xFFFF].store(nullptr, std::memory_order_release);
        q->rx->cqe_budget += q->rq_depth;
        q->tx->cqe_budget += q->sq_depth;
    }
    checkpoint();  // no worker still holds q
}

void Executor::doorbell(uint32_t qp_index)
{
    hal_worker* w = tx_worker(qp_index);
    w->doorbells[qp_index / 64].fetch_or(1ull << (qp_index % 64));
    if (w->sleeping.load()) wake(w);
}

void Executor::checkpoint()
{
    std::vector<uint64_t> e0;
    for (auto& w : workers_) e0.push_back(w->epoch.load());
    for (size_t i = 0; i < workers_.size(); i++) {
        hal_worker* w = workers_[i].get();
        if (!w->thread.joinable() || w->thread.get_id() == std::this_thread::get_id()) continue;
        while (w->epoch.load() == e0[i] && !w->sleeping.load()) wake(w), sched_yield();
    }
}

void Executor::notify_host()
{
    host_events_.fetch_add(1);
    if (host_waiters_.load()) {
        uint64_t one = 1;
        ssize_t n = write(host_fd_, &one, sizeof one);
        (void)n;  // a full counter still leaves the fd readable
    }
}

void Executor::wait_event(uint64_t t_ns, const std::vector<int>& fds)
{
    const uint32_t v = host_events_.load();
    const uint64_t now = now_ns();
    if (t_ns <= now) return;
    const uint64_t d = t_ns - now;
    timespec ts{static_cast<time_t>(d / 1'000'000'000u), static_cast<long>(d % 1'000'000'000u)};
    std::vector<pollfd> p{{host_fd_, POLLIN, 0}};
    for (int fd : fds) p.push_back({fd, POLLIN, 0});
    // Counted as a waiter before the second look: a worker that bumps host_events_ after it
    // either is seen here or sees the waiter and writes the eventfd.
    host_waiters_.fetch_add(1);
    if (host_events_.load() == v) ppoll(p.data(), p.size(), t_ns == UINT64_MAX ? nullptr : &ts, nullptr);
    // The last waiter out empties the eventfd; a waiter that comes later and finds it still
    // readable returns at once (early, which wait_event allows).
    if (host_waiters_.fetch_sub(1) == 1) {
        uint64_t n;
        ssize_t r = read(host_fd_, &n, sizeof n);
        (void)r;
    }
}

uint64_t Executor::counter(uint32_t c) const
{
    uint64_t n = 0;
    for (auto& w : workers_) n += w->counters[c].load(std::memory_order_relaxed);
    return n;
}

void Executor::flush(hal_worker* w, ChannelQp* q)
{
    if (q->nbatch == 0) return;
    q->batch[q->nbatch - 1].next = nullptr;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(q->qp, q->batch.data(), &bad) != 0) w->post_errors.fetch_add(1, std::memory_order_relaxed);
    q->nbatch = 0;
}

void Executor::handle_wc(hal_worker* w, const ibv_wc& wc)
{
    hal_cqe cqe{};
    cqe.status = wc.status == IBV_WC_SUCCESS ? HAL_CQE_OK : HAL_CQE_LOCAL_ERROR;
    if (wc.wr_id & kRecvWrId) {
        ChannelQp* q = by_tag(static_cast<uint32_t>(wc.wr_id & 0xFFFF));
        if (!q || wc.status == IBV_WC_WR_FLUSH_ERR) return;  // its QP is going away
        q->consumed++;
        if (!q->rx_dirty) {
            q->rx_dirty = true;
            w->rx_dirty.push_back(q->tag);
        }
        if (!(wc.wc_flags & IBV_WC_WITH_IMM)) cqe.status = HAL_CQE_LOCAL_ERROR;  // not SDR's opcode
        cqe.qp_tag = q->tag;
        cqe.imm = ntohl(wc.imm_data);
        cqe.byte_len = wc.byte_len;
        cqe.opcode = HAL_CQE_RECV_WRITE_IMM;
        fw_handle_cqe(fw_, w, &cqe);
        return;
    }
    ChannelQp* q = by_tag(static_cast<uint32_t>(wc.wr_id >> 40) & 0xFFFF);
    if (!q) return;
    // The 40-bit sequence back to the full count: the newest posted sequence with those bits.
    constexpr uint64_t kMask = (1ull << 40) - 1;
    uint64_t seq = (q->posted & ~kMask) | (wc.wr_id & kMask);
    if (seq >= q->posted) seq -= 1ull << 40;
    if (seq + 1 > q->freed) q->freed = seq + 1;
    if (q->blocked && q->posted - q->freed < q->sq_depth) {
        q->blocked = false;
        const uint32_t i = fw_tag_qp(q->tag);
        w->doorbells[i / 64].fetch_or(1ull << (i % 64), std::memory_order_relaxed);
    }
    const uint32_t cookie = q->cookies[seq % q->sq_depth];
    if (cookie == ChannelQp::kNoCookie) return;  // the backend's own signal: frees space only
    cqe.qp_tag = q->tag;
    cqe.wr_cookie = cookie;
    cqe.opcode = HAL_CQE_SEND;
    fw_handle_cqe(fw_, w, &cqe);
}

bool Executor::poll_once(hal_worker* w)
{
    ibv_wc wc[kPollBatch];
    const int n = ibv_poll_cq(w->cq, kPollBatch, wc);
    for (int i = 0; i < n; i++) handle_wc(w, wc[i]);
    return n > 0;
}

void Executor::run_doorbells(hal_worker* w, bool* busy)
{
    for (uint32_t k = 0; k < w->doorbells.size(); k++) {
        uint64_t bits = w->doorbells[k].exchange(0);
        for (; bits; bits &= bits - 1) {
            fw_handle_doorbell(fw_, w, k * 64 + static_cast<uint32_t>(__builtin_ctzll(bits)));
            *busy = true;
        }
    }
}

void Executor::run_timers(hal_worker* w, bool* busy)
{
    const uint64_t now = now_ns();
    if (now < w->next_timer) return;
    w->next_timer = UINT64_MAX;
    for (uint32_t id = 0; id < w->timers.size(); id++) {
        const uint64_t d = w->timers[id];
        if (!d) continue;
        if (d <= now) {
            w->timers[id] = 0;  // once, unless the handler re-arms it
            fw_handle_timer(fw_, w, id);
            *busy = true;
        }
        if (w->timers[id]) w->next_timer = std::min(w->next_timer, w->timers[id]);
    }
}

void Executor::end_run(hal_worker* w)
{
    for (ChannelQp* q : w->tx_dirty) {
        flush(w, q);
        q->tx_dirty = false;
    }
    w->tx_dirty.clear();
    size_t keep = 0;
    for (uint32_t tag : w->rx_dirty) {
        ChannelQp* q = by_tag(tag);  // detached since: nothing to repost
        if (!q) continue;
        if (q->consumed < params_.repost_batch) {
            w->rx_dirty[keep++] = tag;  // stays dirty until a batch is due
            continue;
        }
        if (repost(q, q->consumed)) {
            q->consumed = 0;
            q->rx_dirty = false;
        } else {
            w->post_errors.fetch_add(1, std::memory_order_relaxed);
            w->rx_dirty[keep++] = tag;
        }
    }
    w->rx_dirty.resize(keep);
    if (w->wrote_host) {
        w->wrote_host = false;
        notify_host();
    }
}

void Executor::sleep(hal_worker* w)
{
    w->sleeping.store(true);
    bool work = false;
    for (auto& d : w->doorbells) work |= d.load() != 0;
    if (!work && ibv_req_notify_cq(w->cq, 0) == 0) {
        ibv_wc wc;
        // Anything that completed before the arm is still in the CQ: look once more.
        if (ibv_poll_cq(w->cq, 0, &wc) == 0 && !w->stop.load()) {
            int timeout = kSleepMaxMs;
            if (w->next_timer != UINT64_MAX) {
                const uint64_t now = now_ns();
                timeout = w->next_timer <= now ? 0 : static_cast<int>(std::min<uint64_t>(kSleepMaxMs, (w->next_timer - now) / 1'000'000 + 1));
            }
            pollfd fds[2] = {{w->channel->fd, POLLIN, 0}, {w->event_fd, POLLIN, 0}};
            if (poll(fds, 2, timeout) > 0) {
                if (fds[0].revents & POLLIN) {
                    ibv_cq* cq = nullptr;
                    void* ctx = nullptr;
                    if (ibv_get_cq_event(w->channel, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
                }
                if (fds[1].revents & POLLIN) {
                    uint64_t v;
                    ssize_t n = read(w->event_fd, &v, sizeof v);
                    (void)n;
                }
            }
        }
    }
    w->sleeping.store(false);
}

void Executor::run(hal_worker* w)
{
    if (w->index < params_.cores.size()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(params_.cores[w->index], &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    uint32_t idle = 0;
    while (!w->stop.load(std::memory_order_relaxed)) {
        bool busy = poll_once(w);
        run_doorbells(w, &busy);
        run_timers(w, &busy);
        end_run(w);
        w->epoch.fetch_add(1, std::memory_order_release);
        if (busy) {
            idle = 0;
        } else if (++idle > kIdleSpins) {
            sleep(w);
            idle = 0;
        }
    }
}

}  // namespace sdr::hal_verbs
