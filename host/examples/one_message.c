/* one_message.c: one SDR message from NIC sim:0 to NIC sim:1 of the simulator, no reliability
 * layer, no root. The receiver posts a buffer, the sender writes a buffer into it with
 * sdr_send_post, and the receiver checks that every chunk bit of its bitmap is set, that every
 * byte arrived and that the immediate came with them. sdr_sim_wait sleeps in virtual time
 * until something happens, so the 25 ms round trip costs no wall time.
 *
 * Build from an installed SDR: the CMakeLists.txt beside this file, or
 *   cc one_message.c $(pkg-config --cflags --libs sdr) -Wl,-rpath,$(pkg-config --variable=libdir sdr)
 * Exit status 0 when the message arrived whole and byte-exact. */
#include <sdr.h>
#include <sdr_mr.h>
#include <sdr_sim.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An SDR call failed: say which and why (sdr_last_error: the last failure's text). */
#define CHECK(ok, what)                                                       \
    do {                                                                      \
        if (!(ok)) {                                                          \
            fprintf(stderr, "one_message: %s: %s\n", what, sdr_last_error()); \
            return 1;                                                         \
        }                                                                     \
    } while (0)
/* Something else is wrong: no SDR call to blame. */
#define EXPECT(ok, what)                                  \
    do {                                                  \
        if (!(ok)) {                                      \
            fprintf(stderr, "one_message: %s\n", what);  \
            return 1;                                     \
        }                                                 \
    } while (0)

enum {
    kChunkLog = 16,       /* 64 KiB chunks: one bitmap bit each */
    kSize = 1234567,      /* not a whole number of chunks: 19 chunks, the last one partial */
    kImmediate = 0x5D12u, /* delivered with the message (SDR_WR_WRITE_WITH_IMM) */
};

/* Whole when each of the first nchunks bits is set: chunk i is bit i % 8 of byte i / 8. The NIC
 * writes the bitmap while we read it, so each byte is loaded with acquire: a set bit then also
 * publishes that chunk's bytes. */
static int bitmap_whole(const uint8_t *bitmap, uint32_t nchunks)
{
    for (uint32_t i = 0; i < nchunks; i++)
        if (!(__atomic_load_n(&bitmap[i / 8], __ATOMIC_ACQUIRE) >> (i % 8) & 1)) return 0;
    return 1;
}

int main(void)
{
    /* Every device needs dev_attr: num_channels 1..16, log_max_qps 0..8 (one QP is enough). */
    struct sdr_dev_attr dev_attr = {2, 0};
    struct sdr_context *tx_ctx = sdr_context_create("sim:0", &dev_attr);
    CHECK(tx_ctx, "sdr_context_create(sim:0)");
    struct sdr_context *rx_ctx = sdr_context_create("sim:1", &dev_attr);
    CHECK(rx_ctx, "sdr_context_create(sim:1)");

    /* 64 KiB chunks, 2^24 bytes in flight over 2^3 slots of 2 MiB, MTU 4096; one side sends, the
     * other receives. */
    struct sdr_qp_attr tx_attr = {kChunkLog, 24, 3, SDR_MTU_4096, 1, 0, 0};
    struct sdr_qp_attr rx_attr = {kChunkLog, 24, 3, SDR_MTU_4096, 0, 1, 0};
    struct sdr_qp *tx_qp = sdr_qp_create(tx_ctx, &tx_attr);
    CHECK(tx_qp, "sdr_qp_create(sender)");
    struct sdr_qp *rx_qp = sdr_qp_create(rx_ctx, &rx_attr);
    CHECK(rx_qp, "sdr_qp_create(receiver)");

    /* Each side connects to the other's QP-info blob (between hosts: over sdr_oob.h). */
    size_t info_size;
    CHECK(sdr_qp_info_size_get(tx_qp, &info_size) == SDR_SUCCESS, "sdr_qp_info_size_get");
    void *tx_info = malloc(info_size), *rx_info = malloc(info_size);
    EXPECT(tx_info && rx_info, "out of memory");
    CHECK(sdr_qp_info_get(tx_qp, tx_info) == SDR_SUCCESS, "sdr_qp_info_get(sender)");
    CHECK(sdr_qp_info_get(rx_qp, rx_info) == SDR_SUCCESS, "sdr_qp_info_get(receiver)");
    CHECK(sdr_qp_connect(tx_qp, rx_info) == SDR_SUCCESS, "sdr_qp_connect(sender)");
    CHECK(sdr_qp_connect(rx_qp, tx_info) == SDR_SUCCESS, "sdr_qp_connect(receiver)");

    uint8_t *src = malloc(kSize), *dst = calloc(kSize, 1);
    EXPECT(src && dst, "out of memory");
    for (uint32_t i = 0; i < kSize; i++) src[i] = (uint8_t)(i * 2654435761u >> 24);
    struct sdr_mr *src_mr = sdr_mr_reg(tx_ctx, src, kSize, SDR_ACCESS_REMOTE_WRITE);
    CHECK(src_mr, "sdr_mr_reg(src)");
    struct sdr_mr *dst_mr = sdr_mr_reg(rx_ctx, dst, kSize, SDR_ACCESS_REMOTE_WRITE);
    CHECK(dst_mr, "sdr_mr_reg(dst)");
    uint32_t src_key, dst_key;
    CHECK(sdr_mr_lkey_get(src_mr, &src_key) == SDR_SUCCESS, "sdr_mr_lkey_get(src)");
    CHECK(sdr_mr_lkey_get(dst_mr, &dst_key) == SDR_SUCCESS, "sdr_mr_lkey_get(dst)");

    /* The receive first: the n-th send lands in the n-th receive posted on the peer. */
    struct sdr_recv_wr recv_wr = {kSize, dst_key, (uint64_t)(uintptr_t)dst};
    struct sdr_recv_handle *recv;
    CHECK(sdr_recv_post(rx_qp, &recv_wr, &recv) == SDR_SUCCESS, "sdr_recv_post");
    struct sdr_send_wr send_wr = {SDR_WR_WRITE_WITH_IMM, kImmediate, kSize, src_key, (uint64_t)(uintptr_t)src, 0};
    struct sdr_send_handle *send;
    CHECK(sdr_send_post(tx_qp, &send_wr, &send) == SDR_SUCCESS, "sdr_send_post");
    const uint64_t start_ns = sdr_now_ns(tx_ctx);

    /* Poll both sides; between polls sleep in virtual time until the next event a host could
     * notice (at most 10 ms). Give up after 10 s of virtual time. */
    const uint32_t nchunks = (kSize + (1u << kChunkLog) - 1) >> kChunkLog;
    int sent = 0, received = 0;
    uint8_t *bitmap;
    size_t bitmap_bytes;
    while (!(sent && received)) {
        EXPECT(sdr_now_ns(tx_ctx) - start_ns < 10000000000ull, "the message did not arrive within 10 s");
        if (!sent) {
            struct sdr_send_status status;
            CHECK(sdr_send_poll(send, &sent, &status) != SDR_ERROR, "sdr_send_poll");
        }
        CHECK(sdr_recv_bitmap_get(recv, &bitmap, &bitmap_bytes) == SDR_SUCCESS, "sdr_recv_bitmap_get");
        EXPECT(bitmap_bytes == (nchunks + 7) / 8, "the bitmap is not one bit per chunk");
        received = bitmap_whole(bitmap, nchunks);
        if (!(sent && received)) CHECK(sdr_sim_wait(tx_ctx, sdr_now_ns(tx_ctx) + 10000000) == SDR_SUCCESS, "sdr_sim_wait");
    }
    uint32_t immediate;
    CHECK(sdr_recv_imm_get(recv, &immediate) == SDR_SUCCESS, "sdr_recv_imm_get");
    EXPECT(immediate == kImmediate, "the immediate differs from the one sent");
    EXPECT(memcmp(src, dst, kSize) == 0, "the bytes differ from those sent");
    printf("one_message: %u bytes sim:0 -> sim:1, all %u chunk bits set, bytes and immediate 0x%x as sent, "
           "%.3f ms of virtual time\n",
           (unsigned)kSize, nchunks, immediate, (sdr_now_ns(tx_ctx) - start_ns) / 1e6);

    CHECK(sdr_recv_complete(recv) == SDR_SUCCESS, "sdr_recv_complete");
    CHECK(sdr_mr_dereg(src_mr) == SDR_SUCCESS && sdr_mr_dereg(dst_mr) == SDR_SUCCESS, "sdr_mr_dereg");
    CHECK(sdr_qp_destroy(tx_qp) == SDR_SUCCESS && sdr_qp_destroy(rx_qp) == SDR_SUCCESS, "sdr_qp_destroy");
    CHECK(sdr_context_destroy(tx_ctx) == SDR_SUCCESS && sdr_context_destroy(rx_ctx) == SDR_SUCCESS,
          "sdr_context_destroy");
    free(tx_info);
    free(rx_info);
    free(src);
    free(dst);
    return 0;
}
