// The devices rdma_cm binds to (ucma.hpp): the SDR devices libibverbs lists, their interface
// addresses in the process's network namespace, the route towards a peer, and the references
// that keep a device's engine and CM agent running while IDs use it.
#include "ucma.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace sdr::verbs::ucma {

std::vector<Device*>& devices()
{
    static auto* list = [] {
        auto* v = new std::vector<Device*>;
        int n = 0;
        ibv_device** all = ibv_get_device_list(&n);
        for (int i = 0; all && i < n; i++) {
            if (!is_provider_device(all[i])) continue;
            auto* d = new (std::nothrow) Device;
            if (d && read_port_info(all[i]->ibdev_path, &d->port)) v->push_back(d);
            else delete d;
        }
        if (all) ibv_free_device_list(all);
        return v;
    }();
    return *list;
}

namespace {

// The IPv4 addresses (host order) of an interface in this namespace, walking getifaddrs.
template <typename F>
void for_each_ipv4(F&& f)
{
    ifaddrs* all = nullptr;
    if (getifaddrs(&all) != 0) return;
    for (ifaddrs* a = all; a; a = a->ifa_next)
        if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && a->ifa_name)
            f(a->ifa_name, ntohl(reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr));
    freeifaddrs(all);
}

}  // namespace

uint32_t device_ip(const Device& d)
{
    uint32_t ip = 0;
    for_each_ipv4([&](const char* name, uint32_t a) {
        if (!ip && d.port.netdev == name) ip = a;
    });
    return ip;
}

Device* device_with_ip(uint32_t ip)
{
    Device* found = nullptr;
    for_each_ipv4([&](const char* name, uint32_t a) {
        if (found || a != ip) return;
        for (Device* d : devices())
            if (d->port.netdev == name) found = d;
    });
    return found;
}

bool is_local_ipv6(const in6_addr& a)
{
    ifaddrs* all = nullptr;
    if (getifaddrs(&all) != 0) return false;
    bool found = false;
    for (ifaddrs* i = all; i && !found; i = i->ifa_next)
        found = i->ifa_addr && i->ifa_addr->sa_family == AF_INET6 &&
                IN6_ARE_ADDR_EQUAL(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, &a);
    freeifaddrs(all);
    return found;
}

int64_t route_source(uint32_t dst)
{
    // A UDP socket's connect() asks the kernel's routing for the source address towards dst
    // (it sends nothing), as the kernel's rdma_resolve_ip asks its route lookup.
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(9);
    to.sin_addr.s_addr = htonl(dst);
    sockaddr_in me{};
    socklen_t len = sizeof me;
    int64_t r;
    if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len) != 0)
        r = -errno;
    else
        r = ntohl(me.sin_addr.s_addr);
    close(fd);
    return r;
}

int device_get(Device* d)
{
    if (d->refs++ > 0) return 0;
    d->engine = Engine::acquire(d->port);
    if (!d->engine) {
        d->refs = 0;
        return errno ? errno : ENODEV;
    }
    try {
        std::lock_guard g(d->engine->lock());
        d->agent = std::make_unique<cm::CmAgent>(d->engine->verbs());
        d->agent->set_event_handler(event_handler(d));
    } catch (const std::exception&) {
        d->agent.reset();
        Engine::release(d->engine);
        d->engine = nullptr;
        d->refs = 0;
        return ENOMEM;
    }
    return 0;
}

void device_put(Device* d)
{
    if (!d || --d->refs > 0) return;
    {
        std::lock_guard g(d->engine->lock());
        d->agent.reset();  // its connections vanish; every ID on it is gone already
    }
    Engine::release(d->engine);
    d->engine = nullptr;
}

uint32_t sin_addr(const sockaddr_storage& s)
{
    if (s.ss_family != AF_INET) return 0;
    return ntohl(reinterpret_cast<const sockaddr_in&>(s).sin_addr.s_addr);
}

uint16_t sin_port(const sockaddr_storage& s)
{
    if (s.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(s).sin_port);
    if (s.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(s).sin6_port);
    return 0;
}

// The kernel's cma_any_addr: the loopback binds as the wildcard does (no device), which is what
// libfabric's verbs provider relies on when it binds "localhost" to find its passive address.
bool is_any(const sockaddr_storage& s)
{
    if (s.ss_family == AF_INET) {
        const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in&>(s).sin_addr.s_addr);
        return ip == INADDR_ANY || (ip >> 24) == IN_LOOPBACKNET;
    }
    if (s.ss_family == AF_INET6) {
        const in6_addr& a = reinterpret_cast<const sockaddr_in6&>(s).sin6_addr;
        return IN6_IS_ADDR_UNSPECIFIED(&a) || IN6_IS_ADDR_LOOPBACK(&a);
    }
    return true;
}

emu::verbs::Gid gid_of(uint32_t ip) { return emu::verbs::gid_from_ipv4(ip); }

uint32_t random_psn()
{
    uint32_t v = 0;
    if (getentropy(&v, sizeof v) != 0) v = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(&v));
    return v & 0xFFFFFF;
}

}  // namespace sdr::verbs::ucma
