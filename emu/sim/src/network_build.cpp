// SimNetwork: switches, pipes and routes built from a topology; where packets enter (a NIC's
// port) and leave (a NIC, or a drop).
#include <sdr/emu/network.hpp>

#include <sdr/emu/capture_notes.hpp>
#include <sdr/emu/fabric.hpp>
#include <sdr/emu/wire.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>

namespace sdr::emu {

SimNetwork::SimNetwork(SimFabric& f, Topology t) : f_(f), topo_(std::move(t)) { build(); }

SimNetwork::~SimNetwork() = default;

Simulator& SimNetwork::sim() { return f_.sim(); }

uint64_t SimNetwork::pipe_seed(const TopoLink& l, uint32_t u, uint32_t v) const
{
    if (l.twin_stream) return f_.link_seed(u == l.a ? 1 : uint64_t{1} << 32);  // sim:0 -> sim:1, or back
    return seed_for((uint64_t{u} << 32) | v);
}

uint64_t SimNetwork::seed_for(uint64_t what) const
{
    return (f_.params().seed + 0x2545F4914F6CDD1Dull) * 0xBF58476D1CE4E5B9ull ^ (what * 0x94D049BB133111EBull);
}

void SimNetwork::build()
{
    const uint32_t hosts = topo_.hosts;
    for (uint32_t s = 0; s < topo_.switches.size(); s++)
        switches_.push_back(std::make_unique<SimSwitch>(*this, hosts + s, topo_.sw, seed_for(hosts + s)));
    uplinks_.resize(hosts);
    host_gbps_.assign(hosts, 0);
    host_switch_.assign(hosts, {0, 0});
    // One direction of link l, from node u to v. The pipe's delay holds the receiving
    // switch's hop latency too.
    auto pipe_to = [&](const TopoLink& l, uint32_t u, uint32_t v) {
        const bool to_switch = !topo_.is_host(v);
        auto pipe = std::make_unique<Pipe>(*this, l.delay_ps + (to_switch ? topo_.sw.latency_ps : 0), l.impairment,
                                           pipe_seed(l, u, v));
        if (!to_switch) pipe->to_host(v);
        return pipe;
    };
    // Ports first (both ends of every link), then the pipes' far ends: a pipe into a switch
    // names the port it arrives by.
    struct End {
        uint32_t node;
        uint16_t port;
    };
    std::vector<std::pair<End, End>> ends;  // per link: a's port, b's port
    for (const TopoLink& l : topo_.links) {
        End ea{l.a, 0}, eb{l.b, 0};
        for (auto [u, v, e] : {std::tuple{l.a, l.b, &ea}, std::tuple{l.b, l.a, &eb}}) {
            if (topo_.is_host(u)) {
                uplinks_[u] = pipe_to(l, u, v);
                host_gbps_[u] = l.gbps;
            } else {
                e->port = switches_[u - hosts]->add_port(l.gbps, pipe_to(l, u, v), v);
            }
        }
        ends.push_back({ea, eb});
    }
    for (size_t i = 0; i < topo_.links.size(); i++) {
        const TopoLink& l = topo_.links[i];
        auto [ea, eb] = ends[i];
        for (auto [from, to] : {std::pair{ea, eb}, std::pair{eb, ea}}) {
            if (topo_.is_host(to.node)) continue;
            SimSwitch& dst = *switches_[to.node - hosts];
            Pipe* p = topo_.is_host(from.node) ? uplinks_[from.node].get() : &switches_[from.node - hosts]->port(from.port).pipe();
            p->to_switch(&dst, to.port);
            if (topo_.is_host(from.node)) host_switch_[from.node] = {to.node - hosts, to.port};
            else dst.set_pfc_upstream(to.port, nullptr, &switches_[from.node - hosts]->port(from.port), l.delay_ps);
        }
    }
    build_routes();
    build_mcast_root();
    build_lookahead();
    const FabricParams& fp = f_.params();
    if (!fp.queue_log.empty() && queue_log_.open(fp.queue_log, fp.queue_log_interval_ps, nullptr))
        for_ports(fp.queue_log_ports, [&](SimSwitch& s, size_t p, const std::string& name) {
            s.port(p).log_to(&queue_log_, queue_log_.add_port(name));
        });
    if (f_.tap_pcapng() && !fp.capture_ports.empty())
        for_ports(fp.capture_ports, [&](SimSwitch& s, size_t p, const std::string& name) {
            s.port(p).tap(f_.tap_interface(name));
        });
}

// The ports "switch[:port]" specs name (all of a switch's without a port; every port of every
// switch for an empty list), as "switch:port".
template <class F>
void SimNetwork::for_ports(const std::vector<std::string>& specs, F f)
{
    auto each = [&](int sw, int port) {
        SimSwitch& s = *switches_[sw];
        for (size_t p = 0; p < s.ports(); p++)
            if (port < 0 || p == static_cast<size_t>(port)) f(s, p, topo_.switches[sw] + ":" + std::to_string(p));
    };
    if (specs.empty())
        for (size_t sw = 0; sw < switches_.size(); sw++) each(static_cast<int>(sw), -1);
    for (const std::string& spec : specs) {
        int sw = -1, port = -1;
        if (find_capture_port(topo_, spec, &sw, &port, nullptr)) each(sw, port);  // checked with the params
    }
}

bool SimNetwork::find_capture_port(const Topology& t, const std::string& spec, int* sw, int* port, std::string* err)
{
    const size_t colon = spec.find(':');
    const std::string name = spec.substr(0, colon);
    auto it = std::find(t.switches.begin(), t.switches.end(), name);
    if (it == t.switches.end()) {
        if (err) *err = "capture port '" + spec + "': topology " + t.name + " has no switch '" + name + "'";
        return false;
    }
    *sw = static_cast<int>(it - t.switches.begin());
    *port = -1;
    if (colon == std::string::npos) return true;
    const uint32_t node = t.hosts + static_cast<uint32_t>(*sw);
    int ports = 0;
    for (const TopoLink& l : t.links) ports += (l.a == node) + (l.b == node);
    char* end = nullptr;
    const long v = std::strtol(spec.c_str() + colon + 1, &end, 10);
    if (end == spec.c_str() + colon + 1 || *end || v < 0 || v >= ports) {
        if (err) *err = "capture port '" + spec + "': " + name + " has ports 0.." + std::to_string(ports - 1);
        return false;
    }
    *port = static_cast<int>(v);
    return true;
}

// Shortest paths by hop count, from every host back through the switches (hosts never
// forward). A switch's ECMP group for a host: its ports towards neighbours one hop closer.
void SimNetwork::build_routes()
{
    const uint32_t hosts = topo_.hosts, n = topo_.nodes();
    std::vector<std::vector<uint32_t>> adj(n);
    for (const TopoLink& l : topo_.links) {
        adj[l.a].push_back(l.b);
        adj[l.b].push_back(l.a);
    }
    std::vector<std::vector<uint32_t>> route(switches_.size(), std::vector<uint32_t>(hosts));
    std::vector<std::vector<uint16_t>> ports(switches_.size());
    std::vector<std::map<std::vector<uint16_t>, uint32_t>> groups(switches_.size());
    std::vector<uint32_t> dist(n), queue;
    uint32_t diameter = 0;
    for (uint32_t h = 0; h < hosts; h++) {
        std::fill(dist.begin(), dist.end(), UINT32_MAX);
        dist[h] = 0;
        queue.assign(1, h);
        for (size_t i = 0; i < queue.size(); i++) {
            uint32_t u = queue[i];
            if (u != h && topo_.is_host(u)) continue;
            for (uint32_t v : adj[u])
                if (dist[v] == UINT32_MAX) {
                    dist[v] = dist[u] + 1;
                    queue.push_back(v);
                }
        }
        for (uint32_t s = 0; s < switches_.size(); s++) {
            SimSwitch& sw = *switches_[s];
            std::vector<uint16_t> group;
            for (uint16_t p = 0; p < sw.ports(); p++)
                if (dist[sw.peer(p)] + 1 == dist[hosts + s] && (sw.peer(p) == h || !topo_.is_host(sw.peer(p))))
                    group.push_back(p);
            auto [it, fresh] = groups[s].emplace(group, static_cast<uint32_t>(ports[s].size()));
            if (fresh) ports[s].insert(ports[s].end(), group.begin(), group.end());
            route[s][h] = it->second << 8 | static_cast<uint32_t>(std::min<size_t>(group.size(), 255));
        }
        for (uint32_t o = 0; o < hosts; o++) diameter = std::max(diameter, dist[o] == UINT32_MAX ? 0 : dist[o]);
    }
    for (uint32_t s = 0; s < switches_.size(); s++) switches_[s]->set_routes(std::move(route[s]), std::move(ports[s]));
    // The worst transit: the diameter's hops, each at the slowest link's delay plus hop
    // latency, a full queue at that link's rate, and the largest impairment delay.
    SimTime hop = 0;
    for (const TopoLink& l : topo_.links) {
        const uint64_t queue_bytes = topo_.sw.buffer_bytes;
        const SimTime drain = static_cast<SimTime>(static_cast<double>(queue_bytes) * 8000.0 / l.gbps);
        const ImpairmentParams& i = l.impairment;
        const SimTime extra = (i.reorder > 0 ? i.reorder_max_ps : 0) + (i.duplicate > 0 ? kPsPerNs : 0);
        hop = std::max(hop, l.delay_ps + topo_.sw.latency_ps + drain + extra);
    }
    max_transit_ps_ = hop * diameter;
}

// The windows' width L (network_sweep.cpp): the least time from one switch's step to
// another's, over every link into a switch (propagation and hop latency) and, with PFC, every
// pause between two switches (propagation). Links into NICs do not count: a NIC's arrivals are
// events.
void SimNetwork::build_lookahead()
{
    SimTime l = kNever;
    for (const TopoLink& k : topo_.links) {
        const bool both = !topo_.is_host(k.a) && !topo_.is_host(k.b);
        l = std::min(l, k.delay_ps + topo_.sw.latency_ps);
        if (both && topo_.sw.pfc) l = std::min(l, k.delay_ps);
    }
    lookahead_ps_ = l == kNever ? 0 : l;
}

// Multicast trees hang from switch 0 (the first core or spine of the built topologies): each
// switch's parent is its neighbour one hop closer to it.
void SimNetwork::build_mcast_root()
{
    const uint32_t hosts = topo_.hosts;
    up_switch_.assign(switches_.size(), -2);
    up_switch_[0] = -1;
    std::vector<uint32_t> queue{0};
    for (size_t i = 0; i < queue.size(); i++) {
        SimSwitch& s = *switches_[queue[i]];
        for (uint16_t p = 0; p < s.ports(); p++) {
            const uint32_t peer = s.peer(p);
            if (topo_.is_host(peer) || up_switch_[peer - hosts] != -2) continue;
            up_switch_[peer - hosts] = static_cast<int>(queue[i]);
            switches_[peer - hosts]->set_up_port(switches_[peer - hosts]->port_to(hosts + queue[i]));
            queue.push_back(peer - hosts);
        }
    }
}

// The group's tree: from each member's switch up to the root, the ports joining each step.
void SimNetwork::mcast_changed(uint32_t group_ip)
{
    const uint32_t hosts = topo_.hosts;
    std::vector<std::vector<uint16_t>> ports(switches_.size());
    auto mark = [&](uint32_t s, int port) {
        if (port < 0) return false;
        auto& v = ports[s];
        if (std::find(v.begin(), v.end(), port) != v.end()) return false;
        v.push_back(static_cast<uint16_t>(port));
        return true;
    };
    if (const std::vector<uint32_t>* members = f_.mcast_members(group_ip))
        for (uint32_t h : *members) {
            if (h >= hosts) continue;
            uint32_t s = host_switch_[h].first;
            mark(s, host_switch_[h].second);
            for (int up = up_switch_[s]; up >= 0; s = static_cast<uint32_t>(up), up = up_switch_[s]) {
                mark(s, switches_[s]->port_to(hosts + up));
                if (!mark(static_cast<uint32_t>(up), switches_[up]->port_to(hosts + s))) break;  // joined the tree
            }
        }
    for (uint32_t s = 0; s < switches_.size(); s++) {
        std::sort(ports[s].begin(), ports[s].end());
        switches_[s]->set_mcast_ports(group_ip, std::move(ports[s]));
    }
}

void SimNetwork::attach_host_port(uint32_t host, SimTarget* port)
{
    if (host >= topo_.hosts) return;
    auto [s, p] = host_switch_[host];
    switches_[s]->set_pfc_upstream(p, port, nullptr, uplinks_[host]->delay_ps() - topo_.sw.latency_ps);
}

void SimNetwork::inject(uint32_t host, SimTime leaves, const PacketMeta& m, uint32_t dst_ip, uint8_t* frame,
                        uint32_t frame_len, uint8_t prio)
{
    const uint32_t dst = (dst_ip >> 24) == 10 ? (dst_ip & 0xFFFFFF) - 1 : UINT32_MAX;
    const bool mcast = wire::is_ipv4_multicast(dst_ip);
    if (!mcast && dst >= topo_.hosts) [[unlikely]] {  // no such host: the first switch has no route
        unroutable_++;
        f_.network_drop(leaves, host, dst, m, frame, frame_len, capture_note::kNoRoute);
        return;
    }
    Arrival a;
    a.t = leaves;
    a.pkt = pool_.take();
    a.dst = mcast ? kMulticastDst : dst;
    // The 5-tuple (the UDP destination port and the protocol are RoCEv2's constants); a
    // multicast packet's flow is its group.
    a.flow = mcast ? dst_ip
                   : SimFabric::address_of(host).ip * 0x9E3779B1u ^ dst_ip * 0x85EBCA77u ^
                         uint32_t{m.udp_src_port} * 0xC2B2AE3Du;
    a.bytes = frame_len + kWireOverheadBytes;
    a.in_port = a.out_port = 0;
    a.prio = prio;
    a.ect = m.ecn == wire::kEcnEct0 || m.ecn == wire::kEcnEct1;
    FabricPacket& p = pool_[a.pkt];
    p.meta = m;
    p.frame = frame;
    p.frame_len = frame_len;
    p.src = host;
    p.dst = a.dst;
    p.note = 0;
    uplinks_[host]->send(a, leaves);
}

void SimNetwork::deliver_host(uint32_t host, const Arrival& a)
{
    delivered_++;
    FabricPacket& p = pool_[a.pkt];
    f_.deliver_to_nic(host, p.src, a.t, p.meta, p.frame, p.frame_len, p.note);
    pool_.give_back(a.pkt);
}

void SimNetwork::drop(uint32_t pkt, SimTime t, const char* cause)
{
    FabricPacket& p = pool_[pkt];
    f_.network_drop(t, p.src, p.dst, p.meta, p.frame, p.frame_len, cause);
    pool_.give_back(pkt);
}

void SimNetwork::drop_quietly(uint32_t pkt)
{
    if (uint8_t* frame = pool_[pkt].frame) f_.frame_free(frame);
    pool_.give_back(pkt);
}

SimTime SimNetwork::base_rtt_ps(uint32_t src, uint32_t dst, uint32_t bytes, uint32_t back_bytes) const
{
    auto one_way = [&](uint32_t from, uint32_t to, uint32_t frame) {
        SimTime t = uplinks_[from]->delay_ps();
        Arrival p{};
        p.dst = to;
        for (uint32_t s = host_switch_[from].first, hops = 0; hops <= switches_.size(); hops++) {
            const SimSwitch& sw = *switches_[s];
            const uint16_t port = sw.route(p);  // flow 0: one path of equal length
            const Egress& e = sw.port(port);
            t += static_cast<SimTime>(std::llround((frame + kWireOverheadBytes) * 8000.0 / e.gbps())) + e.pipe().delay_ps();
            const uint32_t peer = sw.peer(port);
            if (topo_.is_host(peer)) break;
            s = peer - topo_.hosts;
        }
        return t;
    };
    return one_way(src, dst, bytes) + one_way(dst, src, back_bytes);
}

NetworkTotals SimNetwork::totals() const
{
    NetworkTotals t;
    for (const auto& s : switches_)
        for (size_t p = 0; p < s->ports(); p++) {
            const QueueCounters& c = s->port(p).counters();
            t.enqueued += c.enqueued;
            t.queue_dropped += c.dropped;
            t.marked += c.marked;
            t.pauses_sent += c.pauses_sent;
            t.link_dropped += s->port(p).pipe().dropped();
        }
    for (const auto& u : uplinks_) t.link_dropped += u->dropped();
    return t;
}

void SimNetwork::reseed()
{
    for (auto& s : switches_) s->reseed(seed_for(s->node()));
    // Every pipe as build() seeded it: the links in order, both directions.
    std::vector<uint16_t> next_port(switches_.size(), 0);
    for (const TopoLink& l : topo_.links)
        for (auto [u, v] : {std::pair{l.a, l.b}, std::pair{l.b, l.a}}) {
            const uint64_t seed = pipe_seed(l, u, v);
            if (topo_.is_host(u)) uplinks_[u]->reseed(seed);
            else switches_[u - topo_.hosts]->port(next_port[u - topo_.hosts]++).pipe().reseed(seed);
        }
}

}  // namespace sdr::emu
