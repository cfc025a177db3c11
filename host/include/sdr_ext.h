/*
 * SDR extension: QP parameters the published sdr_qp_attr has no field for.
 *
 * - Generations G. Message n of a QP uses slot n mod S and generation (n / S) mod G; each
 *   generation has its own transport QPs and root key, so a late packet of one of a slot's
 *   G - 1 previous messages lands on a NULL key. The published SDK reads G from the
 *   environment variable SDR_QP_NUM_GENERATIONS at sdr_qp_create; so do we (default 2).
 *   Both QPs of a connection need the same G (sdr_qp_connect refuses otherwise).
 * - Maximum packet lifetime L. A (slot, generation) pair comes back every G·S messages. After
 *   sdr_recv_complete the pair stays on the NULL key for L, like TCP's TIME_WAIT:
 *   sdr_recv_post returns SDR_RETRY (sdr_last_error() says why and for how long) until L has
 *   passed for the pair it would arm, so no packet that left the sending NIC before the
 *   completion can land in a later receive. Default: from the path, the larger of what the
 *   local device and the peer's device (in the QP-info blob) say their frames can take; the
 *   README lists the numbers per device.
 */
#ifndef SDR_EXT_H
#define SDR_EXT_H

#include <sdr.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest G: the transport-QP tag the firmware reads per packet has 3 generation bits. */
#define SDR_MAX_GENERATIONS 8u
/* max_packet_lifetime_ns: take the default of the path (the devices' bound plus a margin). */
#define SDR_LIFETIME_FROM_PATH UINT64_MAX
/* Largest explicit lifetime: one minute (TCP's MSL is two; an SDR path is one hop of RDMA). */
#define SDR_MAX_LIFETIME_NS 60000000000ull

/* The per-packet transport of the QP's transport QPs. RC (the published SDK's default): the NIC
 * acknowledges every packet and sends lost ones again, so a plain sdr_send needs no loss
 * recovery of its own. UC: a lost packet stays lost, for reliability schemes of their own
 * (sdr_rel.h chooses UC). Both ends must use the same. */
enum sdr_transport {
    SDR_TRANSPORT_FROM_ENV = 0, /* SDR_USE_UC_QP=1: UC; unset or 0: RC */
    SDR_TRANSPORT_RC = 1,
    SDR_TRANSPORT_UC = 2
};

struct sdr_qp_attr_ext {
    uint32_t num_generations;        /* G in 1..SDR_MAX_GENERATIONS; 0: SDR_QP_NUM_GENERATIONS,
                                        else 2 */
    uint64_t max_packet_lifetime_ns; /* L, at most SDR_MAX_LIFETIME_NS; 0 turns the quiet time
                                        off; SDR_LIFETIME_FROM_PATH: the path's default */
    uint32_t transport;              /* enum sdr_transport */
    uint32_t spray;                  /* 1: packet spraying (below); 0: one UDP source port */
};

/* Packet spraying (spray = 1; the emulated devices sim:, raw:, xdp:): every transport QP sends
 * each packet from another UDP source port of 0xC000-0xFFFF, so an ECMP fabric that hashes
 * the 5-tuple spreads one QP over all its paths (as AWS SRD and Ultra Ethernet do), and accepts
 * its peer's packets from any port of that range (MAC, IP and QPN still checked). 0: one port
 * per pair of QPs, as Linux's RoCE drivers derive it. Both ends must use the same
 * (sdr_qp_connect refuses otherwise). Packets of diverse paths arrive out of order: UC
 * transport QPs and SDR's bitmap take them so; RC transport QPs see a packet that overtook
 * another as loss (a NAK and go-back-N). Control datagrams keep one port. */

/* num_generations = 0, max_packet_lifetime_ns = SDR_LIFETIME_FROM_PATH,
 * transport = SDR_TRANSPORT_FROM_ENV, spray = 0. */
void sdr_qp_attr_ext_init(struct sdr_qp_attr_ext *ext);

/* sdr_qp_create with extended attributes (ext may be NULL: the defaults). Invalid values are
 * SDR errors: NULL, and sdr_last_error() names the field and its range. */
struct sdr_qp *sdr_qp_create_ext(struct sdr_context *ctx, struct sdr_qp_attr *qp_attr,
                                 const struct sdr_qp_attr_ext *ext);

/* The values in force: G, and L (a path default may grow at sdr_qp_connect, when the peer's
 * bound is known). */
int sdr_qp_attr_ext_get(struct sdr_qp *qp, struct sdr_qp_attr_ext *ext);

/* The QP's send requests: *posted = those handed to the device so far (one per sdr_send_post
 * and per sdr_streaming_send_continue with data, one more per end of a send WITH_IMM that pads
 * its immediate), *injected = those every packet of which left the NIC (UC) or was acknowledged
 * (RC). Both count from the QP's creation and wrap at 2^32 (compare by signed difference). A
 * sender that notes *posted after each call learns when each request left, which the
 * completion of a streaming send, given only at its end, does not say. */
int sdr_qp_send_progress(struct sdr_qp *qp, uint32_t *posted, uint32_t *injected);

#ifdef __cplusplus
}
#endif

#endif /* SDR_EXT_H */
