/* A completion channel's fd right after ibv_create_comp_channel, as UCX uses it: with the
 * interception library (libsdr_rdma_preload.so in LD_PRELOAD) the fd is valid at once: fcntl
 * reads and sets O_NONBLOCK on it, poll() says nothing is pending, read() says EAGAIN. A CQ
 * created on the channel keeps that fd (the provider writes its events into the same pipe), and
 * a UD SEND from a QP of the device to another of its QPs raises the event there: poll() turns
 * readable and ibv_get_cq_event returns the CQ. Exit 0 after "verbs_comp_channel: ok".
 *
 *   verbs_comp_channel NAME
 */
#define _DEFAULT_SOURCE
#include <infiniband/verbs.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define VERBS_PROG "verbs_comp_channel"
#include "verbs_check.h"

static struct ibv_qp* ud_qp(struct ibv_pd* pd, struct ibv_cq* cq)
{
    struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
                                 .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
    struct ibv_qp* qp = ibv_create_qp(pd, &a);
    CHECK(qp != NULL, "ibv_create_qp");
    struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x22222222};
    CHECK(ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0, "INIT");
    m.qp_state = IBV_QPS_RTR;
    CHECK(ibv_modify_qp(qp, &m, IBV_QP_STATE) == 0, "RTR");
    m.qp_state = IBV_QPS_RTS;
    m.sq_psn = 0;
    CHECK(ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0, "RTS");
    return qp;
}

int main(int argc, char** argv)
{
    CHECK(argc == 2, "usage: verbs_comp_channel NAME");
    struct ibv_device** list = ibv_get_device_list(NULL);
    CHECK(list != NULL, "ibv_get_device_list");
    struct ibv_device* dev = NULL;
    for (int i = 0; list[i]; i++)
        if (!strcmp(ibv_get_device_name(list[i]), argv[1])) dev = list[i];
    CHECK(dev != NULL, "no device %s", argv[1]);
    struct ibv_context* ctx = ibv_open_device(dev);
    CHECK(ctx != NULL, "ibv_open_device");

    /* Before any CQ: the fd is a descriptor the program may use. */
    struct ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
    CHECK(ch != NULL, "ibv_create_comp_channel");
    const int fd = ch->fd;
    const int fl = fcntl(fd, F_GETFL);
    CHECK(fl >= 0, "fcntl(F_GETFL) on the channel fd %d", fd);
    CHECK(fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0, "fcntl(F_SETFL, O_NONBLOCK)");
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK(poll(&p, 1, 0) == 0, "poll says nothing pending (revents 0x%x)", p.revents);
    char b;
    CHECK(read(fd, &b, 1) == -1 && errno == EAGAIN, "read of an empty channel is EAGAIN");
    printf("channel fd valid nonblock=1 poll=0 read=EAGAIN ok\n");

    struct ibv_pd* pd = ibv_alloc_pd(ctx);
    CHECK(pd != NULL, "ibv_alloc_pd");
    struct ibv_cq* cq = ibv_create_cq(ctx, 8, NULL, ch, 0);
    CHECK(cq != NULL, "ibv_create_cq on the channel");
    CHECK(ch->fd == fd, "the channel keeps its fd (%d, now %d)", fd, ch->fd);

    /* One UD SEND between two QPs of the device; the receive raises the event. */
    static char buf[2][256];
    struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
    CHECK(mr != NULL, "ibv_reg_mr");
    struct ibv_qp* a = ud_qp(pd, cq);
    struct ibv_qp* r = ud_qp(pd, cq);
    struct ibv_sge rs = {.addr = (uintptr_t)buf[1], .length = sizeof buf[1], .lkey = mr->lkey};
    struct ibv_recv_wr rw = {.wr_id = 2, .sg_list = &rs, .num_sge = 1}, *bad_r;
    CHECK(ibv_post_recv(r, &rw, &bad_r) == 0, "ibv_post_recv");
    union ibv_gid gid;
    CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0, "ibv_query_gid");
    struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .hop_limit = 1}};
    struct ibv_ah* ah = ibv_create_ah(pd, &aa);
    CHECK(ah != NULL, "ibv_create_ah to our own GID");
    CHECK(ibv_req_notify_cq(cq, 0) == 0, "ibv_req_notify_cq");
    strcpy(buf[0], "event through the preloaded channel");
    struct ibv_sge ss = {.addr = (uintptr_t)buf[0], .length = 64, .lkey = mr->lkey};
    struct ibv_send_wr sw = {.wr_id = 1, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED,
                             .wr.ud = {.ah = ah, .remote_qpn = r->qp_num, .remote_qkey = 0x22222222}},
                       *bad_s;
    CHECK(ibv_post_send(a, &sw, &bad_s) == 0, "ibv_post_send");
    CHECK(poll(&p, 1, 10000) == 1 && (p.revents & POLLIN), "the channel fd turns readable");
    struct ibv_cq* ev_cq;
    void* ev_ctx;
    CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == cq, "ibv_get_cq_event returns the CQ");
    ibv_ack_cq_events(cq, 1);
    struct ibv_wc wc[2];
    int got = 0;
    for (long spins = 0; got < 2 && spins < 100000000L; spins++) {
        int n = ibv_poll_cq(cq, 2 - got, wc + got);
        CHECK(n >= 0, "ibv_poll_cq");
        got += n;
    }
    CHECK(got == 2 && wc[0].status == IBV_WC_SUCCESS && wc[1].status == IBV_WC_SUCCESS, "both completions");
    CHECK(!strcmp(buf[1] + 40, buf[0]), "the datagram after its GRH: '%s'", buf[1] + 40);
    printf("event cq=ok bytes=64 ok\n");

    CHECK(ibv_destroy_ah(ah) == 0 && ibv_destroy_qp(a) == 0 && ibv_destroy_qp(r) == 0, "destroy QPs");
    CHECK(ibv_destroy_cq(cq) == 0 && ibv_destroy_comp_channel(ch) == 0, "destroy CQ and channel");
    CHECK(ibv_dereg_mr(mr) == 0 && ibv_dealloc_pd(pd) == 0 && ibv_close_device(ctx) == 0, "close");
    ibv_free_device_list(list);
    printf("verbs_comp_channel: ok\n");
    return 0;
}
