// The traffic generator (traffic.hpp): workloads make flows; a flow is an RC QP pair of its own
// (created at its arrival, connected in-process, destroyed when it completes: a late frame of an
// old flow finds no QP and is dropped as such, never taken for a new one), WRITEs of at most
// wqe_bytes with at most max_outstanding posted, the last one with immediate so that the receiver
// sees its end. Each side's CQ is the flow's own, sized to what can be outstanding on it, so it
// never overflows; the fabric's CQ listener names the CQ and the flow is polled at that time.
#include <sdr/emu/traffic.hpp>
#include <sdr/emu/verbs_engine.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace sdr::emu {

using verbs::QpAttr;
using verbs::QpState;
using verbs::WcOpcode;
using verbs::WcStatus;
using verbs::WrOpcode;

namespace {

constexpr uint32_t kNone = VerbsEngine::kNoHandle;

// Event kinds, in the low bits of a SimTarget argument (the rest: a flow id or a workload).
enum Kind : uint64_t { kStart = 0, kArrival = 1, kPollSender = 2, kPollReceiver = 3 };
constexpr uint64_t arg(uint64_t id, Kind k) { return id << 2 | k; }

// Separate from the links' and the NICs' streams (fabric.cpp): a generator added to a run
// changes no loss pattern and no QPN of what was there before.
uint64_t stream_seed(uint64_t fabric_seed) { return (fabric_seed ^ 0x5851F42D4C957F2Dull) * 0xBF58476D1CE4E5B9ull + 0x7472616666696321ull; }

bool valid_mtu(uint32_t m) { return m >= 256 && m <= 4096 && (m & (m - 1)) == 0; }

// The bytes of a flow's source buffer in verify_payload mode: differ by flow and offset.
uint8_t pattern(uint64_t id, uint64_t off)
{
    uint64_t x = (id + 1) * 0x9E3779B97F4A7C15ull + off;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    return static_cast<uint8_t>(x >> 56);
}

std::string params_error(const TrafficParams& p)
{
    if (!valid_mtu(p.mtu)) return "mtu " + std::to_string(p.mtu) + ": a power of two in 256..4096";
    if (p.wqe_bytes == 0 || p.wqe_bytes > (1ull << 31)) return "wqe_bytes: 1..2^31";
    if (p.max_outstanding == 0 || p.max_outstanding > 16384) return "max_outstanding: 1..16384";
    if (!(p.host_gbps >= 0) || !std::isfinite(p.host_gbps)) return "host_gbps: >= 0 (0: the fabric's)";
    if (p.rc_timeout > 31) return "rc_timeout: 0..31";
    if (p.retry_cnt > 7) return "retry_cnt: 0..7";
    return {};
}

}  // namespace

struct TrafficGenerator::Host {
    VerbsEngine* v = nullptr;
    uint32_t pd = kNone;
    uint32_t source_key = 0;  // the shared source (not verify_payload)
    uint32_t sink_key = 0;    // a root key whose one slot is the NULL key: writes are discarded
    std::vector<uint64_t> cq_flow;  // by CQ handle: the flow id + 1 of our CQs, 0 for others
};

// ~64 bytes: a run keeps one per flow.
struct TrafficGenerator::Flow {
    uint32_t src = 0, dst = 0;
    uint64_t size = 0;
    SimTime start = 0, rx_done = 0;
    uint32_t sqp = kNone, rqp = kNone, scq = kNone, rcq = kNone;
    uint32_t wqes = 0, posted = 0, completed = 0;
    bool running = false, poll_sender = false, poll_receiver = false;
};

struct TrafficGenerator::Poisson {
    std::vector<uint32_t> hosts, dsts;
    FlowSizeCdf cdf;
    double mean_gap_ps = 0;
    SimTime end = 0;
};

// verify_payload: the flow's own source (its pattern) and destination.
struct TrafficGenerator::Buffers {
    std::unique_ptr<uint8_t[]> src, dst;
    uint32_t src_key = 0, dst_key = 0;
};

TrafficGenerator::TrafficGenerator(SimFabric& fabric, TrafficParams params)
    : fabric_(fabric), params_(std::move(params)), rng_(stream_seed(fabric.params().seed))
{
    // The RC timeout must outlast a round trip and its queues: at least 8 link RTTs, and never
    // below the 67 ms (14) perftest and most NICs use.
    rc_timeout_ = params_.rc_timeout;
    if (!rc_timeout_) {
        const double rtt_ns = fabric_.params().link.rtt_ms * 1e6;
        for (rc_timeout_ = 14; rc_timeout_ < 31 && static_cast<double>(4096ull << rc_timeout_) < 8 * rtt_ns;)
            rc_timeout_++;
    }
    fabric_.set_verbs_cq_listener([this](Nic& nic, uint32_t cq) { on_cq(nic, cq); });
}

TrafficGenerator::~TrafficGenerator() { fabric_.set_verbs_cq_listener(nullptr); }

double TrafficGenerator::host_gbps() const
{
    return params_.host_gbps > 0 ? params_.host_gbps : fabric_.params().link.bandwidth_gbps;
}

// ---- workloads ----------------------------------------------------------------------------

// A flow's WQEs are counted in 32 bits.
bool TrafficGenerator::check_size(uint64_t size, std::string* err) const
{
    if (size > 0 && size / params_.wqe_bytes < UINT32_MAX) return true;
    *err = "size " + std::to_string(size) + ": at least 1 byte and below 2^32 WQEs";
    return false;
}

bool TrafficGenerator::check_host(uint32_t h, std::string* err) const
{
    if (h < 0xFFFF) return true;  // SimFabric::address_of names NICs below 65535 apart
    *err = "host " + std::to_string(h) + ": NIC indices are 0..65534";
    return false;
}

static bool distinct(std::vector<uint32_t> v)
{
    std::sort(v.begin(), v.end());
    return std::adjacent_find(v.begin(), v.end()) == v.end();
}

bool TrafficGenerator::add_poisson(const PoissonWorkload& w, std::string* err)
{
    if (std::string e = params_error(params_); !e.empty()) return *err = e, false;
    if (w.dsts.empty() && (w.hosts.size() < 2 || !distinct(w.hosts)))
        return *err = "poisson: at least 2 hosts, each once", false;
    std::vector<uint32_t> all = w.hosts;
    all.insert(all.end(), w.dsts.begin(), w.dsts.end());
    if (!w.dsts.empty() && (w.hosts.empty() || !distinct(all)))
        return *err = "poisson: at least 1 host and 1 destination, each once, none both", false;
    for (const auto* set : {&w.hosts, &w.dsts})
        for (uint32_t h : *set)
            if (!check_host(h, err)) return false;
    if (!(w.load > 0) || !std::isfinite(w.load)) return *err = "poisson: load must be > 0", false;
    if (w.cdf.points().empty()) return *err = "poisson: no flow-size distribution", false;
    if (!check_size(static_cast<uint64_t>(w.cdf.points().back().bytes) + 1, err)) return false;
    if (w.duration == 0) return *err = "poisson: duration must be > 0", false;
    // mean_gap = mean_size * 8 / (load * host_rate * hosts), in ps (rate in bit/ps = Gbit/s / 1000)
    const double gap = w.cdf.mean_bytes() * 8 / (w.load * host_gbps() / 1000.0 * static_cast<double>(w.hosts.size()));
    if (!(gap > 0) || !std::isfinite(gap)) return *err = "poisson: the distribution's mean size must be > 0", false;
    const SimTime start = std::max(w.start, fabric_.sim().now());
    poisson_.push_back(Poisson{w.hosts, w.dsts, w.cdf, gap, start + w.duration});
    // The first arrival one gap after the start, as every later one follows the one before.
    const SimTime first = start + static_cast<SimTime>(std::llround(-std::log1p(-rng_.uniform()) * gap));
    if (first < poisson_.back().end) {
        arrivals_due_++;
        fabric_.sim().at(first, this, arg(poisson_.size() - 1, kArrival));
    }
    return true;
}

// A uniformly random index in [0, n).
static uint32_t pick(Rng& rng, size_t n) { return std::min(static_cast<uint32_t>(rng.uniform() * static_cast<double>(n)), static_cast<uint32_t>(n - 1)); }

bool TrafficGenerator::add_permutation(const PermutationWorkload& w, std::string* err)
{
    if (std::string e = params_error(params_); !e.empty()) return *err = e, false;
    const size_t n = w.hosts.size();
    if (n < 2 || !distinct(w.hosts)) return *err = "permutation: at least 2 hosts, each once", false;
    for (uint32_t h : w.hosts)
        if (!check_host(h, err)) return false;
    if (!check_size(w.size, err)) return false;
    std::vector<uint32_t> to(n);
    if (w.shift) {
        for (size_t i = 0; i < n; i++) to[i] = static_cast<uint32_t>((i + n / 2) % n);
    } else {
        // A uniform derangement: shuffle (Fisher-Yates, our own stream) until no host is its own
        // destination; e ~ 2.7 shuffles on average.
        for (bool fixed = true; fixed;) {
            for (size_t i = 0; i < n; i++) to[i] = static_cast<uint32_t>(i);
            for (size_t i = n - 1; i > 0; i--) std::swap(to[i], to[pick(rng_, i + 1)]);
            fixed = false;
            for (size_t i = 0; i < n; i++) fixed |= to[i] == i;
        }
    }
    for (size_t i = 0; i < n; i++) new_flow(w.hosts[i], w.hosts[to[i]], w.size, w.start);
    return true;
}

bool TrafficGenerator::add_incast(const IncastWorkload& w, std::string* err)
{
    if (std::string e = params_error(params_); !e.empty()) return *err = e, false;
    if (w.senders.empty() || !distinct(w.senders)) return *err = "incast: at least 1 sender, each once", false;
    if (std::find(w.senders.begin(), w.senders.end(), w.receiver) != w.senders.end())
        return *err = "incast: the receiver is also a sender", false;
    for (uint32_t h : w.senders)
        if (!check_host(h, err)) return false;
    if (!check_host(w.receiver, err)) return false;
    if (!check_size(w.size, err)) return false;
    for (uint32_t s : w.senders) new_flow(s, w.receiver, w.size, w.start);
    return true;
}

bool TrafficGenerator::add_flow(uint32_t src, uint32_t dst, uint64_t size, SimTime start, std::string* err)
{
    if (std::string e = params_error(params_); !e.empty()) return *err = e, false;
    if (!check_host(src, err) || !check_host(dst, err)) return false;
    if (src == dst) return *err = "flow: source and destination are the same host", false;
    if (!check_size(size, err)) return false;
    new_flow(src, dst, size, start);
    return true;
}

void TrafficGenerator::new_flow(uint32_t src, uint32_t dst, uint64_t size, SimTime start)
{
    const uint64_t id = flows_.size();
    Flow& f = flows_.emplace_back();
    f.src = src;
    f.dst = dst;
    f.size = size;
    f.start = std::max(start, fabric_.sim().now());
    f.wqes = static_cast<uint32_t>((size + params_.wqe_bytes - 1) / params_.wqe_bytes);
    host(src);  // the NICs exist from now on (frames to a NIC not created are lost)
    host(dst);
    unfinished_++;
    fabric_.sim().at(f.start, this, arg(id, kStart));
}

void TrafficGenerator::arrive(size_t w)
{
    Poisson& p = poisson_[w];
    const uint32_t a = pick(rng_, p.hosts.size());
    uint32_t dst;
    if (p.dsts.empty()) {
        uint32_t b = pick(rng_, p.hosts.size() - 1);
        if (b >= a) b++;  // uniform over the others
        dst = p.hosts[b];
    } else {
        dst = p.dsts[pick(rng_, p.dsts.size())];
    }
    const uint64_t size = p.cdf.sample(rng_);
    const SimTime now = fabric_.sim().now();
    new_flow(p.hosts[a], dst, size, now);
    const SimTime next = now + static_cast<SimTime>(std::llround(-std::log1p(-rng_.uniform()) * p.mean_gap_ps));
    if (next < p.end) {
        fabric_.sim().at(next, this, arg(w, kArrival));
    } else {
        arrivals_due_--;
    }
}

// ---- flows --------------------------------------------------------------------------------

TrafficGenerator::Host& TrafficGenerator::host(uint32_t index)
{
    if (index >= hosts_.size()) hosts_.resize(index + 1);
    if (hosts_[index]) return *hosts_[index];
    hosts_[index] = std::make_unique<Host>();
    Host& h = *hosts_[index];
    h.v = &fabric_.nic(index, 1).verbs();  // a NIC that exists keeps its workers
    h.pd = h.v->pd_alloc();
    if (h.pd == kNone || params_.verify_payload) return h;
    if (!source_) source_ = std::make_unique<uint8_t[]>(params_.wqe_bytes);
    h.source_key = h.v->mr_reg(h.pd, source_.get(), params_.wqe_bytes, 0);
    h.sink_key = h.v->root_key_create(h.pd, 1, params_.wqe_bytes);
    if (!h.source_key || !h.sink_key) h.pd = kNone;  // no flow can use this host
    return h;
}

// A PSN from the flow id: the QPs' first PSNs differ from flow to flow and cross the 24-bit wrap
// now and then, with no draw from the workloads' stream.
static uint32_t first_psn(uint64_t id, uint64_t side)
{
    return static_cast<uint32_t>(((id * 2 + side + 1) * 0x9E3779B97F4A7C15ull) >> 40) & 0xFFFFFF;
}

// RESET -> INIT -> RTR -> RTS towards the peer QP, the attributes ibv_modify_qp needs for RC.
static bool connect(VerbsEngine& v, uint32_t qp, const Nic& peer, uint32_t peer_qpn, uint32_t sq_psn,
                    uint32_t rq_psn, uint32_t mtu, uint8_t timeout, uint8_t retry_cnt)
{
    QpAttr a;
    a.state = QpState::Init;
    a.access = verbs::kLocalWrite | verbs::kRemoteWrite;
    if (v.qp_modify(qp, a, QpAttr::kState | QpAttr::kAccess) != 0) return false;
    a.state = QpState::Rtr;
    a.path_mtu = mtu;
    a.dest_qpn = peer_qpn;
    a.rq_psn = rq_psn;
    a.remote_gid = verbs::gid_from_ipv4(peer.address().ip);
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;  // never needed: the receive is posted before the first WRITE
    if (v.qp_modify(qp, a,
                    QpAttr::kState | QpAttr::kPathMtu | QpAttr::kDestQpn | QpAttr::kRqPsn | QpAttr::kAv |
                        QpAttr::kMaxDestRdAtomic | QpAttr::kMinRnrTimer) != 0)
        return false;
    a.state = QpState::Rts;
    a.sq_psn = sq_psn;
    a.timeout = timeout;
    a.retry_cnt = retry_cnt;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return v.qp_modify(qp, a,
                       QpAttr::kState | QpAttr::kSqPsn | QpAttr::kTimeout | QpAttr::kRetryCnt | QpAttr::kRnrRetry |
                           QpAttr::kMaxRdAtomic) == 0;
}

void TrafficGenerator::start_flow(uint64_t id)
{
    Flow& f = flows_[id];
    Host& hs = host(f.src);
    Host& hd = host(f.dst);
    f.running = true;
    if (hs.pd == kNone || hd.pd == kNone) return finish(id, false);
    // One CQE per WQE posted at most, and one receive: the CQs never overflow.
    const uint32_t window = std::min(params_.max_outstanding, f.wqes);
    f.scq = hs.v->cq_create(window);
    f.rcq = hd.v->cq_create(1);
    if (f.scq == kNone || f.rcq == kNone) return finish(id, false);
    for (auto [h, cq] : {std::pair{&hs, f.scq}, std::pair{&hd, f.rcq}}) {
        if (cq >= h->cq_flow.size()) h->cq_flow.resize(cq + 1, 0);
        h->cq_flow[cq] = id + 1;
    }
    f.sqp = hs.v->qp_create(verbs::QpType::Rc, hs.pd, f.scq, f.scq, window, 1);
    f.rqp = hd.v->qp_create(verbs::QpType::Rc, hd.pd, f.rcq, f.rcq, 1, 1);
    if (f.sqp == kNone || f.rqp == kNone) return finish(id, false);
    Nic& ns = fabric_.nic(f.src, 1);
    Nic& nd = fabric_.nic(f.dst, 1);
    const uint32_t psn_s = first_psn(id, 0), psn_r = first_psn(id, 1);
    if (!connect(*hs.v, f.sqp, nd, hd.v->qpn(f.rqp), psn_s, psn_r, params_.mtu, rc_timeout_, params_.retry_cnt) ||
        !connect(*hd.v, f.rqp, ns, hs.v->qpn(f.sqp), psn_r, psn_s, params_.mtu, rc_timeout_, params_.retry_cnt))
        return finish(id, false);
    if (params_.verify_payload) {
        if (id >= buffers_.size()) buffers_.resize(id + 1);
        auto b = std::make_unique<Buffers>();
        b->src = std::make_unique_for_overwrite<uint8_t[]>(f.size);
        b->dst = std::make_unique<uint8_t[]>(f.size);
        for (uint64_t i = 0; i < f.size; i++) b->src[i] = pattern(id, i);
        b->src_key = hs.v->mr_reg(hs.pd, b->src.get(), f.size, 0);
        b->dst_key = hd.v->mr_reg(hd.pd, b->dst.get(), f.size, verbs::kLocalWrite | verbs::kRemoteWrite);
        buffers_[id] = std::move(b);
        if (!buffers_[id]->src_key || !buffers_[id]->dst_key) return finish(id, false);
    }
    verbs::RecvWr r;  // for the immediate of the last WRITE: no bytes land through it
    r.wr_id = id;
    if (hd.v->post_recv(f.rqp, r) != 0) return finish(id, false);
    post_writes(f, id);
}

void TrafficGenerator::post_writes(Flow& f, uint64_t id)
{
    Host& hs = *hosts_[f.src];
    const Host& hd = *hosts_[f.dst];
    const Buffers* b = params_.verify_payload ? buffers_[id].get() : nullptr;
    while (f.posted < f.wqes && f.posted - f.completed < params_.max_outstanding) {
        const uint64_t off = uint64_t{f.posted} * params_.wqe_bytes;
        const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(params_.wqe_bytes, f.size - off));
        const bool last = f.posted + 1 == f.wqes;
        verbs::SendWr w;
        w.wr_id = id;
        w.opcode = last ? WrOpcode::RdmaWriteWithImm : WrOpcode::RdmaWrite;
        w.imm = static_cast<uint32_t>(id);
        w.num_sge = 1;
        if (b) {
            w.sg[0] = verbs::Sge{reinterpret_cast<uint64_t>(b->src.get() + off), len, b->src_key};
            w.remote_addr = reinterpret_cast<uint64_t>(b->dst.get() + off);
            w.rkey = b->dst_key;
        } else {
            w.sg[0] = verbs::Sge{reinterpret_cast<uint64_t>(source_.get()), len, hs.source_key};
            w.remote_addr = 0;  // slot 0 of the sink's root key, zero-based
            w.rkey = hd.sink_key;
        }
        if (hs.v->post_send(f.sqp, w) != 0) return finish(id, false);  // the send queue holds the window: never
        f.posted++;
    }
}

void TrafficGenerator::on_cq(Nic& nic, uint32_t cq)
{
    const uint32_t i = nic.index();
    if (i >= hosts_.size() || !hosts_[i]) return;
    const std::vector<uint64_t>& owner = hosts_[i]->cq_flow;
    if (cq >= owner.size() || !owner[cq]) return;  // not ours
    const uint64_t id = owner[cq] - 1;
    Flow& f = flows_[id];
    const bool sender = i == f.src;
    bool& due = sender ? f.poll_sender : f.poll_receiver;
    if (due) return;
    due = true;
    // Polled by an event of its own at this same time, not here: the engine is inside its
    // completion path (an ACK may be retiring several WQEs).
    fabric_.sim().at(fabric_.sim().now(), this, arg(id, sender ? kPollSender : kPollReceiver));
}

void TrafficGenerator::fire(SimTime, uint64_t a)
{
    const uint64_t id = a >> 2;
    switch (static_cast<Kind>(a & 3)) {
    case kStart: return start_flow(id);
    case kArrival: return arrive(id);
    case kPollSender: return poll(id, true);
    case kPollReceiver: return poll(id, false);
    }
}

void TrafficGenerator::poll(uint64_t id, bool sender)
{
    Flow& f = flows_[id];
    (sender ? f.poll_sender : f.poll_receiver) = false;
    if (!f.running) return;  // finished since the completion was noted
    VerbsEngine& v = *hosts_[sender ? f.src : f.dst]->v;
    verbs::Wc wc[16];
    int n;
    while ((n = v.cq_poll(sender ? f.scq : f.rcq, wc, 16)) != 0) {
        if (n < 0) return finish(id, false);
        for (int k = 0; k < n; k++) {
            if (wc[k].status != WcStatus::Success) return finish(id, false);
            if (sender) {
                f.completed++;
            } else {
                f.rx_done = fabric_.sim().now();
            }
        }
    }
    if (!sender) return;
    if (f.completed == f.wqes) return finish(id, true);
    post_writes(f, id);
}

void TrafficGenerator::finish(uint64_t id, bool ok)
{
    Flow& f = flows_[id];
    const SimTime now = fabric_.sim().now();
    Host& hs = *hosts_[f.src];
    Host& hd = *hosts_[f.dst];
    if (ok && !f.rx_done) {  // the receiver's completion, if its poll is still to come
        verbs::Wc wc;
        if (hd.v->cq_poll(f.rcq, &wc, 1) == 1 && wc.status == WcStatus::Success) f.rx_done = now;
    }
    Buffers* b = params_.verify_payload && id < buffers_.size() ? buffers_[id].get() : nullptr;
    if (ok) {
        FlowRecord r;
        r.id = id;
        r.src = f.src;
        r.dst = f.dst;
        r.size_bytes = f.size;
        r.start_ns = f.start / kPsPerNs;
        r.fct_ns = (now - f.start) / kPsPerNs;
        r.rx_fct_ns = f.rx_done ? (f.rx_done - f.start) / kPsPerNs : 0;
        const SimTime ideal = ideal_fct_ps(f.src, f.dst, f.size);
        r.ideal_fct_ns = ideal / kPsPerNs;
        r.slowdown = ideal ? static_cast<double>(now - f.start) / static_cast<double>(ideal) : 0;
        records_.push_back(r);
        if (b) {
            for (uint64_t i = 0; i < f.size; i++) {
                if (b->dst[i] != pattern(id, i)) {
                    payload_errors_++;
                    break;
                }
            }
        }
    } else {
        failed_++;
    }
    // Gone with the flow: a late frame for these QPs is dropped as one for no QP.
    for (auto [h, qp] : {std::pair{&hs, f.sqp}, std::pair{&hd, f.rqp}})
        if (qp != kNone) (void)h->v->qp_destroy(qp);  // ours, live: cannot fail
    for (auto [h, cq] : {std::pair{&hs, f.scq}, std::pair{&hd, f.rcq}}) {
        if (cq == kNone) continue;
        (void)h->v->cq_destroy(cq);  // its QP is gone: cannot be busy
        h->cq_flow[cq] = 0;
    }
    if (b) {
        if (b->src_key) (void)hs.v->mr_dereg(b->src_key);  // ours, live: cannot fail
        if (b->dst_key) (void)hd.v->mr_dereg(b->dst_key);
        buffers_[id].reset();
    }
    f.sqp = f.rqp = f.scq = f.rcq = kNone;
    f.running = false;
    unfinished_--;
}

bool TrafficGenerator::done() const { return unfinished_ == 0 && arrivals_due_ == 0; }

void TrafficGenerator::run()
{
    while (!done() && fabric_.progress()) {}
}

// ---- the ideal ----------------------------------------------------------------------------

// Wire bytes of the flow's frames: each WQE's packets (FIRST with its RETH, MIDDLEs, LAST; the
// last WQE's LAST with its immediate) with preamble, gap and FCS.
uint64_t TrafficGenerator::wire_bytes(uint64_t size) const
{
    const uint64_t mtu = params_.mtu;
    auto wqe = [&](uint64_t len, bool imm) -> uint64_t {
        const uint64_t n = (len + mtu - 1) / mtu;
        if (n == 1) return wire::frame_bytes(imm ? wire::kOpRcWriteOnlyImm : wire::kOpRcWriteOnly, len, true) + kWireOverheadBytes;
        return wire::frame_bytes(wire::kOpRcWriteFirst, mtu, true) +
               (n - 2) * wire::frame_bytes(wire::kOpRcWriteMiddle, mtu, true) +
               wire::frame_bytes(imm ? wire::kOpRcWriteLastImm : wire::kOpRcWriteLast, len - (n - 1) * mtu, true) +
               n * kWireOverheadBytes;
    };
    const uint64_t wqes = (size + params_.wqe_bytes - 1) / params_.wqe_bytes;
    return (wqes - 1) * wqe(params_.wqe_bytes, false) + wqe(size - (wqes - 1) * params_.wqe_bytes, true);
}

// The link's RTT and the ACK's frame; on a network of switches, its empty round trip from src to
// dst: each switch stores and forwards the flow's last packet, and the ACK on the way back.
SimTime TrafficGenerator::default_base_rtt(uint32_t src, uint32_t dst, uint64_t size) const
{
    const uint32_t ack_bytes = static_cast<uint32_t>(wire::frame_bytes(wire::kOpRcAck, 0, true));
    const double ack = static_cast<double>(ack_bytes + kWireOverheadBytes);
    if (const SimNetwork* net = fabric_.network()) {
        const uint64_t last = size ? (size - 1) % params_.mtu + 1 : 0;
        const auto frame = static_cast<uint32_t>(wire::frame_bytes(wire::kOpRcWriteLastImm, last, true));
        return net->base_rtt_ps(src, dst, frame, ack_bytes) + static_cast<SimTime>(std::llround(ack * 8000.0 / host_gbps()));
    }
    return static_cast<SimTime>(std::llround(fabric_.params().link.rtt_ms * 1e9 + ack * 8000.0 / host_gbps()));
}

SimTime TrafficGenerator::ideal_fct_ps(uint32_t src, uint32_t dst, uint64_t size) const
{
    const SimTime rtt = params_.base_rtt ? params_.base_rtt(src, dst) : default_base_rtt(src, dst, size);
    return rtt + static_cast<SimTime>(std::llround(static_cast<double>(wire_bytes(size)) * 8000.0 / host_gbps()));
}

}  // namespace sdr::emu
