// Endpoint: the reliable-message API (send, recv, results) and the queues that carry the
// engines' actions to the SDR API in order, retrying what SDR answers RETRY. The coding glue is
// in endpoint_coding.cpp, the simulator loop in drive.cpp.
#include <sdr/reliability/endpoint.hpp>
#include <sdr_ctrl.h>
#include <sdr_ext.h>
#include <sdr_mr.h>
#include <sdr_sim.h>

#include "engine_util.hpp"

#include <sdr/reliability/scheme.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <unistd.h>
#include <cstring>

namespace sdr::rel {

namespace {
thread_local std::string g_error;
int fail(std::string msg)
{
    g_error = std::move(msg);
    return SDR_ERROR;
}
}  // namespace

const char* last_error() { return g_error.c_str(); }

// Nonzero, distinct within the process and unlikely to repeat across processes and restarts.
static uint32_t new_incarnation()
{
    static std::atomic<uint64_t> counter{
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (static_cast<uint64_t>(getpid()) << 32)};
    uint64_t x = counter.fetch_add(0x9E3779B97F4A7C15ull) + 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return static_cast<uint32_t>(x) | 1u;
}

std::unique_ptr<Endpoint> Endpoint::create(sdr_context* ctx, sdr_qp* qp, const sdr_qp_attr& attr, const Config& cfg,
                                           std::string* err)
{
    if (!ctx || !qp) return *err = "context or qp is NULL", nullptr;
    if (!attr.send_enable || !attr.recv_enable)
        return *err = "a reliable endpoint needs a QP with send_enable and recv_enable (data one way, ACKs the other)",
               nullptr;
    if (!validate(cfg, err)) return nullptr;
    // SR and EC exist for a path that loses packets: over RC the NIC would recover them first,
    // and the scheme would measure the NIC's retransmissions, not its own.
    sdr_qp_attr_ext ext;
    if (sdr_qp_attr_ext_get(qp, &ext) != SDR_SUCCESS || ext.transport != SDR_TRANSPORT_UC)
        return *err = "a reliable endpoint needs a QP with UC transport QPs: create it with sdr_qp_attr_ext.transport "
                      "= SDR_TRANSPORT_UC (sdr_ext.h), or with SDR_USE_UC_QP=1",
               nullptr;
    Geometry g;
    g.chunk_bytes = 1u << attr.bitmap_chunk_size_log_bytes;
    g.mtu = 64u << static_cast<int>(attr.mtu);
    size_t ctrl_max = 0;
    if (sdr_ctrl_max_size_get(qp, &ctrl_max) != SDR_SUCCESS || ctrl_max < kCtrlHeaderBytes + 8)
        return *err = "the QP has no usable control channel", nullptr;
    g.ctrl_max_bytes = static_cast<uint32_t>(ctrl_max);
    g.slot_bytes = 1ull << (attr.max_in_flight_log_bytes - attr.max_log_num_msgs);
    const bool coded = ops(cfg.scheme).coded();
    if ((coded || cfg.scheme == Scheme::Auto) && (1u << attr.max_log_num_msgs) < 2)
        return *err = std::string(coded ? ops(cfg.scheme).name() : "auto (which may pick a coded scheme)") +
                      " needs at least 2 message slots (data and parity submessages)",
               nullptr;
    return std::unique_ptr<Endpoint>(new Endpoint(ctx, qp, cfg, g));
}

Endpoint::Endpoint(sdr_context* ctx, sdr_qp* qp, const Config& cfg, const Geometry& g)
    : ctx_(ctx), qp_(qp), cfg_(cfg), geo_(g), tx_(cfg, g, new_incarnation()),
      rx_(cfg, g, new_incarnation())
{
    if (ops(cfg.scheme).coded() || cfg.scheme == Scheme::Auto) {
        zero_.assign(g.chunk_bytes, 0);
        scratch_.assign(size_t{g.chunk_bytes} * 2, 0);
    }
}

Endpoint::~Endpoint()
{
    for (auto& [seq, t] : txs_)
        if (t.parity_mr) sdr_mr_dereg(t.parity_mr);
    for (auto& [seq, r] : rxs_) {
        if (r.data) sdr_recv_complete(r.data);
        if (r.parity) sdr_recv_complete(r.parity);
        if (r.parity_mr) sdr_mr_dereg(r.parity_mr);
    }
}

uint64_t Endpoint::chunk_len(uint64_t len, uint32_t c) const
{
    return std::min<uint64_t>(geo_.chunk_bytes, len - uint64_t{c} * geo_.chunk_bytes);
}

// Maps and registers a parity buffer; nullptr after fail() says why.
sdr_mr* Endpoint::reg(Region& buf, uint64_t bytes, const char* what)
{
    if (!buf.map(bytes)) {
        fail(std::string(what) + ": cannot map " + std::to_string(bytes) + " bytes for parity");
        return nullptr;
    }
    sdr_mr* mr = sdr_mr_reg(ctx_, buf.data(), bytes, SDR_ACCESS_REMOTE_WRITE);
    if (!mr) fail(std::string(what) + ": cannot register the parity buffer: " + sdr_last_error());
    return mr;
}

// The link rate that carries `rate` payload bytes per ns, packet overheads included.
static double link_gbps(double bytes_per_ns, const Geometry& g) { return bytes_per_ns * 8 * (g.mtu + kPacketOverheadBytes) / g.mtu; }

// What this endpoint measured: the RTT from its own sends' ACKs, else from what it received;
// the rate its own data was delivered at, else the rate data arrived at (which a real-time NIC
// catching up on its ring inflates); the configured ones until then.
PathEstimate Endpoint::path_estimate() const
{
    const double rtt_ms = (tx_.rtt_sampled() ? tx_.srtt_ns() : rx_.rtt_ns()) / 1e6;
    const double gbps = tx_.rate_samples()       ? link_gbps(tx_.delivery_bytes_per_ns(), geo_)
                        : rx_.rate().samples() ? link_gbps(rx_.rate().bytes_per_ns(), geo_)
                                               : cfg_.bw_gbps;
    return {rtt_ms, gbps, rx_.drops().packet_drop(), kPacketOverheadBytes};
}

PathState Endpoint::path_state() const
{
    const PathEstimate e = path_estimate();
    PathState s;
    s.srtt_ms = e.rtt_ms;
    s.rttvar_ms = tx_.rtt().rttvar_ns() / 1e6;
    s.min_rtt_ms = (tx_.rtt_sampled() ? tx_.rtt().min_ns() : rx_.rtt_ns()) / 1e6;
    s.rto_ms = double(tx_.rto_ns()) / 1e6;
    s.rtt_samples = tx_.rtt().samples() + rx_.rtt().samples();
    s.delivery_gbps = e.bw_gbps;
    s.rate_samples = tx_.rate_samples() + rx_.rate().samples();
    return s;
}

// A message and its parity must each fit one SDR slot of the peer (auto's sender learns its
// code from the CTS, and checks the parity then).
int Endpoint::check_post(const char* what, const void* buf, uint64_t len, const uint64_t* id, const Code& code) const
{
    if (!id || (!buf && len)) return fail(std::string(what) + ": buf or id is NULL");
    if (len > geo_.slot_bytes)
        return fail(std::string(what) + ": " + std::to_string(len) + " bytes exceed the QP's slot size of " +
                    std::to_string(geo_.slot_bytes) + " bytes");
    Layout l = Layout::of(code, geo_, len);
    if (uint64_t{l.parity} * geo_.chunk_bytes > geo_.slot_bytes)
        return fail(std::string(what) + ": the parity of this message (" + std::to_string(l.parity) +
                    " chunks) does not fit one slot");
    return SDR_SUCCESS;
}

int Endpoint::send(const void* buf, uint64_t len, uint32_t lkey, uint64_t* id)
{
    const Code code = cfg_.scheme == Scheme::Auto ? Code{Scheme::Auto} : fixed_code(cfg_);
    if (int rc = check_post("reliable send", buf, len, id, code)) return rc;
    Layout l = Layout::of(code, geo_, len);
    TxState t;
    t.buf = static_cast<const uint8_t*>(buf);
    t.len = len;
    t.lkey = lkey;
    if (l.parity && cfg_.compute) {
        t.parity_mr = reg(t.parity_buf, uint64_t{l.parity} * geo_.chunk_bytes, "reliable send");
        if (!t.parity_mr) return SDR_ERROR;
    }
    uint64_t now = sdr_now_ns(ctx_);
    *id = tx_.post(now, len);
    txs_.emplace(*id, std::move(t));
    quiet_until_ = 0;
    drain_actions(now);
    return SDR_SUCCESS;
}

int Endpoint::recv(void* buf, uint64_t len, uint32_t lkey, uint64_t* id)
{
    const PathEstimate path = path_estimate();
    const Code code = rx_.choose_code(len, path.rtt_ms, path.bw_gbps);
    if (int rc = check_post("reliable recv", buf, len, id, code)) return rc;
    Layout l = Layout::of(code, geo_, len);
    RxState r;
    r.code = code;
    r.buf = static_cast<uint8_t*>(buf);
    r.len = len;
    r.lkey = lkey;
    if (l.parity) {  // registered also without compute: the NIC needs a place to put parity
        r.parity_mr = reg(r.parity_buf, uint64_t{l.parity} * geo_.chunk_bytes, "reliable recv");
        if (!r.parity_mr) return SDR_ERROR;
    }
    uint64_t now = sdr_now_ns(ctx_);
    *id = rx_.post(now, len, code);
    rxs_.emplace(*id, std::move(r));
    quiet_until_ = 0;
    drain_actions(now);
    return SDR_SUCCESS;
}

int Endpoint::send_result(uint64_t id, MessageStats* out)
{
    auto it = txs_.find(id);
    if (it == txs_.end()) return fail("reliable send " + std::to_string(id) + " is unknown (or already reported)");
    if (!it->second.result || !it->second.data_done || !it->second.parity_done) return SDR_RETRY;
    if (out) *out = *it->second.result;
    if (it->second.parity_mr) sdr_mr_dereg(it->second.parity_mr);
    txs_.erase(it);
    tx_.forget(id);
    quiet_until_ = 0;
    return SDR_SUCCESS;
}

int Endpoint::recv_result(uint64_t id, MessageStats* out)
{
    auto it = rxs_.find(id);
    if (it == rxs_.end()) return fail("reliable recv " + std::to_string(id) + " is unknown (or already reported)");
    if (!it->second.result) return SDR_RETRY;
    if (out) *out = *it->second.result;
    if (it->second.parity_mr) sdr_mr_dereg(it->second.parity_mr);
    rxs_.erase(it);
    rx_.forget(id);
    quiet_until_ = 0;
    return SDR_SUCCESS;
}

bool Endpoint::idle() const
{
    for (const auto& [s, t] : txs_)
        if (!t.result || !t.data_done || !t.parity_done) return false;
    for (const auto& [s, r] : rxs_)
        if (!r.result) return false;
    return true;
}

// ---- sender actions ----------------------------------------------------------------------

// Opens the message's SDR streams. An auto send learnt its code from the CTS: its parity buffer
// is registered here, and if that fails the streams still open (the receiver posted for them)
// and close empty, and *error says why.
bool Endpoint::try_start(Action& a, std::string* error)
{
    TxState& t = txs_.at(a.seq);
    const Code* code = tx_.code(a.seq);
    const bool two = tx_.streams(a.seq) == 2;  // as many as the receiver posted, even on a mismatch
    sdr_send_start_wr w{};
    w.opcode = SDR_WR_WRITE;
    if (!t.data && sdr_streaming_send_start(qp_, &w, &t.data) != SDR_SUCCESS) return false;
    if (two && !t.parity && sdr_streaming_send_start(qp_, &w, &t.parity) != SDR_SUCCESS) return false;
    t.opened = true;
    t.parity_done = !two;
    if (a.ok && ops(*code).coded() && cfg_.compute && !t.parity_mr) {
        Layout l = Layout::of(*code, geo_, t.len);
        t.parity_mr = reg(t.parity_buf, uint64_t{l.parity} * geo_.chunk_bytes, "reliable send");
        if (!t.parity_mr) {
            *error = last_error();
            a.ok = false;
        }
    }
    if (!a.ok) closing_.push_back(a.seq);  // opened only to keep the order: close at once, empty
    return true;
}

bool Endpoint::try_data(Action& a)
{
    TxState& t = txs_.at(a.seq);
    if (t.ended) return true;  // finished meanwhile
    uint64_t off = uint64_t{a.first} * geo_.chunk_bytes;
    uint64_t len = std::min<uint64_t>(uint64_t{a.count} * geo_.chunk_bytes, t.len - off);
    sdr_send_continue_wr w{};
    w.length = static_cast<uint32_t>(len);
    w.local_addr = reinterpret_cast<uint64_t>(t.buf + off);
    w.lkey = t.lkey;
    w.remote_offset = a.first;
    return sdr_streaming_send_continue(t.data, &w) == SDR_SUCCESS;
}

// End the message's SDR streams and wait for their local completion (the slot is then free).
bool Endpoint::try_close(TxState& t)
{
    if (!t.opened) {
        t.data_done = t.parity_done = true;
        return true;
    }
    if (!t.ended) {
        if (t.data && sdr_streaming_send_end(t.data) != SDR_SUCCESS) return false;
        if (t.parity && sdr_streaming_send_end(t.parity) != SDR_SUCCESS) {
            t.data = nullptr;  // ended; a retry must not end it twice
            return false;
        }
        t.ended = true;
    }
    // A send that completed in error (SDR_ERROR with done set) is over too: what it did not
    // deliver is the scheme's to repair, as any loss.
    int done = 0;
    if (!t.data_done && t.data && sdr_send_poll(t.data, &done, nullptr) != SDR_RETRY && done) t.data_done = true;
    if (!t.data) t.data_done = true;
    done = 0;
    if (!t.parity_done && t.parity && sdr_send_poll(t.parity, &done, nullptr) != SDR_RETRY && done)
        t.parity_done = true;
    return t.data_done && t.parity_done;
}

// ---- receiver actions --------------------------------------------------------------------

bool Endpoint::try_post(uint64_t seq)
{
    RxState& r = rxs_.at(seq);
    if (!r.data) {
        sdr_recv_wr w{};
        w.max_length = static_cast<uint32_t>(r.len);
        w.lkey = r.lkey;
        w.address = reinterpret_cast<uint64_t>(r.buf);
        if (sdr_recv_post(qp_, &w, &r.data) != SDR_SUCCESS) return false;
        size_t n;
        if (r.len) sdr_recv_bitmap_get(r.data, &r.data_bits, &n);
    }
    if (ops(r.code).coded() && !r.parity) {
        sdr_recv_wr w{};
        w.max_length = static_cast<uint32_t>(r.parity_buf.size());
        if (r.parity_mr) sdr_mr_lkey_get(r.parity_mr, &w.lkey);
        w.address = reinterpret_cast<uint64_t>(r.parity_buf.data());
        if (sdr_recv_post(qp_, &w, &r.parity) != SDR_SUCCESS) return false;
        size_t n;
        if (w.max_length) sdr_recv_bitmap_get(r.parity, &r.parity_bits, &n);
    }
    r.posted = true;
    return true;
}

void Endpoint::deliver(const Action& a)
{
    RxState& r = rxs_.at(a.seq);
    if (r.data) sdr_recv_complete(r.data);
    if (r.parity) sdr_recv_complete(r.parity);
    r.data = r.parity = nullptr;
    if (const MessageStats* s = rx_.stats(a.seq)) r.result = *s;
    if (!r.posted)  // abandoned before its receive was posted: the post must still happen in order
        for (auto& p : post_q_)
            if (p.seq == a.seq) p.ok = false;
}

// ---- the loop ----------------------------------------------------------------------------

void Endpoint::execute(Action& a)
{
    switch (a.kind) {
    case Action::Start: start_q_.push_back(std::move(a)); break;
    case Action::Data:
    case Action::Parity: data_q_.push_back(std::move(a)); break;
    case Action::Finish: {
        TxState& t = txs_.at(a.seq);
        std::erase_if(data_q_, [&](const Action& d) { return d.seq == a.seq; });
        if (const MessageStats* s = tx_.stats(a.seq)) t.result = *s;
        if (a.count == 0 && !t.opened) {
            t.data_done = t.parity_done = true;  // never opened (failed while waiting for CTS)
        } else {
            closing_.push_back(a.seq);
        }
        break;
    }
    case Action::PostRecv: a.ok = true; post_q_.push_back(std::move(a)); break;
    case Action::Decode: rebuild(a.seq, a.first); break;
    case Action::Deliver: deliver(a); break;
    case Action::Ctrl: ctrl_q_.push_back(std::move(a)); break;
    }
}

void Endpoint::drain_actions(uint64_t now)
{
    const uint64_t budget_end = sdr_now_ns(ctx_) + 1000000;  // of encoding (see below)
    for (int guard = 0; guard < 64; guard++) {
        Action a{Action::Ctrl};
        bool any = false;
        while (tx_.poll_action(&a) || rx_.poll_action(&a)) {
            execute(a);
            any = true;
        }
        // SDR resources: each queue in order, stopping at the first RETRY.
        while (!start_q_.empty()) {
            Action& s = start_q_.front();
            TxState& t = txs_.at(s.seq);
            bool ghost = !s.ok && t.result.has_value();
            std::string error;
            if (!try_start(s, &error)) break;
            uint64_t seq = s.seq;
            start_q_.pop_front();
            if (ghost) t.data_done = t.parity_done = false;
            tx_.on_started(now, seq, error);
            any = true;
        }
        // Encoding parity takes the host's time: after a millisecond of it the rest waits for the
        // next call, so that ACKs and bitmaps are read meanwhile (and RTT samples are not
        // lengthened by the encoding of a whole message). Virtual time does not pass here.
        while (!data_q_.empty()) {
            Action& d = data_q_.front();
            const bool encodes = d.kind == Action::Parity && cfg_.compute && !(d.count & kEncoded);
            if (!(d.kind == Action::Data ? try_data(d) : try_parity(d))) break;
            note_posted(d);
            data_q_.pop_front();
            if (encodes && sdr_now_ns(ctx_) >= budget_end) break;
        }
        while (!post_q_.empty()) {
            uint64_t seq = post_q_.front().seq;
            if (!try_post(seq)) break;
            bool abandoned = !post_q_.front().ok;
            post_q_.pop_front();
            if (abandoned) {  // posted only to keep the order; give it back at once
                RxState& r = rxs_.at(seq);
                if (r.data) sdr_recv_complete(r.data);
                if (r.parity) sdr_recv_complete(r.parity);
                r.data = r.parity = nullptr;
            } else {
                rx_.on_posted(now, seq);
            }
            any = true;
        }
        while (!ctrl_q_.empty()) {
            const auto& c = ctrl_q_.front().ctrl;
            if (sdr_ctrl_send(qp_, c.data(), c.size()) != SDR_SUCCESS) break;
            ctrl_q_.pop_front();
        }
        std::erase_if(closing_, [&](uint64_t seq) { return try_close(txs_.at(seq)); });
        if (!any) break;
    }
}

void Endpoint::note_posted(const Action& a)
{
    uint32_t wr, injected;
    if (sdr_qp_send_progress(qp_, &wr, &injected) == SDR_SUCCESS)
        posted_.push_back({wr, a.kind, a.seq, a.first, a.count & ~kEncoded});
}

// The data and parity that have left the NIC since the last look, in the order they were posted.
void Endpoint::check_injected(uint64_t now)
{
    uint32_t wr, injected;
    if (posted_.empty() || sdr_qp_send_progress(qp_, &wr, &injected) != SDR_SUCCESS) return;
    while (!posted_.empty() && static_cast<int32_t>(injected - posted_.front().wr) >= 0) {
        const Posted p = posted_.front();
        posted_.pop_front();
        tx_.on_left(now, p.seq, p.kind == Action::Parity, p.first, p.count);
    }
    tx_.end_left(now, posted_.empty() && data_q_.empty());
}

uint64_t Endpoint::progress()
{
    // Nothing the host could notice happened on the device since the last call, nothing was
    // posted or taken, and no deadline has come: this call would do nothing (the engines act
    // only on new bits, control messages and deadlines), so it does nothing. A ring Allreduce
    // progresses 2N endpoints at every event of any NIC; this makes the other NICs' cost one
    // counter read.
    const uint64_t events = sdr_host_events(ctx_);
    if (quiet_until_ && events == seen_events_ && sdr_now_ns(ctx_) < quiet_until_) return quiet_until_;
    // Control messages are taken before the bitmaps are read and handled after: the NIC sets a
    // chunk's bit before it takes a datagram that came behind the chunk, so a REQ saying the
    // sending is over meets a bitmap that holds everything sent before it.
    uint8_t buf[4096];
    size_t n = 0;
    ctrl_in_.clear();
    while (sdr_ctrl_recv(qp_, buf, sizeof buf, &n) == SDR_SUCCESS) {
        CtrlMsg c;
        if (decode(buf, n, &c)) ctrl_in_.push_back(std::move(c));  // else not ours: ignored
    }
    uint64_t now = sdr_now_ns(ctx_);
    check_injected(now);
    rx_.active(&active_);
    for (uint64_t seq : active_) {
        const RxState& r = rxs_.at(seq);
        if (r.data_bits || r.parity_bits) rx_.on_bitmap(now, seq, r.data_bits ? r.data_bits : zero_.data(), r.parity_bits);
    }
    for (const CtrlMsg& c : ctrl_in_) {
        if (c.type == CtrlType::Req || c.type == CtrlType::Abort) rx_.on_ctrl(now, c);
        else tx_.on_ctrl(now, c);
    }
    tx_.on_timer(now);
    rx_.on_timer(now);
    drain_actions(now);
    uint64_t t = std::min(tx_.next_deadline(), rx_.next_deadline());
    // Work waiting for SDR resources (ring, slots, control queue): look again soon, and look
    // for real (resources free without an event on this device).
    seen_events_ = events;
    quiet_until_ = t;
    if (!start_q_.empty() || !data_q_.empty() || !post_q_.empty() || !ctrl_q_.empty() || !closing_.empty()) {
        t = std::min(t, now + 1000);
        quiet_until_ = 0;
    }
    return t;
}

}  // namespace sdr::rel
