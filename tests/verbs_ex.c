/* A verbs program that knows only <infiniband/verbs.h> and links only -libverbs: the extended
 * verbs on one emulated device (loopback). QPs made with ibv_create_qp_ex and
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS post with ibv_wr_start / ibv_wr_* / ibv_wr_complete (found
 * again through ibv_qp_to_qp_ex), CQs made with ibv_create_cq_ex are read with ibv_start_poll /
 * ibv_next_poll / ibv_end_poll and the ibv_wc_read_* ops:
 *   - RC: RDMA WRITE (two SGEs), WRITE with immediate, SEND with inline data, SEND with
 *     immediate and RDMA READ in one batch, byte-exact, every completion's fields; then a
 *     FETCH ADD and a COMPARE SWAP (ibv_wr_atomic_fetch_add, ibv_wr_atomic_cmp_swp) on one word;
 *   - UD: SEND with immediate to an address (ibv_wr_set_ud_addr), the GRH and src_qp;
 *   - ibv_wr_abort posts nothing; a setter with too many SGEs fails the batch at complete;
 *   - refusals: atomics in a UC QP's send_ops_flags and completion timestamps in wc_flags
 *     (EOPNOTSUPP).
 * Exit 0 after "verbs_ex: ok".
 *
 *   verbs_ex NAME
 */
#define _DEFAULT_SOURCE
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERBS_PROG "verbs_ex"
#include "verbs_check.h"

enum { kBuf = 256 * 1024, kQkey = 0x3333 };
enum { kWriteBytes = 100000, kImmBytes = 30000, kSendBytes = 200, kSendImmBytes = 50000, kReadBytes = 70000 };

static struct ibv_context* ctx;
static struct ibv_pd* pd;
static union ibv_gid gid;
static enum ibv_mtu mtu;

struct cqe {
    uint64_t wr_id;
    enum ibv_wc_status status;
    enum ibv_wc_opcode opcode;
    uint32_t byte_len, imm, qp_num, src_qp;
    unsigned flags;
};

/* Exactly n completions through the extended poll. */
static void poll_ex(struct ibv_cq_ex* cq, int n, struct cqe* out, const char* what)
{
    struct ibv_poll_cq_attr attr = {0};
    long spins = 0;
    int ret;
    while ((ret = ibv_start_poll(cq, &attr)) == ENOENT) CHECK(++spins < 2000000000L, "no completion for %s", what);
    CHECK(ret == 0, "ibv_start_poll for %s: %d", what, ret);
    for (int i = 0; i < n; i++) {
        if (i) {
            while ((ret = ibv_next_poll(cq)) == ENOENT) CHECK(++spins < 2000000000L, "no completion %d for %s", i, what);
            CHECK(ret == 0, "ibv_next_poll for %s: %d", what, ret);
        }
        out[i].wr_id = cq->wr_id;
        out[i].status = cq->status;
        out[i].opcode = ibv_wc_read_opcode(cq);
        out[i].byte_len = ibv_wc_read_byte_len(cq);
        out[i].flags = ibv_wc_read_wc_flags(cq);
        out[i].imm = (out[i].flags & IBV_WC_WITH_IMM) ? ntohl(ibv_wc_read_imm_data(cq)) : 0;
        out[i].qp_num = ibv_wc_read_qp_num(cq);
        out[i].src_qp = ibv_wc_read_src_qp(cq);
        CHECK(out[i].status == IBV_WC_SUCCESS, "%s completion %d: %s", what, i, ibv_wc_status_str(out[i].status));
        /* A UD receive's sl is its RoCE packet type as ConnectX gives it (v2, IPv4: 0xA). */
        const uint8_t sl = (out[i].flags & IBV_WC_GRH) ? 0xA : 0;
        CHECK(ibv_wc_read_sl(cq) == sl && ibv_wc_read_dlid_path_bits(cq) == 0, "sl %u, dlid_path_bits",
              ibv_wc_read_sl(cq));
    }
    CHECK(ibv_next_poll(cq) == ENOENT, "nothing more for %s", what);
    ibv_end_poll(cq);
}

static struct ibv_cq_ex* make_cq(void)
{
    struct ibv_cq_init_attr_ex a = {.cqe = 64,
                                    .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                                                IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                                                IBV_WC_EX_WITH_DLID_PATH_BITS};
    struct ibv_cq_ex* cq = ibv_create_cq_ex(ctx, &a);
    CHECK(cq != NULL, "ibv_create_cq_ex");
    return cq;
}

static struct ibv_qp* make_qp(enum ibv_qp_type type, struct ibv_cq_ex* cq, uint64_t ops)
{
    struct ibv_qp_init_attr_ex a = {.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq), .qp_type = type,
                                    .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2},
                                    .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
                                    .send_ops_flags = ops};
    struct ibv_qp* qp = ibv_create_qp_ex(ctx, &a);
    CHECK(qp != NULL, "ibv_create_qp_ex type %d", (int)type);
    CHECK(ibv_qp_to_qp_ex(qp) != NULL, "ibv_qp_to_qp_ex");
    struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1};
    int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    if (type == IBV_QPT_UD) {
        m.qkey = kQkey;
        mask |= IBV_QP_QKEY;
    } else {
        m.qp_access_flags =
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        mask |= IBV_QP_ACCESS_FLAGS;
    }
    CHECK(ibv_modify_qp(qp, &m, mask) == 0, "modify to INIT");
    return qp;
}

static void connect_rc(struct ibv_qp* qp, uint32_t dest)
{
    struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .rq_psn = 9, .dest_qp_num = dest,
                            .max_dest_rd_atomic = 4, .min_rnr_timer = 12};
    r.ah_attr.is_global = 1;
    r.ah_attr.grh.dgid = gid;
    r.ah_attr.grh.hop_limit = 1;
    r.ah_attr.port_num = 1;
    CHECK(ibv_modify_qp(qp, &r,
                        IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_AV |
                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
          "RC to RTR");
    struct ibv_qp_attr s = {.qp_state = IBV_QPS_RTS, .sq_psn = 9, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
                            .max_rd_atomic = 4};
    CHECK(ibv_modify_qp(qp, &s,
                        IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                            IBV_QP_MAX_QP_RD_ATOMIC) == 0,
          "RC to RTS");
}

static void ready_ud(struct ibv_qp* qp)
{
    struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTR};
    CHECK(ibv_modify_qp(qp, &r, IBV_QP_STATE) == 0, "UD to RTR");
    struct ibv_qp_attr s = {.qp_state = IBV_QPS_RTS, .sq_psn = 9};
    CHECK(ibv_modify_qp(qp, &s, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0, "UD to RTS");
}

static void fill(uint8_t* p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

static void post_recv(struct ibv_qp* qp, struct ibv_mr* mr, uint8_t* at, uint32_t len, uint64_t id)
{
    struct ibv_sge s = {(uintptr_t)at, len, mr->lkey};
    struct ibv_recv_wr w = {.wr_id = id, .sg_list = &s, .num_sge = 1}, *bad;
    CHECK(ibv_post_recv(qp, &w, &bad) == 0, "ibv_post_recv %" PRIu64, id);
}

int main(int argc, char** argv)
{
    CHECK(argc == 2, "usage: verbs_ex NAME");
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
    pd = ibv_alloc_pd(ctx);
    CHECK(pd != NULL, "ibv_alloc_pd");
    uint8_t* src = malloc(kBuf);
    uint8_t* dst = calloc(1, kBuf);
    uint8_t* rdst = calloc(1, kBuf);
    CHECK(src && dst && rdst, "buffers");
    fill(src, kBuf, 23);
    struct ibv_mr* smr = ibv_reg_mr(pd, src, kBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    struct ibv_mr* dmr = ibv_reg_mr(pd, dst, kBuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    struct ibv_mr* rmr = ibv_reg_mr(pd, rdst, kBuf, IBV_ACCESS_LOCAL_WRITE);
    CHECK(smr && dmr && rmr, "ibv_reg_mr");

    /* refusals first */
    struct ibv_cq_init_attr_ex ts = {.cqe = 4, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP};
    CHECK(ibv_create_cq_ex(ctx, &ts) == NULL && errno == EOPNOTSUPP, "completion timestamps must be EOPNOTSUPP");
    struct ibv_cq_ex* cq = make_cq();
    struct ibv_qp_init_attr_ex atomics = {.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq),
                                          .qp_type = IBV_QPT_UC, .cap = {.max_send_wr = 4, .max_recv_wr = 4},
                                          .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
                                          .send_ops_flags = IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD};
    CHECK(ibv_create_qp_ex(ctx, &atomics) == NULL && errno == EOPNOTSUPP, "atomic send ops on UC must be EOPNOTSUPP");

    /* ---- RC: one batch of five ---- */
    const uint64_t rc_ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
                            IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                            IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
    struct ibv_qp* a = make_qp(IBV_QPT_RC, cq, rc_ops);
    struct ibv_qp* b = make_qp(IBV_QPT_RC, cq, rc_ops);
    connect_rc(a, b->qp_num);
    connect_rc(b, a->qp_num);
    uint8_t* send_at = dst + 150000;
    uint8_t* send_imm_at = dst + 160000;
    post_recv(b, dmr, dst + 200000, 16, 71);  /* taken in order: the WRITE with immediate's, */
    post_recv(b, dmr, send_at, 4096, 72);     /* the inline SEND's, */
    post_recv(b, dmr, send_imm_at, kSendImmBytes, 73);  /* the SEND with immediate's */
    struct ibv_qp_ex* x = ibv_qp_to_qp_ex(a);
    uint8_t inline_bytes[kSendBytes];
    memcpy(inline_bytes, src + 5000, kSendBytes);

    ibv_wr_start(x);  /* aborted: nothing leaves */
    x->wr_id = 99;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(x);
    ibv_wr_set_sge(x, smr->lkey, (uintptr_t)src, 64);
    ibv_wr_abort(x);

    ibv_wr_start(x);
    x->wr_id = 1;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x, dmr->rkey, (uintptr_t)dst);
    const struct ibv_sge two[2] = {{(uintptr_t)src, 40000, smr->lkey}, {(uintptr_t)src + 50000, kWriteBytes - 40000, smr->lkey}};
    ibv_wr_set_sge_list(x, 2, two);
    x->wr_id = 2;
    ibv_wr_rdma_write_imm(x, dmr->rkey, (uintptr_t)dst + 110000, htonl(0xAB01));
    ibv_wr_set_sge(x, smr->lkey, (uintptr_t)src + 120000, kImmBytes);
    x->wr_id = 3;
    x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    ibv_wr_send(x);
    ibv_wr_set_inline_data(x, inline_bytes, kSendBytes);
    x->wr_id = 4;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send_imm(x, htonl(0xAB02));
    ibv_wr_set_sge(x, smr->lkey, (uintptr_t)src + 180000, kSendImmBytes);
    x->wr_id = 5;
    ibv_wr_rdma_read(x, smr->rkey, (uintptr_t)src + 1000);
    ibv_wr_set_sge(x, rmr->lkey, (uintptr_t)rdst, kReadBytes);
    CHECK(ibv_wr_complete(x) == 0, "ibv_wr_complete");
    memset(inline_bytes, 0, sizeof inline_bytes);  /* copied at the setter: may go now */

    struct cqe c[8];
    poll_ex(cq, 8, c, "the RC batch");
    int sends = 0, recvs = 0;
    for (int i = 0; i < 8; i++) {
        if (c[i].qp_num == a->qp_num) {
            static const enum ibv_wc_opcode ops[] = {IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE, IBV_WC_SEND, IBV_WC_SEND,
                                                      IBV_WC_RDMA_READ};
            CHECK(c[i].wr_id == (uint64_t)sends + 1 && c[i].opcode == ops[sends], "send completion %d: wr_id %" PRIu64
                  " opcode %d", sends, c[i].wr_id, (int)c[i].opcode);
            sends++;
        } else {
            CHECK(c[i].qp_num == b->qp_num, "qp_num %u", c[i].qp_num);
            CHECK(c[i].wr_id == 71 + (uint64_t)recvs, "receive %d: wr_id %" PRIu64, recvs, c[i].wr_id);
            if (recvs == 0)
                CHECK(c[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM && c[i].imm == 0xAB01 && c[i].byte_len == kImmBytes &&
                          (c[i].flags & IBV_WC_WITH_IMM), "WRITE with immediate's receive");
            if (recvs == 1) CHECK(c[i].opcode == IBV_WC_RECV && c[i].byte_len == kSendBytes, "inline SEND's receive");
            if (recvs == 2)
                CHECK(c[i].opcode == IBV_WC_RECV && c[i].imm == 0xAB02 && c[i].byte_len == kSendImmBytes,
                      "SEND with immediate's receive");
            recvs++;
        }
    }
    CHECK(sends == 5 && recvs == 3, "5 send and 3 receive completions");
    CHECK(memcmp(dst, src, 40000) == 0 && memcmp(dst + 40000, src + 50000, kWriteBytes - 40000) == 0, "WRITE bytes");
    CHECK(memcmp(dst + 110000, src + 120000, kImmBytes) == 0, "WRITE with immediate bytes");
    CHECK(memcmp(send_at, src + 5000, kSendBytes) == 0, "inline SEND bytes");
    CHECK(memcmp(send_imm_at, src + 180000, kSendImmBytes) == 0, "SEND with immediate bytes");
    CHECK(memcmp(rdst, src + 1000, kReadBytes) == 0, "READ bytes");
    printf("ex rc write=%d write_imm=%d send_inline=%d send_imm=%d read=%d ok\n", kWriteBytes, kImmBytes, kSendBytes,
           kSendImmBytes, kReadBytes);

    /* atomics on one word: FETCH ADD 5 (returns 1000), then COMPARE SWAP 1005 -> 77 (returns 1005) */
    uint64_t word[2] = {0, 1000};
    struct ibv_mr* amr = ibv_reg_mr(pd, word, sizeof word, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
    CHECK(amr != NULL, "ibv_reg_mr with IBV_ACCESS_REMOTE_ATOMIC");
    memset(rdst, 0xEE, 24);
    ibv_wr_start(x);
    x->wr_id = 8;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_atomic_fetch_add(x, amr->rkey, (uintptr_t)&word[1], 5);
    ibv_wr_set_sge(x, rmr->lkey, (uintptr_t)rdst, 8);
    x->wr_id = 9;
    ibv_wr_atomic_cmp_swp(x, amr->rkey, (uintptr_t)&word[1], 1005, 77);
    ibv_wr_set_sge(x, rmr->lkey, (uintptr_t)rdst + 8, 8);
    CHECK(ibv_wr_complete(x) == 0, "ibv_wr_complete atomics");
    poll_ex(cq, 2, c, "the atomics");
    CHECK(c[0].wr_id == 8 && c[0].opcode == IBV_WC_FETCH_ADD && c[0].byte_len == 8 && c[0].qp_num == a->qp_num,
          "FETCH ADD completion: wr_id %" PRIu64 " opcode %d byte_len %u", c[0].wr_id, (int)c[0].opcode, c[0].byte_len);
    CHECK(c[1].wr_id == 9 && c[1].opcode == IBV_WC_COMP_SWAP && c[1].byte_len == 8,
          "COMPARE SWAP completion: wr_id %" PRIu64 " opcode %d byte_len %u", c[1].wr_id, (int)c[1].opcode, c[1].byte_len);
    uint64_t got[2];
    memcpy(got, rdst, sizeof got);
    CHECK(got[0] == 1000 && got[1] == 1005 && word[1] == 77 && word[0] == 0 && rdst[16] == 0xEE,
          "atomics: returned %" PRIu64 " %" PRIu64 ", word %" PRIu64, got[0], got[1], word[1]);
    CHECK(ibv_dereg_mr(amr) == 0, "dereg the atomic region");
    printf("ex rc fetch_add=%" PRIu64 " cmp_swp=%" PRIu64 " word=%" PRIu64 " ok\n", got[0], got[1], word[1]);

    /* a batch whose setter failed posts nothing */
    ibv_wr_start(x);
    x->wr_id = 6;
    ibv_wr_send(x);
    struct ibv_sge nine[9];
    for (int i = 0; i < 9; i++) nine[i] = (struct ibv_sge){(uintptr_t)src, 1, smr->lkey};
    ibv_wr_set_sge_list(x, 9, nine);
    CHECK(ibv_wr_complete(x) == EINVAL, "nine SGEs (one more than max_sge) must fail the batch");
    struct ibv_poll_cq_attr pa = {0};
    CHECK(ibv_start_poll(cq, &pa) == ENOENT, "nothing was posted");

    /* ---- UD: SEND with immediate to an address ---- */
    struct ibv_qp* ua = make_qp(IBV_QPT_UD, cq, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM);
    struct ibv_qp* ub = make_qp(IBV_QPT_UD, cq, IBV_QP_EX_WITH_SEND);
    ready_ud(ua);
    ready_ud(ub);
    struct ibv_ah_attr aa = {.is_global = 1, .grh = {.dgid = gid, .hop_limit = 1}, .port_num = 1};
    struct ibv_ah* ah = ibv_create_ah(pd, &aa);
    CHECK(ah != NULL, "ibv_create_ah");
    memset(dst, 0, kBuf);
    post_recv(ub, dmr, dst, 40 + mtu_bytes, 81);
    struct ibv_qp_ex* ux = ibv_qp_to_qp_ex(ua);
    ibv_wr_start(ux);
    ux->wr_id = 7;
    ux->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send_imm(ux, htonl(0xAB03));
    ibv_wr_set_ud_addr(ux, ah, ub->qp_num, kQkey);
    ibv_wr_set_sge(ux, smr->lkey, (uintptr_t)src + 7, mtu_bytes);
    CHECK(ibv_wr_complete(ux) == 0, "ibv_wr_complete UD");
    poll_ex(cq, 2, c, "the UD SEND");
    const struct cqe* r = c[0].qp_num == ub->qp_num ? &c[0] : &c[1];
    const struct cqe* s = r == &c[0] ? &c[1] : &c[0];
    CHECK(s->wr_id == 7 && s->opcode == IBV_WC_SEND && s->qp_num == ua->qp_num, "UD send completion");
    CHECK(r->wr_id == 81 && r->opcode == IBV_WC_RECV && r->imm == 0xAB03 && r->byte_len == 40 + mtu_bytes &&
              (r->flags & IBV_WC_GRH) && r->src_qp == ua->qp_num,
          "UD receive: wr_id %" PRIu64 " imm %#x len %u src_qp %u", r->wr_id, r->imm, r->byte_len, r->src_qp);
    CHECK(memcmp(dst + 40, src + 7, mtu_bytes) == 0, "UD bytes");
    printf("ex ud send_imm bytes=%u grh=40 ok\n", mtu_bytes);

    CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0 && ibv_destroy_qp(ua) == 0 && ibv_destroy_qp(ub) == 0,
          "ibv_destroy_qp");
    CHECK(ibv_destroy_ah(ah) == 0 && ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) == 0, "destroy AH, CQ");
    CHECK(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(dmr) == 0 && ibv_dereg_mr(rmr) == 0 && ibv_dealloc_pd(pd) == 0,
          "dereg, dealloc");
    CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
    free(src);
    free(dst);
    free(rdst);
    printf("verbs_ex: ok\n");
    return 0;
}
