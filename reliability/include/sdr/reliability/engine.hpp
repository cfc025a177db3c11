// The sans-I/O engines of a reliable connection (ngtcp2/quiche style): the caller passes `now`
// and events in (control messages, bitmaps it read, its own completions), takes actions out
// and asks for the next deadline. Nothing here reads a clock, touches a buffer or calls SDR;
// the simulator and a real-time loop drive the same code through the Endpoint binding.
#pragma once

#include <sdr/reliability/config.hpp>
#include <sdr/reliability/ctrl_msg.hpp>
#include <sdr/reliability/drop_meter.hpp>
#include <sdr/reliability/path_meter.hpp>
#include <sdr/reliability/policy.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sdr::rel {

inline constexpr uint64_t kNever = UINT64_MAX;

// Sizes the engines compute with; the binding takes them from the SDR QP.
struct Geometry {
    uint32_t chunk_bytes = 65536;
    uint32_t mtu = 4096;
    uint32_t ctrl_max_bytes = 4096;
    uint64_t slot_bytes = UINT64_MAX;  // largest SDR message (a message's data, or its parity)
    uint32_t packets_per_chunk() const { return (chunk_bytes + mtu - 1) / mtu; }
};

// What the engines ask the binding to do.
struct Action {
    enum Kind : uint8_t {
        Start,     // sender: open the SDR message(s) of seq (data, then parity for EC)
        Data,      // sender: inject data chunks [first, first + count) of seq
        Parity,    // sender: encode parity chunks [from, from + count) of submessage `first` of seq, inject them
        Finish,    // sender: seq is over (ok or error): close its SDR messages, report
        PostRecv,  // receiver: post the SDR receive(s) of seq
        Decode,    // receiver: rebuild the missing data chunks of submessage `first` of seq
        Deliver,   // receiver: seq is over (ok or error): complete its SDR receive(s), report
        Ctrl,      // send this control datagram
    };
    explicit Action(Kind k = Ctrl) : kind(k) {}
    Kind kind;
    uint64_t seq = 0;
    uint32_t first = 0, count = 0;
    uint32_t from = 0;  // Parity: first parity chunk of the submessage
    bool ok = false;
    std::string error;
    std::vector<uint8_t> ctrl;
};

// Actions an engine has for the binding, control messages stamped with the incarnations.
class Outbox {
public:
    void push(Action a) { q_.push_back(std::move(a)); }
    void ctrl(CtrlMsg m, uint32_t from, uint32_t to)
    {
        m.from = from;
        m.to = to;
        Action a{Action::Ctrl};
        a.seq = m.seq;
        a.ctrl = encode(m);
        q_.push_back(std::move(a));
    }
    [[nodiscard]] bool poll(Action* out)
    {
        if (q_.empty()) return false;
        *out = std::move(q_.front());
        q_.pop_front();
        return true;
    }

private:
    std::deque<Action> q_;
};

// Per-chunk data shared by both sides: counts of chunks and submessages of a message.
struct Layout {
    uint64_t bytes = 0;
    uint32_t chunks = 0;       // data chunks
    uint32_t submessages = 0;  // coded: ceil(chunks / k)
    uint32_t parity = 0;       // coded: submessages * slots
    uint32_t k = 0;            // coded: data chunks per submessage
    uint32_t slots = 0;        // coded: parity chunks each submessage reserves in the parity message
    uint32_t first_parity = 0; // coded: parity chunks sent with each submessage's data
    static Layout of(const Code& c, const Geometry& g, uint64_t bytes);
};

class SendEngine {
public:
    // incarnation: this endpoint's nonzero id in control messages (see ctrl_msg.hpp).
    SendEngine(const Config& c, const Geometry& g, uint32_t incarnation);
    uint64_t post(uint64_t now, uint64_t bytes);  // returns the message's seq
    void on_ctrl(uint64_t now, const CtrlMsg& m);
    // The binding opened the SDR message(s); a nonempty error fails the message (they are
    // closed empty).
    void on_started(uint64_t now, uint64_t seq, const std::string& error = {});
    // The message's code: the configured one, or for auto the receiver's once its CTS came.
    const Code* code(uint64_t seq) const;
    // SDR messages the receiver posted for seq (EC: data and parity), known from its CTS: a
    // send that fails on a mismatch still opens (and closes empty) that many, to keep the order.
    uint32_t streams(uint64_t seq) const;
    // The binding's Data (chunks [first, first + count)) or Parity action of seq has left the NIC
    // (sdr_qp_send_progress): each in the order the actions came out.
    void on_left(uint64_t now, uint64_t seq, bool parity, uint32_t first, uint32_t count);
    // After the on_left calls of one look: the send rate's sample; idle: nothing is left to send.
    void end_left(uint64_t now, bool idle);
    void on_timer(uint64_t now);
    uint64_t next_deadline() const;
    [[nodiscard]] bool poll_action(Action* out) { return out_.poll(out); }
    const MessageStats* stats(uint64_t seq) const;  // kept until forget()
    void forget(uint64_t seq);
    double srtt_ns() const { return rtt_.srtt_ns(); }
    bool rtt_sampled() const { return rtt_.samples() > 0; }
    uint64_t rto_ns() const;
    const RttMeter& rtt() const { return rtt_; }
    // The delivery rate in payload bytes per ns: as BBR, the lesser of the rate the NIC sent at
    // (sdr_qp_send_progress) and the rate ACKs came back at, once measured; the first estimate
    // until then. rate_samples(): the samples it rests on.
    double delivery_bytes_per_ns() const;
    uint64_t rate_samples() const { return sent_rate_.samples() + rate_.samples(); }

private:
    enum class St : uint8_t { WaitCts, Starting, Sending, Done };
    struct Msg {
        uint64_t seq = 0;
        Code code;
        Layout lay;
        St st = St::WaitCts;
        bool cts = false, mismatch = false;
        bool ghost = false;  // failed while waiting for CTS; must still open its SDR messages
        bool peer_ec = false;  // the CTS named an EC code: the receiver posted data and parity
        uint32_t peer = 0;   // receiver incarnation from the CTS
        std::string mismatch_why;
        uint64_t deadline = 0;
        std::vector<uint64_t> sent_ns;   // estimated injection time of the last transmission
        std::vector<uint64_t> pos;       // the engine's transmission number of that transmission
        std::vector<uint64_t> left_ns;   // when the NIC said that transmission had left (0: not yet)
        std::vector<uint64_t> emitted_ns;  // when it was handed to the binding: it left later
        uint32_t unleft = 0;             // Data and Parity actions not known to have left
        std::vector<uint64_t> rto_at;    // SR timer per chunk; 0 = acknowledged / not armed
        std::vector<uint16_t> tx_count;  // transmissions per chunk
        std::vector<uint8_t> acked;
        uint32_t next_new = 0;           // SR: next chunk never sent; EC: next submessage
        uint32_t acked_count = 0;
        uint64_t next_rto = kNever;      // lower bound of the earliest rto_at
        // (rto_at, chunk) of every armed timer, earliest on top; an entry whose rto_at has
        // changed since (acknowledged, re-armed) is stale and skipped. Finding the due chunks
        // costs their number, not a scan of the message (O(chunks) per lost chunk before).
        std::vector<std::pair<uint64_t, uint32_t>> rto_heap;
        std::vector<uint32_t> deferred;  // chunks whose timer expired before the path showed them lost
        uint64_t acked_pos = 0;          // one past the highest transmission number acknowledged
        uint64_t probe_at = kNever;
        uint32_t probes = 0;
        bool announced = false;  // the receiver was told the first transmissions have left
        uint64_t max_ack_gap = 0;      // the longest pause between ACKs of its first transmissions
        uint64_t probe_quiet_until = 0;  // after a silence REQ, the next waits for this
        uint64_t req_at = 0;       // when the latest REQ was sent
        uint64_t proof_until = 0;  // unacknowledged chunks that left by then are lost (a REQ's reply)
        std::vector<uint16_t> parity_sent;  // coded: parity chunks sent per submessage
        MessageStats st_out;
    };
    Msg* find(uint64_t seq);
    std::vector<uint32_t> due_;  // on_timer's scratch: chunks whose timer expired
    void pump(uint64_t now);
    void emit_data(uint64_t now, Msg& m, uint32_t first, uint32_t count, bool retransmit);
    void emit_parity(uint64_t now, Msg& m, uint32_t sub, uint32_t count, uint32_t from = 0);
    uint64_t inject(uint64_t now, uint64_t bytes);  // estimated end of injection of these bytes
    double ns_per_byte() const { return 1 / delivery_bytes_per_ns(); }
    uint64_t ack_interval_ns() const;
    uint64_t quiet_ns(const Msg& m) const;
    bool shown_lost(const Msg& m, uint32_t c) const;
    bool silent(uint64_t now, const Msg& m, uint32_t c) const;
    void release_deferred(uint64_t now, Msg& m);
    void send_req(uint64_t now, Msg& m);
    void on_ack(uint64_t now, Msg& m, const CtrlMsg& a);
    void on_nack(uint64_t now, Msg& m, const CtrlMsg& n);
    void mark_acked(Msg& m, uint32_t c);
    void finish(uint64_t now, Msg& m, bool ok, const std::string& err);
    void send_ctrl(const CtrlMsg& c) { out_.ctrl(c, inc_, peer_of(c.seq)); }
    uint32_t peer_of(uint64_t seq);
    void arm_probe(uint64_t now, Msg& m);
    void check_cts(Msg& m, const CtrlMsg& c);

    Config cfg_;
    Geometry geo_;
    uint32_t inc_;
    RttMeter rtt_;
    RateMeter rate_;           // acknowledged payload bytes (data, and parity sent with it) over time
    RateMeter sent_rate_;      // payload bytes the NIC said had left, over time
    uint64_t last_left_ns_ = 0;  // when the NIC last said a request had left
    uint64_t left_bytes_ = 0;    // bytes of this look's on_left calls
    uint64_t tx_pos_ = 0;      // transmissions so far (chunk transmissions, each numbered)
    uint64_t progress_ns_ = 0; // when an ACK last acknowledged something new
    PauseMeter ack_pauses_;    // max_ack_gap of the last messages
    uint64_t tx_free_ = 0;     // estimated time the NIC has injected everything asked so far
    uint64_t outstanding_ = 0; // SR window: injected, unacknowledged bytes
    uint64_t next_seq_ = 0, next_start_ = 0;
    std::map<uint64_t, Msg> msgs_;
    static constexpr uint64_t kEarlyCts = 1024;  // CTS kept for sends not posted yet
    std::map<uint64_t, CtrlMsg> early_cts_;
    Outbox out_;
};

class RecvEngine {
public:
    RecvEngine(const Config& c, const Geometry& g, uint32_t incarnation);
    // The code a receive of `bytes` gets: the configured one, or for auto the policy's choice
    // on the path {rtt_ms, bw_gbps, the measured drop rate} among the codes whose parity fits
    // one SDR message.
    Code choose_code(uint64_t bytes, double rtt_ms, double bw_gbps) const;
    uint64_t post(uint64_t now, uint64_t bytes, const Code& code);
    void on_posted(uint64_t now, uint64_t seq);  // the binding posted the SDR receive(s)
    // The live bitmaps the binding read (data chunks; parity chunks for EC, else nullptr).
    void on_bitmap(uint64_t now, uint64_t seq, const uint8_t* data_bits, const uint8_t* parity_bits);
    void on_ctrl(uint64_t now, const CtrlMsg& m);
    void on_timer(uint64_t now);
    uint64_t next_deadline() const;
    [[nodiscard]] bool poll_action(Action* out) { return out_.poll(out); }
    const MessageStats* stats(uint64_t seq) const;
    void forget(uint64_t seq);
    // Messages whose bitmaps the binding should read (posted, not over), into *out (reused by
    // the caller: this runs on every progress call).
    void active(std::vector<uint64_t>* out) const;
    const DropMeter& drops() const { return drops_; }
    // The path as arrivals show it: the RTT and the arrival rate of payload bytes. The time from
    // a clear-to-send to the first chunk it let in is never shorter than the RTT (as long when
    // the sender was waiting for it, longer when it posted later), so it only lowers the first
    // estimate; an endpoint that also sends has its SRTT from ACKs (Endpoint::path_state).
    double rtt_ns() const { return std::min(rtt_.min_ns(), cfg_.rtt_ms * 1e6); }
    const RttMeter& rtt() const { return rtt_; }
    const RateMeter& rate() const { return rate_; }

private:
    enum class St : uint8_t { WaitPost, Active, Done };
    struct Msg {
        uint64_t seq = 0;
        Code code;
        Layout lay;
        St st = St::WaitPost;
        uint64_t posted_ns = 0, deadline = 0;
        std::vector<uint64_t> have, parity_have;  // bit per chunk held (arrived or rebuilt)
        uint32_t have_full = 0, parity_full = 0;   // leading words of each that hold every chunk
        std::vector<uint16_t> sub_data, sub_parity;  // EC: chunks held per submessage
        std::vector<uint8_t> sub_ok;
        std::vector<uint32_t> touched;
        std::vector<uint8_t> is_touched;
        uint32_t held = 0, subs_ok = 0, highest = 0;
        bool any = false, dirty = false, sender_seen = false, fallback = false;
        uint32_t newest = 0;
        uint64_t newest_ns = 0, last_ack = 0, cts_at = 0, fto_at = kNever, nack_at = kNever;
        uint32_t cts_sent = 0;
        uint64_t max_gap_ns = 0;  // the longest pause between arrivals while it was sent
        uint32_t peer = 0;  // sender incarnation, once a REQ named it
        uint32_t repair_round = 0;  // rateless codes: repair requests so far
        uint64_t judged_to = 0;  // drop meter: send positions before this are judged
        std::vector<uint64_t> hole_since, named_at;  // sr-nack
        MessageStats st_out;
    };
    Msg* find(uint64_t seq);
    void check_submessages(Msg& m);
    void send_ack(uint64_t now, Msg& m, uint8_t flags);
    void send_nack_failed(uint64_t now, Msg& m);
    void request_repair(uint64_t now, Msg& m, uint32_t want);
    void scan_holes(uint64_t now, Msg& m);
    void deliver(uint64_t now, Msg& m, bool ok, const std::string& err);
    void send_cts(uint64_t now, Msg& m);
    void send_ctrl(const CtrlMsg& c) { out_.ctrl(c, inc_, peer_of(c.seq)); }
    uint32_t peer_of(uint64_t seq);
    uint64_t rto() const;
    uint64_t renack_ns() const;
    uint64_t ack_interval_ns() const;
    uint64_t quiet_ns(const Msg& m) const;
    uint64_t end_pos(const Msg& m) const;
    bool injection_over(uint64_t now, const Msg& m) const;
    double ns_per_byte() const { return 1 / rate_.bytes_per_ns(); }
    uint32_t fit_bits() const;
    bool sub_decodable(const Msg& m, uint32_t s) const;
    void judge_losses(Msg& m, uint64_t to);
    void on_arrival(uint64_t now, Msg& m, uint64_t bytes, uint64_t prev_ns, uint64_t sent_to);

    Config cfg_;
    Geometry geo_;
    uint32_t inc_;
    RttMeter rtt_;
    RateMeter rate_;               // arrived payload bytes (data and parity) over time
    uint64_t last_arrival_ns_ = 0; // any message's
    uint64_t newest_seq_ = 0;      // one past the newest message that had an arrival
    PauseMeter arrival_pauses_;    // max_gap_ns of the last messages
    uint64_t next_seq_ = 0;
    std::map<uint64_t, Msg> msgs_;
    std::map<uint64_t, bool> history_;  // seq → ok, for REQs about finished messages
    DropMeter drops_;
    Outbox out_;
};

}  // namespace sdr::rel
