// The receiver half of a reliable connection: posts receives and gives CTS, turns bitmaps into
// ACKs (and NACKs for sr-nack), decides EC decoding per submessage, arms the fallback timeout,
// answers probes from its history, and bounds everything with rounds and a global timeout.
#include "engine_util.hpp"

#include <sdr/reliability/scheme.hpp>

#include <algorithm>
#include <cstring>

namespace sdr::rel {

RecvEngine::RecvEngine(const Config& c, const Geometry& g, uint32_t incarnation)
    : cfg_(c), geo_(g), inc_(incarnation), rtt_(c.rtt_ms * 1e6), rate_(1 / wire_ns_per_byte(c, g)),
      drops_(c.drop_hint, g.packets_per_chunk())
{
}

uint64_t RecvEngine::ack_interval_ns() const
{
    return static_cast<uint64_t>(cfg_.ack_interval_us > 0 ? cfg_.ack_interval_us * 1e3 : rtt_ns() / 64);
}

// RTT (1 + alpha) plus the ACK interval: when a clear-to-send that let nothing in is sent again.
uint64_t RecvEngine::rto() const { return static_cast<uint64_t>(rtt_ns() * (1 + cfg_.alpha)) + ack_interval_ns(); }

// How long a named chunk's repair gets to land before it is named again: 1.25 RTT, since a
// repeat queued behind other repeats arrives later than one RTT, and naming it again sooner only
// duplicates it. Far shorter than an RTO, which a repair lost once more would otherwise cost.
uint64_t RecvEngine::renack_ns() const { return static_cast<uint64_t>(rtt_ns() * 1.25) + ack_interval_ns(); }

// How long arrivals may pause before the sender counts as done when its REQ is lost: an RTO,
// or four times the longest pause seen inside recent messages and this one while they were sent
// (a real-time NIC whose thread was not scheduled pauses too, and its frames were not lost).
uint64_t RecvEngine::quiet_ns(const Msg& m) const
{
    return std::max(rto(), 4 * std::max(arrival_pauses_.longest_ns(), m.max_gap_ns));
}

// One past the last send position of a message (see judge_losses).
uint64_t RecvEngine::end_pos(const Msg& m) const
{
    if (!ops(m.code).coded() || m.lay.submessages == 0) return m.lay.chunks;
    const uint64_t k = m.lay.k, pm = m.lay.first_parity, last = m.lay.chunks - (m.lay.submessages - 1) * k;
    return (m.lay.submessages - 1) * (k + pm) + (pm ? k + pm : last);
}

// EC's fallback timeout has come; the sender's first transmissions of the message are over if
// the sender said so (its REQ, sent when they left its NIC, comes behind them), its last send
// position arrived, a later message's chunks arrive (messages are sent in order), or, the REQ
// lost, nothing has arrived for quiet_ns(). Before that, a missing chunk may still be on its
// way: the timeout rests on a rate estimate, and a NIC slower than it, or a message queued
// behind others, would have its chunks named while they are sent.
bool RecvEngine::injection_over(uint64_t now, const Msg& m) const
{
    return m.sender_seen || m.judged_to >= end_pos(m) || newest_seq_ > m.seq + 1 ||
           now >= last_arrival_ns_ + quiet_ns(m);
}

uint32_t RecvEngine::fit_bits() const { return static_cast<uint32_t>((geo_.ctrl_max_bytes - kCtrlHeaderBytes) * 8); }

Code RecvEngine::choose_code(uint64_t bytes, double rtt_ms, double bw_gbps) const
{
    if (cfg_.scheme != Scheme::Auto) return fixed_code(cfg_);
    PathEstimate path{rtt_ms, bw_gbps, drops_.packet_drop(), kPacketOverheadBytes};
    Config c = cfg_;
    c.rtt_ms = rtt_ms;
    auto v = estimate_schemes(path, bytes, geo_.chunk_bytes, geo_.mtu, c);
    std::erase_if(v, [&](const SchemeEstimate& e) {
        return uint64_t{Layout::of({e.scheme, e.k, e.m}, geo_, bytes).parity} * geo_.chunk_bytes >
                                      geo_.slot_bytes;
    });
    SchemeEstimate e = pick_scheme(v);  // sr and sr-nack always remain
    return {e.scheme, e.k, e.m};
}

uint64_t RecvEngine::post(uint64_t now, uint64_t bytes, const Code& code)
{
    Msg m;
    m.seq = next_seq_++;
    m.code = code;
    m.lay = Layout::of(code, geo_, bytes);
    m.deadline = now + 2 * message_timeout_ns(cfg_, rto(), ns_per_byte(), bytes);
    m.st_out.id = m.seq;
    m.st_out.bytes = bytes;
    m.st_out.post_ns = now;
    m.st_out.chunks = m.lay.chunks;
    m.st_out.code = code;
    Action a{Action::PostRecv};
    a.seq = m.seq;
    out_.push(a);
    msgs_.emplace(m.seq, std::move(m));
    return next_seq_ - 1;
}

RecvEngine::Msg* RecvEngine::find(uint64_t seq)
{
    auto it = msgs_.find(seq);
    return it == msgs_.end() ? nullptr : &it->second;
}

const MessageStats* RecvEngine::stats(uint64_t seq) const
{
    auto it = msgs_.find(seq);
    return it == msgs_.end() || it->second.st != St::Done ? nullptr : &it->second.st_out;
}

void RecvEngine::forget(uint64_t seq)
{
    auto it = msgs_.find(seq);
    if (it != msgs_.end() && it->second.st == St::Done) msgs_.erase(it);
}

void RecvEngine::active(std::vector<uint64_t>* out) const
{
    out->clear();
    for (const auto& [seq, m] : msgs_)
        if (m.st == St::Active) out->push_back(seq);
}

uint32_t RecvEngine::peer_of(uint64_t seq)
{
    const Msg* m = find(seq);
    return m ? m->peer : 0;
}

void RecvEngine::send_cts(uint64_t now, Msg& m)
{
    CtrlMsg c;
    c.type = CtrlType::Cts;
    c.scheme = m.code.scheme;
    c.k = static_cast<uint8_t>(m.code.k);
    c.m = static_cast<uint8_t>(m.code.m);
    if (const SchemeOps& o = ops(m.code); o.cts_params) c.params = o.cts_params(m.code);
    c.seq = m.seq;
    c.length = m.lay.bytes;
    send_ctrl(c);
    m.cts_at = now;
    m.cts_sent++;
}

void RecvEngine::on_posted(uint64_t now, uint64_t seq)
{
    Msg* m = find(seq);
    if (!m || m->st != St::WaitPost) return;
    m->st = St::Active;
    m->posted_ns = now;
    m->have.assign((m->lay.chunks + 63) / 64, 0);
    m->parity_have.assign((m->lay.parity + 63) / 64, 0);
    m->have_full = m->parity_full = 0;
    m->sub_data.assign(m->lay.submessages, 0);
    m->sub_parity.assign(m->lay.submessages, 0);
    m->sub_ok.assign(m->lay.submessages, 0);
    m->is_touched.assign(m->lay.submessages, 0);
    if (ops(m->code).repair == Repair::NameHoles) {
        m->hole_since.assign(m->lay.chunks, kNever);
        m->named_at.assign(m->lay.chunks, 0);
    }
    send_cts(now, *m);
    if (m->lay.chunks == 0) {
        send_ack(now, *m, kAckFinal);
        deliver(now, *m, true, "");
    }
}

bool RecvEngine::sub_decodable(const Msg& m, uint32_t s) const
{
    SubmessageView v;
    v.k = m.lay.k;
    v.first = s * m.lay.k;
    v.n = std::min(m.lay.k, m.lay.chunks - v.first);
    v.data_held = m.sub_data[s];
    v.parity_held = m.sub_parity[s];
    v.have = m.have.data();
    v.parity_have = m.parity_have.data();
    v.first_parity = s * m.lay.slots;
    v.parity_slots = m.lay.slots;
    v.index = s;
    return ops(m.code).decodable(m.code, v);
}

// Submessages whose counts changed: complete, or decodable now (then rebuilt by the binding).
void RecvEngine::check_submessages(Msg& m)
{
    for (uint32_t s : m.touched) {
        m.is_touched[s] = 0;
        if (m.sub_ok[s]) continue;
        uint32_t first = s * m.lay.k, n = std::min(m.lay.k, m.lay.chunks - first);
        bool whole = m.sub_data[s] == n;
        if (!whole && !sub_decodable(m, s)) continue;
        if (!whole) {
            Action a{Action::Decode};
            a.seq = m.seq;
            a.first = s;
            out_.push(a);
            for (uint32_t c = first; c < first + n; c++)
                if (!held(m.have, c)) {
                    hold(m.have, c);
                    m.held++;
                    m.st_out.decoded_chunks++;
                }
            m.sub_data[s] = static_cast<uint16_t>(n);
        }
        m.sub_ok[s] = 1;
        m.subs_ok++;
    }
    m.touched.clear();
}

void RecvEngine::on_bitmap(uint64_t now, uint64_t seq, const uint8_t* data_bits, const uint8_t* parity_bits)
{
    Msg* m = find(seq);
    if (!m || m->st != St::Active) return;
    const bool ec = ops(m->code).coded();
    const uint32_t k = m->lay.k, pm = m->lay.first_parity, slots = m->lay.slots;
    uint64_t sent_to = 0;  // past the furthest send position that arrived
    uint64_t arrived = 0;  // payload bytes
    const uint64_t prev_ns = m->any ? m->newest_ns : 0;
    auto touch = [&](uint32_t s) {
        if (!m->is_touched[s]) {
            m->is_touched[s] = 1;
            m->touched.push_back(s);
        }
    };
    take_new_bits(data_bits, m->lay.chunks, m->have, m->have_full, [&](uint32_t c) {
        arrived += std::min<uint64_t>(geo_.chunk_bytes, m->lay.bytes - uint64_t{c} * geo_.chunk_bytes);
        m->held++;
        m->dirty = true;
        m->any = true;
        m->highest = std::max(m->highest, c + 1);
        m->newest = c;
        m->newest_ns = now;
        if (ec) {
            m->sub_data[c / k]++;
            touch(c / k);
            sent_to = std::max(sent_to, uint64_t{c / k} * (k + pm) + c % k + 1);
        } else {
            sent_to = std::max(sent_to, uint64_t{c} + 1);
        }
    });
    if (ec && parity_bits)
        take_new_bits(parity_bits, m->lay.parity, m->parity_have, m->parity_full, [&](uint32_t c) {
            arrived += geo_.chunk_bytes;
            m->any = true;
            m->sub_parity[c / slots]++;
            touch(c / slots);
            // Parity sent with the data has a send position; repair asked for later has none.
            if (c % slots < pm) sent_to = std::max(sent_to, uint64_t{c / slots} * (k + pm) + k + c % slots + 1);
        });
    if (arrived) on_arrival(now, *m, arrived, prev_ns, sent_to);
    if (sent_to > m->judged_to) judge_losses(*m, sent_to);  // before decoding fills chunks in
    if (m->any && m->nack_at == kNever && ops(m->code).repair == Repair::NameHoles)
        m->nack_at = now + ack_interval_ns();
    // The paper's FTO = M/BW + 0.5·α·RTT from the first arrival, at the measured rate and RTT.
    if (m->any && m->fto_at == kNever && ec)
        m->fto_at = now + static_cast<uint64_t>(double(m->lay.bytes + uint64_t{m->lay.parity} * geo_.chunk_bytes) *
                                                    ns_per_byte() +
                                                0.5 * cfg_.fto_alpha * rtt_ns());
    if (ec) check_submessages(*m);
    bool whole = ec ? m->subs_ok == m->lay.submessages : m->held == m->lay.chunks;
    if (whole) {
        send_ack(now, *m, kAckFinal);
        deliver(now, *m, true, "");
    } else if (m->dirty && now >= m->last_ack + ack_interval_ns()) {
        send_ack(now, *m, 0);
    }
}

// What arrivals tell of the path: the RTT (from a clear-to-send sent once to the first chunk it
// let in), the arrival rate (a pause longer than half an RTT, between messages, starts a new
// sample), and the pauses inside a message still being sent.
void RecvEngine::on_arrival(uint64_t now, Msg& m, uint64_t bytes, uint64_t prev_ns, uint64_t sent_to)
{
    if (!prev_ns && m.cts_sent == 1) {
        rtt_.sample(double(now - m.cts_at));
        rtt_.bound(double(now - m.cts_at));
    }
    // Only first transmissions (arrivals that advance the send position) time the rate: repairs
    // trickle in and start the next sample afresh.
    if (now - last_arrival_ns_ > rtt_ns() / 2 || sent_to <= m.judged_to) rate_.restart();
    else rate_.delivered(now, bytes, std::max<uint64_t>(static_cast<uint64_t>(rtt_ns() / 2), 1000000));
    if (prev_ns && !m.fallback && m.judged_to < end_pos(m) && sent_to > m.judged_to)
        m.max_gap_ns = std::max(m.max_gap_ns, now - prev_ns);
    last_arrival_ns_ = now;
    newest_seq_ = std::max(newest_seq_, m.seq + 1);
}

// Drop meter: the sender injects a message in send positions (SR: chunk c at c; EC: each
// submessage's k data chunks, then its m parity chunks). A position behind one that has arrived,
// and still empty, lost its first transmission. Judged once each, so repeats (which arrive
// behind) never count; a lost tail chunk whose repeat is the first arrival there is missed, and
// a packet reordered behind a later chunk counts as lost.
void RecvEngine::judge_losses(Msg& m, uint64_t to)
{
    const uint32_t k = m.lay.k, pm = m.lay.first_parity;
    const bool ec = ops(m.code).coded();
    uint64_t judged = 0, lost = 0;
    for (uint64_t pos = m.judged_to; pos < to; pos++) {
        if (!ec) {
            judged++;
            lost += !held(m.have, static_cast<uint32_t>(pos));
            continue;
        }
        const uint64_t s = pos / (k + pm), r = pos % (k + pm);
        if (r < k) {
            const uint64_t c = s * k + r;
            if (c >= m.lay.chunks) continue;  // the last submessage is short
            judged++;
            lost += !held(m.have, static_cast<uint32_t>(c));
        } else {
            judged++;
            lost += !held(m.parity_have, static_cast<uint32_t>(s * m.lay.slots + r - k));
        }
    }
    m.judged_to = to;
    drops_.add(judged, lost);
}

void RecvEngine::send_ack(uint64_t now, Msg& m, uint8_t flags)
{
    CtrlMsg a;
    a.type = CtrlType::Ack;
    a.flags = flags;
    a.scheme = m.code.scheme;
    a.seq = m.seq;
    uint32_t cum = 0;
    if (flags & kAckFinal) {
        cum = m.lay.chunks;
    } else {
        cum = std::min(m.have_full * 64, m.lay.chunks);  // the words before hold every chunk
        while (cum < m.lay.chunks && held(m.have, cum)) cum++;
    }
    a.base = cum;
    a.nbits = std::min(m.lay.chunks - cum, fit_bits());
    a.bits.assign((a.nbits + 7) / 8, 0);
    for (uint32_t i = 0; i < a.nbits; i++)
        if (held(m.have, cum + i)) set_bit(a.bits, i);
    a.newest = m.newest;
    a.ack_delay_us = static_cast<uint32_t>(std::min<uint64_t>((now - m.newest_ns) / 1000, UINT32_MAX));
    // The FINAL ACK goes out twice: losing it costs the sender an RTO and a probe (4 RTT, the
    // whole p99.9 of EC at 0.1 % loss); a second 48-byte datagram squares that probability.
    if (flags & kAckFinal) send_ctrl(a);
    send_ctrl(a);
    m.last_ack = now;
    m.dirty = false;
}

// EC fallback: name the data chunks still missing in submessages the code cannot rebuild.
void RecvEngine::send_nack_failed(uint64_t now, Msg& m)
{
    if (++m.st_out.rounds > cfg_.max_rounds)
        return deliver(now, m, false, "EC repair did not complete within max_rounds (" +
                                          std::to_string(cfg_.max_rounds) + ") NACK rounds");
    if (const SchemeOps& o = ops(m.code); o.repair_request) {
        if (uint32_t want = o.repair_request(m.code, m.repair_round); want) return request_repair(now, m, want);
    }
    uint32_t first_missing = m.lay.chunks;
    for (uint32_t c = 0; c < m.lay.chunks; c++)
        if (!held(m.have, c)) {
            first_missing = c;
            break;
        }
    CtrlMsg n;
    n.type = CtrlType::Nack;
    n.scheme = m.code.scheme;
    n.seq = m.seq;
    n.base = first_missing;
    n.nbits = std::min(m.lay.chunks - first_missing, fit_bits());
    n.bits.assign((n.nbits + 7) / 8, 0);
    uint32_t failed_subs = 0;
    for (uint32_t s = 0; s < m.lay.submessages; s++) failed_subs += !m.sub_ok[s];
    for (uint32_t i = 0; i < n.nbits; i++) {
        uint32_t c = first_missing + i;
        if (!held(m.have, c) && !m.sub_ok[c / m.lay.k]) set_bit(n.bits, i);
    }
    if (!m.fallback) m.st_out.fallbacks = failed_subs;
    m.fallback = true;
    send_ctrl(n);
    // Named again once its repair had time to land (as sr-nack does), not after a whole RTO: a
    // repair lost once more would otherwise cost 3 RTT per round, the tail of EC at high loss.
    m.nack_at = now + renack_ns();
}

// A rateless code: ask for repair symbols up to `want` per submessage for the submessages not
// decodable yet; more each round, until the bitmap shows them decoded or the reserve is spent.
void RecvEngine::request_repair(uint64_t now, Msg& m, uint32_t want)
{
    m.repair_round++;
    uint32_t first = 0, last = 0, failed_subs = 0;
    for (uint32_t s = 0; s < m.lay.submessages; s++)
        if (!m.sub_ok[s]) {
            if (!failed_subs++) first = s;
            last = s;
        }
    CtrlMsg n;
    n.type = CtrlType::Nack;
    n.flags = kNackRepair;
    n.scheme = m.code.scheme;
    n.seq = m.seq;
    n.base = first;
    n.newest = want;
    n.nbits = failed_subs ? std::min(last - first + 1, fit_bits()) : 0;
    n.bits.assign((n.nbits + 7) / 8, 0);
    for (uint32_t i = 0; i < n.nbits; i++)
        if (!m.sub_ok[first + i]) set_bit(n.bits, i);
    if (!m.fallback) m.st_out.fallbacks = failed_subs;
    m.fallback = true;
    send_ctrl(n);
    m.nack_at = now + renack_ns();
}

// sr-nack: a chunk missing behind a later arrival is named once the hole has persisted the
// reordering allowance (reorder_us, or four times the longest recent pause: a real-time
// NIC sets the bits of one batch of frames worker by worker, so a pause of its thread can show
// a chunk before an earlier one) and the NIC has moved on since it was first seen: something
// arrived, or the sender's REQ, which came behind the message. It is named again only after
// renack_ns().
void RecvEngine::scan_holes(uint64_t now, Msg& m)
{
    const uint64_t hold = std::max(static_cast<uint64_t>(cfg_.reorder_us * 1e3), 4 * arrival_pauses_.longest_ns());
    const uint64_t again = renack_ns();
    std::vector<uint32_t> named;
    for (uint32_t c = 0; c + 1 < m.highest; c++) {
        if (held(m.have, c)) continue;
        if (m.hole_since[c] == kNever) m.hole_since[c] = now;
        if (now >= m.hole_since[c] + hold && (last_arrival_ns_ > m.hole_since[c] || m.sender_seen) &&
            (m.named_at[c] == 0 || now >= m.named_at[c] + again)) {
            named.push_back(c);
            m.named_at[c] = now;
        }
    }
    if (named.empty()) return;
    m.st_out.rounds++;
    for (size_t i = 0; i < named.size();) {  // as many NACKs as the list needs
        CtrlMsg n;
        n.type = CtrlType::Nack;
        n.scheme = m.code.scheme;
        n.seq = m.seq;
        n.base = named[i];
        uint32_t span = std::min(fit_bits(), m.highest - n.base);
        n.nbits = span;
        n.bits.assign((span + 7) / 8, 0);
        for (; i < named.size() && named[i] < n.base + span; i++) set_bit(n.bits, named[i] - n.base);
        send_ctrl(n);
    }
}

void RecvEngine::deliver(uint64_t now, Msg& m, bool ok, const std::string& err)
{
    if (m.st == St::Done) return;
    bool was_posted = m.st == St::Active;
    if (!ok && was_posted) send_ack(now, m, kAckFailed);
    Action a{Action::Deliver};
    a.seq = m.seq;
    a.ok = ok;
    a.error = err;
    a.count = was_posted ? 1 : 0;
    out_.push(a);
    m.st = St::Done;
    m.st_out.ok = ok;
    m.st_out.error = err;
    m.st_out.done_ns = now;
    arrival_pauses_.message_done(m.max_gap_ns);
    history_[m.seq] = ok;
    while (history_.size() > 4096) history_.erase(history_.begin());
    m.have = {};
    m.parity_have = {};
    m.hole_since = {};
    m.named_at = {};
}

void RecvEngine::on_ctrl(uint64_t now, const CtrlMsg& c)
{
    if (c.to != inc_) return;  // meant for another incarnation on this QP
    Msg* m = find(c.seq);
    if (m) m->peer = c.from;
    if (c.type == CtrlType::Req) {
        if (!m || m->st == St::Done) {
            auto h = history_.find(c.seq);
            if (h == history_.end()) return;
            CtrlMsg a;
            a.type = CtrlType::Ack;
            a.flags = h->second ? kAckFinal : kAckFailed;
            a.scheme = cfg_.scheme;
            a.seq = c.seq;
            send_ctrl(a);
            return;
        }
        if (m->st != St::Active) return;
        m->sender_seen = true;  // its first transmissions have left
        // The fallback keeps its time (the FTO, armed at the first arrival); with nothing arrived
        // there is none: what is missing is everything.
        if (ops(m->code).coded() && !m->fallback && (m->fto_at == kNever || now >= m->fto_at)) send_nack_failed(now, *m);
        else send_ack(now, *m, kAckReply);
    } else if (c.type == CtrlType::Abort && m && m->st != St::Done) {
        deliver(now, *m, false, "the sender abandoned the message (see its error)");
    }
}

void RecvEngine::on_timer(uint64_t now)
{
    for (auto& [seq, m] : msgs_) {
        if (m.st == St::Done) continue;
        if (now >= m.deadline) {
            if (m.st == St::Active) {
                deliver(now, m, false, "global timeout: message incomplete after " +
                                           std::to_string((m.deadline - m.st_out.post_ns) / 1000000) + " ms");
                continue;
            }
        }
        if (m.st != St::Active) continue;
        if (!m.any && !m.sender_seen && now >= m.cts_at + rto()) send_cts(now, m);  // CTS may be lost
        if (m.dirty && now >= m.last_ack + ack_interval_ns()) send_ack(now, m, 0);
        const Repair repair = ops(m.code).repair;
        if (repair == Repair::NameHoles && m.any && now >= m.nack_at) {
            scan_holes(now, m);
            m.nack_at = now + ack_interval_ns();
        }
        if (repair == Repair::Code && !m.fallback && now >= m.fto_at) {
            if (injection_over(now, m)) send_nack_failed(now, m);
            else m.fto_at = std::max(now + 1, last_arrival_ns_ + quiet_ns(m));
        } else if (repair == Repair::Code && m.fallback && now >= m.nack_at) send_nack_failed(now, m);
    }
}

uint64_t RecvEngine::next_deadline() const
{
    uint64_t t = kNever;
    const uint64_t ack = ack_interval_ns();
    for (const auto& [seq, m] : msgs_) {
        if (m.st != St::Active) continue;
        t = std::min(t, m.deadline);
        if (!m.any && !m.sender_seen) t = std::min(t, m.cts_at + rto());
        if (m.dirty) t = std::min(t, m.last_ack + ack);
        const Repair repair = ops(m.code).repair;
        if (repair == Repair::NameHoles && m.any) t = std::min(t, m.nack_at);
        if (repair == Repair::Code) t = std::min(t, m.fallback ? m.nack_at : m.fto_at);
    }
    return t;
}

}  // namespace sdr::rel
