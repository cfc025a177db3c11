/*
 * SDR hardware-abstraction layer: the whole vocabulary firmware may use.
 *
 * Firmware is code that would run on a DPA thread. It receives events (a CQE, a send doorbell,
 * a timer expiry), touches NIC-local memory it was given at load time (plain loads/stores and
 * the atomics below), writes host memory only through a window (every write counted: on
 * hardware each is a PCIe transaction), posts transmit work elements, reads the clock, arms
 * timers and bumps counters. Nothing else: no OS calls, no heap, no locks.
 *
 * Backends bind the hal_* functions at link time (emu/nic for the emulated NIC, host/verbs for rdma-core),
 * so a handler makes direct calls only. hal/PORTING.md maps every call to FlexIO and rdma-core.
 * Freestanding C11; also compiles as C++.
 */
#ifndef SDR_HAL_H
#define SDR_HAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque execution context of one emulated DPA thread (its CQ, clock, counters). */
struct hal_worker;

/* ---- Events ---------------------------------------------------------------------------- */

enum hal_cqe_opcode {
    HAL_CQE_RECV_WRITE_IMM = 0, /* a UC WRITE-with-immediate was placed (or NULL-key discarded) */
    HAL_CQE_SEND = 1            /* a signalled transmit WQE left the port */
};

enum hal_cqe_status { HAL_CQE_OK = 0, HAL_CQE_LOCAL_ERROR = 1 };

/* A completion-queue entry. qp_tag is the 32-bit value firmware gave the transport QP when it
 * was created (on hardware: a lookup by QP number), so the handler needs no table walk. */
struct hal_cqe {
    uint32_t qp_tag;
    uint32_t imm;       /* immediate data, host order (receive) */
    uint32_t byte_len;  /* payload bytes of the packet (receive) */
    uint32_t wr_cookie; /* cookie of the signalled WQE (send) */
    uint8_t opcode;     /* enum hal_cqe_opcode */
    uint8_t status;     /* enum hal_cqe_status */
};

/* ---- NIC-local memory atomics --------------------------------------------------------- */
/* NIC memory is plain memory given at load time; these are the only atomic operations on it.
 * They are GCC/Clang builtins, which both the host compilers and the DPA (clang) toolchain
 * have, so they are the same on every backend. */

static inline uint64_t hal_atomic_fetch_or64(uint64_t *p, uint64_t v)
{
    return __atomic_fetch_or(p, v, __ATOMIC_ACQ_REL);
}
static inline uint32_t hal_atomic_fetch_add32(uint32_t *p, uint32_t v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
}
static inline bool hal_atomic_cas64(uint64_t *p, uint64_t *expected, uint64_t desired)
{
    return __atomic_compare_exchange_n(p, expected, desired, false, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
}
static inline uint64_t hal_load_acquire64(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline uint32_t hal_load_acquire32(const uint32_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline uint64_t hal_load_relaxed64(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
static inline uint32_t hal_load_relaxed32(const uint32_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
static inline void hal_store_relaxed32(uint32_t *p, uint32_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
static inline void hal_store_relaxed64(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
static inline void hal_store_release32(uint32_t *p, uint32_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
static inline void hal_store_release64(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* ---- Host-memory window --------------------------------------------------------------- */
/* A window onto host memory, in 64-bit words. host_addr is the host virtual address of word 0
 * (the backend decides how to reach it). Writes outside [0, nwords) are refused and counted. */
struct hal_window {
    uint64_t host_addr;
    uint64_t nwords;
};

/* Store one word into host memory (one posted PCIe write). */
void hal_window_write64(struct hal_worker *w, const struct hal_window *win, uint64_t word,
                        uint64_t value);
/* Atomically add to one host word (a PCIe FetchAdd AtomicOp). Firmware sets a chunk bit with
 * it: the bit is set exactly once, so adding it equals OR-ing it, and two workers completing
 * chunks of the same word can never lose each other's bit. */
void hal_window_add64(struct hal_worker *w, const struct hal_window *win, uint64_t word,
                      uint64_t value);

/* ---- Transmit -------------------------------------------------------------------------- */
/* One single-packet UC RDMA WRITE-with-immediate (length may be 0). The transport QP is
 * connected, so the destination (MAC/IP, QPN) is QP state, not part of the WQE. */
struct hal_tx_wqe {
    uint32_t qp;         /* transport QP handle given at load time */
    uint32_t imm;        /* immediate data, host order */
    uint64_t local_addr; /* payload source, inside the memory region of lkey */
    uint32_t lkey;
    uint32_t length;
    uint64_t remote_va;  /* zero-based offset in the remote root key */
    uint32_t rkey;
    uint32_t cookie;     /* returned in the HAL_CQE_SEND completion when signalled */
    uint8_t signaled;
};

/* Post a burst of n WQEs, in order, each to its transport QP's send queue: one call per burst,
 * as one doorbell carries a batch of WQEs (DPDK's tx burst; the published SDK posts 8 per
 * doorbell). Returns how many were taken, the first ones; fewer than n when a send queue is
 * full, and the backend then raises a doorbell event once space frees, and firmware retries
 * the rest. */
uint32_t hal_tx_post(struct hal_worker *w, const struct hal_tx_wqe *wqe, uint32_t n);

/* ---- Time, timers, counters ------------------------------------------------------------ */
uint64_t hal_clock_ns(struct hal_worker *w);
/* Arm (or re-arm) timer timer_id of this worker; the backend calls the firmware's timer
 * handler once, at or after deadline_ns. */
void hal_timer_arm(struct hal_worker *w, uint32_t timer_id, uint64_t deadline_ns);

/* Firmware-defined counter slots, per worker. */
enum { HAL_MAX_COUNTERS = 32 };
void hal_counter_add(struct hal_worker *w, uint32_t counter, uint64_t n);

#ifdef __cplusplus
}
#endif

#endif /* SDR_HAL_H */
