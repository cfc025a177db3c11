// The AF_XDP port's XDP program (emu/rt/include/sdr/emu/xdp_program.hpp) on its own: loaded into
// the kernel and run through BPF_PROG_TEST_RUN (libbpf's bpf_prog_test_run_opts) on crafted
// frames, without an interface. A RoCEv2 frame to our address or a multicast group and UDP port
// 4791 is redirected to the AF_XDP socket of its queue (XDP_REDIRECT), or passed to the kernel when no socket sits at
// that queue; everything else is passed (XDP_PASS): other protocols, other ports and addresses,
// IP options, fragments, VLAN tags, and frames too short to hold the headers. The program never
// changes a byte. Loading needs CAP_BPF (or root): without it every test skips and says so.
#include <sdr/emu/posix_owners.hpp>
#include <sdr/emu/wire.hpp>
#include <sdr/emu/xdp_program.hpp>

#include <gtest/gtest.h>

#include <bpf/bpf.h>
#include <linux/if_xdp.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

using namespace sdr::emu;
using Frame = std::vector<uint8_t>;

namespace {

constexpr uint32_t kOurIp = 0xC0A80102;  // 192.168.1.2: top bit set, the case the 32-bit compare exists for
constexpr uint32_t kPeerIp = 0xC0A80101;

// A whole RoCEv2 frame as the NIC model sends it: UC RDMA WRITE Only with Immediate, 64 B payload.
Frame roce_frame(uint32_t dst_ip = kOurIp)
{
    wire::Headers h;
    h.src_mac = {2, 0, 0, 0, 0, 1};
    h.dst_mac = {2, 0, 0, 0, 0, 2};
    h.src_ip = kPeerIp;
    h.dst_ip = dst_ip;
    h.dest_qp = 0x123;
    h.rkey = 0x4567;
    h.dma_len = 64;
    std::vector<uint8_t> payload(64, 0xab);
    Frame f(256);
    f.resize(wire::encode(h, payload.data(), static_cast<uint32_t>(payload.size()), f.data(), f.size()));
    return f;
}

void put16(Frame& f, size_t at, uint16_t v)
{
    f[at] = static_cast<uint8_t>(v >> 8);
    f[at + 1] = static_cast<uint8_t>(v);
}

// An XSKMAP with one entry (queue 0), the program loaded against it, and (on request) an AF_XDP
// socket at queue 0. The socket is never bound: the map takes any AF_XDP socket, and a test run
// performs no redirect, it only returns the action.
class XdpProgram : public ::testing::Test {
protected:
    void SetUp() override
    {
        map_ = Fd(bpf_map_create(BPF_MAP_TYPE_XSKMAP, "sdr_test_xsks", sizeof(uint32_t), sizeof(int), 1, nullptr));
        if (!map_.ok()) {
            int e = -map_.get();
            if (e == EPERM || e == EACCES)
                GTEST_SKIP() << "cannot create BPF maps here (" << std::strerror(e) << "): needs root or CAP_BPF";
            FAIL() << "bpf_map_create(XSKMAP): " << std::strerror(e);
        }
    }

    // Loads the program for our address; its fd (the fixture keeps it open).
    int load(bool frags = false)
    {
        int e = 0;
        std::string verifier;
        int fd = load_xdp_program(roce_redirect_program(kOurIp, map_.get()), frags, &e, &verifier);
        EXPECT_GE(fd, 0) << "loading: " << std::strerror(e) << " " << verifier;
        progs_.emplace_back(fd);
        return fd;
    }

    // Puts an AF_XDP socket (UMEM and fill and RX rings, unbound) at queue 0 of the map.
    void add_socket()
    {
        xsk_ = Fd(socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0));
        ASSERT_GE(xsk_.get(), 0) << "socket(AF_XDP): " << std::strerror(errno);
        umem_ = Mapping(mmap(nullptr, kUmem, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), kUmem);
        ASSERT_TRUE(umem_.ok());
        xdp_umem_reg reg{};
        reg.addr = reinterpret_cast<uintptr_t>(umem_.bytes());
        reg.len = kUmem;
        reg.chunk_size = 4096;
        ASSERT_EQ(setsockopt(xsk_.get(), SOL_XDP, XDP_UMEM_REG, &reg, sizeof reg), 0) << std::strerror(errno);
        uint32_t entries = 4;
        ASSERT_EQ(setsockopt(xsk_.get(), SOL_XDP, XDP_UMEM_FILL_RING, &entries, sizeof entries), 0);
        ASSERT_EQ(setsockopt(xsk_.get(), SOL_XDP, XDP_RX_RING, &entries, sizeof entries), 0);
        uint32_t key = 0;
        int fd = xsk_.get();
        ASSERT_EQ(bpf_map_update_elem(map_.get(), &key, &fd, 0), 0) << "XSKMAP update: " << std::strerror(errno);
    }

    // Runs the program once on `frame`: its return value (an XDP action). The frame must come
    // back unchanged.
    static uint32_t run(int prog, const Frame& frame)
    {
        Frame out(frame.size() + 256, 0);
        bpf_test_run_opts o{};
        o.sz = sizeof o;
        o.data_in = frame.data();
        o.data_size_in = static_cast<uint32_t>(frame.size());
        o.data_out = out.data();
        o.data_size_out = static_cast<uint32_t>(out.size());
        o.repeat = 1;
        int r = bpf_prog_test_run_opts(prog, &o);
        EXPECT_EQ(r, 0) << "BPF_PROG_TEST_RUN on " << frame.size() << " B: " << std::strerror(-r);
        EXPECT_EQ(o.data_size_out, frame.size());
        out.resize(o.data_size_out);
        EXPECT_EQ(out, frame) << "the program changed the frame";
        return o.retval;
    }

    // Runs the program on our RoCE frame as `change` leaves it.
    template <class Change>
    static uint32_t run_changed(int prog, Change change)
    {
        Frame f = roce_frame();
        change(f);
        return run(prog, f);
    }

    static constexpr size_t kUmem = 16 * 4096;
    Fd map_;
    Mapping umem_;  // unmapped after the socket closes (declared before it)
    Fd xsk_;
    std::vector<Fd> progs_;
};

TEST_F(XdpProgram, RoceToOurAddressIsRedirectedToTheQueuesSocket)
{
    add_socket();
    int prog = load();
    Frame f = roce_frame();
    ASSERT_EQ(f[14], 0x45);
    EXPECT_EQ(run(prog, f), XDP_REDIRECT);
    // Don't Fragment is not a fragment.
    f[20] |= 0x40;
    EXPECT_EQ(run(prog, f), XDP_REDIRECT);
    // The 42 header bytes are all it reads: a RoCE frame cut right after the UDP header (or
    // holding garbage after it) still goes to the socket, where the NIC model drops and counts it.
    Frame headers_only(f.begin(), f.begin() + 42);
    EXPECT_EQ(run(prog, headers_only), XDP_REDIRECT);
    Frame garbage = headers_only;
    garbage.resize(300, 0xff);
    EXPECT_EQ(run(prog, garbage), XDP_REDIRECT);
}

// Multicast RoCEv2 (224.0.0.0/4) goes to the socket too: the NIC model keeps the groups it
// joined and counts the rest (mcast_no_member). Just outside the range is another address.
TEST_F(XdpProgram, RoceToAMulticastGroupIsRedirected)
{
    add_socket();
    int prog = load();
    EXPECT_EQ(run(prog, roce_frame(0xEF010101)), XDP_REDIRECT) << "239.1.1.1";
    EXPECT_EQ(run(prog, roce_frame(0xE0000001)), XDP_REDIRECT) << "224.0.0.1";
    EXPECT_EQ(run(prog, roce_frame(0xF0000001)), XDP_PASS) << "240.0.0.1";
    EXPECT_EQ(run(prog, roce_frame(0xDF000001)), XDP_PASS) << "223.0.0.1";
    Frame udp53 = roce_frame(0xEF010101);
    udp53[36] = 0, udp53[37] = 53;
    EXPECT_EQ(run(prog, udp53), XDP_PASS) << "multicast, not RoCE";
}

TEST_F(XdpProgram, RoceWithNoSocketAtTheQueueGoesToTheKernel)
{
    int prog = load();
    EXPECT_EQ(run(prog, roce_frame()), XDP_PASS);
}

TEST_F(XdpProgram, MultiBufferVariantDecidesTheSame)
{
    add_socket();
    int prog = load(/*frags=*/true);
    EXPECT_EQ(run(prog, roce_frame()), XDP_REDIRECT);
    EXPECT_EQ(run(prog, roce_frame(kPeerIp)), XDP_PASS);
}

TEST_F(XdpProgram, OtherTrafficGoesToTheKernel)
{
    add_socket();
    int prog = load();
    const auto variant = [prog](auto change) { return run_changed(prog, change); };
    EXPECT_EQ(run(prog, roce_frame(kPeerIp)), XDP_PASS) << "RoCE for another address";
    EXPECT_EQ(run(prog, roce_frame(0x0A000002)), XDP_PASS) << "RoCE for 10.0.0.2";
    EXPECT_EQ(variant([](Frame& f) { put16(f, 36, 4792); }), XDP_PASS) << "UDP to another port";
    EXPECT_EQ(variant([](Frame& f) { put16(f, 34, 4791), put16(f, 36, 53); }), XDP_PASS) << "from 4791, to 53";
    EXPECT_EQ(variant([](Frame& f) { f[23] = 6; }), XDP_PASS) << "TCP";
    EXPECT_EQ(variant([](Frame& f) { f[23] = 1; }), XDP_PASS) << "ICMP";
    EXPECT_EQ(variant([](Frame& f) { put16(f, 12, 0x0806); }), XDP_PASS) << "ARP";
    EXPECT_EQ(variant([](Frame& f) { put16(f, 12, 0x86dd); }), XDP_PASS) << "IPv6";
    // A VLAN tag moves every header by 4 bytes: the program handles untagged frames only.
    EXPECT_EQ(variant([](Frame& f) {
                  f.insert(f.begin() + 12, {0x81, 0x00, 0x00, 0x05});
              }),
              XDP_PASS)
        << "802.1Q-tagged RoCE";
}

TEST_F(XdpProgram, HostileAndTruncatedFramesGoToTheKernel)
{
    add_socket();
    int prog = load();
    const auto variant = [prog](auto change) { return run_changed(prog, change); };
    EXPECT_EQ(variant([](Frame& f) { f[14] = 0x46; }), XDP_PASS) << "IP options (IHL 6)";
    EXPECT_EQ(variant([](Frame& f) { f[14] = 0x44; }), XDP_PASS) << "IHL 4, shorter than an IPv4 header";
    EXPECT_EQ(variant([](Frame& f) { f[14] = 0x65; }), XDP_PASS) << "version 6 in an IPv4 EtherType";
    EXPECT_EQ(variant([](Frame& f) { f[20] |= 0x20; }), XDP_PASS) << "first fragment (more fragments)";
    EXPECT_EQ(variant([](Frame& f) { put16(f, 20, 0x00b9); }), XDP_PASS) << "a later fragment (offset 185)";
    EXPECT_EQ(variant([](Frame& f) { put16(f, 20, 0x4001); }), XDP_PASS) << "DF with an offset";
    // Every length from the smallest frame a test run takes (an Ethernet header) to one byte
    // short of the 42 header bytes: the bound check passes them, whatever they hold.
    for (size_t len = 14; len < 42; len++)
        EXPECT_EQ(variant([len](Frame& f) { f.resize(len); }), XDP_PASS) << "RoCE cut to " << len << " B";
}

}  // namespace
