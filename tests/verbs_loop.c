/* A verbs program that knows only <infiniband/verbs.h> and links only -libverbs: two QPs of
 * one emulated device connected to each other (loopback), over UC and UD, moving data through
 * the provider's data path and checking every byte and every completion field:
 *   - UC SEND with immediate of 300 KiB and RDMA WRITE with immediate of 384 KiB (many packets
 *     of the path MTU each), a completion event on a channel for the receive, an inline SEND
 *     whose buffer is overwritten right after the post, unsignaled sends;
 *   - UD SEND with immediate: the 40-byte GRH (the IPv4 header in its last 20 bytes), src_qp;
 *   - RC SEND with immediate, RDMA WRITE, WRITE with immediate and a multi-packet RDMA READ,
 *     with the RC attributes reported back by ibv_query_qp; an RC WRITE to a bad rkey completes
 *     IBV_WC_REM_ACCESS_ERR, both QPs go to ERR and what is queued on them flushes; an RC SEND
 *     to a QP number nobody has completes IBV_WC_RETRY_EXC_ERR after its retries;
 *   - refusals: an AH to an address with no route (EHOSTUNREACH), READ on UC (EINVAL).
 * Exit 0 after "verbs_loop: ok".
 *
 *   verbs_loop NAME
 */
#define _DEFAULT_SOURCE
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERBS_PROG "verbs_loop"
#include "verbs_check.h"

enum { kBuf = 512 * 1024, kSendBytes = 300 * 1024, kWriteBytes = 384 * 1024, kWriteOff = 64 * 1024 };

static struct ibv_context* ctx;
static struct ibv_pd* pd;
static union ibv_gid gid;
static enum ibv_mtu mtu;

/* Waits (polling) for exactly one completion on cq. */
static struct ibv_wc poll_status(struct ibv_cq* cq, const char* what)
{
    struct ibv_wc wc;
    long spins = 0;
    int n;
    while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
        CHECK(++spins < 2000000000L, "no completion for %s", what);
    CHECK(n == 1, "ibv_poll_cq for %s returned %d", what, n);
    return wc;
}

static struct ibv_wc poll_one(struct ibv_cq* cq, const char* what)
{
    struct ibv_wc wc = poll_status(cq, what);
    CHECK(wc.status == IBV_WC_SUCCESS, "%s completed with %s", what, ibv_wc_status_str(wc.status));
    return wc;
}

static void expect_empty(struct ibv_cq* cq, const char* what)
{
    struct ibv_wc wc;
    CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "an unexpected completion on %s (wr_id %" PRIu64 ")", what, wc.wr_id);
}

static struct ibv_qp* make_qp(enum ibv_qp_type type, struct ibv_cq* scq, struct ibv_cq* rcq, int sig_all)
{
    struct ibv_qp_init_attr a = {.send_cq = scq, .recv_cq = rcq, .qp_type = type, .sq_sig_all = sig_all,
                                 .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2}};
    struct ibv_qp* qp = ibv_create_qp(pd, &a);
    CHECK(qp != NULL, "ibv_create_qp type %d", (int)type);
    CHECK(a.cap.max_inline_data >= 128, "max_inline_data %u", a.cap.max_inline_data);
    struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1};
    int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    if (type == IBV_QPT_UD) {
        m.qkey = 0x11111111;
        mask |= IBV_QP_QKEY;
    } else {
        m.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                            (type == IBV_QPT_RC ? IBV_ACCESS_REMOTE_READ : 0);
        mask |= IBV_QP_ACCESS_FLAGS;
    }
    CHECK(ibv_modify_qp(qp, &m, mask) == 0, "modify to INIT");
    return qp;
}

static void connect_qp(struct ibv_qp* qp, uint32_t dest_qpn, uint32_t psn_in, uint32_t psn_out)
{
    struct ibv_qp_attr m = {.qp_state = IBV_QPS_RTR};
    int mask = IBV_QP_STATE;
    if (qp->qp_type != IBV_QPT_UD) {
        m.path_mtu = mtu;
        m.dest_qp_num = dest_qpn;
        m.rq_psn = psn_in;
        m.ah_attr.is_global = 1;
        m.ah_attr.grh.dgid = gid;
        m.ah_attr.grh.hop_limit = 1;
        m.ah_attr.port_num = 1;
        mask |= IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_AV;
    }
    const int rc = qp->qp_type == IBV_QPT_RC;
    if (rc) {
        m.max_dest_rd_atomic = 4;
        m.min_rnr_timer = 12;
        mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
    CHECK(ibv_modify_qp(qp, &m, mask) == 0, "modify to RTR");
    struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTS, .sq_psn = psn_out};
    mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (rc) {
        r.timeout = 14;
        r.retry_cnt = 7;
        r.rnr_retry = 7;
        r.max_rd_atomic = 4;
        /* RC without its RTS attributes is refused (IBTA's required set). */
        CHECK(ibv_modify_qp(qp, &r, mask) == EINVAL, "RC to RTS without timeout/retry/rd_atomic must be EINVAL");
        mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    CHECK(ibv_modify_qp(qp, &r, mask) == 0, "modify to RTS");
    struct ibv_qp_attr q;
    struct ibv_qp_init_attr qi;
    CHECK(ibv_query_qp(qp, &q, IBV_QP_STATE, &qi) == 0 && q.qp_state == IBV_QPS_RTS, "query_qp says RTS");
    if (rc)
        CHECK(q.timeout == 14 && q.retry_cnt == 7 && q.rnr_retry == 7 && q.min_rnr_timer == 12 && q.max_rd_atomic == 4 &&
                  q.max_dest_rd_atomic == 4 && qi.qp_type == IBV_QPT_RC,
              "query_qp RC attributes: timeout %u retry %u rnr %u min_rnr %u rd %u dest_rd %u", q.timeout, q.retry_cnt,
              q.rnr_retry, q.min_rnr_timer, q.max_rd_atomic, q.max_dest_rd_atomic);
}

static enum ibv_qp_state qp_state(struct ibv_qp* qp)
{
    struct ibv_qp_attr q;
    struct ibv_qp_init_attr qi;
    CHECK(ibv_query_qp(qp, &q, IBV_QP_STATE, &qi) == 0, "ibv_query_qp");
    return q.qp_state;
}

static void fill(uint8_t* p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

int main(int argc, char** argv)
{
    CHECK(argc == 2, "usage: verbs_loop NAME");
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
    CHECK(ibv_query_device(ctx, &dev) == 0 && dev.max_sge == 8, "max_sge %d", dev.max_sge);
    CHECK(dev.max_qp_rd_atom >= 4 && dev.max_qp_init_rd_atom >= 4 && dev.atomic_cap == IBV_ATOMIC_HCA,
          "READ depths %d/%d, atomic_cap %d", dev.max_qp_rd_atom, dev.max_qp_init_rd_atom, (int)dev.atomic_cap);

    pd = ibv_alloc_pd(ctx);
    CHECK(pd != NULL, "ibv_alloc_pd");
    uint8_t* src = malloc(kBuf);
    uint8_t* dst = calloc(1, kBuf);
    CHECK(src && dst, "buffers");
    fill(src, kBuf, 17);
    struct ibv_mr* smr = ibv_reg_mr(pd, src, kBuf, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr* dmr = ibv_reg_mr(pd, dst, kBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    /* The READ's source: remotely readable, not writable. */
    struct ibv_mr* rmr = ibv_reg_mr(pd, src, kBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    CHECK(smr && dmr && rmr, "ibv_reg_mr");
    struct ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
    CHECK(ch != NULL, "ibv_create_comp_channel");
    struct ibv_cq* scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
    struct ibv_cq* rcq = ibv_create_cq(ctx, 64, NULL, ch, 0);
    CHECK(scq && rcq, "ibv_create_cq");

    /* ---- UC: a -> b ---- */
    struct ibv_qp* a = make_qp(IBV_QPT_UC, scq, rcq, 0);
    struct ibv_qp* b = make_qp(IBV_QPT_UC, scq, rcq, 0);
    connect_qp(a, b->qp_num, 0x100, 0x200);
    connect_qp(b, a->qp_num, 0x200, 0x100);

    /* SEND with immediate, 300 KiB out of two SGEs into two SGEs; the receive raises an event. */
    struct ibv_sge rs[2] = {{(uintptr_t)dst, 100000, dmr->lkey}, {(uintptr_t)dst + 100000, kBuf - 100000, dmr->lkey}};
    struct ibv_recv_wr rwr = {.wr_id = 501, .sg_list = rs, .num_sge = 2}, *bad_r;
    CHECK(ibv_post_recv(b, &rwr, &bad_r) == 0, "post_recv");
    CHECK(ibv_req_notify_cq(rcq, 0) == 0, "ibv_req_notify_cq");
    struct ibv_sge ss[2] = {{(uintptr_t)src, 4096 + 7, smr->lkey}, {(uintptr_t)src + 4096 + 7, kSendBytes - 4096 - 7, smr->lkey}};
    struct ibv_send_wr swr = {.wr_id = 401, .sg_list = ss, .num_sge = 2, .opcode = IBV_WR_SEND_WITH_IMM,
                              .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(0xC0FFEE01)},
                       *bad_s;
    CHECK(ibv_post_send(a, &swr, &bad_s) == 0, "post_send SEND");
    struct ibv_cq* ev_cq = NULL;
    void* ev_ctx = NULL;
    CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == rcq, "completion event for the receive CQ");
    ibv_ack_cq_events(rcq, 1);
    struct ibv_wc wc = poll_one(scq, "UC SEND");
    CHECK(wc.wr_id == 401 && wc.opcode == IBV_WC_SEND && wc.qp_num == a->qp_num, "send wc: wr_id %" PRIu64 " opcode %d",
          wc.wr_id, (int)wc.opcode);
    wc = poll_one(rcq, "UC SEND receive");
    CHECK(wc.wr_id == 501 && wc.opcode == IBV_WC_RECV && wc.byte_len == kSendBytes && (wc.wc_flags & IBV_WC_WITH_IMM) &&
              ntohl(wc.imm_data) == 0xC0FFEE01 && wc.qp_num == b->qp_num && !(wc.wc_flags & IBV_WC_GRH),
          "recv wc: wr_id %" PRIu64 " opcode %d byte_len %u flags %#x imm %#x", wc.wr_id, (int)wc.opcode, wc.byte_len,
          wc.wc_flags, ntohl(wc.imm_data));
    CHECK(memcmp(dst, src, kSendBytes) == 0, "SEND bytes differ");
    printf("uc_send bytes=%d packets=%u imm=%#x event=1 ok\n", kSendBytes, (kSendBytes + mtu_bytes - 1) / mtu_bytes,
           ntohl(wc.imm_data));

    /* RDMA WRITE with immediate, 384 KiB at an offset of b's region; unsignaled on the sender. */
    memset(dst, 0, kBuf);
    struct ibv_recv_wr rimm = {.wr_id = 502, .sg_list = NULL, .num_sge = 0};
    CHECK(ibv_post_recv(b, &rimm, &bad_r) == 0, "post_recv for the immediate");
    struct ibv_sge ws = {(uintptr_t)src + 3, kWriteBytes, smr->lkey};
    struct ibv_send_wr wwr = {.wr_id = 402, .sg_list = &ws, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                              .send_flags = 0, .imm_data = htonl(0xAB)};
    wwr.wr.rdma.remote_addr = (uintptr_t)dst + kWriteOff;
    wwr.wr.rdma.rkey = dmr->rkey;
    CHECK(ibv_post_send(a, &wwr, &bad_s) == 0, "post_send WRITE_WITH_IMM");
    wc = poll_one(rcq, "UC WRITE with immediate");
    CHECK(wc.wr_id == 502 && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.byte_len == kWriteBytes &&
              (wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 0xAB,
          "write wc: wr_id %" PRIu64 " opcode %d byte_len %u imm %#x", wc.wr_id, (int)wc.opcode, wc.byte_len,
          ntohl(wc.imm_data));
    CHECK(memcmp(dst + kWriteOff, src + 3, kWriteBytes) == 0, "WRITE bytes differ");
    for (int i = 0; i < kWriteOff; i++) CHECK(dst[i] == 0, "WRITE touched byte %d before its target", i);
    for (int i = kWriteOff + kWriteBytes; i < kBuf; i++) CHECK(dst[i] == 0, "WRITE touched byte %d after its target", i);
    expect_empty(scq, "the send CQ after an unsignaled WRITE");
    printf("uc_write_imm bytes=%d offset=%d imm=%#x ok\n", kWriteBytes, kWriteOff, ntohl(wc.imm_data));

    /* Inline SEND: the bytes are taken at post; the buffer is scribbled over right after. */
    uint8_t small[100];
    fill(small, sizeof small, 99);
    uint8_t keep[100];
    memcpy(keep, small, sizeof small);
    struct ibv_recv_wr rin = {.wr_id = 503, .sg_list = rs, .num_sge = 1};
    CHECK(ibv_post_recv(b, &rin, &bad_r) == 0, "post_recv for inline");
    struct ibv_sge is = {(uintptr_t)small, sizeof small, 0 /* no lkey: inline */};
    struct ibv_send_wr iwr = {.wr_id = 403, .sg_list = &is, .num_sge = 1, .opcode = IBV_WR_SEND,
                              .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED};
    CHECK(ibv_post_send(a, &iwr, &bad_s) == 0, "post_send inline");
    memset(small, 0xEE, sizeof small);
    wc = poll_one(scq, "inline SEND");
    CHECK(wc.wr_id == 403, "inline send wr_id %" PRIu64, wc.wr_id);
    wc = poll_one(rcq, "inline receive");
    CHECK(wc.wr_id == 503 && wc.byte_len == sizeof keep && !(wc.wc_flags & IBV_WC_WITH_IMM), "inline recv wc");
    CHECK(memcmp(dst, keep, sizeof keep) == 0, "inline bytes differ");
    printf("uc_inline bytes=%zu ok\n", sizeof keep);

    /* Three sends, only the last signaled: one completion, carrying the last wr_id. */
    for (int i = 0; i < 3; i++) {
        struct ibv_recv_wr r = {.wr_id = 510 + i, .sg_list = rs, .num_sge = 1};
        CHECK(ibv_post_recv(b, &r, &bad_r) == 0, "post_recv %d", i);
    }
    struct ibv_sge s3 = {(uintptr_t)src, 2000, smr->lkey};
    struct ibv_send_wr w3[3];
    for (int i = 0; i < 3; i++)
        w3[i] = (struct ibv_send_wr){.wr_id = 410 + i, .sg_list = &s3, .num_sge = 1, .opcode = IBV_WR_SEND,
                                     .send_flags = i == 2 ? IBV_SEND_SIGNALED : 0, .next = i < 2 ? &w3[i + 1] : NULL};
    CHECK(ibv_post_send(a, &w3[0], &bad_s) == 0, "post_send chain");
    for (int i = 0; i < 3; i++) {
        wc = poll_one(rcq, "chain receive");
        CHECK(wc.wr_id == (uint64_t)(510 + i) && wc.byte_len == 2000, "chain recv %d: wr_id %" PRIu64, i, wc.wr_id);
    }
    wc = poll_one(scq, "chain send");
    CHECK(wc.wr_id == 412, "the signaled send's wr_id, got %" PRIu64, wc.wr_id);
    expect_empty(scq, "the send CQ after the chain");
    printf("uc_unsignaled posted=3 completions=1 ok\n");

    /* ---- UD: c -> d, through an address handle to our own GID ---- */
    struct ibv_qp* c = make_qp(IBV_QPT_UD, scq, rcq, 1);
    struct ibv_qp* d = make_qp(IBV_QPT_UD, scq, rcq, 1);
    connect_qp(c, 0, 0, 0x300);
    connect_qp(d, 0, 0, 0x400);
    struct ibv_ah_attr aha = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .sgid_index = 0, .hop_limit = 1}};
    struct ibv_ah* ah = ibv_create_ah(pd, &aha);
    CHECK(ah != NULL, "ibv_create_ah to our own GID");
    const uint32_t ud_bytes = mtu_bytes < 1000 ? mtu_bytes : 1000;
    memset(dst, 0, kBuf);
    struct ibv_sge us = {(uintptr_t)dst, 40 + ud_bytes, dmr->lkey};
    struct ibv_recv_wr urw = {.wr_id = 601, .sg_list = &us, .num_sge = 1};
    CHECK(ibv_post_recv(d, &urw, &bad_r) == 0, "UD post_recv");
    struct ibv_sge uss = {(uintptr_t)src + 11, ud_bytes, smr->lkey};
    struct ibv_send_wr uwr = {.wr_id = 701, .sg_list = &uss, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
                              .imm_data = htonl(0x5EED)};
    uwr.wr.ud.ah = ah;
    uwr.wr.ud.remote_qpn = d->qp_num;
    uwr.wr.ud.remote_qkey = 0x11111111;
    CHECK(ibv_post_send(c, &uwr, &bad_s) == 0, "UD post_send");
    wc = poll_one(scq, "UD send (sq_sig_all)");
    CHECK(wc.wr_id == 701 && wc.opcode == IBV_WC_SEND, "UD send wc");
    wc = poll_one(rcq, "UD receive");
    CHECK(wc.wr_id == 601 && wc.opcode == IBV_WC_RECV && wc.byte_len == 40 + ud_bytes && (wc.wc_flags & IBV_WC_GRH) &&
              (wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 0x5EED && wc.src_qp == c->qp_num &&
              wc.qp_num == d->qp_num,
          "UD recv wc: byte_len %u flags %#x src_qp %#x", wc.byte_len, wc.wc_flags, wc.src_qp);
    CHECK(memcmp(dst + 40, src + 11, ud_bytes) == 0, "UD bytes differ");
    /* GRH of RoCEv2 over IPv4: 20 bytes of zero, then the IPv4 header (version 4, UDP, our
     * address at both ends). */
    for (int i = 0; i < 20; i++) CHECK(dst[i] == 0, "GRH byte %d", i);
    CHECK(dst[20] == 0x45 && dst[20 + 9] == 17, "IPv4 header in the GRH: %#x proto %d", dst[20], dst[29]);
    CHECK(memcmp(dst + 20 + 12, gid.raw + 12, 4) == 0 && memcmp(dst + 20 + 16, gid.raw + 12, 4) == 0,
          "GRH addresses are ours");
    printf("ud_send bytes=%u grh=40 src_qp_ok=1 ok\n", ud_bytes);

    /* ---- RC: e -> f ---- */
    struct ibv_qp* e = make_qp(IBV_QPT_RC, scq, rcq, 0);
    struct ibv_qp* f = make_qp(IBV_QPT_RC, scq, rcq, 0);
    connect_qp(e, f->qp_num, 0x500, 0x600);
    connect_qp(f, e->qp_num, 0x600, 0x500);

    /* SEND with immediate, 300 KiB: the send completes when f acknowledged it. */
    memset(dst, 0, kBuf);
    struct ibv_recv_wr rcr = {.wr_id = 801, .sg_list = rs, .num_sge = 2};
    CHECK(ibv_post_recv(f, &rcr, &bad_r) == 0, "RC post_recv");
    struct ibv_send_wr rcs = swr;
    rcs.wr_id = 901;
    rcs.imm_data = htonl(0xC0FFEE02);
    CHECK(ibv_post_send(e, &rcs, &bad_s) == 0, "RC post_send SEND");
    wc = poll_one(scq, "RC SEND");
    CHECK(wc.wr_id == 901 && wc.opcode == IBV_WC_SEND && wc.qp_num == e->qp_num, "RC send wc: wr_id %" PRIu64, wc.wr_id);
    wc = poll_one(rcq, "RC SEND receive");
    CHECK(wc.wr_id == 801 && wc.opcode == IBV_WC_RECV && wc.byte_len == kSendBytes && (wc.wc_flags & IBV_WC_WITH_IMM) &&
              ntohl(wc.imm_data) == 0xC0FFEE02 && wc.qp_num == f->qp_num,
          "RC recv wc: wr_id %" PRIu64 " byte_len %u imm %#x", wc.wr_id, wc.byte_len, ntohl(wc.imm_data));
    CHECK(memcmp(dst, src, kSendBytes) == 0, "RC SEND bytes differ");
    printf("rc_send bytes=%d imm=%#x ok\n", kSendBytes, ntohl(wc.imm_data));

    /* RDMA WRITE, 384 KiB at an offset, signaled: an RDMA_WRITE completion, no receive. */
    memset(dst, 0, kBuf);
    struct ibv_send_wr rcw = wwr;
    rcw.wr_id = 902;
    rcw.opcode = IBV_WR_RDMA_WRITE;
    rcw.send_flags = IBV_SEND_SIGNALED;
    CHECK(ibv_post_send(e, &rcw, &bad_s) == 0, "RC post_send WRITE");
    wc = poll_one(scq, "RC WRITE");
    CHECK(wc.wr_id == 902 && wc.opcode == IBV_WC_RDMA_WRITE, "RC write wc: wr_id %" PRIu64 " opcode %d", wc.wr_id,
          (int)wc.opcode);
    CHECK(memcmp(dst + kWriteOff, src + 3, kWriteBytes) == 0, "RC WRITE bytes differ");
    for (int i = 0; i < kWriteOff; i++) CHECK(dst[i] == 0, "RC WRITE touched byte %d before its target", i);
    for (int i = kWriteOff + kWriteBytes; i < kBuf; i++) CHECK(dst[i] == 0, "RC WRITE touched byte %d after", i);
    expect_empty(rcq, "the receive CQ after a WRITE without immediate");
    printf("rc_write bytes=%d offset=%d ok\n", kWriteBytes, kWriteOff);

    /* WRITE with immediate: consumes a receive on f. */
    memset(dst, 0, kBuf);
    struct ibv_recv_wr rci = {.wr_id = 802, .sg_list = NULL, .num_sge = 0};
    CHECK(ibv_post_recv(f, &rci, &bad_r) == 0, "RC post_recv for the immediate");
    rcw.wr_id = 903;
    rcw.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    rcw.imm_data = htonl(0xCD);
    CHECK(ibv_post_send(e, &rcw, &bad_s) == 0, "RC post_send WRITE_WITH_IMM");
    wc = poll_one(rcq, "RC WRITE with immediate");
    CHECK(wc.wr_id == 802 && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.byte_len == kWriteBytes &&
              ntohl(wc.imm_data) == 0xCD,
          "RC write-imm wc: wr_id %" PRIu64 " opcode %d byte_len %u", wc.wr_id, (int)wc.opcode, wc.byte_len);
    const uint32_t rc_imm = ntohl(wc.imm_data);
    wc = poll_one(scq, "RC WRITE with immediate (send)");
    CHECK(wc.wr_id == 903 && wc.opcode == IBV_WC_RDMA_WRITE, "RC write-imm send wc");
    CHECK(memcmp(dst + kWriteOff, src + 3, kWriteBytes) == 0, "RC WRITE-imm bytes differ");
    printf("rc_write_imm bytes=%d imm=%#x ok\n", kWriteBytes, rc_imm);

    /* RDMA READ of 200 KiB + 5 (many response packets) from src into two SGEs of dst. */
    memset(dst, 0, kBuf);
    enum { kReadBytes = 200 * 1024 + 5 };
    struct ibv_sge rds[2] = {{(uintptr_t)dst + 1, 70000, dmr->lkey}, {(uintptr_t)dst + 1 + 70000, kReadBytes - 70000, dmr->lkey}};
    struct ibv_send_wr rdw = {.wr_id = 904, .sg_list = rds, .num_sge = 2, .opcode = IBV_WR_RDMA_READ,
                              .send_flags = IBV_SEND_SIGNALED};
    rdw.wr.rdma.remote_addr = (uintptr_t)src + 9;
    rdw.wr.rdma.rkey = rmr->rkey;
    CHECK(ibv_post_send(e, &rdw, &bad_s) == 0, "RC post_send READ");
    wc = poll_one(scq, "RC READ");
    CHECK(wc.wr_id == 904 && wc.opcode == IBV_WC_RDMA_READ, "RC read wc: wr_id %" PRIu64 " opcode %d", wc.wr_id,
          (int)wc.opcode);
    CHECK(memcmp(dst + 1, src + 9, kReadBytes) == 0, "RC READ bytes differ");
    CHECK(dst[0] == 0 && dst[1 + kReadBytes] == 0, "RC READ wrote outside its SGEs");
    printf("rc_read bytes=%d packets=%u ok\n", kReadBytes, (kReadBytes + mtu_bytes - 1) / mtu_bytes);

    /* A WRITE to a bad rkey: REM_ACCESS_ERR on e; e and f go to ERR; a receive waiting on f and
     * a send posted on e afterwards flush. */
    struct ibv_recv_wr rcf = {.wr_id = 803, .sg_list = rs, .num_sge = 1};
    CHECK(ibv_post_recv(f, &rcf, &bad_r) == 0, "RC post_recv before the bad WRITE");
    rcw.wr_id = 905;
    rcw.opcode = IBV_WR_RDMA_WRITE;
    rcw.wr.rdma.rkey = dmr->rkey ^ 0x5a5a00;
    CHECK(ibv_post_send(e, &rcw, &bad_s) == 0, "RC post_send WRITE to a bad rkey");
    wc = poll_status(scq, "RC WRITE to a bad rkey");
    CHECK(wc.wr_id == 905 && wc.status == IBV_WC_REM_ACCESS_ERR && wc.qp_num == e->qp_num,
          "bad rkey wc: wr_id %" PRIu64 " status %s", wc.wr_id, ibv_wc_status_str(wc.status));
    wc = poll_status(rcq, "f's receive after the bad WRITE");
    CHECK(wc.wr_id == 803 && wc.status == IBV_WC_WR_FLUSH_ERR && wc.qp_num == f->qp_num,
          "f's receive: wr_id %" PRIu64 " status %s", wc.wr_id, ibv_wc_status_str(wc.status));
    CHECK(qp_state(e) == IBV_QPS_ERR && qp_state(f) == IBV_QPS_ERR, "both RC QPs in ERR");
    rcw.wr_id = 906;
    CHECK(ibv_post_send(e, &rcw, &bad_s) == 0, "post_send on a QP in ERR");
    wc = poll_status(scq, "a send posted in ERR");
    CHECK(wc.wr_id == 906 && wc.status == IBV_WC_WR_FLUSH_ERR, "send in ERR: wr_id %" PRIu64 " status %s", wc.wr_id,
          ibv_wc_status_str(wc.status));
    expect_empty(scq, "the send CQ after the flush");
    expect_empty(rcq, "the receive CQ after the flush");
    printf("rc_bad_rkey status=REM_ACCESS_ERR qp=ERR flushed=2 ok\n");

    /* An RC SEND to a QP number nobody has: no ACK ever comes; after the first try and retry_cnt
     * (7) retransmissions, each after the local ACK timeout (code 14: 67 ms), RETRY_EXC_ERR. */
    struct ibv_qp* g = make_qp(IBV_QPT_RC, scq, rcq, 0);
    connect_qp(g, 0xABCDE, 0x700, 0x800);
    struct ibv_send_wr gw = {.wr_id = 907, .sg_list = ss, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED};
    CHECK(ibv_post_send(g, &gw, &bad_s) == 0, "RC post_send to nobody");
    wc = poll_status(scq, "RC SEND to nobody");
    CHECK(wc.wr_id == 907 && wc.status == IBV_WC_RETRY_EXC_ERR && wc.qp_num == g->qp_num,
          "SEND to nobody: wr_id %" PRIu64 " status %s", wc.wr_id, ibv_wc_status_str(wc.status));
    CHECK(qp_state(g) == IBV_QPS_ERR, "the QP is in ERR after RETRY_EXC_ERR");
    printf("rc_no_peer status=RETRY_EXC_ERR qp=ERR ok\n");

    /* ---- refusals ---- */
    struct ibv_send_wr ucr = rdw;
    CHECK(ibv_post_send(a, &ucr, &bad_s) == EINVAL && bad_s == &ucr, "RDMA READ on UC must be EINVAL");
    union ibv_gid far = gid;
    far.raw[12] = 192, far.raw[13] = 0, far.raw[14] = 2, far.raw[15] = 1; /* TEST-NET-1: no route */
    struct ibv_ah_attr fa = {.is_global = 1, .port_num = 1, .grh = {.dgid = far, .sgid_index = 0, .hop_limit = 1}};
    errno = 0;
    CHECK(ibv_create_ah(pd, &fa) == NULL && errno == EHOSTUNREACH, "an AH with no route must be EHOSTUNREACH");
    printf("refusals uc_read=EINVAL no_route=EHOSTUNREACH ok\n");

    CHECK(ibv_destroy_ah(ah) == 0, "destroy_ah");
    CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0 && ibv_destroy_qp(c) == 0 && ibv_destroy_qp(d) == 0 &&
              ibv_destroy_qp(e) == 0 && ibv_destroy_qp(f) == 0 && ibv_destroy_qp(g) == 0,
          "destroy_qp");
    CHECK(ibv_destroy_cq(scq) == 0 && ibv_destroy_cq(rcq) == 0, "destroy_cq");
    CHECK(ibv_destroy_comp_channel(ch) == 0, "destroy_comp_channel");
    CHECK(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(dmr) == 0 && ibv_dereg_mr(rmr) == 0, "dereg_mr");
    CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
    CHECK(ibv_close_device(ctx) == 0, "close_device");
    free(src);
    free(dst);
    printf("verbs_loop: ok\n");
    return 0;
}
