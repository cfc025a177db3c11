// Address resolution for the real-time NIC (neighbour.hpp): route, then neighbour entry, from
// the kernel of the network namespace the process runs in.
#include <sdr/emu/neighbour.hpp>

#include <arpa/inet.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace sdr::emu {
namespace {

uint64_t mono_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

// The next hop towards ip through ifname from the main routing table (net/route: one
// line per route, addresses as the hex of their network-order bytes read as a native word).
// 0 if no route through ifname covers ip.
uint32_t next_hop(const std::string& ifname, uint32_t ip)
{
    std::ifstream f("/proc/thread-self/net/route");  // this thread's namespace
    std::string line;
    std::getline(f, line);  // header
    int best_len = -1;
    uint32_t best_metric = 0, hop = 0;
    while (std::getline(f, line)) {
        std::istringstream in(line);
        std::string iface;
        unsigned long dst, gw, flags, refcnt, use, metric, mask;
        if (!(in >> iface >> std::hex >> dst >> gw >> flags >> std::dec >> refcnt >> use >> metric >> std::hex >> mask))
            continue;
        constexpr unsigned long kUp = 0x1, kGateway = 0x2;  // RTF_UP, RTF_GATEWAY
        if (iface != ifname || !(flags & kUp)) continue;
        const uint32_t d = ntohl(static_cast<uint32_t>(dst)), m = ntohl(static_cast<uint32_t>(mask));
        if ((ip & m) != d) continue;
        const int len = __builtin_popcount(m);
        if (len < best_len || (len == best_len && metric >= best_metric)) continue;
        best_len = len;
        best_metric = static_cast<uint32_t>(metric);
        hop = (flags & kGateway) ? ntohl(static_cast<uint32_t>(gw)) : ip;
    }
    return hop;
}

bool parse_mac(const std::string& s, std::array<uint8_t, 6>* mac)
{
    unsigned b[6];
    if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6) return false;
    unsigned any = 0;
    for (int i = 0; i < 6; i++) {
        (*mac)[i] = static_cast<uint8_t>(b[i]);
        any |= b[i];
    }
    return any != 0;
}

// A complete (or permanent) entry of the kernel's ARP table for hop on ifname.
bool arp_entry(const std::string& ifname, uint32_t hop, std::array<uint8_t, 6>* mac)
{
    std::ifstream f("/proc/thread-self/net/arp");
    std::string line;
    std::getline(f, line);  // header
    while (std::getline(f, line)) {
        std::istringstream in(line);
        std::string ip, type, flags, hw, mask, dev;
        if (!(in >> ip >> type >> flags >> hw >> mask >> dev) || dev != ifname) continue;
        in_addr a{};
        if (inet_pton(AF_INET, ip.c_str(), &a) != 1 || ntohl(a.s_addr) != hop) continue;
        constexpr unsigned long kComplete = 0x2, kPermanent = 0x4;  // ATF_COM, ATF_PERM
        if (!(std::strtoul(flags.c_str(), nullptr, 16) & (kComplete | kPermanent))) continue;
        return parse_mac(hw, mac);
    }
    return false;
}

// The kernel resolves a neighbour when it has something to send to it: one datagram to the
// discard port (nothing listens there; only the ARP exchange matters).
void provoke_resolution(const std::string& ifname, uint32_t hop)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    // Best effort: without the privilege the route through ifname is still the one taken.
    (void)setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname.c_str(), static_cast<socklen_t>(ifname.size()));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(9);
    to.sin_addr.s_addr = htonl(hop);
    const char byte = 0;
    (void)sendto(fd, &byte, 1, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to), sizeof to);
    close(fd);
}

// What a neighbour notification says about hop on ifindex: 1 resolved, -1 failed, 0 neither.
int neighbour_news(const uint8_t* buf, size_t len, int ifindex, uint32_t hop)
{
    int verdict = 0;
    for (auto* h = reinterpret_cast<const nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
        if (h->nlmsg_type != RTM_NEWNEIGH) continue;
        const auto* nd = static_cast<const ndmsg*>(NLMSG_DATA(h));
        if (nd->ndm_family != AF_INET || nd->ndm_ifindex != ifindex) continue;
        int rlen = static_cast<int>(RTM_PAYLOAD(h));
        bool ours = false;
        for (auto* a = reinterpret_cast<const rtattr*>(reinterpret_cast<const uint8_t*>(nd) + NLMSG_ALIGN(sizeof *nd));
             RTA_OK(a, rlen); a = RTA_NEXT(a, rlen)) {
            uint32_t dst;
            if (a->rta_type == NDA_DST && RTA_PAYLOAD(a) == 4) {
                std::memcpy(&dst, RTA_DATA(a), 4);
                ours = ntohl(dst) == hop;
            }
        }
        if (!ours) continue;
        if (nd->ndm_state & NUD_FAILED) verdict = -1;
        if (nd->ndm_state & (NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT)) verdict = 1;
    }
    return verdict;
}

}  // namespace

int resolve_neighbour(const std::string& ifname, const NicAddress& self, uint32_t ip, uint64_t timeout_ns,
                      std::array<uint8_t, 6>* mac)
{
    if (ip == self.ip) {  // our own address: the NIC loops the frame back (rt_nic.cpp)
        *mac = self.mac;
        return 0;
    }
    if (ip == 0 || (ip >> 28) == 0xE || ip == 0xFFFFFFFFu) return EHOSTUNREACH;  // no unicast peer
    const uint32_t hop = next_hop(ifname, ip);
    if (!hop) return EHOSTUNREACH;
    // Listen for neighbour changes before looking, so an answer between look and wait is seen.
    int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    sa.nl_groups = RTMGRP_NEIGH;
    if (nl >= 0 && bind(nl, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        close(nl);
        nl = -1;
    }
    const int ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    int err = ETIMEDOUT;
    if (arp_entry(ifname, hop, mac)) {
        err = 0;
    } else if (nl >= 0) {
        provoke_resolution(ifname, hop);
        const uint64_t deadline = mono_ns() + timeout_ns;
        for (;;) {
            if (arp_entry(ifname, hop, mac)) {
                err = 0;
                break;
            }
            const uint64_t now = mono_ns();
            if (now >= deadline) break;
            pollfd p{nl, POLLIN, 0};
            const int ms = static_cast<int>(std::min<uint64_t>((deadline - now + 999'999) / 1'000'000, 1000));
            if (poll(&p, 1, ms) <= 0) continue;  // the deadline (or a signal): look once more
            alignas(nlmsghdr) uint8_t buf[8192];
            ssize_t n;
            int news = 0;
            while ((n = recv(nl, buf, sizeof buf, 0)) > 0)
                if (int v = neighbour_news(buf, static_cast<size_t>(n), ifindex, hop)) news = v;
            if (news < 0) {
                err = EHOSTUNREACH;
                break;
            }
        }
    }
    if (nl >= 0) close(nl);
    return err;
}

}  // namespace sdr::emu
