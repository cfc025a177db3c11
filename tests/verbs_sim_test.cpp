// The NIC model's verbs QPs on the simulator, every rule asserted by completions, statuses, bytes
// and counters: UC SEND and RDMA WRITE (multi-packet, with immediate, scatter/gather), the PSN
// rules (a gap abandons the message, the next FIRST/ONLY resynchronises), empty receive queues,
// rkey/access/PD/bounds violations that write nothing, UD with its GRH and Q_Key, CQ overflow,
// local protection errors and flushes, loopback and two NICs, loss, duplication and reordering.
#include "sim_util.hpp"

#include <sdr/emu/fabric.hpp>
#include <sdr/emu/verbs_engine.hpp>
#include <sdr/emu/wire.hpp>

#include <sdr/hal/hal.h>

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

using namespace sdr::emu;
using namespace sdr::emu::verbs;

namespace {

using sdr::test::pattern;

// One verbs endpoint: a PD, a send CQ, a receive CQ and a QP on a NIC.
struct Ep {
    Nic* nic = nullptr;
    uint32_t pd = 0, scq = 0, rcq = 0, qp = 0;
    uint32_t qpn() const { return nic->verbs().qpn(qp); }
    uint32_t reg(std::vector<uint8_t>& v, uint32_t access = kLocalWrite | kRemoteWrite) const
    {
        return nic->verbs().mr_reg(pd, v.data(), v.size(), access);
    }
    std::vector<Wc> poll(uint32_t cq)
    {
        std::vector<Wc> out;
        Wc wc[16];
        int n;
        while ((n = nic->verbs().cq_poll(cq, wc, 16)) > 0) out.insert(out.end(), wc, wc + n);
        return out;
    }
};

Ep make_ep(Nic& nic, QpType type, uint32_t cq_depth = 1024, uint32_t depth = 512)
{
    Ep e;
    e.nic = &nic;
    e.pd = nic.verbs().pd_alloc();
    e.scq = nic.verbs().cq_create(cq_depth);
    e.rcq = nic.verbs().cq_create(cq_depth);
    e.qp = nic.verbs().qp_create(type, e.pd, e.scq, e.rcq, depth, depth);
    EXPECT_NE(e.qp, Nic::kNoHandle);
    return e;
}

// RESET -> INIT -> RTR -> RTS for a UC QP towards `to`.
void connect_uc(Ep& e, const Ep& to, uint32_t mtu, uint32_t my_psn, uint32_t peer_psn,
                uint32_t access = kLocalWrite | kRemoteWrite)
{
    QpAttr a;
    a.state = QpState::Init;
    a.access = access;
    ASSERT_EQ(e.nic->verbs().qp_modify(e.qp, a, QpAttr::kState | QpAttr::kAccess), 0);
    a.state = QpState::Rtr;
    a.path_mtu = mtu;
    a.dest_qpn = to.qpn();
    a.rq_psn = peer_psn;
    a.remote_gid = gid_from_ipv4(to.nic->address().ip);
    ASSERT_EQ(e.nic->verbs().qp_modify(e.qp, a, QpAttr::kState | QpAttr::kPathMtu | QpAttr::kDestQpn |
                                                  QpAttr::kRqPsn | QpAttr::kAv),
              0);
    a.state = QpState::Rts;
    a.sq_psn = my_psn;
    ASSERT_EQ(e.nic->verbs().qp_modify(e.qp, a, QpAttr::kState | QpAttr::kSqPsn), 0);
    EXPECT_EQ(e.nic->verbs().qp_state(e.qp), QpState::Rts);
}

void ready_ud(Ep& e, uint32_t qkey)
{
    QpAttr a;
    a.state = QpState::Init;
    a.qkey = qkey;
    ASSERT_EQ(e.nic->verbs().qp_modify(e.qp, a, QpAttr::kState | QpAttr::kQkey), 0);
    a.state = QpState::Rtr;
    ASSERT_EQ(e.nic->verbs().qp_modify(e.qp, a, QpAttr::kState), 0);
    a.state = QpState::Rts;
    ASSERT_EQ(e.nic->verbs().qp_modify(e.qp, a, QpAttr::kState | QpAttr::kSqPsn), 0);
}

RecvWr recv_wr(uint64_t id, std::initializer_list<Sge> sges)
{
    RecvWr r;
    r.wr_id = id;
    for (const Sge& s : sges) r.sg[r.num_sge++] = s;
    return r;
}

Sge sge(const std::vector<uint8_t>& v, uint32_t key, size_t off, size_t len)
{
    return Sge{reinterpret_cast<uint64_t>(v.data() + off), static_cast<uint32_t>(len), key};
}

FabricParams params()
{
    FabricParams p;
    p.link.rtt_ms = 0.01;
    p.payload = true;
    return p;
}

uint64_t drops(const Nic& n, RxDrop d) { return n.counters().rx_drop(d); }

// A UC pair on two NICs (or one NIC: loopback).
struct UcPair {
    SimFabric f;
    Ep a, b;
    explicit UcPair(bool loopback, uint32_t mtu = 1024, FabricParams p = params()) : f(p)
    {
        Nic& na = f.nic(0, 1);
        Nic& nb = loopback ? na : f.nic(1, 1);
        a = make_ep(na, QpType::Uc);
        b = make_ep(nb, QpType::Uc);
        connect_uc(a, b, mtu, 100, 5000);
        connect_uc(b, a, mtu, 5000, 100);
    }
};

// WRITE with immediate of 10003 bytes gathered from two SGEs into b's region (10 packets at MTU
// 1024, the last padded), then a SEND with immediate scattered over three receive SGEs.
void write_and_send(UcPair& t)
{
    std::vector<uint8_t> src = pattern(20000, 1), dst(12000, 0xEE), rbuf(12000, 0xDD);
    uint32_t skey = t.a.reg(src, kLocalWrite), dkey = t.b.reg(dst), rkey = t.b.reg(rbuf, kLocalWrite);
    ASSERT_NE(skey, 0u);
    ASSERT_NE(dkey, 0u);
    ASSERT_NE(rkey, 0u);
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(7, {sge(rbuf, rkey, 0, 12000)})), 0);

    SendWr w;
    w.wr_id = 0xAB;
    w.opcode = WrOpcode::RdmaWriteWithImm;
    w.imm = 0xC0FFEE;
    w.num_sge = 2;
    w.sg[0] = sge(src, skey, 0, 6001);
    w.sg[1] = sge(src, skey, 8000, 4002);
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data() + 1000);
    w.rkey = dkey;
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, w), 0);
    t.f.run_until_idle();

    std::vector<uint8_t> want(10003);
    std::copy(src.begin(), src.begin() + 6001, want.begin());
    std::copy(src.begin() + 8000, src.begin() + 12002, want.begin() + 6001);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), dst.begin() + 1000)) << "written byte-exact";
    EXPECT_TRUE(std::all_of(dst.begin(), dst.begin() + 1000, [](uint8_t c) { return c == 0xEE; }));
    EXPECT_TRUE(std::all_of(dst.begin() + 11003, dst.end(), [](uint8_t c) { return c == 0xEE; }));
    auto rw = t.b.poll(t.b.rcq);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].wr_id, 7u);
    EXPECT_EQ(rw[0].status, WcStatus::Success);
    EXPECT_EQ(rw[0].opcode, WcOpcode::RecvRdmaWithImm);
    EXPECT_TRUE(rw[0].with_imm);
    EXPECT_EQ(rw[0].imm, 0xC0FFEEu);
    EXPECT_EQ(rw[0].byte_len, 10003u);
    EXPECT_EQ(rw[0].qp_num, t.b.qpn());
    EXPECT_TRUE(std::all_of(rbuf.begin(), rbuf.end(), [](uint8_t c) { return c == 0xDD; })) << "WRITE fills no receive buffer";
    auto sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].wr_id, 0xABu);
    EXPECT_EQ(sw[0].status, WcStatus::Success);
    EXPECT_EQ(sw[0].opcode, WcOpcode::RdmaWrite);

    // SEND with immediate, 5000 bytes (5 packets) into three SGEs of 100, 3000 and 8000 bytes.
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(8, {sge(rbuf, rkey, 0, 100), sge(rbuf, rkey, 200, 3000),
                                                            sge(rbuf, rkey, 4000, 8000)})),
              0);
    SendWr s;
    s.wr_id = 0xCD;
    s.opcode = WrOpcode::SendWithImm;
    s.imm = 0x12345678;
    s.num_sge = 1;
    s.sg[0] = sge(src, skey, 100, 5000);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, s), 0);
    t.f.run_until_idle();
    rw = t.b.poll(t.b.rcq);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].wr_id, 8u);
    EXPECT_EQ(rw[0].status, WcStatus::Success);
    EXPECT_EQ(rw[0].opcode, WcOpcode::Recv);
    EXPECT_EQ(rw[0].imm, 0x12345678u);
    EXPECT_EQ(rw[0].byte_len, 5000u);
    EXPECT_TRUE(std::equal(src.begin() + 100, src.begin() + 200, rbuf.begin()));
    EXPECT_TRUE(std::equal(src.begin() + 200, src.begin() + 3200, rbuf.begin() + 200));
    EXPECT_TRUE(std::equal(src.begin() + 3200, src.begin() + 5100, rbuf.begin() + 4000));
    EXPECT_TRUE(std::all_of(rbuf.begin() + 100, rbuf.begin() + 200, [](uint8_t c) { return c == 0xDD; }));
    EXPECT_TRUE(std::all_of(rbuf.begin() + 5900, rbuf.end(), [](uint8_t c) { return c == 0xDD; }));
    sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].opcode, WcOpcode::Send);

    const auto* bc = t.b.nic->verbs().qp_counters(t.b.qp);
    EXPECT_EQ(bc->rx_packets, 10u + 5u);
    EXPECT_EQ(bc->rx_messages, 2u);
    EXPECT_EQ(bc->rx_drops, 0u);
    EXPECT_EQ(t.a.nic->verbs().qp_counters(t.a.qp)->tx_packets, 15u);
    EXPECT_EQ(t.b.nic->counters().rx_drops_total(), 0u);
}

}  // namespace

TEST(VerbsUc, MultiPacketWriteAndSendWithImmediateTwoNics)
{
    UcPair t(false);
    write_and_send(t);
}

TEST(VerbsUc, LoopbackTwoQpsOnOneNic)
{
    UcPair t(true);
    write_and_send(t);
    EXPECT_EQ(t.f.find_nic(1), nullptr) << "no second NIC";
}

TEST(VerbsUc, WriteWithoutImmediateCompletesNoReceive)
{
    UcPair t(false, 256);
    std::vector<uint8_t> src = pattern(1000, 2), dst(1000, 0);
    uint32_t skey = t.a.reg(src, kLocalWrite), dkey = t.b.reg(dst);
    SendWr w;
    w.opcode = WrOpcode::RdmaWrite;
    w.num_sge = 1;
    w.sg[0] = sge(src, skey, 0, 1000);
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    w.rkey = dkey;
    w.signaled = false;
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, w), 0);
    t.f.run_until_idle();
    EXPECT_EQ(dst, src);
    EXPECT_TRUE(t.b.poll(t.b.rcq).empty());
    EXPECT_TRUE(t.a.poll(t.a.scq).empty()) << "unsignalled";
    EXPECT_EQ(t.b.nic->verbs().qp_counters(t.b.qp)->rx_packets, 4u);
}

// Packets gathered from two SGEs, one per WRITE, leaving within one turn of the simulator's
// port (it takes up to 64 packets before it hands them to the links): each carries its own
// bytes, although the NIC gathers every such packet into the same buffer.
TEST(VerbsUc, GatheredPacketsOfOneTurnCarryTheirOwnBytes)
{
    UcPair t(false);
    std::vector<uint8_t> src = pattern(8000, 3), dst(8000, 0);
    uint32_t skey = t.a.reg(src, kLocalWrite), dkey = t.b.reg(dst);
    for (size_t i = 0; i < 4; i++) {
        SendWr w;
        w.opcode = WrOpcode::RdmaWrite;
        w.num_sge = 2;
        w.sg[0] = sge(src, skey, 2000 * i, 100);
        w.sg[1] = sge(src, skey, 2000 * i + 500, 100);
        w.remote_addr = reinterpret_cast<uint64_t>(dst.data() + 2000 * i);
        w.rkey = dkey;
        ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, w), 0);
    }
    t.f.run_until_idle();
    for (size_t i = 0; i < 4; i++) {
        EXPECT_TRUE(std::equal(src.begin() + 2000 * i, src.begin() + 2000 * i + 100, dst.begin() + 2000 * i)) << i;
        EXPECT_TRUE(std::equal(src.begin() + 2000 * i + 500, src.begin() + 2000 * i + 600, dst.begin() + 2000 * i + 100))
            << i;
    }
}

namespace {

// Frames from a's NIC to b's QP, built by hand: a PSN sequence exactly as a test wants it.
struct Injector {
    UcPair& t;
    wire::Headers base() const
    {
        wire::Headers h;
        h.src_mac = t.a.nic->address().mac;
        h.dst_mac = t.b.nic->address().mac;
        h.src_ip = t.a.nic->address().ip;
        h.dst_ip = t.b.nic->address().ip;
        h.udp_src_port = udp_src_port(t.a.qpn(), t.b.qpn());
        h.dest_qp = t.b.qpn();
        h.pad = true;
        return h;
    }
    void send(uint8_t op, uint32_t psn, const uint8_t* p, uint32_t len, uint32_t imm = 0, uint64_t va = 0,
              uint32_t rkey = 0, uint32_t dma_len = 0)
    {
        wire::Headers h = base();
        h.opcode = op;
        h.psn = psn;
        h.imm = imm;
        h.va = va;
        h.rkey = rkey;
        h.dma_len = dma_len;
        std::vector<uint8_t> f(wire::frame_bytes(op, len, true));
        ASSERT_EQ(wire::encode(h, p, len, f.data(), f.size()), f.size());
        t.f.inject_frame(t.b.nic->index(), f, t.f.sim().now());
        t.f.run_until_idle();
    }
};

}  // namespace

TEST(VerbsUc, PsnGapAbandonsTheMessageAndTheNextOneCompletes)
{
    UcPair t(false, 256);
    Injector in{t};
    std::vector<uint8_t> rbuf(2048, 0), msg = pattern(1024, 3);
    uint32_t rkey = t.b.reg(rbuf, kLocalWrite);
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(1, {sge(rbuf, rkey, 0, 2048)})), 0);
    const uint8_t* m = msg.data();
    // message 1: FIRST 5000, MIDDLE 5001, (5002 lost), LAST 5003
    in.send(wire::kOpUcSendFirst, 5000, m, 256);
    in.send(wire::kOpUcSendMiddle, 5001, m + 256, 256);
    in.send(wire::kOpUcSendLastImm, 5003, m + 768, 256, 1);
    EXPECT_TRUE(t.b.poll(t.b.rcq).empty()) << "the message with a gap never completes";
    EXPECT_EQ(drops(*t.b.nic, RxDrop::PsnSequence), 1u);
    EXPECT_EQ(t.b.nic->verbs().qp_counters(t.b.qp)->rx_aborted, 1u);
    // a MIDDLE after the gap is dropped too, until a FIRST/ONLY
    in.send(wire::kOpUcSendMiddle, 5004, m, 256);
    EXPECT_EQ(drops(*t.b.nic, RxDrop::PsnSequence), 2u);
    // message 2 resynchronises at its FIRST (PSN 5006: after another gap) and completes into
    // the same receive WQE, which the abandoned message did not use up
    in.send(wire::kOpUcSendFirst, 5006, m, 256);
    in.send(wire::kOpUcSendLastImm, 5007, m + 256, 100, 2);
    auto wc = t.b.poll(t.b.rcq);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].wr_id, 1u);
    EXPECT_EQ(wc[0].status, WcStatus::Success);
    EXPECT_EQ(wc[0].imm, 2u);
    EXPECT_EQ(wc[0].byte_len, 356u);
    EXPECT_TRUE(std::equal(m, m + 356, rbuf.begin()));
    // a duplicate (behind ePSN) is dropped and counted, and does not disturb the next message
    in.send(wire::kOpUcSendOnly, 5007, m, 4);
    EXPECT_EQ(drops(*t.b.nic, RxDrop::Duplicate), 1u);
    EXPECT_TRUE(t.b.poll(t.b.rcq).empty());
    // a WRITE MIDDLE inside a SEND: abandoned and dropped
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(3, {sge(rbuf, rkey, 0, 2048)})), 0);
    in.send(wire::kOpUcSendFirst, 5008, m, 256);
    in.send(wire::kOpUcWriteMiddle, 5009, m, 256);
    EXPECT_EQ(drops(*t.b.nic, RxDrop::PsnSequence), 3u);
    // a FIRST shorter than the MTU is malformed
    in.send(wire::kOpUcSendFirst, 5010, m, 128);
    EXPECT_EQ(drops(*t.b.nic, RxDrop::BadLength), 1u);
    in.send(wire::kOpUcSendOnly, 5011, m, 8);
    wc = t.b.poll(t.b.rcq);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].wr_id, 3u);
    EXPECT_EQ(wc[0].byte_len, 8u);
    EXPECT_FALSE(wc[0].with_imm);
}

TEST(VerbsUc, EmptyReceiveQueueIsACountedDrop)
{
    UcPair t(false, 512);
    std::vector<uint8_t> src = pattern(3000, 4), rbuf(4096, 0), dst(4096, 0x11);
    uint32_t skey = t.a.reg(src, kLocalWrite), rkey = t.b.reg(rbuf, kLocalWrite), dkey = t.b.reg(dst);
    SendWr s;
    s.wr_id = 1;
    s.num_sge = 1;
    s.sg[0] = sge(src, skey, 0, 3000);  // 6 packets
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, s), 0);
    SendWr w;  // WRITE with immediate: also needs a receive WQE (checked before its last bytes)
    w.wr_id = 2;
    w.opcode = WrOpcode::RdmaWriteWithImm;
    w.num_sge = 1;
    w.sg[0] = sge(src, skey, 0, 100);
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    w.rkey = dkey;
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, w), 0);
    t.f.run_until_idle();
    EXPECT_EQ(drops(*t.b.nic, RxDrop::NoRecvWqe), 2u) << "the SEND's FIRST and the WRITE's ONLY";
    EXPECT_EQ(drops(*t.b.nic, RxDrop::PsnSequence), 5u) << "the rest of the abandoned SEND";
    EXPECT_TRUE(t.b.poll(t.b.rcq).empty());
    EXPECT_TRUE(std::all_of(rbuf.begin(), rbuf.end(), [](uint8_t c) { return c == 0; }));
    EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](uint8_t c) { return c == 0x11; }));
    auto sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 2u) << "UC: the sender completes regardless";
    EXPECT_EQ(sw[0].status, WcStatus::Success);
    // with a receive posted the same SEND arrives
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(9, {sge(rbuf, rkey, 0, 4096)})), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, s), 0);
    t.f.run_until_idle();
    auto rw = t.b.poll(t.b.rcq);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].byte_len, 3000u);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), rbuf.begin()));
}

TEST(VerbsUc, RkeyAccessPdAndBoundsViolationsWriteNothing)
{
    UcPair t(false, 1024);
    std::vector<uint8_t> src = pattern(4096, 5), dst(8192, 0x5A), ro(4096, 0x5B), other(4096, 0x5C);
    uint32_t skey = t.a.reg(src, kLocalWrite);
    uint32_t dkey = t.b.reg(dst);
    uint32_t rokey = t.b.reg(ro, kLocalWrite);  // no remote write
    uint32_t other_pd = t.b.nic->verbs().pd_alloc();
    uint32_t okey = t.b.nic->verbs().mr_reg(other_pd, other.data(), other.size(), kLocalWrite | kRemoteWrite);
    EXPECT_EQ(t.b.nic->verbs().mr_reg(t.b.pd, ro.data(), ro.size(), kRemoteWrite), 0u)
        << "remote write without local write is refused";
    auto write = [&](uint64_t va, uint32_t rkey, uint32_t len) {
        SendWr w;
        w.opcode = WrOpcode::RdmaWrite;
        w.num_sge = 1;
        w.sg[0] = sge(src, skey, 0, len);
        w.remote_addr = va;
        w.rkey = rkey;
        ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, w), 0);
        t.f.run_until_idle();
    };
    const uint64_t d = reinterpret_cast<uint64_t>(dst.data());
    write(d, dkey ^ 0x10000, 3000);  // a key that is not live (another tag)
    EXPECT_EQ(drops(*t.b.nic, RxDrop::UnknownKey), 1u) << "the FIRST; its MIDDLE and LAST find no message";
    EXPECT_EQ(drops(*t.b.nic, RxDrop::PsnSequence), 2u);
    write(reinterpret_cast<uint64_t>(ro.data()), rokey, 100);
    write(reinterpret_cast<uint64_t>(other.data()), okey, 100);
    EXPECT_EQ(drops(*t.b.nic, RxDrop::AccessDenied), 2u);
    write(d + 8192 - 2048, dkey, 3000);  // runs past the region's end
    write(d - 1, dkey, 100);             // starts before it
    EXPECT_EQ(drops(*t.b.nic, RxDrop::OutOfBounds), 2u);
    EXPECT_EQ(drops(*t.b.nic, RxDrop::PsnSequence), 4u) << "the MIDDLE/LAST of the abandoned multi-packet WRITEs";
    EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](uint8_t c) { return c == 0x5A; }));
    EXPECT_TRUE(std::all_of(ro.begin(), ro.end(), [](uint8_t c) { return c == 0x5B; }));
    EXPECT_TRUE(std::all_of(other.begin(), other.end(), [](uint8_t c) { return c == 0x5C; }));
    EXPECT_EQ(t.b.nic->verbs().qp_counters(t.b.qp)->rx_packets, 0u);

    // The QP itself without remote write: refused even for a region that allows it.
    QpAttr a;
    a.access = kLocalWrite;
    ASSERT_EQ(t.b.nic->verbs().qp_modify(t.b.qp, a, QpAttr::kAccess), 0);
    write(d, dkey, 100);
    EXPECT_EQ(drops(*t.b.nic, RxDrop::AccessDenied), 3u);
    EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](uint8_t c) { return c == 0x5A; }));
    // and a deregistered region is an unknown key
    a.access = kLocalWrite | kRemoteWrite;
    ASSERT_EQ(t.b.nic->verbs().qp_modify(t.b.qp, a, QpAttr::kAccess), 0);
    ASSERT_EQ(t.b.nic->verbs().mr_dereg(dkey), 0);
    write(d, dkey, 100);
    EXPECT_EQ(drops(*t.b.nic, RxDrop::UnknownKey), 2u);
    EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](uint8_t c) { return c == 0x5A; }));
}

TEST(VerbsUc, FrameFromAnotherHostIsDropped)
{
    UcPair t(false, 256);
    Injector in{t};
    std::vector<uint8_t> rbuf(256, 0);
    uint32_t rkey = t.b.reg(rbuf, kLocalWrite);
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(1, {sge(rbuf, rkey, 0, 256)})), 0);
    wire::Headers h = in.base();
    h.src_ip = 0x0A0000FE;  // not the connected peer
    h.opcode = wire::kOpUcSendOnly;
    h.psn = 5000;
    std::vector<uint8_t> p(16, 0x77), f(wire::frame_bytes(h.opcode, 16, true));
    ASSERT_EQ(wire::encode(h, p.data(), 16, f.data(), f.size()), f.size());
    t.f.inject_frame(1, f, 0);
    t.f.run_until_idle();
    EXPECT_EQ(drops(*t.b.nic, RxDrop::WrongPeer), 1u);
    EXPECT_TRUE(t.b.poll(t.b.rcq).empty());
    EXPECT_TRUE(std::all_of(rbuf.begin(), rbuf.end(), [](uint8_t c) { return c == 0; }));
}

TEST(VerbsUc, UnknownQpnOtherTransportAndUnreadyQpAreDropped)
{
    UcPair t(false, 256);
    Injector in{t};
    std::vector<uint8_t> rbuf(256, 0), p(16, 0x77);
    uint32_t rkey = t.b.reg(rbuf, kLocalWrite);
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(1, {sge(rbuf, rkey, 0, 256)})), 0);
    auto frame = [&](uint8_t op, uint32_t qpn) {
        wire::Headers h = in.base();
        h.opcode = op;
        h.dest_qp = qpn;
        h.psn = 5000;
        std::vector<uint8_t> f(wire::frame_bytes(op, 16, true));
        EXPECT_EQ(wire::encode(h, p.data(), 16, f.data(), f.size()), f.size());
        t.f.inject_frame(1, f, t.f.sim().now());
        t.f.run_until_idle();
    };
    frame(wire::kOpUcSendOnly, t.b.qpn() ^ (1u << 13));  // another tag
    EXPECT_EQ(drops(*t.b.nic, RxDrop::UnknownQp), 1u);
    frame(wire::kOpUdSendOnly, t.b.qpn());  // UD to a UC QP
    EXPECT_EQ(drops(*t.b.nic, RxDrop::WrongOpcode), 1u);
    QpAttr a;
    a.state = QpState::Reset;
    ASSERT_EQ(t.b.nic->verbs().qp_modify(t.b.qp, a, QpAttr::kState), 0);
    frame(wire::kOpUcSendOnly, t.b.qpn());
    EXPECT_EQ(drops(*t.b.nic, RxDrop::QpNotReady), 1u);
    EXPECT_TRUE(std::all_of(rbuf.begin(), rbuf.end(), [](uint8_t c) { return c == 0; }));
    EXPECT_TRUE(t.b.poll(t.b.rcq).empty());
}

TEST(VerbsUc, ReceiveShorterThanTheMessageCompletesWithLengthError)
{
    UcPair t(false, 256);
    std::vector<uint8_t> src = pattern(1000, 6), rbuf(1024, 0);
    uint32_t skey = t.a.reg(src, kLocalWrite), rkey = t.b.reg(rbuf, kLocalWrite);
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(4, {sge(rbuf, rkey, 0, 600)})), 0);
    SendWr s;
    s.num_sge = 1;
    s.sg[0] = sge(src, skey, 0, 1000);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, s), 0);
    t.f.run_until_idle();
    auto rw = t.b.poll(t.b.rcq);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].wr_id, 4u);
    EXPECT_EQ(rw[0].status, WcStatus::LocLenErr);
    EXPECT_TRUE(std::equal(src.begin(), src.begin() + 512, rbuf.begin())) << "the packets that fit";
    EXPECT_TRUE(std::all_of(rbuf.begin() + 600, rbuf.end(), [](uint8_t c) { return c == 0; })) << "nothing past the WQE";
}

TEST(VerbsQp, LocalProtectionErrorMovesTheQpToErrorAndFlushes)
{
    UcPair t(false, 256);
    std::vector<uint8_t> src = pattern(256, 7), rbuf(256, 0);
    uint32_t skey = t.a.reg(src, kLocalWrite);
    uint32_t rkey = t.a.reg(rbuf, kLocalWrite);
    ASSERT_EQ(t.a.nic->verbs().post_recv(t.a.qp, recv_wr(50, {sge(rbuf, rkey, 0, 256)})), 0);
    SendWr bad;
    bad.wr_id = 1;
    bad.num_sge = 1;
    bad.sg[0] = sge(src, skey, 1, 256);  // one byte past the region
    SendWr good = bad;
    good.wr_id = 2;
    good.sg[0] = sge(src, skey, 0, 256);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, bad), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, good), 0);
    t.f.run_until_idle();
    EXPECT_EQ(t.a.nic->verbs().qp_state(t.a.qp), QpState::Err);
    auto sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 2u);
    EXPECT_EQ(sw[0].wr_id, 1u);
    EXPECT_EQ(sw[0].status, WcStatus::LocProtErr);
    EXPECT_EQ(sw[1].wr_id, 2u);
    EXPECT_EQ(sw[1].status, WcStatus::WrFlushErr);
    auto rw = t.a.poll(t.a.rcq);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].wr_id, 50u);
    EXPECT_EQ(rw[0].status, WcStatus::WrFlushErr);
    EXPECT_EQ(t.a.nic->counters().tx_frames, 0u) << "nothing left the port";
    EXPECT_EQ(t.a.nic->counters().tx_local_errors, 1u);
    // posting in ERR completes flushed at once
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, good), 0);
    sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].status, WcStatus::WrFlushErr);
}

TEST(VerbsQp, StateMachineRefusesMissingAttributesAndBadTransitions)
{
    SimFabric f(params());
    Nic& n = f.nic(0, 1);
    Ep e = make_ep(n, QpType::Uc);
    QpAttr a;
    SendWr s;
    EXPECT_EQ(n.verbs().post_send(e.qp, s), EINVAL) << "RESET";
    EXPECT_EQ(n.verbs().post_recv(e.qp, RecvWr{}), EINVAL) << "RESET";
    a.state = QpState::Rtr;
    EXPECT_EQ(n.verbs().qp_modify(e.qp, a, QpAttr::kState), EINVAL) << "RESET -> RTR";
    a.state = QpState::Init;
    EXPECT_EQ(n.verbs().qp_modify(e.qp, a, QpAttr::kState), EINVAL) << "UC INIT needs access flags";
    EXPECT_EQ(n.verbs().qp_modify(e.qp, a, QpAttr::kState | QpAttr::kAccess), 0);
    EXPECT_EQ(n.verbs().post_recv(e.qp, RecvWr{}), 0) << "receives may be posted in INIT";
    a.state = QpState::Rtr;
    EXPECT_EQ(n.verbs().qp_modify(e.qp, a, QpAttr::kState | QpAttr::kPathMtu), EINVAL) << "no destination";
    a.path_mtu = 1000;
    a.remote_gid = gid_from_ipv4(n.address().ip);
    const uint32_t rtr = QpAttr::kState | QpAttr::kPathMtu | QpAttr::kDestQpn | QpAttr::kRqPsn | QpAttr::kAv;
    EXPECT_EQ(n.verbs().qp_modify(e.qp, a, rtr), EINVAL) << "MTU not a power of two";
    a.path_mtu = 4096;
    a.remote_gid = gid_from_ipv4(0x0B000001);
    EXPECT_EQ(n.verbs().qp_modify(e.qp, a, rtr), EINVAL) << "GID that resolves to no NIC";
    a.remote_gid = gid_from_ipv4(n.address().ip);
    EXPECT_EQ(n.verbs().qp_modify(e.qp, a, rtr), 0);
    EXPECT_EQ(n.verbs().post_send(e.qp, s), EINVAL) << "RTR";
    a.state = QpState::Rts;
    EXPECT_EQ(n.verbs().qp_modify(e.qp, a, QpAttr::kState), EINVAL) << "RTS needs the send PSN";
    EXPECT_EQ(n.verbs().qp_modify(e.qp, a, QpAttr::kState | QpAttr::kSqPsn), 0);
    a.state = QpState::Reset;
    EXPECT_EQ(n.verbs().qp_modify(e.qp, a, QpAttr::kState), 0);
    EXPECT_EQ(n.verbs().qp_state(e.qp), QpState::Reset);
    EXPECT_EQ(n.verbs().pd_dealloc(e.pd), EBUSY);
    EXPECT_EQ(n.verbs().cq_destroy(e.scq), EBUSY);
    EXPECT_EQ(n.verbs().qp_destroy(e.qp), 0);
    EXPECT_EQ(n.verbs().cq_destroy(e.scq), 0);
    EXPECT_EQ(n.verbs().pd_dealloc(e.pd), 0);
}

TEST(VerbsQp, QpnsAreRandomAndInTheVerbsHalfOfTheControlSpace)
{
    SimFabric f(params());
    Nic& n = f.nic(0, 1);
    Ep a = make_ep(n, QpType::Uc), b = make_ep(n, QpType::Ud);
    for (uint32_t q : {a.qpn(), b.qpn()}) {
        EXPECT_TRUE(q & NicIds::kCtrlQpnBit);
        EXPECT_TRUE(q & Nic::kVerbsQpnBit);
        EXPECT_NE(q >> NicIds::kQpnIndexBits, NicIds::kCtrlQpnBit >> NicIds::kQpnIndexBits) << "random tag bits";
    }
    uint32_t old = a.qpn();
    ASSERT_EQ(n.verbs().qp_destroy(a.qp), 0);
    uint32_t again = n.verbs().qp_create(QpType::Uc, a.pd, a.scq, a.rcq, 4, 4);
    EXPECT_EQ(again, a.qp) << "the entry is reused";
    EXPECT_NE(n.verbs().qpn(again), old) << "with another QPN";
    uint32_t c = n.ctrl_qp_create();
    EXPECT_FALSE(n.ctrl_qpn(c) & Nic::kVerbsQpnBit) << "control QPs keep the lower half";
}

TEST(VerbsCq, OverflowPutsTheCqInError)
{
    UcPair t(false, 256);
    Ep& a = t.a;
    uint32_t small = a.nic->verbs().cq_create(2);
    uint32_t qp = a.nic->verbs().qp_create(QpType::Uc, a.pd, small, small, 8, 8);
    QpAttr at;
    at.state = QpState::Init;
    ASSERT_EQ(a.nic->verbs().qp_modify(qp, at, QpAttr::kState | QpAttr::kAccess), 0);
    for (uint64_t i = 0; i < 3; i++) ASSERT_EQ(a.nic->verbs().post_recv(qp, recv_wr(i, {})), 0);
    at.state = QpState::Err;  // flushes three receives into a CQ of two
    ASSERT_EQ(a.nic->verbs().qp_modify(qp, at, QpAttr::kState), 0);
    EXPECT_TRUE(a.nic->verbs().cq_overflowed(small));
    EXPECT_EQ(a.nic->verbs().cq_errors(), 1u);
    Wc wc[4];
    EXPECT_EQ(a.nic->verbs().cq_poll(small, wc, 4), 2) << "what it held is still handed out";
    EXPECT_EQ(wc[0].wr_id, 0u);
    EXPECT_EQ(wc[1].wr_id, 1u);
    EXPECT_EQ(a.nic->verbs().cq_poll(small, wc, 4), -1) << "then the CQ is in error";
}

namespace {

struct UdPair {
    SimFabric f;
    Ep a, b;
    uint32_t ah = 0;
    static constexpr uint32_t kQkeyA = 0x1111, kQkeyB = 0x22222;
    explicit UdPair(bool loopback, FabricParams p = params()) : f(p)
    {
        Nic& na = f.nic(0, 1);
        Nic& nb = loopback ? na : f.nic(1, 1);
        a = make_ep(na, QpType::Ud);
        b = make_ep(nb, QpType::Ud);
        ready_ud(a, kQkeyA);
        ready_ud(b, kQkeyB);
        ah = na.verbs().ah_create(a.pd, gid_from_ipv4(nb.address().ip));
        EXPECT_NE(ah, Nic::kNoHandle);
    }
    SendWr send(const std::vector<uint8_t>& src, uint32_t key, uint32_t len, uint32_t qkey) const
    {
        SendWr s;
        s.num_sge = 1;
        s.sg[0] = sge(src, key, 0, len);
        s.ah = ah;
        s.remote_qpn = b.qpn();
        s.remote_qkey = qkey;
        return s;
    }
};

uint16_t ip_sum(const uint8_t* ip)
{
    uint32_t s = 0;
    for (int i = 0; i < 20; i += 2) s += uint32_t(ip[i]) << 8 | ip[i + 1];
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    return static_cast<uint16_t>(s);
}

void ud_grh(bool loopback)
{
    UdPair t(loopback);
    std::vector<uint8_t> src = pattern(4096, 8), rbuf(8192, 0xAA);
    uint32_t skey = t.a.reg(src, kLocalWrite), rkey = t.b.reg(rbuf, kLocalWrite);
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(77, {sge(rbuf, rkey, 0, 40 + 4096)})), 0);
    SendWr s = t.send(src, skey, 1001, UdPair::kQkeyB);
    s.opcode = WrOpcode::SendWithImm;
    s.imm = 0xFEEDF00D;
    s.wr_id = 5;
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, s), 0);
    t.f.run_until_idle();
    auto rw = t.b.poll(t.b.rcq);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].wr_id, 77u);
    EXPECT_EQ(rw[0].status, WcStatus::Success);
    EXPECT_EQ(rw[0].byte_len, 40u + 1001);
    EXPECT_TRUE(rw[0].grh);
    EXPECT_TRUE(rw[0].with_imm);
    EXPECT_EQ(rw[0].imm, 0xFEEDF00Du);
    EXPECT_EQ(rw[0].src_qp, t.a.qpn());
    // GRH: 20 bytes of zero, then the IPv4 header byte by byte
    for (int i = 0; i < 20; i++) EXPECT_EQ(rbuf[i], 0) << "GRH byte " << i;
    const uint8_t* ip = rbuf.data() + 20;
    const uint32_t sip = t.a.nic->address().ip, dip = t.b.nic->address().ip;
    const uint16_t total = 20 + 8 + 12 + 8 + 4 + 1001 + 3 + 4;  // IP..DETH, ImmDt, payload, pad, ICRC
    const uint8_t want[20] = {0x45, 0, uint8_t(total >> 8), uint8_t(total), 0, 0, 0x40, 0, 64, 17, ip[10], ip[11],
                              uint8_t(sip >> 24), uint8_t(sip >> 16), uint8_t(sip >> 8), uint8_t(sip),
                              uint8_t(dip >> 24), uint8_t(dip >> 16), uint8_t(dip >> 8), uint8_t(dip)};
    for (int i = 0; i < 20; i++) EXPECT_EQ(ip[i], want[i]) << "IPv4 header byte " << i;
    EXPECT_EQ(ip_sum(ip), 0xFFFF) << "the header checksum as received";
    EXPECT_TRUE(std::equal(src.begin(), src.begin() + 1001, rbuf.begin() + 40));
    EXPECT_EQ(rbuf[40 + 1001], 0xAA) << "nothing past the datagram";
    auto sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].wr_id, 5u);
    EXPECT_EQ(sw[0].status, WcStatus::Success);
}

}  // namespace

TEST(VerbsUd, SendPlacesTheGrhTwoNics) { ud_grh(false); }
TEST(VerbsUd, SendPlacesTheGrhLoopback) { ud_grh(true); }

TEST(VerbsUd, QkeyMismatchIsDroppedAndControlledQkeySendsTheQpsOwn)
{
    UdPair t(false);
    std::vector<uint8_t> src = pattern(64, 9), rbuf(1024, 0);
    uint32_t skey = t.a.reg(src, kLocalWrite), rkey = t.b.reg(rbuf, kLocalWrite);
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(1, {sge(rbuf, rkey, 0, 1024)})), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, t.send(src, skey, 64, UdPair::kQkeyB + 1)), 0);
    t.f.run_until_idle();
    EXPECT_EQ(drops(*t.b.nic, RxDrop::BadQkey), 1u);
    EXPECT_TRUE(t.b.poll(t.b.rcq).empty());
    EXPECT_TRUE(std::all_of(rbuf.begin(), rbuf.end(), [](uint8_t c) { return c == 0; }));
    // a controlled Q_Key in the WR sends the sender QP's own Q_Key: refused here...
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, t.send(src, skey, 64, 0x80000000u | UdPair::kQkeyB)), 0);
    t.f.run_until_idle();
    EXPECT_EQ(drops(*t.b.nic, RxDrop::BadQkey), 2u);
    // ...and accepted by a receiver whose Q_Key is the sender's
    QpAttr a;
    a.qkey = UdPair::kQkeyA;
    ASSERT_EQ(t.b.nic->verbs().qp_modify(t.b.qp, a, QpAttr::kQkey), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, t.send(src, skey, 64, 0x80000000u)), 0);
    t.f.run_until_idle();
    auto rw = t.b.poll(t.b.rcq);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].byte_len, 104u);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), rbuf.begin() + 40));
    // empty receive queue: a counted drop
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, t.send(src, skey, 64, 0x80000000u)), 0);
    t.f.run_until_idle();
    EXPECT_EQ(drops(*t.b.nic, RxDrop::NoRecvWqe), 1u);
    // larger than the MTU: refused at post
    std::vector<uint8_t> big(5000);
    uint32_t bkey = t.a.reg(big, kLocalWrite);
    EXPECT_EQ(t.a.nic->verbs().post_send(t.a.qp, t.send(big, bkey, 4097, UdPair::kQkeyA)), EINVAL);
}

// Loss, duplication and reordering on the link: every UC message that completes is byte-exact
// and completes once; the rest are accounted for by the responder's drop counters.
TEST(VerbsUc, LossDuplicationAndReorderingCompleteOnlyWholeMessages)
{
    FabricParams p = params();
    p.link.impairment.loss = 0.03;
    p.link.impairment.duplicate = 0.03;
    p.link.impairment.reorder = 0.03;
    p.link.impairment.reorder_max_ps = 20'000'000;  // 20 us: past several packets
    p.seed = 11;
    UcPair t(false, 1024, p);
    constexpr int kMsgs = 200;
    constexpr uint32_t kLen = 5000;  // 5 packets
    std::vector<uint8_t> src(kMsgs * kLen), rbuf(kMsgs * kLen, 0);
    for (int i = 0; i < kMsgs; i++) {
        auto v = pattern(kLen, 100 + i);
        std::copy(v.begin(), v.end(), src.begin() + i * kLen);
    }
    uint32_t skey = t.a.reg(src, kLocalWrite), rkey = t.b.reg(rbuf, kLocalWrite);
    for (int i = 0; i < kMsgs; i++)
        ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(i, {sge(rbuf, rkey, size_t(i) * kLen, kLen)})), 0);
    for (int i = 0; i < kMsgs; i++) {
        SendWr s;
        s.opcode = WrOpcode::SendWithImm;
        s.imm = static_cast<uint32_t>(i);
        s.num_sge = 1;
        s.sg[0] = sge(src, skey, size_t(i) * kLen, kLen);
        ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, s), 0);
    }
    t.f.run_until_idle();
    auto rw = t.b.poll(t.b.rcq);
    std::map<uint32_t, int> seen;
    for (size_t k = 0; k < rw.size(); k++) {
        const Wc& wc = rw[k];
        ASSERT_EQ(wc.status, WcStatus::Success);
        ASSERT_EQ(wc.byte_len, kLen);
        EXPECT_EQ(wc.wr_id, k) << "receive WQEs complete in order";
        EXPECT_EQ(seen[wc.imm]++, 0) << "message " << wc.imm << " completed twice";
        // each completion holds exactly the message its immediate names
        EXPECT_TRUE(std::equal(src.begin() + size_t(wc.imm) * kLen, src.begin() + size_t(wc.imm + 1) * kLen,
                               rbuf.begin() + wc.wr_id * kLen))
            << "message " << wc.imm;
    }
    const SimLink* l = t.f.link(0, 1);
    EXPECT_GT(l->dropped(), 0u);
    EXPECT_GT(l->duplicated(), 0u);
    EXPECT_GT(l->reordered(), 0u);
    EXPECT_GT(rw.size(), kMsgs / 2u);
    EXPECT_LT(rw.size(), size_t(kMsgs));
    Nic& nb = *t.b.nic;
    EXPECT_GT(drops(nb, RxDrop::Duplicate), 0u);
    EXPECT_GT(drops(nb, RxDrop::PsnSequence), 0u);
    // every packet that arrived was placed or dropped with a reason
    const auto* c = nb.verbs().qp_counters(t.b.qp);
    EXPECT_EQ(c->rx_packets + c->rx_drops, l->delivered());
    EXPECT_EQ(c->rx_messages, rw.size());
    EXPECT_EQ(t.a.poll(t.a.scq).size(), size_t(kMsgs)) << "UC: every send completes locally";
}

TEST(VerbsUd, LossAndDuplicationDeliverWholeDatagrams)
{
    FabricParams p = params();
    p.link.impairment.loss = 0.05;
    p.link.impairment.duplicate = 0.05;
    p.seed = 12;
    UdPair t(false, p);
    constexpr int kMsgs = 100;
    std::vector<uint8_t> src(kMsgs * 256), rbuf(2 * kMsgs * 296, 0);
    for (int i = 0; i < kMsgs; i++) std::fill(src.begin() + i * 256, src.begin() + (i + 1) * 256, uint8_t(i));
    uint32_t skey = t.a.reg(src, kLocalWrite), rkey = t.b.reg(rbuf, kLocalWrite);
    for (int i = 0; i < 2 * kMsgs; i++)
        ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(i, {sge(rbuf, rkey, size_t(i) * 296, 296)})), 0);
    for (int i = 0; i < kMsgs; i++) {
        SendWr s = t.send(src, skey, 256, UdPair::kQkeyB);
        s.sg[0].addr += size_t(i) * 256;
        ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, s), 0);
    }
    t.f.run_until_idle();
    auto rw = t.b.poll(t.b.rcq);
    const SimLink* l = t.f.link(0, 1);
    EXPECT_EQ(rw.size(), l->delivered()) << "UD has no sequence: duplicates are delivered as datagrams";
    EXPECT_EQ(rw.size(), size_t(kMsgs) - l->dropped() + l->duplicated());
    for (const Wc& wc : rw) {
        ASSERT_EQ(wc.byte_len, 296u);
        const uint8_t* d = rbuf.data() + wc.wr_id * 296 + 40;
        EXPECT_TRUE(std::all_of(d, d + 256, [&](uint8_t c) { return c == d[0]; })) << "datagram intact";
    }
}

// SDR's send queue and a verbs QP share the port one packet each in turn; control datagrams go
// ahead of both.
TEST(VerbsTx, SdrAndVerbsPacketsAlternateControlFirst)
{
    UcPair t(false, 1024);
    Nic& n = *t.a.nic;
    std::vector<uint8_t> src = pattern(8 * 1024, 10), dst(8 * 1024, 0);
    uint32_t skey = t.a.reg(src, kLocalWrite), dkey = t.b.reg(dst);
    uint32_t sdr_qp = n.qp_create(0, 0);
    uint32_t lkey = n.mr_reg(src.data(), src.size());
    for (uint32_t i = 0; i < 3; i++) {
        hal_tx_wqe w{};
        w.qp = sdr_qp;
        w.local_addr = reinterpret_cast<uint64_t>(src.data());
        w.lkey = lkey;
        w.length = 1024;
        ASSERT_EQ(n.hal_tx_post(nullptr, &w, 1), 1u);
    }
    SendWr w;
    w.opcode = WrOpcode::RdmaWrite;
    w.num_sge = 1;
    w.sg[0] = sge(src, skey, 0, 4096);  // 4 packets
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    w.rkey = dkey;
    ASSERT_EQ(n.verbs().post_send(t.a.qp, w), 0);
    uint32_t c0 = n.ctrl_qp_create();
    ASSERT_TRUE(n.ctrl_send(c0, t.b.nic->address(), 0x800001, 0, src.data(), 8));
    std::vector<TxPacket> out;
    TxPacket p;
    while (n.tx_next(&p)) out.push_back(p);
    using K = TxPacket::Kind;
    const std::vector<K> want = {K::Ctrl, K::Verbs, K::Sdr, K::Verbs, K::Sdr, K::Verbs, K::Sdr, K::Verbs};
    ASSERT_EQ(out.size(), want.size());
    for (size_t i = 0; i < want.size(); i++) EXPECT_EQ(out[i].kind, want[i]) << "packet " << i;
    EXPECT_EQ(out[1].meta.opcode, wire::kOpUcWriteFirst);
    EXPECT_EQ(out[1].reth_len, 4096u);
    EXPECT_EQ(out[3].meta.opcode, wire::kOpUcWriteMiddle);
    EXPECT_EQ(out[7].meta.opcode, wire::kOpUcWriteLast);
    EXPECT_EQ(out[7].meta.psn, out[1].meta.psn + 3);
    for (const TxPacket& q : out) n.tx_done(q);
    auto sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].status, WcStatus::Success);
    t.f.run_until_idle();  // the port finds nothing left
    EXPECT_FALSE(n.tx_pending());
}
