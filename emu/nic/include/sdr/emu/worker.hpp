// The emulator's definition of the HAL's opaque worker: one context that runs handlers of an
// emulated DPA thread, with that context's counters.
//
// Thread ownership. The real-time executor runs a DPA worker's handlers in two contexts: the
// receive handler (run_rx_cqe) on the worker's own thread when worker threads are on, and the
// send-completion, doorbell and timer handlers under the executor's lock (polling thread or a
// host thread). So the Nic gives each DPA worker two hal_worker records, one per context
// (Nic::workers_ and Nic::rx_workers_), and every record has exactly one writer at a time.
// A writer then needs no locked instruction: counter_add is a relaxed atomic load and store (a
// plain add on x86). Readers on other threads (fw_counter, worker(), the host's counter
// snapshots) use counter_read, so a read sees an old or a new value, never a torn one, and
// neither side is a data race. A shared record with fetch_add would cost a locked add per
// packet on the receive path for counters that are only read now and then.
#pragma once

#include <sdr/hal/hal.h>

#include <atomic>
#include <cstdint>

namespace sdr::emu {
class Nic;

// Single-writer update of a counter that other threads may read.
inline void counter_add(uint64_t& c, uint64_t n)
{
    std::atomic_ref<uint64_t> a(c);
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
inline uint64_t counter_read(const uint64_t& c)
{
    return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(c)).load(std::memory_order_relaxed);
}
}  // namespace sdr::emu

// alignas(64): each record on cache lines of its own, so the two contexts never share a line.
// The handler counts before the firmware's counters: a receive CQE adds to cqe_handler_calls
// and to the firmware's first counters, and with many NICs each line it touches is a cache miss.
struct alignas(64) hal_worker {
    sdr::emu::Nic* nic = nullptr;
    uint32_t index = 0;  // the DPA worker this record belongs to (same in both contexts)
    // Per-handler invocation counts (PsPIN-style handler counters).
    uint64_t cqe_handler_calls = 0;
    uint64_t doorbell_handler_calls = 0;
    uint64_t timer_handler_calls = 0;
    uint64_t counters[HAL_MAX_COUNTERS] = {};
    // Host-memory window traffic: each write is a PCIe transaction on hardware.
    uint64_t window_writes = 0;
    uint64_t window_adds = 0;  // of which fetch-and-adds (non-posted: a round trip each)
    uint64_t window_refused = 0;  // outside the window: not written
};
