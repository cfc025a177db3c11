// What the conformance tests need from a backend: two ends, A and B, each running the probe
// firmware (probe.h) on the backend's HAL binding, joined by one connected transport QP pair
// (A sends, B receives). One implementation per backend (tests/hal_conformance/), linked with
// conformance_test.cpp into that backend's own executable: two HAL bindings cannot share a
// process, both define hal_*.
#pragma once

#include "probe.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace sdr::hal_conformance {

enum Side : int { kA = 0, kB = 1 };

// What the backend counted for one worker (both handler contexts of it, where it has two).
struct WorkerCounts {
    uint64_t window_writes = 0;   // hal_window_write64 and hal_window_add64 performed
    uint64_t window_refused = 0;  // outside their window
    uint64_t counters[HAL_MAX_COUNTERS] = {};
};

// Host memory a window may cover: the words as the host reads them, and the address that goes
// into struct hal_window (the same on backends where the firmware shares the host's memory).
struct HostMemory {
    uint64_t* words = nullptr;
    uint64_t host_addr = 0;
    size_t nwords = 0;
};

class Harness {
public:
    virtual ~Harness() = default;

    // The probe's state on one side: the NIC memory the backend passes every handler as its
    // struct fw_device *, zeroed at set-up, readable by the test while handlers run.
    // state(kA)->path is filled in (the QP pair's handles, keys and regions).
    virtual probe* state(Side s) = 0;
    // Workers per side (at least 2), and the one that runs doorbells of SDR QP index i.
    virtual uint32_t workers() const = 0;
    virtual uint32_t doorbell_worker(uint32_t qp_index) const = 0;
    // Handler contexts that may run at the same moment: 1 when every handler runs on one
    // thread; more when B's receive handler (channel PROBE_RX_CHANNEL) and its doorbell
    // handler of index 0 may run on different threads, which the atomics test makes meet.
    virtual uint32_t concurrent_handlers() const = 0;

    // The host rings the send doorbell of SDR QP index i (the backend runs fw_handle_doorbell).
    virtual void doorbell(Side s, uint32_t qp_index) = 0;
    virtual WorkerCounts counts(Side s, uint32_t worker) = 0;
    // At least nwords words of host memory on side A, stable for the harness's lifetime.
    virtual HostMemory host_memory(size_t nwords) = 0;

    // The QP pair (created with PROBE_TX_TAG on A, PROBE_RX_TAG on B's channel
    // PROBE_RX_CHANNEL): A's source region and B's destination region (state(kA)->path has
    // their sizes; the destination starts zeroed).
    virtual uint8_t* source() = 0;
    virtual const uint8_t* target() = 0;

    // The backend's time: let it run (virtual time advances, or the wall clock is waited for)
    // until cond() holds or timeout_ns of it passed; true if cond() held.
    virtual bool run_until(const std::function<bool()>& cond, uint64_t timeout_ns) = 0;
    // Let ns of the backend's time pass, running whatever falls due: how a test sees that
    // something did not happen (a second timer fire, an extra CQE).
    virtual void run_for(uint64_t ns) = 0;
};

// The backend's harness, set up; nullptr and *why if it could not be. *skip: the environment
// lacks what the backend needs (not root, say), which the tests report as skipped; any other
// failure fails them.
std::unique_ptr<Harness> make_harness(std::string* why, bool* skip);

}  // namespace sdr::hal_conformance
