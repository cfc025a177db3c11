// The emulator's binding of the HAL: direct calls into the Nic, resolved at link time.
#include <sdr/emu/nic.hpp>

#include <atomic>

extern "C" {

void hal_window_write64(hal_worker* w, const hal_window* win, uint64_t word, uint64_t value)
{
    if (word >= win->nwords) {
        sdr::emu::counter_add(w->window_refused, 1);
        return;
    }
    auto* p = reinterpret_cast<uint64_t*>(win->host_addr) + word;
    __atomic_store_n(p, value, __ATOMIC_RELEASE);
    sdr::emu::counter_add(w->window_writes, 1);
    if (w->nic) w->nic->note_host_event();
}

void hal_window_add64(hal_worker* w, const hal_window* win, uint64_t word, uint64_t value)
{
    if (word >= win->nwords) {
        sdr::emu::counter_add(w->window_refused, 1);
        return;
    }
    auto* p = reinterpret_cast<uint64_t*>(win->host_addr) + word;
    __atomic_fetch_add(p, value, __ATOMIC_ACQ_REL);
    sdr::emu::counter_add(w->window_writes, 1);
    sdr::emu::counter_add(w->window_adds, 1);
    if (w->nic) w->nic->note_host_event();
}

uint32_t hal_tx_post(hal_worker* w, const hal_tx_wqe* wqe, uint32_t n) { return w->nic->hal_tx_post(w, wqe, n); }

uint64_t hal_clock_ns(hal_worker* w) { return w->nic->executor()->now_ns(); }

void hal_timer_arm(hal_worker* w, uint32_t timer_id, uint64_t deadline_ns)
{
    w->nic->executor()->arm_timer(*w->nic, w->index, timer_id, deadline_ns);
}

void hal_counter_add(hal_worker* w, uint32_t counter, uint64_t n)
{
    if (counter < HAL_MAX_COUNTERS) sdr::emu::counter_add(w->counters[counter], n);
}

}  // extern "C"
