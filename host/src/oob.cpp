// The out-of-band TCP bootstrap (sdr_oob.h). Non-blocking sockets and poll() with a deadline
// everywhere, so no call can hang past its timeout; bytes read ahead stay in `in` until a
// whole framed message is there.
#include "internal.hpp"

#include <sdr/host/oob_fd.hpp>
#include <sdr_oob.h>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <thread>
#include <vector>

using sdr::host::set_error;

struct sdr_oob {
    int fd = -1;
    int io_timeout_ms = -1;   // for sends that wait on a full socket buffer
    std::vector<uint8_t> in;  // received bytes not yet returned as messages
    std::string peer;         // "host:port", for error messages
    ~sdr_oob()
    {
        if (fd >= 0) close(fd);
    }
};

namespace {

constexpr char kMagic[4] = {'S', 'D', 'R', 'B'};
constexpr uint32_t kVersion = 1;
constexpr size_t kLengthBytes = 4;

using Clock = std::chrono::steady_clock;

// A deadline from a timeout in ms (-1: never), and what is left of it for poll().
struct Deadline {
    explicit Deadline(int timeout_ms)
        : forever(timeout_ms < 0), at(Clock::now() + std::chrono::milliseconds(forever ? 0 : timeout_ms))
    {
    }
    int left_ms() const
    {
        if (forever) return -1;
        auto ms = std::chrono::ceil<std::chrono::milliseconds>(at - Clock::now()).count();
        return ms > 0 ? static_cast<int>(ms) : 0;
    }
    bool passed() const { return !forever && Clock::now() >= at; }
    bool forever;
    Clock::time_point at;
};

std::string errno_text(int e) { return std::strerror(e); }

void put_u32(uint8_t* p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p)
{
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

bool set_nonblocking(int fd) { return fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0; }

// Waits for `events` on fd: 1 ready, 0 deadline passed, -1 error (errno).
int wait_for(int fd, short events, const Deadline& d)
{
    for (;;) {
        pollfd p{fd, events, 0};
        int r = poll(&p, 1, d.left_ms());
        if (r >= 0) return r > 0 ? 1 : 0;
        if (errno != EINTR) return -1;
    }
}

// Writes all of buf or sets the error.
bool write_all(sdr_oob* o, const uint8_t* buf, size_t len, const Deadline& d)
{
    while (len) {
        ssize_t n = send(o->fd, buf, len, MSG_NOSIGNAL);
        if (n > 0) {
            buf += n;
            len -= static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int w = wait_for(o->fd, POLLOUT, d);
            if (w > 0) continue;
            if (w == 0) return set_error("sdr_oob_send: " + o->peer + " has not read for " +
                                         std::to_string(o->io_timeout_ms) + " ms (socket buffer full)"),
                        false;
        }
        return set_error("sdr_oob_send: " + o->peer + ": " + errno_text(errno) +
                         (errno == EPIPE || errno == ECONNRESET ? " (the peer closed the connection)" : "")),
               false;
    }
    return true;
}

// Reads what the socket has into o->in, waiting until something arrives or the deadline:
// 1 read bytes, 0 nothing by the deadline, -1 error set (closed or failed).
int read_some(sdr_oob* o, const Deadline& d)
{
    for (;;) {
        uint8_t buf[65536];
        ssize_t n = recv(o->fd, buf, sizeof buf, 0);
        if (n > 0) {
            o->in.insert(o->in.end(), buf, buf + n);
            return 1;
        }
        if (n == 0) return set_error("sdr_oob: " + o->peer + " closed the bootstrap connection"), -1;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return set_error("sdr_oob: " + o->peer + ": " + errno_text(errno)), -1;
        int w = wait_for(o->fd, POLLIN, d);
        if (w < 0) return set_error("sdr_oob: poll: " + errno_text(errno)), -1;
        if (w == 0) return 0;
    }
}

// The length of the whole message at the front of o->in, or -1 while it is incomplete;
// -2 (error set) if its length is impossible.
long long framed_length(sdr_oob* o)
{
    if (o->in.size() < kLengthBytes) return -1;
    uint32_t len = get_u32(o->in.data());
    if (len > SDR_OOB_MAX_MESSAGE)
        return set_error("sdr_oob: " + o->peer + " sent a message of " + std::to_string(len) +
                         " B, more than SDR_OOB_MAX_MESSAGE: not an SDR bootstrap peer, or out of step"),
               -2;
    return o->in.size() >= kLengthBytes + len ? static_cast<long long>(len) : -1;
}

// Both ends send magic + version at once and check the other's.
bool handshake(sdr_oob* o, const Deadline& d)
{
    uint8_t hello[8];
    std::memcpy(hello, kMagic, 4);
    put_u32(hello + 4, kVersion);
    if (!write_all(o, hello, sizeof hello, d)) return false;
    while (o->in.size() < sizeof hello) {
        int r = read_some(o, d);
        if (r < 0) return false;
        if (r == 0)
            return set_error("sdr_oob: " + o->peer + " connected but sent no SDR handshake within the timeout "
                             "(is it an SDR endpoint?)"),
                   false;
    }
    if (std::memcmp(o->in.data(), kMagic, 4) != 0)
        return set_error("sdr_oob: " + o->peer + " is not an SDR bootstrap endpoint (no \"SDRB\" handshake)"), false;
    if (uint32_t v = get_u32(o->in.data() + 4); v != kVersion)
        return set_error("sdr_oob: " + o->peer + " speaks bootstrap version " + std::to_string(v) + ", this library " +
                         std::to_string(kVersion)),
               false;
    o->in.erase(o->in.begin(), o->in.begin() + sizeof hello);
    return true;
}

std::string address_text(const sockaddr* sa, socklen_t len)
{
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return "the peer";
    return std::string(sa->sa_family == AF_INET6 ? "[" : "") + host + (sa->sa_family == AF_INET6 ? "]" : "") + ":" + serv;
}

// A connected socket made ready for messages; the handshake is done. nullptr + error set.
sdr_oob* finish(int fd, std::string peer, int timeout_ms, const Deadline& d)
{
    auto* o = new sdr_oob;
    o->fd = fd;
    o->peer = std::move(peer);
    o->io_timeout_ms = timeout_ms;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // small messages, latency matters
    if (!set_nonblocking(fd)) {
        set_error("sdr_oob: fcntl: " + errno_text(errno));
        delete o;
        return nullptr;
    }
    if (!handshake(o, d)) {
        delete o;
        return nullptr;
    }
    return o;
}

struct AddrList {
    addrinfo* head = nullptr;
    ~AddrList()
    {
        if (head) freeaddrinfo(head);
    }
};

}  // namespace

sdr_oob* sdr::host::oob_adopt(int fd, std::string peer, int timeout_ms)
{
    Deadline d(timeout_ms);
    return finish(fd, std::move(peer), timeout_ms, d);
}

extern "C" {

sdr_oob* sdr_oob_listen(const char* bind_addr, uint16_t port, int timeout_ms)
{
    Deadline d(timeout_ms);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    AddrList al;
    std::string where = std::string(bind_addr ? bind_addr : "*") + ":" + std::to_string(port);
    // With no address, listen on IPv6's any address: dual-stack, it takes IPv4 clients too.
    if (int r = getaddrinfo(bind_addr, std::to_string(port).c_str(), &hints, &al.head); r != 0)
        return set_error("sdr_oob_listen(" + where + "): " + gai_strerror(r)), nullptr;
    int ls = -1, last = 0;
    for (int pass = 0; pass < 2 && ls < 0; pass++)
        for (addrinfo* a = al.head; a && ls < 0; a = a->ai_next) {
            if (!bind_addr && (a->ai_family == AF_INET6) != (pass == 0)) continue;
            int s = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
            if (s < 0) {
                last = errno;
                continue;
            }
            int one = 1, zero = 0;
            setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (a->ai_family == AF_INET6) setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
            if (bind(s, a->ai_addr, a->ai_addrlen) == 0 && listen(s, 1) == 0) {
                ls = s;
                break;
            }
            last = errno;
            close(s);
        }
    if (ls < 0)
        return set_error("sdr_oob_listen(" + where + "): " + errno_text(last) +
                         (last == EADDRINUSE ? " (another server runs on this port? choose another with -p)" : "")),
               nullptr;
    for (;;) {
        int w = wait_for(ls, POLLIN, d);
        if (w <= 0) {
            int e = errno;
            close(ls);
            if (w == 0)
                return set_error("sdr_oob_listen(" + where + "): no client connected within " +
                                 std::to_string(timeout_ms) + " ms"),
                       nullptr;
            return set_error("sdr_oob_listen(" + where + "): poll: " + errno_text(e)), nullptr;
        }
        sockaddr_storage peer{};
        socklen_t plen = sizeof peer;
        int fd = accept4(ls, reinterpret_cast<sockaddr*>(&peer), &plen, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) continue;
            int e = errno;
            close(ls);
            return set_error("sdr_oob_listen(" + where + "): accept: " + errno_text(e)), nullptr;
        }
        close(ls);
        return finish(fd, address_text(reinterpret_cast<sockaddr*>(&peer), plen), timeout_ms, d);
    }
}

sdr_oob* sdr_oob_connect(const char* host, uint16_t port, int timeout_ms)
{
    if (!host || !*host) return set_error("sdr_oob_connect: no server address given"), nullptr;
    Deadline d(timeout_ms);
    std::string where = std::string(host) + ":" + std::to_string(port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    AddrList al;
    if (int r = getaddrinfo(host, std::to_string(port).c_str(), &hints, &al.head); r != 0)
        return set_error("sdr_oob_connect(" + where + "): " + gai_strerror(r)), nullptr;
    int last = ETIMEDOUT;
    // Retry while the server is not up yet (refused) or the path is not ready; back off 20 ms
    // between rounds so a missing server costs no CPU while we wait for it.
    for (;;) {
        for (addrinfo* a = al.head; a; a = a->ai_next) {
            int s = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
            if (s < 0) {
                last = errno;
                continue;
            }
            int r = connect(s, a->ai_addr, a->ai_addrlen);
            if (r != 0 && errno == EINPROGRESS) {
                int w = wait_for(s, POLLOUT, d);
                int err = 0;
                socklen_t el = sizeof err;
                if (w > 0 && getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0)
                    r = 0;
                else
                    errno = w == 0 ? ETIMEDOUT : err ? err : errno;
            }
            if (r == 0) return finish(s, where, timeout_ms, d);
            last = errno;
            close(s);
        }
        bool transient = last == ECONNREFUSED || last == ENETUNREACH || last == EHOSTUNREACH || last == ETIMEDOUT ||
                         last == EADDRNOTAVAIL;
        if (!transient || d.passed()) break;
        int nap = d.forever ? 20 : std::min(20, d.left_ms());
        std::this_thread::sleep_for(std::chrono::milliseconds(nap));
        if (d.passed()) break;
    }
    std::string hint = last == ECONNREFUSED ? " (no server listening: start `sdr_write_bw -d DEVICE` on the peer first)"
                                            : last == ETIMEDOUT ? " (no answer: wrong address or a firewall?)" : "";
    return set_error("sdr_oob_connect(" + where + "): no connection within " + std::to_string(timeout_ms) +
                     " ms: " + errno_text(last) + hint),
           nullptr;
}

int sdr_oob_send(sdr_oob* oob, const void* buf, size_t len)
{
    if (!oob) return set_error("sdr_oob_send: connection is NULL");
    if (len > SDR_OOB_MAX_MESSAGE)
        return set_error("sdr_oob_send: message of " + std::to_string(len) + " B exceeds SDR_OOB_MAX_MESSAGE (" +
                         std::to_string(SDR_OOB_MAX_MESSAGE) + ")");
    if (len && !buf) return set_error("sdr_oob_send: buf is NULL");
    Deadline d(oob->io_timeout_ms);
    uint8_t hdr[kLengthBytes];
    put_u32(hdr, static_cast<uint32_t>(len));
    if (!write_all(oob, hdr, sizeof hdr, d) || !write_all(oob, static_cast<const uint8_t*>(buf), len, d))
        return SDR_ERROR;
    return SDR_SUCCESS;
}

int sdr_oob_recv(sdr_oob* oob, void* buf, size_t cap, size_t* len, int timeout_ms)
{
    if (!oob || !len || (cap && !buf)) return set_error("sdr_oob_recv: NULL argument");
    Deadline d(timeout_ms);
    long long n;
    while ((n = framed_length(oob)) == -1) {
        int r = read_some(oob, d);
        if (r < 0) return SDR_ERROR;
        if (r == 0) return SDR_RETRY;
    }
    if (n < 0) return SDR_ERROR;
    size_t m = static_cast<size_t>(n);
    if (m > cap)
        return set_error("sdr_oob_recv: message of " + std::to_string(m) + " B does not fit the " +
                         std::to_string(cap) + " B buffer (kept)");
    if (m) std::memcpy(buf, oob->in.data() + kLengthBytes, m);
    oob->in.erase(oob->in.begin(), oob->in.begin() + static_cast<long>(kLengthBytes + m));
    *len = m;
    return SDR_SUCCESS;
}

int sdr_oob_exchange(sdr_oob* oob, const void* mine, size_t mine_len, void* theirs, size_t cap, size_t* their_len,
                     int timeout_ms)
{
    if (int rc = sdr_oob_send(oob, mine, mine_len); rc != SDR_SUCCESS) return rc;
    int rc = sdr_oob_recv(oob, theirs, cap, their_len, timeout_ms);
    if (rc == SDR_RETRY)
        return set_error("sdr_oob_exchange: " + oob->peer + " sent nothing within " + std::to_string(timeout_ms) + " ms");
    return rc;
}

int sdr_oob_fd(sdr_oob* oob) { return oob ? oob->fd : -1; }

void sdr_oob_close(sdr_oob* oob) { delete oob; }

}  // extern "C"
