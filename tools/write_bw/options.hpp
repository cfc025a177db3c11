// sdr_write_bw's command line: the run's shape (size .. channels), the mode (bandwidth, latency,
// bidirectional, through a reliability scheme), the device and its SDR_RT_* / SDR_SIM_* settings.
#pragma once

#include <cstdint>
#include <string>

namespace sdr::write_bw {

struct Options {
    std::string device, server;
    std::string topology;  // -d sim: a datacenter network (SDR_SIM_TOPOLOGY), empty: one link
    uint16_t port = 18515;
    uint64_t size = 1 << 20;
    uint32_t iters = 1000, warmup = 100, in_flight = 8, mtu = 4096, chunk = 65536, channels = 4;
    int timeout_ms = 10000;
    int settle_ms = -1;  // -1: 20 ms + twice the added delay
    int app_core = -1;
    bool json = false, verify = false;
    bool all_sizes = false;      // -a
    double rate_limit_gbps = 0;  // pacing of this side's QP (sdr_qp_attr::rate_limit); 0: line rate
    bool latency = false;        // ping-pong of one message each way
    bool bidirectional = false;  // -b: both sides send and receive at once
    std::string scheme;          // through sdr_rel.h; empty: raw sdr_send
    // The path's shape that -d sim puts on its link and the reliability layer starts from:
    // --delay-ms and --rate-gbps (on real devices also SDR_RT_DELAY_MS / SDR_RT_RATE_GBPS, which
    // the device reads itself); --snaplen, the capture's.
    double delay_ms = 0, rate_gbps = 0;  // rate 0: not shaped
    uint32_t snaplen = 128;              // 0: whole frames; 128, as sdr_demo: headers and immediate
    double rtt_ms = 0, gbps = 0;         // --rtt-ms, --gbps: first estimates; 0: from the path

    // "sim" or "sim:N": server and client in this process on the simulated fabric.
    bool sim() const { return device == "sim" || device.rfind("sim:", 0) == 0; }
};

// Parses argv; a bad command line prints "sdr_write_bw: ..." and exits 1.
Options parse(int argc, char** argv);

}  // namespace sdr::write_bw
