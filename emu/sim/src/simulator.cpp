#include <sdr/emu/simulator.hpp>

namespace sdr::emu {

void Simulator::at(SimTime t, SimTarget* target, uint64_t arg)
{
    if (t < now_) t = now_;
    const uint64_t seq = seq_++;
    // A few events are cheaper in the heap (a few levels, all in L1, and the fired root's
    // slot reused); the wheel pays off once dozens are pending. The gap between switching on
    // and off keeps a count near the threshold from splitting the work between the two.
    const size_t pending = near_.size() + heap_.size();
    if (pending >= kWheelOn) wheel_on_ = true;
    else if (pending < kWheelOff) wheel_on_ = false;
    if (wheel_on_ && EventWheel::covers(now_, t)) {
        near_.push(t, seq, target, arg);
        return;
    }
    const SimEvent e{t, seq, target, arg};
    if (firing_) {  // the fired event's root slot is free
        firing_ = false;
        sift_down(0, e);
        return;
    }
    size_t i = heap_.size();
    heap_.push_back(e);
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!e.before(heap_[parent])) break;
        heap_[i] = heap_[parent];
        i = parent;
    }
    heap_[i] = e;
}

void Simulator::sift_down(size_t i, const SimEvent& e)
{
    const size_t n = heap_.size();
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && heap_[child + 1].before(heap_[child])) child++;
        if (!heap_[child].before(e)) break;
        heap_[i] = heap_[child];
        i = child;
    }
    heap_[i] = e;
}

void Simulator::retire_fired()
{
    firing_ = false;
    const SimEvent last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0, last);
}

bool Simulator::step()
{
    if (firing_) retire_fired();  // a step inside a target's fire
    const SimEvent* near = near_.front();
    if (heap_.empty() || (near && near->before(heap_[0]))) {
        if (!near) return false;
        const SimEvent e = near_.pop();
        now_ = e.t;
        events_++;
        e.target->fire(now_, e.arg);
        return true;
    }
    const SimEvent e = heap_[0];
    now_ = e.t;
    events_++;
    firing_ = true;
    e.target->fire(now_, e.arg);
    if (firing_) retire_fired();
    return true;
}

void Simulator::run_until(SimTime t)
{
    while (pending_by(t)) step();
    if (t > now_) now_ = t;
}

uint64_t Simulator::run(uint64_t max_events)
{
    uint64_t n = 0;
    while (n < max_events && step()) n++;
    return n;
}

}  // namespace sdr::emu
