// The real-time executor: one emulated NIC on a real port (AF_XDP or AF_PACKET), driven by a
// polling thread in wall-clock time. The thread receives frames into the NIC model, whose
// receive handlers run inline or on dedicated worker threads (RtWorkers), fires firmware
// timers, and moves the send engine's packets through the impairment stage to the port; a
// frame to our own MAC never reaches the port: it is looped into our receive path, as an RDMA
// NIC loops traffic between its own QPs (on a port shared with other processes, share_port, a
// frame for their QPs goes to them instead). Host calls take the NIC lock; the host reads bitmaps
// and immediates from its memory window without it (the firmware writes them with release
// stores).
#pragma once

#include <sdr/emu/nic.hpp>
#include <sdr/emu/pcap_writer.hpp>
#include <sdr/emu/port.hpp>
#include <sdr/emu/process_share.hpp>
#include <sdr/emu/rt_workers.hpp>
#include <sdr/emu/shaper.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sdr::emu {

struct RtParams {
    PortOptions port;
    ShaperParams shaper;        // applied to what this NIC sends
    int core = -1;              // pin the polling thread to this CPU (-1: let the kernel place it)
    uint32_t worker_threads = 0;     // DPA workers on this many dedicated threads; 0: inline
    std::vector<int> worker_cores;   // pin worker thread i to worker_cores[i]
    bool busy_poll = false;     // never sleep (lowest latency, one core at 100 %)
    std::string pcap_path;      // what this NIC sent and received; empty: none; "*.pcapng":
                                // pcapng with the shaper's and the NIC's decisions
    uint32_t pcap_snaplen = 0;  // bytes kept per data frame; 0 = whole frames

    // Defaults overridden by SDR_RT_* environment variables (README); false + err if malformed.
    [[nodiscard]] static bool from_env(RtParams* out, std::string* err);
};

struct RtCounters {
    uint64_t polls = 0, idle_sleeps = 0, tx_too_big = 0;
    uint64_t looped = 0;  // frames to our own MAC, handed to our own receive path (no wire)
    uint64_t mcast_filter_errors = 0;  // group joins/leaves the port's address filter refused
};

class RtNic final : public NicExecutor {
public:
    // Opens the port and starts the polling thread; nullptr + *err if the port cannot open.
    [[nodiscard]] static std::unique_ptr<RtNic> open(const std::string& kind, const std::string& ifname, uint32_t num_workers,
                                       const RtParams& p, std::string* err);
    ~RtNic();
    RtNic(const RtNic&) = delete;
    RtNic& operator=(const RtNic&) = delete;

    Nic& nic() { return *nic_; }
    const RtParams& params() const { return p_; }
    std::mutex& lock() { return mu_; }
    const PortInfo& port_info() const { return port_->info(); }
    // Wake the polling thread (new work from the host).
    void kick();
    // Block until the NIC shows a host-visible event (Nic::host_events changes) or the clock
    // reaches deadline_ns. Call without holding the lock.
    void wait_event(uint64_t deadline_ns);

    // Snapshots, taken under the lock (port_stats reads the kernel's drop counters first).
    PortStats port_stats();
    ShaperCounters shaper_counters();
    RtCounters counters();

    // NicExecutor (called with the lock held, from the host or the polling thread)
    uint64_t now_ns() override;
    void tx_ready(Nic& nic) override;
    void arm_timer(Nic& nic, uint32_t worker, uint32_t id, uint64_t deadline_ns) override;
    bool dispatch_rx_cqe(Nic& nic, uint32_t worker, const hal_cqe& cqe) override;
    // The kernel's route and neighbour tables (neighbour.hpp), waiting at most kResolveTimeoutNs
    // for an answer. Under the lock the NIC thread waits too: resolve first without it (a
    // verbs provider does) and this finds the entry at once.
    bool resolve_mac(uint32_t ip, std::array<uint8_t, 6>* mac) override;
    static constexpr uint64_t kResolveTimeoutNs = 3'000'000'000;
    void verbs_cq_event(Nic& nic, uint32_t cq, bool solicited) override;  // the one NIC
    // A group's Ethernet address into or out of the port's filter (Port::mcast_filter); a
    // refusal counts in RtCounters::mcast_filter_errors (the group's frames may not arrive).
    void mcast_membership(Nic& nic, uint32_t group_ip, bool member) override;
    // Who hears of verbs completions (verbs_cq_event): set under the lock, called under it.
    void set_verbs_cq_listener(std::function<void(uint32_t cq, bool solicited)> f) { cq_listener_ = std::move(f); }
    void verbs_async_event(verbs::AsyncEvent ev, uint32_t handle) override
    {
        if (async_listener_) async_listener_(ev, handle);
    }
    // Who hears of verbs asynchronous events: set under the lock, called under it.
    void set_verbs_async_listener(std::function<void(verbs::AsyncEvent, uint32_t)> f) { async_listener_ = std::move(f); }
    // Share the port with the NIC models other processes run on the same interface
    // (port_share.hpp), for the verbs engine: its QPNs and CM listeners are claimed among them
    // (process_share.hpp), and a frame to our own MAC for QP1 (every model's CM) or for a verbs
    // QP another model owns reaches them through Port::tx_local. Lock held, before the first
    // verbs QP. false + *err: the port cannot (AF_XDP).
    [[nodiscard]] bool share_port(std::string* err);
    uint32_t worker_threads() const { return workers_ ? workers_->threads() : 0; }
    // Lock held (so the polling thread posts nothing new): wait for the worker threads to empty
    // their rings.
    void drain_workers()
    {
        if (workers_) workers_->drain();
    }

private:
    RtNic(const RtParams& p, std::unique_ptr<Port> port);
    void run();
    bool poll_once(uint64_t now);  // lock held; true if it did anything
    bool receive();
    bool transmit(uint64_t now);
    bool fire_timers(uint64_t now);
    uint64_t next_deadline() const;
    uint32_t capture_len(const uint8_t* f, size_t len) const;
    // Records a frame stamped at_ns (wall clock, ns since the epoch; 0: now). No-op without a capture.
    void capture(uint64_t at_ns, const uint8_t* f, size_t len);
    // pcapng: the frame on this port's "IF.tx" or "IF.rx" interface with its flags and comment.
    void capture_ng(uint64_t at_ns, const uint8_t* f, size_t len, bool tx, uint32_t flags, const std::string& note);
    void idle(uint64_t until_ns);
    void notify_host();

    RtParams p_;
    std::unique_ptr<Port> port_;
    std::unique_ptr<ProcessShare> share_;  // outlives nic_, whose verbs engine points to it
    std::unique_ptr<Nic> nic_;
    Shaper shaper_;
    PcapWriter pcap_;
    std::mutex mu_;
    std::unique_ptr<RtWorkers> workers_;
    std::mutex host_mu_;  // guards only the wait on host_cv_ (worker threads notify without mu_)
    std::condition_variable host_cv_;
    uint64_t host_events_seen_ = 0;
    bool pcap_dirty_ = false;        // written since the last flush
    uint64_t pcap_flushed_ns_ = 0;
    uint32_t pcap_tx_iface_ = 0, pcap_rx_iface_ = 0;  // pcapng interface id + 1 (0: not declared)
    uint64_t kernel_stats_read_ns_ = 0;  // last Port::read_kernel_stats
    std::map<uint64_t, uint64_t> timer_deadline_;        // (worker << 32 | id) -> deadline
    std::multimap<uint64_t, uint64_t> timer_queue_;      // deadline -> key (stale entries skipped)
    int wake_fd_ = -1;                                   // eventfd: host work for the thread
    std::vector<uint8_t> dup_;                           // a duplicated frame's second copy
    std::atomic<bool> stop_{false};
    RtCounters c_;
    std::function<void(uint32_t, bool)> cq_listener_;
    std::function<void(verbs::AsyncEvent, uint32_t)> async_listener_;
    std::thread thread_;
};

}  // namespace sdr::emu
