/* extension: out-of-band bootstrap over TCP, perftest style.
 *
 * Two SDR endpoints in different processes or hosts must swap their QP-info blobs before
 * sdr_qp_connect, and an application may want a reliable side channel for clear-to-send or
 * results. This is that channel: one TCP connection, messages framed by a 4-byte little-endian
 * length, opened by a handshake ("SDRB", version 1) so a stray client or a wrong port fails
 * at once with a clear error rather than as garbage later. Every call that waits takes a
 * timeout in milliseconds (-1: forever, 0: do not wait); an absent peer, a closed connection
 * or a timeout returns SDR_ERROR (or NULL) with the reason in sdr_last_error().
 *
 * Server:  o = sdr_oob_listen(NULL, 18515, 30000);  sdr_oob_exchange(o, mine, n, theirs, n, &got, 5000);
 * Client:  o = sdr_oob_connect("10.77.0.2", 18515, 30000);  ...the same exchange... */
#ifndef SDR_OOB_H
#define SDR_OOB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sdr_oob;

/* Largest message, in bytes. */
#define SDR_OOB_MAX_MESSAGE (1u << 20)

/* Waits up to timeout_ms for one client on TCP `port` of bind_addr (NULL: every address,
 * IPv4 and IPv6) and completes the handshake. The listening socket is closed once a client
 * is in. NULL on timeout, a busy port or a peer that is not an SDR endpoint. */
struct sdr_oob *sdr_oob_listen(const char *bind_addr, uint16_t port, int timeout_ms);
/* Connects to host:port (name or address), retrying while nobody listens yet (the server may
 * start later), for up to timeout_ms in all, then completes the handshake. */
struct sdr_oob *sdr_oob_connect(const char *host, uint16_t port, int timeout_ms);

/* Sends one message of len bytes (0..SDR_OOB_MAX_MESSAGE). Waits while the socket buffer is
 * full, up to the timeout the connection was opened with. */
int sdr_oob_send(struct sdr_oob *oob, const void *buf, size_t len);
/* Receives the next message into buf and its length into *len. SDR_RETRY if none arrived
 * within timeout_ms; SDR_ERROR if the peer closed the connection or the message is larger
 * than cap (the message is kept: call again with a larger buffer). */
int sdr_oob_recv(struct sdr_oob *oob, void *buf, size_t cap, size_t *len, int timeout_ms);
/* Sends `mine` and receives the peer's message, as both sides do to swap QP-info blobs.
 * A timeout is an error here: the peer is gone or not doing the same. */
int sdr_oob_exchange(struct sdr_oob *oob, const void *mine, size_t mine_len, void *theirs, size_t cap,
                     size_t *their_len, int timeout_ms);
/* The connection's socket, readable when bytes arrive (for poll/epoll loops). */
int sdr_oob_fd(struct sdr_oob *oob);
/* Closes the connection; NULL is accepted. */
void sdr_oob_close(struct sdr_oob *oob);

#ifdef __cplusplus
}
#endif

#endif /* SDR_OOB_H */
