// Port selection by kind, and what an interface says about itself (MAC, IPv4, MTU).
#include <sdr/emu/port.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sdr::emu {

bool interface_info(const std::string& ifname, PortInfo* out, std::string* err)
{
    if (ifname.empty() || ifname.size() >= IFNAMSIZ) {
        *err = "interface name '" + ifname + "' is empty or longer than " + std::to_string(IFNAMSIZ - 1);
        return false;
    }
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        *err = std::string("socket: ") + std::strerror(errno);
        return false;
    }
    ifreq ifr{};
    std::memcpy(ifr.ifr_name, ifname.c_str(), ifname.size());
    bool ok = ioctl(s, SIOCGIFHWADDR, &ifr) == 0;
    if (ok) std::memcpy(out->addr.mac.data(), ifr.ifr_hwaddr.sa_data, 6);
    ok = ok && ioctl(s, SIOCGIFMTU, &ifr) == 0;
    if (ok) out->mtu = static_cast<uint32_t>(ifr.ifr_mtu);
    int e = errno;
    close(s);
    if (!ok) {
        *err = "interface " + ifname + ": " + std::strerror(e) +
               (e == ENODEV ? " (no such interface in this network namespace)" : "");
        return false;
    }
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) {
        *err = std::string("getifaddrs: ") + std::strerror(errno);
        return false;
    }
    out->addr.ip = 0;
    for (ifaddrs* a = list; a; a = a->ifa_next)
        if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && ifname == a->ifa_name) {
            out->addr.ip = ntohl(reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr);
            break;
        }
    freeifaddrs(list);
    if (!out->addr.ip) {
        *err = "interface " + ifname + " has no IPv4 address (RoCEv2 needs one: ip addr add ... dev " + ifname + ")";
        return false;
    }
    out->ifname = ifname;
    return true;
}

std::unique_ptr<Port> open_port(const std::string& kind, const std::string& ifname, const PortOptions& opt,
                                std::string* err)
{
    if (kind == "raw") return open_packet_port(ifname, opt, err);
    if (kind == "xdp") return open_xdp_port(ifname, opt, err);
    *err = "port kind '" + kind + "': expected xdp or raw";
    return nullptr;
}

}  // namespace sdr::emu
