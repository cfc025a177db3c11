// Wireshark dissects the simulator's pcap as what we meant: InfiniBand UC RDMA WRITE-only with
// immediate (0x2B) to the receiver's channel QPs, per-channel PSNs counting up, RETH virtual
// addresses inside the message's slot; and every captured ICRC is right (tshark never checks).
#include "sim_util.hpp"
#include "tshark_util.hpp"

#include <pcap/pcap.h>
#include <sdr/emu/wire.hpp>
#include <unistd.h>

#include <map>
#include <set>

using namespace sdr;
using namespace sdr::test;

namespace {

std::string temp_pcap(const char* tag)
{
    return "/tmp/sdr_sim_tshark_" + std::string(tag) + "_" + std::to_string(getpid()) + ".pcap";
}

// Move `n_msgs` messages of `size` bytes from side 0 to side 1 with the fabric capturing;
// *gen0 = the receiver's generation-0 channel QPNs.
void capture(const std::string& path, bool payload, size_t size, int n_msgs, uint32_t channels, std::set<uint64_t>* gen0)
{
    WorldConfig c = config(16, 30, 7, channels);
    c.fabric.pcap_path = path;
    c.fabric.payload = payload;
    SimWorld w(c);
    std::vector<uint8_t> src(size), dst(size * n_msgs);
    fill(src, 1);
    uint32_t sk = w.lkey(0, src.data(), size), rk = w.lkey(1, dst.data(), dst.size());
    for (int i = 0; i < n_msgs; i++) {
        sdr_recv_wr rw{static_cast<uint32_t>(size), rk, reinterpret_cast<uint64_t>(dst.data() + i * size)};
        sdr_recv_handle* rh;
        ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS);
        sdr_send_wr sw{SDR_WR_WRITE_WITH_IMM, 0x1234u, static_cast<uint32_t>(size), sk, reinterpret_cast<uint64_t>(src.data()), 0};
        sdr_send_handle* sh;
        ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS);
        wait_send(sh);
        w.run_until_idle();
        ASSERT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
    }
    for (uint32_t ch = 0; ch < channels; ch++) gen0->insert(w.nic(1).qpn(ch));
}

void check_dissection(const std::string& path, size_t size, int n_msgs, uint32_t channels, const std::set<uint64_t>& gen0)
{
    std::string err;
    auto rows = tshark_fields(path,
                              {"infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
                               "infiniband.reth.va", "infiniband.reth.dmalen", "infiniband.immdt"},
                              &err);
    ASSERT_TRUE(rows) << err;
    const size_t packets_per_msg = size / 4096;
    ASSERT_EQ(rows->size(), packets_per_msg * n_msgs);
    std::map<uint64_t, uint64_t> next_psn;  // per destination QP
    std::set<uint64_t> qps;
    for (size_t i = 0; i < rows->size(); i++) {
        const auto& r = (*rows)[i];
        ASSERT_EQ(r.size(), 6u);
        ASSERT_EQ(r[0], "43") << "row " << i << ": UC RDMA WRITE Only with Immediate";
        auto qp = parse_tshark_uint(r[1]), psn = parse_tshark_uint(r[2]), va = parse_tshark_uint(r[3]),
             len = parse_tshark_uint(r[4]);
        auto imm = parse_tshark_bytes_be(r[5]);
        ASSERT_TRUE(qp && psn && va && len && imm) << "row " << i;
        fw_imm im = fw_imm_decode(FW_IMM_DEFAULT_LAYOUT, static_cast<uint32_t>(*imm));
        uint64_t msg = i / packets_per_msg, slot = msg % 128;  // lossless, in order
        EXPECT_EQ(im.msg_id, msg);
        EXPECT_EQ(*va, slot * (8u << 20) + uint64_t{im.packet_offset} * 4096) << "row " << i;
        EXPECT_EQ(*len, 4096u);
        // generation (msg / 128) % 2 = 0 here: the generation-0 channel QPs
        EXPECT_EQ(gen0.count(*qp), 1u) << "row " << i << ": QPN " << *qp;
        qps.insert(*qp);
        if (next_psn.count(*qp)) {
            EXPECT_EQ(*psn, next_psn[*qp]) << "row " << i;
        }
        next_psn[*qp] = *psn + 1;
    }
    EXPECT_EQ(qps.size(), channels) << "packets sprayed over every channel";
}

}  // namespace

TEST(SimTshark, FullFramesDissectAndCarryCorrectIcrc)
{
    if (!tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to dissect our pcaps";
    std::string path = temp_pcap("full");
    std::set<uint64_t> gen0;
    capture(path, true, 256 << 10, 3, 4, &gen0);
    check_dissection(path, 256 << 10, 3, 4, gen0);
    // every frame in the capture is whole and its ICRC verifies
    char errbuf[PCAP_ERRBUF_SIZE];
    pcap_t* p = pcap_open_offline(path.c_str(), errbuf);
    ASSERT_NE(p, nullptr) << errbuf;
    pcap_pkthdr* h;
    const u_char* data;
    int frames = 0;
    while (pcap_next_ex(p, &h, &data) == 1) {
        ASSERT_EQ(h->caplen, h->len);
        ASSERT_TRUE(emu::wire::icrc_ok(data, h->caplen)) << "frame " << frames;
        frames++;
    }
    pcap_close(p);
    EXPECT_EQ(frames, 3 * 64);
    std::remove(path.c_str());
}

TEST(SimTshark, PayloadFreeCapturesDissectToo)
{
    if (!tshark_available()) GTEST_SKIP() << "tshark is not on PATH; install tshark to dissect our pcaps";
    std::string path = temp_pcap("headers");
    std::set<uint64_t> gen0;
    capture(path, false, 1 << 20, 2, 8, &gen0);
    check_dissection(path, 1 << 20, 2, 8, gen0);
    std::remove(path.c_str());
}
