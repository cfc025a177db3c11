// Single-threaded discrete-event scheduler in virtual time (picoseconds).
// Events are (time, sequence, target, argument); equal times run in scheduling order, so a
// run is a pure function of its inputs and seed. Packet streams do not each own an event:
// a link holds its packets in a FIFO and keeps one event for its head (see SimLink).
// Once dozens are pending, events due within a few microseconds go to a timing wheel
// (event_wheel.hpp), the rest to a heap; a step runs the earlier of the two fronts.
#pragma once

#include <sdr/emu/event_wheel.hpp>

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
    // timed items handle the next one without a round trip through the scheduler — exact, since
    // nothing else could have run in between.
    bool run_ahead_to(SimTime t)
    {
        if (t < now_ || pending_by(t)) return false;
        now_ = t;
        events_++;
        return true;
    }
    bool idle() const { return !near_.front() && heap_.size() == size_t{firing_}; }
    SimTime next_time() const
    {
        const SimEvent* e = front();
        return e ? e->t : now_;
    }
    uint64_t events_run() const { return events_; }

private:
    // The far events: a binary min-heap. The event being fired stays at the root (firing_)
    // until its target schedules the next one, which then takes the root with one sift down:
    // a pop then a push costs one sift instead of two. Equal events cannot exist (seq), so the
    // order in which they run does not depend on the layout.
    const SimEvent* far_front() const
    {
        const size_t n = heap_.size();
        if (!firing_) return n ? &heap_[0] : nullptr;
        if (n < 3) return n == 2 ? &heap_[1] : nullptr;
        return heap_[2].before(heap_[1]) ? &heap_[2] : &heap_[1];
    }
    const SimEvent* front() const
    {
        const SimEvent *near = near_.front(), *far = far_front();
        return !far || (near && near->before(*far)) ? near : far;
    }
    // Some pending event is due at or before t.
    bool pending_by(SimTime t) const
    {
        const SimEvent* e = front();
        return e && e->t <= t;
    }
    // Near events go to the wheel from kWheelOn pending until fewer than kWheelOff are.
    static constexpr size_t kWheelOn = 32, kWheelOff = 8;
    void sift_down(size_t i, const SimEvent& e);  // e goes into the hole at i, or below it
    void retire_fired();  // the fired event scheduled nothing: its root goes
    EventWheel near_;
    std::vector<SimEvent> heap_;
    bool firing_ = false;  // heap_[0] is the event being fired, already run
    bool wheel_on_ = false;  // near events go to near_
    SimTime now_ = 0;
    uint64_t seq_ = 0;
    uint64_t events_ = 0;
};

}  // namespace sdr::emu
