// The sender half of a reliable connection: waits for CTS, injects chunks (and parity), keeps
// per-chunk retransmission timers (SR), repeats what NACKs name, measures the RTT from ACKs,
// probes a silent receiver, and bounds everything with rounds and a global timeout.
#include "engine_util.hpp"

#include <sdr/reliability/scheme.hpp>

#include <algorithm>
#include <functional>

namespace sdr::rel {

SendEngine::SendEngine(const Config& c, const Geometry& g, uint32_t incarnation)
    : cfg_(c), geo_(g), inc_(incarnation), rtt_(c.rtt_ms * 1e6), rate_(1 / wire_ns_per_byte(c, g)),
      sent_rate_(1 / wire_ns_per_byte(c, g))
{
}

double SendEngine::delivery_bytes_per_ns() const
{
    if (sent_rate_.samples() && rate_.samples()) return std::min(sent_rate_.bytes_per_ns(), rate_.bytes_per_ns());
    return sent_rate_.samples() ? sent_rate_.bytes_per_ns() : rate_.bytes_per_ns();
}

// The receiver's pacing of ACKs as this side expects it: the configured interval, or RTT/64.
uint64_t SendEngine::ack_interval_ns() const
{
    return static_cast<uint64_t>(cfg_.ack_interval_us > 0 ? cfg_.ack_interval_us * 1e3 : rtt_.srtt_ns() / 64);
}

// The paper's RTO = RTT·(1+α) on a steady path; a jittery one stretches it to SRTT + 4·RTTVAR
// (RFC 6298) instead of adding the two, which made the first sample (RTTVAR = RTT/2) give 5 RTT
// for α = 2. The ACK interval covers the receiver's pacing of ACKs.
uint64_t SendEngine::rto_ns() const
{
    double rto = rtt_.srtt_ns() * (1 + cfg_.alpha);
    if (rtt_.samples()) rto = std::max(rto, rtt_.srtt_ns() + 4 * rtt_.rttvar_ns());
    return static_cast<uint64_t>(rto) + ack_interval_ns();
}

// How long ACKs may pause before the path counts as silent: half the RTO's margin over the RTT,
// four RTTVARs on a jittery path, or twice the longest pause between ACKs inside recent messages
// and this one (on a real-time NIC a thread that was not scheduled pauses them, and nothing was
// lost). A tail chunk lost in the simulator is found silent by its timer (α·RTT after the last
// ACK), as the paper's per-chunk timer finds it.
uint64_t SendEngine::quiet_ns(const Msg& m) const
{
    const uint64_t gap = std::max(ack_pauses_.longest_ns(), m.max_ack_gap);
    return std::max(static_cast<uint64_t>(std::max(0.5 * cfg_.alpha * rtt_.srtt_ns(), 4 * rtt_.rttvar_ns())), 2 * gap) +
           ack_interval_ns();
}

// A chunk whose timer expired is repeated only when the path shows its transmission was lost
// (RFC 8985's principle): a transmission of the same message made after it was acknowledged
// (ACKs are per message: another message's ACK says nothing of ACKs of this one that were
// lost), or the reply to a REQ sent after the chunk left lacks it. Its injection time is an
// estimate: on a NIC slower than the estimate, or behind other messages, a chunk may not have
// left yet when its timer expires, and repeating it then repeats a chunk that was never lost.
bool SendEngine::shown_lost(const Msg& m, uint32_t c) const
{
    return m.acked_pos > m.pos[c] + 1 || (m.left_ns[c] && m.left_ns[c] <= m.proof_until);
}

// A REQ: its reply (kAckReply) shows which chunks that left before it were lost.
void SendEngine::send_req(uint64_t now, Msg& m)
{
    CtrlMsg r;
    r.type = CtrlType::Req;
    r.scheme = m.code.scheme;
    r.seq = m.seq;
    r.length = m.lay.bytes;
    send_ctrl(r);
    m.req_at = now;
}

// Without that evidence: nothing new has been acknowledged for quiet_ns() since the chunk left
// (the tail, or everything, was lost, or the receiver paused). Then a REQ asks (as RFC 8985's
// tail loss probe), at most once an RTO. The REQ a message sends when its first transmissions
// have left (on_left) usually answers before any timer expires, so a lost tail is repeated at
// its RTO, as the paper's per-chunk timer repeats it.
bool SendEngine::silent(uint64_t now, const Msg& m, uint32_t c) const
{
    return m.left_ns[c] && now >= std::max({progress_ns_, m.left_ns[c], m.probe_quiet_until}) + quiet_ns(m);
}

// Chunks deferred by shown_lost() whose loss a newer acknowledgement or a REQ's reply has now
// shown: due at once.
void SendEngine::release_deferred(uint64_t now, Msg& m)
{
    std::erase_if(m.deferred, [&](uint32_t c) {
        if (m.acked[c] || m.rto_at[c] == 0) return true;
        if (!shown_lost(m, c)) return false;
        m.rto_at[c] = now;
        m.rto_heap.emplace_back(now, c);
        std::push_heap(m.rto_heap.begin(), m.rto_heap.end(), std::greater<>());
        m.next_rto = std::min(m.next_rto, now);
        return true;
    });
}

uint64_t SendEngine::post(uint64_t now, uint64_t bytes)
{
    Msg m;
    m.seq = next_seq_++;
    m.code = cfg_.scheme == Scheme::Auto ? Code{Scheme::Auto} : fixed_code(cfg_);
    m.lay = Layout::of(m.code, geo_, bytes);  // auto: data chunks only, until the CTS names the code
    m.deadline = now + message_timeout_ns(cfg_, rto_ns(), ns_per_byte(), bytes);
    m.st_out.id = m.seq;
    m.st_out.bytes = bytes;
    m.st_out.post_ns = now;
    m.st_out.chunks = m.lay.chunks;
    m.st_out.code = m.code;
    uint64_t seq = m.seq;
    msgs_.emplace(seq, std::move(m));
    // The receiver may have posted (and given CTS) before the application sent.
    if (auto it = early_cts_.find(seq); it != early_cts_.end()) {
        CtrlMsg c = std::move(it->second);
        early_cts_.erase(it);
        on_ctrl(now, c);
    }
    pump(now);
    return seq;
}

SendEngine::Msg* SendEngine::find(uint64_t seq)
{
    auto it = msgs_.find(seq);
    return it == msgs_.end() ? nullptr : &it->second;
}

const Code* SendEngine::code(uint64_t seq) const
{
    auto it = msgs_.find(seq);
    return it == msgs_.end() ? nullptr : &it->second.code;
}

uint32_t SendEngine::streams(uint64_t seq) const
{
    auto it = msgs_.find(seq);
    return it != msgs_.end() && it->second.peer_ec ? 2 : 1;
}

const MessageStats* SendEngine::stats(uint64_t seq) const
{
    auto it = msgs_.find(seq);
    return it == msgs_.end() || it->second.st != St::Done ? nullptr : &it->second.st_out;
}

void SendEngine::forget(uint64_t seq)
{
    auto it = msgs_.find(seq);
    if (it != msgs_.end() && it->second.st == St::Done && !it->second.ghost) msgs_.erase(it);
}

uint32_t SendEngine::peer_of(uint64_t seq)
{
    const Msg* m = find(seq);
    return m ? m->peer : 0;
}

uint64_t SendEngine::inject(uint64_t now, uint64_t bytes)
{
    tx_free_ = std::max(tx_free_, now) + static_cast<uint64_t>(double(bytes) * ns_per_byte());
    return tx_free_;
}

uint64_t chunk_len(const Layout& l, uint32_t chunk_bytes, uint32_t c)
{
    uint64_t off = uint64_t{c} * chunk_bytes;
    return std::min<uint64_t>(chunk_bytes, l.bytes - off);
}

void SendEngine::emit_data(uint64_t now, Msg& m, uint32_t first, uint32_t count, bool retransmit)
{
    Action a{Action::Data};
    a.seq = m.seq;
    a.first = first;
    a.count = count;
    out_.push(a);
    m.unleft++;
    const bool ec = ops(m.code).coded(), sr = !ec || retransmit;  // coded schemes arm timers only for repairs
    for (uint32_t c = first; c < first + count; c++) {
        uint64_t len = chunk_len(m.lay, geo_.chunk_bytes, c);
        m.sent_ns[c] = inject(now, len);
        m.left_ns[c] = 0;
        m.emitted_ns[c] = now;
        m.pos[c] = tx_pos_++;
        if (m.tx_count[c] < UINT16_MAX) m.tx_count[c]++;
        if (retransmit) m.st_out.retransmitted_chunks++;
        else if (!ec) outstanding_ += len;
        if (sr && !m.acked[c]) {
            m.rto_at[c] = m.sent_ns[c] + rto_ns();
            m.next_rto = std::min(m.next_rto, m.rto_at[c]);
            m.rto_heap.emplace_back(m.rto_at[c], c);
            std::push_heap(m.rto_heap.begin(), m.rto_heap.end(), std::greater<>());
        }
    }
}

// Parity chunks [from, from + count) of submessage `sub`, encoded by the binding right after
// the submessage's data is queued.
void SendEngine::emit_parity(uint64_t now, Msg& m, uint32_t sub, uint32_t count, uint32_t from)
{
    Action p{Action::Parity};
    p.seq = m.seq;
    p.first = sub;
    p.from = from;
    p.count = count;
    out_.push(p);
    m.unleft++;
    inject(now, uint64_t{count} * geo_.chunk_bytes);
}

void SendEngine::arm_probe(uint64_t now, Msg& m) { m.probe_at = std::max(now, tx_free_) + rto_ns(); }

// Open messages in seq order (order-based matching), then inject what windows allow.
void SendEngine::pump(uint64_t now)
{
    while (true) {
        Msg* m = find(next_start_);
        if (!m || !m->cts || (m->st != St::WaitCts && !m->ghost)) break;
        if (m->st == St::WaitCts) m->st = St::Starting;
        Action a{Action::Start};
        a.seq = m->seq;
        a.ok = !m->mismatch && !m->ghost;  // otherwise it still consumes its SDR messages, empty
        out_.push(a);
        next_start_++;
    }
    for (auto& [seq, m] : msgs_) {
        if (m.st != St::Sending) continue;
        const bool ec = ops(m.code).coded();
        if (ec) {
            for (; m.next_new < m.lay.submessages; m.next_new++) {
                uint32_t first = m.next_new * m.lay.k;
                emit_data(now, m, first, std::min(m.lay.k, m.lay.chunks - first), false);
                emit_parity(now, m, m.next_new, m.lay.first_parity);
            }
        } else {
            uint32_t first = m.next_new;
            uint64_t add = 0;
            while (m.next_new < m.lay.chunks) {
                uint64_t len = chunk_len(m.lay, geo_.chunk_bytes, m.next_new);
                if (cfg_.window_bytes && outstanding_ + add + len > cfg_.window_bytes && outstanding_ + add > 0) break;
                add += len;
                m.next_new++;
            }
            if (m.next_new > first) emit_data(now, m, first, m.next_new - first, false);
        }
        if (m.next_new == (ec ? m.lay.submessages : m.lay.chunks) && m.probe_at == kNever)
            arm_probe(now, m);
    }
}

// Chunks that left the NIC: their silence clock starts (silent()). Once the first transmissions
// of a message have all left, say so to the receiver at once (a REQ, which travels behind them),
// rather than at an estimated end of injection, so that its fallback knows the sending is over;
// probe from here on.
void SendEngine::on_left(uint64_t now, uint64_t seq, bool parity, uint32_t first, uint32_t count)
{
    Msg* m = find(seq);
    if (!m || m->st != St::Sending) return;
    if (m->unleft) m->unleft--;
    // The send rate: a request handed over after the NIC had sent everything before it starts
    // a new sample, at the time it was handed over (first: parity's submessage, whose data
    // chunks were handed over with it). The bytes count in end_left(): the NIC may say many
    // requests left at one time.
    const uint32_t k = ops(m->code).coded() ? m->lay.k : 1;
    const uint32_t c0 = std::min(parity ? first * k : first, m->lay.chunks ? m->lay.chunks - 1 : 0);
    const uint64_t emitted = m->lay.chunks ? m->emitted_ns[c0] : now;
    // A repeat (a chunk or a few, to an idle NIC) is timed by when the host looked, not by the
    // NIC: it only starts the next sample afresh.
    const bool repeat = !parity && m->lay.chunks && m->tx_count[c0] > 1;
    if (repeat) {
        sent_rate_.restart();
        left_bytes_ = 0;
    } else if (emitted >= last_left_ns_ && !left_bytes_) {
        sent_rate_.restart(emitted);
    }
    // An estimate later than the NIC's report is corrected, and so is the timer armed from it.
    for (uint32_t c = first; !parity && c < first + count && c < m->lay.chunks; c++) {
        m->left_ns[c] = now;
        if (!repeat) left_bytes_ += chunk_len(m->lay, geo_.chunk_bytes, c);
        if (m->sent_ns[c] <= now) continue;
        m->sent_ns[c] = now;
        if (m->rto_at[c] > now + rto_ns()) {
            m->rto_at[c] = now + rto_ns();
            m->rto_heap.emplace_back(m->rto_at[c], c);
            std::push_heap(m->rto_heap.begin(), m->rto_heap.end(), std::greater<>());
            m->next_rto = std::min(m->next_rto, m->rto_at[c]);
        }
    }
    if (parity) left_bytes_ += uint64_t{count} * geo_.chunk_bytes;
    if (m->announced || m->unleft) return;
    if (m->next_new < (ops(m->code).coded() ? m->lay.submessages : m->lay.chunks)) return;
    m->announced = true;
    send_req(now, *m);
    m->probe_at = now + rto_ns();
}

void SendEngine::end_left(uint64_t now, bool idle)
{
    if (idle) tx_free_ = std::min(tx_free_, now);  // everything asked has left: the estimate restarts here
    if (!left_bytes_) return;
    sent_rate_.delivered(now, left_bytes_, 1000000);
    left_bytes_ = 0;
    last_left_ns_ = now;
}

void SendEngine::on_started(uint64_t now, uint64_t seq, const std::string& error)
{
    Msg* m = find(seq);
    if (m && m->ghost) {  // failed before CTS; its SDR messages were opened empty: tell the receiver
        CtrlMsg ab;
        ab.type = CtrlType::Abort;
        ab.scheme = m->code.scheme;
        ab.seq = seq;
        send_ctrl(ab);
        m->ghost = false;
        return;
    }
    if (!m || m->st != St::Starting) return;
    if (!error.empty() && !m->mismatch) {
        m->mismatch = true;
        m->mismatch_why = error;
    }
    if (m->mismatch) {
        CtrlMsg ab;
        ab.type = CtrlType::Abort;
        ab.scheme = m->code.scheme;
        ab.seq = seq;
        send_ctrl(ab);
        m->st = St::Sending;
        finish(now, *m, false, m->mismatch_why);
        return;
    }
    m->st = St::Sending;
    m->sent_ns.assign(m->lay.chunks, 0);
    m->pos.assign(m->lay.chunks, 0);
    m->left_ns.assign(m->lay.chunks, 0);
    m->emitted_ns.assign(m->lay.chunks, 0);
    m->rto_at.assign(m->lay.chunks, 0);
    m->tx_count.assign(m->lay.chunks, 0);
    m->acked.assign(m->lay.chunks, 0);
    m->parity_sent.assign(m->lay.submessages, static_cast<uint16_t>(m->lay.first_parity));
    if (m->lay.chunks == 0) {  // an empty message is whole once opened; the receiver says so
        arm_probe(now, *m);
        return;
    }
    pump(now);
}

void SendEngine::mark_acked(Msg& m, uint32_t c)
{
    if (c >= m.lay.chunks || m.acked[c]) return;
    m.acked[c] = 1;
    m.rto_at[c] = 0;
    m.acked_count++;
    if (!ops(m.code).coded() && m.tx_count[c]) outstanding_ -= chunk_len(m.lay, geo_.chunk_bytes, c);
}

void SendEngine::on_ack(uint64_t now, Msg& m, const CtrlMsg& a)
{
    if (m.st != St::Sending) return;
    m.probes = 0;
    if (m.probe_at != kNever) arm_probe(now, m);
    // RTT sample (Karn: only chunks sent once; ack delay removed, as QUIC does).
    if (a.newest < m.lay.chunks && m.tx_count[a.newest] == 1 && !m.acked[a.newest] && m.sent_ns[a.newest]) {
        // Sent at the estimate, kept between when it was handed over and when the NIC said it had
        // left. Timed from the handing over, the sample is never shorter than the RTT: min RTT.
        const uint32_t c = a.newest;
        const double delay = a.ack_delay_us * 1e3;
        uint64_t sent = std::max(m.sent_ns[c], m.emitted_ns[c]);
        if (m.left_ns[c]) sent = std::min(sent, m.left_ns[c]);
        rtt_.sample(double(now) - double(sent) - delay);
        rtt_.bound(double(now) - double(m.emitted_ns[c]) - delay);
    }
    const uint32_t before = m.acked_count;
    const uint64_t acked_pos = m.acked_pos;
    uint64_t bytes = 0;
    bool first_tx = false;  // it acknowledges a first transmission
    auto ack = [&](uint32_t c) {
        if (m.acked[c]) return;
        first_tx = first_tx || m.tx_count[c] == 1;
        mark_acked(m, c);
        m.acked_pos = std::max(m.acked_pos, m.pos[c] + 1);
        bytes += chunk_len(m.lay, geo_.chunk_bytes, c);
    };
    uint32_t cum = std::min(a.base, m.lay.chunks);
    for (uint32_t c = 0; c < cum; c++) ack(c);
    for (uint32_t i = 0; i < a.nbits && a.base + i < m.lay.chunks; i++)
        if (bit(a.bits.data(), i)) ack(a.base + i);
    if (m.acked_count > before) {
        // Delivery rate: a pause in the ACKs (between messages) starts a new sample, and so do
        // ACKs of repeats only (a trickle of repairs, as BBR's app-limited samples, says
        // nothing of the path's rate). Coded messages carry their first parity with the data:
        // it took the path's time too.
        if (now - progress_ns_ > rtt_.srtt_ns() / 2 || !first_tx) rate_.restart();
        const double with_parity = ops(m.code).coded() ? double(m.lay.k + m.lay.first_parity) / m.lay.k : 1;
        // A sample spans four ACK intervals and at least 1 ms: a few ACKs, and more than their jitter.
        if (first_tx)
            rate_.delivered(now, static_cast<uint64_t>(double(bytes) * with_parity),
                            std::max<uint64_t>(4 * ack_interval_ns(), 1000000));
        // A pause inside the message's stream of ACKs (not one a repair ends, nor the idle time
        // before its first ACK).
        if (before && first_tx) m.max_ack_gap = std::max(m.max_ack_gap, now - progress_ns_);
        progress_ns_ = now;
    }
    // A REQ's reply: what left before the REQ and is still missing was lost.
    const bool proof = (a.flags & kAckReply) && m.req_at > m.proof_until;
    if (proof) m.proof_until = m.req_at;
    if ((m.acked_pos > acked_pos || proof) && !m.deferred.empty()) release_deferred(now, m);
    if (a.flags & kAckFailed) return finish(now, m, false, "the receiver gave up the message");
    if (a.flags & kAckFinal) finish(now, m, true, "");
}

void SendEngine::on_nack(uint64_t now, Msg& m, const CtrlMsg& n)
{
    if (m.st != St::Sending) return;
    m.probes = 0;
    if (m.probe_at != kNever) arm_probe(now, m);
    if (ops(m.code).coded() && m.st_out.fallbacks == 0) m.st_out.fallbacks = 1;
    m.st_out.rounds++;
    if (n.flags & kNackRepair) {  // a rateless code's receiver wants repair symbols up to n.newest
        const uint32_t want = std::min(n.newest, m.lay.slots);
        for (uint32_t i = 0; i < n.nbits && uint64_t{n.base} + i < m.lay.submessages; i++) {
            const uint32_t s = n.base + i;
            if (!bit(n.bits.data(), i) || m.parity_sent[s] >= want) continue;
            emit_parity(now, m, s, want - m.parity_sent[s], m.parity_sent[s]);
            m.parity_sent[s] = static_cast<uint16_t>(want);
        }
        return;
    }
    uint32_t run = 0, first = 0;
    auto flush = [&] {
        if (run) emit_data(now, m, first, run, true);
        run = 0;
    };
    for (uint32_t i = 0; i < n.nbits; i++) {
        uint32_t c = n.base + i;
        // Named, not acknowledged, and not already repeated within half an RTT (a NACK that
        // crossed our own retransmission). A chunk named again after a repeat: only once the
        // repeat is shown lost, since behind other messages' data it may still be queued.
        bool go = c < m.lay.chunks && bit(n.bits.data(), i) && !m.acked[c] &&
                  (m.tx_count[c] == 0 || double(now) >= double(m.sent_ns[c]) + rtt_.srtt_ns() / 2) &&
                  (m.tx_count[c] <= 1 || shown_lost(m, c));
        if (go && m.tx_count[c] > cfg_.max_rounds)
            return finish(now, m, false, "chunk " + std::to_string(c) + " was lost " + std::to_string(m.tx_count[c]) +
                                             " times (max_rounds " + std::to_string(cfg_.max_rounds) + ")");
        if (go) {
            if (!run) first = c;
            run++;
        } else {
            flush();
        }
    }
    flush();
}

void SendEngine::on_ctrl(uint64_t now, const CtrlMsg& c)
{
    Msg* m = find(c.seq);
    if (!m && c.type == CtrlType::Cts && c.seq >= next_seq_ && c.seq < next_seq_ + kEarlyCts) {
        early_cts_[c.seq] = c;  // kept (the newest incarnation's) until the send is posted
        return;
    }
    if (!m) return;  // finished and forgotten: stale or hostile
    if (c.type != CtrlType::Cts && (c.from != m->peer || m->peer == 0)) return;  // another incarnation's
    switch (c.type) {
    case CtrlType::Cts:
        if (m->cts || (m->st != St::WaitCts && !m->ghost)) break;
        m->cts = true;
        m->peer = c.from;
        check_cts(*m, c);
        pump(now);
        break;
    case CtrlType::Ack: on_ack(now, *m, c); break;
    case CtrlType::Nack: on_nack(now, *m, c); break;
    default: break;  // REQ/ABORT go the other way
    }
}

// The receiver's code and length against this send: a fixed sender needs the same code, an
// auto sender adopts the receiver's if it can (a valid code whose parity fits one SDR message).
void SendEngine::check_cts(Msg& m, const CtrlMsg& c)
{
    const SchemeOps& o = ops(c.scheme);
    const Code theirs{c.scheme, o.coded() ? c.k : 0u, o.coded() ? c.m : 0u};
    m.peer_ec = o.coded();
    std::string why;
    if (cfg_.scheme != Scheme::Auto) {
        if (!(theirs == m.code)) why = "the receiver uses scheme " + to_string(theirs) + ", this sender " + to_string(m.code);
    } else if (theirs.scheme == Scheme::Auto) {
        why = "the receiver's clear-to-send names no code";
    } else if (o.valid && !o.valid(theirs.k, theirs.m, &why)) {
        why = "the receiver picked " + to_string(theirs) + ": " + why;
    } else if (Layout l = Layout::of(theirs, geo_, m.lay.bytes); uint64_t{l.parity} * geo_.chunk_bytes > geo_.slot_bytes) {
        why = "the receiver picked " + to_string(theirs) + ", whose parity does not fit one SDR message of this QP";
    } else {
        m.code = theirs;
        m.lay = l;
    }
    if (const SchemeOps& mine = ops(m.code);
        why.empty() && c.params != (mine.cts_params ? mine.cts_params(m.code) : std::vector<uint8_t>{}))
        why = "the receiver's " + to_string(m.code) + " parameters differ from this sender's";
    if (why.empty() && c.length != m.lay.bytes)
        why = "the receive posted for message " + std::to_string(c.seq) + " holds " + std::to_string(c.length) +
              " bytes, the send has " + std::to_string(m.lay.bytes);
    if (!why.empty()) {
        m.mismatch = true;
        m.mismatch_why = why;
    }
    m.st_out.code = m.code;
}

void SendEngine::finish(uint64_t now, Msg& m, bool ok, const std::string& err)
{
    if (m.st == St::Done) return;
    if (m.st == St::Sending && !ops(m.code).coded() && !m.acked.empty())
        for (uint32_t c = 0; c < m.lay.chunks; c++)
            if (!m.acked[c] && m.tx_count[c]) outstanding_ -= chunk_len(m.lay, geo_.chunk_bytes, c);
    Action a{Action::Finish};
    a.seq = m.seq;
    a.ok = ok;
    a.error = err;
    a.count = m.st == St::WaitCts ? 0 : 1;  // 0: its SDR messages were never opened
    out_.push(a);
    m.st = St::Done;
    m.st_out.ok = ok;
    m.st_out.error = err;
    m.st_out.done_ns = now;
    ack_pauses_.message_done(m.max_ack_gap);
    m.sent_ns = {};
    m.rto_at = {};
    m.rto_heap = {};
    m.deferred = {};
    m.pos = {};
    m.left_ns = {};
    m.emitted_ns = {};
    m.tx_count = {};
    m.acked = {};
    m.parity_sent = {};
    pump(now);  // a window may have opened
}

void SendEngine::on_timer(uint64_t now)
{
    for (auto& entry : msgs_) {
        Msg& m = entry.second;  // a plain reference: lambdas below capture it (clang cannot capture bindings)
        if (m.st == St::Done) continue;
        if (now >= m.deadline && m.st != St::Starting) {
            // A message still waiting for CTS is reported now but keeps its place in the order:
            // if the CTS comes after all, its SDR messages are opened empty (ghost).
            bool waiting = m.st == St::WaitCts;
            finish(now, m, false, std::string(waiting ? "global timeout: no clear-to-send from the receiver within "
                                                      : "global timeout: not acknowledged within ") +
                                      std::to_string((m.deadline - m.st_out.post_ns) / 1000000) + " ms");
            m.ghost = waiting;
            continue;
        }
        if (m.st != St::Sending) continue;
        if (now >= m.next_rto) {
            // The due chunks in chunk order, repeated as runs of consecutive chunks. A chunk
            // past max_rounds fails the message; runs before it (not the one it ends) went out.
            auto& heap = m.rto_heap;
            due_.clear();
            while (!heap.empty() && heap.front().first <= now) {
                auto [t, c] = heap.front();
                std::pop_heap(heap.begin(), heap.end(), std::greater<>());
                heap.pop_back();
                if (m.rto_at[c] == t) due_.push_back(c);
            }
            std::sort(due_.begin(), due_.end());
            due_.erase(std::unique(due_.begin(), due_.end()), due_.end());
            bool ask = false;  // a silent chunk without evidence: a REQ asks what arrived
            for (uint32_t c : due_) ask = ask || (!shown_lost(m, c) && silent(now, m, c));
            if (ask) {
                send_req(now, m);
                m.probe_quiet_until = now + rto_ns();
            }
            std::erase_if(due_, [&](uint32_t c) {
                if (shown_lost(m, c)) return false;
                // Not left yet: look again after an RTO (on_left starts its clock meanwhile).
                m.rto_at[c] = m.left_ns[c] ? std::max({progress_ns_, m.left_ns[c], m.probe_quiet_until}) + quiet_ns(m)
                                           : now + rto_ns();
                heap.emplace_back(m.rto_at[c], c);
                std::push_heap(heap.begin(), heap.end(), std::greater<>());
                if (std::find(m.deferred.begin(), m.deferred.end(), c) == m.deferred.end()) m.deferred.push_back(c);
                return true;
            });
            uint32_t run = 0, first = 0;
            bool failed = false;
            for (uint32_t c : due_) {
                if (run && c != first + run) {
                    emit_data(now, m, first, run, true);
                    run = 0;
                }
                if (m.tx_count[c] > cfg_.max_rounds) {
                    failed = true;
                    break;
                }
                if (!run) first = c;
                run++;
            }
            if (failed) {
                finish(now, m, false, "a chunk was lost more than max_rounds (" + std::to_string(cfg_.max_rounds) +
                                          ") times");
                continue;
            }
            if (run) emit_data(now, m, first, run, true);
            if (!due_.empty()) m.st_out.rounds++;
            while (!heap.empty() && m.rto_at[heap.front().second] != heap.front().first) {
                std::pop_heap(heap.begin(), heap.end(), std::greater<>());
                heap.pop_back();
            }
            m.next_rto = heap.empty() ? kNever : heap.front().first;
        }
        if (now >= m.probe_at) {
            if (++m.probes > cfg_.max_rounds) {
                finish(now, m, false, "the receiver did not answer " + std::to_string(cfg_.max_rounds) + " probes");
                continue;
            }
            send_req(now, m);
            m.probe_at = now + rto_ns();
        }
    }
}

uint64_t SendEngine::next_deadline() const
{
    uint64_t t = kNever;
    for (const auto& [seq, m] : msgs_) {
        if (m.st == St::Done) continue;
        // A message waiting for its CTS times out too (on_timer ends it): were its deadline left
        // out, a lost last CTS would leave a caller that sleeps until the next deadline asleep.
        if (m.st != St::Starting) t = std::min(t, m.deadline);
        if (m.st == St::Sending) t = std::min({t, m.next_rto, m.probe_at});
    }
    return t;
}

}  // namespace sdr::rel
