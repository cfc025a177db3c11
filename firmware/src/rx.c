/* Receive handler: one CQE per packet (arXiv 2505.05366: the receive DPA worker). Touches CQE and NIC memory only,
 * never payload, so its cost is per packet whatever the MTU. */
#include <sdr/firmware/fw.h>

/* Relaxed loads: the host may re-arm the slot while a handler that passed the tag check still
 * runs on a worker thread (the firmware then sees old or new sizes, never torn ones). */
static inline uint32_t chunk_packets(const struct fw_slot *slot, uint32_t c, uint32_t log_ppc)
{
    return (c + 1u == hal_load_relaxed32(&slot->nchunks)) ? hal_load_relaxed32(&slot->last_chunk_packets)
                                                          : (1u << log_ppc);
}

/* Mask of the packets of chunk c inside their bitmap word (chunks of at most 64 packets). */
static inline uint64_t chunk_word_mask(const struct fw_slot *slot, uint32_t c, uint32_t log_ppc,
                                       uint32_t p)
{
    uint32_t n = chunk_packets(slot, c, log_ppc);
    uint64_t ones = (n >= 64u) ? ~0ull : ((1ull << n) - 1u);
    return ones << ((p & 63u) & ~((1u << log_ppc) - 1u));
}

/* Fetch-or on NIC memory: atomic when handlers may run concurrently, else a plain
 * read-modify-write (qp->one_thread; a predicted branch instead of a locked instruction). */
static inline uint64_t fetch_or64(const struct fw_rx_qp *qp, uint64_t *p, uint64_t v)
{
    if (!qp->one_thread) return hal_atomic_fetch_or64(p, v);
    uint64_t old = *p;
    *p = old | v;
    return old;
}
static inline uint32_t fetch_add32(const struct fw_rx_qp *qp, uint32_t *p, uint32_t v)
{
    if (!qp->one_thread) return hal_atomic_fetch_add32(p, v);
    uint32_t old = *p;
    *p = old + v;
    return old;
}

/* The worker whose packet completes a chunk writes its bit to the host: exactly once. */
static inline void chunk_done(struct fw_rx_qp *qp, struct hal_worker *w, uint32_t s, uint32_t c)
{
    uint64_t word = (uint64_t)s * qp->slot_window_words + (c >> 6);
    hal_window_add64(w, &qp->window, word, 1ull << (c & 63u));
    hal_counter_add(w, FW_CNT_CHUNK_COMPLETE, 1);
}

/* Gather the user-immediate fragment; publish the immediate when the last one arrives. */
static inline void gather_imm(struct fw_rx_qp *qp, struct hal_worker *w, struct fw_slot *slot,
                              uint32_t s, uint32_t packet_offset, uint32_t frag)
{
    uint32_t j = fw_imm_frag_index(qp->imm, packet_offset);
    uint64_t have = 1ull << (32u + j);
    if (hal_load_relaxed64(&slot->imm_acc) & have) return; /* common case: already known */
    uint64_t old = fetch_or64(qp, &slot->imm_acc,
                              have | ((uint64_t)frag << (j * qp->imm.frag_bits)));
    if (old & have) return;
    uint32_t nfrags = fw_imm_num_frags(qp->imm);
    uint64_t all = ((nfrags >= 32u) ? 0xFFFFFFFFull : ((1ull << nfrags) - 1u)) << 32;
    uint64_t now = old | have | ((uint64_t)frag << (j * qp->imm.frag_bits));
    if ((now & all) != all) return;
    uint64_t word = (uint64_t)s * qp->slot_window_words + qp->bitmap_words;
    hal_window_write64(w, &qp->window, word, FW_IMM_VALID | (now & 0xFFFFFFFFull));
    hal_counter_add(w, FW_CNT_IMM_COMPLETE, 1);
}

static inline void rx_cqe(struct fw_rx_qp *qp, uint32_t generation, struct hal_worker *w,
                          const struct hal_cqe *cqe)
{
    struct fw_imm imm = fw_imm_decode(qp->imm, cqe->imm);
    uint32_t s = imm.msg_id & qp->slot_mask;
    struct fw_slot *slot = &qp->slots[s];

    /* 1. a CQE of another message or generation (late, or id wrapped) is dropped */
    if (hal_load_acquire32(&slot->tag) != fw_slot_tag(generation, imm.msg_id)) {
        hal_counter_add(w, FW_CNT_RX_STALE, 1);
        return;
    }
    uint32_t p = imm.packet_offset;
    /* Zero-length packets carry only an immediate fragment (padding of short messages). */
    if (cqe->byte_len != 0) {
        if (p >= hal_load_relaxed32(&slot->npackets)) {
            hal_counter_add(w, FW_CNT_RX_BAD_OFFSET, 1);
            return;
        }
        /* 2. set bit p of the per-packet bitmap in NIC memory */
        uint32_t log_ppc = qp->log_packets_per_chunk;
        uint64_t bit = 1ull << (p & 63u);
        uint64_t old = fetch_or64(qp, &slot->packet_bitmap[p >> 6], bit);
        if (old & bit) {
            hal_counter_add(w, FW_CNT_RX_DUPLICATE, 1);
        } else {
            /* 3. the packet that completes its chunk writes the chunk bit to the host */
            uint32_t c = p >> log_ppc;
            if (log_ppc <= 6) {
                uint64_t mask = chunk_word_mask(slot, c, log_ppc, p);
                if (((old | bit) & mask) == mask) chunk_done(qp, w, s, c);
            } else if (fetch_add32(qp, &slot->chunk_count[c], 1) + 1u ==
                       chunk_packets(slot, c, log_ppc)) {
                chunk_done(qp, w, s, c);
            }
        }
    }
    /* 4. user-immediate fragments */
    gather_imm(qp, w, slot, s, p, imm.frag);
}

void fw_rx_cqe(struct fw_rx_qp *qp, uint32_t generation, struct hal_worker *w,
               const struct hal_cqe *cqe)
{
    rx_cqe(qp, generation, w, cqe);
    /* Counted last: a tail call, so the handler keeps its arguments in registers instead of
     * saving them around a call at its start. */
    hal_counter_add(w, FW_CNT_RX_CQE, 1);
}
