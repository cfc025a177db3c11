// Packet ports between two network namespaces joined by a veth pair (tools/sdr-netns), one
// port per side, both driven from the test thread (each is opened inside its namespace and
// stays there). The AF_XDP port: byte-exact frames in single-buffer (MTU 3000) and multi-buffer
// (MTU 4200) mode, in native and generic XDP; its XDP program redirects only RoCEv2 to our
// address and leaves everything else (ARP, ping, other UDP, RoCE for other addresses) to the
// kernel; hostile bytes are delivered as they are. Also: AF_PACKET ↔ AF_XDP, and a short blast
// that prints packets/s. Everything waits by polling with a deadline, never by sleeping.
#include "netns_util.hpp"

#include <sdr/emu/port.hpp>
#include <sdr/emu/wire.hpp>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace sdr::emu;
using sdr::test::InNetns;
using sdr::test::Testbed;
using Frame = std::vector<uint8_t>;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kRingFrames = 1024;  // per ring: 8 MiB of UMEM per port
constexpr size_t kWindow = 512;         // frames in flight, well inside the receiver's RX ring

PortOptions options(const std::string& xdp_mode)
{
    PortOptions opt;
    opt.ring_frames = kRingFrames;
    opt.rx_ring_frames = kRingFrames;
    opt.xdp_mode = xdp_mode;
    return opt;
}

// Opens a port of `kind` ("xdp" or "raw") on side `side` of the testbed, from inside its
// namespace; nullptr and *err if it cannot.
std::unique_ptr<Port> open_on(const Testbed& tb, int side, const std::string& kind, const PortOptions& opt,
                              std::string* err)
{
    InNetns in(tb.ns(side));
    if (!in.ok()) {
        *err = "cannot enter namespace " + tb.ns(side);
        return nullptr;
    }
    return open_port(kind, tb.ns(side), opt, err);
}

// Runs `fn` inside namespace `ns` (for kernel sockets and commands of one side).
template <class Fn>
auto in_ns(const std::string& ns, Fn&& fn)
{
    InNetns in(ns);
    EXPECT_TRUE(in.ok()) << ns;
    return fn();
}

// A RoCEv2 UC WRITE-with-immediate frame of exactly `len` bytes (≥ 78) from `from` to `to`,
// whose PSN and payload derive from `seq`.
Frame roce_frame(const PortInfo& from, const PortInfo& to, uint32_t seq, size_t len)
{
    wire::Headers h;
    h.dst_mac = to.addr.mac;
    h.src_mac = from.addr.mac;
    h.src_ip = from.addr.ip;
    h.dst_ip = to.addr.ip;
    h.dest_qp = 0x11;
    h.psn = seq & 0xffffff;
    h.imm = seq;
    size_t payload_len = len - wire::frame_bytes_write_imm(0);
    h.dma_len = static_cast<uint32_t>(payload_len);
    Frame payload(payload_len);
    for (size_t i = 0; i < payload_len; i++) payload[i] = static_cast<uint8_t>(seq * 131 + i * 7);
    Frame f(len);
    size_t n = wire::encode(h, payload.data(), static_cast<uint32_t>(payload_len), f.data(), f.size());
    EXPECT_EQ(n, len);
    return f;
}

// Ethernet + IPv4 (no options) + UDP by hand, for frames wire::encode would not make: any
// destination address and port, any payload. Checksums are left 0: nothing checks them.
Frame udp_frame(const PortInfo& from, const std::array<uint8_t, 6>& dst_mac, uint32_t dst_ip, uint16_t dst_port,
                const std::string& payload)
{
    Frame f(42 + payload.size());
    std::memcpy(&f[0], dst_mac.data(), 6);
    std::memcpy(&f[6], from.addr.mac.data(), 6);
    f[12] = 0x08, f[13] = 0x00;
    uint8_t* ip = &f[14];
    ip[0] = 0x45;
    uint16_t total = htons(static_cast<uint16_t>(20 + 8 + payload.size()));
    std::memcpy(&ip[2], &total, 2);
    ip[6] = 0x40;  // DF
    ip[8] = 64, ip[9] = IPPROTO_UDP;
    uint32_t src = htonl(from.addr.ip), dst = htonl(dst_ip);
    std::memcpy(&ip[12], &src, 4);
    std::memcpy(&ip[16], &dst, 4);
    uint8_t* udp = &f[34];
    uint16_t sport = htons(0xC000), dport = htons(dst_port), ulen = htons(static_cast<uint16_t>(8 + payload.size()));
    std::memcpy(&udp[0], &sport, 2);
    std::memcpy(&udp[2], &dport, 2);
    std::memcpy(&udp[4], &ulen, 2);
    std::memcpy(&f[42], payload.data(), payload.size());
    return f;
}

bool send_frame(Port& p, const Frame& f)
{
    uint8_t* buf = p.tx_alloc();
    if (!buf) return false;
    std::memcpy(buf, f.data(), f.size());
    p.tx_commit(f.size());
    return true;
}

// Sends `frames` from tx to rx with at most kWindow in flight, receiving as it goes, until rx
// has as many frames as were sent or `limit` passes. Returns what rx got, in order.
std::vector<Frame> transfer(Port& tx, Port& rx, const std::vector<Frame>& frames,
                            Clock::duration limit = std::chrono::seconds(5))
{
    std::vector<Frame> got;
    size_t sent = 0;
    auto deadline = Clock::now() + limit;
    while (got.size() < frames.size() && Clock::now() < deadline) {
        for (int batch = 0; batch < 64 && sent < frames.size() && sent - got.size() < kWindow; batch++)
            if (send_frame(tx, frames[sent])) sent++;
        tx.tx_flush();
        rx.rx_burst(256, [&](const uint8_t* d, size_t n) { got.emplace_back(d, d + n); });
    }
    return got;
}

// Index of the first frame that differs from what was sent, or -1 if all match.
long first_mismatch(const std::vector<Frame>& sent, const std::vector<Frame>& got)
{
    for (size_t i = 0; i < sent.size(); i++)
        if (i >= got.size() || got[i] != sent[i]) return static_cast<long>(i);
    return got.size() == sent.size() ? -1 : static_cast<long>(sent.size());
}

// Sends `ab` from a to b, then `ba` back; each side must receive exactly what was sent, in order.
void both_ways_byte_exact(Port& a, Port& b, const std::vector<Frame>& ab, const std::vector<Frame>& ba)
{
    auto t0 = Clock::now();
    auto got = transfer(a, b, ab);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_EQ(got.size(), ab.size());
    EXPECT_EQ(first_mismatch(ab, got), -1);
    std::printf("[ info     ] %zu frames A->B in %.1f ms\n", ab.size(), s * 1e3);
    got = transfer(b, a, ba);
    EXPECT_EQ(got.size(), ba.size());
    EXPECT_EQ(first_mismatch(ba, got), -1);
}

// The port's counters with what the kernel counted so far (the polling thread's periodic read).
PortStats stats_of(Port& p)
{
    p.read_kernel_stats();
    return p.stats();
}

// Polls `rx` until `done()` or `limit`; frames it receives go to `seen` (if given) and are
// counted in `*count` (if given).
bool poll_until(Port& rx, std::vector<Frame>* seen, const std::function<bool()>& done,
                Clock::duration limit = std::chrono::seconds(3), uint64_t* count = nullptr)
{
    auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
        rx.rx_burst(64, [&](const uint8_t* d, size_t n) {
            if (seen) seen->emplace_back(d, d + n);
            if (count) ++*count;
        });
        if (done()) return true;
    }
    return false;
}

// One ICMP echo request from the current namespace to dst_ip and its reply (a raw socket:
// `ping` may not be installed), within a second.
bool icmp_echo(uint32_t dst_ip)
{
    int s = socket(AF_INET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_ICMP);
    if (s < 0) return false;
    uint8_t req[16] = {8, 0, 0, 0, 0x5d, 0x12, 0, 1, 's', 'd', 'r', '-', 'p', 'i', 'n', 'g'};  // echo, id 0x5d12
    uint32_t sum = 0;
    for (size_t i = 0; i < sizeof req; i += 2) sum += uint32_t{req[i]} << 8 | req[i + 1];
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    req[2] = static_cast<uint8_t>(~sum >> 8), req[3] = static_cast<uint8_t>(~sum);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(dst_ip);
    bool ok = false;
    if (sendto(s, req, sizeof req, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) == sizeof req) {
        auto deadline = Clock::now() + std::chrono::seconds(1);
        uint8_t buf[256];
        while (!ok && Clock::now() < deadline) {
            ssize_t n = recv(s, buf, sizeof buf, 0);  // IP header (20 B) + ICMP
            ok = n >= 28 && buf[20] == 0 && buf[24] == 0x5d && buf[25] == 0x12;
        }
    }
    close(s);
    return ok;
}

// A descriptor closed at scope exit (an ASSERT may leave the test early).
struct Sock {
    int fd;
    explicit Sock(int f) : fd(f) {}
    Sock(const Sock&) = delete;
    Sock& operator=(const Sock&) = delete;
    ~Sock()
    {
        if (fd >= 0) close(fd);
    }
};

bool contains(const Frame& f, const std::string& s)
{
    return std::search(f.begin(), f.end(), s.begin(), s.end()) != f.end();
}

// A testbed with an AF_XDP port on each side.
struct XdpPair {
    Testbed tb;
    std::unique_ptr<Port> port[2];
    std::string why;  // empty if both ports opened
    XdpPair(const std::string& prefix, unsigned mtu, const std::string& mode) : tb(prefix, mtu)
    {
        if (!tb.ok()) {
            why = "tools/sdr-netns up failed";
            return;
        }
        for (int side = 0; side < 2 && why.empty(); side++) port[side] = open_on(tb, side, "xdp", options(mode), &why);
    }
};

// The XDP attach mode a parameterized test runs in, and a short tag for its testbed prefix.
std::string tag(const std::string& mode) { return mode == "native" ? "n" : "g"; }

// Multi-buffer AF_XDP (XDP_USE_SG) on veth came with Linux 6.6: from there on the port must open
// at MTU 4200, and a refusal is a failure. *release: the running kernel's, for messages.
bool kernel_has_xdp_multi_buffer(std::string* release)
{
    utsname u{};
    if (uname(&u) != 0) return false;
    *release = u.release;
    unsigned major = 0, minor = 0;
    if (std::sscanf(u.release, "%u.%u", &major, &minor) != 2) return false;
    return major > 6 || (major == 6 && minor >= 6);
}

class XdpPortTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override
    {
        std::string why = sdr::test::netns_unavailable();
        if (!why.empty()) GTEST_SKIP() << why;
    }
    const std::string& mode() const { return GetParam(); }
};

// ---------------------------------------------------------------------------------------------

// 2000 frames A→B of every size up to the largest (MTU 3000 + 14), then 200 back; one RX
// descriptor per frame. The port reports what it got.
TEST_P(XdpPortTest, SingleBufferFramesArriveByteExact)
{
    XdpPair p("sdrxs" + tag(mode()), 3000, mode());
    ASSERT_TRUE(p.why.empty()) << p.why;
    Port &a = *p.port[0], &b = *p.port[1];
    EXPECT_EQ(a.info().kind, "xdp");
    EXPECT_EQ(a.info().mtu, 3000u);
    EXPECT_EQ(a.info().max_frame, 3014u);
    EXPECT_EQ(b.info().addr.ip, 0x0a4d0002u);
    EXPECT_EQ(a.info().mode, "AF_XDP " + mode() + " copy") << "veth has no zero-copy";
    std::printf("[ info     ] %s\n", a.info().mode.c_str());

    std::vector<Frame> ab, ba;
    uint32_t span = a.info().max_frame - 78 + 1;
    for (uint32_t i = 0; i < 2000; i++) ab.push_back(roce_frame(a.info(), b.info(), i, i % 3 ? 78 + (i * 97) % span : 3014));
    for (uint32_t i = 0; i < 200; i++) ba.push_back(roce_frame(b.info(), a.info(), i, 78 + (i * 389) % span));
    both_ways_byte_exact(a, b, ab, ba);

    PortStats sa = stats_of(a), sb = stats_of(b);
    EXPECT_EQ(sa.tx_frames, 2000u);
    EXPECT_EQ(sb.rx_frames, 2000u);
    EXPECT_EQ(sb.tx_frames, 200u);
    EXPECT_EQ(sa.rx_frames, 200u);
    uint64_t bytes = 0;
    for (const Frame& f : ab) bytes += f.size();
    EXPECT_EQ(sa.tx_bytes, bytes);
    EXPECT_EQ(sb.rx_bytes, bytes);
    EXPECT_EQ(sb.rx_dropped_kernel, 0u);
    EXPECT_EQ(sa.tx_errors + sb.tx_errors, 0u);
}

// MTU 4200: 4174 B RoCE frames (4 KiB payload) and the largest 4214 B ones span two UMEM
// frames each way (XDP_USE_SG). Where the kernel cannot (before 6.6), the port must refuse
// clearly; from 6.6 on a refusal fails the test.
TEST_P(XdpPortTest, MultiBufferFramesArriveByteExact)
{
    XdpPair p("sdrxm" + tag(mode()), 4200, mode());
    std::string release;
    if (kernel_has_xdp_multi_buffer(&release)) {
        ASSERT_TRUE(p.why.empty()) << "Linux " << release << " has multi-buffer AF_XDP, yet: " << p.why;
    }
    if (!p.port[0] && p.tb.ok()) {
        // The refusal is the behaviour under test: it names the MTU and the way out.
        EXPECT_NE(p.why.find("MTU 4200"), std::string::npos) << p.why;
        EXPECT_NE(p.why.find("raw:"), std::string::npos) << p.why;
        std::printf("[ info     ] refused: %s\n", p.why.c_str());
        return;
    }
    ASSERT_TRUE(p.why.empty()) << p.why;
    Port &a = *p.port[0], &b = *p.port[1];
    EXPECT_EQ(a.info().max_frame, 4214u);
    EXPECT_EQ(a.info().mode, "AF_XDP " + mode() + " copy, multi-buffer");
    std::printf("[ info     ] %s\n", a.info().mode.c_str());

    std::vector<Frame> ab, ba;
    for (uint32_t i = 0; i < 2000; i++) {
        size_t len = i % 10 == 9 ? 4214 : i % 10 == 8 ? 78 + (i * 97) % 4000 : 4174;
        ab.push_back(roce_frame(a.info(), b.info(), i, len));
    }
    for (uint32_t i = 0; i < 200; i++) ba.push_back(roce_frame(b.info(), a.info(), i, i % 2 ? 4174 : 4096));
    both_ways_byte_exact(a, b, ab, ba);
    EXPECT_EQ(stats_of(b).rx_dropped_kernel, 0u);
    EXPECT_EQ(stats_of(a).tx_errors, 0u);
}

// While B's port is open, B's kernel still gets everything that is not RoCE for B: ARP and
// ping work, UDP to another port reaches a kernel socket; RoCE for another address is passed
// (an AF_PACKET socket in B sees it) and never redirected; UDP 4791 to B goes to the port, not
// to a kernel socket on 4791. Ordering on the single veth queue makes the negative checks
// exact: when a later datagram has arrived, the earlier ones were decided.
TEST_P(XdpPortTest, FilterRedirectsOnlyRoceForUs)
{
    XdpPair p("sdrxf" + tag(mode()), 1500, mode());
    ASSERT_TRUE(p.why.empty()) << p.why;
    Port &a = *p.port[0], &b = *p.port[1];
    std::string na = p.tb.ns(0), nb = p.tb.ns(1);

    auto udp_socket = [](uint16_t port) {
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(port);
        EXPECT_EQ(bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << std::strerror(errno);
        return s;
    };
    Sock k5000{in_ns(nb, [&] { return udp_socket(5000); })};
    Sock k4791{in_ns(nb, [&] { return udp_socket(4791); })};
    Sock sender{in_ns(na, [&] { return udp_socket(0); })};
    Sock sniffer{in_ns(nb, [&] {
        int s = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
        sockaddr_ll sll{};
        sll.sll_family = AF_PACKET;
        sll.sll_protocol = htons(ETH_P_ALL);
        sll.sll_ifindex = static_cast<int>(if_nametoindex(nb.c_str()));
        EXPECT_EQ(bind(s, reinterpret_cast<sockaddr*>(&sll), sizeof sll), 0) << std::strerror(errno);
        return s;
    })};
    auto send_udp = [&](uint16_t port, const std::string& text) {
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(port);
        to.sin_addr.s_addr = htonl(b.info().addr.ip);
        EXPECT_EQ(sendto(sender.fd, text.data(), text.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
                  static_cast<ssize_t>(text.size()))
            << "sending " << text << ": " << std::strerror(errno);
    };
    std::vector<std::string> kernel_got, sniffed;
    auto drain = [&](int s, std::vector<std::string>* out) {
        char buf[2048];
        for (ssize_t n; (n = recv(s, buf, sizeof buf, MSG_DONTWAIT)) > 0;) out->emplace_back(buf, static_cast<size_t>(n));
    };
    auto sniffed_has = [&](const std::string& s) {
        for (const auto& f : sniffed)
            if (f.find(s) != std::string::npos) return true;
        return false;
    };
    std::vector<Frame> port_got;
    auto kernel_has = [&](const std::string& text) {
        return [&, text] {
            drain(k5000.fd, &kernel_got);
            drain(sniffer.fd, &sniffed);
            for (const auto& g : kernel_got)
                if (g == text) return true;
            return false;
        };
    };
    auto port_has = [&](const std::string& text) {
        return [&, text] {
            for (const auto& f : port_got)
                if (contains(f, text)) return true;
            return false;
        };
    };

    // ARP (the first datagram needs it) and ordinary UDP reach B's kernel, not the port.
    send_udp(5000, "plain-5000");
    EXPECT_TRUE(poll_until(b, &port_got, kernel_has("plain-5000"))) << "UDP to port 5000 did not reach B's kernel";
    EXPECT_TRUE(in_ns(na, [&] { return icmp_echo(b.info().addr.ip); })) << "ping A->B failed while B's port was open";

    // UDP 4791 to B from A's kernel: the port gets the frame.
    send_udp(4791, "kernel-roce");
    EXPECT_TRUE(poll_until(b, &port_got, port_has("kernel-roce"))) << "the port did not get UDP 4791 from A's kernel";

    // RoCE to another address (with B's MAC), then to B: only the second is the port's.
    ASSERT_TRUE(send_frame(a, udp_frame(a.info(), b.info().addr.mac, 0x0a4d0003, 4791, "other-ip")));
    ASSERT_TRUE(send_frame(a, udp_frame(a.info(), b.info().addr.mac, b.info().addr.ip, 4791, "marker-y")));
    a.tx_flush();
    EXPECT_TRUE(poll_until(b, &port_got, port_has("marker-y")));

    // A last ordinary datagram: once B's kernel has it, everything above has been decided.
    send_udp(5000, "plain-end");
    EXPECT_TRUE(poll_until(b, &port_got, kernel_has("plain-end")));
    ASSERT_EQ(port_got.size(), 2u) << "the port must see exactly the two frames for UDP 4791 at B's address";
    EXPECT_TRUE(contains(port_got[0], "kernel-roce"));
    EXPECT_TRUE(contains(port_got[1], "marker-y"));
    EXPECT_TRUE(sniffed_has("other-ip")) << "RoCE for another address must be passed to the kernel";
    EXPECT_TRUE(sniffed_has("plain-5000"));
    EXPECT_FALSE(sniffed_has("marker-y")) << "a redirected frame must not reach the kernel";
    EXPECT_FALSE(sniffed_has("kernel-roce"));
    char buf[64];
    EXPECT_LT(recv(k4791.fd, buf, sizeof buf, MSG_DONTWAIT), 0) << "UDP 4791 for B must not reach B's kernel socket";
}

// Hostile bytes: frames that pass the filter's test (IPv4, no options, not a fragment, UDP,
// B's address, port 4791) but are garbage everywhere else arrive exactly as sent, in order; runts
// and near misses (IP options, fragments, TCP, other EtherTypes) never reach the port.
TEST_P(XdpPortTest, GarbageIsDeliveredAsBytes)
{
    XdpPair p("sdrxg" + tag(mode()), 1500, mode());
    ASSERT_TRUE(p.why.empty()) << p.why;
    Port &a = *p.port[0], &b = *p.port[1];
    std::mt19937 rng(7);
    auto random_frame = [&](size_t len) {
        Frame f(len);
        for (auto& x : f) x = static_cast<uint8_t>(rng());
        return f;
    };
    // Makes f pass the filter (it must be ≥ 42 bytes), leaving every other byte as it is.
    auto make_roce_for_b = [&](Frame f) {
        std::memcpy(&f[0], b.info().addr.mac.data(), 6);
        f[12] = 0x08, f[13] = 0x00, f[14] = 0x45, f[20] &= 0xc0, f[21] = 0, f[23] = IPPROTO_UDP;
        uint32_t ip = htonl(b.info().addr.ip);
        std::memcpy(&f[30], &ip, 4);
        f[36] = 4791 >> 8, f[37] = 4791 & 0xff;
        return f;
    };
    std::vector<Frame> expected, all;
    for (int i = 0; i < 300; i++) {
        Frame good = make_roce_for_b(random_frame(42 + rng() % (b.info().max_frame - 41)));
        expected.push_back(good);
        all.push_back(good);
        Frame near = good;
        switch (i % 6) {
        case 0: near = random_frame(14 + rng() % 28); near[12] = 0x08, near[13] = 0; break;  // runt: no room for the headers
        case 1: near[14] = 0x46; break;                                                        // IP options
        case 2: near[20] |= 0x20; break;                                                       // more fragments
        case 3: near[21] = 1; break;                                                           // fragment offset
        case 4: near[23] = IPPROTO_TCP; break;
        case 5: near = random_frame(60 + rng() % 1000); near[12] = 0x88, near[13] = 0xb5; break;  // another EtherType
        }
        all.push_back(near);
    }
    Frame marker = roce_frame(a.info(), b.info(), 99, 200);
    all.push_back(marker);
    expected.push_back(marker);

    std::vector<Frame> got;
    size_t sent = 0;
    auto deadline = Clock::now() + std::chrono::seconds(5);
    while ((got.empty() || got.back() != marker) && Clock::now() < deadline) {
        for (int batch = 0; batch < 64 && sent < all.size(); batch++)
            if (send_frame(a, all[sent])) sent++;
        a.tx_flush();
        b.rx_burst(64, [&](const uint8_t* d, size_t n) { got.emplace_back(d, d + n); });
    }
    EXPECT_EQ(got.size(), expected.size());
    EXPECT_EQ(first_mismatch(expected, got), -1);
}

// A windowed blast A→B for a short while, every frame checked; prints packets/s. One thread
// drives both ports, so the rate is the cost of sending and receiving together on one core.
void blast(Port& a, Port& b, size_t size)
{
    std::vector<Frame> pool;
    for (uint32_t i = 0; i < 64; i++) pool.push_back(roce_frame(a.info(), b.info(), i, size));
    uint64_t sent = 0, got = 0, bad = 0;
    auto t0 = Clock::now(), end = t0 + std::chrono::milliseconds(300);
    while (Clock::now() < end) {
        for (int batch = 0; batch < 64 && sent - got < kWindow; batch++) {
            if (!send_frame(a, pool[sent % 64])) break;
            sent++;
        }
        a.tx_flush();
        b.rx_burst(256, [&](const uint8_t* d, size_t n) {
            const Frame& f = pool[got++ % 64];
            bad += n != f.size() || std::memcmp(d, f.data(), n) != 0;
        });
    }
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("[ info     ] %s, %zu B frames: %.0f k packets/s (%.2f Gbit/s)\n", a.info().mode.c_str(), size,
                got / s / 1e3, got * size * 8 / s / 1e9);
    EXPECT_GT(got, 1000u);
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(stats_of(b).rx_dropped_kernel, 0u);
    // Let the last frames in flight arrive before the next run starts counting.
    auto deadline = Clock::now() + std::chrono::seconds(1);
    while (got < sent && Clock::now() < deadline) b.rx_burst(256, [&](const uint8_t*, size_t) { got++; });
}

TEST_P(XdpPortTest, BlastRate)
{
    XdpPair p("sdrxb" + tag(mode()), 4200, mode());
    std::string release;
    if (!kernel_has_xdp_multi_buffer(&release) && !p.port[0] && p.tb.ok())
        GTEST_SKIP() << "no multi-buffer before Linux 6.6 (this is " << release << "): " << p.why;
    ASSERT_TRUE(p.why.empty()) << p.why;
    blast(*p.port[0], *p.port[1], 1100);
    blast(*p.port[0], *p.port[1], 4174);
}

INSTANTIATE_TEST_SUITE_P(Modes, XdpPortTest, ::testing::Values("native", "generic"),
                         [](const auto& info) { return info.param; });

// "auto" takes native where the driver allows it (veth does) and reports it.
TEST(XdpPort, AutoModePicksNative)
{
    if (auto why = sdr::test::netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb("sdrxa", 3000);
    ASSERT_TRUE(tb.ok());
    std::string err;
    auto port = open_on(tb, 0, "xdp", options("auto"), &err);
    ASSERT_TRUE(port) << err;
    EXPECT_EQ(port->info().mode, "AF_XDP native copy");
    EXPECT_GE(port->fd(), 0);
}

// Failures come back as messages, not crashes: a missing interface, bad options.
TEST(XdpPort, RefusesWithReasons)
{
    std::string err;
    PortOptions opt;
    EXPECT_FALSE(open_xdp_port("sdr-no-such-if", opt, &err));
    EXPECT_NE(err.find("xdp:sdr-no-such-if"), std::string::npos) << err;
    EXPECT_NE(err.find("no such interface"), std::string::npos) << err;
    if (auto why = sdr::test::netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb("sdrxe", 1500);
    ASSERT_TRUE(tb.ok());
    opt = options("auto");
    opt.ring_frames = 1000;
    EXPECT_FALSE(open_on(tb, 0, "xdp", opt, &err));
    EXPECT_NE(err.find("power of two"), std::string::npos) << err;
    EXPECT_FALSE(open_on(tb, 0, "xdp", options("turbo"), &err));
    EXPECT_NE(err.find("expected auto, native or generic"), std::string::npos) << err;
    // A queue veth does not have.
    opt = options("auto");
    opt.queue = 5;
    EXPECT_FALSE(open_on(tb, 0, "xdp", opt, &err));
    EXPECT_NE(err.find("queue 5"), std::string::npos) << err;
    // After all that, a port still opens (nothing was left attached).
    auto port = open_on(tb, 0, "xdp", options("auto"), &err);
    EXPECT_TRUE(port) << err;
}

// A second port on the same interface is refused (one XDP program per interface); closing a
// port detaches its program and frees the queue, so a new one opens right away (the kernel
// tears the old socket down lazily: the port retries EBUSY briefly).
TEST(XdpPort, OnePortPerInterfaceAndReopen)
{
    if (auto why = sdr::test::netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb("sdrxo", 1500);
    ASSERT_TRUE(tb.ok());
    std::string err;
    auto first = open_on(tb, 0, "xdp", options("auto"), &err);
    ASSERT_TRUE(first) << err;
    EXPECT_FALSE(open_on(tb, 0, "xdp", options("auto"), &err));
    EXPECT_NE(err.find("another XDP program is attached"), std::string::npos) << err;
    for (int i = 0; i < 3; i++) {
        first.reset();
        first = open_on(tb, 0, "xdp", options(i % 2 ? "generic" : "native"), &err);
        ASSERT_TRUE(first) << "reopen " << i << ": " << err;
    }
}

// A receiver that does not poll: its RX ring fills and the kernel drops the rest, which the
// port reports, by cause; every frame is either received or counted.
void kernel_drops_are_counted(Port& a, Port& b, uint64_t PortStats::*cause)
{
    Frame f = roce_frame(a.info(), b.info(), 1, 300);
    uint32_t sent = 0;
    auto deadline = Clock::now() + std::chrono::seconds(3);
    while (sent < 3 * kRingFrames * 8 && Clock::now() < deadline) {
        if (send_frame(a, f)) sent++;
        if (sent % 64 == 0) a.tx_flush();
    }
    a.tx_flush();
    sent = static_cast<uint32_t>(stats_of(a).tx_frames);  // what the kernel took (AF_PACKET may keep a batch)
    uint64_t got = 0;
    ASSERT_TRUE(poll_until(b, nullptr, [&] { return got + stats_of(b).rx_dropped_kernel == sent; }, std::chrono::seconds(2),
                           &got))
        << "received " << got << " + dropped " << stats_of(b).rx_dropped_kernel << " != sent " << sent;
    PortStats s = stats_of(b);
    std::printf("[ info     ] sent %u, received %llu, dropped %llu (by this cause %llu)\n", sent,
                (unsigned long long)got, (unsigned long long)s.rx_dropped_kernel, (unsigned long long)(s.*cause));
    EXPECT_EQ(s.rx_frames, got);
    EXPECT_GT(s.*cause, 0u);
    EXPECT_GT(s.rx_dropped_kernel, 0u);
}

TEST(XdpPort, KernelDropsAreCounted)
{
    if (auto why = sdr::test::netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    XdpPair p("sdrxd", 1500, "generic");
    ASSERT_TRUE(p.why.empty()) << p.why;
    // RX ring and fill ring hold one entry per RX frame: a receiver that stops polling leaves
    // the fill ring empty (rx_dropped), never the RX ring full.
    kernel_drops_are_counted(*p.port[0], *p.port[1], &PortStats::rx_xdp_dropped);
    EXPECT_GT(stats_of(*p.port[1]).rx_xdp_fill_ring_empty, 0u);
    EXPECT_EQ(stats_of(*p.port[1]).rx_kernel_ring_full, 0u);
}

TEST(PacketPort, KernelDropsAreCounted)
{
    if (auto why = sdr::test::netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb("sdrpd", 1500);
    ASSERT_TRUE(tb.ok());
    std::string err;
    auto a = open_on(tb, 0, "raw", options("auto"), &err);
    ASSERT_TRUE(a) << err;
    auto b = open_on(tb, 1, "raw", options("auto"), &err);
    ASSERT_TRUE(b) << err;
    kernel_drops_are_counted(*a, *b, &PortStats::rx_kernel_ring_full);
    EXPECT_GT(stats_of(*b).rx_kernel_ring_freezes, 0u);
    EXPECT_EQ(stats_of(*b).rx_xdp_dropped, 0u);
}

// AF_PACKET (raw:) on one side, AF_XDP on the other: both ways, byte-exact.
TEST(XdpPort, InteroperatesWithPacketPort)
{
    if (auto why = sdr::test::netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb("sdrxr", 3000);
    ASSERT_TRUE(tb.ok());
    std::string err;
    auto raw = open_on(tb, 0, "raw", options("auto"), &err);
    ASSERT_TRUE(raw) << "the AF_PACKET port does not open: " << err;
    auto xdp = open_on(tb, 1, "xdp", options("auto"), &err);
    ASSERT_TRUE(xdp) << err;
    size_t max = std::min(raw->info().max_frame, xdp->info().max_frame);
    std::vector<Frame> to_xdp, to_raw;
    for (uint32_t i = 0; i < 500; i++) {
        to_xdp.push_back(roce_frame(raw->info(), xdp->info(), i, 78 + (i * 211) % (max - 77)));
        to_raw.push_back(roce_frame(xdp->info(), raw->info(), i, 78 + (i * 307) % (max - 77)));
    }
    EXPECT_EQ(first_mismatch(to_xdp, transfer(*raw, *xdp, to_xdp)), -1);
    EXPECT_EQ(first_mismatch(to_raw, transfer(*xdp, *raw, to_raw)), -1);
}

}  // namespace
