// The reliability layer's control traffic is on the wire, where Wireshark sees it: a reliable
// transfer over a lossy link captures CTS, ACK and NACK datagrams as InfiniBand UD SEND Only
// (BTH opcode 0x64 = 100) with a DETH, between the two control QPs, beside the data frames; each
// datagram's ICRC verifies and its payload is a well-formed control message.
#include "sim_util.hpp"
#include "tshark_util.hpp"

#include <pcap/pcap.h>
#include <sdr/emu/wire.hpp>
#include <sdr/reliability/ctrl_msg.hpp>
#include <sdr/reliability/endpoint.hpp>
#include <unistd.h>

#include <map>

using namespace sdr;
using namespace sdr::test;

TEST(RelTshark, ControlDatagramsDissectAsUdSendBesideTheData)
{
    if (!tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to dissect our pcaps";
    const std::string path = "/tmp/sdr_rel_tshark_" + std::to_string(getpid()) + ".pcap";
    WorldConfig wc = config(16, 30, 2, 4);
    wc.fabric.link.rtt_ms = 1;
    wc.fabric.link.impairment.loss = 1e-2;  // holes to NACK, data to ACK
    wc.fabric.seed = 2;
    wc.fabric.pcap_path = path;
    wc.fabric.pcap_snaplen = 128;  // data frames cut; control datagrams stay whole
    uint64_t ctrl_delivered = 0;
    {
        SimWorld w(wc);
        rel::Config cfg;
        std::string err;
        ASSERT_TRUE(rel::parse_scheme("sr-nack", &cfg, &err)) << err;
        cfg.rtt_ms = 1;
        auto a = rel::Endpoint::create(w.ctx(0), w.qp(0), wc.qp, cfg, &err);
        auto b = rel::Endpoint::create(w.ctx(1), w.qp(1), wc.qp, cfg, &err);
        ASSERT_TRUE(a && b) << err;
        std::vector<uint8_t> src(4 << 20), dst(src.size());
        fill(src, 3);
        uint64_t sid, rid;
        ASSERT_EQ(b->recv(dst.data(), dst.size(), w.lkey(1, dst.data(), dst.size()), &rid), SDR_SUCCESS);
        ASSERT_EQ(a->send(src.data(), src.size(), w.lkey(0, src.data(), src.size()), &sid), SDR_SUCCESS);
        rel::MessageStats ts, rs;
        bool td = false, rd = false;
        ASSERT_TRUE(rel::drive(w.ctx(0), {a.get(), b.get()}, [&] {
            if (!td) td = a->send_result(sid, &ts) == SDR_SUCCESS;
            if (!rd) rd = b->recv_result(rid, &rs) == SDR_SUCCESS;
            return td && rd;
        }, 60'000'000'000ull));
        ASSERT_TRUE(ts.ok && rs.ok) << ts.error << rs.error;
        ASSERT_EQ(src, dst);
        ctrl_delivered = w.nic(0).counters().rx_ctrl + w.nic(1).counters().rx_ctrl;
    }  // the world closes the pcap

    std::string err;
    auto rows = tshark_fields(path,
                              {"infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.deth.q_key",
                               "infiniband.deth.srcqp"},
                              &err);
    ASSERT_TRUE(rows) << err;
    uint64_t data = 0, ctrl = 0;
    std::map<uint64_t, uint64_t> qkey_of;  // per destination control QP
    for (size_t i = 0; i < rows->size(); i++) {
        const auto& r = (*rows)[i];
        ASSERT_EQ(r.size(), 4u);
        if (r[0] == "43") {
            data++;
            continue;
        }
        ASSERT_EQ(r[0], "100") << "row " << i << ": only UC WRITE-imm data and UD SEND control";
        ctrl++;
        auto qp = parse_tshark_uint(r[1]), qkey = parse_tshark_uint(r[2]), src_qp = parse_tshark_uint(r[3]);
        ASSERT_TRUE(qp && qkey && src_qp) << "row " << i << ": DETH dissected";
        EXPECT_GE(*qp, emu::Nic::kCtrlQpnBase);
        EXPECT_GE(*src_qp, emu::Nic::kCtrlQpnBase);
        if (qkey_of.count(*qp)) {
            EXPECT_EQ(qkey_of[*qp], *qkey) << "row " << i << ": one Q_Key per control QP";
        }
        qkey_of[*qp] = *qkey;
    }
    EXPECT_GT(data, 1024u);
    EXPECT_EQ(ctrl, ctrl_delivered) << "every delivered control datagram is in the capture";

    // Whole frames with a verifying ICRC; the payload decodes as our control messages.
    char errbuf[PCAP_ERRBUF_SIZE];
    pcap_t* p = pcap_open_offline(path.c_str(), errbuf);
    ASSERT_NE(p, nullptr) << errbuf;
    pcap_pkthdr* h;
    const u_char* f;
    std::map<rel::CtrlType, int> types;
    while (pcap_next_ex(p, &h, &f) == 1) {
        if (h->caplen < emu::wire::kUdSendHeaderBytes || f[emu::wire::kEthBytes + 28] != emu::wire::kOpUdSendOnly)
            continue;  // BTH opcode sits after Ethernet, IPv4 and UDP
        ASSERT_EQ(h->caplen, h->len);
        ASSERT_TRUE(emu::wire::icrc_ok(f, h->caplen));
        rel::CtrlMsg m;
        ASSERT_TRUE(rel::decode(f + emu::wire::kUdSendHeaderBytes, h->caplen - emu::wire::kUdSendHeaderBytes - 4, &m));
        types[m.type]++;
    }
    pcap_close(p);
    EXPECT_GT(types[rel::CtrlType::Cts], 0);
    EXPECT_GT(types[rel::CtrlType::Ack], 0);
    EXPECT_GT(types[rel::CtrlType::Nack], 0);
    std::printf("captured %lu data frames, %lu control datagrams: %d CTS, %d ACK, %d NACK, %d REQ\n",
                static_cast<unsigned long>(data), static_cast<unsigned long>(ctrl), types[rel::CtrlType::Cts],
                types[rel::CtrlType::Ack], types[rel::CtrlType::Nack], types[rel::CtrlType::Req]);
    std::remove(path.c_str());
}
