// The network's per-packet steps: pipes, egress queues and switches (network.hpp).
#include <sdr/emu/network.hpp>

#include <sdr/emu/capture_notes.hpp>
#include <sdr/emu/fabric.hpp>
#include <sdr/emu/wire.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace sdr::emu {

namespace {

constexpr int kFracBits = 16;

uint64_t ps_per_byte_fp(double gbps) { return static_cast<uint64_t>(std::llround(8000.0 / gbps * (1 << kFracBits))); }

// The ECMP decision: a per-switch salted mix of the packet's flow hash (murmur3's finaliser),
// reduced to [0, n) by a multiply, not a division.
uint32_t pick(uint32_t flow, uint32_t salt, uint32_t n)
{
    uint32_t h = flow ^ salt;
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return static_cast<uint32_t>((uint64_t{h} * n) >> 32);
}

}  // namespace

// ---- pipes --------------------------------------------------------------------------------

Pipe::Pipe(SimNetwork& net, SimTime delay_ps, const ImpairmentParams& imp, uint64_t seed)
    : net_(net), delay_ps_(delay_ps), imp_([&] {
          ImpairmentParams ip = imp;
          ip.seed = seed;
          return ip;
      }()),
      fifo_(8)
{
}

SimTime Pipe::max_extra_ps() const
{
    const ImpairmentParams& i = imp_.params();
    return (i.reorder > 0 ? i.reorder_max_ps : 0) + (i.duplicate > 0 ? kPsPerNs : 0);
}

void Pipe::send(const FabricPacket& p)
{
    if (!imp_.none()) return send_impaired(p);
    FabricPacket& f = fifo_.push_slot();
    f = p;
    f.t += delay_ps_;
    if (fifo_.size() == 1) net_.sim().at(f.t, this, 0);
}

void Pipe::send_impaired(const FabricPacket& p)
{
    ImpairmentVerdict v = imp_.decide();
    if (v.drop) {
        dropped_++;
        net_.drop(p, p.t + delay_ps_, v.burst ? capture_note::kBurstDrop : capture_note::kLossDrop);
        return;
    }
    FabricPacket f = p;
    f.t += delay_ps_ + v.extra_delay_ps;
    if (v.extra_delay_ps) f.note |= capture_note::kBitDelayed;
    if (v.duplicate) {
        FabricPacket d = f;
        d.t += kPsPerNs;
        d.note |= capture_note::kBitCopy;
        f.note |= capture_note::kBitDuplicated;
        if (f.frame) {
            d.frame = net_.fabric().frame_alloc();
            std::memcpy(d.frame, f.frame, f.frame_len);
        }
        push_late(d);
    }
    if (v.extra_delay_ps) return push_late(f);
    fifo_.push_slot() = f;
    if (fifo_.size() == 1) net_.sim().at(f.t, this, 0);
}

void Pipe::push_late(const FabricPacket& p)
{
    late_.push_back(p);
    std::push_heap(late_.begin(), late_.end(), later);
    net_.sim().at(p.t, this, 1);
}

void Pipe::fire(SimTime now, uint64_t arg)
{
    Simulator& sim = net_.sim();
    if (arg == 1) {
        while (!late_.empty() && late_.front().t <= now) {
            std::pop_heap(late_.begin(), late_.end(), later);
            FabricPacket p = late_.back();
            late_.pop_back();
            deliver(p);
        }
        return;
    }
    // As SimLink: deliver the head, then followers while nothing else is due before them; a
    // pipe into a NIC also stops when a host could notice something.
    const uint64_t seen = net_.fabric().host_events_now();
    for (int n = 0; !fifo_.empty() && n < kMaxRunAhead && (sw_ || net_.fabric().host_events_now() == seen); n++) {
        if (fifo_.front().t > now && !sim.run_ahead_to(fifo_.front().t)) break;
        now = sim.now();
        FabricPacket p = fifo_.front();
        fifo_.pop();
        deliver(p);
    }
    if (!fifo_.empty()) sim.at(fifo_.front().t, this, 0);
}

void Pipe::deliver(FabricPacket& p)
{
    delivered_++;
    net_.count_hop();
    if (sw_) sw_->receive(p, sw_port_);
    else net_.deliver_host(host_, p);
}

// ---- egress queues ------------------------------------------------------------------------

Egress::Egress(SimSwitch& sw, double gbps, std::unique_ptr<Pipe> pipe)
    : sw_(sw), pipe_(std::move(pipe)), gbps_(gbps), ps_per_byte_fp_(ps_per_byte_fp(gbps)), q_{FifoRing<FabricPacket>(8), FifoRing<FabricPacket>(4)}
{
    // HPCC's defaults: Kmin 100 KB and Kmax 400 KB per 25 Gbit/s (KB = 1000 bytes, as its MMU).
    const SwitchParams& p = sw.params();
    kmin_ = p.kmin_bytes ? p.kmin_bytes : static_cast<uint64_t>(std::llround(100e3 * gbps / 25.0));
    kmax_ = p.kmax_bytes ? p.kmax_bytes : static_cast<uint64_t>(std::llround(400e3 * gbps / 25.0));
}

void Egress::enqueue(FabricPacket& p, SimTime now, uint32_t bytes)
{
    c_.enqueued++;
    // An idle wire with nothing waiting before it (only paused data can wait while the wire is
    // idle, and control overtakes it): the packet starts now, through no queue.
    if (!busy_ && wire_free_ <= now && (!paused_ || p.prio)) {
        c_.peak_bytes = std::max<uint64_t>(c_.peak_bytes, bytes);
        return transmit(p, now, bytes);
    }
    q_[p.prio].push_slot() = p;
    c_.bytes += bytes;
    c_.peak_bytes = std::max(c_.peak_bytes, c_.bytes);
    if (!p.prio) data_bytes_ += bytes;
    if (log_) [[unlikely]] log_->sample(log_id_, now, c_.bytes);
    if (busy_) return;
    busy_ = true;
    sw_.net().sim().at(std::max(wire_free_, now), this, kWireFree);
}

// RED on the data bytes still queued when a packet leaves (HPCC's switch: ShouldSendCN).
bool Egress::red_marks(uint64_t queued)
{
    if (queued <= kmin_) return false;
    if (queued >= kmax_) return true;
    const double prob = sw_.params().pmax * static_cast<double>(queued - kmin_) / static_cast<double>(kmax_ - kmin_);
    return sw_.rng().uniform() < prob;
}

void Egress::start_next(SimTime now)
{
    const int cls = !q_[1].empty() ? 1 : !q_[0].empty() && !paused_ ? 0 : -1;
    if (cls < 0) {
        busy_ = false;
        return;
    }
    FabricPacket& p = q_[cls].front();
    const uint32_t bytes = p.frame_len + kWireOverheadBytes;
    c_.bytes -= bytes;
    if (!cls) data_bytes_ -= bytes;
    if (log_) [[unlikely]] log_->sample(log_id_, now, c_.bytes);
    transmit(p, now, bytes);
    q_[cls].pop();
    // The next start needs an event only if something waits; else the next enqueue starts it.
    busy_ = !q_[0].empty() || !q_[1].empty();
    if (busy_) sw_.net().sim().at(wire_free_, this, kWireFree);
}

// p leaves the queue (or skips it) and starts on the wire now: marked or not, its buffer freed,
// captured, into the pipe when its last bit is out.
void Egress::transmit(FabricPacket& p, SimTime now, uint32_t bytes)
{
    bool marked = false;
    if (!p.prio && sw_.params().ecn && (p.meta.ecn == wire::kEcnEct0 || p.meta.ecn == wire::kEcnEct1) &&
        red_marks(data_bytes_)) {
        c_.marked++;
        marked = true;
        p.meta.ecn = wire::kEcnCe;
        if (p.frame) wire::mark_ce(p.frame, p.frame_len);
    }
    sw_.release(p, bytes);
    if (tap_) [[unlikely]]
        sw_.net().fabric().tap_switch(tap_ - 1, now, p, marked, nullptr);
    const uint64_t t = frac_ + bytes * ps_per_byte_fp_;
    frac_ = t & ((1u << kFracBits) - 1);
    wire_free_ = now + (t >> kFracBits);
    p.t = wire_free_;
    pipe_->send(p);
}

void Egress::fire(SimTime now, uint64_t arg)
{
    if (arg == kPause) {
        if (!paused_) paused_at_ = now;
        paused_ = true;
        return;
    }
    if (arg == kResume) {
        if (!paused_) return;
        paused_ = false;
        c_.paused_ps += now - paused_at_;
        if (busy_) return;
        busy_ = true;
        sw_.net().sim().at(std::max(wire_free_, now), this, kWireFree);
        return;
    }
    busy_ = false;
    start_next(now);
}

// ---- switches -----------------------------------------------------------------------------

SimSwitch::SimSwitch(SimNetwork& net, uint32_t node, const SwitchParams& p, uint64_t seed)
    : net_(net), node_(node), p_(p), salt_(static_cast<uint32_t>(seed >> 32)), rng_(seed)
{
}

void SimSwitch::reseed(uint64_t seed)
{
    salt_ = static_cast<uint32_t>(seed >> 32);
    rng_ = Rng(seed);
}

uint16_t SimSwitch::add_port(double gbps, std::unique_ptr<Pipe> pipe, uint32_t peer_node)
{
    ports_.push_back(std::make_unique<Egress>(*this, gbps, std::move(pipe)));
    peers_.push_back(peer_node);
    ingress_.emplace_back();
    // PFC thresholds, unless given: a quarter of the buffer shared among the ports; XON 3 KB
    // below (HPCC's resume offset).
    pool_ = p_.shared_buffer ? p_.buffer_bytes : p_.buffer_bytes * ports_.size();
    xoff_ = p_.pfc_xoff_bytes ? p_.pfc_xoff_bytes : pool_ / 4 / ports_.size();
    xon_ = p_.pfc_xon_bytes ? p_.pfc_xon_bytes : (xoff_ > 3072 ? xoff_ - 3072 : 0);
    return static_cast<uint16_t>(ports_.size() - 1);
}

int SimSwitch::port_to(uint32_t peer_node) const
{
    for (size_t i = 0; i < peers_.size(); i++)
        if (peers_[i] == peer_node) return static_cast<int>(i);
    return -1;
}

void SimSwitch::set_mcast_ports(uint32_t group_ip, std::vector<uint16_t> ports)
{
    if (ports.empty()) mcast_ports_.erase(group_ip);
    else mcast_ports_[group_ip] = std::move(ports);
}

void SimSwitch::set_routes(std::vector<uint32_t> route, std::vector<uint16_t> ecmp_ports)
{
    route_ = std::move(route);
    ecmp_ports_ = std::move(ecmp_ports);
}

void SimSwitch::set_pfc_upstream(uint16_t port, SimTarget* target, SimTime delay_ps)
{
    ingress_[port].upstream = target;
    ingress_[port].delay_ps = delay_ps;
}

uint16_t SimSwitch::route(const FabricPacket& p) const
{
    const uint32_t r = route_[p.dst], n = r & 0xFF;
    return ecmp_ports_[(r >> 8) + (n == 1 ? 0 : pick(p.flow, salt_, n))];
}

// Drop-tail. With PFC the data class is paused upstream long before a queue fills, so only the
// switch's whole buffer bounds it (what stays above XOFF is the ports' headroom); without, a
// queue is bounded by its own share.
bool SimSwitch::admit(const Egress& e, uint32_t bytes) const
{
    const uint64_t q = e.counters().bytes + bytes;
    if (p_.pfc) return used_ + bytes <= pool_;
    if (!p_.shared_buffer) return q <= p_.buffer_bytes;
    if (used_ + bytes > p_.buffer_bytes) return false;
    if (q <= p_.reserve_bytes) return true;
    return static_cast<double>(q) <= p_.dt_alpha * static_cast<double>(p_.buffer_bytes - used_);
}

void SimSwitch::receive(FabricPacket& p, uint16_t in_port)
{
    const SimTime now = net_.sim().now();
    if (p.dst == kMulticastDst) [[unlikely]] return replicate(p, in_port, now);
    forward(p, in_port, *ports_[route(p)], now);
}

void SimSwitch::forward(FabricPacket& p, uint16_t in_port, Egress& e, SimTime now)
{
    const uint32_t bytes = p.frame_len + kWireOverheadBytes;
    if (!admit(e, bytes)) {
        e.counters().dropped++;
        if (e.tapped()) [[unlikely]]
            net_.fabric().tap_switch(e.tapped() - 1, now, p, false, capture_note::kQueueDrop);
        net_.drop(p, now, capture_note::kQueueDrop);
        return;
    }
    used_ += bytes;
    p.in_port = in_port;
    if (p_.pfc && !p.prio) {
        Ingress& in = ingress_[in_port];
        in.bytes += bytes;
        if (!in.paused && in.bytes > xoff_ && in.upstream) {
            in.paused = true;
            ports_[in_port]->counters().pauses_sent++;
            net_.sim().at(now + in.delay_ps, in.upstream, Egress::kPause);
        }
    }
    e.enqueue(p, now, bytes);
}

// One copy per port of the group's tree but the one it came in by; off the tree, up towards
// the root, where the tree begins.
void SimSwitch::replicate(FabricPacket& p, uint16_t in_port, SimTime now)
{
    auto it = mcast_ports_.find(p.flow);
    if (it == mcast_ports_.end()) {
        if (up_port_ >= 0 && up_port_ != in_port) return forward(p, in_port, *ports_[up_port_], now);
        return net_.drop(p, now, capture_note::kNoRoute);  // nobody listens
    }
    for (uint16_t port : it->second) {
        if (port == in_port) continue;
        FabricPacket copy = p;
        if (p.frame) {
            copy.frame = net_.fabric().frame_alloc();
            std::memcpy(copy.frame, p.frame, p.frame_len);
        }
        forward(copy, in_port, *ports_[port], now);
    }
    if (p.frame) net_.fabric().frame_free(p.frame);
}

void SimSwitch::release(const FabricPacket& p, uint32_t bytes)
{
    used_ -= bytes;
    if (!p_.pfc || p.prio) return;
    Ingress& in = ingress_[p.in_port];
    in.bytes -= bytes;
    if (in.paused && in.bytes <= xon_) {
        in.paused = false;
        net_.sim().at(net_.sim().now() + in.delay_ps, in.upstream, Egress::kResume);
    }
}

}  // namespace sdr::emu
