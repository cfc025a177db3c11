/* What real RDMA software asks of a device beyond moving data, checked on one emulated device
 * with only <infiniband/verbs.h> and -libverbs (two RC QPs of the device connected to each
 * other, loopback):
 *   - queries: vendor_id nonzero, phys_port_cnt_ex 1, one completion vector per online CPU
 *     (a CQ on the last one works, one beyond is EINVAL), the GID table (RoCE v2 over IPv4 at
 *     0 and 3, 1 and 2 empty);
 *   - ibv_reg_mr access: remote atomic accepted (UCX registers with 0xf), remote write or
 *     atomic without local write EINVAL, relaxed ordering (an optional hint) accepted, MW bind
 *     EOPNOTSUPP;
 *   - GID indices: QPs and AHs from sgid_index 3 work, from 1 are EINVAL;
 *   - ibv_create_qp_ex creation flags: none or BLOCK_SELF_MCAST_LB, others EOPNOTSUPP;
 *   - ibv_rereg_mr: a new translation moves where a remote WRITE to the same rkey lands (the
 *     old buffer untouched), a refused change leaves the region as it was, CHANGE_PD moves the
 *     region between PDs, CHANGE_ACCESS without remote write makes the next WRITE
 *     REM_ACCESS_ERR;
 *   - ibv_resize_cq: shrinking below what the CQ holds is EINVAL, to exactly that and growing
 *     keep every completion in order, and the grown CQ holds more than the old depth; signaled
 *     sends just posted count as held, complete or not;
 *   - a QP moved to RESET leaves no completions in its CQs (a flushed receive is gone).
 * Exit 0 after "verbs_compat: ok".
 *
 *   verbs_compat NAME
 */
#define _DEFAULT_SOURCE
#include <infiniband/verbs.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VERBS_PROG "verbs_compat"
#include "verbs_check.h"

enum { kBuf = 64 * 1024, kMsg = 4096 };

static struct ibv_context* ctx;
static struct ibv_pd* pd;
static union ibv_gid gid;
static enum ibv_mtu mtu;

static struct ibv_wc poll_status(struct ibv_cq* cq, const char* what)
{
    struct ibv_wc wc;
    long spins = 0;
    int n;
    while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) CHECK(++spins < 2000000000L, "no completion for %s", what);
    CHECK(n == 1, "ibv_poll_cq for %s returned %d", what, n);
    return wc;
}

static struct ibv_qp* rc_qp(struct ibv_cq* scq, struct ibv_cq* rcq)
{
    struct ibv_qp_init_attr a = {.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
                                 .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1}};
    struct ibv_qp* qp = ibv_create_qp(pd, &a);
    CHECK(qp != NULL, "ibv_create_qp RC");
    struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                            .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
    CHECK(ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0, "INIT");
    return qp;
}

/* RTR with the GRH from sgid_index; returns ibv_modify_qp's answer. */
static int rc_rtr(struct ibv_qp* qp, uint32_t dest_qpn, uint8_t sgid_index)
{
    struct ibv_qp_attr m = {.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .dest_qp_num = dest_qpn, .rq_psn = 0,
                            .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
                            .ah_attr = {.is_global = 1, .port_num = 1,
                                        .grh = {.dgid = gid, .sgid_index = sgid_index, .hop_limit = 1}}};
    return ibv_modify_qp(qp, &m,
                         IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_AV |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static void rc_rts(struct ibv_qp* qp)
{
    struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTS, .sq_psn = 0, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
                            .max_rd_atomic = 1};
    CHECK(ibv_modify_qp(qp, &r,
                        IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                            IBV_QP_MAX_QP_RD_ATOMIC) == 0,
          "RTS");
}

/* A signaled RC operation of kMsg bytes from src (lkey) and its send completion's status. */
static enum ibv_wc_status rc_post(struct ibv_qp* qp, struct ibv_cq* scq, enum ibv_wr_opcode op, void* src,
                                  uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t wr_id)
{
    struct ibv_sge sge = {(uintptr_t)src, kMsg, lkey};
    struct ibv_send_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    CHECK(ibv_post_send(qp, &wr, &bad) == 0, "post_send wr_id %" PRIu64, wr_id);
    struct ibv_wc wc = poll_status(scq, "an RC send");
    CHECK(wc.wr_id == wr_id, "send completion wr_id %" PRIu64 ", expected %" PRIu64, wc.wr_id, wr_id);
    return wc.status;
}

static int all(const uint8_t* p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return 0;
    return 1;
}

static void queries(void)
{
    struct ibv_device_attr_ex ax;
    CHECK(ibv_query_device_ex(ctx, NULL, &ax) == 0, "ibv_query_device_ex");
    CHECK(ax.orig_attr.vendor_id != 0 && ax.phys_port_cnt_ex == 1 && ax.orig_attr.phys_port_cnt == 1,
          "vendor_id %#x phys_port_cnt_ex %u", ax.orig_attr.vendor_id, ax.phys_port_cnt_ex);
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(ctx->num_comp_vectors == cpus, "num_comp_vectors %d, %ld CPUs online", ctx->num_comp_vectors, cpus);
    struct ibv_cq* last = ibv_create_cq(ctx, 4, NULL, NULL, ctx->num_comp_vectors - 1);
    CHECK(last != NULL, "a CQ on the last completion vector");
    CHECK(ibv_destroy_cq(last) == 0, "destroy_cq");
    errno = 0;
    CHECK(ibv_create_cq(ctx, 4, NULL, NULL, ctx->num_comp_vectors) == NULL && errno == EINVAL,
          "a CQ beyond the completion vectors must be EINVAL");

    struct ibv_port_attr port;
    CHECK(ibv_query_port(ctx, 1, &port) == 0 && port.gid_tbl_len == 4, "gid_tbl_len %d", port.gid_tbl_len);
    struct ibv_gid_entry e0, e3, e1;
    CHECK(ibv_query_gid_ex(ctx, 1, 0, &e0, 0) == 0 && ibv_query_gid_ex(ctx, 1, 3, &e3, 0) == 0, "ibv_query_gid_ex 0, 3");
    CHECK(e0.gid_type == IBV_GID_TYPE_ROCE_V2 && e3.gid_type == IBV_GID_TYPE_ROCE_V2 &&
              memcmp(&e0.gid, &e3.gid, sizeof e0.gid) == 0 && memcmp(&e0.gid, &gid, sizeof gid) == 0,
          "GIDs 0 and 3: the IPv4-mapped RoCE v2 GID");
    union ibv_gid g1;
    CHECK(ibv_query_gid(ctx, 1, 1, &g1) == 0 && all(g1.raw, sizeof g1.raw, 0), "GID 1 is empty (zero)");
    const int empty = ibv_query_gid_ex(ctx, 1, 1, &e1, 0);
    CHECK(empty == ENODATA, "ibv_query_gid_ex of an empty entry: %d, expected ENODATA", empty);
    printf("query vendor_id=%#x phys_port_cnt_ex=1 comp_vectors=cpus gids=0,3 empty=1,2 ok\n", ax.orig_attr.vendor_id);
}

static void access_flags(uint8_t* buf)
{
    const int all_remote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_ATOMIC;
    struct ibv_mr* mr = ibv_reg_mr(pd, buf, kBuf, all_remote);
    CHECK(mr != NULL, "ibv_reg_mr access 0xf (remote atomic)");
    CHECK(ibv_dereg_mr(mr) == 0, "dereg");
    mr = ibv_reg_mr(pd, buf, kBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING);
    CHECK(mr != NULL, "ibv_reg_mr with relaxed ordering (an optional hint)");
    CHECK(ibv_dereg_mr(mr) == 0, "dereg");
    errno = 0;
    CHECK(ibv_reg_mr(pd, buf, kBuf, IBV_ACCESS_REMOTE_ATOMIC) == NULL && errno == EINVAL,
          "remote atomic without local write must be EINVAL");
    errno = 0;
    CHECK(ibv_reg_mr(pd, buf, kBuf, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) == NULL && errno == EINVAL,
          "remote write without local write must be EINVAL");
    errno = 0;
    CHECK(ibv_reg_mr(pd, buf, kBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND) == NULL && errno == EOPNOTSUPP,
          "MW bind must be EOPNOTSUPP");
    printf("access remote_atomic=ok without_local_write=EINVAL relaxed=ok mw_bind=EOPNOTSUPP ok\n");
}

/* ibv_create_qp_ex with creation flags: none or BLOCK_SELF_MCAST_LB (what the NIC does anyway)
 * create the QP, any other is EOPNOTSUPP. */
static void create_flags(struct ibv_cq* cq)
{
    struct ibv_qp_init_attr_ex a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD, .pd = pd,
                                    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
                                    .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS};
    struct ibv_qp* qp = ibv_create_qp_ex(ctx, &a);
    CHECK(qp != NULL && ibv_destroy_qp(qp) == 0, "create_qp_ex with no creation flags");
    a.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
    qp = ibv_create_qp_ex(ctx, &a);
    CHECK(qp != NULL && ibv_destroy_qp(qp) == 0, "create_qp_ex with BLOCK_SELF_MCAST_LB");
    a.create_flags = IBV_QP_CREATE_SCATTER_FCS;
    errno = 0;
    CHECK(ibv_create_qp_ex(ctx, &a) == NULL && errno == EOPNOTSUPP, "SCATTER_FCS must be EOPNOTSUPP");
    printf("create_flags none=ok block_self_mcast_lb=ok scatter_fcs=EOPNOTSUPP ok\n");
}

int main(int argc, char** argv)
{
    CHECK(argc == 2, "usage: verbs_compat NAME");
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
    CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0, "ibv_query_gid");
    pd = ibv_alloc_pd(ctx);
    CHECK(pd != NULL, "ibv_alloc_pd");

    queries();
    uint8_t* src = malloc(kBuf);
    uint8_t* a = calloc(1, kBuf);
    uint8_t* b = calloc(1, kBuf);
    CHECK(src && a && b, "buffers");
    memset(src, 0x5A, kBuf);
    access_flags(a);

    /* ---- GID indices: e from sgid_index 3, f from 0; 1 refused ---- */
    struct ibv_cq* scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
    struct ibv_cq* rcq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
    CHECK(scq && rcq, "ibv_create_cq");
    create_flags(scq);
    struct ibv_qp* e = rc_qp(scq, rcq);
    struct ibv_qp* f = rc_qp(scq, rcq);
    CHECK(rc_rtr(e, f->qp_num, 1) == EINVAL, "an AV from GID index 1 (empty) must be EINVAL");
    CHECK(rc_rtr(e, f->qp_num, 3) == 0 && rc_rtr(f, e->qp_num, 0) == 0, "RTR from GID index 3 and 0");
    rc_rts(e);
    rc_rts(f);
    struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .sgid_index = 1, .hop_limit = 1}};
    errno = 0;
    CHECK(ibv_create_ah(pd, &aa) == NULL && errno == EINVAL, "an AH from GID index 1 must be EINVAL");
    aa.grh.sgid_index = 3;
    struct ibv_ah* ah = ibv_create_ah(pd, &aa);
    CHECK(ah != NULL, "an AH from GID index 3");
    CHECK(ibv_destroy_ah(ah) == 0, "destroy_ah");
    printf("gid_index 3=ok 1=EINVAL ok\n");

    /* ---- ibv_rereg_mr ---- */
    struct ibv_mr* smr = ibv_reg_mr(pd, src, kBuf, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr* dmr = ibv_reg_mr(pd, a, kBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    CHECK(smr && dmr, "ibv_reg_mr");
    const uint32_t rkey = dmr->rkey;
    CHECK(rc_post(e, scq, IBV_WR_RDMA_WRITE, src, smr->lkey, (uintptr_t)a + 100, rkey, 1) == IBV_WC_SUCCESS,
          "WRITE into a");
    CHECK(all(a + 100, kMsg, 0x5A) && all(a, 100, 0) && all(b, kBuf, 0), "the WRITE landed in a only");
    memset(a, 0, kBuf);
    CHECK(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, b, kBuf, 0) == 0, "rereg to b");
    CHECK(dmr->addr == b && dmr->length == kBuf, "rereg updated addr and length");
    /* The keys may change (the man page); they stay here. */
    CHECK(rc_post(e, scq, IBV_WR_RDMA_WRITE, src, smr->lkey, (uintptr_t)b + 200, dmr->rkey, 2) == IBV_WC_SUCCESS,
          "WRITE into b");
    CHECK(all(b + 200, kMsg, 0x5A) && all(b, 200, 0) && all(a, kBuf, 0), "after rereg the WRITE landed in b only");
    errno = 0;
    CHECK(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE) ==
                  IBV_REREG_MR_ERR_CMD && errno == EINVAL,
          "rereg to remote write without local write must fail (EINVAL)");
    memset(b, 0, kBuf);
    CHECK(rc_post(e, scq, IBV_WR_RDMA_WRITE, src, smr->lkey, (uintptr_t)b, dmr->rkey, 3) == IBV_WC_SUCCESS,
          "WRITE after a refused rereg");
    CHECK(all(b, kMsg, 0x5A), "a refused rereg left the region as it was");
    struct ibv_pd* pd2 = ibv_alloc_pd(ctx);
    CHECK(pd2 != NULL, "a second PD");
    CHECK(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0) == 0 && dmr->pd == pd2, "rereg to pd2");
    CHECK(ibv_dealloc_pd(pd2) == EBUSY, "pd2 is busy with the region");
    CHECK(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, 0) == 0 && dmr->pd == pd, "rereg back to pd");
    CHECK(ibv_dealloc_pd(pd2) == 0, "pd2 is free again");
    printf("rereg translation moved_write=ok refused_unchanged=ok pd=ok keys_kept=%d ok\n", dmr->rkey == rkey);

    /* ---- ibv_resize_cq: rcq (8 entries) holds 6 receive completions ---- */
    struct ibv_sge rsge = {(uintptr_t)a, kMsg, dmr->lkey};
    CHECK(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, a, kBuf, 0) == 0, "rereg back to a");
    for (int i = 0; i < 26; i++) {
        struct ibv_recv_wr rwr = {.wr_id = 100 + i, .sg_list = &rsge, .num_sge = 1}, *bad_r;
        CHECK(ibv_post_recv(f, &rwr, &bad_r) == 0, "post_recv %d", i);
    }
    /* RC: a send completes once acknowledged, after its receive completed. */
    for (int i = 0; i < 6; i++)
        CHECK(rc_post(e, scq, IBV_WR_SEND, src, smr->lkey, 0, 0, 10 + i) == IBV_WC_SUCCESS, "SEND %d", i);
    CHECK(ibv_resize_cq(rcq, 5) == EINVAL, "resize below the 6 completions held must be EINVAL");
    CHECK(ibv_resize_cq(rcq, 6) == 0 && rcq->cqe >= 6, "resize to exactly what it holds");
    CHECK(ibv_resize_cq(rcq, 64) == 0 && rcq->cqe >= 64, "grow to 64");
    /* 20 more, beyond the old depth: no overrun. */
    for (int i = 6; i < 26; i++)
        CHECK(rc_post(e, scq, IBV_WR_SEND, src, smr->lkey, 0, 0, 10 + i) == IBV_WC_SUCCESS, "SEND %d", i);
    for (int i = 0; i < 26; i++) {
        struct ibv_wc wc = poll_status(rcq, "a receive after resize");
        CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)(100 + i) && wc.byte_len == kMsg &&
                  wc.opcode == IBV_WC_RECV,
              "receive %d: wr_id %" PRIu64 " status %s byte_len %u", i, wc.wr_id, ibv_wc_status_str(wc.status),
              wc.byte_len);
    }
    struct ibv_wc none;
    CHECK(ibv_poll_cq(rcq, 1, &none) == 0, "no completion beyond the 26");
    printf("resize_cq below_held=EINVAL kept=6 grown_held=26 ok\n");

    /* Signaled sends just posted are owed to their CQ whether or not they completed yet: a
     * resize below them is EINVAL at once, to exactly them works (no race with the NIC). */
    for (int i = 0; i < 10; i++) {
        struct ibv_recv_wr rwr = {.wr_id = 200 + i, .sg_list = &rsge, .num_sge = 1}, *bad_r;
        CHECK(ibv_post_recv(f, &rwr, &bad_r) == 0, "post_recv %d", i);
    }
    struct ibv_sge ssge = {(uintptr_t)src, kMsg, smr->lkey};
    for (int i = 0; i < 10; i++) {
        struct ibv_send_wr wr = {.wr_id = 300 + i, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND,
                                 .send_flags = IBV_SEND_SIGNALED},
                           *bad;
        CHECK(ibv_post_send(e, &wr, &bad) == 0, "post_send %d", i);
    }
    CHECK(ibv_resize_cq(scq, 9) == EINVAL, "resize below 10 owed sends must be EINVAL");
    CHECK(ibv_resize_cq(scq, 10) == 0, "resize to the 10 owed sends");
    for (int i = 0; i < 10; i++) {
        struct ibv_wc wc = poll_status(scq, "an owed send");
        CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)(300 + i), "owed send %d: wr_id %" PRIu64, i,
              wc.wr_id);
        wc = poll_status(rcq, "its receive");
        CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)(200 + i), "receive %d", i);
    }
    CHECK(ibv_resize_cq(scq, 64) == 0, "grow back");
    printf("resize_cq owed_sends=10 below=EINVAL exact=ok ok\n");

    /* ---- CHANGE_ACCESS without remote write: the next WRITE is refused by the responder ---- */
    CHECK(ibv_rereg_mr(dmr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE) == 0,
          "rereg to local write only");
    CHECK(rc_post(e, scq, IBV_WR_RDMA_WRITE, src, smr->lkey, (uintptr_t)a, dmr->rkey, 50) == IBV_WC_REM_ACCESS_ERR,
          "a WRITE after remote write was taken away must be REM_ACCESS_ERR");
    printf("rereg access remote_write_removed=REM_ACCESS_ERR ok\n");

    /* ---- RESET cleans the QP's completions from its CQs (as mlx4/mlx5): a flushed receive
     * waits on rcq; after RESET and back to RTS the first completions are the new life's ---- */
    struct ibv_recv_wr fr = {.wr_id = 700, .sg_list = &rsge, .num_sge = 1}, *bad_fr;
    CHECK(ibv_post_recv(f, &fr, &bad_fr) == 0, "post_recv on a QP in ERR");
    struct ibv_qp_attr rst = {.qp_state = IBV_QPS_RESET};
    CHECK(ibv_modify_qp(e, &rst, IBV_QP_STATE) == 0 && ibv_modify_qp(f, &rst, IBV_QP_STATE) == 0, "to RESET");
    CHECK(ibv_poll_cq(rcq, 1, &none) == 0 && ibv_poll_cq(scq, 1, &none) == 0, "RESET left completions of the QPs");
    struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                               .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
    const int init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    CHECK(ibv_modify_qp(e, &init, init_mask) == 0 && ibv_modify_qp(f, &init, init_mask) == 0, "INIT again");
    CHECK(rc_rtr(e, f->qp_num, 3) == 0 && rc_rtr(f, e->qp_num, 0) == 0, "RTR again");
    rc_rts(e);
    rc_rts(f);
    fr.wr_id = 701;
    CHECK(ibv_post_recv(f, &fr, &bad_fr) == 0, "post_recv after RESET");
    CHECK(rc_post(e, scq, IBV_WR_SEND, src, smr->lkey, 0, 0, 60) == IBV_WC_SUCCESS, "SEND after RESET");
    struct ibv_wc rw = poll_status(rcq, "the receive after RESET");
    CHECK(rw.wr_id == 701 && rw.status == IBV_WC_SUCCESS, "first receive after RESET: wr_id %" PRIu64 " %s", rw.wr_id,
          ibv_wc_status_str(rw.status));
    printf("reset cleaned_cqs=ok ok\n");

    CHECK(ibv_destroy_qp(e) == 0 && ibv_destroy_qp(f) == 0, "destroy_qp");
    CHECK(ibv_destroy_cq(scq) == 0 && ibv_destroy_cq(rcq) == 0, "destroy_cq");
    CHECK(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(dmr) == 0, "dereg_mr");
    CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
    CHECK(ibv_close_device(ctx) == 0, "close_device");
    free(src);
    free(a);
    free(b);
    printf("verbs_compat: ok\n");
    return 0;
}
