#include <sdr/emu/simulator.hpp>

namespace sdr::emu {

void Simulator::at(SimTime t, SimTarget* target, uint64_t arg)
{
    const Event e{t < now_ ? now_ : t, seq_++, target, arg};
    if (firing_) {  // the fired event's root slot is free
        firing_ = false;
        heap_[0] = e;
        sift_down(0);
        return;
    }
    size_t i = heap_.size();
    heap_.push_back(e);
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!later(heap_[parent], e)) break;
        heap_[i] = heap_[parent];
        i = parent;
    }
    heap_[i] = e;
}

void Simulator::sift_down(size_t i)
{
    const size_t n = heap_.size();
    const Event e = heap_[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && later(heap_[child], heap_[child + 1])) child++;
        if (!later(e, heap_[child])) break;
        heap_[i] = heap_[child];
        i = child;
    }
    heap_[i] = e;
}

void Simulator::retire_fired()
{
    firing_ = false;
    heap_[0] = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
}

bool Simulator::step()
{
    if (firing_) retire_fired();  // a step inside a target's fire
    if (heap_.empty()) return false;
    const Event e = heap_[0];
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
