/* RoCEv2 multicast through unmodified libibverbs (tests/mcast_rt_test.cpp runs it in namespaces on
 * a Linux bridge): ibv_attach_mcast of a UD QP to MGID ::ffff:GROUP, datagrams to an address
 * handle with that GID and remote QPN 0xFFFFFF.
 *
 *   verbs_mcast DEV send GROUP END_GROUP COUNT    COUNT datagrams and an end marker to GROUP,
 *                                                 then an end marker to END_GROUP
 *   verbs_mcast DEV recv GROUP READY_FILE SRC_IP  attach to GROUP, post receives, create
 *                                                 READY_FILE, take datagrams until the end marker
 *
 * The receiver checks each datagram's GRH (20 bytes of zero, then the IPv4 header from SRC_IP to
 * GROUP) and payload, and that each sequence number arrives exactly once before the end marker
 * (a bridge port keeps frame order), then prints "mcast recv datagrams=N". The sender first
 * checks the device's multicast limits and the errors of ibv_attach_mcast/ibv_detach_mcast
 * (EINVAL for a non-UD QP, a unicast GID, a detach of a QP not attached; 0 to attach twice). */
#define VERBS_PROG "verbs_mcast"
#include "verbs_check.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <unistd.h>

enum { kLen = 512, kDepth = 64, kQkey = 0x11223344, kEnd = 0xFFFFFFFF, kGrh = 40 };

static union ibv_gid mgid(const char* group)
{
    union ibv_gid g;
    memset(&g, 0, sizeof g);
    g.raw[10] = g.raw[11] = 0xFF;
    CHECK(inet_pton(AF_INET, group, &g.raw[12]) == 1, "group address %s", group);
    return g;
}

static struct ibv_qp* make_qp(struct ibv_pd* pd, struct ibv_cq* cq, enum ibv_qp_type type)
{
    struct ibv_qp_init_attr a;
    memset(&a, 0, sizeof a);
    a.send_cq = a.recv_cq = cq;
    a.qp_type = type;
    a.cap.max_send_wr = a.cap.max_recv_wr = kDepth;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    struct ibv_qp* qp = ibv_create_qp(pd, &a);
    CHECK(qp != NULL, "ibv_create_qp type %d", (int)type);
    return qp;
}

static void ud_ready(struct ibv_qp* qp)
{
    struct ibv_qp_attr m;
    memset(&m, 0, sizeof m);
    m.qp_state = IBV_QPS_INIT;
    m.port_num = 1;
    m.qkey = kQkey;
    CHECK(ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0, "INIT");
    m.qp_state = IBV_QPS_RTR;
    CHECK(ibv_modify_qp(qp, &m, IBV_QP_STATE) == 0, "RTR");
    m.qp_state = IBV_QPS_RTS;
    CHECK(ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0, "RTS");
}

static struct ibv_wc wait_wc(struct ibv_cq* cq, const char* what)
{
    struct ibv_wc wc;
    int n;
    long spins = 0;
    while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) CHECK(++spins < 4000000000L, "no completion for %s", what);
    CHECK(n == 1, "ibv_poll_cq for %s returned %d", what, n);
    CHECK(wc.status == IBV_WC_SUCCESS, "%s completed with %s", what, ibv_wc_status_str(wc.status));
    return wc;
}

static void fill(uint8_t* p, uint32_t seq)
{
    memcpy(p, &seq, 4);
    for (int i = 4; i < kLen; i++) p[i] = (uint8_t)(seq * 31 + i);
}

static void checks(struct ibv_context* ctx, struct ibv_pd* pd, struct ibv_cq* cq, struct ibv_qp* ud, const char* group)
{
    struct ibv_device_attr d;
    CHECK(ibv_query_device(ctx, &d) == 0, "ibv_query_device");
    CHECK(d.max_mcast_grp > 0 && d.max_mcast_qp_attach > 0 && d.max_total_mcast_qp_attach >= d.max_mcast_qp_attach,
          "multicast limits %d %d %d", d.max_mcast_grp, d.max_mcast_qp_attach, d.max_total_mcast_qp_attach);
    union ibv_gid g = mgid(group), unicast = mgid("10.77.0.9");
    struct ibv_qp* rc = make_qp(pd, cq, IBV_QPT_RC);
    CHECK(ibv_attach_mcast(rc, &g, 0) == EINVAL, "an RC QP joins no group");
    CHECK(ibv_attach_mcast(ud, &unicast, 0) == EINVAL, "a unicast GID is no group");
    CHECK(ibv_detach_mcast(ud, &g, 0) == EINVAL, "detach of a QP not attached");
    CHECK(ibv_attach_mcast(ud, &g, 0) == 0, "attach");
    CHECK(ibv_attach_mcast(ud, &g, 0) == 0, "attach again: 0, as the kernel");
    CHECK(ibv_destroy_qp(ud) == EBUSY, "destroy while attached");
    CHECK(ibv_detach_mcast(ud, &g, 0) == 0, "detach");
    CHECK(ibv_destroy_qp(rc) == 0, "destroy RC QP");
    printf("mcast limits grp=%d qp_attach=%d total=%d\n", d.max_mcast_grp, d.max_mcast_qp_attach,
           d.max_total_mcast_qp_attach);
}

static void send_one(struct ibv_qp* qp, struct ibv_cq* cq, struct ibv_ah* ah, struct ibv_mr* mr, uint8_t* buf,
                     uint32_t seq)
{
    fill(buf, seq);
    struct ibv_sge s = {(uintptr_t)buf, kLen, mr->lkey};
    struct ibv_send_wr w, *bad;
    memset(&w, 0, sizeof w);
    w.wr_id = seq;
    w.sg_list = &s;
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED;
    w.wr.ud.ah = ah;
    w.wr.ud.remote_qpn = 0xFFFFFF;
    w.wr.ud.remote_qkey = kQkey;
    CHECK(ibv_post_send(qp, &w, &bad) == 0, "post_send %u", seq);
    wait_wc(cq, "a multicast send");
}

static struct ibv_ah* group_ah(struct ibv_pd* pd, const char* group)
{
    struct ibv_ah_attr a;
    memset(&a, 0, sizeof a);
    a.is_global = 1;
    a.grh.dgid = mgid(group);
    a.grh.sgid_index = 0;
    a.grh.hop_limit = 1;
    a.port_num = 1;
    struct ibv_ah* ah = ibv_create_ah(pd, &a);
    CHECK(ah != NULL, "ibv_create_ah to %s", group);
    return ah;
}

int main(int argc, char** argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    CHECK(argc == 6, "usage: verbs_mcast DEV send GROUP END_GROUP COUNT | DEV recv GROUP READY_FILE SRC_IP");
    int ndev = 0;
    struct ibv_device** list = ibv_get_device_list(&ndev);
    CHECK(list != NULL, "ibv_get_device_list");
    struct ibv_context* ctx = NULL;
    for (int i = 0; i < ndev && !ctx; i++)
        if (strcmp(ibv_get_device_name(list[i]), argv[1]) == 0) ctx = ibv_open_device(list[i]);
    CHECK(ctx != NULL, "device %s not found or not opened", argv[1]);
    struct ibv_pd* pd = ibv_alloc_pd(ctx);
    struct ibv_cq* cq = ibv_create_cq(ctx, 2 * kDepth, NULL, NULL, 0);
    CHECK(pd && cq, "PD and CQ");
    static uint8_t buf[kDepth * (kGrh + kLen)];
    struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL, "ibv_reg_mr");
    struct ibv_qp* qp = make_qp(pd, cq, IBV_QPT_UD);
    ud_ready(qp);
    const char* group = argv[3];

    if (strcmp(argv[2], "send") == 0) {
        checks(ctx, pd, cq, qp, group);
        const uint32_t count = (uint32_t)strtoul(argv[5], NULL, 10);
        struct ibv_ah* ah = group_ah(pd, group);
        struct ibv_ah* end = group_ah(pd, argv[4]);
        for (uint32_t seq = 0; seq < count; seq++) send_one(qp, cq, ah, mr, buf, seq);
        send_one(qp, cq, ah, mr, buf, kEnd);
        send_one(qp, cq, end, mr, buf, kEnd);
        printf("mcast send datagrams=%u qpn=%u\n", count, qp->qp_num);
        return 0;
    }

    CHECK(strcmp(argv[2], "recv") == 0, "mode %s", argv[2]);
    union ibv_gid g = mgid(group);
    CHECK(ibv_attach_mcast(qp, &g, 0) == 0, "attach to %s", group);
    for (int i = 0; i < kDepth; i++) {
        struct ibv_sge s = {(uintptr_t)(buf + i * (kGrh + kLen)), kGrh + kLen, mr->lkey};
        struct ibv_recv_wr w, *bad;
        memset(&w, 0, sizeof w);
        w.wr_id = (uint64_t)i;
        w.sg_list = &s;
        w.num_sge = 1;
        CHECK(ibv_post_recv(qp, &w, &bad) == 0, "post_recv");
    }
    int fd = open(argv[4], O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    CHECK(fd >= 0 && close(fd) == 0, "ready file %s", argv[4]);
    struct in_addr src, dst;
    CHECK(inet_pton(AF_INET, argv[5], &src) == 1 && inet_pton(AF_INET, group, &dst) == 1, "addresses");
    uint8_t seen[kDepth] = {0};
    uint32_t n = 0;
    for (;;) {
        struct ibv_wc wc = wait_wc(cq, "a multicast datagram");
        CHECK(wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_GRH) && wc.byte_len == kGrh + kLen,
              "opcode %d flags %x byte_len %u", (int)wc.opcode, (unsigned)wc.wc_flags, wc.byte_len);
        const uint8_t* d = buf + wc.wr_id * (kGrh + kLen);
        for (int i = 0; i < 20; i++) CHECK(d[i] == 0, "GRH byte %d", i);
        CHECK(d[20] == 0x45 && d[29] == 17, "an IPv4 header of UDP in the GRH's last 20 bytes");
        CHECK(memcmp(d + 32, &src, 4) == 0 && memcmp(d + 36, &dst, 4) == 0, "from %s to %s", argv[5], group);
        uint32_t seq;
        memcpy(&seq, d + kGrh, 4);
        uint8_t want[kLen];
        fill(want, seq);
        CHECK(memcmp(d + kGrh, want, kLen) == 0, "payload of datagram %u", seq);
        if (seq == kEnd) break;
        CHECK(seq < kDepth && !seen[seq], "datagram %u once", seq);
        seen[seq] = 1;
        n++;
    }
    CHECK(ibv_detach_mcast(qp, &g, 0) == 0, "detach");
    CHECK(ibv_destroy_qp(qp) == 0, "destroy after detach");
    printf("mcast recv datagrams=%u\n", n);
    return 0;
}
