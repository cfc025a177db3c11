// The near future of the Simulator's events: a timing wheel. Almost every event a packet makes
// is due within a microsecond or so (a serialisation, a hop, the next packet of a link's FIFO),
// and with hundreds to thousands of them pending a heap spends most of the run sifting through
// ~10 levels of unpredictable branches. Here an event costs O(1): it goes into the bucket of its
// time, and the earliest one is found by a bitmap. Events further out stay in the Simulator's
// heap; the Simulator runs whichever front is earlier, so the order stays exactly (t, seq).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sdr::emu {

class SimTarget;

// One scheduled event. seq is unique (scheduling order), so (t, seq) is a total order.
struct SimEvent {
    uint64_t t;  // picoseconds
    uint64_t seq;
    SimTarget* target;
    uint64_t arg;
    bool before(const SimEvent& o) const { return t != o.t ? t < o.t : seq < o.seq; }
};

class EventWheel {
public:
    // 16384 buckets of 256 ps: a window of 4.2 us from the clock's bucket. Narrow buckets hold
    // a time or two each in a 128-host fat tree at 100 Gbit/s (~3.5 events per ns), so an
    // insert rarely walks; the summary bitmap keeps a sparse wheel's search short.
    static constexpr unsigned kWidthBits = 8;
    static constexpr size_t kBuckets = size_t{1} << 14;

    EventWheel();
    // Whether an event at t >= now fits in the window that starts at now's bucket. Every event
    // in the wheel then lies within one turn of the clock, so a bucket never holds two turns.
    static bool covers(uint64_t now, uint64_t t) { return (t >> kWidthBits) - (now >> kWidthBits) < kBuckets; }
    // t >= the clock, covers(clock, t), and seq the highest yet. The fields come in registers:
    // an event built on the caller's stack and read back whole would wait for the stores
    // before it (a failed store-to-load forward), behind whatever the fired target wrote.
    void push(uint64_t t, uint64_t seq, SimTarget* target, uint64_t arg);
    const SimEvent* front() const { return front_ == kNil ? nullptr : &nodes_[front_].e; }
    size_t size() const { return size_; }
    // Takes the front off; the clock is then at its time. Not empty.
    SimEvent pop();

private:
    static constexpr uint32_t kNil = ~0u;
    static constexpr size_t kWords = kBuckets / 64;
    // A bucket is a list of time groups sorted by time, each group a FIFO of the events at
    // exactly that time: a new event has the highest seq, so it goes last in its group. Many
    // events share a time (links of one rate started together), and a list sorted by (t, seq)
    // would walk past them all.
    struct Node {
        SimEvent e;
        uint32_t next;        // in its group (the free list too)
        uint32_t next_group;  // of a group's first node: the next group in its bucket
        uint32_t last;        // of a group's first node: the group's last node
    };
    static size_t bucket(uint64_t t) { return (t >> kWidthBits) & (kBuckets - 1); }
    // The first non-empty bucket from b on, one turn around; kNil when the wheel is empty.
    uint32_t first_from(size_t b) const;
    std::vector<Node> nodes_;       // a pool, linked by index
    uint32_t free_ = kNil;          // unused nodes
    std::vector<uint32_t> head_;    // per bucket: its first group's first node
    std::vector<uint64_t> used_;    // a bit per non-empty bucket
    std::vector<uint64_t> summary_; // a bit per non-zero word of used_
    uint32_t front_ = kNil;         // the earliest node: the head of its bucket
    size_t size_ = 0;
};

}  // namespace sdr::emu
