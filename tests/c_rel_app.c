/* A C program on the reliability layer's C API (sdr_rel.h): a lossy simulated link (SDR_SIM_*
 * from ctest), one reliable message per scheme named on the command line, each verified
 * byte-exact. For auto the link's loss is the receiver's drop hint, and both sides must report
 * the code it picked. Sleeps in virtual time with sdr_sim_wait between deadlines. Exit 0 on success. */
#include <sdr.h>
#include <sdr_ext.h>
#include <sdr_mr.h>
#include <sdr_rel.h>
#include <sdr_sim.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, what)                                                                  \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "c_rel_app: %s: %s | %s\n", what, sdr_last_error(), sdr_rel_last_error()); \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

int main(int argc, char **argv)
{
    const uint32_t size = 5u << 20;
    struct sdr_dev_attr da = {4, 2};
    struct sdr_context *a = sdr_context_create("sim:0", &da), *b = sdr_context_create("sim:1", &da);
    CHECK(a && b, "sdr_context_create");
    struct sdr_qp_attr qa = {16, 28, 4, SDR_MTU_4096, 1, 1, 0};
    struct sdr_qp_attr_ext uc; /* SR and EC recover lost packets themselves: UC transport QPs */
    sdr_qp_attr_ext_init(&uc);
    uc.transport = SDR_TRANSPORT_UC;
    struct sdr_qp *qpa = sdr_qp_create_ext(a, &qa, &uc), *qpb = sdr_qp_create_ext(b, &qa, &uc);
    CHECK(qpa && qpb, "sdr_qp_create");
    size_t n;
    sdr_qp_info_size_get(qpa, &n);
    void *ia = malloc(n), *ib = malloc(n);
    sdr_qp_info_get(qpa, ia);
    sdr_qp_info_get(qpb, ib);
    CHECK(sdr_qp_connect(qpa, ib) == SDR_SUCCESS && sdr_qp_connect(qpb, ia) == SDR_SUCCESS, "sdr_qp_connect");
    uint8_t *src = malloc(size), *dst = malloc(size);
    struct sdr_mr *ms = sdr_mr_reg(a, src, size, SDR_ACCESS_REMOTE_WRITE);
    struct sdr_mr *md = sdr_mr_reg(b, dst, size, SDR_ACCESS_REMOTE_WRITE);
    uint32_t ks, kd;
    sdr_mr_lkey_get(ms, &ks);
    sdr_mr_lkey_get(md, &kd);

    for (int s = 1; s < argc; s++) {
        struct sdr_rel_attr ra;
        sdr_rel_attr_default(&ra);
        CHECK(sdr_rel_attr_parse_scheme(&ra, argv[s]) == SDR_SUCCESS, "sdr_rel_attr_parse_scheme");
        /* the link this run was given (ctest sets both) */
        ra.rtt_ms = getenv("SDR_SIM_RTT_MS") ? atof(getenv("SDR_SIM_RTT_MS")) : 25;
        ra.bw_gbps = getenv("SDR_SIM_BW_GBPS") ? atof(getenv("SDR_SIM_BW_GBPS")) : 100;
        ra.drop_hint = getenv("SDR_SIM_LOSS") ? atof(getenv("SDR_SIM_LOSS")) : 0;
        struct sdr_rel_endpoint *ea = sdr_rel_endpoint_create(a, qpa, &qa, &ra);
        struct sdr_rel_endpoint *eb = sdr_rel_endpoint_create(b, qpb, &qa, &ra);
        CHECK(ea && eb, "sdr_rel_endpoint_create");
        for (uint32_t i = 0; i < size; i++) src[i] = (uint8_t)((i + (uint32_t)s) * 2654435761u >> 24);
        memset(dst, 0, size);
        uint64_t sid, rid;
        CHECK(sdr_rel_recv(eb, dst, size, kd, &rid) == SDR_SUCCESS, "sdr_rel_recv");
        CHECK(sdr_rel_send(ea, src, size, ks, &sid) == SDR_SUCCESS, "sdr_rel_send");
        struct sdr_rel_stats ts, rs;
        int tx_done = 0, rx_done = 0;
        while (!(tx_done && rx_done)) {
            uint64_t da_ns, db_ns;
            sdr_rel_progress(ea, &da_ns);
            sdr_rel_progress(eb, &db_ns);
            if (!tx_done) tx_done = sdr_rel_send_poll(ea, sid, &ts) == SDR_SUCCESS;
            if (!rx_done) rx_done = sdr_rel_recv_poll(eb, rid, &rs) == SDR_SUCCESS;
            if (tx_done && rx_done) break;
            uint64_t t = da_ns < db_ns ? da_ns : db_ns, now = sdr_now_ns(a);
            CHECK(t != UINT64_MAX || sdr_sim_pending(a), "nothing left to wait for");
            sdr_sim_wait(a, t > now ? t : now + 1);
        }
        CHECK(ts.ok && rs.ok, ts.ok ? rs.error : ts.error);
        CHECK(memcmp(src, dst, size) == 0, "payload differs");
        CHECK(ts.scheme == rs.scheme && ts.k == rs.k && ts.m == rs.m && rs.scheme >= SDR_REL_SR &&
                  rs.scheme <= SDR_REL_EC_MDS && (ra.scheme == SDR_REL_AUTO || rs.scheme == ra.scheme),
              "the two sides report different codes");
        struct sdr_rel_path path;
        CHECK(sdr_rel_path_get(eb, &path) == SDR_SUCCESS && path.samples > 0, "sdr_rel_path_get");
        static const char *names[] = {"", "sr", "sr-nack", "ec-xor", "ec-mds", "auto"};
        printf("%s: %s(%u,%u), %u chunks in %.3f ms, %u retransmitted, %u decoded, %u fallbacks; receiver's path: "
               "RTT %.2f ms, %.0f Gbit/s, drop %.2g from %llu chunks\n",
               argv[s], names[rs.scheme], rs.k, rs.m, ts.chunks, (ts.done_ns - ts.post_ns) / 1e6,
               ts.retransmitted_chunks, rs.decoded_chunks, rs.fallbacks, path.rtt_ms, path.bw_gbps, path.drop,
               (unsigned long long)path.samples);
        sdr_rel_endpoint_destroy(ea);
        sdr_rel_endpoint_destroy(eb);
    }
    uint64_t bogus;
    CHECK(sdr_rel_send(NULL, src, 1, ks, &bogus) == SDR_ERROR && strstr(sdr_rel_last_error(), "NULL"), "NULL endpoint");
    sdr_mr_dereg(ms);
    sdr_mr_dereg(md);
    sdr_qp_destroy(qpa);
    sdr_qp_destroy(qpb);
    sdr_context_destroy(a);
    sdr_context_destroy(b);
    free(ia);
    free(ib);
    free(src);
    free(dst);
    return 0;
}
