// The NeVerMore attack (arXiv 2202.08080) on our NIC: a third host on the same Ethernet
// segment, off the path of the transfer (a Linux bridge sends it no unicast frame of ours),
// sends as fast as it can, for the whole of a `sdr_write_bw --verify` run over raw:, valid
// RoCEv2 frames with every QPN, key and address it can guess: QPNs and keys counted through
// the whole space our allocator draws from (and the sequential ones it used to hand out),
// random ones, frames replayed from a capture of an earlier connection between the same two
// hosts, and control datagrams; each from its own addresses and with the real sender's MAC
// and IP spoofed and its UDP source port guessed. Offsets always lie inside the posted
// buffers. The receiver must complete every chunk byte-exact, place exactly the sender's bytes
// and raise exactly the sender's CQEs, take no control datagram, and count the attacker's
// frames as drops by reason.
#include "write_bw_util.hpp"

#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <sdr/emu/ids.hpp>
#include <sdr/emu/impairment.hpp>
#include <sdr/emu/wire.hpp>

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

using namespace sdr;
using namespace sdr::test;
namespace wire = sdr::emu::wire;

namespace {

struct Host {
    std::array<uint8_t, 6> mac{};
    uint32_t ip = 0;  // host order
};

// The MAC of the interface named like its namespace, read from inside that namespace.
bool host_of(const Testbed& tb, int side, Host* h)
{
    InNetns in(tb.ns(side));
    if (!in.ok()) return false;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq r{};
    std::strncpy(r.ifr_name, tb.ns(side).c_str(), IFNAMSIZ - 1);
    bool ok = fd >= 0 && ioctl(fd, SIOCGIFHWADDR, &r) == 0;
    if (ok) std::memcpy(h->mac.data(), r.ifr_hwaddr.sa_data, 6);
    if (fd >= 0) close(fd);
    h->ip = ntohl(inet_addr(Testbed::ip(side).c_str()));
    return ok;
}

// The data frames of a capture (whole frames only).
std::vector<std::vector<uint8_t>> data_frames(const std::string& pcap)
{
    std::vector<std::vector<uint8_t>> out;
    char errbuf[PCAP_ERRBUF_SIZE];
    pcap_t* pc = pcap_open_offline(pcap.c_str(), errbuf);
    if (!pc) return out;
    pcap_pkthdr* h;
    const u_char* f;
    while (pcap_next_ex(pc, &h, &f) == 1) {
        wire::Parsed p;
        if (h->caplen == h->len && wire::decode(f, h->caplen, &p) == wire::Verdict::Ok &&
            p.h.opcode == wire::kOpUcWriteOnlyImm)
            out.emplace_back(f, f + h->caplen);
    }
    pcap_close(pc);
    return out;
}

// What the attacker tries, one frame of each in turn.
enum Kind : uint32_t {
    kSweepOwn,      // every QPN of the first 16 transport QPs (all 1023 tags), from its own addresses
    kSweepSpoofed,  // the same, as the sender: its MAC and IP, UDP source ports counted through
    kRandomOwn,     // random QPN, root key, port
    kRandomSpoofed,
    kOldScheme,     // QPN 0x100 + i, key ((i+1) << 8) | 0x40: what the NIC handed out before
    kReplay,        // frames of an earlier connection between the same hosts, verbatim or re-aimed
    kCtrlSweep,     // control datagrams: every control QPN of the first 4 QPs, guessed Q_Keys
    kCtrlRandom,
    kKinds
};
const char* const kKindNames[kKinds] = {"sweep_own", "sweep_spoofed", "random_own", "random_spoofed",
                                        "old_scheme", "replay", "ctrl_sweep", "ctrl_random"};

struct AttackStats {
    uint64_t sent[kKinds] = {};
    uint64_t total = 0, send_errors = 0;
    double seconds = 0;
    std::string error;
};

class Attacker {
public:
    Attacker(Host self, Host victim, Host sender, std::vector<std::vector<uint8_t>> replay, uint64_t space)
        : self_(self), victim_(victim), sender_(sender), replay_(std::move(replay)), space_(space)
    {
    }

    // Send until `stop`, from inside namespace `ns` (interface of the same name).
    void run(const std::string& ns, std::atomic<bool>& ready, std::atomic<bool>& stop, AttackStats* st)
    {
        InNetns in(ns);
        int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
        sockaddr_ll a{};
        a.sll_family = AF_PACKET;
        a.sll_protocol = htons(ETH_P_ALL);
        a.sll_ifindex = static_cast<int>(if_nametoindex(ns.c_str()));
        int one = 1;
        if (!in.ok() || fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) ||
            setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one)) {
            st->error = std::string("attacker socket in ") + ns + ": " + std::strerror(errno);
            if (fd >= 0) close(fd);
            ready = true;
            return;
        }
        constexpr unsigned kBatch = 64, kCap = 256;
        std::vector<uint8_t> buf(kBatch * kCap);
        mmsghdr msgs[kBatch];
        iovec iov[kBatch];
        uint32_t kinds[kBatch];
        ready = true;
        auto t0 = std::chrono::steady_clock::now();
        while (!stop.load(std::memory_order_relaxed)) {
            for (unsigned i = 0; i < kBatch; i++) {
                kinds[i] = static_cast<uint32_t>(n_ % kKinds);
                iov[i] = {buf.data() + i * kCap, build(kinds[i], buf.data() + i * kCap, kCap)};
                msgs[i] = mmsghdr{};
                msgs[i].msg_hdr.msg_iov = &iov[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
                n_++;
            }
            int sent = sendmmsg(fd, msgs, kBatch, 0);
            if (sent < 0) {
                st->send_errors++;
                continue;
            }
            for (int i = 0; i < sent; i++) st->sent[kinds[i]]++;
            st->total += static_cast<uint64_t>(sent);
        }
        st->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        close(fd);
    }

private:
    wire::Headers base(bool spoofed)
    {
        wire::Headers h;
        const Host& from = spoofed ? sender_ : self_;
        h.src_mac = from.mac;
        h.src_ip = from.ip;
        h.dst_mac = victim_.mac;
        h.dst_ip = victim_.ip;
        h.psn = static_cast<uint32_t>(n_) & 0xFFFFFF;
        h.imm = static_cast<uint32_t>(rng_.next());
        h.va = rng_.next() % space_ & ~uint64_t{63};  // inside the posted buffers
        return h;
    }
    size_t data(const wire::Headers& h, uint8_t* out, size_t cap)
    {
        static const std::vector<uint8_t> payload(64, 0xEE);  // what a landed frame would leave
        wire::Headers d = h;
        d.opcode = wire::kOpUcWriteOnlyImm;
        d.dma_len = static_cast<uint32_t>(payload.size());
        return wire::encode(d, payload.data(), d.dma_len, out, cap);
    }
    size_t datagram(wire::Headers h, uint8_t* out, size_t cap)
    {
        static const std::vector<uint8_t> payload(32, 0xEE);
        h.opcode = wire::kOpUdSendOnly;
        return wire::encode(h, payload.data(), static_cast<uint32_t>(payload.size()), out, cap);
    }
    // The n-th guess of a counted sweep: index i < `indices` and tag t, every tag in turn.
    static uint32_t sweep_qpn(uint64_t n, uint32_t indices, uint32_t high)
    {
        uint32_t tags = (1u << (23 - emu::NicIds::kQpnIndexBits)) - 1;
        return high | static_cast<uint32_t>(n / indices % tags + 1) << emu::NicIds::kQpnIndexBits |
               static_cast<uint32_t>(n % indices);
    }
    uint32_t old_qkey(uint32_t index) const
    {
        return 0x5D000000u ^ (victim_.ip * 0x9E3779B1u) ^ (index << 12) ^ 0xC7u;
    }

    size_t build(uint32_t kind, uint8_t* out, size_t cap)
    {
        const uint64_t k = n_ / kKinds;  // this kind's own count
        switch (kind) {
        case kSweepOwn:
        case kSweepSpoofed: {
            wire::Headers h = base(kind == kSweepSpoofed);
            h.dest_qp = sweep_qpn(k, 16, 0);
            h.rkey = static_cast<uint32_t>(rng_.next() << emu::NicIds::kRootKeyIndexBits) | (k % 16);
            h.udp_src_port = kind == kSweepSpoofed ? static_cast<uint16_t>(0xC000 | (k % 0x4000))
                                                   : emu::udp_src_port(h.dest_qp, sweep_qpn(k / 16, 16, 0));  // a guessed peer
            return data(h, out, cap);
        }
        case kRandomOwn:
        case kRandomSpoofed: {
            wire::Headers h = base(kind == kRandomSpoofed);
            h.dest_qp = static_cast<uint32_t>(rng_.next() & 0x7FFFFF);
            h.rkey = static_cast<uint32_t>(rng_.next());
            h.udp_src_port = static_cast<uint16_t>(0xC000 | (rng_.next() & 0x3FFF));
            return data(h, out, cap);
        }
        case kOldScheme: {
            wire::Headers h = base(k % 2);
            uint32_t qp = k % 16, key = k / 16 % 16;
            h.dest_qp = 0x100 + qp;
            h.rkey = ((key + 1) << 8) | 0x40;
            h.udp_src_port = static_cast<uint16_t>(0xC000 | ((0x100 + qp) & 0x3FFF));
            return data(h, out, cap);
        }
        case kReplay: {
            const std::vector<uint8_t>& f = replay_[k % replay_.size()];
            if (k / replay_.size() % 2 == 0 && f.size() <= cap) {  // verbatim: valid ICRC and all
                std::memcpy(out, f.data(), f.size());
                return f.size();
            }
            wire::Parsed p;  // its QPN, key and port, aimed at another offset, from either host
            (void)wire::decode(f.data(), f.size(), &p);  // Ok: data_frames() kept only frames that decode
            wire::Headers h = base(k % 4 != 1);
            h.dest_qp = p.h.dest_qp;
            h.rkey = p.h.rkey;
            h.udp_src_port = p.h.udp_src_port;
            return data(h, out, cap);
        }
        case kCtrlSweep:
        case kCtrlRandom: {
            wire::Headers h = base(k % 2);
            bool sweep = kind == kCtrlSweep;
            h.dest_qp = sweep ? sweep_qpn(k, 4, emu::NicIds::kCtrlQpnBit)
                              : static_cast<uint32_t>(emu::NicIds::kCtrlQpnBit | (rng_.next() & 0x7FFFFF));
            h.qkey = sweep && k % 3 == 0 ? old_qkey(static_cast<uint32_t>(k % 4)) : static_cast<uint32_t>(rng_.next());
            h.src_qp = sweep ? sweep_qpn(k / 4, 4, emu::NicIds::kCtrlQpnBit)
                             : static_cast<uint32_t>(emu::NicIds::kCtrlQpnBit | (rng_.next() & 0x7FFFFF));
            h.udp_src_port = emu::udp_src_port(h.src_qp, h.dest_qp);
            return datagram(h, out, cap);
        }
        }
        return 0;
    }

    Host self_, victim_, sender_;
    std::vector<std::vector<uint8_t>> replay_;
    uint64_t space_;
    emu::Rng rng_{2202'08080};
    uint64_t n_ = 0;
};

}  // namespace

TEST(Attack, ThirdHostOnTheSegmentWritesNothing)
{
    if (auto why = netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb("sdratk", 4200, true);
    ASSERT_TRUE(tb.ok()) << "tools/sdr-netns up --bridge failed";
    Host sender, victim, self;
    ASSERT_TRUE(host_of(tb, 0, &sender) && host_of(tb, 1, &victim) && host_of(tb, 2, &self));
    const std::string port = std::to_string(18700 + getpid() % 250 * 2);
    const std::string common = " --timeout-ms 30000";

    // An earlier connection between the same two hosts, captured at the receiver: its QPNs,
    // root keys and ports are what an attacker who saw it would try.
    const std::string pcap = "/tmp/sdr_attack_" + std::to_string(getpid()) + ".pcap";
    ASSERT_TRUE(run_write_bw(tb, "raw", port, common + " --pcap " + pcap + " --snaplen 0", common + " -s 64K -n 8 -w 0 -q 8").ok());
    auto replay = data_frames(pcap);
    std::remove(pcap.c_str());
    ASSERT_GE(replay.size(), 8u * 16) << "the earlier connection's capture";

    // The transfer under attack: 496 messages of 256 KiB (16 in warm-up) paced at 0.1 Gbit/s,
    // 10.7 s with the frames' overhead; 8 slots of 256 KiB. A message waits up to 1 s for its
    // packets after the sender reported it sent: the flood may hold them in the receive ring.
    const uint64_t size = 256 << 10, messages = 496, slots = 8;
    const uint64_t packets = messages * (size / 4096);
    Attacker attacker(self, victim, sender, std::move(replay), slots * size);
    std::atomic<bool> ready{false}, stop{false};
    AttackStats st;
    std::thread flood([&] { attacker.run(tb.ns(2), ready, stop, &st); });
    while (!ready) std::this_thread::yield();
    const WriteBwRun r =
        run_write_bw(tb, "raw", port, common + " --verify --settle-ms 1000", common + " -s 256K -n 480 -w 16 -q 8 --rate-gbps 0.1");
    stop = true;
    flood.join();
    ASSERT_TRUE(st.error.empty()) << st.error;
    ASSERT_TRUE(r.ok());
    const std::string& sj = r.sj;
    std::printf("%s\n", sj.c_str());
    std::printf("attacker: %llu frames in %.2f s (%.0f frames/s), %llu send errors;", (unsigned long long)st.total,
                st.seconds, st.total / st.seconds, (unsigned long long)st.send_errors);
    for (uint32_t k = 0; k < kKinds; k++) std::printf(" %s %llu", kKindNames[k], (unsigned long long)st.sent[k]);
    std::printf("\n");

    EXPECT_GE(st.seconds, 10.0) << "the attack lasted the whole transfer, 10 s at least";
    for (uint32_t k = 0; k < kKinds; k++) EXPECT_GT(st.sent[k], 10000u) << kKindNames[k];
    // The transfer: complete and byte-exact.
    EXPECT_EQ(json_number(sj, "corrupt_chunks"), 0.0);
    EXPECT_EQ(json_number(sj, "chunks_expected"), 480.0 * 4);
    EXPECT_EQ(json_number(sj, "chunks_received"), json_number(sj, "chunks_expected")) << "every chunk arrived";
    // Nothing of the attacker's was taken: the NIC placed exactly the sender's bytes and raised
    // exactly the sender's CQEs (a frame into a NULL slot would raise one too), and no control
    // datagram reached a ring.
    EXPECT_EQ(json_number(sj, "rx_placed_bytes"), double(messages * size));
    EXPECT_EQ(json_number(sj, "rx_cqes"), double(packets));
    EXPECT_EQ(json_number(sj, "rx_ctrl"), 0.0);
    // Every other frame the NIC saw was dropped and counted, by reason; the kernel lost few.
    const double drops = json_number(sj, "rx_drops_total");
    EXPECT_EQ(json_number(sj, "rx_frames"), double(packets) + drops);
    EXPECT_GE(drops, 0.9 * double(st.total)) << "the attacker's frames were counted as drops";
    EXPECT_LE(drops, double(st.total));
    EXPECT_GT(json_number(sj, "unknown_qp"), 0.5 * double(st.total)) << "guessed QPNs";
    EXPECT_GT(json_number(sj, "wrong_peer"), 0.0) << "the sweep named live QPNs; not from the peer";
}
