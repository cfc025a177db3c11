/* extension: reliable messages over an SDR QP (Selective Repeat or Erasure Coding), the C face
 * of the reliability layer. Build on the published API; link with libsdr (pkg-config sdr).
 *
 *   struct sdr_rel_attr a; sdr_rel_attr_default(&a); sdr_rel_attr_parse_scheme(&a, "ec-mds:32,8");
 *   struct sdr_rel_endpoint *ep = sdr_rel_endpoint_create(ctx, qp, &qp_attr, &a);
 *   sdr_rel_recv(ep, buf, len, lkey, &id);  (receiver)  or  sdr_rel_send(...)  (sender)
 *   while (sdr_rel_recv_poll(ep, id, &st) == SDR_RETRY) sdr_rel_progress(ep, &deadline);
 *
 * The QP must be connected and have send_enable and recv_enable set (data one way, control
 * the other). The n-th send of one side lands in the n-th receive of the other; lengths must
 * match. Both sides must use the same scheme (checked: the send fails with a clear error),
 * or the sender uses auto, which follows whatever the receiver names.
 *
 * auto: the receiver picks a code per message among the schemes that have an analytic model (sr,
 * sr-nack, ec-xor:k,m, ec-mds:k,m, k,2m or k,4m as this is written), from the model on its path
 * estimate — the RTT (rtt_ms, or the measured SRTT of this endpoint's own sends), bw_gbps, and
 * the drop rate it measures from arrivals (drop_hint until then) — and names it in its
 * clear-to-send. stats.scheme/k/m report what a message used. */
#ifndef SDR_REL_H
#define SDR_REL_H

#include <sdr.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sdr_rel_endpoint;

/* The wire ids: SDR_REL_SR = 1, SDR_REL_SR_NACK = 2, ... one per line of sdr_rel_schemes.def (the
 * registry, installed beside this header), and SDR_REL_AUTO = 5, the receiver's choice. */
enum sdr_rel_scheme {
#define SDR_REL_SCHEME(id, name, c, cxx) SDR_REL_##c = id,
#include "sdr_rel_schemes.def"
#undef SDR_REL_SCHEME
    SDR_REL_AUTO = 5
};

struct sdr_rel_attr {
    enum sdr_rel_scheme scheme;
    uint32_t k, m;          /* EC: data and parity chunks per submessage; auto: its EC candidates' */
    double rtt_ms;          /* first RTT estimate (measured from ACKs afterwards) */
    double bw_gbps;         /* first delivery-rate estimate (measured from ACKs afterwards) */
    double alpha;           /* RTO = RTT * (1 + alpha) */
    uint32_t max_rounds;    /* bound on retransmissions of a chunk, NACK rounds and probes */
    double timeout_ms;      /* per-message global timeout from post; 0 = derived */
    double drop_hint;       /* auto: per-packet drop rate assumed until one is measured */
};

struct sdr_rel_stats {
    int ok;                 /* 1 delivered (receiver) / acknowledged (sender), 0 failed */
    char error[160];        /* why it failed, "" if ok */
    uint64_t bytes, post_ns, done_ns;  /* sdr_now_ns clock */
    uint32_t chunks, retransmitted_chunks, decoded_chunks, fallbacks, rounds;
    enum sdr_rel_scheme scheme;  /* the code the message used (auto: the one picked) */
    uint32_t k, m;               /* its k and m if EC, else 0 */
};

/* The endpoint's measured path: what its timers (RTO, fallback timeout, ACK interval) and an auto
 * receiver go by. rtt_ms = SRTT and rttvar_ms = RTTVAR from ACKs as RFC 6298 computes them,
 * rto_ms the retransmission timeout they give; bw_gbps = the delivery rate, as BBR estimates it
 * (acknowledged bytes over the time they took, the largest recent sample). Until measured
 * (rtt_samples / rate_samples 0) they are the configured first estimates. drop = per-packet
 * drop rate measured from arrivals; samples = the chunk transmissions it rests on (0: still
 * drop_hint). min_rtt_ms = the smallest RTT sample: the path without the queues SRTT includes. */
struct sdr_rel_path {
    double rtt_ms, bw_gbps, drop;
    uint64_t samples;
    double rttvar_ms, rto_ms;
    uint64_t rtt_samples, rate_samples;
    double min_rtt_ms;
};

/* sr, RTT 25 ms, 100 Gbit/s, alpha 2, max_rounds 16, derived timeout; k = 32, m = 8; drop_hint 0. */
void sdr_rel_attr_default(struct sdr_rel_attr *attr);
/* A registered scheme's name, "name:k,m" for a coded one ("sr", "ec-mds:32,8"), or "auto[:k,m]".
 * SDR_ERROR (attr unchanged) if invalid. */
int sdr_rel_attr_parse_scheme(struct sdr_rel_attr *attr, const char *text);

struct sdr_rel_endpoint *sdr_rel_endpoint_create(struct sdr_context *ctx, struct sdr_qp *qp,
                                                 const struct sdr_qp_attr *qp_attr,
                                                 const struct sdr_rel_attr *attr);
int sdr_rel_endpoint_destroy(struct sdr_rel_endpoint *ep);

int sdr_rel_send(struct sdr_rel_endpoint *ep, const void *buf, uint64_t len, uint32_t lkey, uint64_t *id);
int sdr_rel_recv(struct sdr_rel_endpoint *ep, void *buf, uint64_t len, uint32_t lkey, uint64_t *id);
/* SDR_SUCCESS and *stats once the message is over (stats->ok says how), SDR_RETRY while in
 * progress, SDR_ERROR for an unknown id. */
int sdr_rel_send_poll(struct sdr_rel_endpoint *ep, uint64_t id, struct sdr_rel_stats *stats);
int sdr_rel_recv_poll(struct sdr_rel_endpoint *ep, uint64_t id, struct sdr_rel_stats *stats);
/* Do everything due now; *next_deadline_ns (may be NULL) = when to call again at the latest
 * (UINT64_MAX: only on new events). On the simulator, sdr_sim_wait(ctx, deadline) sleeps. */
int sdr_rel_progress(struct sdr_rel_endpoint *ep, uint64_t *next_deadline_ns);
/* The endpoint's path estimate (what auto decides on). */
int sdr_rel_path_get(struct sdr_rel_endpoint *ep, struct sdr_rel_path *path);
/* Text of the last failure (SDR_ERROR, or NULL from sdr_rel_endpoint_create) of an sdr_rel_*
 * call on this thread; never NULL, "" before the first. Like errno, a call that succeeds leaves
 * it unchanged. */
const char *sdr_rel_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* SDR_REL_H */
