/*
 * The conformance probe firmware (probe.h): the three entry points a backend calls, doing the
 * jobs the test wrote into NIC memory and recording what the HAL did. Only hal.h and fw.h's
 * prototypes, like the real firmware; linked against one backend's HAL in its place.
 */
#include "probe.h"

#include <sdr/firmware/fw.h>

_Static_assert(sizeof(struct probe) <= sizeof(struct fw_device),
               "the probe's state must fit in the device block the backend hands the handlers");
_Static_assert(_Alignof(struct probe) <= _Alignof(struct fw_device),
               "the device block must be aligned for the probe's state");

static struct probe *probe_of(struct fw_device *dev) { return (struct probe *)(void *)dev; }

/* A worker's identity: the handle the backend passed (compared, never dereferenced). */
static uint64_t worker_id(const struct hal_worker *w) { return (uint64_t)(uintptr_t)w; }

static void run_window(struct hal_worker *w, struct probe_window_job *j)
{
    for (uint32_t k = 0; k < j->writes; k++) hal_window_write64(w, &j->win, j->first_word + k, j->value + k);
    for (uint32_t k = 0; k < j->adds; k++) hal_window_add64(w, &j->win, j->first_word + j->writes, 1ull << (k & 63));
    for (uint32_t k = 0; k < j->refused; k++) {
        /* Just past the end catches an off-by-one; near 2^64 catches an index that wraps. */
        const uint64_t word = (k & 1) ? ~(uint64_t)0 - k : j->win.nwords + k;
        if (k & 2)
            hal_window_add64(w, &j->win, word, 1);
        else
            hal_window_write64(w, &j->win, word, j->value);
    }
    hal_atomic_fetch_add32(&j->runs, 1);
}

static void run_counters(struct hal_worker *w, struct probe_counter_job *j)
{
    for (uint32_t t = 0; t < j->times; t++)
        for (uint32_t c = 0; c < HAL_MAX_COUNTERS; c++) hal_counter_add(w, c, j->base + c);
    hal_atomic_fetch_add32(&j->runs, 1);
}

static void run_clock(struct hal_worker *w, struct probe_clock_job *j)
{
    uint64_t prev = hal_clock_ns(w);
    uint32_t backwards = 0;
    hal_store_relaxed64(&j->first, prev);
    for (uint32_t r = 1; r < j->reads; r++) {
        const uint64_t now = hal_clock_ns(w);
        if (now < prev) backwards++;
        prev = now;
    }
    hal_store_relaxed32(&j->backwards, backwards);
    hal_store_release64(&j->last, prev);
}

static void run_timers(struct hal_worker *w, struct probe *p, uint32_t index)
{
    for (uint32_t s = 0; s < PROBE_TIMER_SLOTS; s++) {
        struct probe_timer_slot *t = &p->timer[s];
        if (t->arm_on != index || (!t->first_delay_ns && !t->past)) continue;  /* not this index's, or unused */
        const uint64_t now = hal_clock_ns(w);
        uint64_t d;
        if (t->past) {
            /* Due now, then re-armed 1 us before now: a deadline already passed. */
            hal_timer_arm(w, t->id, now);
            d = now > 1000 ? now - 1000 : 0;
        } else {
            d = now + t->first_delay_ns;
            if (t->rearm) {
                hal_timer_arm(w, t->id, d);
                d = now + t->second_delay_ns;
            }
        }
        hal_timer_arm(w, t->id, d);
        t->deadline_ns = d;
        t->armed_by = worker_id(w);
        hal_store_release32(&t->armed, 1);
    }
}

static void run_atomics(struct hal_worker *w, struct probe_atomics_job *j)
{
    const uint32_t parties = hal_load_relaxed32(&j->parties);
    hal_atomic_fetch_add32(&j->arrived, 1);
    /* Where handlers run on several threads, start together so that they contend; bounded,
     * so a backend that runs them one after the other is not stuck here. */
    if (parties > 1) {
        const uint64_t give_up = hal_clock_ns(w) + 2000000000ull;
        while (hal_load_acquire32(&j->arrived) < parties && hal_clock_ns(w) < give_up) {
        }
    }
    if (hal_load_acquire32(&j->arrived) >= parties) hal_atomic_fetch_add32(&j->met, 1);
    const uint32_t n = j->iterations, bits = 64u * PROBE_OR_WORDS;
    uint32_t fresh = 0, retries = 0;
    for (uint32_t i = 0; i < n || i < bits; i++) {
        if (i < n) {
            hal_atomic_fetch_add32(&j->add32, 1);
            uint64_t seen = hal_load_relaxed64(&j->cas64);
            while (!hal_atomic_cas64(&j->cas64, &seen, seen + 1)) retries++;
        }
        if (i < bits) {
            const uint64_t bit = 1ull << (i % 64);
            if (!(hal_atomic_fetch_or64(&j->or_bits[i / 64], bit) & bit)) fresh++;
        }
    }
    hal_atomic_fetch_add32(&j->or_new, fresh);
    hal_atomic_fetch_add32(&j->cas_retries, retries);
    hal_atomic_fetch_add32(&j->done, 1);
}

static void run_send(struct hal_worker *w, struct probe *p)
{
    struct hal_tx_wqe wqe[PROBE_SEND_WQES];
    const uint32_t n = p->send.n < PROBE_SEND_WQES ? p->send.n : PROBE_SEND_WQES;
    for (uint32_t k = 0; k < n; k++) {
        const struct probe_send_wqe *s = &p->send.wqe[k];
        wqe[k].qp = p->path.qp;
        wqe[k].imm = s->imm;
        wqe[k].local_addr = p->path.local_addr + s->src_offset;
        wqe[k].lkey = p->path.lkey;
        wqe[k].length = s->length;
        wqe[k].remote_va = s->dst_offset;
        wqe[k].rkey = p->path.rkey;
        wqe[k].cookie = s->cookie;
        wqe[k].signaled = (uint8_t)(s->signaled != 0);
    }
    hal_store_release32(&p->send.taken, hal_tx_post(w, wqe, n));
}

static void run_burst(struct hal_worker *w, struct probe *p)
{
    struct probe_burst_job *b = &p->burst;
    struct hal_tx_wqe wqe[PROBE_BURST_MAX];
    const uint32_t size = b->burst_size < PROBE_BURST_MAX ? b->burst_size : PROBE_BURST_MAX;
    const uint32_t run = b->runs;
    uint32_t taken = 0, short_ret = ~0u;
    while (size && b->next < b->total) {
        const uint32_t left = b->total - b->next, k = left < size ? left : size;
        for (uint32_t j = 0; j < k; j++) {
            const uint32_t seq = b->next + j;
            wqe[j].qp = p->path.qp;
            wqe[j].imm = b->imm_base + seq;
            wqe[j].local_addr = p->path.local_addr;
            wqe[j].lkey = p->path.lkey;
            wqe[j].length = probe_burst_length(seq);
            wqe[j].remote_va = 0;
            wqe[j].rkey = p->path.rkey;
            wqe[j].cookie = b->cookie;
            wqe[j].signaled = (uint8_t)(seq + 1 == b->total);
        }
        uint32_t got = hal_tx_post(w, wqe, k);
        if (got > k) {
            b->bad_return++;
            got = k;
        }
        b->next += got;
        taken += got;
        if (got < k) {  /* the queue is full: the backend rings again once it has room */
            b->short_calls++;
            short_ret = got;
            break;
        }
    }
    if (run < PROBE_BURST_RUNS) {
        b->run_taken[run] = taken;
        b->run_short_ret[run] = short_ret;
    }
    hal_store_release32(&b->runs, run + 1);
}

static void log_cqe(struct probe_cqe_log *log, const struct hal_cqe *cqe)
{
    const uint32_t n = log->count;
    if (n < PROBE_LOG) log->cqe[n] = *cqe;
    hal_store_release32(&log->count, n + 1);
}

void fw_handle_cqe(struct fw_device *dev, struct hal_worker *w, const struct hal_cqe *cqe)
{
    struct probe *p = probe_of(dev);
    if (cqe->opcode == HAL_CQE_SEND) return log_cqe(&p->tx, cqe);
    if (cqe->opcode != HAL_CQE_RECV_WRITE_IMM) {
        hal_atomic_fetch_add32(&p->unknown_cqes, 1);
        return;
    }
    if (p->rx_atomics_imm && cqe->imm == p->rx_atomics_imm) run_atomics(w, &p->atomics);
    struct probe_rx_burst *r = &p->rx_burst;
    const uint32_t k = cqe->imm - r->imm_base;
    if (k < r->total) {  /* a burst WQE: the next one, of its length, exactly once */
        if (k == r->in_order && cqe->byte_len == probe_burst_length(k) && cqe->status == HAL_CQE_OK)
            hal_store_release32(&r->in_order, k + 1);
        else
            hal_store_release32(&r->wrong, r->wrong + 1);
    }
    log_cqe(&p->rx, cqe);
}

void fw_handle_doorbell(struct fw_device *dev, struct hal_worker *w, uint32_t qp_index)
{
    struct probe *p = probe_of(dev);
    if (qp_index >= PROBE_DOORBELLS) {
        hal_atomic_fetch_add32(&p->stray_doorbells, 1);
        return;
    }
    switch (p->op[qp_index]) {
    case PROBE_OP_WINDOW: run_window(w, &p->window[qp_index]); break;
    case PROBE_OP_COUNTERS: run_counters(w, &p->counters[qp_index]); break;
    case PROBE_OP_CLOCK: run_clock(w, &p->clock[qp_index]); break;
    case PROBE_OP_TIMERS: run_timers(w, p, qp_index); break;
    case PROBE_OP_ATOMICS: run_atomics(w, &p->atomics); break;
    case PROBE_OP_SEND: run_send(w, p); break;
    case PROBE_OP_BURST: run_burst(w, p); break;
    default: break;
    }
    /* Counted last: a test that sees the count sees the job's results. */
    hal_atomic_fetch_add32(&p->doorbells[qp_index], 1);
}

void fw_handle_timer(struct fw_device *dev, struct hal_worker *w, uint32_t timer_id)
{
    struct probe *p = probe_of(dev);
    const uint64_t now = hal_clock_ns(w);
    for (uint32_t s = 0; s < PROBE_TIMER_SLOTS; s++) {
        struct probe_timer_slot *t = &p->timer[s];
        if (!hal_load_acquire32(&t->armed) || t->id != timer_id || t->armed_by != worker_id(w)) continue;
        t->fired_on = worker_id(w);
        t->fired_at_ns = now;
        hal_store_release32(&t->fires, t->fires + 1);
        return;
    }
    hal_atomic_fetch_add32(&p->stray_timers, 1);
}
