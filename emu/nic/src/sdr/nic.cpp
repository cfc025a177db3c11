// The NIC's SDR engine (nic.hpp): construction, its DPA workers, events into the firmware
// (doorbells, timers) and the counters summed over workers. The other jobs have files of their
// own: memory and keys (nic_memory.cpp), transport QPs (nic_qp.cpp), the receive path and UC
// responder (nic_rx.cpp), SDR's RC transport QPs (nic_sdr_rc.cpp), the control QPs' UD
// datagrams (nic_ctrl.cpp), the send engine (nic_tx.cpp) and the HAL binding (hal_emu.cpp).
// The verbs device is the other engine (verbs_engine.hpp, src/verbs/).

#include <sdr/emu/nic.hpp>
#include <sdr/emu/wire.hpp>

#include <cstdlib>
#include <cstring>
#include <new>

namespace sdr::emu {

static_assert(wire::frame_bytes_write_imm(0) == FW_FRAME_OVERHEAD_BYTES,
              "firmware pacing must count the same frame bytes the wire carries");

// The index bits hold every transport QP and root key of 32 SDR QPs at the largest G and
// channel count (8 x 16), or of all 256 at G = 2; past that, sdr_qp_create fails cleanly.
static_assert(uint64_t{FW_MAX_GENERATIONS} * FW_MAX_CHANNELS * 32 <= 1u << NicIds::kQpnIndexBits,
              "a QPN's index bits must number the transport QPs of 32 SDR QPs at the largest G");
static_assert(uint64_t{FW_MAX_QPS} * 2 * FW_MAX_CHANNELS <= 1u << NicIds::kQpnIndexBits,
              "a QPN's index bits must number every transport QP of 256 SDR QPs at G = 2");
static_assert(uint64_t{FW_MAX_QPS} * FW_MAX_GENERATIONS <= 1u << NicIds::kRootKeyIndexBits,
              "a root key's index bits must number every root key the firmware can use");

Nic::Nic(uint32_t index, NicAddress addr, uint32_t num_workers, bool payload, NicExecutor* exec,
         std::optional<uint64_t> id_seed)
    : NicCore(index, addr, payload, exec, id_seed)
{
    (void)reconfigure_workers(num_workers);  // refused only while a QP is live: a new NIC has none
    fw_ = static_cast<fw_device*>(nic_alloc(sizeof(fw_device)));
    if (!fw_) throw std::bad_alloc();  // the firmware's device state: no NIC without it
}

Nic::~Nic() { nic_free(fw_); }

bool Nic::reconfigure_workers(uint32_t num_workers)
{
    for (const auto& q : qps_)
        if (q.live) return false;
    for (auto* v : {&workers_, &rx_workers_}) {
        *v = std::vector<hal_worker>(num_workers);
        for (uint32_t i = 0; i < num_workers; i++) {
            (*v)[i].nic = this;
            (*v)[i].index = i;
        }
    }
    return true;
}

// ---- events into the firmware ------------------------------------------------------------

void Nic::doorbell(uint32_t qp_index)
{
    hal_worker* w = tx_worker(qp_index);
    counter_add(w->doorbell_handler_calls, 1);
    fw_handle_doorbell(fw_, w, qp_index);
}

void Nic::timer_fired(uint32_t worker, uint32_t id)
{
    if (worker == kVerbsTimerWorker) {  // a verbs RC QP's timer (verbs_engine.hpp)
        if (engine_) engine_->timer(id);
        return;
    }
    if (worker == kSdrRcTimerWorker) return sdr_rc_timer(id);  // an RC transport QP's (nic_sdr_rc.cpp)
    if (worker == kDcqcnTimerWorker) {  // a paced QP may send again (nic_dcqcn.cpp)
        dcqcn_wake_ns_ = 0;
        return exec_->tx_ready(*this);
    }
    if (worker >= workers_.size()) return;
    hal_worker* w = &workers_[worker];
    counter_add(w->timer_handler_calls, 1);
    fw_handle_timer(fw_, w, id);
}

uint64_t Nic::fw_counter(uint32_t counter) const
{
    uint64_t n = 0;
    if (counter < HAL_MAX_COUNTERS)
        for (uint32_t i = 0; i < workers_.size(); i++)
            n += counter_read(workers_[i].counters[counter]) + counter_read(rx_workers_[i].counters[counter]);
    return n;
}

hal_worker Nic::worker(uint32_t i) const
{
    hal_worker sum;
    sum.nic = const_cast<Nic*>(this);
    sum.index = i;
    for (const hal_worker* w : {&workers_[i], &rx_workers_[i]}) {
        for (uint32_t c = 0; c < HAL_MAX_COUNTERS; c++) sum.counters[c] += counter_read(w->counters[c]);
        sum.window_writes += counter_read(w->window_writes);
        sum.window_adds += counter_read(w->window_adds);
        sum.window_refused += counter_read(w->window_refused);
        sum.cqe_handler_calls += counter_read(w->cqe_handler_calls);
        sum.doorbell_handler_calls += counter_read(w->doorbell_handler_calls);
        sum.timer_handler_calls += counter_read(w->timer_handler_calls);
    }
    return sum;
}

}  // namespace sdr::emu
