// Packet spraying (sdr_qp_attr_ext.spray, Nic::qp_set_spray): a spraying transport QP sends each
// packet from another UDP source port of 0xC000-0xFFFF, spread evenly, and its peer takes them
// all; without it every packet of a QP carries the one port of its pair of QPNs.
#include "sim_util.hpp"

#include <sdr/emu/capture_reader.hpp>
#include <sdr/emu/ids.hpp>
#include <sdr/emu/wire.hpp>

#include <map>
#include <set>
#include <string>

using namespace sdr;
using namespace sdr::test;

namespace {

constexpr size_t kUdp = 14 + 20, kBth = kUdp + 8;  // offsets in an IPv4 RoCEv2 frame

struct DataFrame {
    uint16_t sport;
    uint32_t dest_qp;
};

// The SDR data frames (UC WRITE Only with Immediate) side 0 sent, from the capture.
std::vector<DataFrame> data_frames(const std::string& pcap)
{
    std::vector<emu::CaptureRecord> recs;
    std::string err;
    EXPECT_TRUE(emu::read_capture(pcap, &recs, &err)) << err;
    std::vector<DataFrame> out;
    const auto from = emu::SimFabric::address_of(0).mac;
    for (const auto& r : recs) {
        const uint8_t* b = r.bytes.data();
        if (r.bytes.size() < kBth + 8 || b[kBth] != emu::wire::kOpUcWriteOnlyImm || !std::equal(from.begin(), from.end(), b + 6))
            continue;
        out.push_back({static_cast<uint16_t>(b[kUdp] << 8 | b[kUdp + 1]),
                       static_cast<uint32_t>(b[kBth + 5] << 16 | b[kBth + 6] << 8 | b[kBth + 7])});
    }
    return out;
}

// One message of `size` bytes from side 0 to side 1; true if it arrived byte-exact with every
// chunk bit set.
bool deliver(SimWorld& w, size_t size)
{
    std::vector<uint8_t> src(size), dst(size, 0);
    fill(src, 7);
    const uint32_t sk = w.lkey(0, src.data(), size), rk = w.lkey(1, dst.data(), size);
    sdr_recv_wr rw{static_cast<uint32_t>(size), rk, reinterpret_cast<uint64_t>(dst.data())};
    sdr_recv_handle* rh = nullptr;
    EXPECT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS) << sdr_last_error();
    sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(size), sk, reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh = nullptr;
    EXPECT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS) << sdr_last_error();
    wait_send(sh);
    w.run_until_idle();
    uint8_t* bm = nullptr;
    size_t nb = 0;
    EXPECT_EQ(sdr_recv_bitmap_get(rh, &bm, &nb), SDR_SUCCESS);
    bool all = true;
    for (size_t c = 0; c < size >> 16; c++) all = all && bit(bm, c);
    EXPECT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
    return all && dst == src;
}

WorldConfig spray_config(const std::string& pcap, uint32_t spray, uint32_t channels)
{
    WorldConfig c = config(16, 31, 7, channels);  // slots of 16 MiB
    c.fabric.pcap_path = pcap;
    c.fabric.pcap_snaplen = 64;  // headers through the BTH
    c.ext.spray = spray;
    return c;
}

}  // namespace

TEST(Spray, OffEveryPacketOfAQpCarriesItsPairsPort)
{
    const std::string pcap = testing::TempDir() + "spray_off.pcap";
    std::map<uint32_t, uint32_t> local_qpn;  // side 1's QPN -> side 0's, by handle
    {
        SimWorld w(spray_config(pcap, 0, 4));
        ASSERT_TRUE(deliver(w, size_t{4} << 20));
        for (uint32_t h = 0; h < 4; h++) local_qpn[w.nic(1).qpn(h)] = w.nic(0).qpn(h);
    }  // the capture is whole once the world is gone
    std::map<uint32_t, std::set<uint16_t>> ports;
    for (const DataFrame& f : data_frames(pcap)) ports[f.dest_qp].insert(f.sport);
    ASSERT_EQ(ports.size(), 4u) << "one transport QP per channel";
    for (const auto& [qpn, set] : ports) {
        ASSERT_TRUE(local_qpn.count(qpn));
        EXPECT_EQ(set, std::set<uint16_t>{emu::udp_src_port(local_qpn[qpn], qpn)});
    }
}

TEST(Spray, OnPortsCoverTheRangeEvenlyAndThePeerTakesThemAll)
{
    const std::string pcap = testing::TempDir() + "spray_on.pcap";
    {
        SimWorld w(spray_config(pcap, 1, 1));
        sdr_qp_attr_ext got{};
        ASSERT_EQ(sdr_qp_attr_ext_get(w.qp(0), &got), SDR_SUCCESS);
        EXPECT_EQ(got.spray, 1u);
        ASSERT_TRUE(deliver(w, size_t{16} << 20));  // 4096 packets of 4 KiB
        EXPECT_EQ(w.nic(1).counters().rx_drops_total(), 0u);
        EXPECT_EQ(w.nic(1).counters().rx_placed_bytes, size_t{16} << 20);
    }
    const std::vector<DataFrame> frames = data_frames(pcap);
    ASSERT_EQ(frames.size(), 4096u);
    std::set<uint16_t> distinct;
    uint64_t bucket[8] = {};
    for (const DataFrame& f : frames) {
        ASSERT_GE(f.sport, 0xC000);
        distinct.insert(f.sport);
        bucket[(f.sport - 0xC000) >> 11]++;
    }
    // Fewer than 2^14 packets: no port twice (the mix is a bijection of the packet count).
    EXPECT_EQ(distinct.size(), frames.size());
    // Chi-square over 8 equal buckets of the range against a uniform spread: 7 degrees of
    // freedom, 18.48 is its 0.01 tail.
    double chi2 = 0, expect = frames.size() / 8.0;
    for (uint64_t n : bucket) chi2 += (n - expect) * (n - expect) / expect;
    EXPECT_LT(chi2, 18.48);
    // Consecutive packets take different ports: the ECMP path changes packet by packet.
    for (size_t i = 1; i < frames.size(); i++) ASSERT_NE(frames[i].sport, frames[i - 1].sport);
}

// Both ends must agree: a receiver that does not spray drops a spraying peer's packets as
// wrong_peer, and sdr_qp_connect refuses a blob whose spraying differs.
TEST(Spray, AReceiverThatDoesNotSprayDropsThem)
{
    SimWorld w(spray_config("", 1, 1));
    ASSERT_TRUE(w.nic(1).qp_set_spray(0, false));
    EXPECT_FALSE(deliver(w, size_t{1} << 20));
    EXPECT_EQ(w.nic(1).counters().rx_drop(emu::RxDrop::WrongPeer), 256u);
    EXPECT_EQ(w.nic(1).counters().rx_placed_bytes, 0u);
}

TEST(Spray, ConnectRefusesAPeerThatDiffers)
{
    WorldConfig c = spray_config("", 0, 1);
    SimWorld w(c);
    sdr_qp_attr qa = c.qp;
    sdr_qp_attr_ext ext;
    sdr_qp_attr_ext_init(&ext);
    ext.transport = SDR_TRANSPORT_UC;
    ext.spray = 1;
    sdr_qp* sprayer = sdr_qp_create_ext(w.ctx(0), &qa, &ext);
    ASSERT_NE(sprayer, nullptr) << sdr_last_error();
    size_t len = 0;
    ASSERT_EQ(sdr_qp_info_size_get(sprayer, &len), SDR_SUCCESS);
    std::vector<uint8_t> blob(len);
    ASSERT_EQ(sdr_qp_info_get(sprayer, blob.data()), SDR_SUCCESS);
    sdr_qp_attr_ext uc;
    sdr_qp_attr_ext_init(&uc);
    uc.transport = SDR_TRANSPORT_UC;
    sdr_qp* plain = sdr_qp_create_ext(w.ctx(1), &qa, &uc);
    ASSERT_NE(plain, nullptr);
    EXPECT_EQ(sdr_qp_connect(plain, blob.data()), SDR_ERROR);
    EXPECT_NE(std::string(sdr_last_error()).find("spraying differs"), std::string::npos) << sdr_last_error();
    ext.spray = 2;
    EXPECT_EQ(sdr_qp_create_ext(w.ctx(0), &qa, &ext), nullptr);
    EXPECT_NE(std::string(sdr_last_error()).find("spray must be 0"), std::string::npos) << sdr_last_error();
    EXPECT_EQ(sdr_qp_destroy(plain), SDR_SUCCESS);
    EXPECT_EQ(sdr_qp_destroy(sprayer), SDR_SUCCESS);
}
