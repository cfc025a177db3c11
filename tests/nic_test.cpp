// The NIC model treats every frame as hostile: each kind of bad frame is a counted drop and
// nothing is written outside the posted buffer; a good frame is placed exactly.
#include "sim_util.hpp"

#include <sdr/emu/fifo_ring.hpp>
#include <sdr/emu/wire.hpp>

#include <sdr_ctrl.h>

#include <algorithm>
#include <cstring>
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
        h.udp_src_port = emu::udp_src_port(w.nic(0).qpn(0), w.nic(1).qpn(0));  // what the peer QP sends from
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
        h.dest_qp ^= 1u << emu::NicIds::kQpnIndexBits;  // the live QP's index, another tag
        cases.push_back({"QPN with a wrong tag", r.frame(h, 1024), emu::RxDrop::UnknownQp});
    }
    {
        auto h = r.good(1024);
        h.rkey = 0x1234;
        cases.push_back({"unknown key", r.frame(h, 1024), emu::RxDrop::UnknownKey});
    }
    {
        auto h = r.good(1024);
        h.rkey ^= 1u << 31;  // the root key's index, another tag
        cases.push_back({"root key with a wrong tag", r.frame(h, 1024), emu::RxDrop::UnknownKey});
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
    // per-QP view: the frames that reached channel QP 0 (two unknown keys, two out-of-bounds,
    // wrong opcode) are its drops; the good one its only packet
    const std::optional<emu::QpCounters> q = r.w.nic(1).qp_counters(0);
    ASSERT_TRUE(q.has_value());
    EXPECT_EQ(q->rx_drops, 5u);
    EXPECT_EQ(q->rx_packets, 1u);
    ASSERT_EQ(sdr_recv_complete(r.rh), SDR_SUCCESS);
}

// Frames that name the right QP and root key with an in-bounds offset, but do not come from
// the connected peer's MAC, IP and UDP source port: dropped before the key is looked at.
TEST(NicHostile, RightQpnAndKeyFromAnotherSenderAreDroppedAsWrongPeer)
{
    Rig r;
    const auto& c = r.w.nic(1).counters();
    struct Case {
        const char* name;
        wire::Headers h;
    };
    std::vector<Case> cases;
    const emu::NicAddress stranger = emu::SimFabric::address_of(7);
    {
        auto h = r.good(1024);
        h.src_mac = stranger.mac;
        cases.push_back({"another source MAC", h});
    }
    {
        auto h = r.good(1024);
        h.src_ip = stranger.ip;
        cases.push_back({"another source IP", h});
    }
    {
        auto h = r.good(1024);
        h.udp_src_port = 0xC000;  // the peer's MAC and IP, a port its QP does not send from
        cases.push_back({"another UDP source port", h});
    }
    {
        auto h = r.good(1024);
        h.udp_src_port = emu::udp_src_port(r.w.nic(0).qpn(1), r.w.nic(1).qpn(1));  // the peer's QP of another channel
        cases.push_back({"the port of another QP of the peer", h});
    }
    {
        auto h = r.good(1024);
        h.src_mac = stranger.mac;
        h.src_ip = stranger.ip;
        h.udp_src_port = 0xC123;
        cases.push_back({"all of a stranger's addresses", h});
    }
    for (const auto& k : cases) {
        SCOPED_TRACE(k.name);
        uint64_t before = c.rx_drop(emu::RxDrop::WrongPeer), cqes = c.rx_cqes, total = c.rx_drops_total();
        r.deliver(r.frame(k.h, 1024));
        EXPECT_EQ(c.rx_drop(emu::RxDrop::WrongPeer), before + 1);
        EXPECT_EQ(c.rx_drops_total(), total + 1) << "one drop, one reason";
        EXPECT_EQ(c.rx_cqes, cqes) << "a dropped frame raises no CQE";
        EXPECT_TRUE(std::all_of(r.buf, r.buf + 2048, [](uint8_t b) { return b == 0xCC; })) << "buffer written";
        EXPECT_TRUE(r.guards_intact());
    }
    EXPECT_EQ(c.rx_placed_bytes, 0u);
    // The payload-free path checks the same cached values.
    emu::PacketMeta m;
    m.opcode = wire::kOpUcWriteOnlyImm;
    m.dest_qp = r.w.nic(1).qpn(0);
    m.rkey = r.w.nic(1).qp_root_key(0);
    m.udp_src_port = emu::udp_src_port(r.w.nic(0).qpn(0), r.w.nic(1).qpn(0));
    m.dma_len = 1024;
    m.imm = fw_imm_encode(FW_IMM_DEFAULT_LAYOUT, 0, 0, 0);
    r.w.nic(1).rx_packet(m, nullptr, stranger);
    EXPECT_EQ(c.rx_drop(emu::RxDrop::WrongPeer), cases.size() + 1);
    EXPECT_EQ(c.rx_cqes, 0u);
    // and the peer itself still gets through
    r.deliver(r.frame(r.good(1024), 1024, 0x42));
    EXPECT_TRUE(std::all_of(r.buf, r.buf + 1024, [](uint8_t b) { return b == 0x42; }));
    EXPECT_TRUE(r.guards_intact());
    EXPECT_EQ(c.rx_cqes, 1u);
    ASSERT_EQ(sdr_recv_complete(r.rh), SDR_SUCCESS);
}

// A transport QP that is not connected takes nothing, whatever a frame says.
TEST(NicHostile, UnconnectedQpAcceptsNothing)
{
    Rig r;
    emu::Nic& nic = r.w.nic(1);
    uint32_t h = nic.qp_create(0, 0);
    ASSERT_NE(h, emu::Nic::kNoHandle);
    nic.qp_bind_root_key(h, nic.qp_root_key(0));  // the live root key of the posted receive
    const auto& c = nic.counters();
    for (uint16_t port : {uint16_t{0}, uint16_t{0xC000}, emu::udp_src_port(r.w.nic(0).qpn(0), nic.qpn(h))}) {
        auto hd = r.good(1024);
        hd.dest_qp = nic.qpn(h);
        hd.udp_src_port = port;
        r.deliver(r.frame(hd, 1024));
    }
    // nor from an all-zero sender (the addresses an unconnected QP holds)
    auto hd = r.good(1024);
    hd.dest_qp = nic.qpn(h);
    hd.src_mac = {};
    hd.src_ip = 0;
    hd.udp_src_port = 0;
    r.deliver(r.frame(hd, 1024));
    EXPECT_EQ(c.rx_drop(emu::RxDrop::WrongPeer), 4u);
    EXPECT_EQ(c.rx_cqes, 0u);
    EXPECT_TRUE(std::all_of(r.buf, r.buf + 2048, [](uint8_t b) { return b == 0xCC; }));
    EXPECT_TRUE(r.guards_intact());
    nic.qp_destroy(h);
    ASSERT_EQ(sdr_recv_complete(r.rh), SDR_SUCCESS);
}

// Control datagrams: only from the connected peer's control QP (DETH source QPN, addresses,
// port), and only to a connected control QP.
TEST(NicHostile, ControlDatagramsFromANonPeerAreDropped)
{
    SimWorld w(config(12, 14, 2));
    emu::Nic& rx = w.nic(1);
    // control QP handle 0 on each NIC belongs to the world's SDR QP
    auto datagram = [&](uint32_t src_qp, const emu::NicAddress& from, uint16_t port, uint32_t dest_qp, uint8_t fillb) {
        wire::Headers h;
        h.opcode = wire::kOpUdSendOnly;
        h.src_mac = from.mac;
        h.dst_mac = rx.address().mac;
        h.src_ip = from.ip;
        h.dst_ip = rx.address().ip;
        h.udp_src_port = port;
        h.dest_qp = dest_qp;
        h.qkey = rx.ctrl_qkey(0);
        h.src_qp = src_qp;
        h.dma_len = 32;
        std::vector<uint8_t> payload(32, fillb), f(wire::frame_bytes_ud_send(32) + 64);
        f.resize(wire::encode(h, payload.data(), 32, f.data(), f.size()));
        w.fabric().inject_frame(1, f, w.fabric().sim().now());
        w.run_until_idle();
    };
    const emu::NicAddress peer = emu::SimFabric::address_of(0), stranger = emu::SimFabric::address_of(9);
    const uint32_t peer_qpn = w.nic(0).ctrl_qpn(0);
    const uint16_t peer_port = emu::udp_src_port(peer_qpn, rx.ctrl_qpn(0));
    datagram(peer_qpn ^ (1u << emu::NicIds::kQpnIndexBits), peer, peer_port, rx.ctrl_qpn(0), 1);  // another source QPN
    datagram(peer_qpn, stranger, peer_port, rx.ctrl_qpn(0), 2);                                   // another host
    emu::NicAddress spoofed_ip = peer;
    spoofed_ip.mac = stranger.mac;
    datagram(peer_qpn, spoofed_ip, peer_port, rx.ctrl_qpn(0), 3);  // the peer's IP from another MAC
    datagram(peer_qpn, peer, 0xC000, rx.ctrl_qpn(0), 4);           // another UDP source port
    const auto& c = rx.counters();
    EXPECT_EQ(c.rx_drop(emu::RxDrop::WrongPeer), 4u);
    EXPECT_EQ(c.rx_ctrl, 0u);
    uint8_t buf[64];
    size_t len = 0;
    EXPECT_EQ(sdr_ctrl_recv(w.qp(1), buf, sizeof buf, &len), SDR_RETRY) << "nothing reached the ring";
    // an unconnected control QP takes nothing, not even from the peer's control QP
    uint32_t lone = rx.ctrl_qp_create();
    ASSERT_NE(lone, emu::Nic::kNoHandle);
    datagram(peer_qpn, peer, peer_port, rx.ctrl_qpn(lone), 5);
    EXPECT_EQ(c.rx_drop(emu::RxDrop::WrongPeer), 5u);
    rx.ctrl_qp_destroy(lone);
    // the peer's own datagram arrives
    datagram(peer_qpn, peer, peer_port, rx.ctrl_qpn(0), 6);
    EXPECT_EQ(c.rx_ctrl, 1u);
    ASSERT_EQ(sdr_ctrl_recv(w.qp(1), buf, sizeof buf, &len), SDR_SUCCESS);
    EXPECT_EQ(len, 32u);
    EXPECT_EQ(buf[0], 6);
}

// The send queue's ring presized with items in it, wrapped round its end: they stay in order,
// and pushes up to the size asked for never move the buffer again (no growth, no new pages).
TEST(NicSendQueue, PresizeKeepsTheOrderAndLaterPushesNeverGrow)
{
    emu::FifoRing<uint64_t> r(8);
    uint64_t next = 0, expect = 0;
    for (int i = 0; i < 6; i++) r.push_slot() = next++;
    for (int i = 0; i < 4; i++) {
        ASSERT_EQ(r.front(), expect++);
        r.pop();
    }
    for (int i = 0; i < 5; i++) r.push_slot() = next++;  // 7 items from slot 4, round the end
    r.presize(100);
    const uint64_t* front = &r.front();
    while (r.size() < 100) r.push_slot() = next++;
    EXPECT_EQ(&r.front(), front) << "the buffer moved: presize left too little room";
    while (!r.empty()) {
        ASSERT_EQ(r.front(), expect++);
        r.pop();
    }
    EXPECT_EQ(expect, next);
}

// A control QP's receive ring holds kCtrlRingDepth datagrams (its entries made as the first
// pass reaches them): one more is a counted drop, and after the host reads some, the next ones
// wrap into the freed entries and come out in arrival order.
TEST(NicCtrl, RingHoldsItsDepthAndKeepsOrderAcrossTheWrap)
{
    SimWorld w(config(12, 14, 2));
    emu::Nic& rx = w.nic(1);
    const emu::NicAddress peer = emu::SimFabric::address_of(0);
    const uint32_t peer_qpn = w.nic(0).ctrl_qpn(0);
    auto send = [&](uint32_t first, uint32_t n) {
        wire::Headers h;
        h.opcode = wire::kOpUdSendOnly;
        h.src_mac = peer.mac;
        h.dst_mac = rx.address().mac;
        h.src_ip = peer.ip;
        h.dst_ip = rx.address().ip;
        h.udp_src_port = emu::udp_src_port(peer_qpn, rx.ctrl_qpn(0));
        h.dest_qp = rx.ctrl_qpn(0);
        h.qkey = rx.ctrl_qkey(0);
        h.src_qp = peer_qpn;
        h.dma_len = 8;
        for (uint32_t k = first; k < first + n; k++) {
            uint8_t payload[8] = {};
            std::memcpy(payload, &k, sizeof k);
            std::vector<uint8_t> f(wire::frame_bytes_ud_send(8) + 64);
            f.resize(wire::encode(h, payload, 8, f.data(), f.size()));
            w.fabric().inject_frame(1, f, w.fabric().sim().now());
        }
        w.run_until_idle();
    };
    auto recv = [&]() -> int64_t {
        uint8_t buf[8];
        if (rx.ctrl_recv(0, buf, sizeof buf) != 8) return -1;
        uint32_t k;
        std::memcpy(&k, buf, sizeof k);
        return k;
    };
    const uint32_t depth = emu::Nic::kCtrlRingDepth;
    send(0, depth + 1);
    const auto& c = rx.counters();
    EXPECT_EQ(c.rx_ctrl, depth);
    EXPECT_EQ(c.rx_drop(emu::RxDrop::CtrlRingFull), 1u);
    EXPECT_EQ(recv(), 0);
    EXPECT_EQ(recv(), 1);
    send(depth + 1, 2);  // into entries 0 and 1 again
    EXPECT_EQ(c.rx_ctrl, depth + 2);
    for (uint32_t k = 2; k < depth; k++) ASSERT_EQ(recv(), k);
    EXPECT_EQ(recv(), depth + 1);
    EXPECT_EQ(recv(), depth + 2);
    EXPECT_EQ(recv(), -1) << "the ring is empty";
}

// QPNs, root keys, lkeys and Q_Keys: the same for one fabric seed (replayable runs), different
// for another, never the sequential numbers of old.
TEST(NicIds, IdentifiersAreStableForOneSeedAndDifferAcrossSeeds)
{
    auto ids_of = [](uint64_t seed) {
        WorldConfig cfg = config(12, 14, 2);
        cfg.fabric.seed = seed;
        SimWorld w(cfg);
        std::vector<uint8_t> region(4096);
        std::vector<uint32_t> v;
        for (int side = 0; side < 2; side++) {
            for (uint32_t h = 0; h < 2 * cfg.channels; h++) v.push_back(w.nic(side).qpn(h));
            v.push_back(w.nic(side).qp_root_key(0));
            v.push_back(w.nic(side).qp_root_key(cfg.channels));  // generation 1
            v.push_back(w.nic(side).ctrl_qpn(0));
            v.push_back(w.nic(side).ctrl_qkey(0));
            v.push_back(w.lkey(side, region.data(), region.size()));
        }
        return v;
    };
    const auto a = ids_of(1), a2 = ids_of(1), b = ids_of(2);
    EXPECT_EQ(a, a2) << "one seed, one set of identifiers";
    ASSERT_EQ(a.size(), b.size());
    size_t same = 0;
    for (size_t i = 0; i < a.size(); i++) same += a[i] == b[i];
    EXPECT_LE(same, 1u) << "another seed draws other identifiers (tags of 10 bits and more)";
    // per side: 16 transport QPNs, 2 root keys, control QPN, Q_Key, lkey
    for (int side = 0; side < 2; side++) {
        for (uint32_t h = 0; h < 16; h++) {
            uint32_t q = a[side * 21 + h];
            EXPECT_EQ(emu::NicIds::qpn_index(q), h) << "the index, for an O(1) lookup";
            EXPECT_LT(q, emu::Nic::kCtrlQpnBase);
            EXPECT_GE(q, 1u << emu::NicIds::kQpnIndexBits) << "a tag above the index, never QP0/QP1";
        }
        EXPECT_GE(a[side * 21 + 18], emu::Nic::kCtrlQpnBase) << "control QPNs keep bit 23";
    }
}

// The generator's promises, drawn many times: index in the low bits, a non-zero tag, never the
// previous identifier; Q_Keys with the controlled-Q_Key bit clear; a real-time NIC's draws
// (getrandom) differ from process to process, so two unseeded sets differ.
// The UDP source port of a connection is Linux's (include/rdma/ib_verbs.h, rdma_get_udp_sport
// without a flow label): the values below were worked out by hand from that formula.
TEST(NicIds, UdpSourcePortIsLinuxsFoldOfBothQpns)
{
    // 0x11 * 0x22 = 0x242: nothing above bit 20 to fold; the flow label's top 6 bits are 0
    EXPECT_EQ(emu::roce_flow_label(0x11, 0x22), 0x242u);
    EXPECT_EQ(emu::udp_src_port(0x11, 0x22), 0xC242);
    // 0x123456 * 0xABCDEF = 0xC379A59BA4A; ^ >>20 (0xC379A5) = 0xC379A9AC3EF; ^ >>40 (0xC)
    // = 0xC379A9AC3E3; 20 bits: 0xAC3E3; 0x03E3 ^ (0xAC000 >> 14 = 0x2B) = 0x3C8
    EXPECT_EQ(emu::roce_flow_label(0x123456, 0xABCDEF), 0xAC3E3u);
    EXPECT_EQ(emu::udp_src_port(0x123456, 0xABCDEF), 0xC3C8);
    // 0xFFFFFF^2 = 0xFFFFFE000001; ^ >>20 (0xFFFFFE0) = 0xFFFFF1FFFFE1; ^ >>40 (0xFF)
    // = 0xFFFFF1FFFF1E; 20 bits: 0xFFF1E; 0x3F1E ^ 0x3F = 0x3F21
    EXPECT_EQ(emu::roce_flow_label(0xFFFFFF, 0xFFFFFF), 0xFFF1Eu);
    EXPECT_EQ(emu::udp_src_port(0xFFFFFF, 0xFFFFFF), 0xFF21);
    EXPECT_EQ(emu::flow_label_udp_src_port(0xFC000), 0xC03F) << "the top 6 bits fold onto the low ones";
    // symmetric: both ends of a connection compute it
    for (uint32_t a : {0x11u, 0x800123u, 0x123456u})
        for (uint32_t b : {0x22u, 0x4567u, 0xABCDEFu}) EXPECT_EQ(emu::udp_src_port(a, b), emu::udp_src_port(b, a));
}

TEST(NicIds, TagsAreNonZeroAndNeverRepeatThePrevious)
{
    emu::NicIds ids(std::optional<uint64_t>{42});
    uint32_t prev_qpn = 0, prev_ctrl = 0, prev_rk = 0, prev_lk = 0;
    for (uint32_t i = 0; i < 20000; i++) {
        uint32_t index = i % 3;  // few entries, many reuses
        uint32_t q = ids.data_qpn(index, prev_qpn), cq = ids.ctrl_qpn(index, prev_ctrl);
        uint32_t rk = ids.root_key(index, prev_rk), lk = ids.lkey(index, prev_lk);
        ASSERT_NE(q, prev_qpn);
        ASSERT_NE(cq, prev_ctrl);
        ASSERT_NE(rk, prev_rk);
        ASSERT_NE(lk, prev_lk);
        ASSERT_EQ(emu::NicIds::qpn_index(q), index);
        ASSERT_EQ(emu::NicIds::qpn_index(cq), index);
        ASSERT_EQ(emu::NicIds::root_key_index(rk), index);
        ASSERT_EQ(emu::NicIds::lkey_index(lk), index);
        ASSERT_LT(q, 0x800000u);
        ASSERT_GE(q, 1u << emu::NicIds::kQpnIndexBits);
        ASSERT_GE(cq, 0x800000u);
        ASSERT_LT(cq, 0xFFFFFFu);
        ASSERT_GE(rk, 1u << emu::NicIds::kRootKeyIndexBits);
        ASSERT_GE(lk, 1u << emu::NicIds::kLkeyIndexBits);
        ASSERT_LT(ids.qkey(), 0x80000000u);
        prev_qpn = q, prev_ctrl = cq, prev_rk = rk, prev_lk = lk;
    }
    emu::NicIds r1(std::nullopt), r2(std::nullopt);
    std::vector<uint32_t> k1, k2;
    for (uint32_t i = 0; i < 8; i++) {
        k1.push_back(r1.root_key(i));
        k2.push_back(r2.root_key(i));
    }
    EXPECT_NE(k1, k2) << "getrandom() draws (a 2^-160 chance of failing)";
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
