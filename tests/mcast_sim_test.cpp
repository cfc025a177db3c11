// RoCEv2 multicast on the simulator: UD QPs attached to IPv4 groups (MGID ::ffff:239.x.y.z), the
// fabric's membership table and the mesh's replication, asserted by completions, bytes and
// counters. Four NICs: NIC 0 sends (its sender QP is no member; another QP of NIC 0 is, and
// hears nothing: no loopback), NICs 1 and 2 have members (NIC 2 two of them, one copy each),
// NIC 3 has a UD QP that never joins.
#include <sdr/emu/fabric.hpp>
#include <sdr/emu/verbs_engine.hpp>
#include <sdr/emu/wire.hpp>

#include "tshark_util.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

using namespace sdr::emu;
using namespace sdr::emu::verbs;

namespace {

constexpr uint32_t kGroup1 = 0xEF010101;  // 239.1.1.1
constexpr uint32_t kGroup2 = 0xEF020202;  // 239.2.2.2
constexpr uint32_t kQkey = 0x1234567;
constexpr uint32_t kLen = 600;

FabricParams params()
{
    FabricParams p;
    p.link.rtt_ms = 0.01;
    return p;
}

// A UD QP with its PD, CQs and a receive buffer of 4 slots of 40 + kLen bytes, in RTS.
struct Ud {
    Nic* nic = nullptr;
    uint32_t pd = 0, scq = 0, rcq = 0, qp = 0, key = 0;
    std::vector<uint8_t> buf = std::vector<uint8_t>(4 * (kGrhBytes + kLen), 0xAA);
    uint64_t posted = 0;
    VerbsEngine& v() const { return nic->verbs(); }
    uint32_t qpn() const { return v().qpn(qp); }
    void post(uint32_t n)
    {
        for (uint32_t i = 0; i < n; i++, posted++) {
            RecvWr r;
            r.wr_id = posted;
            r.num_sge = 1;
            const size_t slot = (posted % 4) * (kGrhBytes + kLen);
            r.sg[0] = Sge{reinterpret_cast<uint64_t>(buf.data() + slot), kGrhBytes + kLen, key};
            ASSERT_EQ(v().post_recv(qp, r), 0);
        }
    }
    std::vector<Wc> poll(uint32_t cq) const
    {
        std::vector<Wc> out;
        Wc wc[16];
        int n;
        while ((n = v().cq_poll(cq, wc, 16)) > 0) out.insert(out.end(), wc, wc + n);
        return out;
    }
    int attach(uint32_t group) const { return v().mcast_attach(qp, gid_from_ipv4(group)); }
    int detach(uint32_t group) const { return v().mcast_detach(qp, gid_from_ipv4(group)); }
};

Ud make_ud(Nic& nic, uint32_t qkey = kQkey)
{
    Ud u;
    u.nic = &nic;
    VerbsEngine& v = nic.verbs();
    u.pd = v.pd_alloc();
    u.scq = v.cq_create(64);
    u.rcq = v.cq_create(64);
    u.qp = v.qp_create(QpType::Ud, u.pd, u.scq, u.rcq, 16, 16);
    EXPECT_NE(u.qp, Nic::kNoHandle);
    u.key = v.mr_reg(u.pd, u.buf.data(), u.buf.size(), kLocalWrite);
    QpAttr a;
    a.state = QpState::Init;
    a.qkey = qkey;
    EXPECT_EQ(v.qp_modify(u.qp, a, QpAttr::kState | QpAttr::kQkey), 0);
    a.state = QpState::Rtr;
    EXPECT_EQ(v.qp_modify(u.qp, a, QpAttr::kState), 0);
    a.state = QpState::Rts;
    EXPECT_EQ(v.qp_modify(u.qp, a, QpAttr::kState | QpAttr::kSqPsn), 0);
    u.post(4);
    return u;
}

struct Mesh {
    explicit Mesh(const FabricParams& p = params()) : f(p) { init(); }
    SimFabric f;
    Ud sender, local, a, b, b2, outsider;
    std::vector<uint8_t> src = std::vector<uint8_t>(kLen);
    uint32_t src_key = 0;
    void init()
    {
        for (uint32_t i = 0; i < 4; i++) f.nic(i, 1);
        sender = make_ud(*f.find_nic(0));
        local = make_ud(*f.find_nic(0));
        a = make_ud(*f.find_nic(1));
        b = make_ud(*f.find_nic(2));
        b2 = make_ud(*f.find_nic(2));
        outsider = make_ud(*f.find_nic(3));
        for (size_t i = 0; i < src.size(); i++) src[i] = static_cast<uint8_t>(i * 7 + 3);
        src_key = sender.v().mr_reg(sender.pd, src.data(), src.size(), kLocalWrite);
        EXPECT_EQ(local.attach(kGroup1), 0);
        EXPECT_EQ(a.attach(kGroup1), 0);
        EXPECT_EQ(b.attach(kGroup1), 0);
        EXPECT_EQ(b2.attach(kGroup1), 0);
    }
    // One datagram from the sender to `group`; the sender's completion checked.
    void send(uint32_t group, uint32_t remote_qpn = wire::kMcastQpn)
    {
        const uint32_t ah = sender.v().ah_create(sender.pd, gid_from_ipv4(group));
        ASSERT_NE(ah, Nic::kNoHandle);
        SendWr s;
        s.wr_id = 9;
        s.num_sge = 1;
        s.sg[0] = Sge{reinterpret_cast<uint64_t>(src.data()), kLen, src_key};
        s.ah = ah;
        s.remote_qpn = remote_qpn;
        s.remote_qkey = kQkey;
        ASSERT_EQ(sender.v().post_send(sender.qp, s), 0);
        f.run_until_idle();
        auto sw = sender.poll(sender.scq);
        ASSERT_EQ(sw.size(), 1u);
        EXPECT_EQ(sw[0].status, WcStatus::Success);
        EXPECT_EQ(sender.v().ah_destroy(ah), 0);
    }
};

std::vector<uint32_t> members(const SimFabric& f, uint32_t group)
{
    const std::vector<uint32_t>* m = f.mcast_members(group);
    return m ? *m : std::vector<uint32_t>{};
}

uint64_t drops(const Ud& u, RxDrop d) { return u.nic->counters().rx_drop(d); }

// The receive of one copy at u: its completion, the GRH (20 bytes of zero, the IPv4 header to
// the group) and the payload in slot `slot`.
void expect_copy(Ud& u, const Mesh& m, uint32_t group, uint64_t slot)
{
    auto rw = u.poll(u.rcq);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].status, WcStatus::Success);
    EXPECT_EQ(rw[0].byte_len, kGrhBytes + kLen);
    EXPECT_TRUE(rw[0].grh);
    EXPECT_EQ(rw[0].src_qp, m.sender.qpn());
    EXPECT_EQ(rw[0].qp_num, u.qpn());
    const uint8_t* g = u.buf.data() + (slot % 4) * (kGrhBytes + kLen);
    EXPECT_TRUE(std::all_of(g, g + 20, [](uint8_t c) { return c == 0; }));
    const uint8_t* ip = g + 20;
    const uint32_t sip = m.sender.nic->address().ip;
    const uint8_t want_src[4] = {uint8_t(sip >> 24), uint8_t(sip >> 16), uint8_t(sip >> 8), uint8_t(sip)};
    const uint8_t want_dst[4] = {uint8_t(group >> 24), uint8_t(group >> 16), uint8_t(group >> 8), uint8_t(group)};
    EXPECT_EQ(ip[0], 0x45);
    EXPECT_EQ(ip[9], 17) << "UDP";
    EXPECT_TRUE(std::equal(want_src, want_src + 4, ip + 12));
    EXPECT_TRUE(std::equal(want_dst, want_dst + 4, ip + 16)) << "the group is the IPv4 destination";
    EXPECT_TRUE(std::equal(m.src.begin(), m.src.end(), g + kGrhBytes));
}

}  // namespace

TEST(McastSim, OneSendReachesEachMemberOnce)
{
    Mesh m;
    EXPECT_EQ(members(m.f, kGroup1), (std::vector<uint32_t>{0, 1, 2}));
    m.send(kGroup1);
    expect_copy(m.a, m, kGroup1, 0);
    expect_copy(m.b, m, kGroup1, 0);
    expect_copy(m.b2, m, kGroup1, 0);
    EXPECT_TRUE(m.local.poll(m.local.rcq).empty()) << "no loopback on the sending NIC";
    EXPECT_TRUE(m.outsider.poll(m.outsider.rcq).empty());
    // One frame per member NIC but the sender's: NIC 2 takes one frame for its two QPs.
    EXPECT_EQ(m.f.packets_delivered(), 2u);
    EXPECT_EQ(m.f.find_nic(0)->counters().rx_frames, 0u);
    EXPECT_EQ(m.f.find_nic(1)->counters().rx_frames, 1u);
    EXPECT_EQ(m.f.find_nic(2)->counters().rx_frames, 1u);
    EXPECT_EQ(m.f.find_nic(3)->counters().rx_frames, 0u);
    EXPECT_EQ(m.f.find_nic(0)->counters().tx_frames, 1u);
    EXPECT_EQ(m.a.v().qp_counters(m.a.qp)->rx_packets, 1u);
    EXPECT_EQ(m.b.v().qp_counters(m.b.qp)->rx_packets, 1u);
    EXPECT_EQ(m.b2.v().qp_counters(m.b2.qp)->rx_packets, 1u);
    for (uint32_t i = 0; i < 4; i++) EXPECT_EQ(m.f.find_nic(i)->counters().rx_drops_total(), 0u) << "NIC " << i;
}

TEST(McastSim, ARemoteQpnOtherThanTheGroupsStillSendsQpn0xFFFFFF)
{
    Mesh m;
    m.send(kGroup1, m.a.qpn());  // IBTA 10.5.2: a multicast packet's destination QPN is 0xFFFFFF
    expect_copy(m.a, m, kGroup1, 0);
    expect_copy(m.b, m, kGroup1, 0);
}

TEST(McastSim, EachQpChecksItsOwnQkey)
{
    Mesh m;
    Ud other = make_ud(*m.f.find_nic(1), kQkey + 1);
    ASSERT_EQ(other.attach(kGroup1), 0);
    m.send(kGroup1);
    expect_copy(m.a, m, kGroup1, 0);
    EXPECT_TRUE(other.poll(other.rcq).empty());
    EXPECT_EQ(drops(other, RxDrop::BadQkey), 1u);
    EXPECT_EQ(other.v().qp_counters(other.qp)->rx_drops, 1u);
    EXPECT_EQ(m.f.find_nic(1)->counters().rx_frames, 1u) << "one frame, two QPs";
}

TEST(McastSim, DetachStopsDeliveryAndReattachResumes)
{
    Mesh m;
    ASSERT_EQ(m.a.detach(kGroup1), 0);
    EXPECT_EQ(members(m.f, kGroup1), (std::vector<uint32_t>{0, 2})) << "NIC 1's last QP left";
    ASSERT_EQ(m.b.detach(kGroup1), 0);
    EXPECT_EQ(members(m.f, kGroup1), (std::vector<uint32_t>{0, 2})) << "NIC 2 keeps b2";
    m.send(kGroup1);
    EXPECT_TRUE(m.a.poll(m.a.rcq).empty());
    EXPECT_TRUE(m.b.poll(m.b.rcq).empty());
    expect_copy(m.b2, m, kGroup1, 0);
    EXPECT_EQ(m.f.find_nic(1)->counters().rx_frames, 0u) << "the mesh no longer sends NIC 1 a copy";

    ASSERT_EQ(m.a.attach(kGroup1), 0);
    EXPECT_EQ(members(m.f, kGroup1), (std::vector<uint32_t>{0, 1, 2}));
    m.send(kGroup1);
    expect_copy(m.a, m, kGroup1, 0);
    expect_copy(m.b2, m, kGroup1, 1);
    EXPECT_TRUE(m.b.poll(m.b.rcq).empty());

    for (Ud* u : {&m.local, &m.a, &m.b2}) ASSERT_EQ(u->detach(kGroup1), 0);
    EXPECT_EQ(m.f.mcast_members(kGroup1), nullptr);
    m.send(kGroup1);  // nobody listens: the frame leaves and goes nowhere
    EXPECT_EQ(m.f.packets_delivered(), 1u + 2u) << "NIC 2, then NICs 1 and 2, then none";
}

TEST(McastSim, TwoGroupsDoNotMix)
{
    Mesh m;
    ASSERT_EQ(m.outsider.attach(kGroup2), 0);
    EXPECT_EQ(members(m.f, kGroup2), (std::vector<uint32_t>{3}));
    m.send(kGroup2);
    expect_copy(m.outsider, m, kGroup2, 0);
    for (Ud* u : {&m.local, &m.a, &m.b, &m.b2}) EXPECT_TRUE(u->poll(u->rcq).empty());
    m.send(kGroup1);
    EXPECT_TRUE(m.outsider.poll(m.outsider.rcq).empty());
    expect_copy(m.a, m, kGroup1, 0);
    EXPECT_EQ(m.f.find_nic(3)->counters().rx_frames, 1u);
    // A QP in both groups takes a copy of each.
    ASSERT_EQ(m.a.attach(kGroup2), 0);
    m.send(kGroup2);
    expect_copy(m.a, m, kGroup2, 1);
    expect_copy(m.outsider, m, kGroup2, 1);
}

TEST(McastSim, AttachAndDetachErrorsAsTheKernel)
{
    Mesh m;
    EXPECT_EQ(m.a.attach(kGroup1), 0) << "already attached: 0, as uverbs answers";
    m.send(kGroup1);
    expect_copy(m.a, m, kGroup1, 0);  // still one copy
    EXPECT_EQ(m.outsider.detach(kGroup1), EINVAL) << "not attached";
    EXPECT_EQ(m.a.attach(0x0A000002), EINVAL) << "a unicast IPv4 GID";
    Gid v6{};
    v6[0] = 0xFF;  // an IPv6 multicast MGID: RoCEv2 over IPv4 only
    EXPECT_EQ(m.a.v().mcast_attach(m.a.qp, v6), EINVAL);
    VerbsEngine& v = m.a.v();
    const uint32_t uc = v.qp_create(QpType::Uc, m.a.pd, m.a.scq, m.a.rcq, 4, 4);
    EXPECT_EQ(v.mcast_attach(uc, gid_from_ipv4(kGroup1)), EINVAL) << "not a UD QP";
    EXPECT_EQ(v.mcast_attach(12345, gid_from_ipv4(kGroup1)), EINVAL) << "no such QP";
    EXPECT_EQ(v.qp_destroy(m.a.qp), EBUSY) << "still attached";
    ASSERT_EQ(m.a.detach(kGroup1), 0);
    EXPECT_EQ(m.a.detach(kGroup1), EINVAL);
    EXPECT_EQ(v.qp_destroy(m.a.qp), 0);
}

TEST(McastSim, LimitsAreTheDeviceAttributes)
{
    SimFabric f(params());
    Nic& n = f.nic(0, 1);
    VerbsEngine& v = n.verbs();
    const uint32_t pd = v.pd_alloc(), cq = v.cq_create(16);
    std::vector<uint32_t> qps;
    for (uint32_t i = 0; i <= VerbsEngine::kMaxMcastQpAttach; i++) qps.push_back(v.qp_create(QpType::Ud, pd, cq, cq, 1, 1));
    for (uint32_t i = 0; i < VerbsEngine::kMaxMcastQpAttach; i++) ASSERT_EQ(v.mcast_attach(qps[i], gid_from_ipv4(kGroup1)), 0);
    EXPECT_EQ(v.mcast_attach(qps.back(), gid_from_ipv4(kGroup1)), ENOMEM) << "max_mcast_qp_attach";
    EXPECT_EQ(v.mcast_qps(kGroup1)->size(), VerbsEngine::kMaxMcastQpAttach);
    uint32_t g = 0;
    for (; g < VerbsEngine::kMaxMcastGroups - 1; g++) ASSERT_EQ(v.mcast_attach(qps[0], gid_from_ipv4(0xEF100000 + g)), 0);
    EXPECT_EQ(v.mcast_attach(qps[0], gid_from_ipv4(0xEF100000 + g)), ENOMEM) << "max_mcast_grp";
    EXPECT_EQ(f.mcast_members(0xEF100000)->size(), 1u);
}

TEST(McastSim, AFrameForAGroupWithoutMembersIsDroppedAndCounted)
{
    Mesh m;
    wire::Headers h;
    h.src_mac = m.sender.nic->address().mac;
    h.src_ip = m.sender.nic->address().ip;
    h.dst_ip = kGroup2;
    h.dst_mac = wire::ipv4_multicast_mac(kGroup2);
    h.opcode = wire::kOpUdSendOnly;
    h.dest_qp = wire::kMcastQpn;
    h.qkey = kQkey;
    h.src_qp = m.sender.qpn();
    h.pad = true;
    std::vector<uint8_t> p(16, 0x77), fr(wire::frame_bytes(h.opcode, 16, true));
    ASSERT_EQ(wire::encode(h, p.data(), 16, fr.data(), fr.size()), fr.size());
    EXPECT_EQ(fr[0], 0x01);
    EXPECT_EQ(fr[3], 0x02) << "01:00:5e + the group's low 23 bits";
    m.f.inject_frame(1, fr, m.f.sim().now());  // NIC 1: a member of group 1 only
    SimFabric bare(params());
    bare.nic(0, 1);  // a NIC whose verbs engine never started
    bare.inject_frame(0, fr, 0);
    h.dst_ip = 0x0A000002;  // QPN 0xFFFFFF to a unicast address names no QP
    ASSERT_EQ(wire::encode(h, p.data(), 16, fr.data(), fr.size()), fr.size());
    m.f.inject_frame(2, fr, m.f.sim().now());
    m.f.run_until_idle();
    bare.run_until_idle();
    EXPECT_EQ(drops(m.a, RxDrop::McastNoMember), 1u);
    EXPECT_EQ(bare.find_nic(0)->counters().rx_drop(RxDrop::McastNoMember), 1u);
    EXPECT_EQ(drops(m.b, RxDrop::UnknownQp), 1u);
    EXPECT_TRUE(m.a.poll(m.a.rcq).empty());
    EXPECT_TRUE(m.b.poll(m.b.rcq).empty());
    EXPECT_EQ(to_string(RxDrop::McastNoMember), std::string("mcast_no_member"));
}

// A captured copy dissects in Wireshark as what it is: UD SEND Only to QPN 0xFFFFFF, IPv4 to the
// group, Ethernet to 01:00:5e + the group's low 23 bits, the sender's Q_Key and QPN in the DETH.
TEST(McastSim, CapturedCopiesDissectInTshark)
{
    if (!sdr::test::tshark_available()) GTEST_SKIP() << "tshark is not installed";
    FabricParams p = params();
    p.pcap_path = ::testing::TempDir() + "mcast_sim_" + std::to_string(getpid()) + ".pcap";
    uint32_t src_qpn = 0;
    {
        Mesh m(p);
        m.send(kGroup1);
        src_qpn = m.sender.qpn();
    }  // the fabric's end closes the capture
    {
        std::string err;
        auto rows = sdr::test::tshark_fields(p.pcap_path,
                                             {"eth.dst", "ip.dst", "infiniband.bth.opcode", "infiniband.bth.destqp",
                                              "infiniband.deth.q_key", "infiniband.deth.srcqp", "_ws.malformed"},
                                             &err);
        ASSERT_TRUE(rows) << err;
        ASSERT_EQ(rows->size(), 2u) << "one copy to NIC 1, one to NIC 2";
        for (const auto& r : *rows) {
            ASSERT_EQ(r.size(), 7u);
            EXPECT_EQ(r[0], "01:00:5e:01:01:01");
            EXPECT_EQ(r[1], "239.1.1.1");
            EXPECT_EQ(r[2], "100") << "UD SEND Only";
            EXPECT_EQ(sdr::test::parse_tshark_uint(r[3]), uint64_t{0xFFFFFF});
            EXPECT_EQ(sdr::test::parse_tshark_uint(r[4]), uint64_t{kQkey});
            EXPECT_EQ(sdr::test::parse_tshark_uint(r[5]), uint64_t{src_qpn});
            EXPECT_EQ(r[6], "") << "not malformed";
        }
    }
    std::remove(p.pcap_path.c_str());
}

// Over switches: a leaf-spine, hosts 0 and 1 under leaf0, 2 and 3 under leaf1. The switches
// replicate along the group's tree, one copy per member port; the non-member's port and the
// sender's own see none; a detach prunes the tree.
TEST(McastSim, SwitchesReplicateAlongTheGroupsTree)
{
    FabricParams p = params();
    Topology t;
    std::string err;
    ASSERT_TRUE(Topology::parse("leaf_spine:leaves=2,spines=2,hosts_per_leaf=2", p.link, &t, &err)) << err;
    p.topology = t;
    Mesh m(p);
    SimNetwork& net = *m.f.network();
    SimSwitch& leaf0 = net.sw(2);
    SimSwitch& leaf1 = net.sw(3);
    ASSERT_EQ(net.switch_name(2), "leaf0");
    m.send(kGroup1);
    expect_copy(m.a, m, kGroup1, 0);
    expect_copy(m.b, m, kGroup1, 0);
    expect_copy(m.b2, m, kGroup1, 0);
    EXPECT_TRUE(m.local.poll(m.local.rcq).empty());
    EXPECT_TRUE(m.outsider.poll(m.outsider.rcq).empty());
    auto sent = [](SimSwitch& s, uint32_t peer) { return s.port(s.port_to(peer)).counters().enqueued; };
    EXPECT_EQ(sent(leaf0, 0), 0u) << "never back to the sender";
    EXPECT_EQ(sent(leaf0, 1), 1u);
    EXPECT_EQ(sent(leaf1, 2), 1u);
    EXPECT_EQ(sent(leaf1, 3), 0u) << "no copy to a non-member's port";
    EXPECT_EQ(m.f.find_nic(3)->counters().rx_frames, 0u);
    EXPECT_EQ(m.f.packets_delivered(), 2u);
    // NIC 1 leaves: leaf0 stops copying to it; NIC 2 still gets its copy.
    ASSERT_EQ(m.a.detach(kGroup1), 0);
    m.send(kGroup1);
    EXPECT_TRUE(m.a.poll(m.a.rcq).empty());
    expect_copy(m.b, m, kGroup1, 1);
    EXPECT_EQ(sent(leaf0, 1), 1u);
    EXPECT_EQ(sent(leaf1, 2), 2u);
}
