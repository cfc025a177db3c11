// rdma_cm's port spaces (ucma.hpp): a port is bound per port space (RDMA_PS_TCP, _UDP, _IB,
// _IPOIB), as the kernel's cma binds them, within this process (the kernel's are per namespace:
// two processes here each have their own, see README.md). IDs bound by BIND or RESOLVE own their
// port; a request's ID only carries the listener's address, as in the kernel.
#include "ucma.hpp"

#include <cerrno>

namespace sdr::verbs::ucma {
namespace {

// The kernel's default ip_local_port_range.
constexpr uint16_t kEphemeralLo = 32768, kEphemeralHi = 60999;

// Whether `other` keeps `id` off (addr, port): the same port with the same or a wildcard address
// on either side, unless both allow reuse and neither listens (the kernel's cma_check_port).
bool conflicts(const Id& id, const Id& other, const sockaddr_storage& addr, uint16_t port)
{
    if (&id == &other || other.ps != id.ps || !other.owns_port || sin_port(other.src) != port) return false;
    if (!is_any(addr) && !is_any(other.src) && sin_addr(addr) != sin_addr(other.src)) return false;
    return !(id.reuseaddr && other.reuseaddr && other.state != State::Listen);
}

bool port_free(const Id& id, const sockaddr_storage& addr, uint16_t port)
{
    for (const auto& [h, other] : ids())
        if (conflicts(id, *other, addr, port)) return false;
    return true;
}

void set_port(sockaddr_storage* s, uint16_t port)
{
    if (s->ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(s)->sin_port = htons(port);
    else reinterpret_cast<sockaddr_in6*>(s)->sin6_port = htons(port);
}

}  // namespace

int bind_port(Id& id, sockaddr_storage* src)
{
    uint16_t port = sin_port(*src);
    if (port) {
        if (!port_free(id, *src, port)) return EADDRINUSE;
    } else {
        const uint32_t span = kEphemeralHi - kEphemeralLo + 1;
        const uint32_t start = random_psn() % span;
        uint32_t i = 0;
        for (; i < span; i++) {
            port = static_cast<uint16_t>(kEphemeralLo + (start + i) % span);
            if (port_free(id, *src, port)) break;
        }
        if (i == span) return EADDRNOTAVAIL;  // every ephemeral port in use
        set_port(src, port);
    }
    id.src = *src;
    id.owns_port = true;
    return 0;
}

}  // namespace sdr::verbs::ucma
