// Broken HALs, to show that the conformance suite catches them: linked with -Wl,--wrap for
// every hal_* call the probe makes and every fw_* entry point the backend calls
// (hal/conformance/CMakeLists.txt), each wrapper passes the call through unchanged unless
// SDR_HAL_MUTANT names its mutation. Each mutation then has a ctest test that must fail
// (HalConformance.Mutants.<mutation>), so a check that stops checking is noticed.
#include "probe.h"

#include <sdr/firmware/fw.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <utility>

extern "C" {
void __real_hal_window_write64(hal_worker*, const hal_window*, uint64_t, uint64_t);
void __real_hal_window_add64(hal_worker*, const hal_window*, uint64_t, uint64_t);
uint32_t __real_hal_tx_post(hal_worker*, const hal_tx_wqe*, uint32_t);
uint64_t __real_hal_clock_ns(hal_worker*);
void __real_hal_timer_arm(hal_worker*, uint32_t, uint64_t);
void __real_hal_counter_add(hal_worker*, uint32_t, uint64_t);
void __real_fw_handle_cqe(fw_device*, hal_worker*, const hal_cqe*);
void __real_fw_handle_doorbell(fw_device*, hal_worker*, uint32_t);
void __real_fw_handle_timer(fw_device*, hal_worker*, uint32_t);
}

namespace {

bool mutant(const char* name)
{
    static const std::string m = std::getenv("SDR_HAL_MUTANT") ? std::getenv("SDR_HAL_MUTANT") : "";
    return m == name;
}

constexpr uint64_t kMs = 1'000'000;

// The first worker the probe used: where the "one worker" mutations put everything.
hal_worker* first_worker(hal_worker* w)
{
    static std::atomic<hal_worker*> first{nullptr};
    hal_worker* expected = nullptr;
    return first.compare_exchange_strong(expected, w) ? w : expected;
}

}  // namespace

extern "C" {

void __wrap_hal_window_write64(hal_worker* w, const hal_window* win, uint64_t word, uint64_t value)
{
    uint64_t* words = reinterpret_cast<uint64_t*>(win->host_addr);
    if (word >= win->nwords) {
        // performs a write just past the window; refuses (and counts) the others
        if (mutant("window-writes-outside") && word < win->nwords + 8) return void(words[word] = value);
        if (mutant("window-refusal-uncounted")) return;
    } else if (mutant("window-write-uncounted")) {
        return void(__atomic_store_n(&words[word], value, __ATOMIC_RELEASE));
    }
    if (mutant("window-counted-on-one-worker")) w = first_worker(w);
    __real_hal_window_write64(w, win, word, value);
}

void __wrap_hal_window_add64(hal_worker* w, const hal_window* win, uint64_t word, uint64_t value)
{
    if (word >= win->nwords && mutant("window-refusal-uncounted")) return;
    if (mutant("window-counted-on-one-worker")) w = first_worker(w);
    __real_hal_window_add64(w, win, word, value);
}

uint32_t __wrap_hal_tx_post(hal_worker* w, const hal_tx_wqe* wqe, uint32_t n)
{
    if (mutant("burst-overclaims")) {  // says it took a WQE more than it did when it stops short
        const uint32_t took = __real_hal_tx_post(w, wqe, n);
        return took < n ? took + 1 : took;
    }
    if (mutant("burst-reversed") && n > 1) {  // takes the burst last WQE first
        uint32_t took = 0;
        while (took < n && __real_hal_tx_post(w, &wqe[n - 1 - took], 1) == 1) took++;
        return took;
    }
    return __real_hal_tx_post(w, wqe, n);
}

uint64_t __wrap_hal_clock_ns(hal_worker* w)
{
    thread_local uint64_t calls = 0;
    const uint64_t t = __real_hal_clock_ns(w);
    return mutant("clock-jitters-back") && (calls++ & 1) ? t - 1000 : t;
}

void __wrap_hal_timer_arm(hal_worker* w, uint32_t id, uint64_t deadline_ns)
{
    static std::mutex mu;
    static std::set<std::pair<hal_worker*, uint32_t>> armed;
    if (mutant("timer-early")) deadline_ns -= 2 * kMs;
    if (mutant("timer-rearm-ignored")) {
        std::lock_guard<std::mutex> g(mu);
        if (!armed.emplace(w, id).second) return;  // keeps the first deadline
    }
    if (mutant("timers-one-worker")) w = first_worker(w);  // single-threaded backends only
    __real_hal_timer_arm(w, id, deadline_ns);
}

void __wrap_hal_counter_add(hal_worker* w, uint32_t counter, uint64_t n)
{
    if (mutant("counter-wrong-slot")) counter = (counter + 1) % HAL_MAX_COUNTERS;
    __real_hal_counter_add(w, counter, n);
}

void __wrap_fw_handle_cqe(fw_device* dev, hal_worker* w, const hal_cqe* cqe)
{
    hal_cqe c = *cqe;
    if (mutant("cqe-imm-byte-order") && c.opcode == HAL_CQE_RECV_WRITE_IMM) c.imm = __builtin_bswap32(c.imm);
    if (mutant("cqe-cookie-lost") && c.opcode == HAL_CQE_SEND) c.wr_cookie = 0;
    __real_fw_handle_cqe(dev, w, &c);
}

void __wrap_fw_handle_doorbell(fw_device* dev, hal_worker* w, uint32_t qp_index)
{
    static std::atomic<uint32_t> calls{0};  // of the transport QP's index: the host's first, then the backend's
    if (mutant("no-doorbell-after-full") && qp_index == PROBE_TX_QP_INDEX && calls++ > 0) return;
    __real_fw_handle_doorbell(dev, w, qp_index);
}

void __wrap_fw_handle_timer(fw_device* dev, hal_worker* w, uint32_t id)
{
    __real_fw_handle_timer(dev, w, id);
    if (mutant("timer-fires-twice")) __real_fw_handle_timer(dev, w, id);
}

}  // extern "C"
