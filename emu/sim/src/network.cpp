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

uint64_t ps_per_byte_fp(double gbps) { return static_cast<uint64_t>(std::llround(8000.0 / gbps * (1 << Egress::kFracBits))); }

}  // namespace

// ---- pipes --------------------------------------------------------------------------------

Pipe::Pipe(SimNetwork& net, SimTime delay_ps, const ImpairmentParams& imp, uint64_t seed)
    : net_(net), delay_ps_(delay_ps), fifo_(8), imp_([&] {
          ImpairmentParams ip = imp;
          ip.seed = seed;
          return ip;
      }())
{
    clean_ = imp_.none();
}

SimTime Pipe::max_extra_ps() const
{
    const ImpairmentParams& i = imp_.params();
    return (i.reorder > 0 ? i.reorder_max_ps : 0) + (i.duplicate > 0 ? kPsPerNs : 0);
}

void Pipe::send_slow(const Arrival& a, SimTime leaves)
{
    if (!clean_) return send_impaired(a, leaves);
    push(a, leaves + delay_ps_);
}

// Into a switch, the packet is the switch's at once, stamped with its arrival (no event); into
// a NIC, it joins the FIFO whose head has an event, or, if it overtakes the FIFO's last
// (reordered), waits with an event of its own.
void Pipe::push(const Arrival& a, SimTime arrival)
{
    if (sw_) {
        delivered_++;
        sw_->arrive(a, arrival, sw_port_);
        return net_.wake(*sw_, arrival);
    }
    if (!fifo_.empty() && arrival < fifo_.at(fifo_.size() - 1).t) [[unlikely]] {  // overtakes (reordered)
        Arrival& d = late_.emplace_back(a);
        d.t = arrival;
        std::push_heap(late_.begin(), late_.end(), later);
        net_.sim().at(arrival, this, 1);
        return;
    }
    Arrival& d = fifo_.push_slot();
    d = a;
    d.t = arrival;
    if (fifo_.size() == 1) net_.sim().at(arrival, this, 0);
}

void Pipe::send_impaired(const Arrival& a, SimTime leaves)
{
    ImpairmentVerdict v = imp_.decide();
    if (v.drop) {
        dropped_++;
        net_.drop(a.pkt, leaves + delay_ps_, v.burst ? capture_note::kBurstDrop : capture_note::kLossDrop);
        return;
    }
    const SimTime arrival = leaves + delay_ps_ + v.extra_delay_ps;
    PacketPool& pool = net_.pool();
    if (v.extra_delay_ps) pool[a.pkt].note |= capture_note::kBitDelayed;
    if (v.duplicate) {
        Arrival d = a;
        d.pkt = pool.take();
        FabricPacket& f = pool[a.pkt];
        FabricPacket& c = pool[d.pkt];
        f.note |= capture_note::kBitDuplicated;
        c = f;
        c.note = static_cast<uint8_t>((f.note & ~capture_note::kBitDuplicated) | capture_note::kBitCopy);
        if (f.frame) {
            c.frame = net_.fabric().frame_alloc();
            std::memcpy(c.frame, f.frame, f.frame_len);
        }
        push(d, arrival + kPsPerNs);
    }
    push(a, arrival);
}

void Pipe::fire(SimTime now, uint64_t arg)
{
    Simulator& sim = net_.sim();
    if (arg == 1) {
        while (!late_.empty() && late_.front().t <= now) {
            std::pop_heap(late_.begin(), late_.end(), later);
            const Arrival a = late_.back();
            late_.pop_back();
            deliver(a);
        }
        return;
    }
    // As SimLink: deliver the head, then followers while nothing else is due before them and
    // no host could have noticed something.
    const uint64_t seen = net_.fabric().host_events_now();
    for (int n = 0; !fifo_.empty() && n < kMaxRunAhead && net_.fabric().host_events_now() == seen; n++) {
        if (fifo_.front().t > now && !sim.run_ahead_to(fifo_.front().t)) break;
        now = sim.now();
        const Arrival a = fifo_.front();
        fifo_.pop();
        deliver(a);
    }
    if (!fifo_.empty()) sim.at(fifo_.front().t, this, 0);
}

void Pipe::deliver(const Arrival& a)
{
    delivered_++;
    net_.count_hop();
    net_.deliver_host(host_, a);
}

// ---- egress queues ------------------------------------------------------------------------

Egress::Egress(SimSwitch& sw, uint16_t port, double gbps, std::unique_ptr<Pipe> pipe, uint64_t red_seed)
    : ps_per_byte_fp_(ps_per_byte_fp(gbps)), port_(port), q_{FifoRing<Arrival>(8), FifoRing<Arrival>(4)},
      pipe_(pipe.get()), sw_(sw), packets_(sw.net().pool()), own_pipe_(std::move(pipe)), gbps_(gbps), rng_(red_seed),
      pfc_(4)
{
    // HPCC's defaults: Kmin 100 KB and Kmax 400 KB per 25 Gbit/s (KB = 1000 bytes, as its MMU).
    const SwitchParams& p = sw.params();
    ecn_ = p.ecn;
    kmin_ = p.kmin_bytes ? p.kmin_bytes : static_cast<uint64_t>(std::llround(100e3 * gbps / 25.0));
    kmax_ = p.kmax_bytes ? p.kmax_bytes : static_cast<uint64_t>(std::llround(400e3 * gbps / 25.0));
}

SimTime Egress::next_work() const
{
    const SimTime start = waiting() ? wire_free_ : kNever;
    return pfc_due_ ? std::min(start, pfc_.front().t) : start;
}

void Egress::pfc(SimTime t, bool on)
{
    pfc_.push_slot() = PfcFrame{t, on};
    pfc_due_ = true;
    if (!listed_) sw_.list_busy(port_);
}

// RED on the data bytes still queued when a packet leaves (HPCC's switch: ShouldSendCN).
bool Egress::red_marks(uint64_t queued)
{
    if (queued <= kmin_) return false;
    if (queued >= kmax_) return true;
    const double prob = sw_.params().pmax * static_cast<double>(queued - kmin_) / static_cast<double>(kmax_ - kmin_);
    return rng_.uniform() < prob;
}

// RED chose a: CE in its packet (and frame: RFC 3168; the ICRC masks the TOS).
void Egress::mark(Arrival& a)
{
    c_.marked++;
    a.ect = false;
    FabricPacket& p = packets_[a.pkt];
    p.meta.ecn = wire::kEcnCe;
    if (p.frame) wire::mark_ce(p.frame, p.frame_len);
}

void Egress::capture(const Arrival& a, SimTime now, bool marked)
{
    sw_.net().fabric().tap_switch(tap_ - 1, now, packets_[a.pkt], marked, nullptr);
}

// ---- switches -----------------------------------------------------------------------------

SimSwitch::SimSwitch(SimNetwork& net, uint32_t node, const SwitchParams& p, uint64_t seed)
    : salt_(static_cast<uint32_t>(seed >> 32)), sc_(net.scratch()), packets_(net.pool()), p_(p), net_(net), node_(node),
      seed_(seed)
{
}

// RED's stream of port i: the switch's seed and the port, mixed.
static uint64_t red_seed(uint64_t seed, size_t port) { return seed ^ ((port + 1) * 0x9E3779B97F4A7C15ull); }

void SimSwitch::reseed(uint64_t seed)
{
    seed_ = seed;
    salt_ = static_cast<uint32_t>(seed >> 32);
    for (size_t i = 0; i < ports_.size(); i++) ports_[i]->reseed(red_seed(seed, i));
}

uint16_t SimSwitch::add_port(double gbps, std::unique_ptr<Pipe> pipe, uint32_t peer_node)
{
    ports_.push_back(std::make_unique<Egress>(*this, static_cast<uint16_t>(ports_.size()), gbps, std::move(pipe),
                                              red_seed(seed_, ports_.size())));
    peers_.push_back(peer_node);
    ingress_.emplace_back();
    incoming_.emplace_back(8);
    if (sc_.port_n.size() < ports_.size()) {
        sc_.port_n.resize(ports_.size(), 0);
        sc_.first.resize(ports_.size(), 0);
        sc_.port_bytes.resize(ports_.size(), 0);
        sc_.fronts.resize(2 * ports_.size(), kNever);  // room for the leaves rounded up to a power of 2
        sc_.winners.resize(4 * ports_.size(), 0);
    }
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

void SimSwitch::set_pfc_upstream(uint16_t port, SimTarget* host_port, Egress* egress, SimTime delay_ps)
{
    ingress_[port].host_port = host_port;
    ingress_[port].egress = egress;
    ingress_[port].delay_ps = delay_ps;
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

void SimSwitch::drop(Egress& e, const Arrival& a)
{
    e.counters().dropped++;
    if (e.tapped()) [[unlikely]]
        net_.fabric().tap_switch(e.tapped() - 1, a.t, packets_[a.pkt], false, capture_note::kQueueDrop);
    net_.drop(a.pkt, a.t, capture_note::kQueueDrop);
}

// a is admitted to e (advanced to its arrival) or dropped.
void SimSwitch::forward(Arrival& a, Egress& e)
{
    if (!admit(e, a.bytes)) return drop(e, a);
    used_ += a.bytes;
    if (p_.pfc && !a.prio) {
        Ingress& in = ingress_[a.in_port];
        in.bytes += a.bytes;
        if (!in.paused && in.bytes > xoff_ && (in.host_port || in.egress)) {
            in.paused = true;
            ports_[a.in_port]->counters().pauses_sent++;
            pause_upstream(in, true, a.t);
        }
    }
    e.enqueue(a);
}

void SimSwitch::pause_upstream(Ingress& in, bool on, SimTime now)
{
    if (in.egress) {
        in.egress->pfc(now + in.delay_ps, on);
        net_.wake(in.egress->owner(), now + in.delay_ps);
    } else {
        net_.sim().at(now + in.delay_ps, in.host_port, on ? Egress::kPause : Egress::kResume);
    }
}

void SimSwitch::release_ingress(const Arrival& a, SimTime now)
{
    Ingress& in = ingress_[a.in_port];
    in.bytes -= a.bytes;
    if (in.paused && in.bytes <= xon_) {
        in.paused = false;
        pause_upstream(in, false, now);
    }
}

void PacketPool::grow()
{
    const uint32_t first = static_cast<uint32_t>(blocks_.size()) << kBlockBits;
    blocks_.push_back(std::make_unique_for_overwrite<FabricPacket[]>(kBlock));
    for (uint32_t i = kBlock; i > 0; i--) free_.push_back(first + i - 1);  // lowest first out
}

}  // namespace sdr::emu
