// Single-threaded discrete-event scheduler in virtual time (picoseconds).
// Events are (time, sequence, target, argument); equal times run in scheduling order, so a
// run is a pure function of its inputs and seed. Packet streams do not each own an event:
// a link holds its packets in a FIFO and keeps one event for its head (see SimLink).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sdr::emu {

using SimTime = uint64_t;  // picoseconds
inline constexpr SimTime kPsPerNs = 1000;

class SimTarget {
public:
    virtual void fire(SimTime now, uint64_t arg) = 0;

protected:
    ~SimTarget() = default;
};

class Simulator {
public:
    SimTime now() const { return now_; }
    void at(SimTime t, SimTarget* target, uint64_t arg = 0);
    // Run the earliest event; false when none is pending.
    bool step();
    // Run events up to and including time t, then set the clock to t.
    void run_until(SimTime t);
    // Run at most max_events events; returns how many ran.
    uint64_t run(uint64_t max_events);
    // Move the clock to t and count it as an event, if no pending event comes before t
    // (strictly: equal times keep their scheduling order). Lets a target that owns a stream of
    // timed items handle the next one without a round trip through the heap — exact, since
    // nothing else could have run in between.
    bool run_ahead_to(SimTime t)
    {
        if (t < now_ || pending_by(t)) return false;
        now_ = t;
        events_++;
        return true;
    }
    bool idle() const { return heap_.size() == size_t{firing_}; }
    SimTime next_time() const
    {
        const Event* e = front();
        return e ? e->t : now_;
    }
    uint64_t events_run() const { return events_; }

private:
    struct Event {
        SimTime t;
        uint64_t seq;
        SimTarget* target;
        uint64_t arg;
    };
    static bool later(const Event& a, const Event& b)
    {
        return a.t != b.t ? a.t > b.t : a.seq > b.seq;
    }
    // A binary min-heap of events. The event being fired stays at the root (firing_) until
    // its target schedules the next one, which then takes the root with one sift down: the
    // usual step of a link or a port (pop, then push) costs one sift instead of two. Equal
    // events cannot exist (seq), so the order in which they run does not depend on the layout.
    const Event* front() const
    {
        const size_t n = heap_.size();
        if (!firing_) return n ? &heap_[0] : nullptr;
        if (n < 3) return n == 2 ? &heap_[1] : nullptr;
        return later(heap_[1], heap_[2]) ? &heap_[2] : &heap_[1];
    }
    // Some pending event is due at or before t.
    bool pending_by(SimTime t) const
    {
        const Event* e = front();
        return e && e->t <= t;
    }
    void sift_down(size_t i);
    void retire_fired();  // the fired event scheduled nothing: its root goes
    std::vector<Event> heap_;
    bool firing_ = false;  // heap_[0] is the event being fired, already run
    SimTime now_ = 0;
    uint64_t seq_ = 0;
    uint64_t events_ = 0;
};

}  // namespace sdr::emu
