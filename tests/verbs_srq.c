/* A verbs program that knows only <infiniband/verbs.h> and links only -libverbs: shared receive
 * queues and asynchronous events on one emulated device (loopback), checking bytes, completion
 * fields and event records:
 *   - one SRQ feeds an RC QP (a 50000-byte SEND, many packets) and a UD QP (a datagram of the
 *     path MTU): byte-exact, qp_num says which QP took which WQE; ibv_post_recv on an
 *     SRQ-attached QP is EINVAL, ibv_destroy_srq of an SRQ in use EBUSY, resizing EINVAL;
 *   - the SRQ limit: armed with ibv_modify_srq, the event IBV_EVENT_SRQ_LIMIT_REACHED is read
 *     with ibv_get_async_event after poll() on async_fd said it is there, and the limit reads
 *     0 afterwards (disarmed);
 *   - an SRQ-attached QP moved to ERR raises IBV_EVENT_QP_LAST_WQE_REACHED;
 *   - a CQ armed for solicited completions only (ibv_req_notify_cq(cq, 1)) raises no event for
 *     a plain SEND's receive and one for an IBV_SEND_SOLICITED one;
 *   - a CQ of one entry that gets two completions raises IBV_EVENT_CQ_ERR, and ibv_poll_cq
 *     returns -1 after the one it kept;
 *   - every object is destroyed after its events were acknowledged.
 * Exit 0 after "verbs_srq: ok".
 *
 *   verbs_srq NAME
 */
#define _DEFAULT_SOURCE
#include <infiniband/verbs.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERBS_PROG "verbs_srq"
#include "verbs_check.h"

enum { kWqe = 64 * 1024, kWqes = 8, kRcBytes = 50000, kQkey = 0x2222 };

static struct ibv_context* ctx;
static struct ibv_pd* pd;
static union ibv_gid gid;
static enum ibv_mtu mtu;

static struct ibv_wc poll_one(struct ibv_cq* cq, const char* what)
{
    struct ibv_wc wc;
    long spins = 0;
    int n;
    while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) CHECK(++spins < 2000000000L, "no completion for %s", what);
    CHECK(n == 1, "ibv_poll_cq for %s returned %d", what, n);
    CHECK(wc.status == IBV_WC_SUCCESS, "%s completed with %s", what, ibv_wc_status_str(wc.status));
    return wc;
}

static struct ibv_qp* make_qp(enum ibv_qp_type type, struct ibv_cq* scq, struct ibv_cq* rcq, struct ibv_srq* srq)
{
    struct ibv_qp_init_attr a = {.send_cq = scq, .recv_cq = rcq, .srq = srq, .qp_type = type,
                                 .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
    struct ibv_qp* qp = ibv_create_qp(pd, &a);
    CHECK(qp != NULL, "ibv_create_qp type %d", (int)type);
    if (srq) CHECK(a.cap.max_recv_wr == 0 && qp->srq == srq, "an SRQ QP has no receive queue of its own");
    struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1};
    int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    if (type == IBV_QPT_UD) {
        m.qkey = kQkey;
        mask |= IBV_QP_QKEY;
    } else {
        m.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
        mask |= IBV_QP_ACCESS_FLAGS;
    }
    CHECK(ibv_modify_qp(qp, &m, mask) == 0, "modify to INIT");
    return qp;
}

static void to_rts(struct ibv_qp* qp, uint32_t dest_qpn)
{
    struct ibv_qp_attr m = {.qp_state = IBV_QPS_RTR};
    int mask = IBV_QP_STATE;
    if (qp->qp_type == IBV_QPT_RC) {
        m.path_mtu = mtu;
        m.dest_qp_num = dest_qpn;
        m.rq_psn = 7;
        m.ah_attr.is_global = 1;
        m.ah_attr.grh.dgid = gid;
        m.ah_attr.grh.hop_limit = 1;
        m.ah_attr.port_num = 1;
        m.max_dest_rd_atomic = 1;
        m.min_rnr_timer = 12;
        mask |= IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_AV | IBV_QP_MAX_DEST_RD_ATOMIC |
                IBV_QP_MIN_RNR_TIMER;
    }
    CHECK(ibv_modify_qp(qp, &m, mask) == 0, "modify to RTR");
    struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTS, .sq_psn = 7, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
                            .max_rd_atomic = 1};
    mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (qp->qp_type == IBV_QPT_RC) mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    CHECK(ibv_modify_qp(qp, &r, mask) == 0, "modify to RTS");
}

static void fill(uint8_t* p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

/* The next asynchronous event: poll() on async_fd first (it must say readable), then read it. */
static struct ibv_async_event next_event(const char* what)
{
    struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
    CHECK(poll(&p, 1, 10000) == 1 && (p.revents & POLLIN), "async_fd readable for %s", what);
    struct ibv_async_event ev;
    CHECK(ibv_get_async_event(ctx, &ev) == 0, "ibv_get_async_event for %s", what);
    return ev;
}

static void expect_no_event(const char* what)
{
    struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
    CHECK(poll(&p, 1, 0) == 0, "no asynchronous event expected %s", what);
}

static void post_srq(struct ibv_srq* srq, struct ibv_mr* mr, uint8_t* buf, uint64_t i)
{
    struct ibv_sge s = {(uintptr_t)buf + i * kWqe, kWqe, mr->lkey};
    struct ibv_recv_wr w = {.wr_id = 1000 + i, .sg_list = &s, .num_sge = 1}, *bad;
    CHECK(ibv_post_srq_recv(srq, &w, &bad) == 0, "ibv_post_srq_recv %" PRIu64, i);
}

static void send(struct ibv_qp* qp, struct ibv_ah* ah, uint32_t remote_qpn, struct ibv_mr* mr, uint8_t* buf,
                 uint32_t len, uint64_t id)
{
    struct ibv_sge s = {(uintptr_t)buf, len, mr->lkey};
    struct ibv_send_wr w = {.wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
                            .send_flags = IBV_SEND_SIGNALED}, *bad;
    if (ah) {
        w.wr.ud.ah = ah;
        w.wr.ud.remote_qpn = remote_qpn;
        w.wr.ud.remote_qkey = kQkey;
    }
    CHECK(ibv_post_send(qp, &w, &bad) == 0, "ibv_post_send %" PRIu64, id);
}

int main(int argc, char** argv)
{
    CHECK(argc == 2, "usage: verbs_srq NAME");
    int ndev = 0;
    struct ibv_device** list = ibv_get_device_list(&ndev);
    CHECK(list != NULL, "ibv_get_device_list");
    for (int i = 0; i < ndev; ++i)
        if (strcmp(ibv_get_device_name(list[i]), argv[1]) == 0) ctx = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    CHECK(ctx != NULL, "device %s not found or not opened", argv[1]);
    struct ibv_port_attr port;
    CHECK(ibv_query_port(ctx, 1, &port) == 0 && port.state == IBV_PORT_ACTIVE, "port 1 active");
    mtu = port.active_mtu;
    const uint32_t mtu_bytes = 128u << mtu;
    CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0, "ibv_query_gid");
    struct ibv_device_attr dev;
    CHECK(ibv_query_device(ctx, &dev) == 0 && dev.max_srq > 0 && dev.max_srq_wr >= kWqes && dev.max_srq_sge >= 1,
          "max_srq %d max_srq_wr %d max_srq_sge %d", dev.max_srq, dev.max_srq_wr, dev.max_srq_sge);

    pd = ibv_alloc_pd(ctx);
    CHECK(pd != NULL, "ibv_alloc_pd");
    uint8_t* src = malloc(kWqe);
    uint8_t* dst = calloc(kWqes, kWqe);
    CHECK(src && dst, "buffers");
    fill(src, kWqe, 41);
    struct ibv_mr* smr = ibv_reg_mr(pd, src, kWqe, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr* dmr = ibv_reg_mr(pd, dst, (size_t)kWqes * kWqe, IBV_ACCESS_LOCAL_WRITE);
    CHECK(smr && dmr, "ibv_reg_mr");
    struct ibv_cq* scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
    struct ibv_cq* rcq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
    CHECK(scq && rcq, "ibv_create_cq");

    struct ibv_srq_init_attr sa = {.attr = {.max_wr = kWqes, .max_sge = 1, .srq_limit = 0}};
    struct ibv_srq* srq = ibv_create_srq(pd, &sa);
    CHECK(srq != NULL, "ibv_create_srq");
    struct ibv_srq_attr q;
    CHECK(ibv_query_srq(srq, &q) == 0 && q.max_wr == kWqes && q.max_sge >= 1 && q.srq_limit == 0, "ibv_query_srq");
    struct ibv_srq_init_attr too_big = {.attr = {.max_wr = 4, .max_sge = 1, .srq_limit = 5}};
    CHECK(ibv_create_srq(pd, &too_big) == NULL && errno == EINVAL, "an SRQ limit above max_wr is EINVAL");

    /* ---- one SRQ, an RC QP and a UD QP ---- */
    struct ibv_qp* ra = make_qp(IBV_QPT_RC, scq, rcq, NULL);
    struct ibv_qp* rb = make_qp(IBV_QPT_RC, scq, rcq, srq);
    struct ibv_qp* ua = make_qp(IBV_QPT_UD, scq, rcq, NULL);
    struct ibv_qp* ub = make_qp(IBV_QPT_UD, scq, rcq, srq);
    to_rts(ra, rb->qp_num);
    to_rts(rb, ra->qp_num);
    to_rts(ua, 0);
    to_rts(ub, 0);
    struct ibv_ah_attr aa = {.is_global = 1, .grh = {.dgid = gid, .hop_limit = 1}, .port_num = 1};
    struct ibv_ah* ah = ibv_create_ah(pd, &aa);
    CHECK(ah != NULL, "ibv_create_ah");

    struct ibv_sge rs = {(uintptr_t)dst, 64, dmr->lkey};
    struct ibv_recv_wr rw = {.wr_id = 1, .sg_list = &rs, .num_sge = 1}, *bad_r;
    CHECK(ibv_post_recv(rb, &rw, &bad_r) == EINVAL, "ibv_post_recv on an SRQ QP must be EINVAL");
    CHECK(ibv_destroy_srq(srq) == EBUSY, "ibv_destroy_srq of an SRQ in use must be EBUSY");
    q.max_wr = 2 * kWqes;
    CHECK(ibv_modify_srq(srq, &q, IBV_SRQ_MAX_WR) == EINVAL, "resizing an SRQ must be EINVAL");

    for (uint64_t i = 0; i < 3; i++) post_srq(srq, dmr, dst, i);
    send(ra, NULL, 0, smr, src, kRcBytes, 1);
    send(ua, ah, ub->qp_num, smr, src + 100, mtu_bytes, 2);
    int got_rc = 0, got_ud = 0;
    for (int k = 0; k < 2; k++) {
        struct ibv_wc wc = poll_one(rcq, "an SRQ receive");
        CHECK(wc.wr_id >= 1000 && wc.wr_id < 1003 && wc.opcode == IBV_WC_RECV, "wr_id %" PRIu64, wc.wr_id);
        const uint8_t* got = dst + (wc.wr_id - 1000) * kWqe;
        if (wc.qp_num == rb->qp_num) {
            CHECK(wc.byte_len == kRcBytes && memcmp(got, src, kRcBytes) == 0, "RC SEND into the SRQ's WQE");
            got_rc++;
        } else {
            CHECK(wc.qp_num == ub->qp_num && wc.src_qp == ua->qp_num && (wc.wc_flags & IBV_WC_GRH) &&
                      wc.byte_len == 40 + mtu_bytes && memcmp(got + 40, src + 100, mtu_bytes) == 0,
                  "UD SEND into the SRQ's WQE (qp_num %u)", wc.qp_num);
            got_ud++;
        }
    }
    CHECK(got_rc == 1 && got_ud == 1, "one RC and one UD receive");
    poll_one(scq, "send 1");
    poll_one(scq, "send 2");
    printf("srq rc_bytes=%d ud_bytes=%u ok\n", kRcBytes, mtu_bytes);

    /* ---- the limit: one WQE posted; post 3 more (4), arm at 4, one datagram takes one ---- */
    expect_no_event("before the limit is armed");
    for (uint64_t i = 3; i < 6; i++) post_srq(srq, dmr, dst, i);
    q.srq_limit = 4;
    CHECK(ibv_modify_srq(srq, &q, IBV_SRQ_LIMIT) == 0, "arm the SRQ limit");
    CHECK(ibv_query_srq(srq, &q) == 0 && q.srq_limit == 4, "armed limit reads 4");
    send(ua, ah, ub->qp_num, smr, src, 64, 3);
    poll_one(scq, "send 3");
    poll_one(rcq, "receive 3");
    struct ibv_async_event ev = next_event("the SRQ limit");
    CHECK(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq, "SRQ limit event (type %d)",
          (int)ev.event_type);
    ibv_ack_async_event(&ev);
    CHECK(ibv_query_srq(srq, &q) == 0 && q.srq_limit == 0, "the limit is disarmed after its event");
    send(ua, ah, ub->qp_num, smr, src, 64, 4);
    poll_one(scq, "send 4");
    poll_one(rcq, "receive 4");
    expect_no_event("after the limit fired once");
    printf("srq limit event=SRQ_LIMIT_REACHED once ok\n");

    /* ---- an SRQ QP to ERR: last WQE reached ---- */
    struct ibv_qp_attr e = {.qp_state = IBV_QPS_ERR};
    CHECK(ibv_modify_qp(rb, &e, IBV_QP_STATE) == 0, "modify to ERR");
    ev = next_event("last WQE reached");
    CHECK(ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ev.element.qp == rb, "last WQE event (type %d)",
          (int)ev.event_type);
    ibv_ack_async_event(&ev);
    printf("srq err event=QP_LAST_WQE_REACHED ok\n");

    /* ---- solicited events: a CQ armed for solicited completions only ---- */
    struct ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
    CHECK(ch != NULL, "ibv_create_comp_channel");
    struct ibv_cq* ecq = ibv_create_cq(ctx, 16, NULL, ch, 0);
    CHECK(ecq != NULL, "ibv_create_cq on a channel");
    struct ibv_qp* us = make_qp(IBV_QPT_UD, scq, ecq, NULL);
    to_rts(us, 0);
    for (uint64_t i = 0; i < 2; i++) {
        struct ibv_sge s = {(uintptr_t)dst + (6 + i) * kWqe, kWqe, dmr->lkey};
        struct ibv_recv_wr w = {.wr_id = 3000 + i, .sg_list = &s, .num_sge = 1};
        CHECK(ibv_post_recv(us, &w, &bad_r) == 0, "ibv_post_recv");
    }
    CHECK(ibv_req_notify_cq(ecq, 1) == 0, "ibv_req_notify_cq solicited only");
    send(ua, ah, us->qp_num, smr, src, 64, 7);  /* not solicited */
    poll_one(scq, "send 7");
    CHECK(poll_one(ecq, "receive 7").wr_id == 3000, "receive 7");
    /* The NIC raises a completion's event under the engine's lock, which ibv_query_qp takes:
     * after it, an event for that completion would be in the channel. */
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qi;
    CHECK(ibv_query_qp(us, &qa, IBV_QP_STATE, &qi) == 0, "ibv_query_qp");
    struct pollfd cp = {.fd = ch->fd, .events = POLLIN};
    CHECK(poll(&cp, 1, 0) == 0, "no event for an unsolicited receive on a solicited-only CQ");
    {
        struct ibv_sge s = {(uintptr_t)src, 64, smr->lkey};
        struct ibv_send_wr w = {.wr_id = 8, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
                                .send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED}, *bad;
        w.wr.ud.ah = ah;
        w.wr.ud.remote_qpn = us->qp_num;
        w.wr.ud.remote_qkey = kQkey;
        CHECK(ibv_post_send(ua, &w, &bad) == 0, "ibv_post_send solicited");
    }
    struct ibv_cq* ev_cq;
    void* ev_ctx;
    CHECK(poll(&cp, 1, 10000) == 1, "the solicited receive raises the event");
    CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == ecq, "ibv_get_cq_event");
    ibv_ack_cq_events(ecq, 1);
    poll_one(scq, "send 8");
    CHECK(poll_one(ecq, "receive 8").wr_id == 3001, "receive 8");
    printf("solicited_only unsolicited_events=0 solicited_events=1 ok\n");
    CHECK(ibv_destroy_qp(us) == 0 && ibv_destroy_cq(ecq) == 0 && ibv_destroy_comp_channel(ch) == 0,
          "destroy the solicited-only CQ, its QP and channel");

    /* ---- CQ overrun: a CQ of one entry, two datagrams ---- */
    struct ibv_cq* tiny = ibv_create_cq(ctx, 1, NULL, NULL, 0);
    CHECK(tiny != NULL, "ibv_create_cq(1)");
    struct ibv_qp* uc = make_qp(IBV_QPT_UD, scq, tiny, NULL);
    to_rts(uc, 0);
    for (uint64_t i = 0; i < 2; i++) {
        struct ibv_sge s = {(uintptr_t)dst + (6 + i) * kWqe, kWqe, dmr->lkey};
        struct ibv_recv_wr w = {.wr_id = 2000 + i, .sg_list = &s, .num_sge = 1};
        CHECK(ibv_post_recv(uc, &w, &bad_r) == 0, "ibv_post_recv");
    }
    send(ua, ah, uc->qp_num, smr, src, 64, 5);
    send(ua, ah, uc->qp_num, smr, src, 64, 6);
    poll_one(scq, "send 5");
    poll_one(scq, "send 6");
    ev = next_event("the CQ overrun");
    CHECK(ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == tiny, "CQ error event (type %d)", (int)ev.event_type);
    ibv_ack_async_event(&ev);
    struct ibv_wc wc;
    CHECK(ibv_poll_cq(tiny, 1, &wc) == 1 && wc.wr_id == 2000, "the completion the CQ kept");
    CHECK(ibv_poll_cq(tiny, 1, &wc) == -1, "then the CQ is in error");
    printf("cq overrun event=CQ_ERR ok\n");

    CHECK(ibv_destroy_qp(uc) == 0 && ibv_destroy_cq(tiny) == 0, "destroy the overrun CQ and its QP");
    CHECK(ibv_destroy_qp(rb) == 0 && ibv_destroy_qp(ub) == 0, "destroy the SRQ's QPs");
    CHECK(ibv_destroy_srq(srq) == 0, "ibv_destroy_srq once unused");
    CHECK(ibv_destroy_qp(ra) == 0 && ibv_destroy_qp(ua) == 0 && ibv_destroy_ah(ah) == 0, "destroy");
    CHECK(ibv_destroy_cq(scq) == 0 && ibv_destroy_cq(rcq) == 0, "ibv_destroy_cq");
    CHECK(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(dmr) == 0 && ibv_dealloc_pd(pd) == 0, "dereg, dealloc");
    CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
    free(src);
    free(dst);
    printf("verbs_srq: ok\n");
    return 0;
}
