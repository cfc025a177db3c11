// The words a pcapng capture uses for what the link and the NIC decided about a frame (its
// opt_comment), shared by the simulator's tap, the real-time tap and sdr-pcap, which reads them
// back. The causes are the impairment stage's (impairment.hpp): i.i.d. loss and Gilbert-Elliott
// bursts drop; extra delay reorders; duplication repeats. Neither stage drops for a rate limit
// or a full ring (the real-time shaper queues without bound, and a full port ring makes it
// wait), so no frame is ever recorded with such a cause. The NIC's receive drops use the names
// of its counters (port.rx_drop.REASON, rx_drop.hpp).
#pragma once

#include <sdr/emu/rx_drop.hpp>

#include <cstring>
#include <string>

namespace sdr::emu::capture_note {

inline constexpr const char* kLossDrop = "link drop: loss (i.i.d.)";
inline constexpr const char* kBurstDrop = "link drop: burst (Gilbert-Elliott)";
inline constexpr const char* kDelayed = "link: delayed (reordered)";
inline constexpr const char* kDuplicated = "link: duplicated (a copy follows)";
inline constexpr const char* kDuplicateCopy = "link: duplicate copy";
inline constexpr const char* kInjected = "injected";
inline constexpr const char* kQueueDrop = "switch drop: queue full (drop-tail)";
inline constexpr const char* kCeMarked = "switch: ECN CE marked (RED)";
inline constexpr const char* kNoRoute = "switch drop: no route to the destination";
inline constexpr const char* kNicDropPrefix = "nic drop: ";  // + to_string(RxDrop)

// What the link did to a delivered frame, as bits; the comment lists each that is set.
enum : uint8_t { kBitDelayed = 1, kBitDuplicated = 2, kBitCopy = 4 };

inline void append(std::string* s, const char* what)
{
    if (!s->empty()) *s += "; ";
    *s += what;
}

inline void append_link(std::string* s, uint8_t bits)
{
    if (bits & kBitDelayed) append(s, kDelayed);
    if (bits & kBitDuplicated) append(s, kDuplicated);
    if (bits & kBitCopy) append(s, kDuplicateCopy);
}

// Which drop, if any, the NIC counted while one frame went through its receive path: the tap
// compares the NIC's per-reason drop counters (PortCounters::rx_drops) around Nic::rx_frame, so
// the NIC's path itself records nothing extra (only a tap writing pcapng pays for this).
class RxDropWatch {
public:
    using Counts = uint64_t[static_cast<size_t>(RxDrop::Count)];
    explicit RxDropWatch(const Counts& rx_drops) : c_(rx_drops) { std::memcpy(before_, c_, sizeof before_); }
    // Appends "nic drop: REASON" to *s if a drop was counted since construction.
    void append_reason(std::string* s) const
    {
        for (size_t i = 0; i < static_cast<size_t>(RxDrop::Count); i++)
            if (c_[i] != before_[i]) {
                append(s, (std::string(kNicDropPrefix) + to_string(static_cast<RxDrop>(i))).c_str());
                return;
            }
    }

private:
    const Counts& c_;
    Counts before_;
};

}  // namespace sdr::emu::capture_note
