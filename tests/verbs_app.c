/* A verbs program that knows only <infiniband/verbs.h> and links only -libverbs: it opens the
 * emulated device NAME through Debian's libibverbs, prints what the queries answer (the test
 * compares them with the interface), and checks the control path of the first slice: PD, MRs
 * with unique keys and checked access flags, a CQ on a completion channel whose fd blocks, and
 * EOPNOTSUPP for raw packet QPs (the model has RC, UC and UD; tests/verbs_loop.c drives them).
 * Exit 0 after "verbs_app: ok".
 *
 *   verbs_app NAME
 */
#define _DEFAULT_SOURCE /* be64toh */
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CHECK(cond, ...)                                            \
    do {                                                            \
        if (!(cond)) {                                              \
            fprintf(stderr, "verbs_app: FAIL %s: ", #cond);         \
            fprintf(stderr, __VA_ARGS__);                           \
            fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno)); \
            exit(1);                                                \
        }                                                           \
    } while (0)

static struct ibv_context* open_by_name(const char* name)
{
    int n = 0;
    struct ibv_device** list = ibv_get_device_list(&n);
    CHECK(list != NULL, "ibv_get_device_list");
    struct ibv_context* ctx = NULL;
    for (int i = 0; i < n; ++i)
        if (strcmp(ibv_get_device_name(list[i]), name) == 0) ctx = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    CHECK(ctx != NULL, "device %s not found or not opened", name);
    return ctx;
}

int main(int argc, char** argv)
{
    CHECK(argc == 2, "usage: verbs_app NAME");
    struct ibv_context* ctx = open_by_name(argv[1]);

    struct ibv_device_attr dev;
    CHECK(ibv_query_device(ctx, &dev) == 0, "ibv_query_device");
    uint64_t guid = be64toh(dev.node_guid);
    printf("node_guid=%04x:%04x:%04x:%04x\n", (unsigned)(guid >> 48), (unsigned)(guid >> 32) & 0xffff,
           (unsigned)(guid >> 16) & 0xffff, (unsigned)guid & 0xffff);
    printf("phys_port_cnt=%u max_mr=%d max_cqe=%d atomic_cap=%d\n", dev.phys_port_cnt, dev.max_mr, dev.max_cqe,
           (int)dev.atomic_cap);
    CHECK(dev.node_guid == ibv_get_device_guid(ctx->device), "query_device and sysfs disagree on the GUID");

    struct ibv_port_attr port;
    CHECK(ibv_query_port(ctx, 1, &port) == 0, "ibv_query_port 1");
    printf("port_state=%s link_layer=%d active_mtu=%d max_mtu=%d gid_tbl_len=%d\n", ibv_port_state_str(port.state),
           port.link_layer, (int)port.active_mtu, (int)port.max_mtu, port.gid_tbl_len);
    CHECK(ibv_query_port(ctx, 2, &port) != 0, "port 2 must not exist");

    union ibv_gid gid;
    CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0, "ibv_query_gid 1/0");
    char text[INET6_ADDRSTRLEN];
    printf("gid0=%s\n", inet_ntop(AF_INET6, gid.raw, text, sizeof text));
    uint16_t pkey = 0;
    CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0, "ibv_query_pkey 1/0");
    printf("pkey0=0x%04x\n", ntohs(pkey));

    struct ibv_pd* pd = ibv_alloc_pd(ctx);
    CHECK(pd != NULL, "ibv_alloc_pd");
    static char buf[2][65536];
    struct ibv_mr* mr0 = ibv_reg_mr(pd, buf[0], sizeof buf[0], IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    struct ibv_mr* mr1 = ibv_reg_mr(pd, buf[1], sizeof buf[1], IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    CHECK(mr0 && mr1, "ibv_reg_mr");
    CHECK(mr0->lkey != mr1->lkey && mr0->rkey != mr1->rkey, "keys must be unique: %#x %#x", mr0->lkey, mr1->lkey);
    CHECK(mr0->addr == buf[0] && mr0->length == sizeof buf[0], "MR bounds");
    printf("mr_keys=%#x,%#x\n", mr0->lkey, mr1->lkey);
    errno = 0;
    CHECK(ibv_reg_mr(pd, buf[1], 64, IBV_ACCESS_REMOTE_WRITE) == NULL && errno == EINVAL,
          "remote write without local write must be EINVAL");
    CHECK(ibv_dealloc_pd(pd) == EBUSY, "a PD with regions must be busy");

    struct ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
    CHECK(ch != NULL, "ibv_create_comp_channel");
    struct ibv_cq* cq = ibv_create_cq(ctx, 64, NULL, ch, 0);
    CHECK(cq != NULL, "ibv_create_cq with a channel");
    struct ibv_cq* cq2 = ibv_create_cq(ctx, 16, NULL, ch, 0);
    CHECK(cq2 != NULL, "second CQ on the same channel");
    errno = 0;
    CHECK(ibv_create_cq(ctx, 0, NULL, NULL, 0) == NULL && errno == EINVAL, "a CQ of 0 entries must be EINVAL");
    CHECK(ibv_req_notify_cq(cq, 0) == 0, "ibv_req_notify_cq");
    struct stat sb;
    CHECK(fstat(ch->fd, &sb) == 0 && S_ISFIFO(sb.st_mode), "the channel fd must be a real pipe");
    /* No completion exists yet: a blocking ibv_get_cq_event would wait; non-blocking says so. */
    CHECK(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0, "O_NONBLOCK on the channel");
    struct ibv_cq* ev_cq = NULL;
    void* ev_ctx = NULL;
    errno = 0;
    CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == -1 && errno == EAGAIN, "no event may be pending");
    printf("channel=blocks\n");

    struct ibv_qp_init_attr qpa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RAW_PACKET,
                                   .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
    errno = 0;
    CHECK(ibv_create_qp(pd, &qpa) == NULL && errno == EOPNOTSUPP, "ibv_create_qp of a raw packet QP must be EOPNOTSUPP");
    printf("create_qp=EOPNOTSUPP\n");

    CHECK(ibv_destroy_cq(cq) == 0 && ibv_destroy_cq(cq2) == 0, "ibv_destroy_cq");
    CHECK(ibv_destroy_comp_channel(ch) == 0, "ibv_destroy_comp_channel");
    CHECK(ibv_dereg_mr(mr0) == 0 && ibv_dereg_mr(mr1) == 0, "ibv_dereg_mr");
    CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
    CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
    printf("verbs_app: ok\n");
    return 0;
}
