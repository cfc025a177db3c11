/*
 * SDR firmware: the per-packet handlers of the emulated DPA, written only against hal/.
 *
 * Memory: every struct here lives in NIC memory, laid out by the host library at QP creation
 * (set-up code, fw_*_init); handlers only read and update it. Receive side per SDR QP:
 * S message slots, each with a per-packet bitmap and (for chunks of more than 64 packets) a
 * per-chunk packet counter; the host sees one chunk bitmap and one immediate word per slot
 * through a window. Send side: a ring of send work requests written by the host, consumed by
 * the TX handler, which cuts them into single-packet UC WRITE-with-IMM and sprays them
 * round-robin over the channels of the message's generation.
 *
 * Message n of a QP (the n-th send, matching the n-th posted receive) uses
 *   slot = n mod S,  msg_id = n mod 2^msg_bits,  generation = (n / S) mod G,
 * G a QP parameter in 1..FW_MAX_GENERATIONS. The generation changes every time a slot is
 * reused, so a late packet of one of the slot's G - 1 previous messages arrives on another
 * generation's transport QP and root key: its payload hits that generation's NULL key and its
 * CQE fails the slot's tag check. The (slot, generation) pair itself comes back every G reuses;
 * the host keeps it on the NULL key for the QP's maximum packet lifetime after the receive
 * that used it last was completed, so no packet of that message can still be in flight.
 */
#ifndef SDR_FIRMWARE_FW_H
#define SDR_FIRMWARE_FW_H

#include <sdr/firmware/imm.h>
#include <sdr/hal/hal.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    FW_MAX_QPS = 256,        /* SDR QPs per device */
    FW_MAX_CHANNELS = 16,    /* transport QPs per generation, one per DPA worker */
    /* G, the QP's number of generations, is 1..FW_MAX_GENERATIONS: the transport-QP tag
     * (fw_qp_tag) has 3 generation bits between the channel (5 bits) and the QP index. */
    FW_MAX_GENERATIONS = 8,
};

/* Bytes a UC WRITE-only-with-immediate frame adds to its payload (Ethernet 14, IPv4 20, UDP 8,
 * BTH 12, RETH 16, ImmDt 4, ICRC 4): what rate_limit pacing counts per packet. */
#define FW_FRAME_OVERHEAD_BYTES 78u

/* qp_tag of a transport QP: which SDR QP, generation and channel it serves. */
static inline uint32_t fw_qp_tag(uint32_t qp_index, uint32_t generation, uint32_t channel)
{
    return (qp_index << 8) | (generation << 5) | channel;
}
static inline uint32_t fw_tag_qp(uint32_t tag) { return tag >> 8; }
static inline uint32_t fw_tag_generation(uint32_t tag) { return (tag >> 5) & 7u; }

/* Firmware counters (per worker, through hal_counter_add). */
enum fw_counter {
    FW_CNT_RX_CQE = 0,         /* receive CQEs handled */
    FW_CNT_RX_STALE,           /* dropped: slot idle, other message id or other generation */
    FW_CNT_RX_BAD_OFFSET,      /* dropped: packet offset beyond the posted buffer */
    FW_CNT_RX_DUPLICATE,       /* packet bit already set */
    FW_CNT_RX_CQE_ERROR,       /* CQE with error status */
    FW_CNT_CHUNK_COMPLETE,     /* chunk bits written to the host */
    FW_CNT_IMM_COMPLETE,       /* user immediates published */
    FW_CNT_TX_PACKETS,         /* WQEs posted */
    FW_CNT_TX_SQ_FULL,         /* hal_tx_post refused: send queue full */
    FW_CNT_TX_WR_DONE,         /* send work requests fully injected */
    FW_CNT_TX_CQE_ERROR,       /* send completion with error status */
    FW_CNT_UNKNOWN_QP,         /* event for a QP that is not loaded */
    FW_CNT_TX_PACED,           /* posting paused by the rate limit (timer armed) */
    FW_CNT__COUNT
};
extern const char *const fw_counter_names[FW_CNT__COUNT];

/* ---- Receive side ------------------------------------------------------------------------ */

/* Slot tag: armed bit | generation | message id; 0 = idle (NULL key, every CQE dropped). */
#define FW_SLOT_ARMED 0x80000000u
static inline uint32_t fw_slot_tag(uint32_t generation, uint32_t msg_id)
{
    return FW_SLOT_ARMED | (generation << 24) | msg_id;
}

struct fw_slot {
    uint32_t tag;            /* written last (release) by arm, read first (acquire) per CQE */
    uint32_t npackets;       /* packets that cover the posted buffer */
    uint32_t nchunks;
    uint32_t last_chunk_packets;
    uint64_t imm_acc;        /* fragment mask << 32 | user immediate bits gathered so far */
    uint64_t *packet_bitmap; /* ceil(max packets / 64) words */
    uint32_t *chunk_count;   /* packets seen per chunk; only when a chunk spans > 64 packets */
};

struct fw_rx_qp {
    struct fw_imm_layout imm;
    uint32_t num_generations;      /* G: slot tags carry generations 0..G-1 */
    uint32_t slot_mask;            /* S - 1 (S a power of two, S divides 2^msg_bits) */
    uint32_t log_packets_per_chunk;
    uint32_t mtu_log;
    uint32_t max_packets;          /* per slot: slot bytes / MTU */
    uint32_t bitmap_words;         /* host chunk-bitmap words per slot */
    uint32_t slot_window_words;    /* bitmap_words + 1 (the immediate word) */
    struct fw_slot *slots;
    struct hal_window window;      /* host: S x [chunk bitmap words, immediate word] */
    /* Nonzero when the backend runs this QP's receive handlers and its host's slot re-arming
     * on one thread (the simulator): NIC memory is then updated with plain read-modify-writes,
     * not locked instructions (their compare-exchange loop was half of fw_rx_cqe's samples in
     * the simulator, perf). fw_rx_qp_init sets 0 (atomics). */
    uint32_t one_thread;
};

/* The immediate word of a slot's window: bit 63 set once all fragments are in. */
#define FW_IMM_VALID (1ull << 63)

/* ---- Send side ---------------------------------------------------------------------------- */

/* One send work request, written by the host into the QP's send ring. */
struct fw_send_wr {
    uint64_t local_addr;
    uint32_t lkey;
    uint32_t length;        /* bytes; 0 for an end-of-message request */
    uint32_t first_packet;  /* remote offset in packets */
    uint32_t msg_id;
    uint32_t generation;
    uint32_t slot;
    uint32_t user_imm;
    uint32_t pad_frags;     /* fragments to send as zero-length packets (short messages) */
    /* firmware-owned progress */
    uint32_t next_packet;   /* packets (data, then padding) already posted */
    uint32_t pending;       /* signalled WQEs not yet completed */
    uint32_t posted_all;
    uint32_t failed;        /* a WQE of it completed in error */
};

struct fw_tx_qp {
    struct fw_imm_layout imm;
    uint32_t mtu_log;
    uint32_t num_channels;
    uint32_t next_channel;                                 /* round-robin spray position */
    uint32_t index;                                        /* SDR QP index: its timer id */
    uint32_t rate_mbps;                                    /* pacing; 0 = line rate */
    uint64_t next_tx_ps;                                   /* pacing: earliest next post */
    uint64_t slot_bytes;                                   /* M of the remote */
    uint32_t num_generations;                              /* G: rows of rkey, channel_qp */
    uint32_t rkey[FW_MAX_GENERATIONS];                     /* remote root keys */
    uint32_t channel_qp[FW_MAX_GENERATIONS][FW_MAX_CHANNELS]; /* local transport QP handles */
    struct fw_send_wr *ring;
    uint32_t ring_mask;
    uint32_t head;          /* written by the host (release): requests posted */
    uint32_t post_cursor;   /* firmware: requests whose packets are all posted */
    uint32_t done_cursor;   /* firmware: requests fully injected, in order */
    uint32_t failed;        /* firmware: a request was retired in error (written once) */
    struct hal_window window; /* host word 0: done_cursor; word 1: FW_TX_FAILED | its position */
};

/* Send window word 1: set, with the ring position of the first request a WQE of which completed
 * in error (a transport QP out of retries, the peer refusing it), before word 0 passes that
 * request. Like a verbs QP in the error state, the SDR QP fails every request from it on. */
#define FW_TX_FAILED (1ull << 63)

struct fw_qp {
    struct fw_rx_qp *rx; /* NULL if receive is disabled */
    struct fw_tx_qp *tx; /* NULL if send is disabled */
};

struct fw_device {
    struct fw_qp qps[FW_MAX_QPS];
};

/* ---- Handlers (run to completion on a worker) ------------------------------------------- */

/* Every CQE of a worker's CQ: receive → bitmap/immediate bookkeeping, send → injection. */
void fw_handle_cqe(struct fw_device *dev, struct hal_worker *w, const struct hal_cqe *cqe);
/* Send doorbell (new requests, or send-queue space freed): post packets until the ring is
 * drained or the send queue is full. */
void fw_handle_doorbell(struct fw_device *dev, struct hal_worker *w, uint32_t qp_index);
/* Timer expiry: timer id = SDR QP index, armed by a paced QP waiting for its next slot. */
void fw_handle_timer(struct fw_device *dev, struct hal_worker *w, uint32_t timer_id);

/* Receive handler proper (exposed for benchmarks): one CQE of generation `generation`. */
void fw_rx_cqe(struct fw_rx_qp *qp, uint32_t generation, struct hal_worker *w,
               const struct hal_cqe *cqe);

/* ---- Set-up (host library, through NIC-memory writes; not handlers) ---------------------- */

/* Bytes of NIC memory fw_rx_qp_init needs for S slots of max_packets each. */
uint64_t fw_rx_qp_mem_bytes(uint32_t nslots, uint32_t max_packets, uint32_t log_packets_per_chunk);
/* Lay out the receive side in mem (8-byte aligned, fw_rx_qp_mem_bytes long) for a QP of
 * num_generations generations (1..FW_MAX_GENERATIONS). */
void fw_rx_qp_init(struct fw_rx_qp *qp, void *mem, struct fw_imm_layout imm, uint32_t nslots,
                   uint32_t max_packets, uint32_t log_packets_per_chunk, uint32_t mtu_log,
                   uint32_t num_generations, struct hal_window window);
/* Prepare a slot for message (generation, msg_id) of length bytes: clear its per-packet
 * state, then publish the tag. The host clears its own window words. */
void fw_rx_slot_arm(struct fw_rx_qp *qp, uint32_t slot, uint32_t generation, uint32_t msg_id,
                    uint64_t length);
/* Return the slot to idle: from now on its CQEs are dropped. */
void fw_rx_slot_disarm(struct fw_rx_qp *qp, uint32_t slot);
/* Per-packet detail of one chunk (bit i = packet i of the chunk). */
void fw_rx_chunk_expand(const struct fw_rx_qp *qp, uint32_t slot, uint32_t chunk,
                        uint64_t *bits, uint32_t nwords);

#ifdef __cplusplus
}
#endif

#endif /* SDR_FIRMWARE_FW_H */
