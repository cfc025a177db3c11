// Address resolution for the real-time NIC: the Ethernet address to put on a frame for an IPv4
// peer, found the way the kernel's own IP stack would (RoCEv2 rides on IP, so a verbs peer is
// named by its IPv4-mapped GID and reached through the route and the neighbour table).
#pragma once

#include <sdr/emu/nic.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace sdr::emu {

// The MAC of the next hop towards `ip` (host order) from interface `ifname` whose own address
// is `self`: our own MAC for our own IP (loopback); else the longest-prefix route of the main
// table through that interface (on-link: the peer itself; else its gateway), then the kernel's
// neighbour entry for that hop. With no entry yet, a throwaway UDP datagram to the hop makes
// the kernel resolve it, and the answer is awaited (netlink neighbour notifications) until
// `timeout_ns` passes. Returns 0, or EHOSTUNREACH (no route through ifname, a multicast or
// zero address, or the kernel gave up on the hop) or ETIMEDOUT (no answer in time).
[[nodiscard]] int resolve_neighbour(const std::string& ifname, const NicAddress& self, uint32_t ip, uint64_t timeout_ns,
                      std::array<uint8_t, 6>* mac);

}  // namespace sdr::emu
