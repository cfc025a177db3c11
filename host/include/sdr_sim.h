/* extension: the simulator's virtual clock, for applications that run on "sim:N" devices.
 * Every SDR call that polls (sdr_send_poll, sdr_recv_bitmap_get, sdr_recv_imm_get,
 * sdr_recv_bitmap_chunk_expand) advances the shared clock; these let an application read it
 * and wait in virtual time. */
#ifndef SDR_SIM_H
#define SDR_SIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sdr_context;

/* Virtual time of the context's fabric in nanoseconds (wall-clock ns on real devices). */
uint64_t sdr_now_ns(struct sdr_context *ctx);
/* Advance the fabric's virtual clock to t_ns, running everything due until then.
 * SDR_ERROR on a non-simulated context. */
int sdr_sim_advance_to(struct sdr_context *ctx, uint64_t t_ns);
/* Advance the virtual clock towards t_ns, but return right after the first event a host could
 * notice (the firmware wrote a chunk bit, an immediate or a send completion to host memory, or
 * a control datagram arrived); the clock ends at t_ns if none did. Lets a poll loop sleep in
 * virtual time without missing anything. SDR_ERROR on a non-simulated context. */
int sdr_sim_wait(struct sdr_context *ctx, uint64_t t_ns);
/* A count that moves whenever an event sdr_sim_wait wakes for happens on this context's
 * device (simulated or real-time). Two equal reads mean the host could have noticed nothing new
 * in between, so a poll loop may skip a QP's work until its next deadline. A device that cannot
 * tell (rdma-core) returns a new value at every call. 0 for a NULL context. */
uint64_t sdr_host_events(struct sdr_context *ctx);
/* Run events until nothing is pending. SDR_ERROR on a non-simulated context. */
int sdr_sim_run_until_idle(struct sdr_context *ctx);
/* 1 if the fabric has events pending (packets in flight, timers), else 0. */
int sdr_sim_pending(struct sdr_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* SDR_SIM_H */
