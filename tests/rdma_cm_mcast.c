/* Multicast through rdma_cm (librdmacm only): a UD ID resolves a group's address from a local
 * one, joins the group (rdma_join_multicast; the sender as a send-only member) and gets
 * RDMA_CM_EVENT_MULTICAST_JOIN with the AH, QPN 0xFFFFFF and Q_Key to send to it; the receiver's
 * QP is attached by librdmacm. The sender sends COUNT numbered datagrams (each one signaled and
 * polled, so every one has left before the QP goes); the receiver checks each, in order, after
 * its 40-byte GRH. Both refuse to join a unicast address (EINVAL) and leave the group twice
 * (the second: EADDRNOTAVAIL). Exit 0 after "rdma_cm_mcast: ok".
 *
 *   rdma_cm_mcast recv|send LOCAL_IPV4 GROUP_IPV4 COUNT
 */
#define _DEFAULT_SOURCE
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VERBS_PROG "rdma_cm_mcast"
#include "verbs_check.h"

enum { kMsg = 64, kGrh = 40, kMaxCount = 256 };

static struct rdma_event_channel* ch;

static struct rdma_cm_event* expect_event(enum rdma_cm_event_type want)
{
    struct rdma_cm_event* ev;
    CHECK(rdma_get_cm_event(ch, &ev) == 0, "rdma_get_cm_event");
    CHECK(ev->event == want && ev->status == 0, "event %s status %d, expected %s", rdma_event_str(ev->event),
          ev->status, rdma_event_str(want));
    return ev;
}

static struct sockaddr_in addr_of(const char* s)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    CHECK(inet_pton(AF_INET, s, &a.sin_addr) == 1, "bad address %s", s);
    return a;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct ibv_wc poll_one(struct ibv_cq* cq, const char* what)
{
    struct ibv_wc wc;
    int n;
    const double deadline = now_s() + 20;
    while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) CHECK(now_s() < deadline, "no completion for %s", what);
    CHECK(n == 1 && wc.status == IBV_WC_SUCCESS, "%s completed with %s", what, ibv_wc_status_str(wc.status));
    return wc;
}

int main(int argc, char** argv)
{
    CHECK(argc == 5 && (!strcmp(argv[1], "recv") || !strcmp(argv[1], "send")),
          "usage: rdma_cm_mcast recv|send LOCAL_IPV4 GROUP_IPV4 COUNT");
    const int sender = !strcmp(argv[1], "send");
    struct sockaddr_in local = addr_of(argv[2]), group = addr_of(argv[3]);
    const int count = atoi(argv[4]);
    CHECK(count > 0 && count <= kMaxCount, "COUNT 1..%d", kMaxCount);

    ch = rdma_create_event_channel();
    CHECK(ch != NULL, "rdma_create_event_channel");
    struct rdma_cm_id* id;
    CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) == 0, "rdma_create_id");
    CHECK(rdma_resolve_addr(id, (struct sockaddr*)&local, (struct sockaddr*)&group, 2000) == 0, "rdma_resolve_addr");
    rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_ADDR_RESOLVED));

    struct ibv_pd* pd = ibv_alloc_pd(id->verbs);
    CHECK(pd != NULL, "ibv_alloc_pd");
    struct ibv_cq* cq = ibv_create_cq(id->verbs, 2 * kMaxCount, NULL, NULL, 0);
    CHECK(cq != NULL, "ibv_create_cq");
    struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
                                  .cap = {.max_send_wr = kMaxCount, .max_recv_wr = kMaxCount, .max_send_sge = 1,
                                          .max_recv_sge = 1}};
    CHECK(rdma_create_qp(id, pd, &qa) == 0, "rdma_create_qp");
    static char buf[kMaxCount][kGrh + kMsg];
    struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL, "ibv_reg_mr");
    for (int i = 0; !sender && i < count; i++) {
        struct ibv_sge s = {.addr = (uintptr_t)buf[i], .length = sizeof buf[i], .lkey = mr->lkey};
        struct ibv_recv_wr w = {.wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1}, *bad;
        CHECK(ibv_post_recv(id->qp, &w, &bad) == 0, "ibv_post_recv");
    }

    struct sockaddr_in unicast = local;
    errno = 0;
    CHECK(rdma_join_multicast(id, (struct sockaddr*)&unicast, NULL) == -1 && errno == EINVAL,
          "joining a unicast address is EINVAL");
    struct rdma_cm_join_mc_attr_ex ja = {
        .comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
        .join_flags = sender ? RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER : RDMA_MC_JOIN_FLAG_FULLMEMBER,
        .addr = (struct sockaddr*)&group};
    CHECK(rdma_join_multicast_ex(id, &ja, NULL) == 0, "rdma_join_multicast_ex");
    struct rdma_cm_event* ev = expect_event(RDMA_CM_EVENT_MULTICAST_JOIN);
    const struct rdma_ud_param ud = ev->param.ud;
    char mgid[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, ud.ah_attr.grh.dgid.raw, mgid, sizeof mgid);
    CHECK(ud.qp_num == 0xFFFFFF && ud.qkey == RDMA_UDP_QKEY && ud.ah_attr.is_global, "join parameters");
    printf("joined mgid %s qpn 0x%x qkey 0x%x\n", mgid, ud.qp_num, ud.qkey);
    rdma_ack_cm_event(ev);

    if (sender) {
        struct ibv_ah* ah = ibv_create_ah(pd, (struct ibv_ah_attr*)&ud.ah_attr);
        CHECK(ah != NULL, "ibv_create_ah to the group");
        for (int i = 0; i < count; i++) {
            snprintf(buf[i], kMsg, "rdma_cm multicast %d", i);
            struct ibv_sge s = {.addr = (uintptr_t)buf[i], .length = kMsg, .lkey = mr->lkey};
            struct ibv_send_wr w = {.wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
                                    .send_flags = IBV_SEND_SIGNALED,
                                    .wr.ud = {.ah = ah, .remote_qpn = ud.qp_num, .remote_qkey = ud.qkey}},
                               *bad;
            CHECK(ibv_post_send(id->qp, &w, &bad) == 0, "ibv_post_send");
            poll_one(cq, "a send");
        }
        CHECK(ibv_destroy_ah(ah) == 0, "ibv_destroy_ah");
        printf("sent %d ok\n", count);
    } else {
        for (int i = 0; i < count; i++) {
            struct ibv_wc wc = poll_one(cq, "a receive");
            char want[kMsg];
            snprintf(want, sizeof want, "rdma_cm multicast %d", i);
            CHECK(wc.wr_id == (uint64_t)i && wc.byte_len == kGrh + kMsg && !strcmp(buf[i] + kGrh, want),
                  "datagram %d: wr_id %llu, %u bytes, '%s'", i, (unsigned long long)wc.wr_id, wc.byte_len,
                  buf[i] + kGrh);
        }
        printf("received %d in order ok\n", count);
    }

    CHECK(rdma_leave_multicast(id, (struct sockaddr*)&group) == 0, "rdma_leave_multicast");
    errno = 0;
    CHECK(rdma_leave_multicast(id, (struct sockaddr*)&group) == -1 && errno == EADDRNOTAVAIL, "leaving twice");
    rdma_destroy_qp(id);
    CHECK(ibv_dereg_mr(mr) == 0 && ibv_destroy_cq(cq) == 0 && ibv_dealloc_pd(pd) == 0, "free");
    CHECK(rdma_destroy_id(id) == 0, "rdma_destroy_id");
    rdma_destroy_event_channel(ch);
    printf("rdma_cm_mcast: ok\n");
    return 0;
}
