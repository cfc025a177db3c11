// Fuzz target: the reliability layer's control-message decoder (ctrl_msg.cpp) and the engines
// that act on what it decodes.
//
// A whole connection runs in the program: a SendEngine and a RecvEngine (the two ends of one
// direction), joined by a control path and a data path the input controls, with the actions
// handled as the Endpoint binding handles them (endpoint.cpp: REQ and ABORT go to the receiver,
// CTS, ACK and NACK to the sender). Input: one byte of configuration (scheme and code), three
// message sizes, then operations: inject any datagram (hostile bytes, decoded as the binding
// decodes a received one), deliver, drop, duplicate or reorder the legitimate datagrams and data
// chunks in flight, let time pass, post further messages.
//
// Invariants:
//  - decode accepts exactly the layout encode writes: a datagram it accepts re-encodes to the
//    same bytes (version 1's reserved bytes 6..7 aside; version 2's parameter area included);
//  - every control datagram the engines emit decodes, and fits the control MTU;
//  - Data, Parity and Decode actions name chunks and submessages inside their message;
//  - each message ends once on each side (Finish, Deliver), with its stats;
//  - after the input, with the paths lossless and time running deadline to deadline, every
//    message posted on either side ends (ok or with an error): hostile datagrams cannot make a
//    message hang.
#include "fuzz_input.hpp"

#include <sdr/reliability/ctrl_msg.hpp>
#include <sdr/reliability/engine.hpp>

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

using sdr::fuzz::Reader;
using namespace sdr::rel;

constexpr uint32_t kSenderInc = 0x5E1D, kReceiverInc = 0x2EC5;

struct Arrival {
    uint64_t seq;
    uint32_t chunk;
    bool parity;
};

struct RxMsg {
    uint64_t bytes = 0;
    Code code;
    Layout lay;
    bool posted = false, over = false;
    std::vector<uint8_t> data, parity;
};

struct TxMsg {
    uint64_t bytes = 0;
    bool over = false;
};

struct Conn {
    Config cfg;
    Geometry geo;
    std::unique_ptr<SendEngine> tx;
    std::unique_ptr<RecvEngine> rx;
    uint64_t now = 1'000'000;
    std::deque<std::vector<uint8_t>> to_rx, to_tx;  // legitimate datagrams in flight
    std::deque<Arrival> chunks;                      // data and parity chunks in flight
    std::map<uint64_t, TxMsg> sends;
    std::map<uint64_t, RxMsg> recvs;

    explicit Conn(uint8_t conf)
    {
        static const Scheme schemes[] = {Scheme::Sr, Scheme::SrNack, Scheme::EcXor, Scheme::EcMds, Scheme::Auto};
        static const uint32_t codes[][2] = {{4, 2}, {8, 2}, {3, 1}, {6, 3}};
        cfg.scheme = schemes[conf % 5];
        if (conf & 0x80 && cfg.scheme == Scheme::EcXor) cfg.scheme = Scheme::EcLt;  // the fountain code
        cfg.k = codes[(conf >> 3) % 4][0];
        cfg.m = codes[(conf >> 3) % 4][1];
        cfg.rtt_ms = 1;
        cfg.bw_gbps = 10;
        cfg.ack_interval_us = 500;
        cfg.max_rounds = 4;
        cfg.timeout_ms = 20;
        cfg.window_bytes = conf & 0x20 ? 16384 : 0;
        cfg.compute = false;
        cfg.drop_hint = conf & 0x40 ? 0.01 : 0;
        std::string err;
        if (!validate(cfg, &err)) cfg.scheme = Scheme::Sr;
        geo.chunk_bytes = 4096;
        geo.mtu = 1024;
        geo.ctrl_max_bytes = 4096;
        geo.slot_bytes = 1 << 20;
        tx = std::make_unique<SendEngine>(cfg, geo, kSenderInc);
        rx = std::make_unique<RecvEngine>(cfg, geo, kReceiverInc);
    }

    void post_send(uint64_t bytes)
    {
        uint64_t seq = tx->post(now, bytes);
        SDR_FUZZ_CHECK(!sends.count(seq), "send seq %llu posted twice", (unsigned long long)seq);
        sends[seq].bytes = bytes;
    }
    void post_recv(uint64_t bytes)
    {
        Code code = rx->choose_code(bytes, cfg.rtt_ms, cfg.bw_gbps);
        uint64_t seq = rx->post(now, bytes, code);
        SDR_FUZZ_CHECK(!recvs.count(seq), "receive seq %llu posted twice", (unsigned long long)seq);
        RxMsg m;
        m.bytes = bytes;
        m.code = code;
        m.lay = Layout::of(code, geo, bytes);
        m.data.assign((m.lay.chunks + 7) / 8, 0);
        m.parity.assign((m.lay.parity + 7) / 8 + 1, 0);
        recvs[seq] = std::move(m);
    }

    // What the binding does with a received control datagram.
    void route(const uint8_t* p, size_t n)
    {
        CtrlMsg c;
        if (!decode(p, n, &c)) return;
        std::vector<uint8_t> again = encode(c);
        SDR_FUZZ_CHECK(again.size() == n, "decoded %zu bytes re-encode to %zu", n, again.size());
        for (size_t i = 0; i < n; i++)
            SDR_FUZZ_CHECK(((i == 6 || i == 7) && p[0] == 1) || again[i] == p[i], "byte %zu decodes to %u, re-encodes to %u", i, p[i],
                           again[i]);
        if (c.type == CtrlType::Req || c.type == CtrlType::Abort) rx->on_ctrl(now, c);
        else tx->on_ctrl(now, c);
    }

    void check_ctrl(const Action& a)
    {
        CtrlMsg c;
        SDR_FUZZ_CHECK(a.ctrl.size() <= geo.ctrl_max_bytes, "control datagram of %zu bytes", a.ctrl.size());
        SDR_FUZZ_CHECK(decode(a.ctrl.data(), a.ctrl.size(), &c), "an engine emitted a datagram decode refuses");
    }

    void sender_actions()
    {
        Action a;
        while (tx->poll_action(&a)) {
            auto it = sends.find(a.seq);
            SDR_FUZZ_CHECK(it != sends.end(), "sender action %d for unknown seq %llu", a.kind,
                           (unsigned long long)a.seq);
            const Code* code = tx->code(a.seq);
            Layout lay = code ? Layout::of(*code, geo, it->second.bytes) : Layout{};
            switch (a.kind) {
            case Action::Start: tx->on_started(now, a.seq); break;
            case Action::Data:
                SDR_FUZZ_CHECK(code && a.count && a.first + uint64_t{a.count} <= lay.chunks,
                               "Data [%u, +%u) of a message of %u chunks", a.first, a.count, lay.chunks);
                for (uint32_t c = 0; c < a.count; c++) chunks.push_back({a.seq, a.first + c, false});
                break;
            case Action::Parity:
                SDR_FUZZ_CHECK(code && is_ec(code->scheme) && a.first < lay.submessages && a.count &&
                                   a.from + uint64_t{a.count} <= lay.slots,
                               "Parity [%u, +%u) of submessage %u of %u (%u slots)", a.from, a.count, a.first,
                               lay.submessages, lay.slots);
                for (uint32_t c = 0; c < a.count; c++) chunks.push_back({a.seq, a.first * lay.slots + a.from + c, true});
                break;
            case Action::Finish:
                SDR_FUZZ_CHECK(!it->second.over, "send %llu finished twice", (unsigned long long)a.seq);
                SDR_FUZZ_CHECK(tx->stats(a.seq), "send %llu finished without stats", (unsigned long long)a.seq);
                it->second.over = true;
                break;
            case Action::Ctrl:
                check_ctrl(a);
                to_rx.push_back(a.ctrl);
                break;
            default: SDR_FUZZ_CHECK(false, "sender emitted action %d", a.kind);
            }
        }
    }

    void receiver_actions()
    {
        Action a;
        while (rx->poll_action(&a)) {
            auto it = recvs.find(a.seq);
            SDR_FUZZ_CHECK(it != recvs.end(), "receiver action %d for unknown seq %llu", a.kind,
                           (unsigned long long)a.seq);
            RxMsg& m = it->second;
            switch (a.kind) {
            case Action::PostRecv:
                m.posted = true;
                rx->on_posted(now, a.seq);
                break;
            case Action::Decode:
                SDR_FUZZ_CHECK(is_ec(m.code.scheme) && a.first < m.lay.submessages, "Decode of submessage %u of %u",
                               a.first, m.lay.submessages);
                break;
            case Action::Deliver:
                SDR_FUZZ_CHECK(!m.over, "receive %llu delivered twice", (unsigned long long)a.seq);
                SDR_FUZZ_CHECK(rx->stats(a.seq), "receive %llu delivered without stats", (unsigned long long)a.seq);
                m.over = true;
                break;
            case Action::Ctrl:
                check_ctrl(a);
                to_tx.push_back(a.ctrl);
                break;
            default: SDR_FUZZ_CHECK(false, "receiver emitted action %d", a.kind);
            }
        }
    }

    // Endpoint::progress after an event: bitmaps, timers, actions until none is left.
    void progress()
    {
        std::vector<uint64_t> active;
        rx->active(&active);
        for (uint64_t seq : active) {
            RxMsg& m = recvs.at(seq);
            rx->on_bitmap(now, seq, m.data.data(), is_ec(m.code.scheme) ? m.parity.data() : nullptr);
        }
        tx->on_timer(now);
        rx->on_timer(now);
        for (int i = 0; i < 8; i++) {
            sender_actions();
            receiver_actions();
        }
        sender_actions();
    }

    void arrive(const Arrival& c)
    {
        auto it = recvs.find(c.seq);
        if (it == recvs.end() || !it->second.posted) return;  // nothing posted there: the NIC drops it
        RxMsg& m = it->second;
        uint32_t n = c.parity ? m.lay.parity : m.lay.chunks;
        if (c.chunk >= n) return;  // beyond the receive (a mismatched sender): not placed
        std::vector<uint8_t>& bits = c.parity ? m.parity : m.data;
        bits[c.chunk / 8] |= static_cast<uint8_t>(1u << (c.chunk % 8));
    }

    bool all_over() const
    {
        for (const auto& [seq, m] : sends)
            if (!m.over) return false;
        for (const auto& [seq, m] : recvs)
            if (!m.over) return false;
        return true;
    }
};

uint64_t size_of(uint8_t b) { return b < 8 ? b : uint64_t{b} * 1000; }

void run(Conn& c, Reader& in)
{
    while (!in.empty()) {
        uint8_t op = in.u8();
        switch (op % 10) {
        case 0: {  // a datagram from anyone
            size_t got = 0;
            const uint8_t* p = in.bytes(in.u16() % 1024, &got);
            c.route(p, got);
            break;
        }
        case 1:
        case 2: {  // the next legitimate datagram arrives (op bit 4: towards the sender)
            auto& q = op & 0x10 ? c.to_tx : c.to_rx;
            if (q.empty()) break;
            std::vector<uint8_t> d = std::move(q.front());
            q.pop_front();
            c.route(d.data(), d.size());
            break;
        }
        case 3: {  // lost, duplicated or overtaken
            auto& q = op & 0x10 ? c.to_tx : c.to_rx;
            if (q.empty()) break;
            if (op & 0x20) q.push_back(q.front());
            else if (op & 0x40 && q.size() > 1) std::swap(q[0], q[1]);
            else q.pop_front();
            break;
        }
        case 4:
        case 5: {  // data chunks arrive
            for (uint32_t n = 1 + in.u8() % 16; n && !c.chunks.empty(); n--) {
                c.arrive(c.chunks.front());
                c.chunks.pop_front();
            }
            break;
        }
        case 6:
            if (!c.chunks.empty()) {
                if (op & 0x10 && c.chunks.size() > 1) std::swap(c.chunks[0], c.chunks[1]);
                else c.chunks.pop_front();
            }
            break;
        case 7:
        case 8: c.now += uint64_t{in.u16()} * 1000; break;
        default:
            if (op & 0x10) c.post_send(size_of(in.u8()));
            else c.post_recv(size_of(in.u8()));
            break;
        }
        c.progress();
    }
}

// Lossless paths from here on, time running deadline to deadline: everything must end.
void drain(Conn& c)
{
    while (c.sends.size() < c.recvs.size()) c.post_send(c.recvs.at(c.sends.size()).bytes);
    while (c.recvs.size() < c.sends.size()) c.post_recv(c.sends.at(c.recvs.size()).bytes);
    c.progress();
    const uint64_t limit = c.now + 10'000'000'000ull;  // 10 s: far beyond every timeout
    for (int steps = 0; steps < 200000 && !c.all_over(); steps++) {
        if (!c.to_rx.empty() || !c.to_tx.empty() || !c.chunks.empty()) {
            while (!c.chunks.empty()) {
                c.arrive(c.chunks.front());
                c.chunks.pop_front();
            }
            for (auto* q : {&c.to_rx, &c.to_tx})
                while (!q->empty()) {
                    std::vector<uint8_t> d = std::move(q->front());
                    q->pop_front();
                    c.route(d.data(), d.size());
                }
        } else {
            uint64_t t = std::min(c.tx->next_deadline(), c.rx->next_deadline());
            SDR_FUZZ_CHECK(t != kNever, "messages still open, and neither engine has a deadline");
            c.now = std::max(c.now + 1, t);
            SDR_FUZZ_CHECK(c.now < limit, "messages still open 10 s after the input");
        }
        c.progress();
    }
    SDR_FUZZ_CHECK(c.all_over(), "messages still open after 200000 steps");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    Reader in(data, size);
    Conn c(in.u8());
    for (int i = 0; i < 3; i++) {
        uint64_t bytes = size_of(in.u8());
        c.post_recv(bytes);
        c.post_send(bytes);
    }
    c.progress();
    run(c, in);
    drain(c);
    return 0;
}
