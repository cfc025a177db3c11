// The HAL bound to rdma-core: what the firmware's hal_* calls do on a worker thread (worker.hpp).
// Host memory is local, so the window is plain atomic stores and adds; transmit chains
// ibv_send_wr per channel QP and posts them once per batch or handler run.
#include "worker.hpp"

#include <arpa/inet.h>
#include <time.h>

using sdr::hal_verbs::ChannelQp;

extern "C" {

void hal_window_write64(hal_worker* w, const hal_window* win, uint64_t word, uint64_t value)
{
    if (word >= win->nwords) {
        w->window_refused.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    __atomic_store_n(reinterpret_cast<uint64_t*>(win->host_addr) + word, value, __ATOMIC_RELEASE);
    w->window_writes.store(w->window_writes.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    w->wrote_host = true;
}

void hal_window_add64(hal_worker* w, const hal_window* win, uint64_t word, uint64_t value)
{
    if (word >= win->nwords) {
        w->window_refused.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    // The firmware adds only chunk bits: with staged root keys the chunk's bytes go to the user's
    // buffer first, so a host that sees the bit sees them.
    if (sdr::hal_verbs::ChunkCopier* c = w->ex->copier()) c->before_chunk_bit(win, word, value);
    __atomic_fetch_add(reinterpret_cast<uint64_t*>(win->host_addr) + word, value, __ATOMIC_ACQ_REL);
    w->window_writes.store(w->window_writes.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    w->wrote_host = true;
}

// One WQE of a burst: false when its send queue is full.
static bool post_one(hal_worker* w, const hal_tx_wqe* wqe)
{
    ChannelQp* q = w->ex->by_tag(wqe->qp);
    if (!q) return false;
    if (q->posted - q->freed >= q->sq_depth) {
        q->blocked = true;  // the send completion that frees space rings the doorbell again
        return false;
    }
    const uint64_t seq = q->posted++;
    // Unsignalled WQEs free their send-queue slots only when a later one completes: signal one
    // of our own every quarter queue, so the queue never fills with nothing to complete.
    bool sig = wqe->signaled;
    if (!sig && ++q->since_signal >= q->sq_depth / 4) sig = true;
    if (sig) q->since_signal = 0;
    q->cookies[seq % q->sq_depth] = wqe->signaled ? wqe->cookie : ChannelQp::kNoCookie;
    const uint32_t i = q->nbatch++;
    ibv_sge& sge = q->sges[i];
    sge.addr = wqe->local_addr;
    sge.length = wqe->length;
    sge.lkey = wqe->lkey;
    ibv_send_wr& wr = q->batch[i];
    wr = ibv_send_wr{};
    wr.wr_id = sdr::hal_verbs::send_wr_id(q->tag, seq);
    wr.next = &q->batch[i + 1 < q->batch.size() ? i + 1 : i];
    wr.sg_list = wqe->length ? &sge : nullptr;
    wr.num_sge = wqe->length ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = sig ? IBV_SEND_SIGNALED : 0;
    wr.imm_data = htonl(wqe->imm);  // verbs carries the immediate in network order
    wr.wr.rdma.remote_addr = wqe->remote_va;
    wr.wr.rdma.rkey = wqe->rkey;
    if (!q->tx_dirty) {
        q->tx_dirty = true;
        w->tx_dirty.push_back(q);
    }
    if (q->nbatch == q->batch.size()) w->ex->flush(w, q);
    return true;
}

uint32_t hal_tx_post(hal_worker* w, const hal_tx_wqe* wqe, uint32_t n)
{
    uint32_t i = 0;
    while (i < n && post_one(w, &wqe[i])) i++;
    return i;
}

uint64_t hal_clock_ns(hal_worker*)
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

void hal_timer_arm(hal_worker* w, uint32_t timer_id, uint64_t deadline_ns)
{
    if (timer_id >= w->timers.size()) return;
    w->timers[timer_id] = deadline_ns ? deadline_ns : 1;
    if (w->timers[timer_id] < w->next_timer) w->next_timer = w->timers[timer_id];
}

void hal_counter_add(hal_worker* w, uint32_t counter, uint64_t n)
{
    if (counter >= HAL_MAX_COUNTERS) return;
    auto& c = w->counters[counter];
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // extern "C"
