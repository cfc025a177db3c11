// Wireshark dissects every opcode the verbs QPs send as we meant it: RC (below), UC SEND and RDMA WRITE
// FIRST/MIDDLE/LAST/ONLY with and without immediate (RETH on WRITE FIRST/ONLY, PadCnt on odd
// lengths) and UD SEND Only with and without immediate (DETH: Q_Key, source QP), RC atomics
// (AtomicETH, AtomicAckETH); every captured ICRC verifies (tshark does not check it).
#include "tshark_util.hpp"

#include <sdr/emu/fabric.hpp>
#include <sdr/emu/verbs_engine.hpp>
#include <sdr/emu/wire.hpp>

#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <tuple>
#include <string>
#include <vector>

using namespace sdr::emu;
using namespace sdr::emu::verbs;
using sdr::test::parse_tshark_bytes_be;
using sdr::test::parse_tshark_uint;

namespace {

struct Expect {
    uint8_t opcode;
    uint32_t dest_qp, psn, pad = 0;
    std::optional<uint64_t> va;
    uint32_t rkey = 0, dmalen = 0;
    std::optional<uint32_t> imm;
    std::optional<uint32_t> qkey, src_qp;
};

}  // namespace

TEST(VerbsTshark, EveryOpcodeDissectsWithItsFields)
{
    if (!sdr::test::tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to dissect our pcaps";
    const std::string path = "/tmp/sdr_verbs_tshark_" + std::to_string(getpid()) + ".pcap";
    std::vector<Expect> want;
    {
        FabricParams p;
        p.link.rtt_ms = 0.01;
        p.pcap_path = path;
        SimFabric f(p);
        Nic& na = f.nic(0, 1);
        Nic& nb = f.nic(1, 1);
        const uint32_t pda = na.verbs().pd_alloc(), pdb = nb.verbs().pd_alloc();  // one PD per NIC
        auto ep = [](Nic& n, QpType t, const uint32_t* pd, uint32_t* qp) {
            uint32_t cq = n.verbs().cq_create(64);
            *qp = n.verbs().qp_create(t, *pd, cq, cq, 32, 32);
        };
        uint32_t uca, ucb, uda, udb;
        ep(na, QpType::Uc, &pda, &uca);
        ep(nb, QpType::Uc, &pdb, &ucb);
        ep(na, QpType::Ud, &pda, &uda);
        ep(nb, QpType::Ud, &pdb, &udb);
        // UC a -> b, MTU 256, send PSN 10
        QpAttr at;
        at.state = QpState::Init;
        at.access = kLocalWrite | kRemoteWrite;
        for (auto [n, q] : {std::pair{&na, uca}, std::pair{&nb, ucb}}) ASSERT_EQ(n->verbs().qp_modify(q, at, 3), 0);
        at.state = QpState::Rtr;
        at.path_mtu = 256;
        at.rq_psn = 10;
        at.dest_qpn = nb.verbs().qpn(ucb);
        at.remote_gid = gid_from_ipv4(nb.address().ip);
        const uint32_t rtr = QpAttr::kState | QpAttr::kPathMtu | QpAttr::kDestQpn | QpAttr::kRqPsn | QpAttr::kAv;
        ASSERT_EQ(na.verbs().qp_modify(uca, at, rtr), 0);
        at.dest_qpn = na.verbs().qpn(uca);
        at.remote_gid = gid_from_ipv4(na.address().ip);
        ASSERT_EQ(nb.verbs().qp_modify(ucb, at, rtr), 0);
        at.state = QpState::Rts;
        at.sq_psn = 10;
        ASSERT_EQ(na.verbs().qp_modify(uca, at, QpAttr::kState | QpAttr::kSqPsn), 0);
        // UD both ways ready, Q_Key 0x1234
        for (auto [n, q] : {std::pair{&na, uda}, std::pair{&nb, udb}}) {
            QpAttr u;
            u.state = QpState::Init;
            u.qkey = 0x1234;
            ASSERT_EQ(n->verbs().qp_modify(q, u, QpAttr::kState | QpAttr::kQkey), 0);
            u.state = QpState::Rtr;
            ASSERT_EQ(n->verbs().qp_modify(q, u, QpAttr::kState), 0);
            u.state = QpState::Rts;
            ASSERT_EQ(n->verbs().qp_modify(q, u, QpAttr::kState | QpAttr::kSqPsn), 0);
        }
        std::vector<uint8_t> src(4096, 0x42), dst(4096), rbuf(4096);
        uint32_t skey = na.verbs().mr_reg(pda, src.data(), src.size(), kLocalWrite);
        uint32_t dkey = nb.verbs().mr_reg(pdb, dst.data(), dst.size(), kLocalWrite | kRemoteWrite);
        uint32_t rkey = nb.verbs().mr_reg(pdb, rbuf.data(), rbuf.size(), kLocalWrite);
        for (int i = 0; i < 16; i++) {
            RecvWr r;
            r.num_sge = 1;
            r.sg[0] = Sge{reinterpret_cast<uint64_t>(rbuf.data()), 4096, rkey};
            ASSERT_EQ(nb.verbs().post_recv(ucb, r), 0);
            ASSERT_EQ(nb.verbs().post_recv(udb, r), 0);
        }
        const uint32_t ucqpn = nb.verbs().qpn(ucb), udqpn = nb.verbs().qpn(udb);
        const uint64_t dva = reinterpret_cast<uint64_t>(dst.data());
        uint32_t psn = 10;
        auto uc = [&](WrOpcode op, uint32_t len, std::vector<uint8_t> opcodes) {
            SendWr w;
            w.opcode = op;
            w.imm = 0xA0B0C0D0u + psn;
            w.num_sge = 1;
            w.sg[0] = Sge{reinterpret_cast<uint64_t>(src.data()), len, skey};
            w.remote_addr = dva + 4;
            w.rkey = dkey;
            ASSERT_EQ(na.verbs().post_send(uca, w), 0);
            for (size_t i = 0; i < opcodes.size(); i++) {
                Expect e{opcodes[i], ucqpn, psn++, 0, std::nullopt, 0, 0, std::nullopt, std::nullopt, std::nullopt};
                uint32_t plen = i + 1 < opcodes.size() ? 256 : len - 256 * uint32_t(i);
                e.pad = (4 - plen % 4) % 4;
                if (wire::has_reth(opcodes[i])) {
                    e.va = dva + 4;
                    e.rkey = dkey;
                    e.dmalen = len;
                }
                if (wire::has_imm(opcodes[i])) e.imm = w.imm;
                want.push_back(e);
            }
        };
        uc(WrOpcode::SendWithImm, 600, {0x20, 0x21, 0x23});
        uc(WrOpcode::Send, 301, {0x20, 0x22});
        uc(WrOpcode::Send, 100, {0x24});
        uc(WrOpcode::SendWithImm, 7, {0x25});
        uc(WrOpcode::RdmaWriteWithImm, 513, {0x26, 0x27, 0x29});
        uc(WrOpcode::RdmaWrite, 512, {0x26, 0x28});
        uc(WrOpcode::RdmaWrite, 64, {0x2A});
        uc(WrOpcode::RdmaWriteWithImm, 65, {0x2B});
        f.run_until_idle();  // UC first: the requester would interleave the two QPs' packets
        uint32_t ah = na.verbs().ah_create(pda, gid_from_ipv4(nb.address().ip));
        for (bool imm : {false, true}) {
            SendWr w;
            w.opcode = imm ? WrOpcode::SendWithImm : WrOpcode::Send;
            w.imm = 0x5EED;
            w.num_sge = 1;
            w.sg[0] = Sge{reinterpret_cast<uint64_t>(src.data()), 1000, skey};
            w.ah = ah;
            w.remote_qpn = udqpn;
            w.remote_qkey = 0x1234;
            ASSERT_EQ(na.verbs().post_send(uda, w), 0);
            Expect e{uint8_t(imm ? 0x65 : 0x64), udqpn, uint32_t(imm), 0, std::nullopt, 0, 0, std::nullopt, std::nullopt, std::nullopt};
            e.qkey = 0x1234;
            e.src_qp = na.verbs().qpn(uda);
            if (imm) e.imm = 0x5EED;
            want.push_back(e);
        }
        f.run_until_idle();
        EXPECT_EQ(nb.counters().rx_drops_total(), 0u);
    }
    std::string err;
    auto rows = sdr::test::tshark_fields(
        path,
        {"infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.padcnt",
         "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen", "infiniband.immdt",
         "infiniband.deth.q_key", "infiniband.deth.srcqp", "_ws.malformed"},
        &err);
    ASSERT_TRUE(rows) << err;
    ASSERT_EQ(rows->size(), want.size());
    for (size_t i = 0; i < want.size(); i++) {
        SCOPED_TRACE("packet " + std::to_string(i) + " opcode " + std::to_string(want[i].opcode));
        const auto& r = (*rows)[i];
        ASSERT_EQ(r.size(), 11u);
        const Expect& e = want[i];
        EXPECT_EQ(parse_tshark_uint(r[0]), e.opcode);
        EXPECT_EQ(parse_tshark_uint(r[1]), e.dest_qp);
        EXPECT_EQ(parse_tshark_uint(r[2]), e.psn);
        EXPECT_EQ(parse_tshark_uint(r[3]), e.pad);
        if (e.va) {
            EXPECT_EQ(parse_tshark_uint(r[4]), *e.va);
            EXPECT_EQ(parse_tshark_uint(r[5]), e.rkey);
            EXPECT_EQ(parse_tshark_uint(r[6]), e.dmalen);
        } else {
            EXPECT_EQ(r[4], "") << "no RETH";
        }
        if (e.imm) {
            EXPECT_EQ(parse_tshark_bytes_be(r[7]), *e.imm);
        } else {
            EXPECT_EQ(r[7], "") << "no ImmDt";
        }
        if (e.qkey) {
            EXPECT_EQ(parse_tshark_uint(r[8]), *e.qkey);
            EXPECT_EQ(parse_tshark_uint(r[9]), *e.src_qp);
        } else {
            EXPECT_EQ(r[8], "") << "no DETH";
        }
        EXPECT_EQ(r[10], "") << "tshark calls it malformed";
    }
    char errbuf[PCAP_ERRBUF_SIZE];
    pcap_t* p = pcap_open_offline(path.c_str(), errbuf);
    ASSERT_NE(p, nullptr) << errbuf;
    pcap_pkthdr* h;
    const u_char* data;
    size_t frames = 0;
    while (pcap_next_ex(p, &h, &data) == 1) {
        ASSERT_EQ(h->caplen, h->len);
        EXPECT_TRUE(wire::icrc_ok(data, h->caplen)) << "frame " << frames;
        frames++;
    }
    pcap_close(p);
    EXPECT_EQ(frames, want.size());
    std::remove(path.c_str());
}

namespace {

struct RcExpect {
    uint8_t opcode;
    uint32_t dest_qp, psn, pad = 0;
    bool ack_req = false;
    std::optional<uint64_t> va;
    uint32_t rkey = 0, dmalen = 0;
    std::optional<uint32_t> imm;
    std::optional<uint32_t> syndrome, msn;  // AETH
};

}  // namespace

// RC: SEND and RDMA WRITE FIRST/MIDDLE/LAST/ONLY with and without immediate (AckReq on each
// message's last packet), READ request (RETH) and READ responses FIRST/MIDDLE/LAST/ONLY (AETH
// on all but MIDDLE), ACK, PSN sequence error NAK and RNR NAK (AETH syndrome and MSN).
TEST(VerbsTshark, EveryRcOpcodeDissectsWithItsFields)
{
    if (!sdr::test::tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to dissect our pcaps";
    const std::string path = "/tmp/sdr_verbs_rc_tshark_" + std::to_string(getpid()) + ".pcap";
    std::vector<RcExpect> want;
    {
        FabricParams p;
        p.link.rtt_ms = 0.01;
        p.pcap_path = path;
        SimFabric f(p);
        Nic& na = f.nic(0, 1);
        Nic& nb = f.nic(1, 1);
        const uint32_t pda = na.verbs().pd_alloc(), pdb = nb.verbs().pd_alloc();
        const uint32_t cqa = na.verbs().cq_create(64), cqb = nb.verbs().cq_create(64);
        const uint32_t qa = na.verbs().qp_create(QpType::Rc, pda, cqa, cqa, 32, 32);
        const uint32_t qb = nb.verbs().qp_create(QpType::Rc, pdb, cqb, cqb, 32, 32);
        const uint32_t qpna = na.verbs().qpn(qa), qpnb = nb.verbs().qpn(qb);
        for (auto [n, q, peer, peer_ip] : {std::tuple{&na, qa, qpnb, nb.address().ip}, std::tuple{&nb, qb, qpna, na.address().ip}}) {
            QpAttr at;
            at.state = QpState::Init;
            at.access = kLocalWrite | kRemoteWrite | kRemoteRead;
            ASSERT_EQ(n->verbs().qp_modify(q, at, QpAttr::kState | QpAttr::kAccess), 0);
            at.state = QpState::Rtr;
            at.path_mtu = 256;
            at.rq_psn = 10;
            at.dest_qpn = peer;
            at.remote_gid = gid_from_ipv4(peer_ip);
            at.max_dest_rd_atomic = 1;
            at.min_rnr_timer = 5;
            ASSERT_EQ(n->verbs().qp_modify(q, at, QpAttr::kState | QpAttr::kPathMtu | QpAttr::kDestQpn | QpAttr::kRqPsn |
                                                    QpAttr::kAv | QpAttr::kMaxDestRdAtomic | QpAttr::kMinRnrTimer),
                      0);
            at.state = QpState::Rts;
            at.sq_psn = 10;
            at.rnr_retry = 0;
            ASSERT_EQ(n->verbs().qp_modify(q, at, QpAttr::kState | QpAttr::kSqPsn | QpAttr::kTimeout | QpAttr::kRetryCnt |
                                                    QpAttr::kRnrRetry | QpAttr::kMaxRdAtomic),
                      0);
        }
        std::vector<uint8_t> src(4096, 0x42), dst(4096), rbuf(4096), rd(4096);
        const uint32_t skey = na.verbs().mr_reg(pda, src.data(), src.size(), kLocalWrite);
        const uint32_t rdkey = na.verbs().mr_reg(pda, rd.data(), rd.size(), kLocalWrite);
        const uint32_t dkey = nb.verbs().mr_reg(pdb, dst.data(), dst.size(), kLocalWrite | kRemoteWrite | kRemoteRead);
        const uint32_t rkey = nb.verbs().mr_reg(pdb, rbuf.data(), rbuf.size(), kLocalWrite);
        for (int i = 0; i < 5; i++) {  // 4 SENDs and a WRITE with immediate
            RecvWr r;
            r.num_sge = 1;
            r.sg[0] = Sge{reinterpret_cast<uint64_t>(rbuf.data()), 4096, rkey};
            ASSERT_EQ(nb.verbs().post_recv(qb, r), 0);
        }
        const uint64_t dva = reinterpret_cast<uint64_t>(dst.data());
        const uint32_t ack = 0x1Fu;  // ACK syndrome: credits not flow controlled
        uint32_t psn = 10, msn = 0;
        // One message at a time, run to its end: its packets, then b's ACK or READ responses.
        auto rc = [&](WrOpcode op, uint32_t len, std::vector<uint8_t> opcodes) {
            SendWr w;
            w.opcode = op;
            w.imm = 0xA0B0C0D0u + psn;
            w.num_sge = 1;
            w.sg[0] = Sge{reinterpret_cast<uint64_t>(op == WrOpcode::RdmaRead ? rd.data() : src.data()), len,
                          op == WrOpcode::RdmaRead ? rdkey : skey};
            w.remote_addr = dva + 4;
            w.rkey = dkey;
            ASSERT_EQ(na.verbs().post_send(qa, w), 0);
            if (op == WrOpcode::RdmaRead) {
                RcExpect e{wire::kOpRcReadRequest, qpnb, psn, 0, true, dva + 4, dkey, len, std::nullopt,
                           std::nullopt, std::nullopt};
                want.push_back(e);
            }
            msn++;
            for (size_t i = 0; i < opcodes.size(); i++) {
                RcExpect e{opcodes[i], qpnb, psn++, 0, false, std::nullopt, 0, 0, std::nullopt, std::nullopt, std::nullopt};
                uint32_t plen = i + 1 < opcodes.size() ? 256 : len - 256 * uint32_t(i);
                e.pad = (4 - plen % 4) % 4;
                if (op == WrOpcode::RdmaRead) {
                    e.dest_qp = qpna;
                    if (wire::has_aeth(opcodes[i])) {
                        e.syndrome = ack;
                        e.msn = msn;
                    }
                } else {
                    e.ack_req = i + 1 == opcodes.size();
                    if (wire::has_reth(opcodes[i])) {
                        e.va = dva + 4;
                        e.rkey = dkey;
                        e.dmalen = len;
                    }
                    if (wire::has_imm(opcodes[i])) e.imm = w.imm;
                }
                want.push_back(e);
            }
            if (op != WrOpcode::RdmaRead)
                want.push_back(RcExpect{wire::kOpRcAck, qpna, psn - 1, 0, false, std::nullopt, 0, 0, std::nullopt, ack, msn});
            f.run_until_idle();
        };
        rc(WrOpcode::SendWithImm, 600, {0x00, 0x01, 0x03});
        rc(WrOpcode::Send, 301, {0x00, 0x02});
        rc(WrOpcode::Send, 100, {0x04});
        rc(WrOpcode::SendWithImm, 7, {0x05});
        rc(WrOpcode::RdmaWriteWithImm, 513, {0x06, 0x07, 0x09});
        rc(WrOpcode::RdmaWrite, 512, {0x06, 0x08});
        rc(WrOpcode::RdmaWrite, 64, {0x0A});
        rc(WrOpcode::RdmaRead, 600, {0x0D, 0x0E, 0x0F});
        rc(WrOpcode::RdmaRead, 100, {0x10});
        // A packet past a gap, straight into b: b answers with a PSN sequence error NAK for
        // the PSN it expects (a has nothing outstanding and drops it as stale).
        {
            wire::Headers h;
            h.src_mac = na.address().mac;
            h.dst_mac = nb.address().mac;
            h.src_ip = na.address().ip;
            h.dst_ip = nb.address().ip;
            h.dest_qp = qpnb;
            h.opcode = wire::kOpRcSendOnly;
            h.psn = psn + 3;
            h.pad = true;
            std::vector<uint8_t> fr(wire::frame_bytes(h.opcode, 8, true));
            ASSERT_EQ(wire::encode(h, src.data(), 8, fr.data(), fr.size()), fr.size());
            f.inject_frame(nb.index(), fr, f.sim().now());
            f.run_until_idle();
            want.push_back(RcExpect{wire::kOpRcAck, qpna, psn, 0, false, std::nullopt, 0, 0, std::nullopt, 0x60, msn});
        }
        // WRITE with immediate with no receive WQE left (the 5 were taken): RNR NAK carrying
        // b's min_rnr_timer (5); rnr_retry 0 ends it there.
        {
            SendWr w;
            w.opcode = WrOpcode::RdmaWriteWithImm;
            w.imm = 9;
            w.num_sge = 1;
            w.sg[0] = Sge{reinterpret_cast<uint64_t>(src.data()), 16, skey};
            w.remote_addr = dva;
            w.rkey = dkey;
            ASSERT_EQ(na.verbs().post_send(qa, w), 0);
            RcExpect e{wire::kOpRcWriteOnlyImm, qpnb, psn, 0, true, dva, dkey, 16, 9u, std::nullopt, std::nullopt};
            want.push_back(e);
            want.push_back(RcExpect{wire::kOpRcAck, qpna, psn, 0, false, std::nullopt, 0, 0, std::nullopt, 0x25, msn});
            f.run_until_idle();
            Wc wc[64];
            int n = na.verbs().cq_poll(cqa, wc, 64);
            ASSERT_EQ(n, 10) << "9 messages, then the RNR'd one";
            for (int i = 0; i < 9; i++) EXPECT_EQ(wc[i].status, WcStatus::Success);
            EXPECT_EQ(wc[9].status, WcStatus::RnrRetryExcErr);
        }
        EXPECT_EQ(nb.counters().rx_drops_total(), 2u) << "the injected packet and the RNR'd one";
    }
    std::string err;
    auto rows = sdr::test::tshark_fields(
        path,
        {"infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.padcnt",
         "infiniband.bth.a", "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
         "infiniband.immdt", "infiniband.aeth.syndrome", "infiniband.aeth.msn", "_ws.malformed"},
        &err);
    ASSERT_TRUE(rows) << err;
    ASSERT_EQ(rows->size(), want.size());
    for (size_t i = 0; i < want.size(); i++) {
        SCOPED_TRACE("packet " + std::to_string(i) + " opcode " + std::to_string(want[i].opcode));
        const auto& r = (*rows)[i];
        ASSERT_EQ(r.size(), 12u);
        const RcExpect& e = want[i];
        EXPECT_EQ(parse_tshark_uint(r[0]), e.opcode);
        EXPECT_EQ(parse_tshark_uint(r[1]), e.dest_qp);
        EXPECT_EQ(parse_tshark_uint(r[2]), e.psn);
        EXPECT_EQ(parse_tshark_uint(r[3]), e.pad);
        EXPECT_EQ(parse_tshark_uint(r[4]), e.ack_req ? 1u : 0u);
        if (e.va) {
            EXPECT_EQ(parse_tshark_uint(r[5]), *e.va);
            EXPECT_EQ(parse_tshark_uint(r[6]), e.rkey);
            EXPECT_EQ(parse_tshark_uint(r[7]), e.dmalen);
        } else {
            EXPECT_EQ(r[5], "") << "no RETH";
        }
        if (e.imm) {
            EXPECT_EQ(parse_tshark_bytes_be(r[8]), *e.imm);
        } else {
            EXPECT_EQ(r[8], "") << "no ImmDt";
        }
        if (e.syndrome) {
            EXPECT_EQ(parse_tshark_uint(r[9]), *e.syndrome);
            EXPECT_EQ(parse_tshark_uint(r[10]), *e.msn);
        } else {
            EXPECT_EQ(r[9], "") << "no AETH";
        }
        EXPECT_EQ(r[11], "") << "tshark calls it malformed";
    }
    std::remove(path.c_str());
}

// RC atomics: COMPARE SWAP (0x13) and FETCH ADD (0x14) with their AtomicETH (VA and R_Key in
// tshark's RETH fields, Swap/Add and Compare data), each answered by an ATOMIC ACKNOWLEDGE
// (0x12) with the AETH and the AtomicAckETH's original value; every ICRC verifies.
TEST(VerbsTshark, RcAtomicsDissectWithTheirFields)
{
    if (!sdr::test::tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to dissect our pcaps";
    const std::string path = "/tmp/sdr_verbs_atomic_tshark_" + std::to_string(getpid()) + ".pcap";
    struct Row {
        uint8_t opcode;
        uint32_t dest_qp, psn;
        bool ack_req;
        uint64_t va, swap, compare, orig;  // request: va, swap, compare; ATOMIC ACK: orig
        uint32_t rkey, msn;
    };
    std::vector<Row> want;
    std::vector<uint64_t> word = {0, 0x1122334455667788ull};
    {
        FabricParams p;
        p.link.rtt_ms = 0.01;
        p.pcap_path = path;
        SimFabric f(p);
        Nic& na = f.nic(0, 1);
        Nic& nb = f.nic(1, 1);
        const uint32_t pda = na.verbs().pd_alloc(), pdb = nb.verbs().pd_alloc();
        const uint32_t cqa = na.verbs().cq_create(64), cqb = nb.verbs().cq_create(64);
        const uint32_t qa = na.verbs().qp_create(QpType::Rc, pda, cqa, cqa, 32, 32);
        const uint32_t qb = nb.verbs().qp_create(QpType::Rc, pdb, cqb, cqb, 32, 32);
        const uint32_t qpna = na.verbs().qpn(qa), qpnb = nb.verbs().qpn(qb);
        for (auto [n, q, peer, peer_ip] : {std::tuple{&na, qa, qpnb, nb.address().ip}, std::tuple{&nb, qb, qpna, na.address().ip}}) {
            QpAttr at;
            at.state = QpState::Init;
            at.access = kLocalWrite | kRemoteAtomic;
            ASSERT_EQ(n->verbs().qp_modify(q, at, QpAttr::kState | QpAttr::kAccess), 0);
            at.state = QpState::Rtr;
            at.path_mtu = 256;
            at.rq_psn = 20;
            at.dest_qpn = peer;
            at.remote_gid = gid_from_ipv4(peer_ip);
            ASSERT_EQ(n->verbs().qp_modify(q, at, QpAttr::kState | QpAttr::kPathMtu | QpAttr::kDestQpn | QpAttr::kRqPsn |
                                                    QpAttr::kAv | QpAttr::kMaxDestRdAtomic | QpAttr::kMinRnrTimer),
                      0);
            at.state = QpState::Rts;
            at.sq_psn = 20;
            ASSERT_EQ(n->verbs().qp_modify(q, at, QpAttr::kState | QpAttr::kSqPsn | QpAttr::kTimeout | QpAttr::kRetryCnt |
                                                    QpAttr::kRnrRetry | QpAttr::kMaxRdAtomic),
                      0);
        }
        std::vector<uint64_t> res(2);
        const uint32_t reskey = na.verbs().mr_reg(pda, res.data(), 16, kLocalWrite);
        const uint32_t wkey = nb.verbs().mr_reg(pdb, word.data(), 16, kLocalWrite | kRemoteAtomic);
        const uint64_t wva = reinterpret_cast<uint64_t>(&word[1]);
        SendWr w;
        w.opcode = WrOpcode::AtomicCmpAndSwp;
        w.num_sge = 1;
        w.sg[0] = Sge{reinterpret_cast<uint64_t>(res.data()), 8, reskey};
        w.remote_addr = wva;
        w.rkey = wkey;
        w.compare_add = 0x1122334455667788ull;
        w.swap = 0xA1A2A3A4A5A6A7A8ull;
        ASSERT_EQ(na.verbs().post_send(qa, w), 0);
        f.run_until_idle();
        want.push_back(Row{wire::kOpRcCmpSwap, qpnb, 20, true, wva, w.swap, w.compare_add, 0, wkey, 0});
        want.push_back(Row{wire::kOpRcAtomicAck, qpna, 20, false, 0, 0, 0, 0x1122334455667788ull, 0, 1});
        w.opcode = WrOpcode::AtomicFetchAndAdd;
        w.sg[0].addr += 8;
        w.compare_add = 0x10;
        ASSERT_EQ(na.verbs().post_send(qa, w), 0);
        f.run_until_idle();
        want.push_back(Row{wire::kOpRcFetchAdd, qpnb, 21, true, wva, 0x10, 0, 0, wkey, 0});
        want.push_back(Row{wire::kOpRcAtomicAck, qpna, 21, false, 0, 0, 0, 0xA1A2A3A4A5A6A7A8ull, 0, 2});
        Wc wc[4];
        ASSERT_EQ(na.verbs().cq_poll(cqa, wc, 4), 2);
        EXPECT_EQ(wc[0].opcode, WcOpcode::CompSwap);
        EXPECT_EQ(wc[1].opcode, WcOpcode::FetchAdd);
        EXPECT_EQ(res[0], 0x1122334455667788ull);
        EXPECT_EQ(res[1], 0xA1A2A3A4A5A6A7A8ull);
        EXPECT_EQ(word[1], 0xA1A2A3A4A5A6A7B8ull);
        EXPECT_EQ(na.counters().rx_drops_total() + nb.counters().rx_drops_total(), 0u);
    }
    std::string err;
    auto rows = sdr::test::tshark_fields(
        path,
        {"infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.a",
         "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
         "infiniband.aeth.syndrome", "infiniband.aeth.msn", "infiniband.atomicacketh.origremdt", "_ws.malformed"},
        &err);
    ASSERT_TRUE(rows) << err;
    ASSERT_EQ(rows->size(), want.size());
    for (size_t i = 0; i < want.size(); i++) {
        SCOPED_TRACE("packet " + std::to_string(i) + " opcode " + std::to_string(want[i].opcode));
        const auto& r = (*rows)[i];
        ASSERT_EQ(r.size(), 12u);
        const Row& e = want[i];
        EXPECT_EQ(parse_tshark_uint(r[0]), e.opcode);
        EXPECT_EQ(parse_tshark_uint(r[1]), e.dest_qp);
        EXPECT_EQ(parse_tshark_uint(r[2]), e.psn);
        EXPECT_EQ(parse_tshark_uint(r[3]), e.ack_req ? 1u : 0u);
        if (e.opcode != wire::kOpRcAtomicAck) {
            EXPECT_EQ(parse_tshark_uint(r[4]), e.va);
            EXPECT_EQ(parse_tshark_uint(r[5]), e.rkey);
            EXPECT_EQ(parse_tshark_uint(r[6]), e.swap);
            EXPECT_EQ(parse_tshark_uint(r[7]), e.compare);
            EXPECT_EQ(r[8], "") << "no AETH";
            EXPECT_EQ(r[10], "") << "no AtomicAckETH";
        } else {
            EXPECT_EQ(r[4], "") << "no AtomicETH";
            EXPECT_EQ(r[6], "");
            EXPECT_EQ(parse_tshark_uint(r[8]), 0x1Fu) << "ACK";
            EXPECT_EQ(parse_tshark_uint(r[9]), e.msn);
            EXPECT_EQ(parse_tshark_uint(r[10]), e.orig);
        }
        EXPECT_EQ(r[11], "") << "tshark calls it malformed";
    }
    char errbuf[PCAP_ERRBUF_SIZE];
    pcap_t* p = pcap_open_offline(path.c_str(), errbuf);
    ASSERT_NE(p, nullptr) << errbuf;
    pcap_pkthdr* h;
    const u_char* data;
    size_t frames = 0;
    while (pcap_next_ex(p, &h, &data) == 1) {
        EXPECT_TRUE(wire::icrc_ok(data, h->caplen)) << "frame " << frames;
        frames++;
    }
    pcap_close(p);
    EXPECT_EQ(frames, want.size());
    std::remove(path.c_str());
}
