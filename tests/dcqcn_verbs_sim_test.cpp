// DCQCN on the verbs engine's RC, UC and UD QPs (verbs/dcqcn.cpp) on the simulator: with the
// link's ECN mark in place of a congested switch (ImpairmentParams::ce_mark), ECT(0) data, the
// NP's CNPs to the sending QP and their limit, the RP's rate and the pacing, every byte still
// delivered; CNPs from a stranger dropped; a paced QP not holding the others; and an RC incast
// through a leaf switch whose port marks, against the same incast without DCQCN.
#include "sim_util.hpp"

#include <sdr/emu/dcqcn.hpp>
#include <sdr/emu/fabric.hpp>
#include <sdr/emu/network.hpp>
#include <sdr/emu/topology.hpp>
#include <sdr/emu/traffic.hpp>
#include <sdr/emu/verbs_engine.hpp>
#include <sdr/emu/wire.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

using namespace sdr::emu;
using namespace sdr::emu::verbs;

namespace {

constexpr double kLineGbps = 100;  // FabricParams' default link

using sdr::test::pattern;

FabricParams marked(double ce_mark)
{
    FabricParams p;
    p.link.rtt_ms = 0.01;
    p.directed[{0, 1}].ce_mark = ce_mark;  // the data direction only
    return p;
}

void dcqcn_on(Nic& n)
{
    DcqcnParams p = DcqcnParams::for_line_rate(kLineGbps);
    p.enabled = true;
    n.set_dcqcn(p);
}

uint64_t now_ns(SimFabric& f) { return f.sim().now() / 1000; }

struct Ep {
    Nic* nic = nullptr;
    uint32_t pd = 0, scq = 0, rcq = 0, qp = 0;
    VerbsEngine& v() const { return nic->verbs(); }
    uint32_t qpn() const { return v().qpn(qp); }
    std::vector<Wc> poll(uint32_t cq) const
    {
        std::vector<Wc> out;
        Wc wc[16];
        int n;
        while ((n = v().cq_poll(cq, wc, 16)) > 0) out.insert(out.end(), wc, wc + n);
        return out;
    }
};

Ep make_ep(Nic& n, QpType type, uint32_t pd = VerbsEngine::kNoHandle)
{
    Ep e;
    e.nic = &n;
    e.pd = pd == VerbsEngine::kNoHandle ? n.verbs().pd_alloc() : pd;
    e.scq = n.verbs().cq_create(4096);
    e.rcq = n.verbs().cq_create(4096);
    e.qp = n.verbs().qp_create(type, e.pd, e.scq, e.rcq, 1024, 1024);
    EXPECT_NE(e.qp, VerbsEngine::kNoHandle);
    return e;
}

// RESET -> INIT -> RTR -> RTS towards `to` (RC or UC, MTU 4096).
void connect(Ep& e, const Ep& to, bool rc)
{
    QpAttr a;
    a.state = QpState::Init;
    a.access = kLocalWrite | kRemoteWrite | kRemoteRead;
    ASSERT_EQ(e.v().qp_modify(e.qp, a, QpAttr::kState | QpAttr::kAccess), 0);
    a.state = QpState::Rtr;
    a.path_mtu = 4096;
    a.dest_qpn = to.qpn();
    a.remote_gid = gid_from_ipv4(to.nic->address().ip);
    a.max_dest_rd_atomic = 4;
    uint32_t mask = QpAttr::kState | QpAttr::kPathMtu | QpAttr::kDestQpn | QpAttr::kRqPsn | QpAttr::kAv;
    if (rc) mask |= QpAttr::kMaxDestRdAtomic | QpAttr::kMinRnrTimer;
    ASSERT_EQ(e.v().qp_modify(e.qp, a, mask), 0);
    a.state = QpState::Rts;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    mask = QpAttr::kState | QpAttr::kSqPsn;
    if (rc) mask |= QpAttr::kTimeout | QpAttr::kRetryCnt | QpAttr::kRnrRetry | QpAttr::kMaxRdAtomic;
    ASSERT_EQ(e.v().qp_modify(e.qp, a, mask), 0);
}

SendWr write_wr(uint64_t id, const std::vector<uint8_t>& src, uint32_t lkey, const std::vector<uint8_t>& dst,
                uint32_t rkey)
{
    SendWr w;
    w.wr_id = id;
    w.opcode = WrOpcode::RdmaWrite;
    w.num_sge = 1;
    w.sg[0] = Sge{reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(src.size()), lkey};
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    w.rkey = rkey;
    return w;
}

// A connected pair of QPs (RC or UC), NIC 0 to NIC 1, DCQCN on both NICs when `dcqcn`.
struct Pair {
    SimFabric f;
    Ep a, b;
    Pair(bool rc, double ce_mark, bool dcqcn = true) : f(marked(ce_mark))
    {
        Nic& na = f.nic(0, 1);
        Nic& nb = f.nic(1, 1);
        if (dcqcn) {
            dcqcn_on(na);
            dcqcn_on(nb);
        }
        a = make_ep(na, rc ? QpType::Rc : QpType::Uc);
        b = make_ep(nb, rc ? QpType::Rc : QpType::Uc);
        connect(a, b, rc);
        connect(b, a, rc);
    }
    // A WRITE of `bytes` from a to b: true if every byte arrived and the WQE completed.
    bool write(size_t bytes, uint64_t* elapsed_ns = nullptr)
    {
        std::vector<uint8_t> src = pattern(bytes, 3), dst(bytes, 0);
        const uint32_t sk = a.v().mr_reg(a.pd, src.data(), bytes, kLocalWrite);
        const uint32_t dk = b.v().mr_reg(b.pd, dst.data(), bytes, kLocalWrite | kRemoteWrite);
        const uint64_t t0 = now_ns(f);
        EXPECT_EQ(a.v().post_send(a.qp, write_wr(1, src, sk, dst, dk)), 0);
        f.run_until_idle();
        if (elapsed_ns) *elapsed_ns = now_ns(f) - t0;
        const std::vector<Wc> wc = a.poll(a.scq);
        return wc.size() == 1 && wc[0].status == WcStatus::Success && dst == src;
    }
};

}  // namespace

// Every data packet leaves ECT(0) and the link marks it; the receiving NIC answers with at most
// one CNP per 50 us to the sending QP, which takes every one and slows down; all bytes arrive.
TEST(DcqcnVerbs, RcSenderGetsAtMostOneCnpPer50usAndSlowsDown)
{
    for (bool rc : {true, false}) {
        SCOPED_TRACE(rc ? "RC" : "UC");
        Pair t(rc, 1.0);
        uint64_t elapsed = 0;
        ASSERT_TRUE(t.write(size_t{8} << 20, &elapsed));
        const PortCounters& rx = t.b.nic->counters();
        const PortCounters& tx = t.a.nic->counters();
        EXPECT_EQ(rx.rx_ce, 2048u) << "every data packet marked";
        EXPECT_EQ(t.f.link(0, 1)->ce_marked(), 2048u);
        EXPECT_GE(rx.cnp_sent, 2u);
        EXPECT_LE(rx.cnp_sent, elapsed / 50'000 + 1) << elapsed << " ns";
        EXPECT_EQ(tx.cnp_received, rx.cnp_sent);
        EXPECT_EQ(tx.rx_drops_total(), 0u);
        EXPECT_EQ(rx.rx_drops_total(), 0u);
        EXPECT_EQ(t.b.nic->verbs().qp_counters(t.b.qp)->rx_drops, 0u);
        EXPECT_LT(t.a.v().qp_dcqcn_rate_gbps(t.a.qp), kLineGbps / 2) << "the sender slowed down";
        EXPECT_DOUBLE_EQ(t.b.v().qp_dcqcn_rate_gbps(t.b.qp), kLineGbps) << "the receiver's ACKs were never cut";
        // (frames + gap) at line rate, and CNP-paced: well below it.
        EXPECT_GT(elapsed, 2 * (uint64_t{8} << 20) * 8 / 100) << "at least twice a line-rate transfer";
    }
}

// Unmarked: ECT(0) but no CE, no CNP, line rate; and with DCQCN off the same transfer crosses
// the marking link Not-ECT (nothing to mark) in the same time.
TEST(DcqcnVerbs, UnmarkedRunsAtLineRateAndOffSendsNotEct)
{
    uint64_t on = 0, off = 0;
    {
        Pair t(true, 0.0);
        ASSERT_TRUE(t.write(size_t{8} << 20, &on));
        EXPECT_EQ(t.b.nic->counters().rx_ce, 0u);
        EXPECT_EQ(t.b.nic->counters().cnp_sent, 0u);
        EXPECT_DOUBLE_EQ(t.a.v().qp_dcqcn_rate_gbps(t.a.qp), kLineGbps);
    }
    {
        Pair t(true, 1.0, false);
        ASSERT_TRUE(t.write(size_t{8} << 20, &off));
        EXPECT_EQ(t.f.link(0, 1)->ce_marked(), 0u) << "Not-ECT: the link leaves it";
        EXPECT_EQ(t.b.nic->counters().rx_ce, 0u);
        EXPECT_EQ(t.b.nic->counters().cnp_sent, 0u);
    }
    // 2048 frames of 4096 B + headers at 100 Gbit/s: 0.69 ms; paced at line rate, not slower.
    EXPECT_GT(on * 100, (uint64_t{8} << 20) * 8 * 95 / 100) << on << " ns";
    EXPECT_LE(on, off + off / 100) << on << " vs " << off << " ns";
}

// UD: the CNP goes to the DETH's source QP at the frame's source; the sender slows down and
// every datagram still arrives.
TEST(DcqcnVerbs, UdSenderGetsCnpsAndEveryDatagramArrives)
{
    SimFabric f(marked(1.0));
    Nic& na = f.nic(0, 1);
    Nic& nb = f.nic(1, 1);
    dcqcn_on(na);
    dcqcn_on(nb);
    Ep a = make_ep(na, QpType::Ud), b = make_ep(nb, QpType::Ud);
    for (Ep* e : {&a, &b}) {
        QpAttr at;
        at.state = QpState::Init;
        at.qkey = 0x1234;
        ASSERT_EQ(e->v().qp_modify(e->qp, at, QpAttr::kState | QpAttr::kQkey), 0);
        at.state = QpState::Rtr;
        ASSERT_EQ(e->v().qp_modify(e->qp, at, QpAttr::kState), 0);
        at.state = QpState::Rts;
        ASSERT_EQ(e->v().qp_modify(e->qp, at, QpAttr::kState | QpAttr::kSqPsn), 0);
    }
    const uint32_t ah = na.verbs().ah_create(a.pd, gid_from_ipv4(nb.address().ip));
    ASSERT_NE(ah, VerbsEngine::kNoHandle);
    constexpr uint32_t kMsgs = 1000, kLen = 4096, kSlot = kLen + kGrhBytes;
    std::vector<uint8_t> src = pattern(size_t{kMsgs} * kLen, 5), rbuf(size_t{kMsgs} * kSlot, 0);
    const uint32_t sk = na.verbs().mr_reg(a.pd, src.data(), src.size(), kLocalWrite);
    const uint32_t rk = nb.verbs().mr_reg(b.pd, rbuf.data(), rbuf.size(), kLocalWrite);
    for (uint32_t i = 0; i < kMsgs; i++) {
        RecvWr r;
        r.wr_id = i;
        r.sg[r.num_sge++] = Sge{reinterpret_cast<uint64_t>(rbuf.data() + size_t{i} * kSlot), kSlot, rk};
        ASSERT_EQ(nb.verbs().post_recv(b.qp, r), 0);
    }
    const uint64_t t0 = now_ns(f);
    for (uint32_t i = 0; i < kMsgs; i++) {
        SendWr s;
        s.wr_id = i;
        s.num_sge = 1;
        s.sg[0] = Sge{reinterpret_cast<uint64_t>(src.data() + size_t{i} * kLen), kLen, sk};
        s.ah = ah;
        s.remote_qpn = b.qpn();
        s.remote_qkey = 0x1234;
        if (i % 16 == 15) f.run_until_idle();  // the send queue holds 1024
        ASSERT_EQ(na.verbs().post_send(a.qp, s), 0) << i;
    }
    f.run_until_idle();
    const uint64_t elapsed = now_ns(f) - t0;
    const std::vector<Wc> rw = b.poll(b.rcq);
    ASSERT_EQ(rw.size(), kMsgs);
    for (const Wc& wc : rw) {
        ASSERT_EQ(wc.status, WcStatus::Success);
        ASSERT_EQ(wc.src_qp, a.qpn());
        const uint8_t* d = rbuf.data() + wc.wr_id * kSlot + kGrhBytes;
        ASSERT_TRUE(std::equal(d, d + kLen, src.data() + wc.wr_id * kLen)) << wc.wr_id;
    }
    EXPECT_EQ(nb.counters().rx_ce, kMsgs);
    EXPECT_GE(nb.counters().cnp_sent, 2u);
    EXPECT_LE(nb.counters().cnp_sent, elapsed / 50'000 + 1) << elapsed << " ns";
    EXPECT_EQ(na.counters().cnp_received, nb.counters().cnp_sent);
    EXPECT_EQ(na.counters().rx_drops_total(), 0u);
    EXPECT_LT(na.verbs().qp_dcqcn_rate_gbps(a.qp), kLineGbps / 2);
}

namespace {

// A CNP frame to QPN dest_qp of `to`, as if from `from`.
std::vector<uint8_t> cnp_frame(const NicAddress& from, const NicAddress& to, uint32_t dest_qp)
{
    static const uint8_t reserved[wire::kCnpReservedBytes] = {};
    TxPacket p;
    p.kind = TxPacket::Kind::Cnp;
    p.meta.opcode = wire::kOpCnp;
    p.meta.dest_qp = dest_qp;
    p.meta.dma_len = wire::kCnpReservedBytes;
    p.meta.udp_src_port = 0xC001;
    p.remote_ip = to.ip;
    p.remote_mac = to.mac;
    p.payload = reserved;
    std::vector<uint8_t> out(256);
    out.resize(encode_padded(p, from, out.data(), out.size()));
    EXPECT_GT(out.size(), 0u);
    return out;
}

}  // namespace

// The reaction point takes a CNP only from a host the QP sends to: its connected peer, or for
// UD a host one of its PD's address handles names. Others are wrong_peer drops; with DCQCN off,
// wrong_opcode (as before DCQCN).
TEST(DcqcnVerbs, CnpsFromStrangersAreDroppedAndCounted)
{
    Pair t(true, 0.0);
    Nic& na = *t.a.nic;
    const NicAddress peer = t.b.nic->address();
    NicAddress stranger = peer;
    stranger.ip += 7;
    na.rx_frame(cnp_frame(stranger, na.address(), t.a.qpn()).data(), cnp_frame(stranger, na.address(), t.a.qpn()).size());
    EXPECT_EQ(na.counters().rx_drop(RxDrop::WrongPeer), 1u);
    EXPECT_DOUBLE_EQ(t.a.v().qp_dcqcn_rate_gbps(t.a.qp), kLineGbps);
    std::vector<uint8_t> good = cnp_frame(peer, na.address(), t.a.qpn());
    na.rx_frame(good.data(), good.size());
    EXPECT_EQ(na.counters().cnp_received, 1u);
    EXPECT_DOUBLE_EQ(t.a.v().qp_dcqcn_rate_gbps(t.a.qp), kLineGbps / 2) << "alpha 1: halved";

    // UD: only from an address handle's host.
    Ep u = make_ep(na, QpType::Ud);
    QpAttr at;
    at.state = QpState::Init;
    at.qkey = 1;
    ASSERT_EQ(na.verbs().qp_modify(u.qp, at, QpAttr::kState | QpAttr::kQkey), 0);
    at.state = QpState::Rtr;
    ASSERT_EQ(na.verbs().qp_modify(u.qp, at, QpAttr::kState), 0);
    at.state = QpState::Rts;
    ASSERT_EQ(na.verbs().qp_modify(u.qp, at, QpAttr::kState | QpAttr::kSqPsn), 0);
    std::vector<uint8_t> ud = cnp_frame(peer, na.address(), u.qpn());
    na.rx_frame(ud.data(), ud.size());
    EXPECT_EQ(na.counters().rx_drop(RxDrop::WrongPeer), 2u) << "no address handle names it yet";
    ASSERT_NE(na.verbs().ah_create(u.pd, gid_from_ipv4(peer.ip)), VerbsEngine::kNoHandle);
    na.rx_frame(ud.data(), ud.size());
    EXPECT_EQ(na.counters().cnp_received, 2u);
    EXPECT_DOUBLE_EQ(na.verbs().qp_dcqcn_rate_gbps(u.qp), kLineGbps / 2);

    DcqcnParams off;
    na.set_dcqcn(off);
    na.rx_frame(good.data(), good.size());
    EXPECT_EQ(na.counters().rx_drop(RxDrop::WrongOpcode), 1u);
    EXPECT_EQ(na.counters().cnp_received, 2u);
}

// A QP held back by its rate lets another verbs QP of the NIC send: cut to DCQCN's minimum,
// one QP's WRITE takes milliseconds, the other's completes at about line rate meanwhile; the
// wake-up brings the slow one's packets out to the last byte.
TEST(DcqcnVerbs, APacedQpDoesNotHoldTheOthers)
{
    SimFabric f(marked(0.0));
    Nic& na = f.nic(0, 1);
    Nic& nb = f.nic(1, 1);
    dcqcn_on(na);
    dcqcn_on(nb);
    Ep slow = make_ep(na, QpType::Rc), fast = make_ep(na, QpType::Rc, slow.pd);
    Ep slow_b = make_ep(nb, QpType::Rc), fast_b = make_ep(nb, QpType::Rc, slow_b.pd);
    connect(slow, slow_b, true);
    connect(slow_b, slow, true);
    connect(fast, fast_b, true);
    connect(fast_b, fast, true);
    const std::vector<uint8_t> cnp = cnp_frame(nb.address(), na.address(), slow.qpn());
    while (na.verbs().qp_dcqcn_rate_gbps(slow.qp) > na.dcqcn().min_gbps) na.rx_frame(cnp.data(), cnp.size());
    constexpr size_t kBytes = size_t{1} << 20;
    std::vector<uint8_t> s1 = pattern(kBytes, 1), s2 = pattern(kBytes, 2), d1(kBytes, 0), d2(kBytes, 0);
    const uint32_t k1 = na.verbs().mr_reg(slow.pd, s1.data(), kBytes, kLocalWrite);
    const uint32_t k2 = na.verbs().mr_reg(slow.pd, s2.data(), kBytes, kLocalWrite);
    const uint32_t r1 = nb.verbs().mr_reg(slow_b.pd, d1.data(), kBytes, kLocalWrite | kRemoteWrite);
    const uint32_t r2 = nb.verbs().mr_reg(slow_b.pd, d2.data(), kBytes, kLocalWrite | kRemoteWrite);
    const uint64_t t0 = now_ns(f);
    ASSERT_EQ(na.verbs().post_send(slow.qp, write_wr(1, s1, k1, d1, r1)), 0);
    ASSERT_EQ(na.verbs().post_send(fast.qp, write_wr(2, s2, k2, d2, r2)), 0);
    uint64_t fast_done = 0;
    while (!fast_done) {
        f.sim().run_until(f.sim().now() + 1'000'000);  // 1 us
        if (!fast.poll(fast.scq).empty()) fast_done = now_ns(f) - t0;
        ASSERT_LT(now_ns(f) - t0, 100'000'000u);
    }
    EXPECT_TRUE(slow.poll(slow.scq).empty()) << "the paced QP is still sending";
    EXPECT_EQ(d2, s2);
    // 1 MiB at 100 Gbit/s is 86 us; the slow QP at 1 Gbit/s takes about 1 % of the port.
    EXPECT_LT(fast_done, 120'000u) << fast_done << " ns";
    f.run_until_idle();
    const uint64_t slow_done = now_ns(f) - t0;
    ASSERT_EQ(slow.poll(slow.scq).size(), 1u);
    EXPECT_EQ(d1, s1);
    // 256 frames of 4096 B + headers at about 1 Gbit/s (the rate recovers a little meanwhile).
    EXPECT_GT(slow_done, 3'000'000u) << slow_done << " ns";
}

namespace {

struct IncastRun {
    FctSummary s;
    QueueCounters q;  // the leaf's port to the receiver
    uint64_t cnp_sent = 0, cnp_received = 0, max_fct_ns = 0;
};

// Hosts 1-4 each write 2 MiB over RC to host 0 at once, the traffic generator's flows, all
// under one leaf switch marking by its ECN thresholds (the topology's defaults).
IncastRun rc_incast(bool dcqcn)
{
    FabricParams p;
    p.link.rtt_ms = 0.01;
    std::string err;
    Topology t;
    EXPECT_TRUE(Topology::parse(std::string("leaf_spine:leaves=1,spines=1,hosts_per_leaf=5,dcqcn=") + (dcqcn ? "1" : "0"),
                                LinkParams{}, &t, &err))
        << err;
    p.topology = t;
    SimFabric f(p);
    TrafficParams tp;
    tp.verify_payload = true;
    TrafficGenerator g(f, tp);
    EXPECT_TRUE(g.add_incast(IncastWorkload{{1, 2, 3, 4}, 0, 2 << 20, 0}, &err)) << err;
    g.run();
    IncastRun r;
    r.s = g.summary();
    r.q = f.network()->sw(1).port(0).counters();
    r.cnp_sent = f.find_nic(0)->counters().cnp_sent;
    for (uint32_t h = 1; h <= 4; h++) r.cnp_received += f.find_nic(h)->counters().cnp_received;
    for (const FlowRecord& fr : g.records()) r.max_fct_ns = std::max(r.max_fct_ns, fr.fct_ns);
    return r;
}

}  // namespace

// The receiver's switch port marks; with DCQCN the receiving NIC's CNPs slow the four senders
// and the queue stays far below the peak the same incast builds without it; every flow
// completes byte-exact either way.
TEST(DcqcnVerbs, RcIncastThroughAMarkingSwitchKeepsTheQueueShort)
{
    const IncastRun on = rc_incast(true), off = rc_incast(false);
    for (const IncastRun* r : {&on, &off}) {
        EXPECT_EQ(r->s.completed, 4u);
        EXPECT_EQ(r->s.failed, 0u);
        EXPECT_EQ(r->s.payload_errors, 0u);
    }
    EXPECT_GT(on.q.marked, 0u) << "ECT data, marked by the leaf";
    EXPECT_EQ(off.q.marked, 0u) << "Not-ECT without DCQCN: the switch cannot mark it";
    EXPECT_GT(on.cnp_sent, 0u);
    EXPECT_EQ(on.cnp_received, on.cnp_sent);
    EXPECT_EQ(off.cnp_sent, 0u);
    EXPECT_LT(on.q.peak_bytes * 3, off.q.peak_bytes) << on.q.peak_bytes << " vs " << off.q.peak_bytes;
    std::printf("incast peak queue: %llu B with DCQCN, %llu B without; marked %llu / %llu; CNPs %llu; "
                "slowest flow %.1f / %.1f us; dropped %llu / %llu\n",
                (unsigned long long)on.q.peak_bytes, (unsigned long long)off.q.peak_bytes,
                (unsigned long long)on.q.marked, (unsigned long long)off.q.marked, (unsigned long long)on.cnp_sent,
                on.max_fct_ns / 1e3, off.max_fct_ns / 1e3, (unsigned long long)on.q.dropped,
                (unsigned long long)off.q.dropped);
}
