// The verbs device's engine (engine.hpp): a process-wide table of running engines by device
// name, their start and stop, and the completion listener that raises channel events.
#include "engine.hpp"

#include <sdr/emu/neighbour.hpp>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

namespace sdr::verbs {
namespace {

std::mutex g_mu;
std::map<std::string, Engine*> g_engines;  // by device name

}  // namespace

// SDR_VERBS_STATS_AT_EXIT / SDR_VERBS_STATS_FILE: the engines still running when the process
// exits report their counters (registered after g_engines was built, so this runs before it is
// destroyed).
// An exit while another thread holds g_mu reports nothing rather than wait.
void Engine::report_running_at_exit()
{
    std::unique_lock g(g_mu, std::try_to_lock);
    if (!g.owns_lock()) return;
    for (const auto& [name, e] : g_engines) e->report_stats(false);
}

Engine* Engine::acquire(const PortInfo& port)
{
    std::lock_guard g(g_mu);
    auto it = g_engines.find(port.ibdev);
    if (it != g_engines.end()) {
        it->second->refs_++;
        return it->second;
    }
    emu::RtParams p;
    std::string err;
    if (!emu::RtParams::from_env(&p, &err)) {
        std::fprintf(stderr, "sdr verbs %s: %s\n", port.ibdev.c_str(), err.c_str());
        errno = EINVAL;
        return nullptr;
    }
    // Its programs wait on round trips: a raw: port's frames are ours as they land, unless
    // SDR_RT_RAW_RING says otherwise.
    if (!std::getenv("SDR_RT_RAW_RING")) p.port.frame_ring = true;
    // Verbs QPs need no DPA worker; the model's SDR side keeps one, idle.
    auto rt = emu::RtNic::open(port.kind, port.netdev, 1, p, &err);
    if (!rt) {
        std::fprintf(stderr, "sdr verbs %s: %s\n", port.ibdev.c_str(), err.c_str());
        errno = ENODEV;
        return nullptr;
    }
    Engine* e = nullptr;
    try {
        e = new Engine(port.ibdev);
        // Every handle the model can give, so that set_cq/set_qp never allocate (or throw)
        // under the lock.
        e->cqs_.reserve(Limits::kMaxCq);
        e->qps_.reserve(Limits::kMaxQp);
        e->srqs_.reserve(Limits::kMaxSrq);
        g_engines[port.ibdev] = e;
    } catch (const std::bad_alloc&) {
        delete e;
        errno = ENOMEM;
        return nullptr;
    }
    e->rt_ = std::move(rt);
    e->refs_ = 1;
    e->stats_from_env();
    if (e->stats_wanted()) {
        static std::once_flag registered;
        std::call_once(registered, [] { std::atexit(report_running_at_exit); });
    }
    std::lock_guard l(e->lock());
    e->verbs_ = &e->rt_->nic().verbs();  // attached under the lock: the polling thread reads it
    // Other processes may open the device too, each with its own NIC model on the interface,
    // as processes share one kernel device (README.md, "Several processes on one device").
    // AF_XDP cannot: its queue takes this process alone.
    if (e->rt_->port_info().kind == "raw" && !e->rt_->share_port(&err))
        std::fprintf(stderr, "sdr verbs %s: %s\n", port.ibdev.c_str(), err.c_str());
    e->rt_->set_verbs_cq_listener([e](uint32_t cq, bool solicited) { e->on_completion(cq, solicited); });
    e->rt_->set_verbs_async_listener([e](mv::AsyncEvent ev, uint32_t h) { e->on_async(ev, h); });
    return e;
}

void Engine::release(Engine* e)
{
    std::lock_guard g(g_mu);
    if (--e->refs_ > 0) return;
    g_engines.erase(e->ibdev_);
    e->report_stats(true);
    e->rt_.reset();  // stops the polling thread, closes the port
    delete e;
}

int Engine::resolve(const ibv_gid& gid) const
{
    mv::Gid g;
    std::copy(std::begin(gid.raw), std::end(gid.raw), g.begin());
    uint32_t ip;
    if (!mv::ipv4_from_gid(g, &ip)) return EINVAL;  // RoCEv2 over IPv4 only
    if (emu::wire::is_ipv4_multicast(ip)) return 0;  // a group: no neighbour, its MAC follows from it
    std::array<uint8_t, 6> mac;
    const emu::PortInfo& pi = rt_->port_info();
    return emu::resolve_neighbour(pi.ifname, pi.addr, ip, emu::RtNic::kResolveTimeoutNs, &mac);
}

// Within the capacity reserved at start: the model's CQ handles stay below the live CQs
// (create_cq bounds them by Limits::kMaxCq), its QP handles below Limits::kMaxQp.
void Engine::set_cq(uint32_t h, Cq* cq)
{
    if (h >= cqs_.size()) cqs_.resize(h + 1, nullptr);
    cqs_[h] = cq;
}

void Engine::set_qp(uint32_t h, Qp* qp)
{
    if (h >= qps_.size()) qps_.resize(h + 1, nullptr);
    qps_[h] = qp;
}

void Engine::set_srq(uint32_t h, Srq* srq)
{
    if (h >= srqs_.size()) srqs_.resize(h + 1, nullptr);
    srqs_[h] = srq;
}

Qp* Engine::qp_by_num(uint32_t qp_num) const
{
    const uint32_t h = emu::NicIds::qpn_index(qp_num) & (emu::Nic::kVerbsQpnBit - 1);
    Qp* q = h < qps_.size() ? qps_[h] : nullptr;
    return q && q->qp.qp_num == qp_num ? q : nullptr;
}

// Lock held (the NIC's thread, or a host thread whose verb flushed a queue). An armed CQ
// writes its event (the ibv_cq pointer, as ibv_get_cq_event reads it) and disarms. A CQ armed
// for solicited completions only (ibv_req_notify_cq(cq, 1)) stays armed through the others:
// it fires for a receive whose message carried the solicited-event bit, or an error completion.
void Engine::on_completion(uint32_t h, bool solicited)
{
    Cq* cq = h < cqs_.size() ? cqs_[h] : nullptr;
    if (!cq) return;
    cq->produced.fetch_add(1, std::memory_order_release);
    // Sequentially consistent with wait_completion's waiters_ increment: either this sees the
    // sleeper, or the sleeper sees the new sequence and does not sleep.
    completion_seq_.fetch_add(1);
    if (waiters_.load() != 0) syscall(SYS_futex, &completion_seq_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
    if (cq->event_fd < 0) return;
    int arm = cq->armed.load(std::memory_order_relaxed);
    do {
        if (arm == 0 || (arm == 2 && !solicited)) return;
    } while (!cq->armed.compare_exchange_weak(arm, 0));
    const uint64_t ev = reinterpret_cast<uintptr_t>(&cq->vcq.cq);
    // Non-blocking: a pipe full of unread events (8192 of them) loses this one rather than
    // stopping the NIC.
    const ssize_t n = write(cq->event_fd, &ev, sizeof ev);
    (void)n;
}

void Engine::wait_completion(uint32_t seen, uint64_t timeout_ns)
{
    waiters_.fetch_add(1);
    if (completion_seq_.load() == seen) {
        const timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000), static_cast<long>(timeout_ns % 1'000'000'000)};
        syscall(SYS_futex, &completion_seq_, FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
    }
    waiters_.fetch_sub(1);
}

}  // namespace sdr::verbs
