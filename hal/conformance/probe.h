/*
 * The conformance probe: a firmware that defines the entry points a backend calls
 * (fw_handle_cqe, fw_handle_doorbell, fw_handle_timer, as firmware/include/sdr/firmware/fw.h
 * declares them) and, instead of SDR's logic, does what the test asks and records what it saw.
 * It is linked against a backend's HAL binding in place of the real firmware (probe.c), so it
 * sees the backend exactly as the firmware does: through hal.h and those three calls.
 *
 * Its whole state is this struct, in the NIC memory the backend hands every handler as
 * `struct fw_device *` (the emulator allocates that block itself, the verbs executor is given
 * it): the probe reads it as a struct probe, which fits (probe.c checks). The test writes the
 * jobs before it rings a doorbell and reads the results with acquire loads while handlers may
 * run on other threads; handlers publish results with release stores or atomics.
 *
 * Freestanding C11 like the firmware; also compiles as C++ (the tests include it).
 */
#ifndef SDR_HAL_CONFORMANCE_PROBE_H
#define SDR_HAL_CONFORMANCE_PROBE_H

#include <sdr/hal/hal.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a doorbell of SDR QP index i (0 <= i < PROBE_DOORBELLS) makes the probe do. */
enum probe_op {
    PROBE_OP_NONE = 0,
    PROBE_OP_WINDOW,   /* the window job of index i */
    PROBE_OP_COUNTERS, /* hal_counter_add(c, base + c) for every slot, `times` times */
    PROBE_OP_CLOCK,    /* read hal_clock_ns `reads` times */
    PROBE_OP_TIMERS,   /* arm every timer slot whose arm_on is i */
    PROBE_OP_ATOMICS,  /* the atomics job: hammer the shared words */
    PROBE_OP_SEND,     /* post the send job's WQEs in one hal_tx_post */
    PROBE_OP_BURST     /* post the burst job's WQEs, burst by burst, until refused or done */
};

enum {
    PROBE_DOORBELLS = 4,
    PROBE_TIMER_SLOTS = 4,
    PROBE_LOG = 8,        /* CQEs logged in full per direction (all are counted) */
    PROBE_SEND_WQES = 4,
    PROBE_OR_WORDS = 16,  /* 1024 bits every atomics context sets with fetch-or */
    PROBE_BURST_MAX = 8,  /* WQEs per hal_tx_post in the burst job */
    PROBE_BURST_RUNS = 8  /* doorbell runs of the burst job recorded one by one */
};

/* The tags the harness creates the two transport QPs with (firmware chooses them; the backend
 * hands them back in every CQE). Both backends read the SDR QP index out of a tag as fw.h lays
 * it out (fw_tag_qp: tag >> 8) to pick the worker of its send completions and the doorbell they
 * raise once a full send queue has room again: the sender's tag carries PROBE_TX_QP_INDEX, so
 * that doorbell comes back to the burst job. The receiver's tag is fw_qp_tag(3, 1, 1), bits in
 * every field; its receive CQEs go to the worker of channel PROBE_RX_CHANNEL. */
enum {
    PROBE_TX_QP_INDEX = 2,
    PROBE_TX_TAG = PROBE_TX_QP_INDEX << 8,
    PROBE_RX_TAG = (3 << 8) | (1 << 5) | 1,
    PROBE_RX_CHANNEL = 1
};

/* A connected transport QP pair, filled in by the harness: the sender's QP handle and its
 * source region, the receiver's key. remote_va is zero-based, as hal_tx_wqe says. */
struct probe_path {
    uint32_t qp;
    uint32_t lkey;
    uint64_t local_addr;
    uint32_t rkey;
    uint32_t local_len, remote_len; /* bytes of each region */
    uint32_t sq_depth;              /* the sender's send queue, in WQEs */
};

/* Window job: `writes` hal_window_write64 of value + k into words first_word + k, then `adds`
 * hal_window_add64 of bit k into word first_word + writes, then `refused` accesses outside
 * the window (k even: just past the end, k odd: near 2^64; k & 2: add, else write). */
struct probe_window_job {
    struct hal_window win;
    uint64_t first_word;
    uint64_t value;
    uint32_t writes, adds, refused, runs;
};

struct probe_counter_job {
    uint64_t base;
    uint32_t times, runs;
};

struct probe_clock_job {
    uint32_t reads;
    uint32_t backwards; /* reads that returned less than the one before */
    uint64_t first, last;
};

/* A timer slot: the doorbell arm_on arms timer `id` of its worker at clock + first_delay_ns
 * (or, with past set, at the clock itself and 1 us before it: a deadline already due), then,
 * if rearm, again at clock + second_delay_ns. The timer handler counts the fires of (worker,
 * id) and when the last one came. */
struct probe_timer_slot {
    uint32_t arm_on, id, rearm, past;
    uint64_t first_delay_ns, second_delay_ns;
    uint64_t deadline_ns;  /* the deadline in force after arming */
    uint64_t armed_by;     /* the hal_worker that armed it (an identity, never dereferenced) */
    uint64_t fired_on;     /* the hal_worker whose handler saw it fire */
    uint64_t fired_at_ns;  /* hal_clock_ns at the last fire */
    uint32_t fires;
    uint32_t armed;        /* set (release) after the arm: the test then reads deadline_ns */
};

/* Atomics job, run by a doorbell handler (PROBE_OP_ATOMICS) and by the receive handler for a
 * CQE whose immediate is rx_atomics_imm: two handler contexts, which the backend may run at
 * the same moment (a receive handler on a worker thread of its own, a doorbell on another).
 * Every context that runs it waits (up to 2 s of hal_clock_ns) until `parties` contexts have
 * arrived, then does `iterations` rounds of fetch-add on add32 and a compare-exchange increment
 * of cas64, and sets each of the 1024 bits of or_bits with fetch-or, counting the bits it found
 * clear. Exact totals prove the operations atomic. */
struct probe_atomics_job {
    uint32_t iterations, parties;
    uint32_t arrived;      /* the start barrier */
    uint32_t met;          /* contexts that saw every party arrive (ran concurrently) */
    uint32_t add32;
    uint32_t or_new;       /* bits found clear by their setter, summed over contexts */
    uint32_t done;         /* contexts finished */
    uint32_t cas_retries;  /* failed compare-exchanges: contention seen */
    uint64_t cas64;
    uint64_t or_bits[PROBE_OR_WORDS];
};

struct probe_send_wqe {
    uint32_t imm, length, src_offset, cookie;
    uint64_t dst_offset;
    uint32_t signaled, pad;
};

struct probe_send_job {
    uint32_t n;
    uint32_t taken; /* what hal_tx_post returned */
    struct probe_send_wqe wqe[PROBE_SEND_WQES];
};

/* Burst job: WQE k has immediate imm_base + k and length (k % 4) * 8 bytes; the last one is
 * signalled with cookie `cookie`. Each doorbell run posts bursts of burst_size until one is
 * cut short (then it waits for the backend's doorbell) or all `total` are taken. */
struct probe_burst_job {
    uint32_t total, burst_size, imm_base, cookie;
    uint32_t next;               /* WQEs taken so far */
    uint32_t runs;               /* doorbell runs */
    uint32_t short_calls;        /* hal_tx_post calls that took fewer than offered */
    uint32_t bad_return;         /* a return above what was offered */
    uint32_t run_taken[PROBE_BURST_RUNS];
    uint32_t run_short_ret[PROBE_BURST_RUNS]; /* the short call's return in that run, or ~0 */
};

struct probe_cqe_log {
    uint32_t count;   /* CQEs of this kind seen */
    uint32_t pad;
    struct hal_cqe cqe[PROBE_LOG];
};

/* What the receive handler checks of a burst as it arrives (immediates imm_base + k). */
struct probe_rx_burst {
    uint32_t imm_base, total;
    uint32_t in_order;   /* CQEs with the next expected immediate and its length */
    uint32_t wrong;      /* burst CQEs out of order, duplicated or of the wrong length */
};

struct probe {
    uint32_t op[PROBE_DOORBELLS];
    uint32_t doorbells[PROBE_DOORBELLS];   /* handler runs per index */
    uint32_t stray_doorbells;              /* doorbells for an index >= PROBE_DOORBELLS */
    uint32_t stray_timers;                 /* fires that match no armed slot */
    uint32_t unknown_cqes;                 /* CQEs of an opcode hal.h does not define */
    uint32_t rx_atomics_imm;               /* a receive with this immediate runs the atomics job */
    struct probe_path path;
    struct probe_window_job window[PROBE_DOORBELLS];
    struct probe_counter_job counters[PROBE_DOORBELLS];
    struct probe_clock_job clock[PROBE_DOORBELLS];
    struct probe_timer_slot timer[PROBE_TIMER_SLOTS];
    struct probe_atomics_job atomics;
    struct probe_send_job send;
    struct probe_burst_job burst;
    struct probe_rx_burst rx_burst;
    struct probe_cqe_log rx; /* HAL_CQE_RECV_WRITE_IMM */
    struct probe_cqe_log tx; /* HAL_CQE_SEND */
};

/* The burst job's WQE lengths, shared by the sender, the receiver and the test. */
static inline uint32_t probe_burst_length(uint32_t k) { return (k % 4u) * 8u; }

#ifdef __cplusplus
}
#endif

#endif /* SDR_HAL_CONFORMANCE_PROBE_H */
