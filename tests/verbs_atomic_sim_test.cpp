// RC atomics of the NIC model on the simulator (IBTA vol. 1, 9.4.5): COMPARE SWAP that swaps
// and one that does not, FETCH ADD, over two NICs and loopback; FETCH ADDs of two requesters on
// one word; the responder's refusals (no remote atomic on the region or the QP, outside the
// region, a misaligned VA) with ERR on both sides; a duplicate atomic answered from the result
// cache and not executed again, with every ATOMIC ACK lost and under random loss among READs and
// WRITEs; what post_send refuses (UC, UD, no max_rd_atomic, a result SGE under 8 bytes), a
// local SGE without local write; hostile frames (a duplicate never executed, another host, a
// stray ATOMIC ACK) and an atomic past max_dest_rd_atomic.
#include "sim_util.hpp"

#include <sdr/emu/fabric.hpp>
#include <sdr/emu/verbs_engine.hpp>
#include <sdr/emu/wire.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

using namespace sdr::emu;
using namespace sdr::emu::verbs;

namespace {

using sdr::test::pattern;

constexpr uint32_t kAll = kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic;

struct Ep {
    Nic* nic = nullptr;
    uint32_t pd = 0, scq = 0, rcq = 0, qp = 0;
    VerbsEngine& v() const { return nic->verbs(); }
    uint32_t qpn() const { return v().qpn(qp); }
    const QpCountersVerbs& c() const { return *v().qp_counters(qp); }
    template <class T>
    uint32_t reg(std::vector<T>& b, uint32_t access = kAll) const
    {
        return v().mr_reg(pd, b.data(), b.size() * sizeof(T), access);
    }
    std::vector<Wc> poll()
    {
        std::vector<Wc> out;
        Wc wc[16];
        int n;
        while ((n = v().cq_poll(scq, wc, 16)) > 0) out.insert(out.end(), wc, wc + n);
        return out;
    }
    QpState state() const { return v().qp_state(qp); }
};

struct Opts {
    uint8_t timeout = 14, retry_cnt = 7, max_rd = 4, max_dest_rd = 4;
    uint32_t access = kAll;
};

// An endpoint with a PD of its own, or the one given (two QPs on one region).
Ep make_ep(Nic& n, QpType type = QpType::Rc, uint32_t pd = Nic::kNoHandle)
{
    Ep e;
    e.nic = &n;
    e.pd = pd == Nic::kNoHandle ? n.verbs().pd_alloc() : pd;
    e.scq = n.verbs().cq_create(4096);
    e.rcq = n.verbs().cq_create(4096);
    e.qp = n.verbs().qp_create(type, e.pd, e.scq, e.rcq, 1024, 1024);
    EXPECT_NE(e.qp, Nic::kNoHandle);
    return e;
}

// RESET -> INIT -> RTR -> RTS towards `to`, PSNs near the top of the 24-bit space (the wrap).
void connect(Ep& e, const Ep& to, uint32_t my_psn, uint32_t peer_psn, const Opts& o)
{
    QpAttr a;
    a.state = QpState::Init;
    a.access = o.access;
    ASSERT_EQ(e.v().qp_modify(e.qp, a, QpAttr::kState | QpAttr::kAccess), 0);
    a.state = QpState::Rtr;
    a.path_mtu = 1024;
    a.dest_qpn = to.qpn();
    a.rq_psn = peer_psn;
    a.remote_gid = gid_from_ipv4(to.nic->address().ip);
    a.max_dest_rd_atomic = o.max_dest_rd;
    a.min_rnr_timer = 12;
    ASSERT_EQ(e.v().qp_modify(e.qp, a,
                              QpAttr::kState | QpAttr::kPathMtu | QpAttr::kDestQpn | QpAttr::kRqPsn | QpAttr::kAv |
                                  QpAttr::kMaxDestRdAtomic | QpAttr::kMinRnrTimer),
              0);
    a.state = QpState::Rts;
    a.sq_psn = my_psn;
    a.timeout = o.timeout;
    a.retry_cnt = o.retry_cnt;
    a.rnr_retry = 7;
    a.max_rd_atomic = o.max_rd;
    ASSERT_EQ(e.v().qp_modify(e.qp, a,
                              QpAttr::kState | QpAttr::kSqPsn | QpAttr::kTimeout | QpAttr::kRetryCnt |
                                  QpAttr::kRnrRetry | QpAttr::kMaxRdAtomic),
              0);
}

FabricParams params()
{
    FabricParams p;
    p.link.rtt_ms = 0.01;
    p.payload = true;
    return p;
}

struct Pair {
    SimFabric f;
    Ep a, b;
    Pair(bool loopback, Opts requester = {}, Opts responder = {}, FabricParams p = params()) : f(p)
    {
        Nic& na = f.nic(0, 1);
        a = make_ep(na);
        b = make_ep(loopback ? na : f.nic(1, 1));
        connect(a, b, 0xFFFFFA, 0x7FFFF8, requester);
        connect(b, a, 0x7FFFF8, 0xFFFFFA, responder);
    }
};

template <class T>
Sge sge(const std::vector<T>& v, uint32_t key, size_t byte_off = 0, uint32_t len = 8)
{
    return Sge{reinterpret_cast<uint64_t>(v.data()) + byte_off, len, key};
}

template <class T>
uint64_t va(const std::vector<T>& v, size_t byte_off = 0)
{
    return reinterpret_cast<uint64_t>(v.data()) + byte_off;
}

SendWr cas(uint64_t id, Sge s, uint64_t remote, uint32_t rkey, uint64_t compare, uint64_t swap)
{
    SendWr w;
    w.wr_id = id;
    w.opcode = WrOpcode::AtomicCmpAndSwp;
    w.num_sge = 1;
    w.sg[0] = s;
    w.remote_addr = remote;
    w.rkey = rkey;
    w.compare_add = compare;
    w.swap = swap;
    return w;
}

SendWr faa(uint64_t id, Sge s, uint64_t remote, uint32_t rkey, uint64_t add)
{
    SendWr w = cas(id, s, remote, rkey, add, 0);
    w.opcode = WrOpcode::AtomicFetchAndAdd;
    return w;
}

uint64_t drops(const Nic& n, RxDrop d) { return n.counters().rx_drop(d); }

void cas_and_faa(Pair& t)
{
    std::vector<uint64_t> target = {0x1111, 0x0123456789ABCDEFull, 0x2222};
    std::vector<uint64_t> result(8, 0xEEEEEEEEEEEEEEEEull);
    const uint32_t tkey = t.b.reg(target), rkey = t.a.reg(result);
    const uint64_t word = va(target, 8);
    // swaps: the compare value matches
    ASSERT_EQ(t.a.v().post_send(t.a.qp, cas(1, sge(result, rkey, 8), word, tkey, 0x0123456789ABCDEFull, 42)), 0);
    // does not swap: 42 is there now
    ASSERT_EQ(t.a.v().post_send(t.a.qp, cas(2, sge(result, rkey, 16), word, tkey, 7, 99)), 0);
    // adds, wrapping past 2^64
    ASSERT_EQ(t.a.v().post_send(t.a.qp, faa(3, sge(result, rkey, 24), word, tkey, ~uint64_t{0} - 1)), 0);
    // the original value into two SGEs of 3 and 5 bytes
    SendWr w = faa(4, sge(result, rkey, 33, 3), word, tkey, 1000);
    w.num_sge = 2;
    w.sg[1] = sge(result, rkey, 40, 5);
    ASSERT_EQ(t.a.v().post_send(t.a.qp, w), 0);
    t.f.run_until_idle();

    auto sw = t.a.poll();
    ASSERT_EQ(sw.size(), 4u);
    const WcOpcode ops[] = {WcOpcode::CompSwap, WcOpcode::CompSwap, WcOpcode::FetchAdd, WcOpcode::FetchAdd};
    for (size_t i = 0; i < 4; i++) {
        EXPECT_EQ(sw[i].wr_id, i + 1);
        EXPECT_EQ(sw[i].status, WcStatus::Success);
        EXPECT_EQ(sw[i].opcode, ops[i]);
        EXPECT_EQ(sw[i].byte_len, 8u);
        EXPECT_EQ(sw[i].qp_num, t.a.qpn());
    }
    EXPECT_EQ(result[0], 0xEEEEEEEEEEEEEEEEull);
    EXPECT_EQ(result[1], 0x0123456789ABCDEFull) << "COMPARE SWAP returns the value it found";
    EXPECT_EQ(result[2], 42u) << "and does not swap when it differs";
    EXPECT_EQ(result[3], 42u);
    uint64_t split;
    std::memcpy(&split, reinterpret_cast<uint8_t*>(result.data()) + 33, 3);
    std::memcpy(reinterpret_cast<uint8_t*>(&split) + 3, reinterpret_cast<uint8_t*>(result.data()) + 40, 5);
    EXPECT_EQ(split, 40u) << "42 + 2^64 - 2";
    EXPECT_EQ(reinterpret_cast<uint8_t*>(result.data())[32], 0xEE);
    EXPECT_EQ(reinterpret_cast<uint8_t*>(result.data())[36], 0xEE) << "nothing past the first SGE's 3 bytes";
    EXPECT_EQ(target[0], 0x1111u);
    EXPECT_EQ(target[1], 1040u);
    EXPECT_EQ(target[2], 0x2222u);
    EXPECT_EQ(t.b.c().atomics, 4u);
    EXPECT_EQ(t.b.c().atomic_replays, 0u);
    EXPECT_EQ(t.b.c().rx_messages, 4u);
    EXPECT_EQ(t.a.c().tx_messages, 4u);
    EXPECT_EQ(t.a.c().retransmits + t.a.c().timeouts + t.b.c().tx_naks, 0u);
    EXPECT_EQ(t.a.nic->counters().rx_drops_total() + t.b.nic->counters().rx_drops_total(), 0u);
    EXPECT_EQ(t.a.state(), QpState::Rts);
    EXPECT_EQ(t.b.state(), QpState::Rts);
}

}  // namespace

TEST(VerbsAtomic, CompareSwapAndFetchAddTwoNics)
{
    Pair t(false);
    cas_and_faa(t);
}

TEST(VerbsAtomic, CompareSwapAndFetchAddLoopback)
{
    Pair t(true);
    cas_and_faa(t);
}

// Two requesters on two NICs add to one word of a third: every FETCH ADD lands once, each sees
// a value no other saw, and the word ends at the sum.
TEST(VerbsAtomic, FetchAddsOfTwoRequestersSum)
{
    SimFabric f(params());
    Ep b1 = make_ep(f.nic(1, 1));
    Ep b2 = make_ep(f.nic(1, 1), QpType::Rc, b1.pd);  // both responders' QPs reach the region
    Ep a = make_ep(f.nic(0, 1)), c = make_ep(f.nic(2, 1));
    connect(a, b1, 0x100, 0x200, {});
    connect(b1, a, 0x200, 0x100, {});
    connect(c, b2, 0xFFFFFF, 0x300, {});
    connect(b2, c, 0x300, 0xFFFFFF, {});
    std::vector<uint64_t> target = {5};
    const uint32_t k1 = b1.reg(target);
    constexpr int kN = 200;
    std::vector<uint64_t> ra(kN), rc(kN);
    const uint32_t ka = a.reg(ra), kc = c.reg(rc);
    for (int i = 0; i < kN; i++) {
        ASSERT_EQ(a.v().post_send(a.qp, faa(i, sge(ra, ka, 8 * i), va(target), k1, 1)), 0);
        ASSERT_EQ(c.v().post_send(c.qp, faa(i, sge(rc, kc, 8 * i), va(target), k1, 1000)), 0);
    }
    f.run_until_idle();
    auto wa = a.poll(), wc = c.poll();
    ASSERT_EQ(wa.size(), size_t(kN));
    ASSERT_EQ(wc.size(), size_t(kN));
    for (int i = 0; i < kN; i++) {
        EXPECT_EQ(wa[i].status, WcStatus::Success);
        EXPECT_EQ(wc[i].status, WcStatus::Success);
    }
    EXPECT_EQ(target[0], 5u + kN * 1 + kN * 1000);
    std::set<uint64_t> seen(ra.begin(), ra.end());
    seen.insert(rc.begin(), rc.end());
    EXPECT_EQ(seen.size(), size_t(2 * kN)) << "every FETCH ADD saw another value";
    for (int i = 1; i < kN; i++) {
        EXPECT_GT(ra[i], ra[i - 1]) << "one QP's atomics run in order";
        EXPECT_GT(rc[i], rc[i - 1]);
    }
    EXPECT_EQ(b1.c().atomics + b2.c().atomics, uint64_t(2 * kN));
}

// The responder's refusals: a region without remote atomic, a QP without it, an rkey that
// names nothing, a root key (remote write only), 8 bytes past the region's end (remote access
// errors), a VA not 8-byte aligned
// (an invalid request). The word stays as it was, the requester's result buffer too, the
// atomic completes in error, the WQE behind it flushes, and both QPs go to ERR.
TEST(VerbsAtomic, RefusalsAreRemoteAccessOrInvalidRequestErrors)
{
    enum Case { kRegionNoAtomic, kQpNoAtomic, kBadKey, kRootKey, kPastTheEnd, kMisaligned };
    for (Case k : {kRegionNoAtomic, kQpNoAtomic, kBadKey, kRootKey, kPastTheEnd, kMisaligned}) {
        SCOPED_TRACE(int(k));
        Opts responder;
        if (k == kQpNoAtomic) responder.access = kLocalWrite | kRemoteWrite | kRemoteRead;
        Pair t(false, {}, responder);
        std::vector<uint64_t> target = {7, 8}, result(2, 0xEE);
        const uint32_t tkey = t.b.reg(target, k == kRegionNoAtomic ? kLocalWrite | kRemoteWrite | kRemoteRead : kAll);
        const uint32_t rkey = t.a.reg(result);
        const uint64_t at = k == kPastTheEnd ? va(target, 12) : k == kMisaligned ? va(target, 4) : va(target);
        uint32_t key = k == kBadKey ? tkey ^ 0x10000 : tkey;
        if (k == kRootKey) {
            key = t.b.v().root_key_create(t.b.pd, 2, 8);
            ASSERT_EQ(t.b.v().root_key_set(key, 0, tkey, va(target), 8), 0);
        }
        ASSERT_EQ(t.a.v().post_send(t.a.qp, faa(1, sge(result, rkey), k == kRootKey ? 0 : at, key, 1)), 0);
        ASSERT_EQ(t.a.v().post_send(t.a.qp, cas(2, sge(result, rkey, 8), va(target), tkey, 7, 9)), 0);
        t.f.run_until_idle();
        auto sw = t.a.poll();
        ASSERT_EQ(sw.size(), 2u);
        EXPECT_EQ(sw[0].status, k == kMisaligned ? WcStatus::RemInvReqErr : WcStatus::RemAccessErr);
        EXPECT_EQ(sw[0].opcode, WcOpcode::FetchAdd);
        EXPECT_EQ(sw[1].status, WcStatus::WrFlushErr);
        EXPECT_EQ(sw[1].opcode, WcOpcode::CompSwap);
        EXPECT_EQ(target[0], 7u);
        EXPECT_EQ(target[1], 8u);
        EXPECT_EQ(result[0], 0xEEu);
        EXPECT_EQ(result[1], 0xEEu);
        EXPECT_EQ(t.a.state(), QpState::Err);
        EXPECT_EQ(t.b.state(), QpState::Err);
        EXPECT_EQ(t.b.c().atomics, 0u);
        EXPECT_EQ(t.b.c().tx_naks, 1u);
        const RxDrop why[] = {RxDrop::AccessDenied, RxDrop::AccessDenied, RxDrop::UnknownKey, RxDrop::AccessDenied,
                              RxDrop::OutOfBounds, RxDrop::InvalidRequest};
        EXPECT_EQ(drops(*t.b.nic, why[k]), 1u);
        ASSERT_EQ(t.f.verbs_async_log().size(), 1u);
        EXPECT_EQ(t.f.verbs_async_log()[0].ev, k == kMisaligned ? AsyncEvent::QpReqErr : AsyncEvent::QpAccessErr);
    }
}

// Every ATOMIC ACK is lost (the link back drops everything): the responder executes the FETCH
// ADD once; each retry the requester's timer sends is a duplicate, answered from the result
// cache without touching the word; after retry_cnt retries the WQE fails RETRY_EXC_ERR.
TEST(VerbsAtomic, DuplicateIsAnsweredFromTheCacheAndNotExecutedAgain)
{
    FabricParams p = params();
    p.directed[{1, 0}].loss = 1.0;
    Opts o;
    o.retry_cnt = 3;
    o.timeout = 8;  // at least 1 ms (kRcMinTimeoutNs)
    Pair t(false, o, o, p);
    std::vector<uint64_t> target = {100}, result(1, 0);
    const uint32_t tkey = t.b.reg(target), rkey = t.a.reg(result);
    ASSERT_EQ(t.a.v().post_send(t.a.qp, faa(1, sge(result, rkey), va(target), tkey, 5)), 0);
    t.f.run_until_idle();
    auto sw = t.a.poll();
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].status, WcStatus::RetryExcErr);
    EXPECT_EQ(target[0], 105u) << "added exactly once";
    EXPECT_EQ(t.a.c().tx_packets, 4u) << "sent once, then retry_cnt times";
    EXPECT_EQ(t.a.c().timeouts, 4u);
    EXPECT_EQ(t.b.c().atomics, 1u);
    EXPECT_EQ(t.b.c().atomic_replays, 3u) << "each retry answered from the cache";
    EXPECT_EQ(drops(*t.b.nic, RxDrop::Duplicate), 0u);
    EXPECT_EQ(t.f.link(1, 0)->dropped(), 4u) << "four ATOMIC ACKs lost";
    EXPECT_EQ(result[0], 0u);
    EXPECT_EQ(t.b.state(), QpState::Rts);
}

// Atomics among READs and WRITEs over lossy links both ways, 2 and 16 READs and atomics in
// flight: every WQE completes once and in order, every FETCH ADD returns the value before it (one QP's atomics
// run in PSN order), and the word ends at the sum: retried atomics were answered, not redone.
TEST(VerbsAtomic, LossAmongReadsAndWritesAddsEachOnce)
{
    uint64_t replays = 0;
    for (auto [seed, depth] : {std::pair{41, 2}, std::pair{42, 2}, std::pair{43, 16}, std::pair{44, 16}}) {
        SCOPED_TRACE("seed " + std::to_string(seed) + " depth " + std::to_string(depth));
        FabricParams p = params();
        p.link.impairment.loss = 0.1;
        p.seed = uint64_t(seed);
        Opts o;
        o.max_rd = uint8_t(depth);
        o.max_dest_rd = uint8_t(depth);
        Pair t(false, o, o, p);
        constexpr int kN = 300;
        constexpr uint32_t kLen = 3000;
        std::vector<uint64_t> target = {0}, result(kN, 0);
        std::vector<uint8_t> src = pattern(kN * kLen, 7), dst(kN * kLen, 0), rsrc = pattern(kN * kLen, 8),
                             rdst(kN * kLen, 0);
        const uint32_t tkey = t.b.reg(target), rkey = t.a.reg(result), skey = t.a.reg(src), dkey = t.b.reg(dst),
                       rskey = t.b.reg(rsrc), rdkey = t.a.reg(rdst);
        for (int i = 0; i < kN; i++) {
            const size_t off = size_t(i) * kLen;
            SendWr w = faa(i, sge(result, rkey, 8 * i), va(target), tkey, uint64_t(i) + 1);
            if (i % 3 == 1) {
                w.opcode = WrOpcode::RdmaWrite;
                w.sg[0] = sge(src, skey, off, kLen);
                w.remote_addr = va(dst, off);
                w.rkey = dkey;
            } else if (i % 3 == 2) {
                w.opcode = WrOpcode::RdmaRead;
                w.sg[0] = sge(rdst, rdkey, off, kLen);
                w.remote_addr = va(rsrc, off);
                w.rkey = rskey;
            }
            ASSERT_EQ(t.a.v().post_send(t.a.qp, w), 0);
        }
        t.f.run_until_idle();
        auto sw = t.a.poll();
        ASSERT_EQ(sw.size(), size_t(kN));
        uint64_t sum = 0;
        for (int i = 0; i < kN; i++) {
            EXPECT_EQ(sw[i].wr_id, uint64_t(i));
            ASSERT_EQ(sw[i].status, WcStatus::Success) << i;
            if (i % 3 == 0) {
                EXPECT_EQ(sw[i].opcode, WcOpcode::FetchAdd);
                EXPECT_EQ(result[i], sum) << "FETCH ADD " << i << " saw the sum before it";
                sum += uint64_t(i) + 1;
            } else {
                const size_t off = size_t(i) * kLen;
                const auto& from = i % 3 == 1 ? src : rsrc;
                const auto& to = i % 3 == 1 ? dst : rdst;
                EXPECT_TRUE(std::equal(from.begin() + off, from.begin() + off + kLen, to.begin() + off)) << i;
            }
        }
        EXPECT_EQ(target[0], sum);
        EXPECT_EQ(t.b.c().atomics, uint64_t(kN / 3)) << "each executed once";
        EXPECT_GT(t.a.c().retransmits, 0u);
        EXPECT_GT(t.f.link(1, 0)->dropped(), 0u);
        EXPECT_EQ(t.a.state(), QpState::Rts);
        replays += t.b.c().atomic_replays;
    }
    EXPECT_GT(replays, 0u) << "some ATOMIC ACKs were lost and answered again from the cache";
}

// post_send: atomics are RC's, need max_rd_atomic > 0 and 8 bytes of SGEs for the result. A
// result SGE in a region without local write fails the WQE LOC_PROT_ERR before anything leaves.
TEST(VerbsAtomic, PostSendRefusesWhatCannotBeAnAtomic)
{
    SimFabric f(params());
    Nic& n = f.nic(0, 1);
    std::vector<uint64_t> buf(4, 0);
    for (QpType type : {QpType::Uc, QpType::Ud}) {
        Ep e = make_ep(n, type);
        QpAttr a;
        a.state = QpState::Init;
        a.access = kAll;
        a.qkey = 0x11;
        ASSERT_EQ(e.v().qp_modify(e.qp, a, QpAttr::kState | (type == QpType::Ud ? QpAttr::kQkey : QpAttr::kAccess)), 0);
        const uint32_t key = e.reg(buf);
        EXPECT_EQ(e.v().post_send(e.qp, faa(1, sge(buf, key), va(buf), key, 1)), EINVAL);
        EXPECT_EQ(e.v().post_send(e.qp, cas(1, sge(buf, key), va(buf), key, 0, 1)), EINVAL);
    }
    Pair t(false);
    const uint32_t key = t.a.reg(buf);
    EXPECT_EQ(t.a.v().post_send(t.a.qp, faa(1, sge(buf, key, 0, 7), va(buf), key, 1)), EINVAL) << "7 bytes";
    SendWr bad = faa(1, sge(buf, key), va(buf), key, 1);
    bad.opcode = static_cast<WrOpcode>(7);
    EXPECT_EQ(t.a.v().post_send(t.a.qp, bad), EINVAL);
    Opts none;
    none.max_rd = 0;
    Pair z(false, none);
    const uint32_t zkey = z.a.reg(buf);
    EXPECT_EQ(z.a.v().post_send(z.a.qp, faa(1, sge(buf, zkey), va(buf), zkey, 1)), EINVAL) << "max_rd_atomic 0";

    std::vector<uint64_t> target = {3}, ro(1, 0);
    const uint32_t tkey = t.b.reg(target), rokey = t.a.reg(ro, kRemoteRead);
    ASSERT_EQ(t.a.v().post_send(t.a.qp, faa(9, sge(ro, rokey), va(target), tkey, 1)), 0);
    t.f.run_until_idle();
    auto sw = t.a.poll();
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].status, WcStatus::LocProtErr);
    EXPECT_EQ(sw[0].opcode, WcOpcode::FetchAdd);
    EXPECT_EQ(target[0], 3u);
    EXPECT_EQ(t.b.c().rx_packets, 0u);
}

// Regions: remote atomic needs local write (as verbs refuses), like remote write.
TEST(VerbsAtomic, RemoteAtomicWithoutLocalWriteIsRefused)
{
    SimFabric f(params());
    Nic& n = f.nic(0, 1);
    const uint32_t pd = n.verbs().pd_alloc();
    std::vector<uint64_t> buf(4);
    EXPECT_EQ(n.verbs().mr_reg(pd, buf.data(), 32, kRemoteAtomic), 0u);
    EXPECT_EQ(n.verbs().mr_reg(pd, buf.data(), 32, kRemoteAtomic | kRemoteRead), 0u);
    EXPECT_NE(n.verbs().mr_reg(pd, buf.data(), 32, kRemoteAtomic | kLocalWrite), 0u);
}

// Hostile and out-of-turn frames: an atomic behind the expected PSN that the responder never
// executed is dropped (nothing to answer, nothing executed); one from another host is dropped;
// an ATOMIC ACK the requester has no atomic for is stale; two atomics arriving together at a
// responder with max_dest_rd_atomic 1 execute the first and NAK the second (invalid request).
TEST(VerbsAtomic, HostileAndOutOfTurnFrames)
{
    Opts responder;
    responder.max_dest_rd = 1;
    Pair t(false, {}, responder);
    std::vector<uint64_t> target = {50};
    const uint32_t tkey = t.b.reg(target);
    const uint32_t e = 0xFFFFFA;  // the PSN b expects
    auto frame = [&](uint8_t op, uint32_t psn, uint32_t ip, Nic& to, uint32_t qpn) {
        wire::Headers h;
        h.src_mac = t.a.nic->address().mac;
        h.dst_mac = to.address().mac;
        h.src_ip = ip;
        h.dst_ip = to.address().ip;
        h.dest_qp = qpn;
        h.opcode = op;
        h.psn = psn & 0xFFFFFF;
        h.ack_req = true;
        h.va = va(target);
        h.rkey = tkey;
        h.swap_add = 1;
        h.aeth = wire::aeth(wire::kAethAck, 0);
        h.atomic_orig = 0xBAD;
        h.pad = true;
        std::vector<uint8_t> f(wire::frame_bytes(op, 0, true));
        EXPECT_EQ(wire::encode(h, nullptr, 0, f.data(), f.size()), f.size());
        return f;
    };
    const uint32_t ip = t.a.nic->address().ip;
    t.f.inject_frame(t.b.nic->index(), frame(wire::kOpRcFetchAdd, e - 1, ip, *t.b.nic, t.b.qpn()), t.f.sim().now());
    t.f.run_until_idle();
    EXPECT_EQ(drops(*t.b.nic, RxDrop::Duplicate), 1u) << "behind, but never an atomic: no answer";
    t.f.inject_frame(t.b.nic->index(), frame(wire::kOpRcFetchAdd, e, ip + 1, *t.b.nic, t.b.qpn()), t.f.sim().now());
    t.f.run_until_idle();
    EXPECT_EQ(drops(*t.b.nic, RxDrop::WrongPeer), 1u);
    const uint32_t bip = t.b.nic->address().ip;
    t.f.inject_frame(t.a.nic->index(), frame(wire::kOpRcAtomicAck, 0x7FFFF8, bip, *t.a.nic, t.a.qpn()), t.f.sim().now());
    t.f.run_until_idle();
    EXPECT_EQ(drops(*t.a.nic, RxDrop::StaleAck), 1u) << "no atomic outstanding";
    EXPECT_EQ(target[0], 50u);
    EXPECT_EQ(t.b.c().atomics + t.b.c().atomic_replays, 0u);
    EXPECT_EQ(t.b.state(), QpState::Rts);

    const SimTime now = t.f.sim().now();
    t.f.inject_frame(t.b.nic->index(), frame(wire::kOpRcFetchAdd, e, ip, *t.b.nic, t.b.qpn()), now);
    t.f.inject_frame(t.b.nic->index(), frame(wire::kOpRcFetchAdd, e + 1, ip, *t.b.nic, t.b.qpn()), now);
    t.f.run_until_idle();
    EXPECT_EQ(target[0], 51u) << "the first executed";
    EXPECT_EQ(t.b.c().atomics, 1u);
    EXPECT_EQ(drops(*t.b.nic, RxDrop::InvalidRequest), 1u) << "the second is past max_dest_rd_atomic";
    EXPECT_EQ(t.b.state(), QpState::Err);
}


// A duplicate's answer from the cache does not take a responder resource: with
// max_dest_rd_atomic 2, an atomic, its duplicate and the next atomic arriving together (the
// first answer not out yet) all get answers; the second atomic is within the requester's 2 in
// flight and must not be refused as an invalid request.
TEST(VerbsAtomic, ADuplicatesAnswerTakesNoResponderResource)
{
    Opts responder;
    responder.max_dest_rd = 2;
    Pair t(false, {}, responder);
    std::vector<uint64_t> target = {7};
    const uint32_t tkey = t.b.reg(target);
    const uint32_t e = 0xFFFFFA;  // the PSN b expects
    auto frame = [&](uint32_t psn) {
        wire::Headers h;
        h.src_mac = t.a.nic->address().mac;
        h.dst_mac = t.b.nic->address().mac;
        h.src_ip = t.a.nic->address().ip;
        h.dst_ip = t.b.nic->address().ip;
        h.dest_qp = t.b.qpn();
        h.opcode = wire::kOpRcFetchAdd;
        h.psn = psn & 0xFFFFFF;
        h.ack_req = true;
        h.va = va(target);
        h.rkey = tkey;
        h.swap_add = 1;
        h.pad = true;
        std::vector<uint8_t> f(wire::frame_bytes(h.opcode, 0, true));
        EXPECT_EQ(wire::encode(h, nullptr, 0, f.data(), f.size()), f.size());
        return f;
    };
    const SimTime now = t.f.sim().now();
    for (uint32_t psn : {e, e, e + 1}) t.f.inject_frame(t.b.nic->index(), frame(psn), now);
    t.f.run_until_idle();
    EXPECT_EQ(target[0], 9u);
    EXPECT_EQ(t.b.c().atomics, 2u);
    EXPECT_EQ(t.b.c().atomic_replays, 1u);
    EXPECT_EQ(drops(*t.b.nic, RxDrop::InvalidRequest), 0u);
    EXPECT_EQ(t.b.state(), QpState::Rts);
}

// IBV_SEND_FENCE: a WRITE of the last KiB of a 64 KiB READ's bytes, posted right behind it and
// fenced, leaves only once the READ completed, so the READ returns the bytes as they were
// (unfenced, the responder places the WRITE while the READ's responses still read the region,
// and its last ones read the new bytes); likewise a fenced READ behind a FETCH ADD of its word
// reads the sum.
TEST(VerbsAtomic, FenceWaitsForTheReadsAndAtomicsBeforeIt)
{
    Pair t(false);
    constexpr uint32_t kLen = 64 * 1024;
    std::vector<uint8_t> remote = pattern(kLen, 5), fresh = pattern(1024, 6), got(kLen, 0);
    const std::vector<uint8_t> before = remote;
    const uint32_t rkey = t.b.reg(remote), fkey = t.a.reg(fresh), gkey = t.a.reg(got);
    SendWr rd = faa(1, sge(got, gkey, 0, kLen), va(remote), rkey, 0);
    rd.opcode = WrOpcode::RdmaRead;
    SendWr wr = faa(2, sge(fresh, fkey, 0, 1024), va(remote, kLen - 1024), rkey, 0);
    wr.opcode = WrOpcode::RdmaWrite;
    wr.fence = true;
    ASSERT_EQ(t.a.v().post_send(t.a.qp, rd), 0);
    ASSERT_EQ(t.a.v().post_send(t.a.qp, wr), 0);
    t.f.run_until_idle();
    auto sw = t.a.poll();
    ASSERT_EQ(sw.size(), 2u);
    EXPECT_EQ(sw[0].status, WcStatus::Success);
    EXPECT_EQ(sw[1].status, WcStatus::Success);
    EXPECT_EQ(got, before) << "the READ saw nothing of the fenced WRITE";
    EXPECT_TRUE(std::equal(fresh.begin(), fresh.end(), remote.begin() + (kLen - 1024)));

    std::vector<uint64_t> word = {40}, res(2, 0);
    const uint32_t wkey = t.b.reg(word), reskey = t.a.reg(res);
    ASSERT_EQ(t.a.v().post_send(t.a.qp, faa(3, sge(res, reskey), va(word), wkey, 2)), 0);
    SendWr fenced = faa(4, sge(res, reskey, 8), va(word), wkey, 0);
    fenced.opcode = WrOpcode::RdmaRead;
    fenced.fence = true;
    ASSERT_EQ(t.a.v().post_send(t.a.qp, fenced), 0);
    t.f.run_until_idle();
    ASSERT_EQ(t.a.poll().size(), 2u);
    EXPECT_EQ(res[0], 40u);
    EXPECT_EQ(res[1], 42u);
}
