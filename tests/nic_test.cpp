// The NIC model treats every frame as hostile: each kind of bad frame is a counted drop and
// nothing is written outside the posted buffer; a good frame is placed exactly.
#include "sim_util.hpp"

#include <sdr/emu/wire.hpp>

#include <algorithm>
#include <random>

using namespace sdr;
using namespace sdr::test;
namespace wire = sdr::emu::wire;

namespace {

struct Rig {
    SimWorld w{config(12, 14, 2)};  // 4 slots of 4 KiB, 4 KiB chunks
    // the posted buffer sits inside a larger registered region: the guard bytes around it
    // must never change
    std::vector<uint8_t> region = std::vector<uint8_t>(3 * 4096, 0xCC);
    uint8_t* buf = region.data() + 4096;
    sdr_recv_handle* rh = nullptr;
    Rig()
    {
        uint32_t rk = w.lkey(1, region.data(), region.size());
        sdr_recv_wr rw{2048, rk, reinterpret_cast<uint64_t>(buf)};  // a 2 KiB receive in slot 0
        EXPECT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS);
    }
    wire::Headers good(uint32_t len) const
    {
        wire::Headers h;
        h.src_mac = emu::SimFabric::address_of(0).mac;
        h.dst_mac = emu::SimFabric::address_of(1).mac;
        h.src_ip = emu::SimFabric::address_of(0).ip;
        h.dst_ip = emu::SimFabric::address_of(1).ip;
        h.udp_src_port = emu::udp_src_port(w.nic(0).qpn(0));  // what the peer QP sends from
        h.dest_qp = w.nic(1).qpn(0);
        h.rkey = w.nic(1).qp_root_key(0);
        h.va = 0;
        h.dma_len = len;
        h.imm = fw_imm_encode(FW_IMM_DEFAULT_LAYOUT, 0, 0, 0);
        return h;
    }
    std::vector<uint8_t> frame(const wire::Headers& h, uint32_t len, uint8_t fillb = 0x77) const
    {
        std::vector<uint8_t> payload(len, fillb), f(wire::frame_bytes_write_imm(len) + 64);
        size_t n = wire::encode(h, payload.data(), len, f.data(), f.size());
        f.resize(n);
        return f;
    }
    void deliver(const std::vector<uint8_t>& f)
    {
        w.fabric().inject_frame(1, f, w.fabric().sim().now());
        w.run_until_idle();
    }
    bool guards_intact() const
    {
        for (size_t i = 0; i < 4096; i++)
            if (region[i] != 0xCC || region[2 * 4096 + i] != 0xCC) return false;
        for (size_t i = 2048; i < 4096; i++)
            if (buf[i] != 0xCC) return false;
        return true;
    }
};

TEST(NicHostile, EachBadFrameIsACountedDropAndWritesNothing)
{
    Rig r;
    const auto& c = r.w.nic(1).counters();
    struct Case {
        const char* name;
        std::vector<uint8_t> f;
        emu::RxDrop why;
    };
    std::vector<Case> cases;
    {
        auto f = r.frame(r.good(1024), 1024);
        f[f.size() - 1] ^= 1;
        cases.push_back({"bad ICRC", f, emu::RxDrop::BadIcrc});
    }
    {
        auto f = r.frame(r.good(1024), 1024);
        f[wire::kWriteImmHeaderBytes + 10] ^= 0x40;  // payload bit flip: ICRC catches it
        cases.push_back({"payload corrupted", f, emu::RxDrop::BadIcrc});
    }
    {
        auto h = r.good(1024);
        h.dest_qp = 0x7777;
        cases.push_back({"wrong QPN", r.frame(h, 1024), emu::RxDrop::UnknownQp});
    }
    {
        auto h = r.good(1024);
        h.rkey = 0x1234;
        cases.push_back({"unknown key", r.frame(h, 1024), emu::RxDrop::UnknownKey});
    }
    {
        auto h = r.good(1024);
        h.va = 1536;  // 1536 + 1024 > the 2 KiB posted
        cases.push_back({"offset beyond the posted buffer", r.frame(h, 1024), emu::RxDrop::OutOfBounds});
    }
    {
        auto h = r.good(1024);
        h.va = 4 * 4096;  // slot 4 of a 4-slot root key
        cases.push_back({"slot beyond the root key", r.frame(h, 1024), emu::RxDrop::OutOfBounds});
    }
    {
        auto f = r.frame(r.good(1024), 1024);
        f.resize(60);
        cases.push_back({"truncated headers", f, emu::RxDrop::Truncated});
    }
    {
        auto h = r.good(0);
        h.opcode = wire::kOpUdSendOnly;  // a valid RoCE frame, but not what a UC QP takes
        h.qkey = 1;
        cases.push_back({"wrong opcode", r.frame(h, 64), emu::RxDrop::WrongOpcode});
    }
    {
        auto f = r.frame(r.good(1024), 1024);
        f[12] = 0x86;
        f[13] = 0xDD;
        cases.push_back({"not IPv4", f, emu::RxDrop::NotIpv4});
    }
    {
        auto f = r.frame(r.good(1024), 1024);
        f[14 + 20 + 2] = 0x13;  // UDP destination port 0x13B7, not 4791 (0x12B7)
        cases.push_back({"not RoCE", f, emu::RxDrop::NotRoce});
    }
    for (const auto& k : cases) {
        SCOPED_TRACE(k.name);
        uint64_t before = c.rx_drop(k.why), cqes = c.rx_cqes;
        r.deliver(k.f);
        EXPECT_EQ(c.rx_drop(k.why), before + 1);
        EXPECT_EQ(c.rx_cqes, cqes) << "a dropped frame raises no CQE";
        EXPECT_TRUE(std::all_of(r.buf, r.buf + 2048, [](uint8_t b) { return b == 0xCC; })) << "buffer written";
        EXPECT_TRUE(r.guards_intact());
    }
    // and a good frame still lands exactly where it should
    auto h = r.good(1024);
    h.va = 1024;
    h.imm = fw_imm_encode(FW_IMM_DEFAULT_LAYOUT, 0, 1, 0);
    r.deliver(r.frame(h, 1024, 0x42));
    EXPECT_TRUE(std::all_of(r.buf + 1024, r.buf + 2048, [](uint8_t b) { return b == 0x42; }));
    EXPECT_TRUE(std::all_of(r.buf, r.buf + 1024, [](uint8_t b) { return b == 0xCC; }));
    EXPECT_TRUE(r.guards_intact());
    EXPECT_EQ(c.rx_placed_bytes, 1024u);
    // per-QP view: the frames that reached channel QP 0 (unknown key, two out-of-bounds, wrong
    // opcode) are its drops; the good one its only packet
    const emu::QpCounters* q = r.w.nic(1).qp_counters(0);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->rx_drops, 4u);
    EXPECT_EQ(q->rx_packets, 1u);
    ASSERT_EQ(sdr_recv_complete(r.rh), SDR_SUCCESS);
}

TEST(NicHostile, RandomGarbageNeverWrites)
{
    Rig r;
    std::mt19937_64 rng(3);
    auto base = r.frame(r.good(2048), 2048);
    for (int i = 0; i < 3000; i++) {
        auto f = base;
        // random length cut and random byte changes, ICRC left stale or recomputed
        f.resize(rng() % (f.size() + 1));
        for (int k = 0; k < 3 && !f.empty(); k++) f[rng() % f.size()] = static_cast<uint8_t>(rng());
        if (i % 2 && f.size() > wire::kWriteImmHeaderBytes + 4) wire::write_icrc(f.data(), f.size() - 4);
        r.w.fabric().inject_frame(1, f, 0);
    }
    r.w.run_until_idle();
    EXPECT_TRUE(r.guards_intact());
    EXPECT_GT(r.w.nic(1).counters().rx_drops_total(), 2000u);
    ASSERT_EQ(sdr_recv_complete(r.rh), SDR_SUCCESS);
}

TEST(NicHostile, DeregisteredMemoryIsNeverWritten)
{
    Rig r;
    // deregister the region behind the posted receive: its root-key entry must go NULL
    SimWorld& w = r.w;
    std::vector<uint8_t> other(4096, 0xAB);
    uint32_t k = 0;
    sdr_mr* mr = sdr_mr_reg(w.ctx(1), other.data(), other.size(), SDR_ACCESS_REMOTE_WRITE);
    sdr_mr_lkey_get(mr, &k);
    ASSERT_EQ(sdr_recv_complete(r.rh), SDR_SUCCESS);
    sdr_recv_wr rw{4096, k, reinterpret_cast<uint64_t>(other.data())};
    sdr_recv_handle* rh;
    ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS);  // message 1, slot 1
    ASSERT_EQ(sdr_mr_dereg(mr), SDR_SUCCESS);
    auto h = r.good(1024);
    h.va = 4096;  // slot 1
    h.imm = fw_imm_encode(FW_IMM_DEFAULT_LAYOUT, 1, 0, 0);
    r.deliver(r.frame(h, 1024));
    EXPECT_TRUE(std::all_of(other.begin(), other.end(), [](uint8_t b) { return b == 0xAB; }));
    EXPECT_EQ(w.nic(1).counters().rx_null_key, 1u);
    ASSERT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
}

}  // namespace

TEST(SimTimers, ReArmReplacesTheDeadlineAndFiresOnce)
{
    emu::SimFabric f(emu::FabricParams{});
    emu::Nic& nic = f.nic(0, 2);
    f.arm_timer(nic, 1, 7, 100);
    f.arm_timer(nic, 1, 7, 250);  // re-arm: only this deadline counts
    f.arm_timer(nic, 0, 3, 50);
    f.run_until_idle();
    EXPECT_EQ(nic.worker(0).timer_handler_calls, 1u);
    EXPECT_EQ(nic.worker(1).timer_handler_calls, 1u);
    EXPECT_EQ(f.now_ns(), 250u);
}
