// The topologies built in C++: leaf-spine, fat tree, two datacenters; and the checks every
// topology passes before a fabric is built on it.
#include <sdr/emu/topology.hpp>

#include <string>
#include <vector>

namespace sdr::emu {

uint32_t Topology::add_switch(std::string n)
{
    switches.push_back(std::move(n));
    return hosts + static_cast<uint32_t>(switches.size()) - 1;
}

bool Topology::check(std::string* err) const
{
    auto fail = [&](std::string m) {
        if (err) *err = "topology " + name + ": " + std::move(m);
        return false;
    };
    if (hosts == 0) return fail("no hosts");
    if (switches.empty()) return fail("no switches");
    if (nodes() > 65535) return fail("more than 65535 nodes");
    std::vector<uint32_t> host_links(hosts, 0);
    std::vector<std::vector<uint32_t>> adj(nodes());
    for (const TopoLink& l : links) {
        if (l.a >= nodes() || l.b >= nodes()) return fail("a link names a node that does not exist");
        if (l.a == l.b) return fail("a link joins a node to itself");
        if (is_host(l.a) && is_host(l.b)) return fail("a link joins two hosts");
        if (!(l.gbps > 0)) return fail("a link's rate must be positive");
        for (uint32_t n : {l.a, l.b})
            if (is_host(n)) host_links[n]++;
        adj[l.a].push_back(l.b);
        adj[l.b].push_back(l.a);
    }
    for (uint32_t h = 0; h < hosts; h++)
        if (host_links[h] != 1) return fail("host " + std::to_string(h) + " must have exactly one link");
    std::vector<bool> seen(nodes(), false);
    std::vector<uint32_t> todo{0};
    seen[0] = true;
    while (!todo.empty()) {
        uint32_t n = todo.back();
        todo.pop_back();
        for (uint32_t m : adj[n])
            if (!seen[m]) {
                seen[m] = true;
                todo.push_back(m);
            }
    }
    for (uint32_t n = 0; n < nodes(); n++)
        if (!seen[n]) return fail("node " + std::to_string(n) + " is unreachable");
    return true;
}

namespace {

TopoLink dc_link(uint32_t a, uint32_t b, double gbps, SimTime delay_ps)
{
    TopoLink l;
    l.a = a;
    l.b = b;
    l.gbps = gbps;
    l.delay_ps = delay_ps;
    return l;
}

// The leaves and spines of one leaf-spine; hosts of the leaves are host_of(leaf, i).
template <class HostOf>
std::vector<uint32_t> add_leaf_spine(Topology& t, const std::string& prefix, uint32_t leaves, uint32_t spines,
                                     uint32_t hosts_per_leaf, double gbps, double uplink_gbps, SimTime delay_ps,
                                     HostOf host_of)
{
    std::vector<uint32_t> spine(spines);
    for (uint32_t s = 0; s < spines; s++) spine[s] = t.add_switch(prefix + "spine" + std::to_string(s));
    for (uint32_t l = 0; l < leaves; l++) {
        uint32_t leaf = t.add_switch(prefix + "leaf" + std::to_string(l));
        for (uint32_t i = 0; i < hosts_per_leaf; i++) t.links.push_back(dc_link(host_of(l, i), leaf, gbps, delay_ps));
        for (uint32_t s : spine) t.links.push_back(dc_link(leaf, s, uplink_gbps, delay_ps));
    }
    return spine;
}

}  // namespace

Topology Topology::leaf_spine(uint32_t leaves, uint32_t spines, uint32_t hosts_per_leaf, double gbps,
                              double oversubscription, SimTime delay_ps)
{
    Topology t;
    t.name = "leaf_spine";
    t.hosts = leaves * hosts_per_leaf;
    const double uplink = hosts_per_leaf * gbps / (oversubscription * spines);
    add_leaf_spine(t, "", leaves, spines, hosts_per_leaf, gbps, uplink, delay_ps,
                   [&](uint32_t l, uint32_t i) { return l * hosts_per_leaf + i; });
    return t;
}

Topology Topology::fat_tree(uint32_t k, double gbps, uint32_t oversubscription, SimTime delay_ps)
{
    Topology t;
    t.name = "fat_tree";
    const uint32_t half = k / 2, per_edge = half * oversubscription;
    t.hosts = k * half * per_edge;
    std::vector<uint32_t> core(half * half);
    for (uint32_t c = 0; c < core.size(); c++) core[c] = t.add_switch("core" + std::to_string(c));
    uint32_t host = 0;
    for (uint32_t p = 0; p < k; p++) {
        std::vector<uint32_t> agg(half);
        for (uint32_t a = 0; a < half; a++) {
            agg[a] = t.add_switch("pod" + std::to_string(p) + ".agg" + std::to_string(a));
            // aggregation switch a of every pod reaches cores a*k/2 .. a*k/2 + k/2 - 1
            for (uint32_t c = 0; c < half; c++) t.links.push_back(dc_link(agg[a], core[a * half + c], gbps, delay_ps));
        }
        for (uint32_t e = 0; e < half; e++) {
            uint32_t edge = t.add_switch("pod" + std::to_string(p) + ".edge" + std::to_string(e));
            for (uint32_t i = 0; i < per_edge; i++) t.links.push_back(dc_link(host++, edge, gbps, delay_ps));
            for (uint32_t a : agg) t.links.push_back(dc_link(edge, a, gbps, delay_ps));
        }
    }
    return t;
}

Topology Topology::two_datacenters(uint32_t leaves, uint32_t spines, uint32_t hosts_per_leaf, double gbps,
                                   const TopoLink& long_haul, SimTime delay_ps)
{
    Topology t;
    t.name = "two_datacenters";
    t.hosts = 2 * leaves * hosts_per_leaf;
    uint32_t gw[2];
    for (uint32_t dc = 0; dc < 2; dc++) {
        const std::string prefix = "dc" + std::to_string(dc) + ".";
        auto spine = add_leaf_spine(t, prefix, leaves, spines, hosts_per_leaf, gbps, gbps, delay_ps,
                                    [&](uint32_t l, uint32_t i) { return 2 * (l * hosts_per_leaf + i) + dc; });
        gw[dc] = t.add_switch(prefix + "gw");
        for (uint32_t s : spine) t.links.push_back(dc_link(s, gw[dc], gbps, delay_ps));
    }
    TopoLink lh = long_haul;
    lh.a = gw[0];
    lh.b = gw[1];
    lh.twin_stream = true;
    t.links.push_back(lh);
    return t;
}

}  // namespace sdr::emu
