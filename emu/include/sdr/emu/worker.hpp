// The emulator's definition of the HAL's opaque worker: one emulated DPA thread.
#pragma once

#include <sdr/hal/hal.h>

#include <cstdint>

namespace sdr::emu {
class Nic;
}

struct alignas(64) hal_worker {
    sdr::emu::Nic* nic = nullptr;
    uint32_t index = 0;
    uint64_t counters[HAL_MAX_COUNTERS] = {};
    // Host-memory window traffic: each write is a PCIe transaction on hardware.
    uint64_t window_writes = 0;
    uint64_t window_adds = 0;  // of which fetch-and-adds (non-posted: a round trip each)
    uint64_t window_refused = 0;  // outside the window: not written
    // Per-handler invocation counts (PsPIN-style handler counters).
    uint64_t cqe_handler_calls = 0;
    uint64_t doorbell_handler_calls = 0;
    uint64_t timer_handler_calls = 0;
};
