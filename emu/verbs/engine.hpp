// The NIC engine of a verbs device inside the process that opened it: one real-time NIC
// (emu::RtNic: the NIC model on a raw:/xdp: port of the device's interface, its polling
// thread, the SDR_RT_* impairment stage and pcap tap), shared by every context of the device
// in the process and stopped with the last. It also routes the model's completion events to
// the provider's CQs (their channels) and resolves a peer's GID before a verb takes its lock.
#pragma once

#include "provider.hpp"

#include <sdr/emu/rt_nic.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace sdr::verbs {

class Engine {
public:
    // The device's engine, started if it is not running in this process; nullptr with errno
    // (and a message on stderr: the port's own words, e.g. "needs root") if it cannot start.
    static Engine* acquire(const PortInfo& port);
    static void release(Engine* e);

    emu::Nic& nic() { return rt_->nic(); }
    emu::VerbsEngine& verbs() { return *verbs_; }  // the NIC's verbs engine, attached at open
    std::mutex& lock() { return rt_->lock(); }
    const emu::NicAddress& address() const { return rt_->port_info().addr; }
    uint32_t netdev_mtu() const { return rt_->port_info().mtu; }

    // The next hop's MAC for an IPv4-mapped GID, waiting for the kernel if it must (call
    // without the lock): 0, EINVAL (not an IPv4-mapped GID), EHOSTUNREACH or ETIMEDOUT.
    int resolve(const ibv_gid& gid) const;

    // Under lock(): the provider's CQs and QPs by model handle.
    void set_cq(uint32_t h, Cq* cq);
    void set_qp(uint32_t h, Qp* qp);
    void set_srq(uint32_t h, Srq* srq);
    Qp* qp_by_num(uint32_t qp_num) const;
    uint32_t live_cqs = 0;

    // A poller of an empty CQ sleeps here until the NIC completes anything on this device or
    // `timeout_ns` passes, instead of spinning on a core the NIC's threads may need (a spinning
    // perftest client halved the receiving NIC's share of the core they shared). `seen` is
    // completion_seq() read before the poller last found its CQ empty.
    uint32_t completion_seq() const { return completion_seq_.load(); }
    void wait_completion(uint32_t seen, uint64_t timeout_ns);

    // The NIC's counters as "name value" lines under "# sdr-stats device=NAME" (stats.cpp);
    // takes the lock.
    std::string stats_text();

private:
    explicit Engine(std::string ibdev) : ibdev_(std::move(ibdev)) {}
    static void report_running_at_exit();  // engine.cpp
    // SDR_VERBS_STATS_AT_EXIT and SDR_VERBS_STATS_FILE (stats.cpp): read when the engine starts; the report
    // when it stops or the process exits (under g_mu).
    void stats_from_env();
    bool stats_wanted() const { return stats_at_exit_ || !stats_file_.empty(); }
    void report_stats(bool stopping);
    void on_completion(uint32_t cq, bool solicited);
    void on_async(mv::AsyncEvent ev, uint32_t h);  // async.cpp

    std::string ibdev_;
    int refs_ = 0;
    bool stats_at_exit_ = false;  // SDR_VERBS_STATS_AT_EXIT=1 when it started
    std::string stats_file_;      // SDR_VERBS_STATS_FILE, %p replaced
    int stats_pid_ = 0;           // the process that started it
    std::unique_ptr<emu::RtNic> rt_;
    emu::VerbsEngine* verbs_ = nullptr;
    std::vector<Cq*> cqs_;
    std::vector<Qp*> qps_;
    std::vector<Srq*> srqs_;
    // A futex word: bumped at every completion; the NIC wakes it only while someone sleeps on it.
    std::atomic<uint32_t> completion_seq_{0};
    std::atomic<uint32_t> waiters_{0};
};

}  // namespace sdr::verbs
