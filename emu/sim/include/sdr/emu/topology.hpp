// The shape of a datacenter fabric: hosts and switches joined by full-duplex links. Host i is
// the NIC behind "sim:i", so every program written against the C API or the verbs device runs
// unchanged on any topology. Built in C++ (leaf_spine, fat_tree, two_datacenters) or read
// from a small JSON object: a file, or "name:key=value,..." on the command line.
#pragma once

#include <sdr/emu/impairment.hpp>
#include <sdr/emu/simulator.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace sdr::emu {

struct LinkParams;

// What every switch of a topology does with its queues.
struct SwitchParams {
    // The packet buffer. Shared: one pool per switch; a queue may always hold reserve_bytes,
    // and beyond that up to dt_alpha x the pool's free bytes (dynamic thresholds, Choudhury and
    // Hahne 1998, as the HPCC ns-3 switch MMU: 12 MB shared, 4 KB reserve per queue).
    // Per port: each egress queue holds up to buffer_bytes. Drop-tail in both.
    bool shared_buffer = true;
    uint64_t buffer_bytes = 12u << 20;
    uint32_t reserve_bytes = 4096;
    double dt_alpha = 1.0;
    // RED/ECN on the egress data queue's bytes, decided at dequeue: no mark below Kmin,
    // probability rising linearly to pmax at Kmax, always above. 0 = scaled to the port's rate
    // as HPCC's defaults: Kmin = 100 KB and Kmax = 400 KB per 25 Gbit/s, pmax = 0.2.
    bool ecn = true;
    uint64_t kmin_bytes = 0, kmax_bytes = 0;
    double pmax = 0.2;
    // PFC (IEEE 802.1Qbb): an ingress port whose buffered bytes pass xoff pauses the upstream
    // sender's data class; below xon it resumes it. Data is then dropped only when the whole
    // buffer (per port: all ports' together) is full: what the ports hold above XOFF is their
    // headroom. 0 = xoff a quarter of that buffer over the ports, xon 3 KB below it (HPCC's
    // resume offset).
    bool pfc = false;
    uint64_t pfc_xoff_bytes = 0, pfc_xon_bytes = 0;
    SimTime latency_ps = 500'000;  // per hop: forwarding, ingress to egress
};

// One full-duplex link. Nodes: hosts are 0..hosts-1, switch j is hosts + j.
struct TopoLink {
    uint32_t a = 0, b = 0;
    double gbps = 100.0;
    SimTime delay_ps = 1'000'000;  // propagation, each way (1 us)
    ImpairmentParams impairment;   // both directions (each draws its own stream)
    // Draw the random streams the point-to-point link between sim:0 and sim:1 would (a to b as
    // 0 to 1): the long haul of two_datacenters, so that it meets the losses today's link meets
    // and the two compare sample by sample.
    bool twin_stream = false;
};

struct Topology {
    static constexpr SimTime kDcDelayPs = 1'000'000;
    std::string name;
    uint32_t hosts = 0;
    std::vector<std::string> switches;  // names: "leaf0", "spine1", "core3", "dc1.gw"
    std::vector<TopoLink> links;
    SwitchParams sw;
    // DCQCN in every NIC when the switches mark ECN (sw.ecn); false: ECN marks go unanswered.
    bool dcqcn = true;

    uint32_t nodes() const { return hosts + static_cast<uint32_t>(switches.size()); }
    bool is_host(uint32_t node) const { return node < hosts; }
    uint32_t add_switch(std::string name);

    // Every host has exactly one link, to a switch; every node is reachable; no link joins a
    // node to itself or two hosts. false + err otherwise.
    [[nodiscard]] bool check(std::string* err) const;

    // Links inside a datacenter run at gbps with delay_ps of propagation (1 us by default, as
    // the HPCC ns-3 topologies).
    // A 2-tier leaf-spine: hosts_per_leaf hosts under each leaf, every leaf joined to every
    // spine. oversubscription = host bandwidth of a leaf / its uplink bandwidth (the uplinks'
    // rate is scaled to give it).
    static Topology leaf_spine(uint32_t leaves, uint32_t spines, uint32_t hosts_per_leaf, double gbps,
                               double oversubscription = 1.0, SimTime delay_ps = kDcDelayPs);
    // A 3-tier k-ary fat tree (Al-Fares et al., SIGCOMM 2008): k pods of k/2 edge and k/2
    // aggregation switches, (k/2)^2 cores; k^3/4 hosts, times the oversubscription (hosts per
    // edge switch = k/2 x oversubscription).
    static Topology fat_tree(uint32_t k, double gbps, uint32_t oversubscription = 1, SimTime delay_ps = kDcDelayPs);
    // Two datacenters, each a leaf-spine whose spines all join a gateway switch; the gateways
    // are joined by the long-haul link (its rate, delay and impairments). Hosts alternate:
    // even hosts live in the first datacenter, odd in the second, so sim:0 and sim:1 talk
    // across the long haul as they do over today's point-to-point link.
    static Topology two_datacenters(uint32_t leaves, uint32_t spines, uint32_t hosts_per_leaf, double gbps,
                                    const TopoLink& long_haul, SimTime delay_ps = kDcDelayPs);

    // A JSON object ({"type": "fat_tree", "k": 8, ...}, see emu/sim/README.md), the path of a
    // file holding one, or "type:key=value,...". Unset rates, delays and impairments of the
    // long haul come from `link` (today's point-to-point link: SDR_SIM_BW_GBPS and friends).
    // Every built type takes host_gbps: the hosts' links at that rate, the rest at gbps.
    [[nodiscard]] static bool parse(const std::string& spec, const LinkParams& link, Topology* out,
                                    std::string* err);
};

}  // namespace sdr::emu
