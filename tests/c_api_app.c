/* An application written only against the published C API (sdr.h, sdr_mr.h), compiled as C:
 * it must run on the simulator unchanged. Two NICs of one process share the virtual clock,
 * and the polling calls advance it. Exit 0 when every chunk arrived byte-exact with the
 * immediate; the link comes from SDR_SIM_* variables set by ctest. */
#include <sdr.h>
#include <sdr_mr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, what)                                                  \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "c_api_app: %s: %s\n", what, sdr_last_error()); \
            return 1;                                                      \
        }                                                                  \
    } while (0)

int main(void)
{
    const uint32_t size = 3u << 20, chunk_log = 16;
    struct sdr_dev_attr da = {8, 2};
    struct sdr_context *a = sdr_context_create("sim:0", &da), *b = sdr_context_create("sim:1", &da);
    CHECK(a && b, "sdr_context_create");
    struct sdr_qp_attr qa = {chunk_log, 28, 4, SDR_MTU_4096, 1, 1, 0};
    struct sdr_qp *qa_ = sdr_qp_create(a, &qa), *qb = sdr_qp_create(b, &qa);
    CHECK(qa_ && qb, "sdr_qp_create");
    size_t n;
    CHECK(sdr_qp_info_size_get(qa_, &n) == SDR_SUCCESS, "sdr_qp_info_size_get");
    void *ia = malloc(n), *ib = malloc(n);
    CHECK(sdr_qp_info_get(qa_, ia) == SDR_SUCCESS && sdr_qp_info_get(qb, ib) == SDR_SUCCESS, "sdr_qp_info_get");
    CHECK(sdr_qp_connect(qa_, ib) == SDR_SUCCESS && sdr_qp_connect(qb, ia) == SDR_SUCCESS, "sdr_qp_connect");

    uint8_t *src = malloc(size), *dst = calloc(size, 1);
    for (uint32_t i = 0; i < size; i++) src[i] = (uint8_t)(i * 2654435761u >> 24);
    struct sdr_mr *ms = sdr_mr_reg(a, src, size, SDR_ACCESS_REMOTE_WRITE);
    struct sdr_mr *md = sdr_mr_reg(b, dst, size, SDR_ACCESS_REMOTE_WRITE);
    CHECK(ms && md, "sdr_mr_reg");
    uint32_t ks, kd;
    sdr_mr_lkey_get(ms, &ks);
    sdr_mr_lkey_get(md, &kd);

    struct sdr_recv_wr rw = {size, kd, (uint64_t)(uintptr_t)dst};
    struct sdr_recv_handle *rh;
    CHECK(sdr_recv_post(qb, &rw, &rh) == SDR_SUCCESS, "sdr_recv_post");
    struct sdr_send_wr sw = {SDR_WR_WRITE_WITH_IMM, 0xFEEDF00Du, size, ks, (uint64_t)(uintptr_t)src, 0};
    struct sdr_send_handle *sh;
    CHECK(sdr_send_post(qa_, &sw, &sh) == SDR_SUCCESS, "sdr_send_post");

    int done = 0;
    struct sdr_send_status st;
    while (!done) CHECK(sdr_send_poll(sh, &done, &st) != SDR_ERROR, "sdr_send_poll");
    const uint32_t nchunks = size >> chunk_log;
    for (long polls = 0;; polls++) {
        uint8_t *bm;
        size_t nb;
        CHECK(sdr_recv_bitmap_get(rh, &bm, &nb) == SDR_SUCCESS, "sdr_recv_bitmap_get");
        CHECK(nb == (nchunks + 7) / 8, "bitmap size");
        uint32_t set = 0;
        for (size_t i = 0; i < nb; i++) set += (uint32_t)__builtin_popcount(bm[i]);
        if (set == nchunks) break;
        CHECK(polls < 10000000, "bitmap never filled");
    }
    uint32_t imm = 0;
    int rc;
    while ((rc = sdr_recv_imm_get(rh, &imm)) == SDR_RETRY) {}
    CHECK(rc == SDR_SUCCESS && imm == 0xFEEDF00Du, "sdr_recv_imm_get");
    CHECK(memcmp(src, dst, size) == 0, "payload differs");
    CHECK(sdr_recv_complete(rh) == SDR_SUCCESS, "sdr_recv_complete");
    sdr_mr_dereg(ms);
    sdr_mr_dereg(md);
    sdr_qp_destroy(qa_);
    sdr_qp_destroy(qb);
    sdr_context_destroy(a);
    sdr_context_destroy(b);
    free(ia);
    free(ib);
    free(src);
    free(dst);
    printf("c_api_app: %u bytes, %u chunks, immediate 0x%08x: ok\n", size, nchunks, imm);
    return 0;
}
