// Address resolution of the real-time NIC (emu/neighbour.hpp) against a real kernel, in the
// two-namespace testbed: our own address, an on-link peer and a peer behind a gateway (both the
// other side's MAC, learnt by ARP from an empty neighbour table), no route, a multicast address,
// and an on-link address nobody answers (the kernel gives up: EHOSTUNREACH).
#include "child_util.hpp"
#include "netns_util.hpp"

#include <sdr/emu/neighbour.hpp>
#include <sdr/emu/port.hpp>

#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace {

using sdr::emu::NicAddress;
using sdr::emu::resolve_neighbour;

uint32_t ip(const char* s)
{
    in_addr a{};
    inet_pton(AF_INET, s, &a);
    return ntohl(a.s_addr);
}

std::string mac_text(const std::array<uint8_t, 6>& m)
{
    char s[18];
    std::snprintf(s, sizeof s, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
    return s;
}

std::string sh(const std::string& cmd)
{
    sdr::test::Child c(cmd);
    std::string out = c.finish();
    return out.substr(0, out.find('\n'));
}

TEST(Neighbour, RoutesArpAndFailures)
{
    if (std::string why = sdr::test::netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    sdr::test::Testbed tb("nbr");
    ASSERT_TRUE(tb.ok()) << "tools/sdr-netns could not build the testbed";  // as root: a failure
    const std::string a = tb.ns(0);
    ASSERT_EQ(std::system(("ip -n " + a + " route add 192.0.2.0/24 via 10.77.0.2").c_str()), 0);
    const std::string mac_b = sh("ip netns exec " + tb.ns(1) + " cat /sys/class/net/" + tb.ns(1) + "/address");
    sdr::test::InNetns in(a);
    ASSERT_TRUE(in.ok());
    sdr::emu::PortInfo self;
    std::string err;
    ASSERT_TRUE(sdr::emu::interface_info(a, &self, &err)) << err;
    constexpr uint64_t kTimeout = 10'000'000'000;  // the kernel gives up on a hop after about 3 s
    std::array<uint8_t, 6> mac{};

    EXPECT_EQ(resolve_neighbour(a, self.addr, self.addr.ip, kTimeout, &mac), 0);
    EXPECT_EQ(mac, self.addr.mac) << "our own address is our own MAC (loopback)";

    ASSERT_EQ(std::system(("ip -n " + a + " neigh flush dev " + a).c_str()), 0);
    mac = {};
    EXPECT_EQ(resolve_neighbour(a, self.addr, ip("10.77.0.2"), kTimeout, &mac), 0);
    EXPECT_EQ(mac_text(mac), mac_b) << "on-link peer, resolved by ARP";

    ASSERT_EQ(std::system(("ip -n " + a + " neigh flush dev " + a).c_str()), 0);
    mac = {};
    EXPECT_EQ(resolve_neighbour(a, self.addr, ip("192.0.2.1"), kTimeout, &mac), 0);
    EXPECT_EQ(mac_text(mac), mac_b) << "behind the gateway 10.77.0.2: the gateway's MAC";

    EXPECT_EQ(resolve_neighbour(a, self.addr, ip("198.51.100.7"), kTimeout, &mac), EHOSTUNREACH) << "no route";
    EXPECT_EQ(resolve_neighbour(a, self.addr, ip("224.0.0.1"), kTimeout, &mac), EHOSTUNREACH) << "multicast";
    EXPECT_EQ(resolve_neighbour("other-if0", self.addr, ip("10.77.0.2"), kTimeout, &mac), EHOSTUNREACH)
        << "no route through another interface";
    EXPECT_EQ(resolve_neighbour(a, self.addr, ip("10.77.0.99"), kTimeout, &mac), EHOSTUNREACH)
        << "nobody answers ARP: the kernel marks the hop failed";
    EXPECT_EQ(resolve_neighbour(a, self.addr, ip("10.77.0.98"), 200'000'000, &mac), ETIMEDOUT)
        << "no answer within 200 ms";
}

}  // namespace
