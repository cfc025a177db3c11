// Test helper: two NICs of a simulated fabric, each with a CM agent (emu/cm) whose events are
// recorded, and RC/UD endpoints moved through their states with what the CM exchanged.
#pragma once

#include <sdr/emu/cm_agent.hpp>
#include <sdr/emu/fabric.hpp>
#include <sdr/emu/verbs_engine.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

namespace sdr::test {

using namespace sdr::emu;
using namespace sdr::emu::cm;

inline FabricParams cm_params()
{
    FabricParams p;
    p.link.rtt_ms = 0.01;
    p.payload = true;
    return p;
}

struct CmSide {
    Nic* nic = nullptr;
    std::unique_ptr<CmAgent> cm;
    std::vector<Event> events;
    uint32_t pd = 0, cq = 0, qp = 0;
    VerbsEngine& v() const { return nic->verbs(); }
    uint32_t ip() const { return nic->address().ip; }
    uint32_t qpn() const { return v().qpn(qp); }
    void attach(const CmConfig& cfg)
    {
        cm = std::make_unique<CmAgent>(v(), cfg);
        cm->set_event_handler([this](const Event& e) { events.push_back(e); });
    }
    const Event* find(EventType t, size_t nth = 0) const
    {
        for (const Event& e : events)
            if (e.type == t && nth-- == 0) return &e;
        return nullptr;
    }
    size_t count(EventType t) const
    {
        size_t n = 0;
        for (const Event& e : events) n += e.type == t;
        return n;
    }
    // A QP of `type` in INIT (RC: local write, remote write and read; UD: Q_Key qkey, in RTS).
    void make_qp(verbs::QpType type, uint32_t qkey = 0)
    {
        pd = v().pd_alloc();
        cq = v().cq_create(1024);
        qp = v().qp_create(type, pd, cq, cq, 256, 256);
        ASSERT_NE(qp, VerbsEngine::kNoHandle);
        verbs::QpAttr a;
        a.state = verbs::QpState::Init;
        a.access = verbs::kLocalWrite | verbs::kRemoteWrite | verbs::kRemoteRead;
        a.qkey = qkey;
        const uint32_t mask = type == verbs::QpType::Ud ? verbs::QpAttr::kQkey : verbs::QpAttr::kAccess;
        ASSERT_EQ(v().qp_modify(qp, a, verbs::QpAttr::kState | mask), 0);
        if (type != verbs::QpType::Ud) return;
        a.state = verbs::QpState::Rtr;
        ASSERT_EQ(v().qp_modify(qp, a, verbs::QpAttr::kState), 0);
        a.state = verbs::QpState::Rts;
        ASSERT_EQ(v().qp_modify(qp, a, verbs::QpAttr::kState | verbs::QpAttr::kSqPsn), 0);
    }
    // INIT -> RTR -> RTS with what the CM told each side: the peer's QPN and first PSN, our own.
    void ready_rc(const ConnParams& mine, const ConnParams& peer, uint32_t peer_ip)
    {
        verbs::QpAttr a;
        a.state = verbs::QpState::Rtr;
        a.path_mtu = peer.path_mtu;
        a.dest_qpn = peer.qpn;
        a.rq_psn = peer.starting_psn;
        a.remote_gid = verbs::gid_from_ipv4(peer_ip);
        a.max_dest_rd_atomic = mine.responder_resources;
        using M = verbs::QpAttr;
        const uint32_t rtr =
            M::kState | M::kPathMtu | M::kDestQpn | M::kRqPsn | M::kAv | M::kMaxDestRdAtomic | M::kMinRnrTimer;
        ASSERT_EQ(v().qp_modify(qp, a, rtr), 0);
        a.state = verbs::QpState::Rts;
        a.sq_psn = mine.starting_psn;
        a.retry_cnt = mine.retry_count;
        a.rnr_retry = peer.rnr_retry_count;
        a.max_rd_atomic = mine.initiator_depth;
        const uint32_t rts = M::kState | M::kSqPsn | M::kTimeout | M::kRetryCnt | M::kRnrRetry | M::kMaxRdAtomic;
        ASSERT_EQ(v().qp_modify(qp, a, rts), 0);
    }
};

inline CmConfig cm_config()
{
    CmConfig c;
    c.seed = 7;
    return c;
}

// NIC 0 (a, the active side) and NIC 1 (b, the passive side), both with agents.
struct CmPair {
    SimFabric f;
    CmSide a, b;
    explicit CmPair(FabricParams p = cm_params(), CmConfig cfg = cm_config(), bool attach_b = true) : f(p)
    {
        a.nic = &f.nic(0, 1);
        b.nic = &f.nic(1, 1);
        a.attach(cfg);
        CmConfig cb = cfg;
        if (cb.seed) cb.seed = *cb.seed + 1;
        if (attach_b) b.attach(cb);
        else (void)b.v();  // the verbs engine without an agent: QP1 frames are unknown_qp drops
    }
    uint64_t now_ns() { return f.sim().now() / 1000; }
    // Run until pred() holds or limit_ns of virtual time passed; pred()'s last value (it is
    // called once per event, so it may take what it looks for, as a CQ poll does).
    bool run_until(const std::function<bool()>& pred, uint64_t limit_ns = 10'000'000'000)
    {
        const SimTime end = f.sim().now() + limit_ns * 1000;
        bool ok;
        while (!(ok = pred()) && f.sim().now() < end) f.wait_event(end);
        return ok;
    }
    void run_for(uint64_t ns) { f.advance_to(f.sim().now() + ns * 1000); }
    // The path from a to b (rdma_cm's source port sport).
    Path path(uint16_t sport = 50000) const
    {
        Path p;
        p.local_ip = a.ip();
        p.remote_ip = b.ip();
        p.local_gid = verbs::gid_from_ipv4(a.ip());
        p.remote_gid = verbs::gid_from_ipv4(b.ip());
        p.local_port = sport;
        return p;
    }
};

inline ConnParams conn_params(uint32_t qpn, uint32_t psn)
{
    ConnParams c;
    c.qpn = qpn;
    c.starting_psn = psn;
    c.responder_resources = 4;
    c.initiator_depth = 4;
    c.retry_count = 7;
    c.rnr_retry_count = 7;
    c.path_mtu = 1024;
    return c;
}

}  // namespace sdr::test
