// How the fabric's time moves: purely virtual (the default: runs as fast as the host can, and
// deterministically), or paced by the wall clock (the in-memory port as a real-time emulator).
// Both keep one rule: an event at time t runs only once the clock may read t.
#include <sdr/emu/fabric.hpp>

#include <algorithm>
#include <thread>

namespace sdr::emu {

SimTime SimFabric::wall_ps() const
{
    auto d = std::chrono::steady_clock::now() - wall_zero_;
    return static_cast<SimTime>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()) * kPsPerNs;
}

// Sleep until wall time t, then spin the last stretch: a sleep alone overshoots by the timer
// slack and the scheduler (measured on this VM kind: a sleep errs by up to ms on a shared core; sleep to ~100 us before a deadline, then spin).
void SimFabric::sleep_until(SimTime t) const
{
    constexpr SimTime kSpinPs = 100'000'000;  // 100 us
    SimTime now = wall_ps();
    if (t > now + kSpinPs)
        std::this_thread::sleep_for(std::chrono::nanoseconds((t - now - kSpinPs) / kPsPerNs));
    while (wall_ps() < t) {}
}

uint64_t SimFabric::host_events() const { return host_events_.load(std::memory_order_acquire); }

uint64_t SimFabric::host_now_ns() const
{
    return (params_.wall_clock ? std::max(wall_ps(), sim_.now()) : sim_.now()) / kPsPerNs;
}

// One polling step: a batch of events, but never more than a short slice of virtual time, so
// an application that polls sees the fabric move in small steps (idle gaps are skipped: the
// slice starts at the next pending event). On a wall clock: catch up with the wall.
bool SimFabric::progress(uint64_t max_events)
{
    if (params_.wall_clock) {
        catch_up();
        return !sim_.idle();
    }
    if (sim_.idle()) return false;
    // A poll moves the clock by at most one slice when nothing is due sooner. Jumping straight
    // to a far event would carry the polling host past its own deadlines (an RTO due before a
    // packet lands 12 ms later); a busy-polling host still gets there, a slice per poll.
    if (sim_.next_time() > sim_.now() + kProgressSlicePs) {
        sim_.run_until(sim_.now() + kProgressSlicePs);
        return true;
    }
    SimTime until = sim_.next_time() + kProgressSlicePs;
    for (uint64_t n = 0; n < max_events && !sim_.idle() && sim_.next_time() <= until; n++) sim_.step();
    return true;
}

void SimFabric::catch_up()
{
    if (params_.wall_clock) sim_.run_until(wall_ps());
}

void SimFabric::wait_event(SimTime t)
{
    const uint64_t before = host_events();
    for (;;) {
        SimTime due = params_.wall_clock ? std::min(wall_ps(), t) : t;
        while (!sim_.idle() && sim_.next_time() <= due) {
            sim_.step();
            if (host_events() != before) return;
        }
        if (!params_.wall_clock || due >= t) break;
        // Wall clock, nothing due yet. With nothing pending, only the caller could make
        // something happen: an endless wait returns at once instead of hanging.
        if (sim_.idle() && t == UINT64_MAX) return;
        sleep_until(sim_.idle() ? t : std::min(t, sim_.next_time()));
    }
    if (t != UINT64_MAX) sim_.run_until(t);  // "until anything happens" leaves the clock alone
}

void SimFabric::advance_to(SimTime t)
{
    if (!params_.wall_clock) return sim_.run_until(t);
    while (sim_.now() < t) wait_event(t);
}

void SimFabric::run_until_idle()
{
    if (!params_.wall_clock) {
        while (progress()) {}
        return;
    }
    while (!sim_.idle()) wait_event(UINT64_MAX);
}

}  // namespace sdr::emu
