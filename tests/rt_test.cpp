// The real-time emulator between two network namespaces joined by a veth pair: the C API on
// "raw:IF" (AF_PACKET) and "xdp:IF" (AF_XDP) devices, one per side, in one test process (each
// port is opened inside its namespace; sockets stay there). Byte-exact transfers 4 KiB .. 64 MiB; under loss the
// receiver's chunk bitmap is checked against what the sender's pcap says left its port; the
// reliability layer delivers over the lossy path; tshark dissects the capture.
#include "netns_util.hpp"
#include "sim_util.hpp"
#include "tshark_util.hpp"

#include <pcap/pcap.h>
#include <sdr/emu/wire.hpp>
#include <sdr/host/inspect.hpp>
#include <sdr/reliability/endpoint.hpp>
#include <sdr_ext.h>
#include <sdr_sim.h>

#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/socket.h>

#include <chrono>
#include <map>
#include <set>
#include <thread>

using namespace sdr;
using namespace sdr::test;

namespace {

uint64_t wall_ns()
{
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// Two contexts on the two ends of a testbed, with one connected QP each. `env` is applied
// (SDR_RT_*) while the sender's device opens; the receiver's gets `rx_env`.
struct RtPair {
    sdr_context* ctx[2] = {};
    sdr_qp* qp[2] = {};
    sdr_qp_attr attr{16, 29, 3, SDR_MTU_4096, 1, 1, 0};  // 64 KiB chunks, 8 slots of 64 MiB
    std::string why;

    bool open(const Testbed& tb, const std::string& kind, const std::vector<std::pair<std::string, std::string>>& env,
              const std::vector<std::pair<std::string, std::string>>& rx_env = {})
    {
        sdr_dev_attr da{4, 2};
        for (int side = 0; side < 2; side++) {
            InNetns in(tb.ns(side));
            if (!in.ok()) return why = "cannot enter namespace " + tb.ns(side), false;
            for (const auto& [k, v] : side ? rx_env : env) setenv(k.c_str(), v.c_str(), 1);
            ctx[side] = sdr_context_create((kind + ":" + tb.ns(side)).c_str(), &da);
            for (const auto& [k, v] : side ? rx_env : env) unsetenv(k.c_str());
            if (!ctx[side]) return why = sdr_last_error(), false;
        }
        // UC, as the reliability layer needs and as these transfers ran before RC was the default.
        sdr_qp_attr_ext ext;
        sdr_qp_attr_ext_init(&ext);
        ext.transport = SDR_TRANSPORT_UC;
        for (int side = 0; side < 2; side++)
            if (!(qp[side] = sdr_qp_create_ext(ctx[side], &attr, &ext))) return why = sdr_last_error(), false;
        size_t n;
        sdr_qp_info_size_get(qp[0], &n);
        std::vector<uint8_t> i0(n), i1(n);
        sdr_qp_info_get(qp[0], i0.data());
        sdr_qp_info_get(qp[1], i1.data());
        if (sdr_qp_connect(qp[0], i1.data()) || sdr_qp_connect(qp[1], i0.data())) return why = sdr_last_error(), false;
        return true;
    }
    ~RtPair()
    {
        for (int s = 0; s < 2; s++) {
            if (qp[s]) sdr_qp_destroy(qp[s]);
            if (ctx[s]) sdr_context_destroy(ctx[s]);
        }
    }
};

std::string skip_reason()
{
    return netns_unavailable();
}

// The port kind a parameterized test runs on; its testbed prefix ends in the kind's initial.
class RealTimePort : public ::testing::TestWithParam<const char*> {
protected:
    std::string kind() const { return GetParam(); }
    std::string prefix(const char* base) const { return base + kind().substr(0, 1); }
};

// One SDR message of `size` bytes; returns the receiver's bitmap once the send completed and
// the bitmap stopped changing for `settle_ms` (or is full).
std::vector<uint8_t> transfer(RtPair& p, const std::vector<uint8_t>& src, std::vector<uint8_t>& dst, uint64_t settle_ms)
{
    const uint32_t size = static_cast<uint32_t>(src.size());
    sdr_mr* sm = sdr_mr_reg(p.ctx[0], const_cast<uint8_t*>(src.data()), size, SDR_ACCESS_REMOTE_WRITE);
    sdr_mr* dm = sdr_mr_reg(p.ctx[1], dst.data(), size, SDR_ACCESS_REMOTE_WRITE);
    uint32_t sk, dk;
    sdr_mr_lkey_get(sm, &sk);
    sdr_mr_lkey_get(dm, &dk);
    sdr_recv_wr rw{size, dk, reinterpret_cast<uint64_t>(dst.data())};
    sdr_recv_handle* rh;
    EXPECT_EQ(sdr_recv_post(p.qp[1], &rw, &rh), SDR_SUCCESS) << sdr_last_error();
    sdr_send_wr sw{SDR_WR_WRITE, 0, size, sk, reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh;
    EXPECT_EQ(sdr_send_post(p.qp[0], &sw, &sh), SDR_SUCCESS) << sdr_last_error();
    wait_send(sh);
    uint8_t* bm;
    size_t nb;
    const uint64_t nchunks = (size + 65535) / 65536;
    std::vector<uint8_t> last;
    uint64_t stable_since = wall_ns(), give_up = wall_ns() + 30'000'000'000ull;
    for (;;) {
        sdr_recv_bitmap_get(rh, &bm, &nb);
        std::vector<uint8_t> now(nb);  // the NIC writes the bitmap while we read it: atomic loads
        for (size_t i = 0; i < nb; i++) now[i] = __atomic_load_n(&bm[i], __ATOMIC_ACQUIRE);
        uint64_t set = 0;
        for (uint8_t b : now) set += __builtin_popcount(b);
        if (now != last) stable_since = wall_ns();
        last = now;
        if (set == nchunks || wall_ns() - stable_since > settle_ms * 1'000'000 || wall_ns() > give_up) break;
        sdr_sim_wait(p.ctx[1], sdr_now_ns(p.ctx[1]) + 1'000'000);
    }
    sdr_recv_complete(rh);
    sdr_mr_dereg(sm);
    sdr_mr_dereg(dm);
    return last;
}

}  // namespace

TEST_P(RealTimePort, TransfersAreByteExact)
{
    if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb(prefix("sdrrt1"));
    ASSERT_TRUE(tb.ok()) << "tools/sdr-netns up failed";
    RtPair p;
    ASSERT_TRUE(p.open(tb, kind(), {})) << p.why;
    for (uint32_t size : {4096u, 1u << 20, (5u << 20) + 777, 64u << 20}) {
        SCOPED_TRACE(size);
        std::vector<uint8_t> src(size), dst(size, 0);
        fill(src, size);
        auto bm = transfer(p, src, dst, 2000);
        uint64_t nchunks = (size + 65535) / 65536, set = 0;
        for (uint64_t c = 0; c < nchunks; c++) set += bit(bm.data(), c);
        EXPECT_EQ(set, nchunks);
        EXPECT_TRUE(src == dst);
    }
}

TEST_P(RealTimePort, BitmapUnderLossMatchesWhatLeftThePort)
{
    if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb(prefix("sdrrt2"));
    ASSERT_TRUE(tb.ok());
    const std::string pcap = "/tmp/sdr_rt_loss_" + std::to_string(getpid()) + ".pcap";
    RtPair p;
    ASSERT_TRUE(p.open(tb, kind(), {{"SDR_RT_LOSS", "0.01"}, {"SDR_RT_SEED", "7"}, {"SDR_RT_REORDER", "0.02,200"},
                                   {"SDR_RT_PCAP", pcap}, {"SDR_RT_SNAPLEN", "128"}}))
        << p.why;
    const uint32_t size = 8u << 20;
    std::vector<uint8_t> src(size), dst(size, 0);
    fill(src, 99);
    auto bm = transfer(p, src, dst, 300);
    ASSERT_EQ(sdr_qp_destroy(p.qp[0]), SDR_SUCCESS);
    ASSERT_EQ(sdr_context_destroy(p.ctx[0]), SDR_SUCCESS) << sdr_last_error();  // closes the sender's pcap
    p.qp[0] = nullptr;
    p.ctx[0] = nullptr;

    // Packets per chunk that left the sender's port (the pcap records what the port sent).
    std::vector<uint32_t> sent(size / 65536, 0);
    char errbuf[PCAP_ERRBUF_SIZE];
    pcap_t* pc = pcap_open_offline(pcap.c_str(), errbuf);
    ASSERT_NE(pc, nullptr) << errbuf;
    pcap_pkthdr* h;
    const u_char* f;
    std::set<uint32_t> offsets;
    while (pcap_next_ex(pc, &h, &f) == 1) {
        if (h->caplen < emu::wire::kWriteImmHeaderBytes || f[42] != emu::wire::kOpUcWriteOnlyImm) continue;
        uint32_t imm = uint32_t(f[70]) << 24 | uint32_t(f[71]) << 16 | uint32_t(f[72]) << 8 | f[73];
        fw_imm im = fw_imm_decode(FW_IMM_DEFAULT_LAYOUT, imm);
        if (offsets.insert(im.packet_offset).second) sent[im.packet_offset / 16]++;  // duplicates once
    }
    pcap_close(pc);
    uint64_t missing = 0;
    for (uint32_t c = 0; c < sent.size(); c++) {
        bool whole = sent[c] == 16;
        EXPECT_EQ(bit(bm.data(), c), whole) << "chunk " << c << ": " << sent[c] << " of 16 packets sent";
        missing += !whole;
        if (bit(bm.data(), c)) {
            EXPECT_EQ(std::memcmp(src.data() + c * 65536ull, dst.data() + c * 65536ull, 65536), 0) << "chunk " << c;
        }
    }
    EXPECT_GT(missing, 0u) << "1 % loss over 2048 packets dropped something";
    std::printf("%lu of %zu chunks incomplete, as the sender's capture predicts\n", static_cast<unsigned long>(missing),
                sent.size());
    if (tshark_available()) {
        std::string err;
        auto rows = tshark_fields(pcap, {"infiniband.bth.opcode"}, &err);
        ASSERT_TRUE(rows) << err;
        EXPECT_GT(rows->size(), 2000u * 0.95);
        for (const auto& r : *rows) ASSERT_EQ(r[0], "43");
    }
    if (!::testing::Test::HasFailure()) std::remove(pcap.c_str());
}

TEST_P(RealTimePort, ReliableSchemesDeliverOverALossyPath)
{
    if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb(prefix("sdrrt3"));
    ASSERT_TRUE(tb.ok());
    // 1 % loss and reordering both ways, 1 ms added each way (2 ms RTT).
    std::vector<std::pair<std::string, std::string>> env = {
        {"SDR_RT_LOSS", "0.01"}, {"SDR_RT_REORDER", "0.01,300"}, {"SDR_RT_DELAY_MS", "1"}};
    RtPair p;
    ASSERT_TRUE(p.open(tb, kind(), env, env)) << p.why;
    for (const char* scheme : {"sr", "ec-mds:8,2"}) {
        SCOPED_TRACE(scheme);
        rel::Config cfg;
        std::string err;
        ASSERT_TRUE(rel::parse_scheme(scheme, &cfg, &err)) << err;
        cfg.rtt_ms = 2;
        cfg.bw_gbps = 2;  // well under what a veth moves per core
        // Probes and re-NACKs go out every few ms of wall time and each counts as a round: a
        // process a loaded machine stalls for 40 ms spends 16 rounds on the wall clock, not on
        // the link (seen in CI-like runs with other jobs). The bound is not what this test is about.
        cfg.max_rounds = 1000;
        auto a = rel::Endpoint::create(p.ctx[0], p.qp[0], p.attr, cfg, &err);
        auto b = rel::Endpoint::create(p.ctx[1], p.qp[1], p.attr, cfg, &err);
        ASSERT_TRUE(a && b) << err;
        const size_t size = 4u << 20;
        std::vector<uint8_t> src(size), dst(size, 0);
        fill(src, 5);
        sdr_mr* sm = sdr_mr_reg(p.ctx[0], src.data(), size, SDR_ACCESS_REMOTE_WRITE);
        sdr_mr* dm = sdr_mr_reg(p.ctx[1], dst.data(), size, SDR_ACCESS_REMOTE_WRITE);
        uint32_t sk, dk;
        sdr_mr_lkey_get(sm, &sk);
        sdr_mr_lkey_get(dm, &dk);
        uint64_t sid, rid;
        ASSERT_EQ(b->recv(dst.data(), size, dk, &rid), SDR_SUCCESS) << rel::last_error();
        ASSERT_EQ(a->send(src.data(), size, sk, &sid), SDR_SUCCESS) << rel::last_error();
        rel::MessageStats ts, rs;
        bool td = false, rd = false;
        uint64_t t0 = sdr_now_ns(p.ctx[0]);
        ASSERT_TRUE(rel::drive(p.ctx[0], {a.get(), b.get()}, [&] {
            if (!td) td = a->send_result(sid, &ts) == SDR_SUCCESS;
            if (!rd) rd = b->recv_result(rid, &rs) == SDR_SUCCESS;
            return td && rd;
        }, t0 + 60'000'000'000ull));
        EXPECT_TRUE(ts.ok) << ts.error;
        EXPECT_TRUE(rs.ok) << rs.error;
        EXPECT_TRUE(src == dst);
        std::printf("%s over %s: %.2f ms, %u retransmitted, %u decoded\n", scheme, GetParam(), (ts.done_ns - ts.post_ns) / 1e6,
                    ts.retransmitted_chunks, rs.decoded_chunks);
        a.reset();
        b.reset();
        sdr_mr_dereg(sm);
        sdr_mr_dereg(dm);
    }
}

namespace {

// A raw socket outside the emulator, on the sender's end of the veth: it injects frames of
// its own, which the receiving port takes like any other.
class Injector {
public:
    explicit Injector(const std::string& ifname)
    {
        fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
        sockaddr_ll a{};
        a.sll_family = AF_PACKET;
        a.sll_protocol = htons(ETH_P_ALL);
        a.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
        ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    }
    ~Injector()
    {
        if (fd_ >= 0) close(fd_);
    }
    bool ok() const { return ok_; }
    bool send(const std::vector<uint8_t>& f) { return ::send(fd_, f.data(), f.size(), 0) == static_cast<ssize_t>(f.size()); }

private:
    int fd_ = -1;
    bool ok_ = false;
};

// The first RoCE data frame in a capture the NIC is still writing (it flushes its pcap at
// least every 100 ms): read again until one is there or `ctx`'s clock passes `deadline_ns`.
// Neither an AF_PACKET tap (blind to qdisc-bypass and AF_XDP sends, and to frames an XDP
// program redirects) nor anything else outside the emulator sees every port's frames.
bool first_data_frame(const std::string& pcap, sdr_context* ctx, uint64_t deadline_ns, std::vector<uint8_t>* frame,
                      emu::wire::Parsed* parsed)
{
    for (;;) {
        char errbuf[PCAP_ERRBUF_SIZE];
        if (pcap_t* pc = pcap_open_offline(pcap.c_str(), errbuf)) {
            pcap_pkthdr* h;
            const u_char* f;
            bool found = false;
            while (!found && pcap_next_ex(pc, &h, &f) == 1) {
                if (h->caplen != h->len) continue;
                frame->assign(f, f + h->caplen);
                found = emu::wire::decode(frame->data(), frame->size(), parsed) == emu::wire::Verdict::Ok &&
                        parsed->h.opcode == emu::wire::kOpUcWriteOnlyImm && parsed->payload_len > 0;
            }
            pcap_close(pc);
            if (found) return true;
        }
        if (sdr_now_ns(ctx) > deadline_ns) return false;
        sdr_sim_wait(ctx, sdr_now_ns(ctx) + 1'000'000);
    }
}

std::vector<uint8_t> frame_of(const emu::wire::Headers& h, const uint8_t* payload, uint32_t len)
{
    std::vector<uint8_t> f(emu::wire::kWriteImmHeaderBytes + len + 4);
    f.resize(emu::wire::encode(h, payload, len, f.data(), f.size()));
    return f;
}

}  // namespace

TEST_P(RealTimePort, HostileFramesOnTheWireAreDroppedAndCounted)
{
    if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb(prefix("sdrrt4"));
    ASSERT_TRUE(tb.ok());
    const std::string pcap = "/tmp/sdr_rt_hostile_" + std::to_string(getpid()) + ".pcap";
    RtPair p;
    // Slow enough to inject into; the sender's capture provides a real frame to mutate.
    ASSERT_TRUE(p.open(tb, kind(), {{"SDR_RT_RATE_GBPS", "2"}, {"SDR_RT_PCAP", pcap}, {"SDR_RT_SNAPLEN", "0"}})) << p.why;
    const size_t size = 16u << 20, guard = 1u << 20;
    // The receive buffer sits between two guard regions of the same memory region: a write
    // outside the posted receive would land in a guard.
    std::vector<uint8_t> src(size), region(guard + size + guard, 0xA5);
    fill(src, 77);
    std::fill(region.begin() + guard, region.end() - guard, 0);
    sdr_mr* sm = sdr_mr_reg(p.ctx[0], src.data(), size, SDR_ACCESS_REMOTE_WRITE);
    sdr_mr* dm = sdr_mr_reg(p.ctx[1], region.data(), region.size(), SDR_ACCESS_REMOTE_WRITE);
    uint32_t sk, dk;
    sdr_mr_lkey_get(sm, &sk);
    sdr_mr_lkey_get(dm, &dk);
    sdr_recv_wr rw{static_cast<uint32_t>(size), dk, reinterpret_cast<uint64_t>(region.data() + guard)};
    sdr_recv_handle* rh;
    ASSERT_EQ(sdr_recv_post(p.qp[1], &rw, &rh), SDR_SUCCESS) << sdr_last_error();

    std::unique_ptr<Injector> inj;
    {
        InNetns in(tb.ns(0));
        inj = std::make_unique<Injector>(tb.ns(0));
    }
    ASSERT_TRUE(inj->ok());
    sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(size), sk, reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh;
    ASSERT_EQ(sdr_send_post(p.qp[0], &sw, &sh), SDR_SUCCESS) << sdr_last_error();

    // Mutations of a real frame of this transfer; each a different reason to drop.
    std::vector<uint8_t> legit;
    emu::wire::Parsed pk;
    ASSERT_TRUE(first_data_frame(pcap, p.ctx[0], sdr_now_ns(p.ctx[0]) + 5'000'000'000ull, &legit, &pk))
        << "no frame of the transfer in " << pcap;
    std::remove(pcap.c_str());  // the NIC keeps writing to its open file
    std::map<std::string, std::vector<uint8_t>> hostile;
    emu::wire::Headers h = pk.h;
    h.dest_qp ^= 1u << emu::NicIds::kQpnIndexBits;  // another tag: no QP has this number
    hostile["UnknownQp"] = frame_of(h, pk.payload, pk.payload_len);
    h = pk.h;
    h.rkey ^= 0x00A5A500;
    hostile["UnknownKey"] = frame_of(h, pk.payload, pk.payload_len);
    h = pk.h;
    h.va += uint64_t{1} << 40;  // far past the last slot of the root key
    hostile["OutOfBounds"] = frame_of(h, pk.payload, pk.payload_len);
    hostile["BadIcrc"] = legit;
    hostile["BadIcrc"][emu::wire::kWriteImmHeaderBytes + 5] ^= 0xFF;  // payload byte, ICRC unchanged
    hostile["Truncated"] = std::vector<uint8_t>(legit.begin(), legit.begin() + 60);
    std::vector<uint8_t> other = legit;  // UDP to another port: the port's filter never passes it
    other[14 + 20 + 2] = 0x12;
    hostile["NotOurs"] = other;
    for (int round = 0; round < 50; round++)
        for (auto& [why, f] : hostile) ASSERT_TRUE(inj->send(f)) << why;

    wait_send(sh);
    uint8_t* bm;
    size_t nb;
    uint64_t give_up = wall_ns() + 30'000'000'000ull, set = 0;
    while (wall_ns() < give_up) {
        sdr_recv_bitmap_get(rh, &bm, &nb);
        set = 0;
        for (size_t i = 0; i < nb; i++) set += __builtin_popcount(__atomic_load_n(&bm[i], __ATOMIC_ACQUIRE));
        if (set == size / 65536) break;
        sdr_sim_wait(p.ctx[1], sdr_now_ns(p.ctx[1]) + 1'000'000);
    }
    EXPECT_EQ(set, size / 65536) << "the transfer completed";
    EXPECT_EQ(std::memcmp(region.data() + guard, src.data(), size), 0) << "byte-exact";
    for (size_t i = 0; i < guard; i++) {
        ASSERT_EQ(region[i], 0xA5) << "guard before the buffer, byte " << i;
        ASSERT_EQ(region[guard + size + i], 0xA5) << "guard after the buffer, byte " << i;
    }
    emu::RtNic* rt = host::rt_of(p.ctx[1]);
    ASSERT_NE(rt, nullptr);
    std::unique_lock<std::mutex> g(rt->lock());
    const auto& c = host::nic_of(p.ctx[1])->counters();
    EXPECT_GE(c.rx_drop(emu::RxDrop::UnknownQp), 50u);
    EXPECT_GE(c.rx_drop(emu::RxDrop::UnknownKey), 50u);
    EXPECT_GE(c.rx_drop(emu::RxDrop::OutOfBounds), 50u);
    EXPECT_GE(c.rx_drop(emu::RxDrop::BadIcrc), 50u);
    EXPECT_GE(c.rx_drop(emu::RxDrop::Truncated), 50u);
    std::printf("receiver NIC drops: unknown QP %lu, unknown key %lu, out of bounds %lu, bad ICRC %lu, truncated %lu\n",
                static_cast<unsigned long>(c.rx_drop(emu::RxDrop::UnknownQp)),
                static_cast<unsigned long>(c.rx_drop(emu::RxDrop::UnknownKey)),
                static_cast<unsigned long>(c.rx_drop(emu::RxDrop::OutOfBounds)),
                static_cast<unsigned long>(c.rx_drop(emu::RxDrop::BadIcrc)),
                static_cast<unsigned long>(c.rx_drop(emu::RxDrop::Truncated)));
    g.unlock();
    sdr_recv_complete(rh);
    sdr_mr_dereg(sm);
    sdr_mr_dereg(dm);
}

// A QP whose packets the interface cannot carry is refused when it is created, with the MTU
// that would fit; one that fits works.
TEST_P(RealTimePort, QpMtuLargerThanTheInterfaceIsRefused)
{
    if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb(prefix("sdrrt6"), 1500);
    ASSERT_TRUE(tb.ok());
    InNetns in(tb.ns(0));
    ASSERT_TRUE(in.ok());
    sdr_dev_attr da{2, 1};
    sdr_context* ctx = sdr_context_create((kind() + ":" + tb.ns(0)).c_str(), &da);
    ASSERT_NE(ctx, nullptr) << sdr_last_error();
    sdr_qp_attr attr{16, 26, 3, SDR_MTU_4096, 1, 1, 0};
    EXPECT_EQ(sdr_qp_create(ctx, &attr), nullptr);
    EXPECT_NE(std::string(sdr_last_error()).find("MTU 4096 needs frames of 4174 B, but " + kind() + ":" + tb.ns(0) +
                                                 " carries at most 1514 B: use MTU 1024 or less"),
              std::string::npos)
        << sdr_last_error();
    attr.mtu = SDR_MTU_1024;
    sdr_qp* qp = sdr_qp_create(ctx, &attr);
    EXPECT_NE(qp, nullptr) << sdr_last_error();
    if (qp) sdr_qp_destroy(qp);
    sdr_context_destroy(ctx);
}

INSTANTIATE_TEST_SUITE_P(Ports, RealTimePort, ::testing::Values("raw", "xdp"),
                         [](const auto& info) { return std::string(info.param); });

namespace {

uint64_t rss_bytes()
{
    FILE* f = std::fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (f) {
        if (std::fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
        std::fclose(f);
    }
    return uint64_t{resident} * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

// One minute (SDR_SOAK_SECONDS) of back-to-back reliable messages at 1 % loss both ways: every
// message byte-exact, and the process's resident memory flat after the first tenth.
TEST(RealTime, SoakAtOnePercentLoss)
{
    if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
    const double seconds = std::getenv("SDR_SOAK_SECONDS") ? std::atof(std::getenv("SDR_SOAK_SECONDS")) : 60;
    Testbed tb("sdrrt5");
    ASSERT_TRUE(tb.ok());
    std::vector<std::pair<std::string, std::string>> env = {{"SDR_RT_LOSS", "0.01"}, {"SDR_RT_DELAY_MS", "0.5"}};
    RtPair p;
    ASSERT_TRUE(p.open(tb, "raw", env, env)) << p.why;
    rel::Config cfg;
    std::string err;
    ASSERT_TRUE(rel::parse_scheme("sr", &cfg, &err));
    cfg.rtt_ms = 1;
    cfg.bw_gbps = 2;
    cfg.max_rounds = 1000;  // as above: wall-clock rounds are not what the soak measures
    auto a = rel::Endpoint::create(p.ctx[0], p.qp[0], p.attr, cfg, &err);
    auto b = rel::Endpoint::create(p.ctx[1], p.qp[1], p.attr, cfg, &err);
    ASSERT_TRUE(a && b) << err;
    const size_t size = (2u << 20) + 4321;
    std::vector<uint8_t> src(size), dst(size);
    sdr_mr* sm = sdr_mr_reg(p.ctx[0], src.data(), size, SDR_ACCESS_REMOTE_WRITE);
    sdr_mr* dm = sdr_mr_reg(p.ctx[1], dst.data(), size, SDR_ACCESS_REMOTE_WRITE);
    uint32_t sk, dk;
    sdr_mr_lkey_get(sm, &sk);
    sdr_mr_lkey_get(dm, &dk);
    const uint64_t start = wall_ns(), end = start + static_cast<uint64_t>(seconds * 1e9);
    uint64_t messages = 0, corrupt = 0, retransmitted = 0, rss_early = 0;
    while (wall_ns() < end) {
        fill(src, messages + 1);
        std::fill(dst.begin(), dst.end(), 0);
        uint64_t sid, rid;
        ASSERT_EQ(b->recv(dst.data(), size, dk, &rid), SDR_SUCCESS) << rel::last_error();
        ASSERT_EQ(a->send(src.data(), size, sk, &sid), SDR_SUCCESS) << rel::last_error();
        rel::MessageStats ts, rs;
        bool td = false, rd = false;
        ASSERT_TRUE(rel::drive(p.ctx[0], {a.get(), b.get()}, [&] {
            if (!td) td = a->send_result(sid, &ts) == SDR_SUCCESS;
            if (!rd) rd = b->recv_result(rid, &rs) == SDR_SUCCESS;
            return td && rd;
        }, sdr_now_ns(p.ctx[0]) + 30'000'000'000ull));
        ASSERT_TRUE(ts.ok && rs.ok) << ts.error << " / " << rs.error;
        corrupt += src != dst;
        retransmitted += ts.retransmitted_chunks;
        messages++;
        if (!rss_early && wall_ns() - start > (end - start) / 10) rss_early = rss_bytes();
    }
    uint64_t rss_late = rss_bytes();
    EXPECT_EQ(corrupt, 0u);
    EXPECT_GT(retransmitted, 0u) << "the loss was real";
#if defined(__SANITIZE_ADDRESS__)
    // AddressSanitizer holds freed memory in its quarantine (256 MiB), so resident memory climbs
    // by design; its leak check at exit stands in for this one.
    std::printf("soak: resident-memory check skipped under AddressSanitizer\n");
#else
    EXPECT_LT(rss_late, rss_early + (8u << 20)) << "resident memory grew by more than 8 MiB";
#endif
    std::printf("soak: %.0f s, %lu messages of %zu B, %lu chunks retransmitted, 0 corrupt; RSS %.1f -> %.1f MiB\n", seconds,
                static_cast<unsigned long>(messages), size, static_cast<unsigned long>(retransmitted), rss_early / 1048576.0,
                rss_late / 1048576.0);
    a.reset();
    b.reset();
    sdr_mr_dereg(sm);
    sdr_mr_dereg(dm);
}
