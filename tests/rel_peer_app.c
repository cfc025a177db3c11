/* One side of a reliable transfer through the reliability layer's C API (sdr_rel.h) between two
 * processes, on any device (raw:, verbs:): the QP info goes over sdr_oob.h's TCP bootstrap, then
 * one 5 MiB message per scheme named on the command line, the receiver checking every byte.
 * The loss comes from the device (SDR_RT_LOSS on both sides: data one way, control the other).
 *
 *   rel_peer_app server DEVICE PORT SCHEME...
 *   rel_peer_app client DEVICE PORT SERVER_IP SCHEME...
 *
 * Prints one line per scheme ("SCHEME: delivered byte-exact ..." on the server); exit 0 when
 * every message was delivered byte-exact, 1 otherwise. */
#include <sdr.h>
#include <sdr_mr.h>
#include <sdr_oob.h>
#include <sdr_rel.h>
#include <sdr_sim.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, what)                                                                              \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "rel_peer_app %s: %s: %s | %s\n", role, what, sdr_last_error(), sdr_rel_last_error()); \
            return 1;                                                                                  \
        }                                                                                              \
    } while (0)

enum { kSize = 5u << 20, kTimeoutMs = 20000 };
static const uint64_t kMessageNs = 20000000000ull; /* a message that takes longer than 20 s failed */

static uint8_t pattern(uint32_t i, int scheme) { return (uint8_t)((i + (uint32_t)scheme) * 2654435761u >> 24); }

/* One byte over the bootstrap connection: 1 the receive is posted, 2 this side is over. */
static int sync_send(struct sdr_oob *o, uint8_t v) { return sdr_oob_send(o, &v, 1); }
static int sync_recv(struct sdr_oob *o, uint8_t want)
{
    uint8_t v = 0;
    size_t n = 0;
    return sdr_oob_recv(o, &v, 1, &n, kTimeoutMs) == SDR_SUCCESS && n == 1 && v == want;
}

int main(int argc, char **argv)
{
    const char *role = argc > 1 ? argv[1] : "?";
    const int server = strcmp(role, "server") == 0;
    const int first_scheme = server ? 4 : 5;
    if ((!server && strcmp(role, "client") != 0) || argc <= first_scheme) {
        fprintf(stderr, "usage: rel_peer_app server DEVICE PORT SCHEME... | client DEVICE PORT SERVER_IP SCHEME...\n");
        return 2;
    }
    const uint16_t port = (uint16_t)atoi(argv[3]);
    struct sdr_dev_attr da = {4, 2};
    struct sdr_context *ctx = sdr_context_create(argv[2], &da);
    CHECK(ctx, "sdr_context_create");
    struct sdr_qp_attr qa = {16, 28, 4, SDR_MTU_4096, 1, 1, 0};
    struct sdr_qp *qp = sdr_qp_create(ctx, &qa);
    CHECK(qp, "sdr_qp_create");
    struct sdr_oob *oob = server ? sdr_oob_listen(NULL, port, kTimeoutMs) : sdr_oob_connect(argv[4], port, kTimeoutMs);
    CHECK(oob, "bootstrap connection");
    size_t n, got;
    sdr_qp_info_size_get(qp, &n);
    void *mine = malloc(n), *theirs = malloc(n);
    sdr_qp_info_get(qp, mine);
    CHECK(sdr_oob_exchange(oob, mine, n, theirs, n, &got, kTimeoutMs) == SDR_SUCCESS && got == n, "exchanging QP info");
    CHECK(sdr_qp_connect(qp, theirs) == SDR_SUCCESS, "sdr_qp_connect");
    uint8_t *buf = malloc(kSize);
    struct sdr_mr *mr = sdr_mr_reg(ctx, buf, kSize, SDR_ACCESS_REMOTE_WRITE);
    CHECK(buf && mr, "sdr_mr_reg");
    uint32_t lkey;
    sdr_mr_lkey_get(mr, &lkey);

    for (int s = first_scheme; s < argc; s++) {
        struct sdr_rel_attr ra;
        sdr_rel_attr_default(&ra);
        CHECK(sdr_rel_attr_parse_scheme(&ra, argv[s]) == SDR_SUCCESS, "sdr_rel_attr_parse_scheme");
        ra.rtt_ms = 1;  /* two namespaces on one machine: well under a millisecond, scheduling aside */
        ra.bw_gbps = 10;
        ra.drop_hint = getenv("SDR_RT_LOSS") ? atof(getenv("SDR_RT_LOSS")) : 0;
        /* Each probe and re-NACK, every few ms of wall time, counts as a round: a peer that a
         * loaded machine (ASan, other jobs) stalls for 40 ms spends 16 rounds on the wall clock,
         * not on the link. The bound is not what this program checks, so it is the largest. */
        ra.max_rounds = 1000;
        struct sdr_rel_endpoint *ep = sdr_rel_endpoint_create(ctx, qp, &qa, &ra);
        CHECK(ep, "sdr_rel_endpoint_create");
        uint64_t id;
        if (server) {
            memset(buf, 0, kSize);
            CHECK(sdr_rel_recv(ep, buf, kSize, lkey, &id) == SDR_SUCCESS, "sdr_rel_recv");
            CHECK(sync_send(oob, 1) == SDR_SUCCESS, "telling the client the receive is posted");
        } else {
            for (uint32_t i = 0; i < kSize; i++) buf[i] = pattern(i, s - first_scheme);
            CHECK(sync_recv(oob, 1), "waiting for the server's receive");
            CHECK(sdr_rel_send(ep, buf, kSize, lkey, &id) == SDR_SUCCESS, "sdr_rel_send");
        }
        struct sdr_rel_stats st;
        const uint64_t t0 = sdr_now_ns(ctx);
        for (;;) {
            uint64_t deadline;
            sdr_rel_progress(ep, &deadline);
            if ((server ? sdr_rel_recv_poll(ep, id, &st) : sdr_rel_send_poll(ep, id, &st)) == SDR_SUCCESS) break;
            const uint64_t now = sdr_now_ns(ctx);
            CHECK(now - t0 < kMessageNs, "the message did not end within 20 s");
            /* sleeps until the deadline, a chunk landing or a control datagram, whichever first */
            sdr_sim_wait(ctx, deadline < t0 + kMessageNs ? deadline : t0 + kMessageNs);
        }
        CHECK(st.ok, st.error);
        /* Over on this side; the peer may still need this endpoint (the receiver's last ACK
         * lost: the sender probes again), so it keeps going until the peer is over too. Nothing
         * wakes sdr_sim_wait for the bootstrap socket: it is looked at every millisecond. */
        CHECK(sync_send(oob, 2) == SDR_SUCCESS, "telling the peer the message is over");
        for (;;) {
            uint64_t deadline;
            sdr_rel_progress(ep, &deadline);
            uint8_t v = 0;
            size_t len = 0;
            const int rc = sdr_oob_recv(oob, &v, 1, &len, 0);
            if (rc == SDR_SUCCESS && len == 1 && v == 2) break;
            CHECK(rc == SDR_RETRY, "waiting for the peer to finish");
            const uint64_t now = sdr_now_ns(ctx);
            CHECK(now - t0 < kMessageNs, "the peer did not finish within 20 s");
            sdr_sim_wait(ctx, deadline < now + 1000000 ? deadline : now + 1000000);
        }
        if (server) {
            uint32_t bad = 0;
            uint32_t first_bad = kSize;
            for (uint32_t i = 0; i < kSize; i++)
                if (buf[i] != pattern(i, s - first_scheme)) bad++, first_bad = first_bad < i ? first_bad : i;
            if (bad) fprintf(stderr, "rel_peer_app server: %s: %u bytes differ, the first at %u\n", argv[s], bad, first_bad);
            CHECK(bad == 0, "payload differs");
            printf("%s: delivered byte-exact, %u chunks in %.3f ms, %u decoded, %u fallbacks\n", argv[s], st.chunks,
                   (st.done_ns - st.post_ns) / 1e6, st.decoded_chunks, st.fallbacks);
        } else {
            printf("%s: acknowledged, %u chunks in %.3f ms, %u retransmitted\n", argv[s], st.chunks,
                   (st.done_ns - st.post_ns) / 1e6, st.retransmitted_chunks);
        }
        fflush(stdout);
        sdr_rel_endpoint_destroy(ep);
    }
    sdr_mr_dereg(mr);
    sdr_qp_destroy(qp);
    sdr_oob_close(oob);
    sdr_context_destroy(ctx);
    free(buf);
    free(mine);
    free(theirs);
    return 0;
}
