#include <sdr/emu/process_share.hpp>

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace sdr::emu {
namespace {

// The abstract address of `name`: a leading NUL, no terminator (unix(7)).
socklen_t abstract_address(const std::string& name, sockaddr_un* a)
{
    *a = {};
    a->sun_family = AF_UNIX;
    const size_t n = std::min(name.size(), sizeof a->sun_path - 1);
    std::memcpy(a->sun_path + 1, name.data(), n);
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

}  // namespace

std::string ProcessShare::name(Kind k, uint64_t v) const
{
    static constexpr const char* kWhat[] = {"qpn", "service", "answerer"};
    char buf[80];
    std::snprintf(buf, sizeof buf, "sdr-port/%u/%s/%llx", ifindex_, kWhat[static_cast<int>(k)],
                  static_cast<unsigned long long>(v));
    return buf;
}

int ProcessShare::claim(Kind k, uint64_t v)
{
    if (held_.count(key(k, v))) return 0;
    Fd s(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!s.ok()) return errno;
    sockaddr_un a;
    const socklen_t len = abstract_address(name(k, v), &a);
    if (bind(s.get(), reinterpret_cast<sockaddr*>(&a), len) != 0) return errno;
    held_.emplace(key(k, v), std::move(s));
    return 0;
}

bool ProcessShare::listened_elsewhere(uint64_t service_id)
{
    if (held_.count(key(Kind::Service, service_id))) return false;  // ours
    Fd s(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_un a;
    const socklen_t len = abstract_address(name(Kind::Service, service_id), &a);
    return s.ok() && connect(s.get(), reinterpret_cast<sockaddr*>(&a), len) == 0;
}

bool ProcessShare::answers_for_port() { return claim(Kind::Answerer, 0) == 0; }

}  // namespace sdr::emu
