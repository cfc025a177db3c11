/* sdr_stats.h: every counter of a context's NIC by name (an extension of the SDR C API).
 *
 * The counters are a list of (name, value) pairs, so a program built against this header keeps
 * working when a later libsdr adds counters: it finds the ones it knows by name, and prints or
 * ignores the rest. Names are dotted, lower case, stable once published:
 *   port.*            the emulated NIC's port: frames, bytes, CQEs, control datagrams, and
 *                     port.rx_drop.REASON for every frame the NIC dropped (port.rx_drops_total)
 *   kernel.*          "raw:"/"xdp:" only: what the kernel packet path counted, read live by the
 *                     NIC's polling thread: kernel.rx_dropped (every frame lost before the NIC
 *                     saw it) and one counter per cause (kernel.rx_ring_full, ...; emu/README.md)
 *   rt.*, shaper.*    "raw:"/"xdp:" only: the polling thread and the impairment stage
 *   fw.NAME           a firmware counter, summed over the channels' DPA workers
 *   qp.N.*            SDR QP N of the context (its index), summed over its channels
 * Values are totals since the context was created. All SDR_SUCCESS/SDR_ERROR as in sdr.h.
 *
 * Outside a program: SDR_STATS_FILE=PATH makes libsdr keep PATH ("%p" in it becomes the process
 * id) holding every context's counters, rewritten every SDR_STATS_INTERVAL_MS (1000) for
 * "raw:"/"xdp:" devices and when a context is destroyed; SDR_STATS_AT_EXIT=1 prints them to
 * stderr when a context is destroyed. `sdr-stat PATH` prints such a file. */
#ifndef SDR_STATS_H
#define SDR_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <sdr.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SDR_STAT_NAME_MAX 64

struct sdr_stat {
    char name[SDR_STAT_NAME_MAX]; /* NUL-terminated */
    uint64_t value;
};

/* Writes up to `cap` counters into `stats` (which may be NULL when cap is 0) and sets *count to
 * how many the context has: call with cap 0 to size the array. The list is a consistent
 * snapshot (taken under the NIC's lock on "raw:"/"xdp:"). *count 0 means the device keeps no
 * counters ("verbs:": they are the emulated NIC's), never that they are all zero: "sim:",
 * "raw:" and "xdp:" always list their port.* and fw.* counters, also at 0. Call from the
 * thread that drives the context, as every other call on it. */
int sdr_context_stats_get(struct sdr_context *ctx, struct sdr_stat *stats, size_t cap, size_t *count);

/* Prints every counter as "name value" lines, after a "# sdr-stats device=NAME" line; for a
 * device that keeps none, the line "# counters not available on KIND:" ("verbs:") instead. */
int sdr_context_stats_print(struct sdr_context *ctx, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* SDR_STATS_H */
