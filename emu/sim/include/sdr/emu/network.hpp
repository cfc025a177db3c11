// The simulated datacenter network a topology describes: switches with output queues, links
// as pipes, ECMP routes. A NIC's port hands each frame it serialised to its host's uplink; the
// frame then crosses pipes and switches, each step at its exact virtual time, until a pipe
// delivers it to the destination NIC.
//
// Switches run in windows, not by events (network_sweep.cpp). Nothing a switch does reaches
// another switch sooner than the shortest link delay L (propagation plus hop latency; a PFC
// pause travels a link too), so once every event before T has run, each switch can take all
// of its arrivals, departures and pauses in [T, T + L) in time order on its own: one
// scheduler event per window serves every switch, and a hop costs no event. Pipes into NICs
// keep one event for their head, as SimLink, so hosts see each arrival at its time.
#pragma once

#include <sdr/emu/fifo_ring.hpp>
#include <sdr/emu/impairment.hpp>
#include <sdr/emu/nic_core.hpp>
#include <sdr/emu/queue_log.hpp>
#include <sdr/emu/rng.hpp>
#include <sdr/emu/simulator.hpp>
#include <sdr/emu/topology.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sdr::emu {

class SimFabric;
class SimNetwork;
class SimSwitch;

// A time that never comes: no work pending.
inline constexpr SimTime kNever = UINT64_MAX;

// FabricPacket::dst of a multicast packet (its group is in flow).
inline constexpr uint32_t kMulticastDst = UINT32_MAX - 1;

// A packet inside the network. It stays in one slot of the network's PacketPool from the
// sending NIC's port to the receiving NIC (or its drop); pipes, switches and queues pass an
// Arrival (below), what a switch's parser would take from the headers, so a hop touches 32
// bytes and never the packet unless it marks, drops or captures it. One cache line each: a
// packet is written at its first hop and read at its last, far apart, each a miss.
struct alignas(64) FabricPacket {
    PacketMeta meta;
    uint8_t* frame;      // null in payload-free mode
    uint32_t frame_len;  // the frame's bytes (payload-free: the bytes it would have)
    uint32_t src, dst;   // host indices (dst: kMulticastDst for a group)
    uint8_t note;        // capture_note bits: what the pipes did to it
};
static_assert(sizeof(FabricPacket) == 64, "one cache line");

// The packets in the network, by index. Slots come in blocks, so a slot never moves while others
// are taken; freed slots are taken again first, while still in cache.
class PacketPool {
public:
    FabricPacket& operator[](uint32_t i) { return blocks_[i >> kBlockBits][i & (kBlock - 1)]; }
    uint32_t take()
    {
        if (free_.empty()) [[unlikely]] grow();
        const uint32_t i = free_.back();
        free_.pop_back();
        return i;
    }
    void give_back(uint32_t i) { free_.push_back(i); }

private:
    static constexpr uint32_t kBlockBits = 12, kBlock = 1u << kBlockBits;
    void grow();
    std::vector<std::unique_ptr<FabricPacket[]>> blocks_;
    std::vector<uint32_t> free_;
};

// The ECMP decision: a per-switch salted mix of the packet's flow hash (murmur3's finaliser),
// reduced to [0, n) by a multiply, not a division.
inline uint32_t ecmp_pick(uint32_t flow, uint32_t salt, uint32_t n)
{
    uint32_t h = flow ^ salt;
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return static_cast<uint32_t>((uint64_t{h} * n) >> 32);
}

// A packet on its way: when it reaches the next node (or, handed to a pipe, when its last bit
// left the wire), which packet, and what the switches decide by.
struct Arrival {
    SimTime t;
    uint32_t pkt;    // its PacketPool slot
    uint32_t dst;    // host index, or kMulticastDst
    uint32_t flow;   // hash of the 5-tuple (the UDP source port carries the entropy);
                     // multicast: the group's address
    uint32_t bytes;  // on the wire: frame and Ethernet overhead
    uint16_t in_port, out_port;  // in a switch: the port it came in by, the one it leaves by
    uint8_t prio;    // 1: control class (strict priority, never marked)
    bool ect;        // ECN-capable transport, not yet marked: RED may mark it
};
static_assert(sizeof(Arrival) == 32, "two to a cache line");

// Per egress queue (one per switch port, both classes together).
struct QueueCounters {
    uint64_t enqueued = 0;
    uint64_t bytes = 0, peak_bytes = 0;  // queued now, and the most ever
    uint64_t dropped = 0, marked = 0;
    SimTime paused_ps = 0;               // time the downstream node held it paused (PFC)
    uint64_t pauses_sent = 0;            // PFC pause frames this port's ingress sent upstream
};

// One direction of a link: propagation (plus the receiving switch's hop latency) and the
// link's impairments, then the next node. Into a switch, a packet joins the switch's arrivals
// at once, stamped with its arrival time (no event); into a NIC, the pipe keeps its packets in
// a FIFO with one event for the head.
class Pipe final : public SimTarget {
public:
    Pipe(SimNetwork& net, SimTime delay_ps, const ImpairmentParams& imp, uint64_t seed);
    void to_switch(SimSwitch* s, uint16_t port) { sw_ = s, sw_port_ = port; }
    void to_host(uint32_t host) { host_ = host; }
    // a's last bit left the wire at `leaves` (a.t is the past hop's: the copy takes the new
    // times field by field, never a struct just written narrower, which the CPU cannot forward).
    // Inline for a clean pipe into a switch, every hop's; out of line otherwise.
    [[gnu::always_inline]] void send(const Arrival& a, SimTime leaves);
    void fire(SimTime now, uint64_t arg) override;
    void reseed(uint64_t seed) { imp_.reseed(seed); }
    SimTime delay_ps() const { return delay_ps_; }
    SimTime max_extra_ps() const;  // what the impairments add at most (reorder, duplicate)
    uint64_t delivered() const { return delivered_; }
    uint64_t dropped() const { return dropped_; }
private:
    void deliver(const Arrival& a);
    [[gnu::visibility("hidden")]] void send_slow(const Arrival& a, SimTime leaves);
    void send_impaired(const Arrival& a, SimTime leaves);
    void push(const Arrival& a, SimTime arrival);
    static bool later(const Arrival& a, const Arrival& b) { return a.t > b.t; }
    static constexpr int kMaxRunAhead = 64;
    // What every packet reads first, together.
    SimNetwork& net_;
    SimSwitch* sw_ = nullptr;
    SimTime delay_ps_;
    uint64_t delivered_ = 0;
    uint32_t host_ = 0;
    uint16_t sw_port_ = 0;
    bool clean_;  // no impairments
    FifoRing<Arrival> fifo_;  // into a NIC
    Impairment imp_;
    std::vector<Arrival> late_;  // into a NIC: packets that overtook the FIFO (min-heap on t)
    uint64_t dropped_ = 0;
};

// A switch port's output queue: a strict-priority control class and a data class, drop-tail
// admission by the switch, RED/ECN marking at dequeue, pausable by PFC. It lives in its
// switch's windows: advance(t) starts every packet due by t, and what arrives is taken in
// time order after that.
class alignas(64) Egress {
public:
    static constexpr uint64_t kWireFree = 0, kPause = 1, kResume = 2;  // a host port's fire() arguments
    static constexpr int kFracBits = 16;  // of ps_per_byte_fp_
    Egress(SimSwitch& sw, uint16_t port, double gbps, std::unique_ptr<Pipe> pipe, uint64_t red_seed);
    // Start every packet whose turn on the wire comes by t (inclusive), and take the PFC
    // pauses and resumes that arrive by then, all in time order.
    [[gnu::always_inline]] void advance(SimTime t);
    // a arrives at a.t (the queue advanced to it): onto the wire at once, or queued.
    [[gnu::always_inline]] void enqueue(Arrival& a);
    // When advance() has something to do next (kNever: nothing).
    SimTime next_work() const;
    // A PFC pause (on) or resume from the switch downstream, arriving at t.
    void pfc(SimTime t, bool on);
    const QueueCounters& counters() const { return c_; }
    QueueCounters& counters() { return c_; }
    Pipe& pipe() { return *pipe_; }
    const Pipe& pipe() const { return *pipe_; }
    double gbps() const { return gbps_; }
    uint64_t kmin() const { return kmin_; }
    uint64_t kmax() const { return kmax_; }
    // Log this port's queue length (queue_log.hpp) as id.
    void log_to(QueueLog* log, uint32_t id) { log_ = log, log_id_ = id; }
    // The pcapng tap of this port: interface id + 1 (0: not tapped).
    void tap(uint32_t iface) { tap_ = iface + 1; }
    uint32_t tapped() const { return tap_; }
    void reseed(uint64_t seed) { rng_ = Rng(seed); }
    SimSwitch& owner() { return sw_; }
    bool listed() const { return listed_; }  // in its switch's busy ports
    void set_listed(bool on) { listed_ = on; }

private:
    bool waiting() const { return !q_[1].empty() || (!q_[0].empty() && !paused_); }
    [[gnu::always_inline]] void start_next(SimTime now);
    [[gnu::always_inline]] void transmit(Arrival& a, SimTime now);
    bool red_marks(uint64_t queued);
    void mark(Arrival& a);
    void capture(const Arrival& a, SimTime now, bool marked);
    // What a hop touches, on the first three cache lines (the wire and the queues, then the
    // counters from byte 128): a window comes back to a port after the NICs' work has pushed it
    // out of cache, and each line is a miss.
    SimTime wire_free_ = 0;
    uint64_t ps_per_byte_fp_;  // 16-bit fraction, as the NIC's port
    uint64_t data_bytes_ = 0;
    uint32_t frac_ = 0;
    uint16_t port_;
    bool paused_ = false;      // PFC: the data class waits
    bool listed_ = false;      // in its switch's busy ports
    bool ecn_;                 // the switch marks (SwitchParams::ecn)
    bool pfc_due_ = false;     // PFC frames wait in pfc_
    FifoRing<Arrival> q_[2];   // [0] data, [1] control
    Pipe* pipe_;
    SimSwitch& sw_;
    QueueLog* log_ = nullptr;
    uint64_t kmin_;
    uint32_t tap_ = 0;
    QueueCounters c_;
    uint64_t kmax_;
    // The rest.
    PacketPool& packets_;
    SimTime paused_at_ = 0;
    std::unique_ptr<Pipe> own_pipe_;
    double gbps_;
    uint32_t log_id_ = 0;
    Rng rng_;  // RED's draws: per port, so a port's marks do not depend on the others' order
    struct PfcFrame {
        SimTime t;
        bool on;
    };
    FifoRing<PfcFrame> pfc_;  // pauses and resumes on their way from downstream, in time order
};

// What a switch works with while it runs its share of a window. Switches run one at a time, so
// one set serves them all and stays in cache.
struct SweepScratch {
    std::vector<Arrival> arrivals;          // the window's, in the order they came
    std::vector<uint16_t> touched;          // ports with arrivals
    std::vector<uint32_t> port_n, first;    // per port: its arrivals, and where they start in grouped
    std::vector<uint64_t> port_bytes;       // per port: their bytes
    std::vector<uint32_t> grouped;          // the arrivals (indices), by port
    std::vector<SimTime> fronts;            // sweep_merged: per port, its next arrival due
    std::vector<uint16_t> winners;          // ... and a tournament over them (winners[1]: the next)
};

class SimSwitch {
public:
    SimSwitch(SimNetwork& net, uint32_t node, const SwitchParams& p, uint64_t seed);
    uint32_t node() const { return node_; }
    const SwitchParams& params() const { return p_; }
    uint16_t add_port(double gbps, std::unique_ptr<Pipe> pipe, uint32_t peer_node);
    size_t ports() const { return ports_.size(); }
    Egress& port(size_t i) { return *ports_[i]; }
    const Egress& port(size_t i) const { return *ports_[i]; }
    uint32_t peer(size_t i) const { return peers_[i]; }
    // A pipe hands over a packet arriving at t by port `port`; its window takes it. A pipe
    // delivers in order, but for reordered packets, which wait apart.
    void arrive(const Arrival& a, SimTime t, uint16_t port)
    {
        if (t < incoming_at_) incoming_at_ = t;
        FifoRing<Arrival>& in = incoming_[port];
        if (!in.empty() && t < in.at(in.size() - 1).t) [[unlikely]] return overtake(a, t, port);
        Arrival& d = in.push_slot();
        d = a;
        d.t = t;
        d.in_port = port;
    }
    // Port i's queue has something for advance() (Egress::listed keeps it once).
    void list_busy(uint16_t i)
    {
        ports_[i]->set_listed(true);
        busy_.push_back(i);
    }
    // Routes: the ports on shortest paths to each host (set up by SimNetwork).
    void set_routes(std::vector<uint32_t> route, std::vector<uint16_t> ecmp_ports);
    // Take every arrival, departure and pause of [start, end) in time order
    // (network_sweep.cpp); nothing of it reaches another switch before end.
    [[gnu::visibility("hidden")]] void sweep(SimTime end);
    // When this switch has something to do next (kNever: nothing).
    SimTime next_work() const;
    // The port a packet takes (ECMP: by its flow hash).
    uint16_t route(const Arrival& a) const
    {
        const uint32_t r = route_[a.dst], n = r & 0xFF;
        return ecmp_ports_[(r >> 8) + (n == 1 ? 0 : ecmp_pick(a.flow, salt_, n))];
    }
    // Multicast: the ports of this switch on the group's tree (set by SimNetwork); a switch
    // off every tree sends the group's packets up towards the root.
    void set_mcast_ports(uint32_t group_ip, std::vector<uint16_t> ports);
    void set_up_port(int port) { up_port_ = port; }
    // An egress started sending a at `now`: its buffer is free again.
    [[gnu::always_inline]] void release(const Arrival& a, SimTime now)
    {
        used_ -= a.bytes;
        if (p_.pfc && !a.prio) [[unlikely]] release_ingress(a, now);
    }
    SimNetwork& net() { return net_; }
    void reseed(uint64_t seed);
    // PFC: what port `port`'s ingress pauses, a host's port (an event) or a switch's egress.
    void set_pfc_upstream(uint16_t port, SimTarget* host_port, Egress* egress, SimTime delay_ps);
    uint64_t buffer_used() const { return used_; }
    // The port joined to `peer_node`, or -1.
    int port_to(uint32_t peer_node) const;
    bool active = false;       // in SimNetwork's list of switches with work
    SimTime wake_at = 0;       // while active: no work before this

private:
    bool admit(const Egress& e, uint32_t bytes) const;
    // Every arrival of the window fits whatever the order (see sweep).
    bool all_admitted() const;
    void route_arrival(uint32_t i);
    void order(uint32_t* v, size_t n) const;
    static constexpr size_t kSortFrom = 64;  // longer runs of arrivals: std::sort
    void group_by_port();
    static constexpr uint16_t kNoPort = UINT16_MAX;
    void forward(Arrival& a, Egress& e);
    void drop(Egress& e, const Arrival& a);
    bool sweep_merged(SimTime end);
    void sweep_by_port(SimTime end);
    void sweep_in_order(SimTime end);
    void advance_all(SimTime t);
    void advance_busy(SimTime t);
    void take_due(SimTime end);
    SimTime earliest_incoming() const;
    void overtake(const Arrival& a, SimTime t, uint16_t port);
    std::vector<Arrival> overtaken_;  // reordered arrivals, each ahead of its port's last (min-heap on t)
    // What windows and hops touch, first and together (as Egress's).
    std::vector<FifoRing<Arrival>> incoming_;  // per port: arrivals not yet taken, in time order
    SimTime incoming_at_ = kNever;       // the earliest of them
    std::vector<uint16_t> busy_;         // ports whose queue or PFC frames may need advance()
    std::vector<std::unique_ptr<Egress>> ports_;
    std::vector<uint32_t> route_;        // per host: first ECMP port index << 8 | count
    std::vector<uint16_t> ecmp_ports_;
    uint32_t salt_;                      // per switch, so hashing is not the same decision at every tier
    uint64_t used_ = 0;                  // buffered bytes
    SweepScratch& sc_;                   // the network's, shared by all switches
    PacketPool& packets_;
    SwitchParams p_;
    uint64_t pool_ = 0;                  // the whole buffer: shared, or every port's
    // The rest.
    std::map<uint32_t, std::vector<uint16_t>> mcast_ports_;  // group -> ports on its tree
    int up_port_ = -1;  // towards the multicast root (-1: this is the root)
    SimNetwork& net_;
    uint32_t node_;
    uint64_t seed_;
    std::vector<uint32_t> peers_;
    // PFC, per ingress port: bytes buffered that came in by it, the upstream egress or NIC port
    // to pause, the link's delay, and whether it is paused now.
    struct Ingress {
        uint64_t bytes = 0;
        SimTarget* host_port = nullptr;
        Egress* egress = nullptr;
        SimTime delay_ps = 0;
        bool paused = false;
    };
    void pause_upstream(Ingress& in, bool on, SimTime now);
    void release_ingress(const Arrival& a, SimTime now);
    std::vector<Ingress> ingress_;
    uint64_t xoff_ = 0, xon_ = 0;
};

// Sums over the whole network.
struct NetworkTotals {
    uint64_t enqueued = 0, queue_dropped = 0, marked = 0, pauses_sent = 0, link_dropped = 0;
};

class SimNetwork {
public:
    SimNetwork(SimFabric& f, Topology t);
    ~SimNetwork();
    const Topology& topology() const { return topo_; }
    Simulator& sim();
    SimFabric& fabric() { return f_; }
    // A NIC's port finished serialising a frame at `leaves`.
    [[gnu::visibility("hidden")]] void inject(uint32_t host, SimTime leaves, const PacketMeta& m, uint32_t dst_ip,
                                             uint8_t* frame, uint32_t frame_len, uint8_t prio);
    // The uplink's rate of a host (its NIC's port serialises at it).
    double host_gbps(uint32_t host) const { return host_gbps_[host]; }
    // PFC: the NIC port of a host can now be paused (created with its NIC).
    void attach_host_port(uint32_t host, SimTarget* port);
    // A pipe's last hop reaches a NIC.
    void deliver_host(uint32_t host, const Arrival& a);
    // p was dropped at t (cause: a capture_note string): logged, captured, its frame freed.
    void drop(uint32_t pkt, SimTime t, const char* cause);
    // A packet that leaves the network without a trace (a multicast original, once copied).
    void drop_quietly(uint32_t pkt);
    PacketPool& pool() { return pool_; }
    size_t switches() const { return switches_.size(); }
    SimSwitch& sw(size_t i) { return *switches_[i]; }
    const std::string& switch_name(size_t i) const { return topo_.switches[i]; }
    // The round trip of an empty network from host src to dst and back: propagation and hop
    // latency both ways, a frame of `bytes` serialised at each switch on the way out and one of
    // `back_bytes` on the way back (store and forward), along the first of the ECMP paths. What
    // an ideal flow completion time adds to the flow's own serialisation.
    SimTime base_rtt_ps(uint32_t src, uint32_t dst, uint32_t bytes, uint32_t back_bytes) const;
    // The longest a packet can take between two hosts: propagation and hop latency of the
    // longest shortest path, plus each hop's full queue.
    SimTime max_transit_ps() const { return max_transit_ps_; }
    uint64_t delivered() const { return delivered_; }
    uint64_t hops() const { return hops_; }  // packet arrivals at switches and NICs
    void count_hop() { hops_++; }
    void count_hops(uint64_t n) { hops_ += n; }
    // Switch s has work at t (a packet in a pipe towards it, a PFC frame): it joins the next
    // window that reaches t.
    [[gnu::always_inline]] void wake(SimSwitch& s, SimTime t)
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
        if (!in_window_ && t < window_at_) schedule_window(t);
    }
    // The windows' width: the shortest time in which one switch can reach another.
    SimTime lookahead_ps() const { return lookahead_ps_; }
    // Narrower windows (never wider): what a switch does is the same however wide they are,
    // which tests check.
    void narrow_windows(SimTime ps) { lookahead_ps_ = std::min(lookahead_ps_, ps); }
    uint64_t windows() const { return windows_; }  // windows run so far
    SweepScratch& scratch() { return scratch_; }
    // "switch" or "switch:port" (FabricParams::capture_ports) of topology t: the switch's index
    // and the port (-1: all). false + err if there is no such switch or port.
    [[nodiscard]] static bool find_capture_port(const Topology& t, const std::string& spec, int* sw, int* port,
                                                std::string* err);
    NetworkTotals totals() const;
    // The group's members changed (SimFabric's table): its tree is drawn again.
    void mcast_changed(uint32_t group_ip);
    uint64_t unroutable() const { return unroutable_; }  // sent to an address no host has
    // Restart every random stream (links, RED, ECMP salts) from the fabric's seed.
    void reseed();

private:
    // The scheduler's one target for the switches: fire(T) runs the window [T, T + L).
    class Windows final : public SimTarget {
    public:
        explicit Windows(SimNetwork& net) : net_(net) {}
        void fire(SimTime now, uint64_t) override { net_.run_window(now); }

    private:
        SimNetwork& net_;
    };
    void run_window(SimTime start);
    void schedule_window(SimTime t);
    void build();
    void build_routes();
    void build_lookahead();
    void build_mcast_root();
    template <class F>
    void for_ports(const std::vector<std::string>& specs, F f);
    uint64_t seed_for(uint64_t what) const;
    uint64_t pipe_seed(const TopoLink& l, uint32_t u, uint32_t v) const;
    SimFabric& f_;
    Topology topo_;
    std::vector<std::unique_ptr<SimSwitch>> switches_;  // switch j is node hosts + j
    std::vector<std::unique_ptr<Pipe>> uplinks_;        // per host: to its switch
    std::vector<double> host_gbps_;
    std::vector<std::pair<uint32_t, uint16_t>> host_switch_;  // per host: its switch and port there
    std::vector<int> up_switch_;
    QueueLog queue_log_;  // per switch: its parent towards the multicast root (-1: root)
    SimTime max_transit_ps_ = 0;
    uint64_t delivered_ = 0, hops_ = 0, unroutable_ = 0;
    Windows windows_target_{*this};
    SweepScratch scratch_;
    PacketPool pool_;
    SimTime lookahead_ps_ = 0;
    std::vector<SimSwitch*> active_;    // switches with work, in the order they woke
    std::vector<SimSwitch*> sweeping_;  // the window's share of them
    SimTime window_at_ = kNever;  // when the next window is scheduled
    bool in_window_ = false;
    uint64_t windows_ = 0;
};

// ---- a hop's steps, inline: every packet takes them at every switch ------------------------

// At equal times a packet starts before a PFC frame is taken, and both before an arrival.
inline void Egress::advance(SimTime t)
{
    for (;;) {
        const SimTime start = waiting() ? wire_free_ : kNever;
        const SimTime frame = pfc_due_ ? pfc_.front().t : kNever;
        if (start <= frame && start <= t) {
            start_next(start);
            continue;
        }
        if (frame > t) return;
        const bool on = pfc_.front().on;
        pfc_.pop();
        pfc_due_ = !pfc_.empty();
        if (on) {
            if (!paused_) paused_at_ = frame;
            paused_ = true;
        } else if (paused_) {
            paused_ = false;
            c_.paused_ps += frame - paused_at_;
            wire_free_ = std::max(wire_free_, frame);  // what waited starts now, or when the wire frees
        }
    }
}

inline void Egress::enqueue(Arrival& a)
{
    c_.enqueued++;
    // An idle wire: after advance(a.t) nothing that may go waits, so the packet starts now,
    // through no queue (paused data waits; control overtakes it).
    if (wire_free_ <= a.t && (!paused_ || a.prio)) {
        c_.peak_bytes = std::max<uint64_t>(c_.peak_bytes, a.bytes);
        return transmit(a, a.t);
    }
    q_[a.prio].push_slot() = a;
    if (!listed_) sw_.list_busy(port_);
    c_.bytes += a.bytes;
    c_.peak_bytes = std::max(c_.peak_bytes, c_.bytes);
    if (!a.prio) data_bytes_ += a.bytes;
    if (log_) [[unlikely]] log_->sample(log_id_, a.t, c_.bytes);
}

inline void Egress::start_next(SimTime now)
{
    const int cls = !q_[1].empty() ? 1 : 0;
    Arrival a = q_[cls].front();
    q_[cls].pop();
    c_.bytes -= a.bytes;
    if (!cls) data_bytes_ -= a.bytes;
    if (log_) [[unlikely]] log_->sample(log_id_, now, c_.bytes);
    transmit(a, now);
}

// a leaves the queue (or skips it) and starts on the wire now: marked or not, its buffer freed,
// captured, into the pipe when its last bit is out.
inline void Egress::transmit(Arrival& a, SimTime now)
{
    const bool marked = !a.prio && a.ect && ecn_ && data_bytes_ > kmin_ && red_marks(data_bytes_);
    if (marked) mark(a);
    sw_.release(a, now);
    if (tap_) [[unlikely]] capture(a, now, marked);
    const uint64_t t = frac_ + a.bytes * ps_per_byte_fp_;
    frac_ = static_cast<uint32_t>(t & ((1u << kFracBits) - 1));
    wire_free_ = now + (t >> kFracBits);
    pipe_->send(a, wire_free_);
}

inline void Pipe::send(const Arrival& a, SimTime leaves)
{
    if (!clean_ || !sw_) [[unlikely]] return send_slow(a, leaves);
    const SimTime t = leaves + delay_ps_;
    delivered_++;
    sw_->arrive(a, t, sw_port_);
    net_.wake(*sw_, t);
}

}  // namespace sdr::emu
