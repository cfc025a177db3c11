// The real-time emulator between two network namespaces joined by a veth pair: the C API on
// "raw:IF" devices (AF_PACKET), one per side, in one test process (each port is opened inside
// its namespace; sockets stay there). Byte-exact transfers 4 KiB .. 64 MiB; under loss the
// receiver's chunk bitmap is checked against what the sender's pcap says left its port; the
// reliability layer delivers over the lossy path; tshark dissects the capture.
#include "netns_util.hpp"
#include "sim_util.hpp"
#include "tshark_util.hpp"

#include <pcap/pcap.h>
#include <sdr/emu/wire.hpp>
#include <sdr/reliability/endpoint.hpp>
#include <sdr_sim.h>

#include <chrono>
#include <set>

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
        for (int side = 0; side < 2; side++)
            if (!(qp[side] = sdr_qp_create(ctx[side], &attr))) return why = sdr_last_error(), false;
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
        std::vector<uint8_t> now(bm, bm + nb);
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

TEST(RealTime, RawTransfersAreByteExact)
{
    if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb("sdrrt1");
    ASSERT_TRUE(tb.ok()) << "tools/sdr-netns up failed";
    RtPair p;
    ASSERT_TRUE(p.open(tb, "raw", {})) << p.why;
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

TEST(RealTime, RawBitmapUnderLossMatchesWhatLeftThePort)
{
    if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb("sdrrt2");
    ASSERT_TRUE(tb.ok());
    const std::string pcap = "/tmp/sdr_rt_loss_" + std::to_string(getpid()) + ".pcap";
    RtPair p;
    ASSERT_TRUE(p.open(tb, "raw", {{"SDR_RT_LOSS", "0.01"}, {"SDR_RT_SEED", "7"}, {"SDR_RT_REORDER", "0.02,200"},
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
    std::remove(pcap.c_str());
}

TEST(RealTime, ReliableSchemesDeliverOverALossyRawPath)
{
    if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb("sdrrt3");
    ASSERT_TRUE(tb.ok());
    // 1 % loss and reordering both ways, 1 ms added each way (2 ms RTT).
    std::vector<std::pair<std::string, std::string>> env = {
        {"SDR_RT_LOSS", "0.01"}, {"SDR_RT_REORDER", "0.01,300"}, {"SDR_RT_DELAY_MS", "1"}};
    RtPair p;
    ASSERT_TRUE(p.open(tb, "raw", env, env)) << p.why;
    for (const char* scheme : {"sr", "ec-mds:8,2"}) {
        SCOPED_TRACE(scheme);
        rel::Config cfg;
        std::string err;
        ASSERT_TRUE(rel::parse_scheme(scheme, &cfg, &err)) << err;
        cfg.rtt_ms = 2;
        cfg.bw_gbps = 2;  // well under what a veth moves per core
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
        std::printf("%s over raw: %.2f ms, %u retransmitted, %u decoded\n", scheme, (ts.done_ns - ts.post_ns) / 1e6,
                    ts.retransmitted_chunks, rs.decoded_chunks);
        a.reset();
        b.reset();
        sdr_mr_dereg(sm);
        sdr_mr_dereg(dm);
    }
}
