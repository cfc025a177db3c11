#include <sdr/emu/simulator.hpp>

#include <algorithm>

namespace sdr::emu {

void Simulator::at(SimTime t, SimTarget* target, uint64_t arg)
{
    heap_.push_back(Event{t < now_ ? now_ : t, seq_++, target, arg});
    std::push_heap(heap_.begin(), heap_.end(), later);
}

bool Simulator::step()
{
    if (heap_.empty()) return false;
    std::pop_heap(heap_.begin(), heap_.end(), later);
    Event e = heap_.back();
    heap_.pop_back();
    now_ = e.t;
    events_++;
    e.target->fire(now_, e.arg);
    return true;
}

void Simulator::run_until(SimTime t)
{
    while (!heap_.empty() && heap_.front().t <= t) step();
    if (t > now_) now_ = t;
}

uint64_t Simulator::run(uint64_t max_events)
{
    uint64_t n = 0;
    while (n < max_events && step()) n++;
    return n;
}

}  // namespace sdr::emu
