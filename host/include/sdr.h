/*
 * SDR: software-defined reliability for RDMA — the host API.
 * Source-compatible with the published SDR SDK's sdr.h: same functions, structs, fields,
 * enum values and return codes. Our additions are marked "extension".
 *
 * Semantics worth knowing (details in the README):
 * - Order-based matching: the n-th send of a QP lands in the n-th receive posted on the peer.
 * - remote_offset is counted in chunks (2^bitmap_chunk_size_log_bytes bytes) of the receive.
 * - sdr_send_poll completes when every packet of the send left the NIC (UC transport QPs,
 *   local completion) or was acknowledged by the peer's NIC (RC, the default; sdr_ext.h).
 *   A send a packet of which completed in error (RC retries exhausted, the peer refusing it)
 *   completes with SDR_ERROR, *completed_flag 1 and SDR_SEND_STATUS_FAILED in status->flags,
 *   and releases its handle; the QP is then in the error state, as a verbs QP: every later
 *   send on it fails too (extension).
 * - sdr_recv_bitmap_get returns the live chunk bitmap: chunk i is bit (i % 8) of byte i / 8.
 *   The NIC sets bits while the application reads them (from another thread on a real-time
 *   device): read each byte with an atomic acquire load (__atomic_load_n(p, __ATOMIC_ACQUIRE)
 *   or C11 atomic_load_explicit); a set bit then also publishes that chunk's payload.
 * - sdr_recv_post returns SDR_RETRY while its slot holds an earlier receive or its (slot,
 *   generation) pair is quiet: the maximum packet lifetime after the pair's last receive was
 *   completed (sdr_ext.h); sdr_last_error() says which.
 */
#ifndef SDR_H
#define SDR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sdr_context;
struct sdr_qp;
struct sdr_send_handle;
struct sdr_recv_handle;

enum sdr_errcode {
    SDR_SUCCESS = 0,
    SDR_ERROR = 1,
    SDR_RETRY = 2 /* not now: resources exhausted or result not ready; try again */
};

enum sdr_mtu {
    SDR_MTU_64,
    SDR_MTU_128,
    SDR_MTU_256,
    SDR_MTU_512,
    SDR_MTU_1024,
    SDR_MTU_2048,
    SDR_MTU_4096
};

struct sdr_dev_attr {
    uint32_t num_channels; /* transport channels = DPA worker threads: 1..16 */
    uint32_t log_max_qps;  /* the context holds at most 2^log_max_qps QPs: 0..8 */
};

enum sdr_wr_opcode { SDR_WR_WRITE, SDR_WR_WRITE_WITH_IMM };

struct sdr_qp_attr {
    uint32_t bitmap_chunk_size_log_bytes;
    size_t max_in_flight_log_bytes;
    uint32_t max_log_num_msgs;
    enum sdr_mtu mtu;
    uint8_t send_enable;
    uint8_t recv_enable;
    uint32_t rate_limit; /* pacing of the QP's frames in Mbit/s; 0 = line rate */
};

struct sdr_send_wr {
    enum sdr_wr_opcode opcode;
    uint32_t imm_value;
    uint32_t length;
    uint32_t lkey;
    uint64_t local_addr;
    uint64_t remote_offset; /* in chunks of the receive buffer */
};

struct sdr_send_start_wr {
    enum sdr_wr_opcode opcode;
    uint32_t imm_value;
};

struct sdr_send_continue_wr {
    uint32_t length;
    uint64_t local_addr;
    uint32_t lkey;
    uint64_t remote_offset; /* in chunks of the receive buffer */
};

struct sdr_recv_wr {
    uint32_t max_length;
    uint32_t lkey;
    uint64_t address;
};

struct sdr_send_status {
    uint32_t flags;
};
/* extension: sdr_send_status.flags bit, the send was not delivered (see above) */
#define SDR_SEND_STATUS_FAILED 1u

/* dev_name: "sim:N", "raw:IF", "xdp:IF" or "verbs:IBDEV" (man sdr.h says what each needs);
 * dev_attr is required (NULL fails), each field within its range. */
struct sdr_context *sdr_context_create(const char *dev_name, struct sdr_dev_attr *dev_attr);
int sdr_context_destroy(struct sdr_context *context);

struct sdr_qp *sdr_qp_create(struct sdr_context *ctx, struct sdr_qp_attr *qp_attr);
int sdr_qp_destroy(struct sdr_qp *qp);
int sdr_qp_info_size_get(struct sdr_qp *qp, size_t *info_size);
int sdr_qp_info_get(struct sdr_qp *qp, void *info);
int sdr_qp_connect(struct sdr_qp *qp, void *remote_qp_info);

int sdr_recv_post(struct sdr_qp *qp, struct sdr_recv_wr *wr, struct sdr_recv_handle **handle);
int sdr_recv_imm_get(struct sdr_recv_handle *handle, uint32_t *immediate);
int sdr_recv_bitmap_get(struct sdr_recv_handle *handle, uint8_t **bitmap_bytes,
                        size_t *bitmap_num_bytes);
int sdr_recv_bitmap_chunk_expand(struct sdr_recv_handle *handle, uint32_t chunk_offset,
                                 uint64_t *bitmap);
int sdr_recv_complete(struct sdr_recv_handle *handle);

int sdr_send_post(struct sdr_qp *qp, struct sdr_send_wr *wr, struct sdr_send_handle **handle);
int sdr_streaming_send_start(struct sdr_qp *qp, struct sdr_send_start_wr *wr,
                             struct sdr_send_handle **handle);
int sdr_streaming_send_continue(struct sdr_send_handle *handle, struct sdr_send_continue_wr *wr);
int sdr_streaming_send_end(struct sdr_send_handle *handle);
int sdr_send_poll(struct sdr_send_handle *handle, int *completed_flag,
                  struct sdr_send_status *status);

/* extension: the message of the last call on this thread that failed (returned SDR_ERROR or
 * NULL), or the reason of sdr_recv_post's SDR_RETRY; never NULL, "" before the first. Like
 * errno, a call that succeeds leaves it unchanged: a call's return value says whether it failed,
 * this says why, read right after it. sdr_rel.h's calls make sdr.h calls and may change it;
 * their own failures are in sdr_rel_last_error(). */
const char *sdr_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* SDR_H */
