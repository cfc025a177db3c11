/* Send side: cut each send work request into single-packet UC WRITE-with-IMM WQEs and spray
 * them round-robin over the channels of the message's generation; report injection. */
#include <sdr/firmware/fw.h>

static uint32_t data_packets(const struct fw_tx_qp *qp, const struct fw_send_wr *wr)
{
    return (uint32_t)(((uint64_t)wr->length + (1ull << qp->mtu_log) - 1u) >> qp->mtu_log);
}

static uint32_t popcount32(uint32_t v)
{
    uint32_t n = 0;
    for (; v; v &= v - 1u) n++;
    return n;
}

/* What every packet of one request shares, read once: hal_tx_post is a call the compiler cannot
 * see into, so fields read through qp and wr were loaded again for every packet. */
struct wr_plan {
    uint64_t local, remote;       /* the request's source, and its slot's base in the root key */
    uint32_t length, first, ndata;
    uint32_t lkey, rkey, user_imm, pad_frags;
    uint32_t mtu_log, imm_high;   /* imm_high: the message id, shifted into place */
    struct fw_imm_layout imm;
    const uint32_t *channel_qp;   /* the generation's transport QPs */
};

static void plan_wr(const struct fw_tx_qp *qp, const struct fw_send_wr *wr, uint32_t ndata, struct wr_plan *p)
{
    p->local = wr->local_addr;
    p->remote = (uint64_t)wr->slot * qp->slot_bytes;
    p->length = wr->length;
    p->first = wr->first_packet;
    p->ndata = ndata;
    p->lkey = wr->lkey;
    p->rkey = qp->rkey[wr->generation];
    p->user_imm = wr->user_imm;
    p->pad_frags = wr->pad_frags;
    p->mtu_log = qp->mtu_log;
    p->imm = qp->imm;
    p->imm_high = fw_imm_encode(qp->imm, wr->msg_id, 0, 0);
    p->channel_qp = qp->channel_qp[wr->generation];
}

/* Packet i of a request: data packets first, then one zero-length packet per padding
 * fragment (lowest fragment first), each at packet offset = fragment index. */
static void build_wqe(const struct wr_plan *p, uint32_t i, struct hal_tx_wqe *wqe)
{
    uint32_t offset, length;
    uint64_t local = p->local;
    if (i < p->ndata) {
        uint64_t start = (uint64_t)i << p->mtu_log;
        uint64_t rest = p->length - start;
        length = rest < (1ull << p->mtu_log) ? (uint32_t)rest : (1u << p->mtu_log);
        offset = p->first + i;
        local += start;
    } else {
        uint32_t k = i - p->ndata, pad = p->pad_frags;
        while (k--) pad &= pad - 1u; /* drop the k lowest padding fragments */
        offset = (uint32_t)__builtin_ctz(pad);
        length = 0;
    }
    uint32_t j = fw_imm_frag_index(p->imm, offset);
    wqe->imm = p->imm_high | fw_imm_encode(p->imm, 0, offset, fw_imm_user_frag(p->imm, p->user_imm, j));
    wqe->local_addr = local;
    wqe->lkey = p->lkey;
    wqe->length = length;
    /* Padding packets write nothing: they address the slot's base, so a padding offset past a
     * small slot never points into the next slot. */
    wqe->remote_va = p->remote + (length ? (uint64_t)offset << p->mtu_log : 0);
    wqe->rkey = p->rkey;
}

/* Retire requests in order once all their packets are posted and signalled WQEs completed;
 * publish the count to the host (one window write per batch of retired requests). */
static void retire(struct fw_tx_qp *qp, struct hal_worker *w)
{
    uint32_t done = qp->done_cursor;
    while (done != qp->post_cursor) {
        struct fw_send_wr *wr = &qp->ring[done & qp->ring_mask];
        if (!wr->posted_all || wr->pending) break;
        if (wr->failed && !qp->failed) {
            qp->failed = 1;
            hal_window_write64(w, &qp->window, 1, FW_TX_FAILED | done);
        }
        done++;
        hal_counter_add(w, FW_CNT_TX_WR_DONE, 1);
    }
    if (done != qp->done_cursor) {
        qp->done_cursor = done;
        hal_window_write64(w, &qp->window, 0, done);
    }
}

/* Packets posted per HAL call: one call carries a burst, as a doorbell carries a batch of WQEs
 * (the published SDK posts 8 per doorbell); the WQEs live on the handler's stack. */
#define FW_TX_BURST 8u

/* Post packets until the ring is drained (true), or the send queue is full or pacing says wait
 * (false); *posted counts the WQEs, added to the counter once per call, not per packet. */
static bool tx_post(struct fw_tx_qp *qp, struct hal_worker *w, uint32_t *posted)
{
    uint32_t head = hal_load_acquire32(&qp->head);
    while (qp->post_cursor != head) {
        uint32_t idx = qp->post_cursor & qp->ring_mask;
        struct fw_send_wr *wr = &qp->ring[idx];
        uint32_t ndata = data_packets(qp, wr);
        uint32_t total = ndata + popcount32(wr->pad_frags);
        /* The last WQE on each channel used is signalled: its completion implies the
         * channel's earlier WQEs left, whatever the order between channels. Packets from
         * first_signaled on are those last ones. */
        uint32_t nch = qp->num_channels;
        uint32_t first_signaled = total > nch ? total - nch : 0u;
        struct wr_plan plan;
        plan_wr(qp, wr, ndata, &plan);
        while (wr->next_packet < total) {
            uint32_t i = wr->next_packet;
            /* Pacing (rate_limit, Mbit/s of frames): one packet per call, and wait for the QP's
             * next transmit time on a timer rather than holding the worker. */
            uint64_t now_ps = 0;
            uint32_t n = total - i < FW_TX_BURST ? total - i : FW_TX_BURST;
            if (qp->rate_mbps) {
                now_ps = hal_clock_ns(w) * 1000u;
                if (qp->next_tx_ps > now_ps) {
                    hal_timer_arm(w, qp->index, (qp->next_tx_ps + 999u) / 1000u);
                    hal_counter_add(w, FW_CNT_TX_PACED, 1);
                    return false;
                }
                n = 1;
            }
            struct hal_tx_wqe wqe[FW_TX_BURST];
            /* Round-robin position continues across messages, so short messages spread too. */
            uint32_t ch = qp->next_channel;
            for (uint32_t k = 0; k < n; k++) {
                build_wqe(&plan, i + k, &wqe[k]);
                wqe[k].qp = plan.channel_qp[ch];
                wqe[k].cookie = idx;
                wqe[k].signaled = (i + k >= first_signaled);
                ch = (ch + 1u == nch) ? 0u : ch + 1u;
            }
            uint32_t m = hal_tx_post(w, wqe, n);
            /* Of the m taken, those at or after first_signaled are signalled. */
            uint32_t from = i > first_signaled ? i : first_signaled;
            uint32_t signaled = i + m > from ? i + m - from : 0u;
            ch = qp->next_channel + m; /* no division: m is at most a burst */
            while (ch >= nch) ch -= nch;
            qp->next_channel = ch;
            if (m && qp->rate_mbps) {
                /* ps = frame bits * 1e6 / (Mbit/s) */
                uint64_t bits = 8u * (FW_FRAME_OVERHEAD_BYTES + (uint64_t)wqe[0].length);
                uint64_t start = qp->next_tx_ps > now_ps ? qp->next_tx_ps : now_ps;
                qp->next_tx_ps = start + bits * 1000000u / qp->rate_mbps;
            }
            wr->pending += signaled;
            wr->next_packet = i + m;
            *posted += m;
            if (m < n) {
                hal_counter_add(w, FW_CNT_TX_SQ_FULL, 1);
                return false; /* doorbell again when the send queue drains */
            }
        }
        wr->posted_all = 1;
        qp->post_cursor++;
    }
    return true;
}

static void tx_run(struct fw_tx_qp *qp, struct hal_worker *w)
{
    uint32_t posted = 0;
    bool drained = tx_post(qp, w, &posted);
    if (posted) hal_counter_add(w, FW_CNT_TX_PACKETS, posted);
    if (drained) retire(qp, w);
}

void fw_handle_doorbell(struct fw_device *dev, struct hal_worker *w, uint32_t qp_index)
{
    struct fw_tx_qp *qp = (qp_index < FW_MAX_QPS) ? dev->qps[qp_index].tx : (struct fw_tx_qp *)0;
    if (!qp) {
        hal_counter_add(w, FW_CNT_UNKNOWN_QP, 1);
        return;
    }
    tx_run(qp, w);
}

void fw_handle_timer(struct fw_device *dev, struct hal_worker *w, uint32_t timer_id)
{
    fw_handle_doorbell(dev, w, timer_id); /* a paced QP's next transmit time has come */
}

static void tx_completion(struct fw_tx_qp *qp, struct hal_worker *w, const struct hal_cqe *cqe)
{
    struct fw_send_wr *wr = &qp->ring[cqe->wr_cookie & qp->ring_mask];
    if (cqe->status != HAL_CQE_OK) {
        hal_counter_add(w, FW_CNT_TX_CQE_ERROR, 1);
        wr->failed = 1;
    }
    if (wr->pending) wr->pending--;
    retire(qp, w);
}

void fw_handle_cqe(struct fw_device *dev, struct hal_worker *w, const struct hal_cqe *cqe)
{
    uint32_t q = fw_tag_qp(cqe->qp_tag);
    struct fw_qp *qp = (q < FW_MAX_QPS) ? &dev->qps[q] : (struct fw_qp *)0;
    if (cqe->opcode == HAL_CQE_RECV_WRITE_IMM && qp && qp->rx) {
        if (cqe->status != HAL_CQE_OK) {
            hal_counter_add(w, FW_CNT_RX_CQE_ERROR, 1);
            return;
        }
        fw_rx_cqe(qp->rx, fw_tag_generation(cqe->qp_tag), w, cqe);
    } else if (cqe->opcode == HAL_CQE_SEND && qp && qp->tx) {
        tx_completion(qp->tx, w, cqe);
    } else {
        hal_counter_add(w, FW_CNT_UNKNOWN_QP, 1);
    }
}
