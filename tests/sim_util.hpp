// Helpers shared by the simulator tests: patterned buffers and one-message transfers.
#pragma once

#include <sdr/host/sim_world.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace sdr::test {

// A deterministic byte pattern that differs per message and per position.
inline void fill(std::vector<uint8_t>& v, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < v.size(); i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::memcpy(&v[i], &x, std::min<size_t>(8, v.size() - i));
    }
}

// Another deterministic pattern (xorshift32 bytes), the verbs tests' buffers.
inline std::vector<uint8_t> pattern(size_t n, uint32_t seed)
{
    std::vector<uint8_t> v(n);
    uint32_t x = seed * 2654435761u + 1;
    for (auto& b : v) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b = static_cast<uint8_t>(x);
    }
    return v;
}

inline bool bit(const uint8_t* bm, uint64_t i) { return (bm[i / 8] >> (i % 8)) & 1; }

// Poll a send until every packet left the NIC.
inline void wait_send(sdr_send_handle* h)
{
    int done = 0;
    sdr_send_status st{};
    for (;;) {
        int rc = sdr_send_poll(h, &done, &st);
        ASSERT_NE(rc, SDR_ERROR) << sdr_last_error();
        if (done) return;
    }
}

inline WorldConfig config(uint32_t chunk_log = 16, uint32_t in_flight_log = 30, uint32_t log_msgs = 7,
                          uint32_t channels = 8)
{
    WorldConfig c;
    c.channels = channels;
    c.fabric.link.rtt_ms = 0.01;  // short links keep tests fast; long-haul runs live in tools/
    c.qp = sdr_qp_attr{chunk_log, in_flight_log, log_msgs, SDR_MTU_4096, 1, 1, 0};
    return c;
}

}  // namespace sdr::test
