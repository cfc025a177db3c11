// Background traffic for the simulated fabric, as datacenter studies drive their networks
// (HPCC's traffic_gen, htsim's connection matrices): flows of RDMA WRITEs over RC QPs of the
// NICs' verbs engines, started by workloads (Poisson arrivals with sizes from an empirical CDF,
// a permutation, an incast), each timed from its arrival to its last acknowledged WQE.
//
// The generator lives in the fabric: a SimTarget whose events run on the fabric's Simulator,
// with no host thread. It learns of completions from the fabric's verbs CQ listener at the
// event that made them and polls that CQ at the same virtual time, so a flow's completion time
// is exact. It runs beside anything else on the fabric (SDR transfers of libsdr hosts): NICs
// are addressed by index, as SimFabric::nic is, whatever joins them.
#pragma once

#include <sdr/emu/fabric.hpp>
#include <sdr/emu/rng.hpp>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sdr::emu {

// An empirical flow-size distribution: points (size in bytes, cumulative probability), sampled by
// inverse transform with linear interpolation between points (as HPCC's traffic_gen and the
// DCTCP/pFabric simulations do). A first point with probability p > 0 is a mass p at its size.
class FlowSizeCdf {
public:
    struct Point {
        double bytes, p;
    };
    // Our text format: one point per line, "size_bytes cumulative_probability"; '#' starts a
    // comment; blank lines are skipped. Sizes and probabilities never decrease, probabilities lie
    // in [0, 1] and the last is 1. false + *err ("line N: ...") otherwise; *out is kept.
    [[nodiscard]] static bool parse(std::string_view text, FlowSizeCdf* out, std::string* err);
    // A built-in distribution by name, or else a file in the format above.
    [[nodiscard]] static bool named(const std::string& name_or_path, FlowSizeCdf* out, std::string* err);
    // The built-in distributions (emu/sim/data/*.cdf, compiled in): "websearch" (Alizadeh et al.,
    // DCTCP, SIGCOMM 2010), "datamining" (Greenberg et al., VL2, SIGCOMM 2009).
    static std::vector<std::string> builtin_names();

    uint64_t sample(Rng& rng) const;  // bytes, rounded, at least 1
    double mean_bytes() const;        // of the interpolated distribution
    const std::vector<Point>& points() const { return points_; }
    const std::string& name() const { return name_; }

private:
    std::vector<Point> points_;
    std::string name_;
};

// What every flow of a generator shares.
struct TrafficParams {
    uint32_t mtu = 4096;                // the QPs' path MTU (256..4096, a power of two)
    uint64_t wqe_bytes = 1ull << 20;    // a flow is posted as RDMA WRITEs of at most this
    uint32_t max_outstanding = 64;      // WQEs of a flow posted and not yet completed
    // Host link rate for the load formula and the ideal FCT, Gbit/s; 0: the fabric's link rate.
    double host_gbps = 0;
    // Unloaded round trip between two hosts, ps, for the ideal FCT; empty: the fabric's link RTT
    // plus one ACK frame's wire time (a topology supplies its own per pair).
    std::function<SimTime(uint32_t src, uint32_t dst)> base_rtt;
    // RC local ACK timeout, the IBTA exponent (4.096 us * 2^t); 0: at least 14 (67 ms) and at
    // least 8 link RTTs. retry_cnt: retransmissions before a flow fails.
    uint8_t rc_timeout = 0, retry_cnt = 7;
    // Each flow writes from its own buffer of a per-flow pattern into its own buffer at the
    // receiver, checked when it completes (tests). Off: every flow reads one shared buffer and
    // the receiver discards the bytes (a root key's NULL entry), so memory does not grow with
    // sizes or flows.
    bool verify_payload = false;
};

// Flows between uniformly random pairs (src != dst) of `hosts`, arriving as a Poisson process
// from `start` until `start + duration`, sizes from `cdf`. Mean inter-arrival time (HPCC's
// traffic_gen: each host offers `load` of its link):
//   mean_gap = mean_size * 8 / (load * host_rate * hosts.size())
// With `dsts`, a flow goes from a random host of `hosts` to a random host of `dsts` (the two
// sets disjoint): traffic that must cross between two groups, such as two datacenters' hosts
// across their long haul. The formula is the same: the senders, `hosts`, offer the load.
struct PoissonWorkload {
    std::vector<uint32_t> hosts;
    double load = 0.5;  // offered load per host, a fraction of its link, > 0
    FlowSizeCdf cdf;
    SimTime start = 0, duration = 0;  // ps
    std::vector<uint32_t> dsts;  // empty: pairs within `hosts`
};

// One flow of `size` bytes from every host, all at `start`: host i to pi(i), a uniformly random
// derangement of `hosts` (no host sends to itself), or with `shift` htsim's i -> (i + n/2) % n.
struct PermutationWorkload {
    std::vector<uint32_t> hosts;
    uint64_t size = 0;
    SimTime start = 0;
    bool shift = false;
};

// N senders to one receiver, the same size, all at `start`.
struct IncastWorkload {
    std::vector<uint32_t> senders;
    uint32_t receiver = 0;
    uint64_t size = 0;
    SimTime start = 0;
};

// One flow as the CSV has it. fct: arrival to the sender's last completion (RC: acknowledged);
// rx_fct: arrival to the receiver's completion of the last WQE (its WRITE with immediate);
// ideal: base RTT + the flow's frames at the host link rate; slowdown = fct / ideal.
struct FlowRecord {
    uint64_t id = 0;
    uint32_t src = 0, dst = 0;
    uint64_t size_bytes = 0;
    uint64_t start_ns = 0, fct_ns = 0, rx_fct_ns = 0, ideal_fct_ns = 0;
    double slowdown = 0;
};

// Slowdown statistics of completed flows, all and by size (HPCC's FCT analysis): quantiles by
// interpolation between order statistics (as sdr_sweep's).
struct FctStats {
    uint64_t count = 0;
    double mean_fct_ns = 0, mean = 0, p50 = 0, p95 = 0, p99 = 0;  // NaN when count is 0
};
struct FctSummary {
    uint64_t flows = 0, completed = 0, failed = 0;  // failed: an error completion (RC retries out)
    uint64_t payload_errors = 0;                    // verify_payload: flows whose bytes differ
    FctStats all;
    static constexpr uint64_t kSmallMax = 100'000, kMediumMax = 1'000'000;  // bytes, inclusive
    FctStats small, medium, large;  // < 100 KB, 100 KB - 1 MB, > 1 MB
};

class TrafficGenerator final : public SimTarget {
public:
    // Takes the fabric's verbs CQ listener (one per fabric) until destroyed. Its random stream is
    // derived from the fabric's seed, apart from the links' and the NICs': a run replays. Destroy
    // it before the fabric, and run the fabric no further afterwards: its pending events name it.
    explicit TrafficGenerator(SimFabric& fabric, TrafficParams params = {});
    ~TrafficGenerator();
    TrafficGenerator(const TrafficGenerator&) = delete;
    TrafficGenerator& operator=(const TrafficGenerator&) = delete;

    // Workloads, added before or while the fabric runs (a start in the past is now). Hosts are
    // NIC indices, created on first use. false + *err on bad input, nothing added.
    [[nodiscard]] bool add_poisson(const PoissonWorkload& w, std::string* err);
    [[nodiscard]] bool add_permutation(const PermutationWorkload& w, std::string* err);
    [[nodiscard]] bool add_incast(const IncastWorkload& w, std::string* err);
    [[nodiscard]] bool add_flow(uint32_t src, uint32_t dst, uint64_t size, SimTime start, std::string* err);

    // Every flow added has completed or failed and no Poisson arrival is due: the fabric may
    // stop. run() drives the fabric until then (or until it idles: a flow that cannot finish).
    bool done() const;
    void run();

    const TrafficParams& params() const { return params_; }
    // Completed flows, in the order they completed.
    const std::vector<FlowRecord>& records() const { return records_; }
    FctSummary summary() const;
    // "flow_id,src,dst,size_bytes,start_ns,fct_ns,ideal_fct_ns,slowdown,rx_fct_ns", one row per
    // completed flow, by flow id.
    void write_csv(std::ostream& out) const;
    static void write_summary(std::ostream& out, const FctSummary& s);

    // Host link rate (Gbit/s) and the ideal FCT of a flow as records() computes them.
    double host_gbps() const;
    SimTime ideal_fct_ps(uint32_t src, uint32_t dst, uint64_t size) const;

    void fire(SimTime now, uint64_t arg) override;

private:
    struct Host;
    struct Flow;
    struct Poisson;
    struct Buffers;
    Host& host(uint32_t index);
    void new_flow(uint32_t src, uint32_t dst, uint64_t size, SimTime start);
    void start_flow(uint64_t id);
    void post_writes(Flow& f, uint64_t id);
    void poll(uint64_t id, bool sender);
    void finish(uint64_t id, bool ok);
    void arrive(size_t workload);
    void on_cq(Nic& nic, uint32_t cq);
    uint64_t wire_bytes(uint64_t size) const;
    SimTime default_base_rtt(uint32_t src, uint32_t dst, uint64_t size) const;
    bool check_host(uint32_t h, std::string* err) const;
    bool check_size(uint64_t size, std::string* err) const;

    SimFabric& fabric_;
    TrafficParams params_;
    Rng rng_;
    uint8_t rc_timeout_ = 14;
    std::vector<std::unique_ptr<Host>> hosts_;  // by NIC index
    std::vector<Flow> flows_;                   // by flow id
    std::vector<Poisson> poisson_;
    std::vector<std::unique_ptr<Buffers>> buffers_;  // verify_payload: by flow id, while it runs
    std::unique_ptr<uint8_t[]> source_;              // the shared source of every WQE otherwise
    std::vector<FlowRecord> records_;
    uint64_t unfinished_ = 0, failed_ = 0, payload_errors_ = 0, arrivals_due_ = 0;
};

}  // namespace sdr::emu
