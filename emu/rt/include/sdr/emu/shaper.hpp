// The real-time emulator's impairment stage, in software in front of a port (this kernel has
// no netem): the simulator's impairments (loss, Gilbert-Elliott bursts, duplication, extra
// delay that reorders), a fixed one-way delay line, and a rate limit. Frames that only need a
// loss decision never get copied; everything that waits is held here until its time.
#pragma once

#include <sdr/emu/impairment.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace sdr::emu {

struct ShaperParams {
    ImpairmentParams impairment;
    uint64_t delay_ns = 0;   // added one-way delay (an RTT of 2·delay between two such ports)
    double rate_gbps = 0;    // wire rate limit including 24 B of preamble, gap and FCS; 0 = none
};

struct ShaperCounters {
    uint64_t dropped = 0, duplicated = 0, delayed = 0, held_frames = 0, held_bytes = 0;
    uint64_t dropped_burst = 0;  // of dropped: in the Gilbert-Elliott bad state (the rest: i.i.d. loss)
    uint64_t ce_marked = 0;      // ECT frames marked CE (ImpairmentParams::ce_mark)
};

class Shaper {
public:
    explicit Shaper(const ShaperParams& p);

    // What happens to the next frame: `copies` = 0 (dropped), 1 or 2 (duplicated); `direct`
    // if the frame may leave now without being held (no delay, no rate limit).
    struct Verdict {
        uint32_t copies = 1;
        bool direct = true;
        bool burst = false;  // dropped in a Gilbert-Elliott burst (copies = 0)
        bool ce = false;     // mark the frame CE (mark_ce) before it leaves
        uint64_t extra_delay_ns = 0;
    };
    Verdict decide();
    void count_ce_mark() { c_.ce_marked++; }  // the caller marked a frame decide() chose
    // Hold copies of a frame until now + delay (+ extra).
    void hold(uint64_t now_ns, const uint8_t* frame, size_t len, const Verdict& v);
    // Frames whose time has come and that the rate limit lets out, oldest release first;
    // `send(data, len, note)` returns false when the port is full (the frame stays held); note
    // holds the capture_note bits of what the stage did to the frame (delayed, duplicated).
    template <class Send>
    void release(uint64_t now_ns, Send&& send)
    {
        while (!heap_.empty() && heap_.front().release_ns <= now_ns && wire_free_ns_ <= now_ns) {
            Held& h = heap_.front();
            if (!send(h.bytes.data(), h.bytes.size(), h.note)) return;
            if (rate_bits_per_ns_ > 0) wire_free_ns_ = std::max(wire_free_ns_, now_ns) + wire_ns(h.bytes.size());
            pop();
        }
    }
    // When release() has something to do next (UINT64_MAX: nothing held).
    uint64_t next_ns() const;
    bool empty() const { return heap_.empty(); }
    const ShaperCounters& counters() const { return c_; }

private:
    struct Held {
        uint64_t release_ns, seq;
        std::vector<uint8_t> bytes;
        uint8_t note;
    };
    static bool later(const Held& a, const Held& b)
    {
        return a.release_ns != b.release_ns ? a.release_ns > b.release_ns : a.seq > b.seq;
    }
    uint64_t wire_ns(size_t len) const { return static_cast<uint64_t>((len + 24) * 8 / rate_bits_per_ns_); }
    void pop();

    ShaperParams p_;
    Impairment imp_;
    double rate_bits_per_ns_ = 0;
    bool holds_ = false;  // delay or rate limit: every frame waits here
    std::vector<Held> heap_;
    std::vector<std::vector<uint8_t>> spare_;  // buffers of released frames, reused
    uint64_t seq_ = 0, wire_free_ns_ = 0;
    ShaperCounters c_;
};

}  // namespace sdr::emu
