/* A verbs program (only <infiniband/verbs.h>, -libverbs) for a lossy link between two hosts: the
 * server listens on a TCP port, the client connects; they swap QP number, PSN, GID, buffer
 * address and rkey over it, as ibv_rc_pingpong does, then move data one way (client -> server).
 * Run it with the emulated NIC's SDR_RT_LOSS set on both sides.
 *
 *   rc: 64 RDMA WRITEs of 64 KiB (4 MiB), then 16 SENDs of 64 KiB (1 MiB), at most 16 in
 *       flight; every send must complete with success. RC's retransmission makes the server's
 *       buffer equal the client's, byte for byte, and RC's order makes the WRITEs land before
 *       the SENDs are received. The server prints
 *       "lossy rc write_bytes=4194304 send_bytes=1048576 ok".
 *   uc: 64 SENDs of 64 KiB, each starting with its 8-byte sequence number, the rest a pattern
 *       seeded by it. A UC message that loses a packet is lost whole (its receive is used by a
 *       later message); every one that completes must have its full length and exact bytes,
 *       and the sequence numbers must increase. After the client says (over TCP) that it sent
 *       them all, the server moves its QP to ERR: the receives left flush. The server prints
 *       "lossy uc messages=64 whole=N lost=M ok" (N + M = 64, both > 0 at 1 % loss).
 *   atomic: 1000 RC FETCH ADDs of i + 1 (i = 0..999) on one word of the server, 16 in flight;
 *       one QP's atomics run in order, so each must return the sum of the adds before it (a
 *       retry after a lost ATOMIC ACK is answered, not executed again: a second execution would
 *       show in every later value). Then a COMPARE SWAP with a wrong compare value (no swap) and
 *       one with the sum (swaps in 0xC0FFEE). The server checks the word and prints
 *       "lossy atomic fetch_adds=1000 sum=500500 cmp_swaps=2 ok".
 *
 * Exit 0 on success.
 *
 *   verbs_lossy DEVICE rc|uc|atomic PORT            (server)
 *   verbs_lossy DEVICE rc|uc|atomic PORT SERVER_IP  (client)
 */
#define _DEFAULT_SOURCE
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define VERBS_PROG "verbs_lossy"
#include "verbs_check.h"

enum {
    kMsg = 64 * 1024,
    kWrites = 64,
    kSends = 16,
    kUcMsgs = 64,
    kAtomics = 1000,
    kDepth = 16,
    kBuf = (kWrites + kSends) * kMsg, /* >= kUcMsgs * kMsg */
};

struct peer {
    uint32_t qpn, psn, rkey, pad;
    uint64_t addr;
    uint8_t gid[16];
};

static void fill(uint8_t* p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

static void io_all(int fd, void* p, size_t n, int out)
{
    for (size_t done = 0; done < n;) {
        ssize_t k = out ? write(fd, (char*)p + done, n - done) : read(fd, (char*)p + done, n - done);
        CHECK(k > 0, "TCP %s", out ? "write" : "read");
        done += (size_t)k;
    }
}

static int tcp_server(int port)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    CHECK(ls >= 0, "socket");
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    CHECK(bind(ls, (struct sockaddr*)&a, sizeof a) == 0 && listen(ls, 1) == 0, "bind/listen on %d", port);
    int fd = accept(ls, NULL, NULL);
    CHECK(fd >= 0, "accept");
    close(ls);
    return fd;
}

static int tcp_client(const char* ip, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    CHECK(fd >= 0 && inet_pton(AF_INET, ip, &a.sin_addr) == 1, "address %s", ip);
    CHECK(connect(fd, (struct sockaddr*)&a, sizeof a) == 0, "connect to %s:%d", ip, port);
    return fd;
}

static struct ibv_wc poll_one(struct ibv_cq* cq, const char* what)
{
    struct ibv_wc wc;
    int n;
    long spins = 0;
    while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) CHECK(++spins < 4000000000L, "no completion for %s", what);
    CHECK(n == 1, "ibv_poll_cq for %s returned %d", what, n);
    return wc;
}

int main(int argc, char** argv)
{
    CHECK(argc == 4 || argc == 5, "usage: verbs_lossy DEVICE rc|uc|atomic PORT [SERVER_IP]");
    const int atomic = strcmp(argv[2], "atomic") == 0, rc = atomic || strcmp(argv[2], "rc") == 0, server = argc == 4;
    CHECK(rc || strcmp(argv[2], "uc") == 0, "mode %s", argv[2]);
    const int port = atoi(argv[3]);

    struct ibv_context* ctx = NULL;
    int ndev = 0;
    struct ibv_device** list = ibv_get_device_list(&ndev);
    CHECK(list != NULL, "ibv_get_device_list");
    for (int i = 0; i < ndev; ++i)
        if (strcmp(ibv_get_device_name(list[i]), argv[1]) == 0) ctx = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    CHECK(ctx != NULL, "device %s", argv[1]);
    struct ibv_port_attr pa;
    CHECK(ibv_query_port(ctx, 1, &pa) == 0, "ibv_query_port");
    union ibv_gid gid;
    CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0, "ibv_query_gid");

    struct ibv_pd* pd = ibv_alloc_pd(ctx);
    uint8_t* buf = calloc(1, kBuf);
    CHECK(pd && buf, "pd, buffer");
    if (!server) fill(buf, kBuf, 4242);
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | (atomic ? IBV_ACCESS_REMOTE_ATOMIC : 0);
    struct ibv_mr* mr = ibv_reg_mr(pd, buf, kBuf, access);
    struct ibv_cq* cq = ibv_create_cq(ctx, 4 * kUcMsgs, NULL, NULL, 0);
    CHECK(mr && cq, "mr, cq");
    struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = rc ? IBV_QPT_RC : IBV_QPT_UC,
                                  .cap = {.max_send_wr = kDepth, .max_recv_wr = kUcMsgs, .max_send_sge = 1,
                                          .max_recv_sge = 1}};
    struct ibv_qp* qp = ibv_create_qp(pd, &ia);
    CHECK(qp != NULL, "ibv_create_qp");
    struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access};
    CHECK(ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0, "INIT");

    /* The server's receives are posted before the client learns where to send. */
    const int nrecv = atomic ? 0 : rc ? kSends : kUcMsgs;
    if (server)
        for (int i = 0; i < nrecv; i++) {
            const size_t off = rc ? (size_t)(kWrites + i) * kMsg : (size_t)i * kMsg;
            struct ibv_sge s = {(uintptr_t)buf + off, kMsg, mr->lkey};
            struct ibv_recv_wr r = {.wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1}, *bad;
            CHECK(ibv_post_recv(qp, &r, &bad) == 0, "post_recv %d", i);
        }

    int fd = server ? tcp_server(port) : tcp_client(argv[4], port);
    struct peer me = {.qpn = qp->qp_num, .psn = server ? 0x1234 : 0x5678, .rkey = mr->rkey,
                      .addr = (uintptr_t)buf}, them;
    memcpy(me.gid, gid.raw, 16);
    io_all(fd, &me, sizeof me, 1);
    io_all(fd, &them, sizeof them, 0);

    struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTR, .path_mtu = pa.active_mtu, .dest_qp_num = them.qpn,
                            .rq_psn = them.psn, .max_dest_rd_atomic = atomic ? kDepth : 1, .min_rnr_timer = 12};
    r.ah_attr.is_global = 1;
    r.ah_attr.port_num = 1;
    r.ah_attr.grh.hop_limit = 1;
    memcpy(r.ah_attr.grh.dgid.raw, them.gid, 16);
    int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (rc) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    CHECK(ibv_modify_qp(qp, &r, mask) == 0, "RTR");
    /* timeout 14: 4.096 us * 2^14 = 67 ms; retry_cnt 7. The veth round trip is tens of
     * microseconds, but on a loaded 2-core machine frames over AF_XDP took 50-80 ms from one
     * end's capture to the other's, and 16.8 ms timeouts ran out of retries on a link that
     * was only slow. */
    struct ibv_qp_attr t = {.qp_state = IBV_QPS_RTS, .sq_psn = me.psn, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
                            .max_rd_atomic = atomic ? kDepth : 1};
    mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (rc) mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    CHECK(ibv_modify_qp(qp, &t, mask) == 0, "RTS");

    if (!server && atomic) {
        uint64_t* res = (uint64_t*)buf;
        uint64_t sum = 0;
        int posted = 0, done = 0;
        const int total = kAtomics + 2;
        while (done < total) {
            while (posted < total && posted - done < kDepth) {
                struct ibv_sge s = {(uintptr_t)&res[posted], 8, mr->lkey};
                struct ibv_send_wr w = {.wr_id = (uint64_t)posted, .sg_list = &s, .num_sge = 1,
                                        .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IBV_SEND_SIGNALED}, *bad;
                w.wr.atomic.remote_addr = them.addr;
                w.wr.atomic.rkey = them.rkey;
                w.wr.atomic.compare_add = (uint64_t)posted + 1;
                if (posted >= kAtomics) { /* after all adds: a wrong compare, then the sum */
                    w.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
                    w.wr.atomic.compare_add = posted == kAtomics ? 12345 : (uint64_t)kAtomics * (kAtomics + 1) / 2;
                    w.wr.atomic.swap = 0xC0FFEE;
                }
                CHECK(ibv_post_send(qp, &w, &bad) == 0, "post_send atomic %d", posted);
                posted++;
            }
            struct ibv_wc wc = poll_one(cq, "an atomic");
            const enum ibv_wc_opcode op = done < kAtomics ? IBV_WC_FETCH_ADD : IBV_WC_COMP_SWAP;
            CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)done && wc.opcode == op && wc.byte_len == 8,
                  "atomic %d: wr_id %" PRIu64 " status %s opcode %d byte_len %u", done, wc.wr_id,
                  ibv_wc_status_str(wc.status), (int)wc.opcode, wc.byte_len);
            CHECK(res[done] == sum, "atomic %d returned %" PRIu64 ", want %" PRIu64, done, res[done], sum);
            if (done < kAtomics) sum += (uint64_t)done + 1;
            done++;
        }
        char c = 'd';
        io_all(fd, &c, 1, 1);
        io_all(fd, &c, 1, 0);
        printf("verbs_lossy client atomic sent=%d sum=%" PRIu64 " ok\n", total, sum);
        close(fd);
        ibv_destroy_qp(qp);
        ibv_destroy_cq(cq);
        ibv_dereg_mr(mr);
        ibv_dealloc_pd(pd);
        ibv_close_device(ctx);
        free(buf);
        return 0;
    }
    if (!server) {
        const int total = rc ? kWrites + kSends : kUcMsgs;
        int posted = 0, done = 0;
        while (done < total) {
            while (posted < total && posted - done < kDepth) {
                const int write = rc && posted < kWrites;
                uint8_t* p = buf + (size_t)posted * kMsg;
                if (!rc) {
                    fill(p, kMsg, 1000u + (uint32_t)posted);
                    memcpy(p, &(uint64_t){(uint64_t)posted}, 8);
                }
                struct ibv_sge s = {(uintptr_t)p, kMsg, mr->lkey};
                struct ibv_send_wr w = {.wr_id = (uint64_t)posted, .sg_list = &s, .num_sge = 1,
                                        .opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_SEND,
                                        .send_flags = IBV_SEND_SIGNALED}, *bad;
                w.wr.rdma.remote_addr = them.addr + (uint64_t)posted * kMsg;
                w.wr.rdma.rkey = them.rkey;
                CHECK(ibv_post_send(qp, &w, &bad) == 0, "post_send %d", posted);
                posted++;
            }
            struct ibv_wc wc = poll_one(cq, "a send");
            CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)done, "send %d: wr_id %" PRIu64 " status %s",
                  done, wc.wr_id, ibv_wc_status_str(wc.status));
            done++;
        }
        char c = 'd';
        io_all(fd, &c, 1, 1); /* all sent (RC: all acknowledged) */
        io_all(fd, &c, 1, 0); /* the server checked: it may go */
        printf("verbs_lossy client %s sent=%d ok\n", argv[2], total);
        close(fd);
        ibv_destroy_qp(qp);
        ibv_destroy_cq(cq);
        ibv_dereg_mr(mr);
        ibv_dealloc_pd(pd);
        ibv_close_device(ctx);
        free(buf);
        return 0;
    }

    uint8_t* want = malloc(kBuf);
    CHECK(want != NULL, "buffer");
    char c;
    if (atomic) {
        io_all(fd, &c, 1, 0); /* every atomic completed */
        uint64_t word;
        memcpy(&word, buf, 8);
        CHECK(word == 0xC0FFEE, "the word is %#" PRIx64 ", want 0xc0ffee (the sum swapped)", word);
        printf("lossy atomic fetch_adds=%d sum=%d cmp_swaps=2 ok\n", kAtomics, kAtomics * (kAtomics + 1) / 2);
    } else if (rc) {
        fill(want, kBuf, 4242);
        for (int i = 0; i < kSends; i++) {
            struct ibv_wc wc = poll_one(cq, "a receive");
            CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)i && wc.byte_len == kMsg,
                  "receive %d: wr_id %" PRIu64 " status %s byte_len %u", i, wc.wr_id, ibv_wc_status_str(wc.status),
                  wc.byte_len);
        }
        io_all(fd, &c, 1, 0);
        for (size_t i = 0; i < kBuf; i++)
            CHECK(buf[i] == want[i], "byte %zu: %#x, want %#x", i, buf[i], want[i]);
        printf("lossy rc write_bytes=%d send_bytes=%d ok\n", kWrites * kMsg, kSends * kMsg);
    } else {
        io_all(fd, &c, 1, 0); /* the client sent everything */
        struct ibv_qp_attr e = {.qp_state = IBV_QPS_ERR};
        CHECK(ibv_modify_qp(qp, &e, IBV_QP_STATE) == 0, "to ERR");
        int whole = 0, flushed = 0;
        int64_t last = -1;
        while (whole + flushed < kUcMsgs) {
            struct ibv_wc wc = poll_one(cq, "a receive");
            if (wc.status == IBV_WC_WR_FLUSH_ERR) {
                flushed++;
                continue;
            }
            CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == kMsg, "receive wr_id %" PRIu64 ": status %s byte_len %u",
                  wc.wr_id, ibv_wc_status_str(wc.status), wc.byte_len);
            const uint8_t* p = buf + wc.wr_id * kMsg;
            uint64_t seq;
            memcpy(&seq, p, 8);
            CHECK((int64_t)seq > last && seq < kUcMsgs, "sequence %" PRIu64 " after %" PRId64, seq, last);
            fill(want, kMsg, 1000u + (uint32_t)seq);
            CHECK(memcmp(p + 8, want + 8, kMsg - 8) == 0, "message %" PRIu64 " differs", seq);
            last = (int64_t)seq;
            whole++;
        }
        CHECK(whole > 0 && flushed > 0, "whole %d lost %d", whole, flushed);
        printf("lossy uc messages=%d whole=%d lost=%d ok\n", kUcMsgs, whole, flushed);
    }
    io_all(fd, &c, 1, 1);
    close(fd);
    free(want);
    ibv_destroy_qp(qp);
    ibv_destroy_cq(cq);
    ibv_dereg_mr(mr);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    free(buf);
    return 0;
}
