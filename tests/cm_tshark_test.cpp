// Wireshark reads the CM agent's MADs as the IBTA's Communication Manager: a connection's REQ,
// REP, RTU, DREQ and DREP on QP1 (the service ID, comm IDs, QPNs and PSNs as exchanged), and the
// RDMA IP CM header in the REQ's private data.
#include "cm_util.hpp"
#include "tshark_util.hpp"

#include <sdr/emu/wire.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

using namespace sdr::emu;
using namespace sdr::emu::cm;
using namespace sdr::test;

namespace {

std::string dotted(uint32_t ip)
{
    return std::to_string(ip >> 24) + "." + std::to_string(ip >> 16 & 255) + "." + std::to_string(ip >> 8 & 255) +
           "." + std::to_string(ip & 255);
}

}  // namespace

TEST(CmTshark, ConnectionDissectsAsCm)
{
    if (!tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to dissect our pcaps";
    const std::string path = "/tmp/sdr_cm_tshark_" + std::to_string(getpid()) + ".pcap";
    const uint64_t sid = service_id(PortSpace::Tcp, 7471);
    uint32_t qpn_a = 0, qpn_b = 0, ip_a = 0, ip_b = 0;
    CmId id_a = kNoId, id_b = kNoId;
    {
        FabricParams p = cm_params();
        p.pcap_path = path;
        CmPair t(p);
        t.a.make_qp(verbs::QpType::Rc);
        t.b.make_qp(verbs::QpType::Rc);
        qpn_a = t.a.qpn();
        qpn_b = t.b.qpn();
        ip_a = t.a.ip();
        ip_b = t.b.ip();
        const CmId l = t.b.cm->create_id();
        ASSERT_EQ(t.b.cm->listen(l, sid), 0);
        id_a = t.a.cm->create_id();
        const ConnParams pa = conn_params(qpn_a, 0x00ABCD);
        ASSERT_EQ(t.a.cm->connect(id_a, sid, t.path(50123), pa, nullptr, 0), 0);
        ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Request); }));
        const Event req = *t.b.find(EventType::Request);
        id_b = req.id;
        const ConnParams pb = conn_params(qpn_b, 0x00BEEF);
        t.b.ready_rc(pb, req.peer, t.a.ip());
        ASSERT_EQ(t.b.cm->accept(id_b, pb, nullptr, 0), 0);
        ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::RepReceived); }));
        t.a.ready_rc(pa, t.a.find(EventType::RepReceived)->peer, t.b.ip());
        ASSERT_EQ(t.a.cm->accept(id_a, pa, nullptr, 0), 0);
        ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Established); }));
        ASSERT_EQ(t.a.cm->disconnect(id_a), 0);
        ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Disconnected); }));
        ASSERT_EQ(t.b.cm->disconnect(id_b), 0);
        ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::Disconnected); }));
        t.f.run_until_idle();
    }
    std::string err;
    // The names are tshark 4.0's (tshark -G fields): a REQ's and a REP's local comm ID are the
    // fields "infiniband.cm.req" and "infiniband.cm.rep", a DREQ's remote QPN is filed under
    // "infiniband.cm.req.remoteqpneecn", a DREP is "drsp".
    auto rows = tshark_fields(path,
                              {"infiniband.bth.destqp", "infiniband.deth.q_key", "infiniband.deth.srcqp",
                               "infiniband.mad.mgmtclass", "infiniband.mad.method", "infiniband.mad.attributeid",
                               "infiniband.cm.req", "infiniband.cm.req.serviceid", "infiniband.cm.req.localqpn",
                               "infiniband.cm.req.startpsn", "infiniband.cm.rep", "infiniband.cm.rep.remotecommid",
                               "infiniband.cm.rep.localqpn", "infiniband.cm.rep.startpsn",
                               "infiniband.cm.rtu.localcommid", "infiniband.cm.rtu.remotecommid",
                               "infiniband.cm.dreq.localcommid", "infiniband.cm.dreq.remotecommid",
                               "infiniband.cm.req.remoteqpneecn", "infiniband.cm.drsp.localcommid",
                               "infiniband.cm.drsp.remotecommid", "infiniband.cm.req.ip_cm.ipv",
                               "infiniband.cm.req.ip_cm.sport", "infiniband.cm.req.ip_cm.sip4",
                               "infiniband.cm.req.ip_cm.dip4", "infiniband.cm.req.serviceid.dport"},
                              &err);
    std::remove(path.c_str());
    ASSERT_TRUE(rows) << err;
    ASSERT_EQ(rows->size(), 5u);  // REQ, REP, RTU, DREQ, DREP: nothing else on the wire
    const uint16_t attrs[] = {0x0010, 0x0013, 0x0014, 0x0015, 0x0016};
    for (size_t i = 0; i < 5; i++) {
        const auto& r = (*rows)[i];
        ASSERT_EQ(r.size(), 26u);
        EXPECT_EQ(parse_tshark_uint(r[0]), 1u) << i;
        EXPECT_EQ(parse_tshark_uint(r[1]), kGsiQkey) << i;
        EXPECT_EQ(parse_tshark_uint(r[2]), 1u) << i;
        EXPECT_EQ(parse_tshark_uint(r[3]), 0x07u) << i;
        EXPECT_EQ(parse_tshark_uint(r[4]), 0x03u) << i;
        EXPECT_EQ(parse_tshark_uint(r[5]), attrs[i]) << i;
    }
    const auto& req = (*rows)[0];
    EXPECT_EQ(parse_tshark_uint(req[6]), id_a);
    EXPECT_EQ(parse_tshark_uint(req[7]), sid);
    EXPECT_EQ(parse_tshark_uint(req[8]), qpn_a);
    EXPECT_EQ(parse_tshark_uint(req[9]), 0x00ABCDu);
    EXPECT_EQ(parse_tshark_uint(req[21]), 4u);  // the RDMA IP CM header (Annex A11)
    EXPECT_EQ(parse_tshark_uint(req[22]), 50123u);
    EXPECT_EQ(req[23], dotted(ip_a));
    EXPECT_EQ(req[24], dotted(ip_b));
    EXPECT_EQ(parse_tshark_uint(req[25]), 7471u);
    const auto& rep = (*rows)[1];
    EXPECT_EQ(parse_tshark_uint(rep[10]), id_b);
    EXPECT_EQ(parse_tshark_uint(rep[11]), id_a);
    EXPECT_EQ(parse_tshark_uint(rep[12]), qpn_b);
    EXPECT_EQ(parse_tshark_uint(rep[13]), 0x00BEEFu);
    const auto& rtu = (*rows)[2];
    EXPECT_EQ(parse_tshark_uint(rtu[14]), id_a);
    EXPECT_EQ(parse_tshark_uint(rtu[15]), id_b);
    const auto& dreq = (*rows)[3];
    EXPECT_EQ(parse_tshark_uint(dreq[16]), id_a);
    EXPECT_EQ(parse_tshark_uint(dreq[17]), id_b);
    EXPECT_EQ(parse_tshark_uint(dreq[18]), qpn_b);
    const auto& drep = (*rows)[4];
    EXPECT_EQ(parse_tshark_uint(drep[19]), id_b);
    EXPECT_EQ(parse_tshark_uint(drep[20]), id_a);
}
