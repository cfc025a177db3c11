// The switches' windows (network.hpp): conservative lookahead, as in parallel discrete-event
// simulation (Chandy and Misra 1979; in synchronous windows, as Nicol 1993), used here on one
// core to take the hops out of the event scheduler.
//
// Every switch-bound pipe and every PFC frame between switches takes at least L (the shortest
// link delay plus hop latency). So when the scheduler reaches T, everything that arrives at a
// switch before T + L has already been handed to it, and nothing a switch does in [T, T + L)
// reaches another switch before T + L: each switch runs its share of the window alone, in time
// order, and the window costs one scheduler event for all of them.
#include <sdr/emu/network.hpp>

#include <sdr/emu/capture_notes.hpp>
#include <sdr/emu/fabric.hpp>

#include <algorithm>
#include <bit>
#include <cstring>

namespace sdr::emu {

namespace {

bool later_arrival(const Arrival& a, const Arrival& b) { return a.t > b.t; }

}  // namespace

SimTime SimSwitch::next_work() const
{
    SimTime w = incoming_at_;
    for (uint16_t i : busy_) w = std::min(w, ports_[i]->next_work());
    return w;
}

// The window's arrivals move to sc_.arrivals, port by port; later ones stay. Each port's
// arrivals wait in time order, so a window looks at little more than its own (a long haul holds
// thousands in flight).
void SimSwitch::take_due(SimTime end)
{
    sc_.arrivals.clear();
    if (incoming_at_ >= end) return;
    for (FifoRing<Arrival>& in : incoming_) {
        while (!in.empty() && in.front().t < end) {
            sc_.arrivals.push_back(in.front());
            in.pop();
        }
    }
    while (!overtaken_.empty() && overtaken_.front().t < end) {
        std::pop_heap(overtaken_.begin(), overtaken_.end(), later_arrival);
        sc_.arrivals.push_back(overtaken_.back());
        overtaken_.pop_back();
    }
    incoming_at_ = earliest_incoming();
}

// The earliest arrival not yet taken, in a port's FIFO or among the reordered.
SimTime SimSwitch::earliest_incoming() const
{
    SimTime t = overtaken_.empty() ? kNever : overtaken_.front().t;
    for (const FifoRing<Arrival>& in : incoming_)
        if (!in.empty()) t = std::min(t, in.front().t);
    return t;
}

void SimSwitch::overtake(const Arrival& a, SimTime t, uint16_t port)
{
    Arrival& d = overtaken_.emplace_back(a);
    d.t = t;
    d.in_port = port;
    std::push_heap(overtaken_.begin(), overtaken_.end(), later_arrival);
}

// Arrivals in time order; at equal times by the port they came in by, then in the order their
// pipe delivered them (the order they were taken, for one port). That order is the packets' own,
// not the windows': the same however wide the windows are, and whichever way a switch runs one.
// A port's arrivals come in a few runs already in order (one per upstream): insertion sort,
// unless there are many.
void SimSwitch::order(uint32_t* v, size_t n) const
{
    const Arrival* arr = sc_.arrivals.data();
    auto before = [arr](uint32_t a, uint32_t b) {
        const Arrival &x = arr[a], &y = arr[b];
        if (x.t != y.t) return x.t < y.t;
        return x.in_port != y.in_port ? x.in_port < y.in_port : a < b;
    };
    if (n > kSortFrom) return std::sort(v, v + n, before);
    for (size_t i = 1; i < n; i++) {
        if (before(v[i - 1], v[i])) continue;
        const uint32_t x = v[i];
        size_t j = i;
        for (; j > 0 && before(x, v[j - 1]); j--) v[j] = v[j - 1];
        v[j] = x;
    }
}

// Where arrival i goes: its egress (copies for a multicast group's tree), counted per port,
// or a drop if there is no route.
void SimSwitch::route_arrival(uint32_t i)
{
    const Arrival a = sc_.arrivals[i];
    auto to = [&](uint16_t port, uint32_t k) {
        if (!sc_.port_n[port]++) sc_.touched.push_back(port);
        sc_.port_bytes[port] += a.bytes;
        sc_.arrivals[k].out_port = port;
    };
    if (a.dst != kMulticastDst) [[likely]] return to(route(a), i);
    sc_.arrivals[i].out_port = kNoPort;
    // One copy per port of the group's tree but the one it came in by; off the tree, up
    // towards the root, where the tree begins.
    auto it = mcast_ports_.find(a.flow);
    if (it == mcast_ports_.end()) {
        if (up_port_ >= 0 && up_port_ != a.in_port) return to(static_cast<uint16_t>(up_port_), i);
        return net_.drop(a.pkt, a.t, capture_note::kNoRoute);  // nobody listens
    }
    const FabricPacket& p = packets_[a.pkt];
    for (uint16_t port : it->second) {
        if (port == a.in_port) continue;
        Arrival copy = a;
        copy.pkt = packets_.take();
        FabricPacket& c = packets_[copy.pkt];
        c = p;
        if (p.frame) {
            c.frame = net_.fabric().frame_alloc();
            std::memcpy(c.frame, p.frame, p.frame_len);
        }
        sc_.arrivals.push_back(copy);
        to(port, static_cast<uint32_t>(sc_.arrivals.size() - 1));
    }
    net_.drop_quietly(a.pkt);  // the copies went on
}

// The routed arrivals, grouped by port in sc_.grouped (a counting sort): port p's are
// sc_.grouped[sc_.first[p] .. sc_.first[p] + sc_.port_n[p]).
void SimSwitch::group_by_port()
{
    uint32_t at = 0;
    for (uint16_t port : sc_.touched) {
        sc_.first[port] = at;
        at += sc_.port_n[port];
    }
    sc_.grouped.resize(at);
    for (uint32_t i = 0; i < sc_.arrivals.size(); i++) {
        const uint16_t port = sc_.arrivals[i].out_port;
        if (port != kNoPort) sc_.grouped[sc_.first[port]++] = i;
    }
    for (uint16_t port : sc_.touched) sc_.first[port] -= sc_.port_n[port];
}

// Whether every arrival of the window is admitted in any order: the buffer can only be fuller
// than at the window's start by the window's arrivals, and each queue fuller by its own. Then
// the ports do not interact and each takes its arrivals alone.
bool SimSwitch::all_admitted() const
{
    if (!p_.shared_buffer) return true;  // per-port buffers: each queue's bound is its own
    uint64_t most = used_;
    for (uint16_t port : sc_.touched) most += sc_.port_bytes[port];
    if (most > p_.buffer_bytes) return false;
    const double room = p_.dt_alpha * static_cast<double>(p_.buffer_bytes - most);
    for (uint16_t port : sc_.touched) {
        const uint64_t q = ports_[port]->counters().bytes + sc_.port_bytes[port];
        if (q > p_.reserve_bytes && static_cast<double>(q) > room) return false;
    }
    return true;
}

// The common window, taken straight from the ports' arrivals: no PFC, no multicast packet and no
// reordered one due, and room in the buffer for every arrival of the window whatever the order
// (what all_admitted() finds after routing, here from the window's bytes alone: no queue can
// hold more than the whole buffer's fill). The ports then do not interact, and the arrivals are
// merged across the ports they came in by, each one routed and handed to its egress at once, in
// the order of order(): by time, then by port, then as its pipe delivered them.
bool SimSwitch::sweep_merged(SimTime end)
{
    if (p_.pfc || (!overtaken_.empty() && overtaken_.front().t < end)) return false;
    // Per port: its earliest arrival due, kNever once it has none left in the window; and a
    // tournament over the ports (leaves rounded up to a power of 2), whose winner is the earliest,
    // the lower port at equal times. A pop replays only the winner's path: log2(ports) matches.
    const uint32_t nports = static_cast<uint32_t>(incoming_.size());
    const uint32_t leaves = std::bit_ceil(nports);
    SimTime* front = sc_.fronts.data();
    uint16_t* win = sc_.winners.data();
    uint32_t n = 0;
    uint64_t bytes = 0;
    for (uint32_t port = 0; port < nports; port++) {
        const FifoRing<Arrival>& in = incoming_[port];
        const uint32_t n0 = n;
        for (; n - n0 < in.size(); n++) {
            const Arrival& a = in.at(n - n0);
            if (a.t >= end) break;
            if (a.dst == kMulticastDst) return false;
            bytes += a.bytes;
        }
        front[port] = n != n0 ? in.front().t : kNever;
    }
    const uint64_t most = used_ + bytes;
    if (most > p_.buffer_bytes) return false;
    if (p_.shared_buffer && most > p_.reserve_bytes &&
        static_cast<double>(most) > p_.dt_alpha * static_cast<double>(p_.buffer_bytes - most))
        return false;
    net_.count_hops(n);
    auto match = [front, win](uint32_t i) {
        const uint16_t l = win[2 * i], r = win[2 * i + 1];
        win[i] = front[r] < front[l] ? r : l;
    };
    for (uint32_t port = nports; port < leaves; port++) front[port] = kNever;
    for (uint32_t port = 0; port < leaves; port++) win[leaves + port] = static_cast<uint16_t>(port);
    for (uint32_t i = leaves - 1; i > 0; i--) match(i);
    for (uint32_t left = n; left; left--) {
        const uint16_t k = win[1];
        FifoRing<Arrival>& in = incoming_[k];
        Arrival a = in.front();
        in.pop();
        front[k] = !in.empty() && in.front().t < end ? in.front().t : kNever;
        for (uint32_t i = (leaves + k) >> 1; i > 0; i >>= 1) match(i);
        a.out_port = route(a);
        Egress& e = *ports_[a.out_port];
        e.advance(a.t);
        used_ += a.bytes;  // admitted: see above
        e.enqueue(a);
    }
    incoming_at_ = earliest_incoming();
    advance_busy(end - 1);
    return true;
}

void SimSwitch::sweep(SimTime end)
{
    if (sweep_merged(end)) return;
    take_due(end);
    const uint32_t n = static_cast<uint32_t>(sc_.arrivals.size());
    net_.count_hops(n);
    for (uint32_t i = 0; i < n; i++) route_arrival(i);  // multicast copies go after n
    group_by_port();
    if (p_.pfc || !all_admitted()) sweep_in_order(end);
    else sweep_by_port(end);
    for (uint16_t port : sc_.touched) sc_.port_n[port] = 0, sc_.port_bytes[port] = 0;
    sc_.touched.clear();
}

// Ports whose queues emptied leave the busy list.
void SimSwitch::advance_busy(SimTime t)
{
    size_t kept = 0;
    for (size_t k = 0; k < busy_.size(); k++) {
        Egress& e = *ports_[busy_[k]];
        e.advance(t);
        if (e.next_work() == kNever) e.set_listed(false);
        else busy_[kept++] = busy_[k];
    }
    busy_.resize(kept);
}

// The common case: each port takes its own arrivals and departures in time order.
void SimSwitch::sweep_by_port(SimTime end)
{
    for (uint16_t port : sc_.touched) {
        Egress& e = *ports_[port];
        uint32_t* v = sc_.grouped.data() + sc_.first[port];
        const uint32_t n = sc_.port_n[port];
        order(v, n);
        for (uint32_t k = 0; k < n; k++) {
            Arrival& a = sc_.arrivals[v[k]];
            e.advance(a.t);
            forward(a, e);
        }
    }
    advance_busy(end - 1);
}

// A buffer near full, or PFC: ports interact (admission by the shared buffer's fill, pauses
// by what each ingress holds), so the whole switch takes every step in time order.
void SimSwitch::sweep_in_order(SimTime end)
{
    order(sc_.grouped.data(), sc_.grouped.size());
    for (uint32_t i : sc_.grouped) {
        Arrival& a = sc_.arrivals[i];
        advance_all(a.t);
        forward(a, *ports_[a.out_port]);
    }
    advance_all(end - 1);
}

// Every port's departures and PFC frames due by t, in time order across the ports (ties by
// port): what each ingress holds, and so PFC's XON, depends on that order.
void SimSwitch::advance_all(SimTime t)
{
    for (;;) {
        uint16_t first = kNoPort;
        SimTime at = t + 1;
        for (uint16_t i : busy_) {
            const SimTime w = ports_[i]->next_work();
            if (w < at || (w == at && i < first)) at = w, first = i;
        }
        if (first == kNoPort) return advance_busy(t);  // drops the ports that emptied
        ports_[first]->advance(at);
    }
}

// ---- the windows ----------------------------------------------------------------------------

void SimNetwork::schedule_window(SimTime t)
{
    window_at_ = t;
    sim().at(t, &windows_target_);
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
        next = kNever;
        size_t kept = 0;
        for (SimSwitch* s : active_) {
            if (s->wake_at == kNever) {
                s->active = false;
                continue;
            }
            active_[kept++] = s;
            next = std::min(next, s->wake_at);
        }
        active_.resize(kept);
    } while (next < end);
    in_window_ = false;
    window_at_ = kNever;
    if (next != kNever) schedule_window(next);
}

}  // namespace sdr::emu
