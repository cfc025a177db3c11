// The CM agent (emu/cm) between two NICs on the simulator: REQ/REP/RTU with both sides' RC QPs
// moved to RTS by what the CM exchanged and data moving byte-exact; REJ when nobody listens and
// the consumer's REJ with private data; a lost REQ or REP retried into one connection; MRA for a
// slow consumer; a dead peer reported Unreachable / Disconnected in bounded virtual time;
// DREQ/DREP and time-wait; SIDR for UD; hostile MADs dropped and counted, one per class.
#include "cm_util.hpp"
#include "sim_util.hpp"

#include <sdr/emu/cm_mad.hpp>
#include <sdr/emu/wire.hpp>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace sdr::emu;
using namespace sdr::emu::cm;
using namespace sdr::test;

namespace {

constexpr uint64_t kSid = service_id(PortSpace::Tcp, 7471);

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

bool starts_with(const Event& e, const std::vector<uint8_t>& want, size_t total)
{
    if (e.private_data_len != total) return false;
    for (size_t i = 0; i < total; i++)
        if (e.private_data[i] != (i < want.size() ? want[i] : 0)) return false;
    return true;
}

// RC SEND of n bytes from `from` to `to` (QPs in RTS), received byte-exact.
void send_rc(CmSide& from, CmSide& to, size_t n, uint32_t seed)
{
    std::vector<uint8_t> src = pattern(n, seed), dst(n + 64, 0);
    const uint32_t sk = from.v().mr_reg(from.pd, src.data(), src.size(), verbs::kLocalWrite);
    const uint32_t rk = to.v().mr_reg(to.pd, dst.data(), dst.size(), verbs::kLocalWrite);
    verbs::RecvWr r;
    r.wr_id = 1;
    r.num_sge = 1;
    r.sg[0] = {reinterpret_cast<uint64_t>(dst.data()), static_cast<uint32_t>(dst.size()), rk};
    ASSERT_EQ(to.v().post_recv(to.qp, r), 0);
    verbs::SendWr w;
    w.wr_id = 2;
    w.num_sge = 1;
    w.sg[0] = {reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(n), sk};
    ASSERT_EQ(from.v().post_send(from.qp, w), 0);
    verbs::Wc rw{}, sw{};
    SimFabric& f = *static_cast<SimFabric*>(from.nic->executor());
    const SimTime end = f.sim().now() + 100'000'000'000ull;
    int got_r = 0, got_s = 0;
    while ((!got_r || !got_s) && f.sim().now() < end) {
        f.wait_event(end);
        if (!got_r) got_r = to.v().cq_poll(to.cq, &rw, 1);
        if (!got_s) got_s = from.v().cq_poll(from.cq, &sw, 1);
    }
    ASSERT_EQ(got_r, 1);
    ASSERT_EQ(got_s, 1);
    EXPECT_EQ(rw.status, verbs::WcStatus::Success);
    EXPECT_EQ(sw.status, verbs::WcStatus::Success);
    ASSERT_EQ(rw.byte_len, n);
    EXPECT_EQ(std::memcmp(dst.data(), src.data(), n), 0);
    (void)from.v().mr_dereg(sk);
    (void)to.v().mr_dereg(rk);
}

// The whole handshake: b listens, a connects, b accepts, a sends the RTU. Both QPs in RTS.
struct Connected {
    CmPair t;
    CmId la = kNoId, ida = kNoId, idb = kNoId;
    ConnParams pa, pb;
    explicit Connected(FabricParams p = cm_params(), CmConfig cfg = cm_config()) : t(p, cfg) {}
    void run()
    {
        t.a.make_qp(verbs::QpType::Rc);
        t.b.make_qp(verbs::QpType::Rc);
        la = t.b.cm->create_id();
        ASSERT_EQ(t.b.cm->listen(la, kSid), 0);
        ida = t.a.cm->create_id();
        pa = conn_params(t.a.qpn(), 0xFFFFF0);  // crosses the PSN wrap
        const auto hello = bytes("hello");
        ASSERT_EQ(t.a.cm->connect(ida, kSid, t.path(), pa, hello.data(), hello.size()), 0);
        ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Request); }));
        const Event req = *t.b.find(EventType::Request);
        idb = req.id;
        pb = conn_params(t.b.qpn(), 0x123456);
        t.b.ready_rc(pb, req.peer, req.path.remote_ip);
        const auto world = bytes("world");
        ASSERT_EQ(t.b.cm->accept(idb, pb, world.data(), world.size()), 0);
        ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::RepReceived); }));
        const Event rep = *t.a.find(EventType::RepReceived);
        t.a.ready_rc(pa, rep.peer, t.b.ip());
        ASSERT_EQ(t.a.cm->accept(ida, pa, nullptr, 0), 0);
        ASSERT_TRUE(t.a.find(EventType::Established));
        ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Established); }));
    }
};

}  // namespace

TEST(CmSim, ServiceIdIsTheRdmaIpCmServices)
{
    // Annex A11 / the kernel's rdma_get_service_id: 0x0000000001 | port space | port.
    EXPECT_EQ(service_id(PortSpace::Tcp, 7471), 0x0000000001061D2Full);
    EXPECT_EQ(service_id(PortSpace::Udp, 1), 0x0000000001110001ull);
    EXPECT_EQ(service_id(PortSpace::Ib, 0xFFFF), 0x00000000013FFFFFull);
}

TEST(CmSim, ConnectAcceptRtuThenRcDataByteExact)
{
    Connected c;
    c.run();
    CmPair& t = c.t;
    const Event& req = *t.b.find(EventType::Request);
    EXPECT_EQ(req.listen_id, c.la);
    EXPECT_EQ(req.service_id, kSid);
    EXPECT_EQ(req.peer.qpn, t.a.qpn());
    EXPECT_EQ(req.peer.starting_psn, 0xFFFFF0u);
    EXPECT_EQ(req.peer.qp_type, verbs::QpType::Rc);
    EXPECT_EQ(req.peer.path_mtu, 1024u);
    EXPECT_EQ(req.peer.responder_resources, 4);
    EXPECT_EQ(req.path.remote_ip, t.a.ip());
    EXPECT_EQ(req.path.remote_port, 50000);
    EXPECT_EQ(req.path.local_ip, t.b.ip());
    EXPECT_EQ(req.path.local_port, 7471);
    EXPECT_EQ(req.path.remote_gid, verbs::gid_from_ipv4(t.a.ip()));
    EXPECT_TRUE(starts_with(req, bytes("hello"), kReqPrivateData));
    const Event& rep = *t.a.find(EventType::RepReceived);
    EXPECT_EQ(rep.id, c.ida);
    EXPECT_EQ(rep.peer.qpn, t.b.qpn());
    EXPECT_EQ(rep.peer.starting_psn, 0x123456u);
    EXPECT_TRUE(starts_with(rep, bytes("world"), kRepPrivateData));
    EXPECT_EQ(t.b.find(EventType::Established)->id, c.idb);
    // One message of each kind, each received once; nothing dropped.
    const CmCounters& ca = t.a.cm->counters();
    const CmCounters& cb = t.b.cm->counters();
    EXPECT_EQ(ca.sent(MadKind::Req), 1u);
    EXPECT_EQ(ca.sent(MadKind::Rtu), 1u);
    EXPECT_EQ(cb.sent(MadKind::Rep), 1u);
    EXPECT_EQ(cb.received(MadKind::Req), 1u);
    EXPECT_EQ(cb.received(MadKind::Rtu), 1u);
    EXPECT_EQ(ca.received(MadKind::Rep), 1u);
    EXPECT_EQ(ca.retransmits + cb.retransmits, 0u);
    for (size_t d = 0; d < static_cast<size_t>(CmDrop::Count); d++) EXPECT_EQ(ca.drops[d] + cb.drops[d], 0u);
    // The QPs talk with what the CM exchanged: both ways, multi-packet, across the PSN wrap.
    send_rc(t.a, t.b, 10000, 1);
    send_rc(t.b, t.a, 3000, 2);
    send_rc(t.a, t.b, 1, 3);
}

TEST(CmSim, NoListenerGetsRejInvalidServiceId)
{
    CmPair t;
    t.a.make_qp(verbs::QpType::Rc);
    const CmId id = t.a.cm->create_id();
    ASSERT_EQ(t.a.cm->connect(id, service_id(PortSpace::Tcp, 9), t.path(), conn_params(t.a.qpn(), 1), nullptr, 0), 0);
    ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::Rejected); }));
    EXPECT_EQ(t.a.find(EventType::Rejected)->reject_reason, kRejInvalidServiceId);
    EXPECT_EQ(t.b.cm->counters().sent(MadKind::Rej), 1u);
    EXPECT_TRUE(t.b.events.empty());
    // The ID is idle again: it may connect once more.
    const CmId l = t.b.cm->create_id();
    ASSERT_EQ(t.b.cm->listen(l, service_id(PortSpace::Tcp, 9)), 0);
    ASSERT_EQ(t.a.cm->connect(id, service_id(PortSpace::Tcp, 9), t.path(), conn_params(t.a.qpn(), 1), nullptr, 0), 0);
    EXPECT_TRUE(t.run_until([&] { return t.b.find(EventType::Request); }));
}

// The other processes on a port that several share (port_share.hpp), as this model sees them.
struct FakeShare final : PortShare {
    std::set<uint64_t> elsewhere;  // services another process listens to
    bool answerer = false;
    std::set<uint32_t> claimed;
    int refusals = 0;  // QPN claims to refuse first (taken by others)
    bool claim_qpn(uint32_t q) override { return refusals-- > 0 ? false : claimed.insert(q).second; }
    void release_qpn(uint32_t q) override { claimed.erase(q); }
    int claim_service(uint64_t s) override { return elsewhere.count(s) ? EADDRINUSE : 0; }
    void release_service(uint64_t) override {}
    bool listened_elsewhere(uint64_t s) override { return elsewhere.count(s) > 0; }
    bool answers_for_port() override { return answerer; }
};

// A REQ that no ID of b listens to is answered by the process that listens, or by the one that
// answers for the port: b sends no REJ of its own unless it is that one. A listener another
// process has is EADDRINUSE; b's QPNs are the ones it claimed.
TEST(CmSim, SharedPortLeavesRequestsToOtherProcesses)
{
    CmPair t;
    FakeShare share;
    share.refusals = 3;
    t.b.v().set_port_share(&share);
    t.b.make_qp(verbs::QpType::Rc);
    EXPECT_EQ(share.claimed, std::set<uint32_t>{t.b.qpn()});
    t.a.make_qp(verbs::QpType::Rc);
    const uint64_t listened = service_id(PortSpace::Tcp, 9), nobody = service_id(PortSpace::Tcp, 10);
    share.elsewhere.insert(listened);
    share.answerer = true;
    EXPECT_EQ(t.b.cm->listen(t.b.cm->create_id(), listened), EADDRINUSE);
    for (uint64_t sid : {listened, nobody}) {
        if (sid == nobody) share.answerer = false;
        const CmId id = t.a.cm->create_id();
        ASSERT_EQ(t.a.cm->connect(id, sid, t.path(), conn_params(t.a.qpn(), 1), nullptr, 0), 0);
        t.run_for(100'000'000);
        EXPECT_EQ(t.b.cm->counters().sent(MadKind::Rej), 0u) << sid;
        EXPECT_EQ(t.a.find(EventType::Rejected), nullptr) << sid;
    }
    EXPECT_EQ(t.b.cm->counters().left_to_others, 2u);
    share.answerer = true;  // nobody listens, and b answers for the port
    const CmId id = t.a.cm->create_id();
    ASSERT_EQ(t.a.cm->connect(id, service_id(PortSpace::Tcp, 11), t.path(), conn_params(t.a.qpn(), 1), nullptr, 0), 0);
    ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::Rejected); }));
    EXPECT_EQ(t.a.find(EventType::Rejected)->reject_reason, kRejInvalidServiceId);
    ASSERT_EQ(t.b.v().qp_destroy(t.b.qp), 0);
    EXPECT_TRUE(share.claimed.empty());
}

TEST(CmSim, ConsumerRejectCarriesPrivateData)
{
    CmPair t;
    t.a.make_qp(verbs::QpType::Rc);
    const CmId l = t.b.cm->create_id();
    ASSERT_EQ(t.b.cm->listen(l, kSid), 0);
    EXPECT_EQ(t.b.cm->listen(t.b.cm->create_id(), kSid), EADDRINUSE);
    const CmId id = t.a.cm->create_id();
    ASSERT_EQ(t.a.cm->connect(id, kSid, t.path(), conn_params(t.a.qpn(), 1), nullptr, 0), 0);
    ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Request); }));
    const auto nope = bytes("no thanks");
    const CmId idb = t.b.find(EventType::Request)->id;
    ASSERT_EQ(t.b.cm->reject(idb, kRejConsumer, nope.data(), nope.size()), 0);
    ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::Rejected); }));
    const Event& rej = *t.a.find(EventType::Rejected);
    EXPECT_EQ(rej.id, id);
    EXPECT_EQ(rej.reject_reason, kRejConsumer);
    EXPECT_TRUE(starts_with(rej, nope, kRejPrivateData));
    EXPECT_EQ(t.b.cm->accept(idb, conn_params(1, 1), nullptr, 0), EINVAL);  // no longer pending
    EXPECT_EQ(t.a.cm->counters().retransmits, 0u);
}

TEST(CmSim, BadCallsAreRefused)
{
    CmPair t;
    const CmId id = t.a.cm->create_id();
    std::vector<uint8_t> big(kReqPrivateData + 1, 1);
    EXPECT_EQ(t.a.cm->connect(id, kSid, t.path(), conn_params(5, 1), big.data(), big.size()), EINVAL);
    ConnParams ud = conn_params(5, 1);
    ud.qp_type = verbs::QpType::Ud;
    EXPECT_EQ(t.a.cm->connect(id, kSid, t.path(), ud, nullptr, 0), EINVAL);
    Path nowhere = t.path();
    nowhere.remote_gid = verbs::gid_from_ipv4(0x0A0A0A0A);  // no NIC has it
    EXPECT_EQ(t.a.cm->connect(id, kSid, nowhere, conn_params(5, 1), nullptr, 0), EHOSTUNREACH);
    EXPECT_EQ(t.a.cm->accept(id, conn_params(5, 1), nullptr, 0), EINVAL);
    EXPECT_EQ(t.a.cm->disconnect(id), EINVAL);
    EXPECT_EQ(t.a.cm->destroy_id(id), 0);
    EXPECT_EQ(t.a.cm->destroy_id(id), EINVAL);
    EXPECT_EQ(t.a.cm->listen(id, kSid), EINVAL);
}

// The first REQ is lost on the way (the link's loss; the first seed whose first a->b frame, the
// REQ with QP1's PSN 0, is dropped): the retry after the response timeout makes one connection.
TEST(CmSim, LostReqIsRetriedIntoOneConnection)
{
    bool seen = false;
    for (uint64_t seed = 1; seed < 64 && !seen; seed++) {
        FabricParams p = cm_params();
        p.directed[{0, 1}].loss = 0.3;
        p.drop_log = true;
        p.seed = seed;
        Connected c(p);
        c.run();
        CmPair& t = c.t;
        const auto& log = t.f.drop_log();
        if (log.empty() || log.front().meta.dest_qp != wire::kGsiQpn || log.front().meta.psn != 0) continue;
        seen = true;
        EXPECT_GE(t.a.cm->counters().sent(MadKind::Req), 2u);
        EXPECT_GE(t.a.cm->counters().retransmits, 1u);
        EXPECT_EQ(t.b.count(EventType::Request), 1u);
        EXPECT_EQ(t.b.count(EventType::Established), 1u);
        EXPECT_EQ(t.a.count(EventType::RepReceived), 1u);
        EXPECT_EQ(t.a.count(EventType::Established), 1u);
    }
    EXPECT_TRUE(seen);
}

// The REP is lost (the first seed that drops b's first frame): the active side's REQ comes
// again, the passive side knows it (same comm ID from the same peer) and sends the same REP,
// not a second connection.
TEST(CmSim, DuplicateReqGetsTheSameRep)
{
    bool seen = false;
    for (uint64_t seed = 1; seed < 64 && !seen; seed++) {
        FabricParams p = cm_params();
        p.directed[{1, 0}].loss = 0.3;
        p.drop_log = true;
        p.seed = seed;
        Connected c(p);
        c.run();
        CmPair& t = c.t;
        const auto& log = t.f.drop_log();
        if (log.empty() || log.front().meta.dest_qp != wire::kGsiQpn || log.front().meta.psn != 0) continue;
        seen = true;
        EXPECT_EQ(t.b.count(EventType::Request), 1u);
        EXPECT_GE(t.b.cm->counters().duplicates, 1u);
        EXPECT_GE(t.b.cm->counters().sent(MadKind::Rep), 2u);
        EXPECT_EQ(t.a.count(EventType::RepReceived), 1u);
        EXPECT_EQ(t.b.count(EventType::Established), 1u);
    }
    EXPECT_TRUE(seen);
}

// A consumer slower than the REQ's timeout: the retried REQ gets an MRA, which holds the active
// side's retries off; the late accept still connects.
TEST(CmSim, MraHoldsOffTheActiveSide)
{
    CmConfig cfg = cm_config();
    cfg.max_retries = 1;
    cfg.mra_service_timeout_code = 20;  // 4.3 s more
    CmPair t(cm_params(), cfg);
    t.a.make_qp(verbs::QpType::Rc);
    t.b.make_qp(verbs::QpType::Rc);
    const CmId l = t.b.cm->create_id();
    ASSERT_EQ(t.b.cm->listen(l, kSid), 0);
    const CmId id = t.a.cm->create_id();
    const ConnParams pa = conn_params(t.a.qpn(), 10);
    ASSERT_EQ(t.a.cm->connect(id, kSid, t.path(), pa, nullptr, 0), 0);
    // Two tries without the MRA would end in Unreachable after about 1.1 s; wait 3 s.
    t.run_for(3'000'000'000);
    EXPECT_FALSE(t.a.find(EventType::Unreachable));
    EXPECT_GE(t.b.cm->counters().sent(MadKind::Mra), 1u);
    EXPECT_GE(t.a.cm->counters().received(MadKind::Mra), 1u);
    EXPECT_EQ(t.b.count(EventType::Request), 1u);
    const Event req = *t.b.find(EventType::Request);
    const ConnParams pb = conn_params(t.b.qpn(), 20);
    t.b.ready_rc(pb, req.peer, t.a.ip());
    ASSERT_EQ(t.b.cm->accept(req.id, pb, nullptr, 0), 0);
    ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::RepReceived); }));
    t.a.ready_rc(pa, t.a.find(EventType::RepReceived)->peer, t.b.ip());
    ASSERT_EQ(t.a.cm->accept(id, pa, nullptr, 0), 0);
    ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Established); }));
    send_rc(t.a, t.b, 2000, 6);
}

// Nobody answers on QP1 (the peer's NIC has no CM): after the REQ and its retries, Unreachable,
// within (1 + max_retries) response timeouts of virtual time.
TEST(CmSim, DeadPeerIsUnreachableInBoundedTime)
{
    CmPair t(cm_params(), cm_config(), /*attach_b=*/false);
    t.a.make_qp(verbs::QpType::Rc);
    const CmId id = t.a.cm->create_id();
    const uint64_t t0 = t.now_ns();
    ASSERT_EQ(t.a.cm->connect(id, kSid, t.path(), conn_params(t.a.qpn(), 1), nullptr, 0), 0);
    const CmConfig cfg = cm_config();
    const uint64_t try_ns = 4096ull << cfg.response_timeout_code;
    ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::Unreachable); }, 10'000'000'000));
    EXPECT_LE(t.now_ns() - t0, (1 + cfg.max_retries) * try_ns + 1'000'000);
    EXPECT_EQ(t.a.cm->counters().sent(MadKind::Req), 1u + cfg.max_retries);
    EXPECT_EQ(t.a.cm->counters().retransmits, cfg.max_retries);
    EXPECT_EQ(t.b.nic->counters().rx_drop(RxDrop::UnknownQp), 1u + cfg.max_retries);
    // Idle again, nothing more happens.
    t.run_for(5'000'000'000);
    EXPECT_EQ(t.a.events.size(), 1u);
    EXPECT_EQ(t.a.cm->counters().sent(MadKind::Req), 1u + cfg.max_retries);
}

// The active side vanished after its REQ: the passive side's REP goes unanswered through the
// REQ's Max CM Retries, then Unreachable on the passive ID.
TEST(CmSim, UnansweredRepIsUnreachable)
{
    CmPair t;
    t.a.make_qp(verbs::QpType::Rc);
    t.b.make_qp(verbs::QpType::Rc);
    const CmId l = t.b.cm->create_id();
    ASSERT_EQ(t.b.cm->listen(l, kSid), 0);
    ASSERT_EQ(t.a.cm->connect(t.a.cm->create_id(), kSid, t.path(), conn_params(t.a.qpn(), 1), nullptr, 0), 0);
    ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Request); }));
    t.a.cm.reset();  // gone: its QP1 drops the REP
    const CmId idb = t.b.find(EventType::Request)->id;
    ASSERT_EQ(t.b.cm->accept(idb, conn_params(t.b.qpn(), 2), nullptr, 0), 0);
    ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Unreachable); }));
    EXPECT_EQ(t.b.find(EventType::Unreachable)->id, idb);
    EXPECT_EQ(t.b.cm->counters().sent(MadKind::Rep), 1u + cm_config().max_retries);  // the REQ's Max CM Retries
    EXPECT_EQ(t.b.cm->disconnect(idb), EINVAL);  // idle
}

// The active side refuses the REP (rdma_reject after CONNECT_RESPONSE): the passive side gets
// Rejected with the reason and private data.
TEST(CmSim, ActiveSideRejectsTheRep)
{
    CmPair t;
    t.a.make_qp(verbs::QpType::Rc);
    const CmId l = t.b.cm->create_id();
    ASSERT_EQ(t.b.cm->listen(l, kSid), 0);
    const CmId id = t.a.cm->create_id();
    ASSERT_EQ(t.a.cm->connect(id, kSid, t.path(), conn_params(t.a.qpn(), 1), nullptr, 0), 0);
    ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Request); }));
    const CmId idb = t.b.find(EventType::Request)->id;
    ASSERT_EQ(t.b.cm->accept(idb, conn_params(77, 2), nullptr, 0), 0);
    ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::RepReceived); }));
    const auto why = bytes("changed my mind");
    ASSERT_EQ(t.a.cm->reject(id, kRejConsumer, why.data(), why.size()), 0);
    ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Rejected); }));
    const Event& rej = *t.b.find(EventType::Rejected);
    EXPECT_EQ(rej.id, idb);
    EXPECT_EQ(rej.reject_reason, kRejConsumer);
    EXPECT_TRUE(starts_with(rej, why, kRejPrivateData));
    t.run_for(5'000'000'000);  // no REP retries after the REJ
    EXPECT_EQ(t.b.cm->counters().sent(MadKind::Rep), 1u);
    EXPECT_FALSE(t.b.find(EventType::Unreachable));
}

TEST(CmSim, DreqDrepAndTimewait)
{
    Connected c;
    c.run();
    CmPair& t = c.t;
    const auto bye = bytes("bye");
    ASSERT_EQ(t.a.cm->disconnect(c.ida, bye.data(), bye.size()), 0);
    EXPECT_EQ(t.a.cm->disconnect(c.ida), EINVAL);  // already disconnecting
    ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Disconnected); }));
    const Event& dreq = *t.b.find(EventType::Disconnected);
    EXPECT_EQ(dreq.id, c.idb);
    EXPECT_EQ(dreq.disconnect_cause, DisconnectCause::DreqReceived);
    EXPECT_TRUE(starts_with(dreq, bye, kDreqPrivateData));
    EXPECT_FALSE(t.a.find(EventType::Disconnected));  // the DREP comes when b's consumer says so
    ASSERT_EQ(t.b.cm->disconnect(c.idb), 0);
    ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::Disconnected); }));
    EXPECT_EQ(t.a.find(EventType::Disconnected)->disconnect_cause, DisconnectCause::DrepReceived);
    ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::TimewaitExit) && t.b.find(EventType::TimewaitExit); }));
    EXPECT_EQ(t.a.cm->counters().sent(MadKind::Dreq), 1u);
    EXPECT_EQ(t.b.cm->counters().sent(MadKind::Drep), 1u);
    EXPECT_EQ(t.a.cm->counters().retransmits + t.b.cm->counters().retransmits, 0u);
    // After time-wait both IDs may go; the listener still takes new REQs.
    EXPECT_EQ(t.a.cm->destroy_id(c.ida), 0);
    EXPECT_EQ(t.b.cm->destroy_id(c.idb), 0);
}

// The peer vanished after the connection was made: the DREQ goes unanswered and its retries
// run out: Disconnected (DREQ timeout) in bounded virtual time, then time-wait.
TEST(CmSim, DeadPeerDisconnectsInBoundedTime)
{
    Connected c;
    c.run();
    CmPair& t = c.t;
    t.b.cm.reset();  // the peer's CM is gone: its QP1 drops what comes
    const uint64_t t0 = t.now_ns();
    ASSERT_EQ(t.a.cm->disconnect(c.ida), 0);
    const CmConfig cfg = cm_config();
    const uint64_t try_ns = 4096ull << cfg.response_timeout_code;
    ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::Disconnected); }, 10'000'000'000));
    EXPECT_EQ(t.a.find(EventType::Disconnected)->disconnect_cause, DisconnectCause::DreqTimeout);
    EXPECT_LE(t.now_ns() - t0, (1 + cfg.max_retries) * try_ns + 1'000'000);
    EXPECT_EQ(t.a.cm->counters().sent(MadKind::Dreq), 1u + cfg.max_retries);
    ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::TimewaitExit); }));
}

// Destroying a connected ID disconnects it as the kernel's CM does (a DREQ), silently.
TEST(CmSim, DestroyConnectedIdSendsDreq)
{
    Connected c;
    c.run();
    CmPair& t = c.t;
    ASSERT_EQ(t.a.cm->destroy_id(c.ida), 0);
    ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Disconnected); }));
    ASSERT_EQ(t.b.cm->disconnect(c.idb), 0);
    ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::TimewaitExit); }));
    EXPECT_EQ(t.a.cm->counters().received(MadKind::Drep), 1u);
    EXPECT_FALSE(t.a.find(EventType::Disconnected));  // no events for a destroyed ID
}

// Destroying an ID mid-handshake tells the peer, as the kernel's CM does: a pending REQ is
// withdrawn with REJ "timeout", an accepted REQ's REP with REJ "consumer reject"; the peer's
// ID reports Rejected.
TEST(CmSim, DestroyMidHandshakeRejects)
{
    CmPair t;
    const CmId l = t.b.cm->create_id();
    ASSERT_EQ(t.b.cm->listen(l, kSid), 0);
    const CmId id = t.a.cm->create_id();
    ASSERT_EQ(t.a.cm->connect(id, kSid, t.path(), conn_params(100, 1), nullptr, 0), 0);
    ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Request); }));
    ASSERT_EQ(t.a.cm->destroy_id(id), 0);  // the REQ is withdrawn
    ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Rejected); }));
    EXPECT_EQ(t.b.find(EventType::Rejected)->id, t.b.find(EventType::Request)->id);
    EXPECT_EQ(t.b.find(EventType::Rejected)->reject_reason, kRejTimeout);
    const CmId id2 = t.a.cm->create_id();
    ASSERT_EQ(t.a.cm->connect(id2, kSid, t.path(), conn_params(101, 1), nullptr, 0), 0);
    ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Request, 1); }));
    const CmId idb = t.b.find(EventType::Request, 1)->id;
    ASSERT_EQ(t.b.cm->accept(idb, conn_params(200, 2), nullptr, 0), 0);
    ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::RepReceived); }));
    ASSERT_EQ(t.b.cm->destroy_id(idb), 0);  // the REP is withdrawn before the RTU
    ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::Rejected); }));
    EXPECT_EQ(t.a.find(EventType::Rejected)->id, id2);
    EXPECT_EQ(t.a.find(EventType::Rejected)->reject_reason, kRejConsumer);
    EXPECT_EQ(t.a.cm->accept(id2, conn_params(101, 1), nullptr, 0), EINVAL);  // nothing to confirm
}

TEST(CmSim, SidrResolvesAUdQpAndDataFlows)
{
    CmPair t;
    constexpr uint32_t kQkey = 0x01234567;  // rdma_cm's RDMA_UDP_QKEY
    t.a.make_qp(verbs::QpType::Ud, kQkey);
    t.b.make_qp(verbs::QpType::Ud, kQkey);
    const uint64_t sid = service_id(PortSpace::Udp, 4000);
    const CmId l = t.b.cm->create_id();
    ASSERT_EQ(t.b.cm->listen(l, sid), 0);
    const CmId id = t.a.cm->create_id();
    const auto who = bytes("who serves 4000?");
    ASSERT_EQ(t.a.cm->sidr_request(id, sid, t.path(40000), who.data(), who.size()), 0);
    ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::SidrRequest); }));
    const Event& sreq = *t.b.find(EventType::SidrRequest);
    EXPECT_EQ(sreq.listen_id, l);
    EXPECT_EQ(sreq.service_id, sid);
    EXPECT_EQ(sreq.path.remote_ip, t.a.ip());
    EXPECT_EQ(sreq.path.remote_port, 40000);
    EXPECT_TRUE(starts_with(sreq, who, kSidrReqPrivateData));
    const auto me = bytes("me");
    ASSERT_EQ(t.b.cm->sidr_reply(sreq.id, t.b.qpn(), kQkey, SidrStatus::Valid, me.data(), me.size()), 0);
    ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::SidrReply); }));
    const Event& srep = *t.a.find(EventType::SidrReply);
    EXPECT_EQ(srep.sidr_status, SidrStatus::Valid);
    EXPECT_EQ(srep.sidr_qpn, t.b.qpn());
    EXPECT_EQ(srep.sidr_qkey, kQkey);
    EXPECT_TRUE(starts_with(srep, me, kSidrRepPrivateData));
    // A UD SEND to what SIDR answered lands byte-exact after the GRH.
    std::vector<uint8_t> src = pattern(512, 9), dst(600, 0);
    const uint32_t sk = t.a.v().mr_reg(t.a.pd, src.data(), src.size(), verbs::kLocalWrite);
    const uint32_t rk = t.b.v().mr_reg(t.b.pd, dst.data(), dst.size(), verbs::kLocalWrite);
    verbs::RecvWr r;
    r.num_sge = 1;
    r.sg[0] = {reinterpret_cast<uint64_t>(dst.data()), static_cast<uint32_t>(dst.size()), rk};
    ASSERT_EQ(t.b.v().post_recv(t.b.qp, r), 0);
    verbs::SendWr w;
    w.num_sge = 1;
    w.sg[0] = {reinterpret_cast<uint64_t>(src.data()), 512, sk};
    w.ah = t.a.v().ah_create(t.a.pd, verbs::gid_from_ipv4(t.b.ip()));
    w.remote_qpn = srep.sidr_qpn;
    w.remote_qkey = srep.sidr_qkey;
    ASSERT_EQ(t.a.v().post_send(t.a.qp, w), 0);
    verbs::Wc wc{};
    const bool got = t.run_until([&] { return t.b.v().cq_poll(t.b.cq, &wc, 1) == 1; });
    ASSERT_TRUE(got);
    EXPECT_EQ(wc.status, verbs::WcStatus::Success);
    EXPECT_EQ(wc.byte_len, verbs::kGrhBytes + 512);
    EXPECT_EQ(std::memcmp(dst.data() + verbs::kGrhBytes, src.data(), 512), 0);
    // Nobody serves another port: status "service ID not supported".
    const CmId id2 = t.a.cm->create_id();
    ASSERT_EQ(t.a.cm->sidr_request(id2, service_id(PortSpace::Udp, 4001), t.path(), nullptr, 0), 0);
    ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::SidrReply, 1); }));
    EXPECT_EQ(t.a.find(EventType::SidrReply, 1)->sidr_status, SidrStatus::ServiceIdNotSupported);
}

namespace {

// A UD SEND Only to QP1 of NIC 1 from NIC 0's address, carrying `mad`.
std::vector<uint8_t> gsi_frame(const CmPair& t, const std::vector<uint8_t>& mad, uint32_t qkey = kGsiQkey,
                               uint8_t opcode = wire::kOpUdSendOnly)
{
    wire::Headers h;
    h.src_mac = t.a.nic->address().mac;
    h.dst_mac = t.b.nic->address().mac;
    h.src_ip = t.a.ip();
    h.dst_ip = t.b.ip();
    h.opcode = opcode;
    h.dest_qp = wire::kGsiQpn;
    h.qkey = qkey;
    h.src_qp = wire::kGsiQpn;
    h.pad = true;
    std::vector<uint8_t> f(2048);
    f.resize(wire::encode(h, mad.data(), static_cast<uint32_t>(mad.size()), f.data(), f.size()));
    EXPECT_FALSE(f.empty());
    return f;
}

std::vector<uint8_t> mad_of(const CmMessage& msg)
{
    std::vector<uint8_t> m(kMadBytes);
    encode_mad(CmMad{MadHeader{}, msg}, m.data());
    return m;
}

}  // namespace

// Every class of hostile MAD is dropped and counted once, raises no event and sends nothing.
TEST(CmSim, MalformedMadsAreDroppedAndCounted)
{
    CmPair t;
    const CmId l = t.b.cm->create_id();
    ASSERT_EQ(t.b.cm->listen(l, kSid), 0);
    RtuMsg rtu;
    rtu.remote_comm_id = 0x12345;  // nobody's
    const std::vector<uint8_t> good = mad_of(rtu);
    auto with = [&](size_t at, uint8_t v) {
        std::vector<uint8_t> m = good;
        m[at] = v;
        return m;
    };
    ReqMsg bad_req;
    bad_req.service_id = kSid;
    bad_req.path_mtu = 3;
    encode_ip_cm_header(IpCmHeader{0, 6, 1, {}, {}}, bad_req.private_data.data());  // IPv6: not served
    ReqMsg rd_req = bad_req;
    encode_ip_cm_header(IpCmHeader{0, 4, 1, ip_cm_addr_v4(t.a.ip()), ip_cm_addr_v4(t.b.ip())},
                        rd_req.private_data.data());
    rd_req.transport = TransportType::Rd;
    std::vector<uint8_t> lap = good;
    lap[17] = 0x19;  // attribute LAP
    struct Case {
        std::vector<uint8_t> frame;
        CmDrop drop;
    };
    const std::vector<Case> cases = {
        {gsi_frame(t, std::vector<uint8_t>(good.begin(), good.begin() + 100)), CmDrop::Short},
        {gsi_frame(t, good, 0x80010001u), CmDrop::BadQkey},
        {gsi_frame(t, with(0, 2)), CmDrop::BadBaseVersion},
        {gsi_frame(t, with(1, 0x04)), CmDrop::BadClass},
        {gsi_frame(t, with(2, 1)), CmDrop::BadClassVersion},
        {gsi_frame(t, with(3, 0x83)), CmDrop::BadMethod},
        {gsi_frame(t, lap), CmDrop::UnknownAttr},
        {gsi_frame(t, mad_of(bad_req)), CmDrop::BadField},
        {gsi_frame(t, mad_of(rd_req)), CmDrop::BadField},
        {gsi_frame(t, good), CmDrop::UnknownCommId},
    };
    SimTime at = t.f.sim().now();
    for (const Case& c : cases) t.f.inject_frame(1, c.frame, at += 1'000'000);
    t.run_for(1'000'000);
    const CmCounters& cb = t.b.cm->counters();
    EXPECT_EQ(cb.drop(CmDrop::Short), 1u);
    EXPECT_EQ(cb.drop(CmDrop::BadQkey), 1u);
    EXPECT_EQ(cb.drop(CmDrop::BadBaseVersion), 1u);
    EXPECT_EQ(cb.drop(CmDrop::BadClass), 1u);
    EXPECT_EQ(cb.drop(CmDrop::BadClassVersion), 1u);
    EXPECT_EQ(cb.drop(CmDrop::BadMethod), 1u);
    EXPECT_EQ(cb.drop(CmDrop::UnknownAttr), 1u);
    EXPECT_EQ(cb.drop(CmDrop::BadField), 2u);
    EXPECT_EQ(cb.drop(CmDrop::UnknownCommId), 1u);
    EXPECT_TRUE(t.b.events.empty());
    for (uint64_t n : cb.tx) EXPECT_EQ(n, 0u);
    // Not a UD SEND Only: the NIC drops it before the agent.
    const uint64_t before = t.b.nic->counters().rx_drop(RxDrop::WrongOpcode);
    t.f.inject_frame(1, gsi_frame(t, good, kGsiQkey, wire::kOpUdSendOnlyImm), t.f.sim().now() + 1000);
    t.run_for(1'000'000);
    EXPECT_EQ(t.b.nic->counters().rx_drop(RxDrop::WrongOpcode), before + 1);
}

// A NIC without an agent treats QP1 as before: unknown_qp, nothing else.
TEST(CmSim, NoAgentMeansUnknownQp)
{
    CmPair t(cm_params(), cm_config(), /*attach_b=*/false);
    std::vector<uint8_t> mad(kMadBytes);
    encode_mad(CmMad{MadHeader{}, RtuMsg{}}, mad.data());
    t.f.inject_frame(1, gsi_frame(t, mad), t.f.sim().now() + 1000);
    t.run_for(1'000'000);
    EXPECT_EQ(t.b.nic->counters().rx_drop(RxDrop::UnknownQp), 1u);
}
