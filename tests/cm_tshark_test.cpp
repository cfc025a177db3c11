// Wireshark reads the CM agent's MADs as the IBTA's Communication Manager: a connection's REQ,
// REP, RTU, DREQ and DREP on QP1 (the service ID, comm IDs, QPNs and PSNs as exchanged), the
// RDMA IP CM header in the REQ's private data, and every REQ, REP and REJ field at its place.
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

// Every REQ, REP and REJ field the agent fills, each with a value of its own, read back by tshark
// at the IBTA's offsets and bit positions.
TEST(CmTshark, EveryFieldAtItsPlace)
{
    if (!tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to dissect our pcaps";
    const std::string path = "/tmp/sdr_cm_tshark_fields_" + std::to_string(getpid()) + ".pcap";
    const uint64_t sid = service_id(PortSpace::Tcp, 18515);
    {
        FabricParams p = cm_params();
        p.pcap_path = path;
        CmPair t(p);
        ASSERT_EQ(t.b.cm->listen(t.b.cm->create_id(), sid), 0);
        ConnParams pa;
        pa.qpn = 0x812345;
        pa.starting_psn = 0x654321;
        pa.qp_type = verbs::QpType::Uc;
        pa.responder_resources = 2;
        pa.initiator_depth = 3;
        pa.retry_count = 5;
        pa.rnr_retry_count = 6;
        pa.srq = true;
        pa.flow_control = false;
        pa.path_mtu = 2048;
        Path path_ab = t.path(4242);
        path_ab.flow_label = 0x12345;
        path_ab.traffic_class = 0x20;
        path_ab.hop_limit = 7;
        path_ab.local_ack_timeout = 9;
        const CmId ida = t.a.cm->create_id();
        ASSERT_EQ(t.a.cm->connect(ida, sid, path_ab, pa, nullptr, 0), 0);
        ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Request); }));
        ConnParams pb;
        pb.qpn = 0x8ABCDE;
        pb.starting_psn = 0x0F0F0F;
        pb.responder_resources = 1;
        pb.initiator_depth = 4;
        pb.rnr_retry_count = 2;
        pb.srq = true;
        pb.flow_control = true;
        ASSERT_EQ(t.b.cm->accept(t.b.find(EventType::Request)->id, pb, nullptr, 0), 0);
        ASSERT_TRUE(t.run_until([&] { return t.a.find(EventType::RepReceived); }));
        const std::vector<uint8_t> why = {'n', 'o'};
        ASSERT_EQ(t.a.cm->reject(ida, kRejConsumer, why.data(), why.size()), 0);
        ASSERT_TRUE(t.run_until([&] { return t.b.find(EventType::Rejected); }));
        t.f.run_until_idle();
    }
    std::string err;
    auto rows = tshark_fields(path,
                              {"infiniband.mad.attributeid", "infiniband.cm.req.localqpn", "infiniband.cm.req.startpsn",
                               "infiniband.cm.req.transpsvctype", "infiniband.cm.req.responderres",
                               "infiniband.cm.req.initdepth", "infiniband.cm.req.retrcount",
                               "infiniband.cm.req.rnrretrcount", "infiniband.cm.req.srq",
                               "infiniband.cm.req.e2eflowctrl",
                               "infiniband.cm.req.pppmtu", "infiniband.cm.req.pkey", "infiniband.cm.req.maxcmretr",
                               "infiniband.cm.req.remoteresptout", "infiniband.cm.req.localresptout",
                               "infiniband.cm.req.prim_flowlabel", "infiniband.cm.req.prim_tfcclass",
                               "infiniband.cm.req.prim_hoplim", "infiniband.cm.req.prim_localacktout",
                               "infiniband.cm.req.prim_localgid_ipv4", "infiniband.cm.req.prim_remotegid_ipv4",
                               "infiniband.cm.rep.localqpn", "infiniband.cm.rep.startpsn", "infiniband.cm.rep.respres",
                               "infiniband.cm.rep.initdepth", "infiniband.cm.rep.rnrretrcount", "infiniband.cm.rep.srq",
                               "infiniband.cm.rep.e2eflowctrl", "infiniband.cm.rej.msgrej", "infiniband.cm.rej.reason",
                               "infiniband.cm.rej.private"},
                              &err);
    std::remove(path.c_str());
    ASSERT_TRUE(rows) << err;
    ASSERT_EQ(rows->size(), 3u);  // REQ, REP, REJ
    const auto& req = (*rows)[0];
    ASSERT_EQ(req.size(), 31u);
    EXPECT_EQ(parse_tshark_uint(req[0]), 0x0010u);
    EXPECT_EQ(parse_tshark_uint(req[1]), 0x812345u);
    EXPECT_EQ(parse_tshark_uint(req[2]), 0x654321u);
    EXPECT_EQ(parse_tshark_uint(req[3]), 1u);  // UC
    EXPECT_EQ(parse_tshark_uint(req[4]), 2u);
    EXPECT_EQ(parse_tshark_uint(req[5]), 3u);
    EXPECT_EQ(parse_tshark_uint(req[6]), 5u);
    EXPECT_EQ(parse_tshark_uint(req[7]), 6u);
    EXPECT_EQ(parse_tshark_uint(req[8]), 1u);
    EXPECT_EQ(parse_tshark_uint(req[9]), 0u);
    EXPECT_EQ(parse_tshark_uint(req[10]), 4u);  // 2048
    EXPECT_EQ(parse_tshark_uint(req[11]), 0xFFFFu);
    EXPECT_EQ(parse_tshark_uint(req[12]), cm_config().max_retries);
    EXPECT_EQ(parse_tshark_uint(req[13]), cm_config().response_timeout_code);
    EXPECT_EQ(parse_tshark_uint(req[14]), cm_config().response_timeout_code);
    // The flow label is the top 20 bits of the word at byte 88 (IBTA; the kernel's
    // CM_REQ_PRIMARY_FLOW_LABEL): the bytes 12 34 5x. tshark 4.0 reads three bytes under a
    // 32-bit mask and shows their top 12 bits, 0x123; the traffic class right after is read
    // right, so the word is where it belongs.
    EXPECT_EQ(parse_tshark_uint(req[15]), 0x12345u >> 8);
    EXPECT_EQ(parse_tshark_uint(req[16]), 0x20u);
    EXPECT_EQ(parse_tshark_uint(req[17]), 7u);
    EXPECT_EQ(parse_tshark_uint(req[18]), 9u);
    EXPECT_EQ(req[19], dotted(SimFabric::address_of(0).ip));
    EXPECT_EQ(req[20], dotted(SimFabric::address_of(1).ip));
    const auto& rep = (*rows)[1];
    EXPECT_EQ(parse_tshark_uint(rep[0]), 0x0013u);
    EXPECT_EQ(parse_tshark_uint(rep[21]), 0x8ABCDEu);
    EXPECT_EQ(parse_tshark_uint(rep[22]), 0x0F0F0Fu);
    EXPECT_EQ(parse_tshark_uint(rep[23]), 1u);
    EXPECT_EQ(parse_tshark_uint(rep[24]), 4u);
    EXPECT_EQ(parse_tshark_uint(rep[25]), 2u);
    EXPECT_EQ(parse_tshark_uint(rep[26]), 1u);
    EXPECT_EQ(parse_tshark_uint(rep[27]), 1u);
    const auto& rej = (*rows)[2];
    EXPECT_EQ(parse_tshark_uint(rej[0]), 0x0012u);
    EXPECT_EQ(parse_tshark_uint(rej[28]), 1u);  // the REP is rejected
    EXPECT_EQ(parse_tshark_uint(rej[29]), kRejConsumer);
    EXPECT_EQ(rej[30].substr(0, 4), "6e6f");
}
