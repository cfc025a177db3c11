// The per-packet drop rate a receiver measures for `auto` (policy.hpp): of the chunk
// transmissions it has judged, the share that was lost. The SDR bitmap shows chunks, not
// packets, so a chunk's loss q is turned into a packet's: P = 1 − (1 − q)^(1/N), N packets a
// chunk. The configured hint is a prior worth kPriorChunks judgements; past kWindowChunks the
// history is halved, so the estimate follows a path that changes.
#pragma once

#include <cstdint>

namespace sdr::rel {

class DropMeter {
public:
    static constexpr double kPriorChunks = 256, kWindowChunks = 1 << 20;
    DropMeter(double hint, uint32_t packets_per_chunk);
    void add(uint64_t judged, uint64_t lost);  // chunk transmissions judged, of which lost
    double packet_drop() const;
    uint64_t judged() const { return total_judged_; }

private:
    double packets_;
    double judged_, lost_;  // the decayed window, prior included
    uint64_t total_judged_ = 0;
};

}  // namespace sdr::rel
