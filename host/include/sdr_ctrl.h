/* extension: the control channel of an SDR QP.
 *
 * Each SDR QP owns a small control QP (the paper's UC/UD control QP): unreliable datagrams of
 * up to sdr_ctrl_max_size_get() bytes, carried by the same NIC and link as the data, as RoCEv2
 * UD SEND Only frames (BTH opcode 0x64 + DETH), so they appear in packet captures and suffer
 * the same loss, reordering and duplication. Connected together with the QP: its number and
 * Q_Key travel in the QP-info blob. Reliability schemes (CTS, ACK, NACK) are built on it. */
#ifndef SDR_CTRL_H
#define SDR_CTRL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sdr_qp;

/* Largest datagram payload in bytes. */
int sdr_ctrl_max_size_get(struct sdr_qp *qp, size_t *max_size);
/* Queue one datagram for the peer's control QP. SDR_RETRY while the NIC's control send queue
 * is full; SDR_ERROR if the QP is not connected or len exceeds the maximum. */
int sdr_ctrl_send(struct sdr_qp *qp, const void *buf, size_t len);
/* Take the oldest received datagram: copies it into buf and stores its length in *len.
 * SDR_RETRY when none is waiting; SDR_ERROR (datagram kept) if cap is smaller than it.
 * Unlike the polling calls of sdr.h it does not advance the simulator: a loop that drains the
 * ring and then sleeps with sdr_sim_wait() misses nothing. */
int sdr_ctrl_recv(struct sdr_qp *qp, void *buf, size_t cap, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* SDR_CTRL_H */
