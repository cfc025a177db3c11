// RC QPs of the NIC model on the simulator, every rule asserted by completions, statuses, bytes
// and counters: multi-packet SEND, WRITE and WRITE with immediate, multi-packet READ, loopback and
// two NICs; 1 % and 10 % loss, duplicated and reordered frames (byte-exact, every WQE once, in
// order); PSN gap -> one NAK -> go-back-N; RNR NAKs (a late receive succeeds, rnr_retry
// exhausted fails); a peer that is gone (retry_cnt exhausted); remote access and invalid
// request errors with ERR on both sides; READ protection (remote read, bounds, PD); flushes;
// the state machine's RC attributes.
#include "sim_util.hpp"

#include <sdr/emu/fabric.hpp>
#include <sdr/emu/verbs_engine.hpp>
#include <sdr/emu/wire.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

using namespace sdr::emu;
using namespace sdr::emu::verbs;

namespace {

using sdr::test::pattern;

struct Ep {
    Nic* nic = nullptr;
    uint32_t pd = 0, scq = 0, rcq = 0, qp = 0;
    uint32_t qpn() const { return nic->verbs().qpn(qp); }
    const QpCountersVerbs& c() const { return *nic->verbs().qp_counters(qp); }
    uint32_t reg(std::vector<uint8_t>& v, uint32_t access = kLocalWrite | kRemoteWrite | kRemoteRead) const
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
    QpState state() const { return nic->verbs().qp_state(qp); }
};

struct RcOpts {
    uint32_t mtu = 1024;
    uint8_t timeout = 14, retry_cnt = 7, rnr_retry = 7, min_rnr_timer = 12, max_rd = 4, max_dest_rd = 4;
    uint32_t access = kLocalWrite | kRemoteWrite | kRemoteRead;
};

// RESET -> INIT -> RTR -> RTS for an RC QP towards `to`.
void connect_rc(Ep& e, const Ep& to, uint32_t my_psn, uint32_t peer_psn, const RcOpts& o)
{
    QpAttr a;
    a.state = QpState::Init;
    a.access = o.access;
    ASSERT_EQ(e.nic->verbs().qp_modify(e.qp, a, QpAttr::kState | QpAttr::kAccess), 0);
    a.state = QpState::Rtr;
    a.path_mtu = o.mtu;
    a.dest_qpn = to.qpn();
    a.rq_psn = peer_psn;
    a.remote_gid = gid_from_ipv4(to.nic->address().ip);
    a.max_dest_rd_atomic = o.max_dest_rd;
    a.min_rnr_timer = o.min_rnr_timer;
    ASSERT_EQ(e.nic->verbs().qp_modify(e.qp, a,
                                     QpAttr::kState | QpAttr::kPathMtu | QpAttr::kDestQpn | QpAttr::kRqPsn |
                                         QpAttr::kAv | QpAttr::kMaxDestRdAtomic | QpAttr::kMinRnrTimer),
              0);
    a.state = QpState::Rts;
    a.sq_psn = my_psn;
    a.timeout = o.timeout;
    a.retry_cnt = o.retry_cnt;
    a.rnr_retry = o.rnr_retry;
    a.max_rd_atomic = o.max_rd;
    ASSERT_EQ(e.nic->verbs().qp_modify(e.qp, a,
                                     QpAttr::kState | QpAttr::kSqPsn | QpAttr::kTimeout | QpAttr::kRetryCnt |
                                         QpAttr::kRnrRetry | QpAttr::kMaxRdAtomic),
              0);
    EXPECT_EQ(e.state(), QpState::Rts);
}

FabricParams params()
{
    FabricParams p;
    p.link.rtt_ms = 0.01;
    p.payload = true;
    return p;
}

uint64_t drops(const Nic& n, RxDrop d) { return n.counters().rx_drop(d); }

// An RC pair on two NICs (or one NIC: loopback), PSNs near the top of the 24-bit space so that
// every test also crosses the wrap.
struct RcPair {
    SimFabric f;
    Ep a, b;
    RcPair(bool loopback, RcOpts o = {}, FabricParams p = params()) : f(p)
    {
        Nic& na = f.nic(0, 1);
        Nic& nb = loopback ? na : f.nic(1, 1);
        for (auto [e, n] : {std::pair{&a, &na}, std::pair{&b, &nb}}) {
            e->nic = n;
            e->pd = n->verbs().pd_alloc();
            e->scq = n->verbs().cq_create(4096);
            e->rcq = n->verbs().cq_create(4096);
            e->qp = n->verbs().qp_create(QpType::Rc, e->pd, e->scq, e->rcq, 1024, 1024);
            EXPECT_NE(e->qp, Nic::kNoHandle);
        }
        connect_rc(a, b, 0xFFFFF0, 0x7FFFF8, o);
        connect_rc(b, a, 0x7FFFF8, 0xFFFFF0, o);
    }
};

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

SendWr wr(uint64_t id, WrOpcode op, Sge s, uint64_t remote = 0, uint32_t rkey = 0, uint32_t imm = 0)
{
    SendWr w;
    w.wr_id = id;
    w.opcode = op;
    w.num_sge = 1;
    w.sg[0] = s;
    w.remote_addr = remote;
    w.rkey = rkey;
    w.imm = imm;
    return w;
}

uint64_t va(const std::vector<uint8_t>& v, size_t off = 0) { return reinterpret_cast<uint64_t>(v.data() + off); }

// SEND with immediate (5000 B: 5 packets) scattered over two receive SGEs, WRITE (10003 B:
// 10 packets) gathered from two SGEs, WRITE with immediate (3000 B), READ (9000 B: 9
// responses) into two SGEs: byte-exact, completions in order, ACKs coalesced.
void send_write_read(RcPair& t)
{
    std::vector<uint8_t> src = pattern(20000, 1), dst(12000, 0xEE), rbuf(12000, 0xDD), rsrc = pattern(9000, 2),
                         rdst(12000, 0xCC);
    uint32_t skey = t.a.reg(src), dkey = t.b.reg(dst), rkey = t.b.reg(rbuf), rskey = t.b.reg(rsrc),
             rdkey = t.a.reg(rdst);
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(7, {sge(rbuf, rkey, 0, 1000), sge(rbuf, rkey, 2000, 8000)})), 0);
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(8, {sge(rbuf, rkey, 11000, 16)})), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, wr(1, WrOpcode::SendWithImm, sge(src, skey, 100, 5000), 0, 0, 0xABCD)), 0);
    SendWr w = wr(2, WrOpcode::RdmaWrite, sge(src, skey, 0, 6001), va(dst, 1000), dkey);
    w.num_sge = 2;
    w.sg[1] = sge(src, skey, 8000, 4002);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, w), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, wr(3, WrOpcode::RdmaWriteWithImm, sge(src, skey, 13000, 3000),
                                                  va(dst, 0), dkey, 0x1234)),
              0);
    SendWr r = wr(4, WrOpcode::RdmaRead, sge(rdst, rdkey, 0, 4000), va(rsrc), rskey);
    r.num_sge = 2;
    r.sg[1] = sge(rdst, rdkey, 5000, 5000);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, r), 0);
    t.f.run_until_idle();

    auto sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 4u);
    const WcOpcode ops[] = {WcOpcode::Send, WcOpcode::RdmaWrite, WcOpcode::RdmaWrite, WcOpcode::RdmaRead};
    const uint32_t lens[] = {5000, 10003, 3000, 9000};
    for (size_t i = 0; i < 4; i++) {
        EXPECT_EQ(sw[i].wr_id, i + 1);
        EXPECT_EQ(sw[i].status, WcStatus::Success);
        EXPECT_EQ(sw[i].opcode, ops[i]);
        EXPECT_EQ(sw[i].byte_len, lens[i]);
        EXPECT_EQ(sw[i].qp_num, t.a.qpn());
    }
    auto rw = t.b.poll(t.b.rcq);
    ASSERT_EQ(rw.size(), 2u);
    EXPECT_EQ(rw[0].wr_id, 7u);
    EXPECT_EQ(rw[0].opcode, WcOpcode::Recv);
    EXPECT_EQ(rw[0].byte_len, 5000u);
    EXPECT_EQ(rw[0].imm, 0xABCDu);
    EXPECT_EQ(rw[1].wr_id, 8u);
    EXPECT_EQ(rw[1].opcode, WcOpcode::RecvRdmaWithImm);
    EXPECT_EQ(rw[1].byte_len, 3000u);
    EXPECT_EQ(rw[1].imm, 0x1234u);
    // SEND: 1000 + 4000 bytes
    EXPECT_TRUE(std::equal(src.begin() + 100, src.begin() + 1100, rbuf.begin()));
    EXPECT_TRUE(std::equal(src.begin() + 1100, src.begin() + 5100, rbuf.begin() + 2000));
    EXPECT_TRUE(std::all_of(rbuf.begin() + 1000, rbuf.begin() + 2000, [](uint8_t c) { return c == 0xDD; }));
    EXPECT_TRUE(std::all_of(rbuf.begin() + 6000, rbuf.end(), [](uint8_t c) { return c == 0xDD; }));
    // WRITE at 1000 (overwritten below 3000 by the WRITE with immediate at 0)
    EXPECT_TRUE(std::equal(src.begin() + 13000, src.begin() + 16000, dst.begin()));
    EXPECT_TRUE(std::equal(src.begin() + 2000, src.begin() + 6001, dst.begin() + 3000));
    EXPECT_TRUE(std::equal(src.begin() + 8000, src.begin() + 12002, dst.begin() + 7001));
    EXPECT_TRUE(std::all_of(dst.begin() + 11003, dst.end(), [](uint8_t c) { return c == 0xEE; }));
    // READ: 4000 + 5000 bytes
    EXPECT_TRUE(std::equal(rsrc.begin(), rsrc.begin() + 4000, rdst.begin()));
    EXPECT_TRUE(std::equal(rsrc.begin() + 4000, rsrc.end(), rdst.begin() + 5000));
    EXPECT_TRUE(std::all_of(rdst.begin() + 4000, rdst.begin() + 5000, [](uint8_t c) { return c == 0xCC; }));
    EXPECT_TRUE(std::all_of(rdst.begin() + 10000, rdst.end(), [](uint8_t c) { return c == 0xCC; }));

    // packets: 5 + 10 + 3 + 1 READ request; 9 READ responses
    EXPECT_EQ(t.a.c().tx_packets, 19u + t.a.c().tx_acks);
    EXPECT_EQ(t.b.c().tx_read_responses, 9u);
    EXPECT_EQ(t.b.c().rx_messages, 4u);
    // Coalesced: one ACK per message at most (here one per SEND/WRITE; the READ's responses
    // acknowledge it), never one per packet.
    EXPECT_GE(t.b.c().tx_acks, 1u);
    EXPECT_LE(t.b.c().tx_acks, 3u);
    EXPECT_EQ(t.a.c().rx_acks, t.b.c().tx_acks);
    EXPECT_EQ(t.b.c().tx_naks + t.a.c().retransmits + t.a.c().timeouts, 0u);
    EXPECT_EQ(t.b.nic->counters().rx_drops_total() + t.a.nic->counters().rx_drops_total(), 0u);
}

}  // namespace

TEST(VerbsRc, SendWriteWriteImmAndReadTwoNics)
{
    RcPair t(false);
    send_write_read(t);
}

TEST(VerbsRc, SendWriteWriteImmAndReadLoopback)
{
    RcPair t(true);
    send_write_read(t);
}

TEST(VerbsRc, StateMachineNeedsTheRcAttributes)
{
    SimFabric f(params());
    Nic& n = f.nic(0, 1);
    uint32_t pd = n.verbs().pd_alloc(), cq = n.verbs().cq_create(16);
    uint32_t qp = n.verbs().qp_create(QpType::Rc, pd, cq, cq, 16, 16);
    QpAttr a;
    a.state = QpState::Init;
    a.access = kLocalWrite;
    ASSERT_EQ(n.verbs().qp_modify(qp, a, QpAttr::kState | QpAttr::kAccess), 0);
    a.state = QpState::Rtr;
    a.remote_gid = gid_from_ipv4(n.address().ip);
    const uint32_t uc_rtr = QpAttr::kState | QpAttr::kPathMtu | QpAttr::kDestQpn | QpAttr::kRqPsn | QpAttr::kAv;
    EXPECT_EQ(n.verbs().qp_modify(qp, a, uc_rtr), EINVAL) << "RC RTR needs max_dest_rd_atomic and min_rnr_timer";
    EXPECT_EQ(n.verbs().qp_modify(qp, a, uc_rtr | QpAttr::kMaxDestRdAtomic), EINVAL);
    a.max_dest_rd_atomic = 17;
    EXPECT_EQ(n.verbs().qp_modify(qp, a, uc_rtr | QpAttr::kMaxDestRdAtomic | QpAttr::kMinRnrTimer), EINVAL);
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 32;
    EXPECT_EQ(n.verbs().qp_modify(qp, a, uc_rtr | QpAttr::kMaxDestRdAtomic | QpAttr::kMinRnrTimer), EINVAL);
    a.min_rnr_timer = 1;
    ASSERT_EQ(n.verbs().qp_modify(qp, a, uc_rtr | QpAttr::kMaxDestRdAtomic | QpAttr::kMinRnrTimer), 0);
    a.state = QpState::Rts;
    EXPECT_EQ(n.verbs().qp_modify(qp, a, QpAttr::kState | QpAttr::kSqPsn), EINVAL) << "RTS needs timeout, retries";
    a.retry_cnt = 8;
    const uint32_t rts = QpAttr::kState | QpAttr::kSqPsn | QpAttr::kTimeout | QpAttr::kRetryCnt | QpAttr::kRnrRetry |
                         QpAttr::kMaxRdAtomic;
    EXPECT_EQ(n.verbs().qp_modify(qp, a, rts), EINVAL);
    a.retry_cnt = 7;
    ASSERT_EQ(n.verbs().qp_modify(qp, a, rts), 0);
    EXPECT_EQ(n.verbs().qp_state(qp), QpState::Rts);
    EXPECT_EQ(n.verbs().qp_modify(qp, a, QpAttr::kState | QpAttr::kSqPsn), EINVAL) << "no new send PSN in RTS";
    EXPECT_EQ(n.verbs().qp_modify(qp, a, QpAttr::kState | QpAttr::kTimeout | QpAttr::kRetryCnt), 0);
    // READ: RC only
    std::vector<uint8_t> buf(64);
    uint32_t key = n.verbs().mr_reg(pd, buf.data(), buf.size(), kLocalWrite);
    EXPECT_EQ(n.verbs().post_send(qp, wr(1, WrOpcode::RdmaRead, sge(buf, key, 0, 64), 0, 1)), 0);
    uint32_t uc = n.verbs().qp_create(QpType::Uc, pd, cq, cq, 16, 16);
    EXPECT_EQ(n.verbs().post_send(uc, wr(1, WrOpcode::RdmaRead, sge(buf, key, 0, 64), 0, 1)), EINVAL);
}

namespace {

// Many messages (SEND with immediate, WRITE, READ in turn) over an impaired link; every WQE
// completes once, successfully and in order, every byte lands where it should.
struct Bulk {
    static constexpr int kMsgs = 150;
    static constexpr uint32_t kLen = 5000;  // 5 packets at MTU 1024
    std::vector<uint8_t> src, rbuf, wdst, rsrc, rdst;
    void run(RcPair& t)
    {
        src = pattern(kMsgs * kLen, 3);
        rsrc = pattern(kMsgs * kLen, 4);
        rbuf.assign(kMsgs * kLen, 0);
        wdst.assign(kMsgs * kLen, 0);
        rdst.assign(kMsgs * kLen, 0);
        uint32_t skey = t.a.reg(src), rkey = t.b.reg(rbuf), wkey = t.b.reg(wdst), rskey = t.b.reg(rsrc),
                 rdkey = t.a.reg(rdst);
        for (int i = 0; i < kMsgs; i++) {
            const size_t off = size_t(i) * kLen;
            ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(i, {sge(rbuf, rkey, off, kLen)})), 0);
            SendWr w;
            switch (i % 3) {
            case 0: w = wr(i, WrOpcode::SendWithImm, sge(src, skey, off, kLen), 0, 0, uint32_t(i)); break;
            case 1: w = wr(i, WrOpcode::RdmaWrite, sge(src, skey, off, kLen), va(wdst, off), wkey); break;
            case 2: w = wr(i, WrOpcode::RdmaRead, sge(rdst, rdkey, off, kLen), va(rsrc, off), rskey); break;
            }
            ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, w), 0);
        }
        t.f.run_until_idle();
        auto sw = t.a.poll(t.a.scq);
        ASSERT_EQ(sw.size(), size_t(kMsgs));
        for (int i = 0; i < kMsgs; i++) {
            EXPECT_EQ(sw[i].wr_id, uint64_t(i));
            EXPECT_EQ(sw[i].status, WcStatus::Success) << i;
        }
        auto rw = t.b.poll(t.b.rcq);
        ASSERT_EQ(rw.size(), size_t(kMsgs + 2) / 3);
        for (size_t k = 0; k < rw.size(); k++) {
            EXPECT_EQ(rw[k].wr_id, k) << "receive WQEs complete in order, once";
            EXPECT_EQ(rw[k].imm, uint32_t(3 * k));
            EXPECT_EQ(rw[k].status, WcStatus::Success);
        }
        for (int i = 0; i < kMsgs; i++) {
            const size_t off = size_t(i) * kLen;
            const std::vector<uint8_t>& from = i % 3 == 2 ? rsrc : src;
            const std::vector<uint8_t>& to = i % 3 == 0 ? rbuf : i % 3 == 1 ? wdst : rdst;
            const size_t to_off = i % 3 == 0 ? size_t(i / 3) * kLen : off;
            EXPECT_TRUE(std::equal(from.begin() + off, from.begin() + off + kLen, to.begin() + to_off)) << "message " << i;
        }
        EXPECT_EQ(t.a.state(), QpState::Rts);
        EXPECT_EQ(t.b.state(), QpState::Rts);
    }
};

}  // namespace

// At 1 % loss every byte arrives; and qp_counters_total (what the provider's
// SDR_VERBS_STATS_AT_EXIT / SDR_VERBS_STATS_FILE report) keeps every QP's counters since the NIC
// started: a destroyed QP's stay after a new QP takes its entry.
TEST(VerbsRc, OnePercentLossDeliversEveryByte)
{
    FabricParams p = params();
    p.link.impairment.loss = 0.01;
    p.seed = 21;
    RcPair t(false, {}, p);
    Bulk b;
    b.run(t);
    EXPECT_GT(t.f.link(0, 1)->dropped() + t.f.link(1, 0)->dropped(), 0u);
    const QpCountersVerbs was = t.a.c();
    ASSERT_GT(was.retransmits, 0u);
    VerbsEngine& v = t.a.nic->verbs();
    EXPECT_EQ(v.qp_counters_total().retransmits, was.retransmits);
    ASSERT_EQ(v.qp_destroy(t.a.qp), 0);
    const uint32_t again = v.qp_create(QpType::Rc, t.a.pd, t.a.scq, t.a.rcq, 16, 16);
    ASSERT_EQ(again, t.a.qp);  // the destroyed QP's entry
    EXPECT_EQ(v.qp_counters(again)->tx_packets, 0u);
    const QpCountersVerbs total = v.qp_counters_total();
    EXPECT_EQ(total.tx_packets, was.tx_packets);
    EXPECT_EQ(total.retransmits, was.retransmits);
    EXPECT_EQ(total.timeouts, was.timeouts);
    EXPECT_EQ(total.rx_acks, was.rx_acks);
    EXPECT_EQ(total.rx_naks, was.rx_naks);
}

TEST(VerbsRc, TenPercentLossDeliversEveryByte)
{
    FabricParams p = params();
    p.link.impairment.loss = 0.10;
    p.seed = 22;
    RcPair t(false, {}, p);
    Bulk b;
    b.run(t);
    EXPECT_GT(t.f.link(0, 1)->dropped(), 50u);
    EXPECT_GT(t.f.link(1, 0)->dropped(), 10u) << "ACKs and READ responses are lost too";
    EXPECT_GT(t.a.c().retransmits, 0u);
    EXPECT_GT(t.b.c().tx_naks, 0u);
    EXPECT_GT(t.a.c().timeouts, 0u) << "a lost tail or NAK is recovered by the timer";
    EXPECT_GT(drops(*t.b.nic, RxDrop::PsnSequence), 0u);
    EXPECT_GT(drops(*t.b.nic, RxDrop::Duplicate), 0u);
}

// 16 READs outstanding at 10 % loss both ways: a READ whose request was lost again after it
// was asked for once holds una back while the requests after it draw PSN sequence NAKs; each
// NAK goes back to that READ (not past it), so the NAKs never spend retry_cnt without progress.
TEST(VerbsRc, ManyReadsOutstandingUnderLossKeepProgressing)
{
    for (uint64_t seed : {101, 102, 103}) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        FabricParams p = params();
        p.link.impairment.loss = 0.10;
        p.seed = seed;
        RcOpts o;
        o.max_rd = 16;
        o.max_dest_rd = 16;
        RcPair t(false, o, p);
        Bulk b;
        b.run(t);
        EXPECT_GT(t.b.c().tx_naks, 0u);
    }
}

TEST(VerbsRc, DuplicatedAndReorderedFramesDeliverEveryByteOnce)
{
    FabricParams p = params();
    p.link.impairment.duplicate = 0.05;
    p.link.impairment.reorder = 0.05;
    p.link.impairment.reorder_max_ps = 20'000'000;  // 20 us: past several packets
    p.seed = 23;
    RcPair t(false, {}, p);
    Bulk b;
    b.run(t);
    EXPECT_GT(t.f.link(0, 1)->duplicated(), 0u);
    EXPECT_GT(t.f.link(0, 1)->reordered(), 0u);
    EXPECT_GT(drops(*t.b.nic, RxDrop::Duplicate), 0u) << "a duplicate is dropped (and ACKed again)";
    EXPECT_GT(drops(*t.b.nic, RxDrop::PsnSequence), 0u) << "a reordered frame looks like a gap";
}

// Loss, duplication and reordering together in both directions, over several seeds: every
// run ends with every WQE complete, in order, byte-exact (no livelock, no retry exhaustion).
TEST(VerbsRc, LossDuplicationAndReorderingTogetherOverSeeds)
{
    for (uint64_t seed = 31; seed < 35; seed++) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        FabricParams p = params();
        p.link.impairment.loss = 0.05;
        p.link.impairment.duplicate = 0.03;
        p.link.impairment.reorder = 0.03;
        p.link.impairment.reorder_max_ps = 20'000'000;
        p.seed = seed;
        RcPair t(false, {}, p);
        Bulk b;
        b.run(t);
        EXPECT_GT(t.a.c().retransmits, 0u);
    }
}

// A gap in the PSNs: the responder NAKs once with the PSN it expects, drops what follows
// until that PSN arrives, and the requester goes back to it.
TEST(VerbsRc, PsnGapNaksOnceAndTheRequesterGoesBackN)
{
    FabricParams p = params();
    p.directed[{0, 1}].loss = 0.03;  // requests only: every NAK and ACK arrives
    p.seed = 5;
    p.drop_log = true;
    RcOpts o;
    o.timeout = 0;  // no retransmission timer: only NAKs may recover
    RcPair t(false, o, p);
    std::vector<uint8_t> src = pattern(200 * 1024, 9), dst(200 * 1024, 0);
    uint32_t skey = t.a.reg(src), dkey = t.b.reg(dst);
    // one 200-packet WRITE, then a 1-packet WRITE that must not be lost (checked below)
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, wr(1, WrOpcode::RdmaWrite, sge(src, skey, 0, 199 * 1024), va(dst), dkey)), 0);
    t.f.run_until_idle();
    ASSERT_FALSE(t.f.drop_log().empty());
    bool tail_lost = false;
    for (const auto& d : t.f.drop_log()) tail_lost |= d.meta.psn == ((0xFFFFF0 + 198) & 0xFFFFFF);
    ASSERT_FALSE(tail_lost) << "seed: the last packet must arrive (no timer here)";
    auto sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].status, WcStatus::Success);
    EXPECT_TRUE(std::equal(src.begin(), src.begin() + 199 * 1024, dst.begin()));
    EXPECT_GT(t.b.c().tx_naks, 0u);
    EXPECT_EQ(t.a.c().rx_naks, t.b.c().tx_naks);
    EXPECT_LE(t.b.c().tx_naks, t.f.link(0, 1)->dropped()) << "at most one NAK per gap";
    EXPECT_GE(t.a.c().retransmits, t.f.link(0, 1)->dropped());
    EXPECT_EQ(t.a.c().timeouts, 0u);
    EXPECT_EQ(t.a.c().tx_packets, 199u + t.a.c().retransmits);
}

// Injected frames: the responder NAKs the first packet past a gap only, accepts the expected
// PSN again, ACKs a duplicate again, and takes nothing from another host.
TEST(VerbsRc, ResponderNaksOncePerGapAndAcksDuplicates)
{
    RcPair t(false);
    std::vector<uint8_t> dst(4096, 0), pay = pattern(256, 4);
    uint32_t dkey = t.b.reg(dst);
    auto inject = [&](uint8_t op, uint32_t psn, uint32_t len, uint64_t addr, uint32_t ip) {
        wire::Headers h;
        h.src_mac = t.a.nic->address().mac;
        h.dst_mac = t.b.nic->address().mac;
        h.src_ip = ip;
        h.dst_ip = t.b.nic->address().ip;
        h.dest_qp = t.b.qpn();
        h.opcode = op;
        h.psn = psn & 0xFFFFFF;
        h.va = addr;
        h.rkey = dkey;
        h.dma_len = len;
        h.pad = true;
        std::vector<uint8_t> f(wire::frame_bytes(op, len, true));
        ASSERT_EQ(wire::encode(h, pay.data(), len, f.data(), f.size()), f.size());
        t.f.inject_frame(t.b.nic->index(), f, t.f.sim().now());
        t.f.run_until_idle();
    };
    const uint32_t ip = t.a.nic->address().ip, e = 0xFFFFF0;  // b expects a's first PSN
    inject(wire::kOpRcWriteOnly, e + 2, 256, va(dst), ip);
    inject(wire::kOpRcWriteOnly, e + 3, 256, va(dst, 256), ip);
    EXPECT_EQ(t.b.c().tx_naks, 1u) << "one NAK per gap";
    EXPECT_EQ(drops(*t.b.nic, RxDrop::PsnSequence), 2u);
    EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](uint8_t c) { return c == 0; }));
    // a's requester has nothing outstanding: the NAK is stale to it
    EXPECT_EQ(drops(*t.a.nic, RxDrop::StaleAck), 1u);
    inject(wire::kOpRcWriteOnly, e, 256, va(dst, 512), ip);  // the expected PSN: taken, ACKed
    EXPECT_TRUE(std::equal(pay.begin(), pay.end(), dst.begin() + 512));
    EXPECT_EQ(t.b.c().tx_acks, 1u);
    inject(wire::kOpRcWriteOnly, e + 5, 256, va(dst), ip);  // a new gap: a new NAK
    EXPECT_EQ(t.b.c().tx_naks, 2u);
    inject(wire::kOpRcWriteOnly, e, 256, va(dst, 1024), ip);  // a duplicate: ACKed again, not written
    EXPECT_EQ(drops(*t.b.nic, RxDrop::Duplicate), 1u);
    EXPECT_EQ(t.b.c().tx_acks, 2u);
    EXPECT_TRUE(std::all_of(dst.begin() + 1024, dst.end(), [](uint8_t c) { return c == 0; }));
    inject(wire::kOpRcWriteOnly, e + 1, 256, va(dst, 1024), ip + 1);  // another host
    EXPECT_EQ(drops(*t.b.nic, RxDrop::WrongPeer), 1u);
    EXPECT_TRUE(std::all_of(dst.begin() + 1024, dst.end(), [](uint8_t c) { return c == 0; }));
    EXPECT_EQ(t.b.state(), QpState::Rts);
    EXPECT_EQ(t.a.state(), QpState::Rts);
}

// SEND and multi-packet WRITE with immediate before the receive is posted: RNR NAKs (carrying
// the responder's min_rnr_timer), the requester waits and retries, and both complete.
TEST(VerbsRc, RnrNakThenTheLateReceiveSucceeds)
{
    RcOpts o;
    o.min_rnr_timer = 14;  // 1.28 ms
    o.rnr_retry = 7;       // forever
    RcPair t(false, o);
    std::vector<uint8_t> src = pattern(8192, 5), rbuf(8192, 0), dst(8192, 0);
    uint32_t skey = t.a.reg(src), rkey = t.b.reg(rbuf), dkey = t.b.reg(dst);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, wr(1, WrOpcode::Send, sge(src, skey, 0, 3000))), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(
                  t.a.qp, wr(2, WrOpcode::RdmaWriteWithImm, sge(src, skey, 3000, 4000), va(dst), dkey, 77)),
              0);
    t.f.advance_to(t.f.sim().now() + 5'000'000'000ull);  // 5 ms: about 4 RNR waits of 1.28 ms
    EXPECT_TRUE(t.a.poll(t.a.scq).empty());
    const uint64_t rnr = t.b.c().tx_rnr_naks;
    EXPECT_GE(rnr, 3u);
    EXPECT_LE(rnr, 5u);
    EXPECT_EQ(t.a.c().rx_rnr_naks, rnr);
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(10, {sge(rbuf, rkey, 0, 8192)})), 0);
    t.f.advance_to(t.f.sim().now() + 3'000'000'000ull);  // the WRITE's last packet now waits for its WQE
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(11, {sge(rbuf, rkey, 0, 16)})), 0);
    t.f.run_until_idle();
    auto sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 2u);
    EXPECT_EQ(sw[0].status, WcStatus::Success);
    EXPECT_EQ(sw[1].status, WcStatus::Success);
    auto rw = t.b.poll(t.b.rcq);
    ASSERT_EQ(rw.size(), 2u);
    EXPECT_EQ(rw[0].wr_id, 10u);
    EXPECT_EQ(rw[0].byte_len, 3000u);
    EXPECT_EQ(rw[1].wr_id, 11u);
    EXPECT_EQ(rw[1].opcode, WcOpcode::RecvRdmaWithImm);
    EXPECT_EQ(rw[1].imm, 77u);
    EXPECT_TRUE(std::equal(src.begin(), src.begin() + 3000, rbuf.begin()));
    EXPECT_TRUE(std::equal(src.begin() + 3000, src.begin() + 7000, dst.begin()));
    EXPECT_GT(t.b.c().tx_rnr_naks, rnr) << "the WRITE with immediate waited for its receive too";
    EXPECT_EQ(t.a.state(), QpState::Rts);
}

TEST(VerbsRc, RnrRetryExhaustedFailsTheWqeAndFlushesTheRest)
{
    RcOpts o;
    o.min_rnr_timer = 1;  // 10 us
    o.rnr_retry = 2;
    RcPair t(false, o);
    std::vector<uint8_t> src = pattern(4096, 6);
    uint32_t skey = t.a.reg(src);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, wr(1, WrOpcode::Send, sge(src, skey, 0, 100))), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, wr(2, WrOpcode::Send, sge(src, skey, 0, 100))), 0);
    t.f.run_until_idle();
    auto sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 2u);
    EXPECT_EQ(sw[0].wr_id, 1u);
    EXPECT_EQ(sw[0].status, WcStatus::RnrRetryExcErr);
    EXPECT_EQ(sw[1].wr_id, 2u);
    EXPECT_EQ(sw[1].status, WcStatus::WrFlushErr);
    EXPECT_EQ(t.a.c().rx_rnr_naks, 3u) << "the first try and rnr_retry = 2 retries";
    EXPECT_EQ(t.a.state(), QpState::Err);
    EXPECT_EQ(t.b.state(), QpState::Rts) << "RNR is not an error on the responder";
}

TEST(VerbsRc, PeerGoneFailsWithRetryExceededAfterRetryCnt)
{
    RcOpts o;
    o.retry_cnt = 3;
    o.timeout = 10;  // 4.2 ms
    RcPair t(false, o);
    ASSERT_EQ(t.b.nic->verbs().qp_destroy(t.b.qp), 0);
    std::vector<uint8_t> src = pattern(4096, 8), rbuf(64, 0);
    uint32_t skey = t.a.reg(src), rkey = t.a.reg(rbuf);
    ASSERT_EQ(t.a.nic->verbs().post_recv(t.a.qp, recv_wr(30, {sge(rbuf, rkey, 0, 64)})), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, wr(1, WrOpcode::RdmaWrite, sge(src, skey, 0, 3000), 0x1000, 1)), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, wr(2, WrOpcode::Send, sge(src, skey, 0, 10))), 0);
    const SimTime t0 = t.f.sim().now();
    t.f.run_until_idle();
    auto sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 2u);
    EXPECT_EQ(sw[0].wr_id, 1u);
    EXPECT_EQ(sw[0].status, WcStatus::RetryExcErr);
    EXPECT_EQ(sw[1].status, WcStatus::WrFlushErr);
    auto rw = t.a.poll(t.a.rcq);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].status, WcStatus::WrFlushErr);
    EXPECT_EQ(t.a.c().timeouts, 4u) << "retry_cnt = 3: three retransmissions, then the error";
    EXPECT_EQ(t.a.c().tx_packets, 4u * 4u) << "3 + 1 packets, sent 4 times";
    const double ms = double(t.f.sim().now() - t0) / 1e9;
    EXPECT_GE(ms, 4 * 4.194);
    EXPECT_LT(ms, 4 * 4.194 + 1);
    EXPECT_EQ(t.a.state(), QpState::Err);
    EXPECT_GT(drops(*t.b.nic, RxDrop::UnknownQp), 0u);
}

// Remote access errors: a WRITE with a bad rkey and a READ of a region without remote read.
// The requester's WQE completes REM_ACCESS_ERR, the rest flush, and both QPs go to ERR.
TEST(VerbsRc, BadRkeyIsARemoteAccessErrorAndErrOnBothSides)
{
    for (bool read : {false, true}) {
        SCOPED_TRACE(read ? "READ" : "WRITE");
        RcPair t(false);
        std::vector<uint8_t> src = pattern(4096, 10), dst(4096, 0), rbuf(64, 0), brbuf(64, 0);
        uint32_t skey = t.a.reg(src), rkey = t.a.reg(rbuf), brkey = t.b.reg(brbuf);
        uint32_t dkey = t.b.reg(dst, kLocalWrite | kRemoteWrite);  // no remote read
        ASSERT_EQ(t.a.nic->verbs().post_recv(t.a.qp, recv_wr(40, {sge(rbuf, rkey, 0, 64)})), 0);
        ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(41, {sge(brbuf, brkey, 0, 64)})), 0);
        ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, wr(1, WrOpcode::RdmaWrite, sge(src, skey, 0, 2000), va(dst), dkey)), 0);
        SendWr bad = read ? wr(2, WrOpcode::RdmaRead, sge(src, skey, 0, 2000), va(dst), dkey)
                          : wr(2, WrOpcode::RdmaWrite, sge(src, skey, 0, 2000), va(dst, 1000), dkey ^ 0x10000);
        ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, bad), 0);
        ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, wr(3, WrOpcode::RdmaWrite, sge(src, skey, 0, 100), va(dst), dkey)), 0);
        t.f.run_until_idle();
        auto sw = t.a.poll(t.a.scq);
        ASSERT_EQ(sw.size(), 3u);
        EXPECT_EQ(sw[0].status, WcStatus::Success);
        EXPECT_EQ(sw[1].status, WcStatus::RemAccessErr);
        EXPECT_EQ(sw[2].status, WcStatus::WrFlushErr);
        EXPECT_EQ(t.a.poll(t.a.rcq).size(), 1u) << "a's receive flushed";
        auto brw = t.b.poll(t.b.rcq);
        ASSERT_EQ(brw.size(), 1u);
        EXPECT_EQ(brw[0].status, WcStatus::WrFlushErr) << "b's receive flushed";
        EXPECT_EQ(t.a.state(), QpState::Err);
        EXPECT_EQ(t.b.state(), QpState::Err);
        EXPECT_TRUE(std::equal(src.begin(), src.begin() + 2000, dst.begin()));
        EXPECT_TRUE(std::all_of(dst.begin() + 2000, dst.end(), [](uint8_t c) { return c == 0; }));
        EXPECT_EQ(drops(*t.b.nic, read ? RxDrop::AccessDenied : RxDrop::UnknownKey), 1u);
        EXPECT_EQ(t.b.c().tx_naks, 1u);
        EXPECT_EQ(t.b.c().tx_read_responses, 0u);
    }
}

// READ checks on the responder: bounds (before and past the region), the region's PD and the
// QP's remote read access. Each is a remote access error: nothing read, nothing written into the
// requester's memory, ERR on both.
TEST(VerbsRc, ReadOutsideTheRegionOfAnotherPdOrOnAQpWithoutRemoteReadIsRefused)
{
    for (int c = 0; c < 4; c++) {
        SCOPED_TRACE("case " + std::to_string(c));
        RcOpts o;
        if (c == 3) o.access = kLocalWrite | kRemoteWrite;  // no remote read on the QPs
        RcPair t(false, o);
        std::vector<uint8_t> src = pattern(4096, 13), rdst(8192, 0);
        uint32_t skey = t.b.reg(src), rdkey = t.a.reg(rdst);
        uint64_t addr = va(src);
        uint32_t len = 4096;
        if (c == 0) addr -= 1;
        if (c == 1) len = 4097;
        if (c == 2) {
            uint32_t other_pd = t.b.nic->verbs().pd_alloc();
            skey = t.b.nic->verbs().mr_reg(other_pd, src.data(), src.size(), kLocalWrite | kRemoteRead);
        }
        ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, wr(1, WrOpcode::RdmaRead, sge(rdst, rdkey, 0, len), addr, skey)), 0);
        t.f.run_until_idle();
        auto sw = t.a.poll(t.a.scq);
        ASSERT_EQ(sw.size(), 1u);
        EXPECT_EQ(sw[0].status, WcStatus::RemAccessErr);
        EXPECT_EQ(t.a.state(), QpState::Err);
        EXPECT_EQ(t.b.state(), QpState::Err);
        EXPECT_EQ(t.b.c().tx_read_responses, 0u);
        EXPECT_EQ(drops(*t.b.nic, c < 2 ? RxDrop::OutOfBounds : RxDrop::AccessDenied), 1u);
        EXPECT_TRUE(std::all_of(rdst.begin(), rdst.end(), [](uint8_t x) { return x == 0; }));
    }
}

// A SEND longer than the receive WQE: the receive completes LOC_LEN_ERR, the responder NAKs
// invalid request, the requester's WQE completes REM_INV_REQ_ERR, both QPs go to ERR.
TEST(VerbsRc, SendLongerThanTheReceiveIsAnInvalidRequest)
{
    RcPair t(false);
    std::vector<uint8_t> src = pattern(4096, 11), rbuf(4096, 0);
    uint32_t skey = t.a.reg(src), rkey = t.b.reg(rbuf);
    ASSERT_EQ(t.b.nic->verbs().post_recv(t.b.qp, recv_wr(1, {sge(rbuf, rkey, 0, 1500)})), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, wr(5, WrOpcode::Send, sge(src, skey, 0, 3000))), 0);
    t.f.run_until_idle();
    auto sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].status, WcStatus::RemInvReqErr);
    auto rw = t.b.poll(t.b.rcq);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].status, WcStatus::LocLenErr);
    EXPECT_EQ(t.a.state(), QpState::Err);
    EXPECT_EQ(t.b.state(), QpState::Err);
    EXPECT_TRUE(std::equal(src.begin(), src.begin() + 1024, rbuf.begin()));
    EXPECT_TRUE(std::all_of(rbuf.begin() + 1500, rbuf.end(), [](uint8_t c) { return c == 0; })) << "nothing past the WQE";
}

// A READ whose local SGE lacks local write: nothing is sent, LOC_PROT_ERR, the QP goes to ERR.
TEST(VerbsRc, ReadIntoARegionWithoutLocalWriteIsALocalProtectionError)
{
    RcPair t(false);
    std::vector<uint8_t> src = pattern(4096, 12), ro(4096, 0);
    uint32_t skey = t.b.reg(src), rokey = t.a.reg(ro, kRemoteRead);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, wr(1, WrOpcode::RdmaRead, sge(ro, rokey, 0, 100), va(src), skey)), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a.qp, wr(2, WrOpcode::RdmaRead, sge(ro, rokey, 0, 100), va(src), skey)), 0);
    t.f.run_until_idle();
    auto sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 2u);
    EXPECT_EQ(sw[0].status, WcStatus::LocProtErr);
    EXPECT_EQ(sw[1].status, WcStatus::WrFlushErr);
    EXPECT_EQ(t.a.nic->counters().tx_frames, 0u);
    EXPECT_EQ(t.a.state(), QpState::Err);
    EXPECT_TRUE(std::all_of(ro.begin(), ro.end(), [](uint8_t c) { return c == 0; }));
}
