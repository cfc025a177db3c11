/* Receive-side set-up: layout of the slot table in NIC memory, arming and disarming slots.
 * Called by the host library (on hardware: writes into DPA memory), never by a handler. */
#include <sdr/firmware/fw.h>

static uint64_t align8(uint64_t n) { return (n + 7u) & ~(uint64_t)7u; }

static uint32_t bitmap_words_per_slot(uint32_t max_packets) { return (max_packets + 63u) / 64u; }

static uint32_t counters_per_slot(uint32_t max_packets, uint32_t log_ppc)
{
    /* a chunk of at most 64 packets completes inside one bitmap word: no counter needed */
    if (log_ppc <= 6) return 0;
    return (max_packets + (1u << log_ppc) - 1u) >> log_ppc;
}

uint64_t fw_rx_qp_mem_bytes(uint32_t nslots, uint32_t max_packets, uint32_t log_ppc)
{
    uint64_t per_slot = (uint64_t)bitmap_words_per_slot(max_packets) * 8u +
                        align8((uint64_t)counters_per_slot(max_packets, log_ppc) * 4u);
    return align8((uint64_t)nslots * sizeof(struct fw_slot)) + (uint64_t)nslots * per_slot;
}

void fw_rx_qp_init(struct fw_rx_qp *qp, void *mem, struct fw_imm_layout imm, uint32_t nslots,
                   uint32_t max_packets, uint32_t log_ppc, uint32_t mtu_log,
                   uint32_t num_generations, struct hal_window window)
{
    uint32_t nchunks_max = (max_packets + (1u << log_ppc) - 1u) >> log_ppc;
    uint32_t words = bitmap_words_per_slot(max_packets);
    uint32_t ncount = counters_per_slot(max_packets, log_ppc);
    uint8_t *p = (uint8_t *)mem;

    qp->imm = imm;
    qp->num_generations = num_generations;
    qp->slot_mask = nslots - 1u;
    qp->log_packets_per_chunk = log_ppc;
    qp->mtu_log = mtu_log;
    qp->max_packets = max_packets;
    qp->bitmap_words = (nchunks_max + 63u) / 64u;
    qp->slot_window_words = qp->bitmap_words + 1u;
    qp->window = window;
    qp->one_thread = 0;
    qp->slots = (struct fw_slot *)p;
    p += align8((uint64_t)nslots * sizeof(struct fw_slot));
    for (uint32_t s = 0; s < nslots; s++) {
        struct fw_slot *slot = &qp->slots[s];
        slot->tag = 0;
        slot->npackets = slot->nchunks = slot->last_chunk_packets = 0;
        slot->imm_acc = 0;
        slot->packet_bitmap = (uint64_t *)p;
        p += (uint64_t)words * 8u;
        slot->chunk_count = ncount ? (uint32_t *)p : (uint32_t *)0;
        p += align8((uint64_t)ncount * 4u);
        for (uint32_t i = 0; i < words; i++) slot->packet_bitmap[i] = 0;
        for (uint32_t i = 0; i < ncount; i++) slot->chunk_count[i] = 0;
    }
}

void fw_rx_slot_arm(struct fw_rx_qp *qp, uint32_t s, uint32_t generation, uint32_t msg_id,
                    uint64_t length)
{
    struct fw_slot *slot = &qp->slots[s & qp->slot_mask];
    uint32_t ppc = 1u << qp->log_packets_per_chunk;
    uint64_t mtu = 1ull << qp->mtu_log;
    uint32_t npackets = (uint32_t)((length + mtu - 1u) >> qp->mtu_log);

    hal_store_release32(&slot->tag, 0);
    /* Clear only what the previous message could have touched: packets beyond its npackets
     * were rejected by the offset check. This is the per-receive repost cost the paper
     * measures, proportional to the previous message, not to the slot size. */
    uint32_t words = (slot->npackets + 63u) / 64u;
    /* Relaxed atomic stores: a receive handler of the previous message may still run on a
     * worker thread and read these (it passed the tag check before the tag went to 0). */
    uint32_t nchunks = (npackets + ppc - 1u) / ppc;
    for (uint32_t i = 0; i < words; i++) hal_store_relaxed64(&slot->packet_bitmap[i], 0);
    if (slot->chunk_count)
        for (uint32_t i = 0; i < slot->nchunks; i++) hal_store_relaxed32(&slot->chunk_count[i], 0);
    hal_store_relaxed32(&slot->npackets, npackets);
    hal_store_relaxed32(&slot->nchunks, nchunks);
    hal_store_relaxed32(&slot->last_chunk_packets, npackets - (nchunks ? (nchunks - 1u) * ppc : 0u));
    hal_store_relaxed64(&slot->imm_acc, 0);
    hal_store_release32(&slot->tag, fw_slot_tag(generation, msg_id));
}

void fw_rx_slot_disarm(struct fw_rx_qp *qp, uint32_t s)
{
    hal_store_release32(&qp->slots[s & qp->slot_mask].tag, 0);
}

void fw_rx_chunk_expand(const struct fw_rx_qp *qp, uint32_t s, uint32_t chunk, uint64_t *bits,
                        uint32_t nwords)
{
    const struct fw_slot *slot = &qp->slots[s & qp->slot_mask];
    uint32_t ppc = 1u << qp->log_packets_per_chunk;
    uint32_t first = chunk * ppc;
    for (uint32_t i = 0; i < nwords; i++) bits[i] = 0;
    for (uint32_t i = 0; i < ppc && i / 64u < nwords; i++) {
        uint32_t p = first + i;
        if (p >= qp->max_packets) break;
        if (hal_load_relaxed64(&slot->packet_bitmap[p >> 6]) >> (p & 63u) & 1u)
            bits[i >> 6] |= 1ull << (i & 63u);
    }
}
