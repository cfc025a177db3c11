// The firmware's executor on host cores: worker threads that drain their CQs with ibv_poll_cq
// and run the firmware's handlers (fw_handle_cqe, fw_handle_doorbell, fw_handle_timer), and
// the hal_* binding they call (hal_verbs.cpp). Everything a handler touches through hal_* is
// worker-local (its post batches, timers, counters), so handlers take no lock.
#pragma once

#include <sdr/firmware/fw.h>

#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace sdr::hal_verbs {

class Executor;

// What a channel QP's work-request id says. Receives carry the QP's tag; sends carry the QP's
// tag and their post sequence number (the firmware's cookie waits in ChannelQp::cookies).
inline constexpr uint64_t kRecvWrId = 1ull << 63;
inline uint64_t send_wr_id(uint32_t tag, uint64_t seq) { return (uint64_t{tag} << 40) | (seq & ((1ull << 40) - 1)); }

// One transport QP (generation x channel of an SDR QP) and its worker-side state.
struct ChannelQp {
    ibv_qp* qp = nullptr;
    uint32_t tag = 0;
    bool rc = false;  // RC, else UC (the host's choice: sdr_qp_attr_ext.transport, SDR_USE_UC_QP)
    struct hal_worker* rx = nullptr;  // drains its receive CQEs: the channel's worker
    struct hal_worker* tx = nullptr;  // posts and drains its send CQEs: the SDR QP's worker
    uint32_t sq_depth = 0, rq_depth = 0;
    // Send side, touched by tx only. posted - freed = send-queue occupancy; a completion of
    // sequence s frees everything up to s (one send queue, completed in order).
    uint64_t posted = 0, freed = 0;
    uint32_t since_signal = 0;
    bool blocked = false;  // hal_tx_post said full: doorbell the SDR QP again when space frees
    std::vector<uint32_t> cookies;  // by sequence mod sq_depth; kNoCookie: the backend's own signal
    std::vector<ibv_send_wr> batch;  // chained, posted once per batch / handler run
    std::vector<ibv_sge> sges;
    uint32_t nbatch = 0;
    bool tx_dirty = false;  // in tx->tx_dirty
    // Receive side, touched by rx only: WQEs consumed since the last repost.
    uint32_t consumed = 0;
    bool rx_dirty = false;  // in rx->rx_dirty
    static constexpr uint32_t kNoCookie = 0xFFFFFFFFu;
};

// The portable root keys' copy (root_keys_staging.cpp): a chunk's bytes from where they landed
// into the user's buffer, before hal_window_add64 publishes the chunk's bit. Set once, before
// the workers start; none on devices whose root keys place payloads directly.
class ChunkCopier {
public:
    virtual ~ChunkCopier() = default;
    virtual void before_chunk_bit(const hal_window* win, uint64_t word, uint64_t bit) = 0;
};

// Knobs (README): worker count and cores, post batch size.
struct ExecutorParams {
    uint32_t workers = 1;
    std::vector<int> cores;      // pinned when given (one per worker, in order)
    uint32_t post_batch = 16;    // WRs chained per ibv_post_send
    uint32_t repost_batch = 64;  // receive WQEs reposted at once
};

}  // namespace sdr::hal_verbs

// The HAL's opaque worker: one thread, one CQ (its channels' receives, its SDR QPs' sends).
struct hal_worker {
    sdr::hal_verbs::Executor* ex = nullptr;
    uint32_t index = 0;
    ibv_comp_channel* channel = nullptr;
    ibv_cq* cq = nullptr;
    int event_fd = -1;   // doorbells wake the thread through it while it sleeps
    uint32_t cqe_budget = 0;  // CQEs the QPs on this CQ may hold at once (reserved at qp_create)
    std::thread thread;
    std::atomic<bool> stop{false};
    std::atomic<bool> sleeping{false};
    std::atomic<uint64_t> epoch{0};  // loop iterations: fw_qp_detach's checkpoint
    std::array<std::atomic<uint64_t>, FW_MAX_QPS / 64> doorbells{};  // SDR QPs to run
    // Worker-local below.
    std::array<uint64_t, FW_MAX_QPS> timers{};  // deadline per timer id, 0 unarmed
    uint64_t next_timer = UINT64_MAX;
    std::vector<sdr::hal_verbs::ChannelQp*> tx_dirty;  // QPs with chained WRs to post
    std::vector<uint32_t> rx_dirty;  // tags of QPs with receive WQEs to repost (looked up again)
    bool wrote_host = false;  // a window write this loop iteration: wake a waiting host
    std::array<std::atomic<uint64_t>, HAL_MAX_COUNTERS> counters{};
    std::atomic<uint64_t> window_writes{0}, window_refused{0}, post_errors{0};
};

namespace sdr::hal_verbs {

class Executor {
public:
    // Creates the workers' CQs on ctx; threads start with start(). err on failure.
    Executor(ibv_context* ctx, fw_device* fw, const ExecutorParams& p, std::string* err);
    ~Executor();
    Executor(const Executor&) = delete;
    Executor& operator=(const Executor&) = delete;
    bool ok() const { return ok_; }
    void start();

    uint32_t num_workers() const { return static_cast<uint32_t>(workers_.size()); }
    hal_worker* worker(uint32_t i) { return workers_[i].get(); }
    const ExecutorParams& params() const { return params_; }
    fw_device* firmware() { return fw_; }
    void set_copier(ChunkCopier* c) { copier_ = c; }  // before start()
    ChunkCopier* copier() const { return copier_; }

    // Register a transport QP (its tag names it in CQEs); fill its receive queue.
    bool attach(ChannelQp* q, std::string* err);
    void detach(ChannelQp* q);  // after the QP is destroyed or flushed: no CQE names it again
    ChannelQp* by_tag(uint32_t tag) const { return tags_[tag & 0xFFFF].load(std::memory_order_acquire); }

    // The host rang the doorbell of SDR QP qp_index (its ring head is published).
    void doorbell(uint32_t qp_index);
    hal_worker* tx_worker(uint32_t qp_index) { return workers_[qp_index % workers_.size()].get(); }
    hal_worker* rx_worker(uint32_t channel) { return workers_[channel % workers_.size()].get(); }
    // Wait until every worker finished the loop iteration it was in (or sleeps).
    void checkpoint();
    // Block until a worker wrote host memory (a window), one of fds is readable (the control
    // QPs' completion channels) or t_ns passed. May return early.
    void wait_event(uint64_t t_ns, const std::vector<int>& fds);
    void notify_host();
    // Post a channel QP's chained WRs (worker of q->tx only).
    void flush(hal_worker* w, ChannelQp* q);
    uint64_t counter(uint32_t c) const;

private:
    void run(hal_worker* w);
    bool poll_once(hal_worker* w);
    void handle_wc(hal_worker* w, const ibv_wc& wc);
    void run_doorbells(hal_worker* w, bool* busy);
    void run_timers(hal_worker* w, bool* busy);
    void end_run(hal_worker* w);
    void sleep(hal_worker* w);
    bool repost(ChannelQp* q, uint32_t n);

    ibv_context* ctx_;
    fw_device* fw_;
    ChunkCopier* copier_ = nullptr;
    ExecutorParams params_;
    bool ok_ = false;
    std::vector<std::unique_ptr<hal_worker>> workers_;
    std::vector<std::atomic<ChannelQp*>> tags_;
    std::atomic<uint32_t> host_events_{0};  // bumped when the firmware wrote a window
    std::atomic<uint32_t> host_waiters_{0};
    int host_fd_ = -1;  // eventfd a waiting host polls with its other fds; written while it waits
};

}  // namespace sdr::hal_verbs
