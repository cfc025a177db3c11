// What an endpoint measures of its path, so that no timer rests on a configured constant: the
// RTT as RFC 6298 smooths it (SRTT, RTTVAR) and the delivery rate as BBR estimates it (bytes
// delivered over the time they took, the largest recent sample). The configured RTT and rate
// are only the first estimates, kept until the first samples come.
#pragma once

#include <algorithm>
#include <cstdint>

namespace sdr::rel {

// RFC 6298 section 2: the first sample R sets SRTT = R, RTTVAR = R/2; later ones
// RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|, SRTT = 7/8 SRTT + 1/8 R.
class RttMeter {
public:
    explicit RttMeter(double first_ns) : srtt_(first_ns), min_(first_ns) {}
    void sample(double r_ns);
    // A sample that is never shorter than the RTT (timed from before the chunk could have left):
    // min_ns() is the smallest of these, the path without queues; the first estimate until one.
    void bound(double r_ns);
    double srtt_ns() const { return srtt_; }
    double rttvar_ns() const { return rttvar_; }
    double min_ns() const { return min_; }
    uint64_t samples() const { return samples_; }

private:
    double srtt_, rttvar_ = 0, min_;
    uint64_t samples_ = 0, bounds_ = 0;
};

// BBR's delivery rate (Cheng et al., "Delivery Rate Estimation", IETF draft): bytes delivered
// between two observations over the time between them. A sample spans at least `span_ns` (one
// observation per ACK or per bitmap read is too short an interval: timing noise would dominate),
// and a pause in the flow starts a new one (restart), so idle time is not counted. The estimate
// is the median of the last kWindow samples, not BBR's max: on a real-time NIC a thread that was
// not scheduled catches up on its ring at memory speed, and a sample of that burst is several
// times the path's rate.
class RateMeter {
public:
    explicit RateMeter(double first_bytes_per_ns) : rate_(first_bytes_per_ns) {}
    // `bytes` more delivered at `now`; `span_ns` is the shortest interval a sample may cover.
    void delivered(uint64_t now, uint64_t bytes, uint64_t span_ns);
    // A pause in the flow (nothing was in flight since the last call, e.g. between messages):
    // the next sample starts with the next call, or at `at` when the flow is known to have
    // restarted then, so the idle time does not count as slow delivery.
    void restart() { marked_ = false; }
    void restart(uint64_t at)
    {
        mark_ns_ = at;
        mark_bytes_ = total_;
        marked_ = true;
    }
    double bytes_per_ns() const { return rate_; }
    double gbps() const { return rate_ * 8; }
    uint64_t samples() const { return samples_; }

private:
    static constexpr int kWindow = 9;  // samples kept for the median
    double rate_;
    double window_[kWindow] = {};
    int next_ = 0;
    uint64_t samples_ = 0;
    uint64_t total_ = 0;               // bytes delivered so far
    uint64_t mark_ns_ = 0, mark_bytes_ = 0;  // the start of the sample being measured
    bool marked_ = false;
};

// The longest pause inside the last kMessages messages' streams (of ACKs at the sender, of
// arrivals at the receiver): a real-time NIC whose thread was not scheduled pauses a stream
// though nothing was lost, and the timers that judge silence allow for as long a pause again.
class PauseMeter {
public:
    void message_done(uint64_t longest_ns)
    {
        ring_[next_] = longest_ns;
        next_ = (next_ + 1) % kMessages;
    }
    uint64_t longest_ns() const { return *std::max_element(ring_, ring_ + kMessages); }

private:
    static constexpr int kMessages = 8;
    uint64_t ring_[kMessages] = {};
    int next_ = 0;
};

// The path as an endpoint reports it (sdr_rel_path in C).
struct PathState {
    double srtt_ms = 0, rttvar_ms = 0, rto_ms = 0, delivery_gbps = 0, min_rtt_ms = 0;
    uint64_t rtt_samples = 0, rate_samples = 0;
};

}  // namespace sdr::rel
