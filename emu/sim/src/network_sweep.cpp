// The switches' windows (network.hpp): conservative lookahead, as in parallel discrete-event
// simulation (Chandy and Misra 1979; Lubachevsky's bounded lag), used here on one core to take
// the hops out of the event scheduler.
//
// Every switch-bound pipe and every PFC frame between switches takes at least L (the shortest
// link delay plus hop latency). So when the scheduler reaches T, everything that arrives at a
// switch before T + L is already in its pipes, and nothing a switch does in [T, T + L) reaches
// another switch before T + L: each switch runs its share of the window alone, in time order,
// and the window costs one scheduler event for all of them.
#include <sdr/emu/network.hpp>

#include <sdr/emu/capture_notes.hpp>
#include <sdr/emu/fabric.hpp>

#include <algorithm>
#include <cstring>

namespace sdr::emu {

namespace {

// Arrivals in time order; at equal times by the port they came in by, and in the order their
// pipe delivered them (stable): the same order whichever way the switch runs the window.
void order_arrivals(std::vector<FabricPacket>& v)
{
    for (size_t i = 1; i < v.size(); i++) {
        if (v[i - 1].t < v[i].t || (v[i - 1].t == v[i].t && v[i - 1].in_port <= v[i].in_port)) continue;
        const FabricPacket p = v[i];
        size_t j = i;
        for (; j > 0 && (v[j - 1].t > p.t || (v[j - 1].t == p.t && v[j - 1].in_port > p.in_port)); j--) v[j] = v[j - 1];
        v[j] = p;
    }
}

}  // namespace

SimTime SimSwitch::next_work() const
{
    SimTime w = Pipe::kNever;
    for (const Pipe* in : inputs_) w = std::min(w, in->next_arrival());
    for (const auto& e : ports_) w = std::min(w, e->next_work());
    return w;
}

// Where an arrival goes: its egress's inbox for this window (copies for a multicast group's
// tree), or a drop if there is no route.
void SimSwitch::route_arrival(FabricPacket& p, uint16_t in_port)
{
    p.in_port = in_port;
    const uint32_t bytes = p.frame_len + kWireOverheadBytes;
    auto to = [&](uint16_t port, const FabricPacket& q) {
        std::vector<FabricPacket>& box = ports_[port]->inbox();
        if (box.empty()) touched_.push_back(port);
        box.push_back(q);
        box.back().out_port = port;
        window_bytes_ += bytes;
    };
    if (p.dst != kMulticastDst) [[likely]] return to(route(p), p);
    // One copy per port of the group's tree but the one it came in by; off the tree, up
    // towards the root, where the tree begins.
    auto it = mcast_ports_.find(p.flow);
    if (it == mcast_ports_.end()) {
        if (up_port_ >= 0 && up_port_ != in_port) return to(static_cast<uint16_t>(up_port_), p);
        return net_.drop(p, p.t, capture_note::kNoRoute);  // nobody listens
    }
    for (uint16_t port : it->second) {
        if (port == in_port) continue;
        FabricPacket copy = p;
        if (p.frame) {
            copy.frame = net_.fabric().frame_alloc();
            std::memcpy(copy.frame, p.frame, p.frame_len);
        }
        to(port, copy);
    }
    if (p.frame) net_.fabric().frame_free(p.frame);
}

// Whether every arrival of the window is admitted in any order: the buffer can only be fuller
// than at the window's start by the window's arrivals, and each queue fuller by its own. Then
// the ports do not interact and each takes its arrivals alone.
bool SimSwitch::all_admitted() const
{
    if (!p_.shared_buffer) return true;  // per-port buffers: each queue's bound is its own
    const uint64_t most = used_ + window_bytes_;
    if (most > p_.buffer_bytes) return false;
    const double room = p_.dt_alpha * static_cast<double>(p_.buffer_bytes - most);
    for (uint16_t port : touched_) {
        const Egress& e = *ports_[port];
        uint64_t q = e.counters().bytes;
        for (const FabricPacket& p : const_cast<Egress&>(e).inbox()) q += p.frame_len + kWireOverheadBytes;
        if (q > p_.reserve_bytes && static_cast<double>(q) > room) return false;
    }
    return true;
}

void SimSwitch::sweep(SimTime end)
{
    window_bytes_ = 0;
    uint64_t arrived = 0;
    for (uint16_t i = 0; i < inputs_.size(); i++) {
        Pipe* in = inputs_[i];
        if (in->next_arrival() >= end) continue;
        FabricPacket p;
        while (in->pop_before(end, &p)) {
            arrived++;
            route_arrival(p, i);
        }
    }
    net_.count_hops(arrived);
    if (p_.pfc || !all_admitted()) sweep_in_order(end);
    else sweep_by_port(end);
}

// The common case: each port takes its own arrivals and departures in time order.
void SimSwitch::sweep_by_port(SimTime end)
{
    for (uint16_t port : touched_) {
        Egress& e = *ports_[port];
        std::vector<FabricPacket>& box = e.inbox();
        order_arrivals(box);
        for (FabricPacket& p : box) {
            e.advance(p.t);
            forward(p, e, p.t);
        }
        box.clear();
    }
    touched_.clear();
    for (auto& e : ports_) e->advance(end - 1);
}

// A buffer near full, or PFC: ports interact (admission by the shared buffer's fill, pauses
// by what each ingress holds), so the whole switch takes every step in time order.
void SimSwitch::sweep_in_order(SimTime end)
{
    ordered_.clear();
    for (uint16_t port : touched_) {
        std::vector<FabricPacket>& box = ports_[port]->inbox();
        ordered_.insert(ordered_.end(), box.begin(), box.end());
        box.clear();
    }
    touched_.clear();
    std::stable_sort(ordered_.begin(), ordered_.end(), [](const FabricPacket& a, const FabricPacket& b) {
        return a.t != b.t ? a.t < b.t : a.in_port < b.in_port;
    });
    for (FabricPacket& p : ordered_) {
        advance_all(p.t);
        forward(p, *ports_[p.out_port], p.t);
    }
    advance_all(end - 1);
}

// Every port's departures and PFC frames due by t, in time order across the ports (ties by
// port): what each ingress holds, and so PFC's XON, depends on that order.
void SimSwitch::advance_all(SimTime t)
{
    for (;;) {
        Egress* first = nullptr;
        SimTime at = t + 1;
        for (auto& e : ports_) {
            const SimTime w = e->next_work();
            if (w < at) at = w, first = e.get();
        }
        if (!first) return;
        first->advance(at);
    }
}

// ---- the windows ----------------------------------------------------------------------------

void SimNetwork::wake(SimSwitch& s, SimTime t)
{
    if (!s.active) {
        s.active = true;
        s.wake_at = t;
        active_.push_back(&s);
    } else if (t < s.wake_at) {
        s.wake_at = t;
    }
    // Outside a window (a NIC's uplink): the next window must start by t. Inside one, the
    // window schedules the next when it ends.
    if (!in_window_ && t < window_at_) {
        window_at_ = t;
        sim().at(t, &windows_target_);
    }
}

void SimNetwork::run_window(SimTime start)
{
    if (start != window_at_) return;  // superseded by an earlier window
    in_window_ = true;
    windows_++;
    const SimTime end = start + std::max<SimTime>(lookahead_ps_, 1);
    SimTime next;
    // One pass unless L is 0 (links without delay): then what a switch sends arrives within the
    // window, and the window runs again until nothing is due in it.
    do {
        sweeping_.clear();
        for (SimSwitch* s : active_)
            if (s->wake_at < end) sweeping_.push_back(s);
        for (SimSwitch* s : sweeping_) s->sweep(end);
        for (SimSwitch* s : sweeping_) s->wake_at = s->next_work();
        next = Pipe::kNever;
        size_t kept = 0;
        for (SimSwitch* s : active_) {
            if (s->wake_at == Pipe::kNever) {
                s->active = false;
                continue;
            }
            active_[kept++] = s;
            next = std::min(next, s->wake_at);
        }
        active_.resize(kept);
    } while (next < end);
    in_window_ = false;
    window_at_ = next;
    if (next != Pipe::kNever) sim().at(next, &windows_target_);
}

}  // namespace sdr::emu
