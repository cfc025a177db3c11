// Shared receive queues and asynchronous events of the NIC model on the simulator: one SRQ
// shared by two RC QPs and a UD QP (bytes, completions, the QP each came through); an empty SRQ
// makes RC answer RNR NAKs and UD drop and count, a later post succeeds; the SRQ limit event
// fires once and disarms until armed again; an SRQ-attached QP that enters ERR flushes the
// WQE it had taken (never the SRQ's others) and raises last-WQE-reached; post_recv on such a
// QP and destroying an SRQ in use are refused; a CQ overrun raises CQ_ERR.
#include "sim_util.hpp"

#include <sdr/emu/fabric.hpp>
#include <sdr/emu/verbs_engine.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <vector>

using namespace sdr::emu;
using namespace sdr::emu::verbs;

namespace {

using sdr::test::pattern;

constexpr uint32_t kMtu = 1024, kQkey = 0x5151;
constexpr uint32_t kRcAccess = kLocalWrite | kRemoteWrite | kRemoteRead;

FabricParams params(double gbps = 100)
{
    FabricParams p;
    p.link.rtt_ms = 0.01;
    p.link.bandwidth_gbps = gbps;
    p.payload = true;
    return p;
}

// A NIC's side: a PD, a send CQ and a receive CQ its QPs share.
struct Side {
    Nic* nic;
    uint32_t pd, scq, rcq;
    Side(Nic& n, uint32_t rcq_depth = 256)
        : nic(&n), pd(n.verbs().pd_alloc()), scq(n.verbs().cq_create(256)), rcq(n.verbs().cq_create(rcq_depth))
    {
    }
    uint32_t qp(QpType t, uint32_t srq = Nic::kNoHandle) const
    {
        const uint32_t h = nic->verbs().qp_create(t, pd, scq, rcq, 64, 64, srq);
        EXPECT_NE(h, Nic::kNoHandle);
        return h;
    }
    std::vector<Wc> poll(uint32_t cq) const
    {
        std::vector<Wc> out;
        Wc wc[16];
        int n;
        while ((n = nic->verbs().cq_poll(cq, wc, 16)) > 0) out.insert(out.end(), wc, wc + n);
        return out;
    }
    const QpCountersVerbs& c(uint32_t qp) const { return *nic->verbs().qp_counters(qp); }
};

void connect_rc(const Side& s, uint32_t qp, const Side& to, uint32_t to_qp, uint8_t min_rnr_timer = 12)
{
    QpAttr a;
    a.state = QpState::Init;
    a.access = kRcAccess;
    ASSERT_EQ(s.nic->verbs().qp_modify(qp, a, QpAttr::kState | QpAttr::kAccess), 0);
    a.state = QpState::Rtr;
    a.path_mtu = kMtu;
    a.dest_qpn = to.nic->verbs().qpn(to_qp);
    a.rq_psn = 0x100;
    a.remote_gid = gid_from_ipv4(to.nic->address().ip);
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = min_rnr_timer;
    ASSERT_EQ(s.nic->verbs().qp_modify(qp, a,
                                     QpAttr::kState | QpAttr::kPathMtu | QpAttr::kDestQpn | QpAttr::kRqPsn |
                                         QpAttr::kAv | QpAttr::kMaxDestRdAtomic | QpAttr::kMinRnrTimer),
              0);
    a.state = QpState::Rts;
    a.sq_psn = 0x100;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    ASSERT_EQ(s.nic->verbs().qp_modify(qp, a,
                                     QpAttr::kState | QpAttr::kSqPsn | QpAttr::kTimeout | QpAttr::kRetryCnt |
                                         QpAttr::kRnrRetry | QpAttr::kMaxRdAtomic),
              0);
}

void ready_ud(const Side& s, uint32_t qp)
{
    QpAttr a;
    a.state = QpState::Init;
    a.qkey = kQkey;
    a.path_mtu = kMtu;
    ASSERT_EQ(s.nic->verbs().qp_modify(qp, a, QpAttr::kState | QpAttr::kQkey | QpAttr::kPathMtu), 0);
    a.state = QpState::Rtr;
    ASSERT_EQ(s.nic->verbs().qp_modify(qp, a, QpAttr::kState), 0);
    a.state = QpState::Rts;
    ASSERT_EQ(s.nic->verbs().qp_modify(qp, a, QpAttr::kState | QpAttr::kSqPsn), 0);
}

RecvWr recv_wr(uint64_t id, const std::vector<uint8_t>& v, uint32_t key, size_t off, size_t len)
{
    RecvWr r;
    r.wr_id = id;
    r.num_sge = 1;
    r.sg[0] = Sge{reinterpret_cast<uint64_t>(v.data() + off), static_cast<uint32_t>(len), key};
    return r;
}

SendWr send_wr(uint64_t id, const std::vector<uint8_t>& v, uint32_t key, size_t off, size_t len)
{
    SendWr w;
    w.wr_id = id;
    w.opcode = WrOpcode::Send;
    w.num_sge = 1;
    w.sg[0] = Sge{reinterpret_cast<uint64_t>(v.data() + off), static_cast<uint32_t>(len), key};
    return w;
}

size_t count(const SimFabric& f, AsyncEvent ev, uint32_t h)
{
    return static_cast<size_t>(std::count_if(f.verbs_async_log().begin(), f.verbs_async_log().end(),
                                             [&](const SimFabric::VerbsAsync& e) { return e.ev == ev && e.handle == h; }));
}

// NIC 0 sends, NIC 1 receives through one SRQ: RC a1 -> b1, RC a2 -> b2, UD au -> bu.
struct SrqBed {
    SimFabric f;
    Side a{f.nic(0, 1)}, b{f.nic(1, 1)};
    uint32_t srq;
    uint32_t a1, a2, au, b1, b2, bu, ah;
    std::vector<uint8_t> src = pattern(64 * 1024, 3), rbuf = std::vector<uint8_t>(64 * 1024, 0xEE);
    uint32_t skey, rkey;
    explicit SrqBed(uint32_t srq_depth = 16, uint32_t limit = 0, uint8_t min_rnr_timer = 12, double gbps = 100)
        : f(params(gbps))
    {
        srq = b.nic->verbs().srq_create(b.pd, srq_depth, limit);
        EXPECT_NE(srq, Nic::kNoHandle);
        a1 = a.qp(QpType::Rc);
        a2 = a.qp(QpType::Rc);
        au = a.qp(QpType::Ud);
        b1 = b.qp(QpType::Rc, srq);
        b2 = b.qp(QpType::Rc, srq);
        bu = b.qp(QpType::Ud, srq);
        connect_rc(a, a1, b, b1, min_rnr_timer);
        connect_rc(b, b1, a, a1, min_rnr_timer);
        connect_rc(a, a2, b, b2, min_rnr_timer);
        connect_rc(b, b2, a, a2, min_rnr_timer);
        ready_ud(a, au);
        ready_ud(b, bu);
        ah = a.nic->verbs().ah_create(a.pd, gid_from_ipv4(b.nic->address().ip));
        skey = a.nic->verbs().mr_reg(a.pd, src.data(), src.size(), kLocalWrite);
        rkey = b.nic->verbs().mr_reg(b.pd, rbuf.data(), rbuf.size(), kLocalWrite);
    }
    // Receive WQE i: 8 KiB at i * 8 KiB of rbuf.
    int post(uint64_t i) { return b.nic->verbs().post_srq_recv(srq, recv_wr(i, rbuf, rkey, i * 8192, 8192)); }
    SendWr ud(uint64_t id, size_t off, size_t len) const
    {
        SendWr w = send_wr(id, src, skey, off, len);
        w.ah = ah;
        w.remote_qpn = b.nic->verbs().qpn(bu);
        w.remote_qkey = kQkey;
        return w;
    }
};

}  // namespace

TEST(VerbsSrq, SharedByTwoRcQpsAndAUdQpByteExact)
{
    SrqBed t;
    for (uint64_t i = 0; i < 3; i++) ASSERT_EQ(t.post(i), 0);
    EXPECT_EQ(t.b.nic->verbs().srq_posted(t.srq), 3u);
    // Both RC messages are multi-packet and go out interleaved, packet by packet: each QP binds
    // its own WQE at its FIRST packet and fills it to its LAST.
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a1, send_wr(11, t.src, t.skey, 0, 5000)), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a2, send_wr(12, t.src, t.skey, 10000, 3000)), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.au, t.ud(13, 20000, 700)), 0);
    t.f.run_until_idle();

    auto sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 3u);
    for (const Wc& w : sw) EXPECT_EQ(w.status, WcStatus::Success) << w.wr_id;
    auto rw = t.b.poll(t.b.rcq);
    ASSERT_EQ(rw.size(), 3u);
    std::vector<uint64_t> ids;
    for (const Wc& w : rw) {
        ASSERT_EQ(w.status, WcStatus::Success);
        ASSERT_LT(w.wr_id, 3u);
        ids.push_back(w.wr_id);
        const uint8_t* got = t.rbuf.data() + w.wr_id * 8192;
        if (w.qp_num == t.b.nic->verbs().qpn(t.b1)) {
            EXPECT_EQ(w.byte_len, 5000u);
            EXPECT_TRUE(std::equal(t.src.begin(), t.src.begin() + 5000, got));
        } else if (w.qp_num == t.b.nic->verbs().qpn(t.b2)) {
            EXPECT_EQ(w.byte_len, 3000u);
            EXPECT_TRUE(std::equal(t.src.begin() + 10000, t.src.begin() + 13000, got));
        } else {
            EXPECT_EQ(w.qp_num, t.b.nic->verbs().qpn(t.bu));
            EXPECT_TRUE(w.grh);
            EXPECT_EQ(w.src_qp, t.a.nic->verbs().qpn(t.au));
            EXPECT_EQ(w.byte_len, kGrhBytes + 700);
            EXPECT_TRUE(std::equal(t.src.begin() + 20000, t.src.begin() + 20700, got + kGrhBytes));
        }
    }
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (std::vector<uint64_t>{0, 1, 2})) << "every WQE used once";
    EXPECT_EQ(t.b.nic->verbs().srq_posted(t.srq), 0u);
    EXPECT_TRUE(t.f.verbs_async_log().empty()) << "no limit armed, no error";
}

TEST(VerbsSrq, EmptySrqRnrNaksRcAndDropsUdThenAPostSucceeds)
{
    SrqBed t(16, 0, 14);  // RNR timer 1.28 ms
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a1, send_wr(1, t.src, t.skey, 0, 2000)), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.au, t.ud(2, 0, 100)), 0);
    t.f.advance_to(t.f.sim().now() + 3'000'000'000ull);  // 3 ms: two or three RNR waits
    EXPECT_TRUE(t.a.poll(t.a.scq).size() == 1u) << "only the UD SEND completed (it left)";
    EXPECT_GE(t.b.c(t.b1).tx_rnr_naks, 2u);
    EXPECT_EQ(t.a.c(t.a1).rx_rnr_naks, t.b.c(t.b1).tx_rnr_naks);
    EXPECT_EQ(t.b.c(t.bu).rx_drops, 1u) << "UD: dropped and counted";
    EXPECT_GE(t.b.nic->counters().rx_drop(RxDrop::NoRecvWqe), 3u);
    ASSERT_EQ(t.post(5), 0);
    t.f.run_until_idle();
    auto sw = t.a.poll(t.a.scq);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].wr_id, 1u);
    EXPECT_EQ(sw[0].status, WcStatus::Success);
    auto rw = t.b.poll(t.b.rcq);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].wr_id, 5u);
    EXPECT_EQ(rw[0].qp_num, t.b.nic->verbs().qpn(t.b1));
    EXPECT_EQ(rw[0].byte_len, 2000u);
    EXPECT_TRUE(std::equal(t.src.begin(), t.src.begin() + 2000, t.rbuf.begin() + 5 * 8192));
}

TEST(VerbsSrq, LimitEventFiresOnceThenDisarmsUntilArmedAgain)
{
    SrqBed t(8, 3);
    EXPECT_EQ(t.b.nic->verbs().srq_arm(t.srq, 9), EINVAL) << "above the depth";
    EXPECT_EQ(t.b.nic->verbs().srq_limit(t.srq), 3u);
    for (uint64_t i = 0; i < 5; i++) ASSERT_EQ(t.post(i), 0);
    auto one = [&](uint64_t id) {
        ASSERT_EQ(t.a.nic->verbs().post_send(t.au, t.ud(id, 0, 64)), 0);
        t.f.run_until_idle();
    };
    one(100);  // 4 left
    one(101);  // 3 left: not below 3
    EXPECT_EQ(count(t.f, AsyncEvent::SrqLimitReached, t.srq), 0u);
    one(102);  // 2 left: below
    EXPECT_EQ(count(t.f, AsyncEvent::SrqLimitReached, t.srq), 1u);
    EXPECT_EQ(t.b.nic->verbs().srq_limit(t.srq), 0u) << "disarmed";
    one(103);  // 1 left: disarmed, no event
    EXPECT_EQ(count(t.f, AsyncEvent::SrqLimitReached, t.srq), 1u);
    ASSERT_EQ(t.post(5), 0);
    ASSERT_EQ(t.post(6), 0);  // 3 posted
    ASSERT_EQ(t.b.nic->verbs().srq_arm(t.srq, 2), 0);
    one(104);  // 2 left
    EXPECT_EQ(count(t.f, AsyncEvent::SrqLimitReached, t.srq), 1u);
    one(105);  // 1 left: below 2
    EXPECT_EQ(count(t.f, AsyncEvent::SrqLimitReached, t.srq), 2u);
    EXPECT_EQ(t.f.verbs_async_log().size(), 2u);
    EXPECT_EQ(t.b.poll(t.b.rcq).size(), 6u);
}

// b1 is in the middle of a 6-packet SEND (its WQE bound) when it is moved to ERR: that WQE
// completes WR_FLUSH_ERR, the SRQ keeps its other WQEs for b2, last-WQE-reached is raised once.
// A 1 Gbit/s link: one 1 KiB packet every 8 us, so that the test stops between two of them.
TEST(VerbsSrq, ErrFlushesTheQpsOwnWqeNotTheSrqsAndRaisesLastWqeReached)
{
    SrqBed t(16, 0, 12, 1.0);
    for (uint64_t i = 0; i < 3; i++) ASSERT_EQ(t.post(i), 0);
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a1, send_wr(1, t.src, t.skey, 0, 6000)), 0);
    for (int i = 0; i < 100000 && t.b.c(t.b1).rx_packets == 0; i++) t.f.advance_to(t.f.sim().now() + 100'000);
    ASSERT_GE(t.b.c(t.b1).rx_packets, 1u);
    ASSERT_LT(t.b.c(t.b1).rx_packets, 6u);
    EXPECT_EQ(t.b.nic->verbs().srq_posted(t.srq), 2u) << "b1 took one";
    QpAttr err;
    err.state = QpState::Err;
    ASSERT_EQ(t.b.nic->verbs().qp_modify(t.b1, err, QpAttr::kState), 0);
    auto rw = t.b.poll(t.b.rcq);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].wr_id, 0u);
    EXPECT_EQ(rw[0].status, WcStatus::WrFlushErr);
    EXPECT_EQ(rw[0].qp_num, t.b.nic->verbs().qpn(t.b1));
    EXPECT_EQ(t.b.nic->verbs().srq_posted(t.srq), 2u) << "the SRQ's others stay";
    EXPECT_EQ(count(t.f, AsyncEvent::QpLastWqeReached, t.b1), 1u);
    ASSERT_EQ(t.b.nic->verbs().qp_modify(t.b1, err, QpAttr::kState), 0);  // ERR again: no second event
    EXPECT_EQ(count(t.f, AsyncEvent::QpLastWqeReached, t.b1), 1u);
    // b2 still receives from the SRQ.
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a2, send_wr(2, t.src, t.skey, 100, 4000)), 0);
    t.f.advance_to(t.f.sim().now() + 1'000'000'000ull);
    rw = t.b.poll(t.b.rcq);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].status, WcStatus::Success);
    EXPECT_EQ(rw[0].wr_id, 1u);
    EXPECT_EQ(rw[0].qp_num, t.b.nic->verbs().qpn(t.b2));
    EXPECT_TRUE(std::equal(t.src.begin() + 100, t.src.begin() + 4100, t.rbuf.begin() + 8192));
    // RESET then ERR of an SRQ QP from RESET: no event (it never worked).
    QpAttr reset;
    reset.state = QpState::Reset;
    ASSERT_EQ(t.b.nic->verbs().qp_modify(t.b1, reset, QpAttr::kState), 0);
    ASSERT_EQ(t.b.nic->verbs().qp_modify(t.b1, err, QpAttr::kState), 0);
    EXPECT_EQ(count(t.f, AsyncEvent::QpLastWqeReached, t.b1), 1u);
}

TEST(VerbsSrq, RefusalsPostRecvOnAnSrqQpAndDestroyInUse)
{
    SrqBed t;
    EXPECT_EQ(t.b.nic->verbs().post_recv(t.b1, recv_wr(1, t.rbuf, t.rkey, 0, 64)), EINVAL);
    EXPECT_EQ(t.b.nic->verbs().srq_destroy(t.srq), EBUSY);
    EXPECT_EQ(t.b.nic->verbs().pd_dealloc(t.b.pd), EBUSY);
    EXPECT_EQ(t.b.nic->verbs().srq_create(t.b.pd, 4, 5), Nic::kNoHandle) << "limit above the depth";
    EXPECT_EQ(t.b.nic->verbs().srq_create(t.b.pd, 0, 0), Nic::kNoHandle);
    const uint32_t small = t.b.nic->verbs().srq_create(t.b.pd, 2, 0);
    ASSERT_NE(small, Nic::kNoHandle);
    EXPECT_EQ(t.b.nic->verbs().post_srq_recv(small, recv_wr(1, t.rbuf, t.rkey, 0, 64)), 0);
    EXPECT_EQ(t.b.nic->verbs().post_srq_recv(small, recv_wr(2, t.rbuf, t.rkey, 0, 64)), 0);
    EXPECT_EQ(t.b.nic->verbs().post_srq_recv(small, recv_wr(3, t.rbuf, t.rkey, 0, 64)), ENOMEM);
    EXPECT_EQ(t.b.nic->verbs().srq_destroy(small), 0);
    for (uint32_t q : {t.b1, t.b2, t.bu}) ASSERT_EQ(t.b.nic->verbs().qp_destroy(q), 0);
    EXPECT_EQ(t.b.nic->verbs().srq_destroy(t.srq), 0);
    EXPECT_EQ(t.b.nic->verbs().srq_destroy(t.srq), EINVAL);
}

TEST(VerbsAsync, CqOverrunRaisesCqErrOnce)
{
    SimFabric f(params());
    Side a(f.nic(0, 1)), b(f.nic(1, 1), 2);
    const uint32_t au = a.qp(QpType::Ud), bu = b.qp(QpType::Ud);
    ready_ud(a, au);
    ready_ud(b, bu);
    std::vector<uint8_t> src = pattern(4096, 9), rbuf(4 * 4096);
    const uint32_t skey = a.nic->verbs().mr_reg(a.pd, src.data(), src.size(), kLocalWrite);
    const uint32_t rkey = b.nic->verbs().mr_reg(b.pd, rbuf.data(), rbuf.size(), kLocalWrite);
    const uint32_t ah = a.nic->verbs().ah_create(a.pd, gid_from_ipv4(b.nic->address().ip));
    for (uint64_t i = 0; i < 4; i++) ASSERT_EQ(b.nic->verbs().post_recv(bu, recv_wr(i, rbuf, rkey, i * 4096, 4096)), 0);
    for (uint64_t i = 0; i < 4; i++) {
        SendWr w = send_wr(i, src, skey, 0, 64);
        w.ah = ah;
        w.remote_qpn = b.nic->verbs().qpn(bu);
        w.remote_qkey = kQkey;
        ASSERT_EQ(a.nic->verbs().post_send(au, w), 0);
    }
    f.run_until_idle();
    EXPECT_EQ(count(f, AsyncEvent::CqErr, b.rcq), 1u) << "the third completion overran, the fourth found it in error";
    EXPECT_EQ(b.poll(b.rcq).size(), 2u);
    Wc wc;
    EXPECT_EQ(b.nic->verbs().cq_poll(b.rcq, &wc, 1), -1);
}

// IBV_SEND_SOLICITED: the SE bit travels on the message's last packet and marks its receive
// completion (what a CQ armed for solicited completions only waits for); others stay unmarked.
TEST(VerbsSolicited, SolicitedSendMarksItsReceiveCompletionOnly)
{
    SrqBed t;
    for (uint64_t i = 0; i < 4; i++) ASSERT_EQ(t.post(i), 0);
    SendWr s = send_wr(1, t.src, t.skey, 0, 3000);  // RC, 3 packets
    s.solicited = true;
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a1, s), 0);
    t.f.run_until_idle();
    ASSERT_EQ(t.a.nic->verbs().post_send(t.a1, send_wr(2, t.src, t.skey, 0, 3000)), 0);
    t.f.run_until_idle();
    SendWr u = t.ud(3, 0, 100);
    u.solicited = true;
    ASSERT_EQ(t.a.nic->verbs().post_send(t.au, u), 0);
    t.f.run_until_idle();
    ASSERT_EQ(t.a.nic->verbs().post_send(t.au, t.ud(4, 0, 100)), 0);
    t.f.run_until_idle();
    auto rw = t.b.poll(t.b.rcq);
    ASSERT_EQ(rw.size(), 4u);
    const bool want[] = {true, false, true, false};
    for (size_t i = 0; i < 4; i++) {
        EXPECT_EQ(rw[i].status, WcStatus::Success);
        EXPECT_EQ(rw[i].solicited, want[i]) << i;
    }
    for (const Wc& w : t.a.poll(t.a.scq)) EXPECT_FALSE(w.solicited);
}
