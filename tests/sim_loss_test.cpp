// Under loss the chunk bitmap must say exactly what arrived: a chunk bit is set if and only if
// every packet of that chunk was delivered, checked against the link's own drop log.
#include "sim_util.hpp"

#include <set>

using namespace sdr;
using namespace sdr::test;

namespace {

struct LossCase {
    const char* name;
    uint32_t chunk_log;
    double loss;
    double ge_gb, ge_bg;  // Gilbert-Elliott burst loss (0: off)
    uint32_t mtu_log;
};

void run_case(const LossCase& lc)
{
    SCOPED_TRACE(lc.name);
    WorldConfig c = config(lc.chunk_log, 30, 7);
    c.qp.mtu = static_cast<sdr_mtu>(lc.mtu_log - 6);
    c.fabric.drop_log = true;
    c.fabric.seed = 4242;
    c.fabric.link.impairment.loss = lc.loss;
    c.fabric.link.impairment.ge_p_good_bad = lc.ge_gb;
    c.fabric.link.impairment.ge_p_bad_good = lc.ge_bg;
    c.fabric.link.impairment.reorder = 0.05;
    c.fabric.link.impairment.reorder_max_ps = 20'000'000;
    c.fabric.link.impairment.duplicate = 0.01;
    SimWorld w(c);
    const size_t size = (4u << 20) + 3 * 1000;  // a partial last packet and a partial last chunk
    const uint32_t nmsgs = 3;
    std::vector<std::vector<uint8_t>> src(nmsgs, std::vector<uint8_t>(size)), dst(nmsgs, std::vector<uint8_t>(size, 0));
    std::vector<sdr_recv_handle*> rh(nmsgs);
    std::vector<sdr_send_handle*> sh(nmsgs);
    for (uint32_t i = 0; i < nmsgs; i++) {
        fill(src[i], 100 + i);
        uint32_t rk = w.lkey(1, dst[i].data(), size);
        sdr_recv_wr rw{static_cast<uint32_t>(size), rk, reinterpret_cast<uint64_t>(dst[i].data())};
        ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh[i]), SDR_SUCCESS);
    }
    for (uint32_t i = 0; i < nmsgs; i++) {
        uint32_t sk = w.lkey(0, src[i].data(), size);
        sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(size), sk, reinterpret_cast<uint64_t>(src[i].data()), 0};
        ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh[i]), SDR_SUCCESS) << sdr_last_error();
    }
    for (auto* h : sh) wait_send(h);
    w.run_until_idle();

    // chunks with at least one dropped packet, per message id, from the link's drop log
    const uint32_t ppc_log = lc.chunk_log - lc.mtu_log;
    std::vector<std::set<uint64_t>> lost(nmsgs);
    std::vector<std::set<uint64_t>> lost_packets(nmsgs);
    for (const auto& d : w.fabric().drop_log()) {
        fw_imm im = fw_imm_decode(FW_IMM_DEFAULT_LAYOUT, d.meta.imm);
        ASSERT_LT(im.msg_id, nmsgs);
        lost[im.msg_id].insert(im.packet_offset >> ppc_log);
        lost_packets[im.msg_id].insert(im.packet_offset);
    }
    EXPECT_EQ(w.fabric().link(0, 1)->dropped(), w.fabric().drop_log().size());
    const uint64_t chunk = 1ull << lc.chunk_log, nchunks = (size + chunk - 1) / chunk;
    size_t total_lost = 0;
    for (uint32_t i = 0; i < nmsgs; i++) {
        uint8_t* bm;
        size_t nb;
        ASSERT_EQ(sdr_recv_bitmap_get(rh[i], &bm, &nb), SDR_SUCCESS);
        total_lost += lost[i].size();
        for (uint64_t ch = 0; ch < nchunks; ch++) {
            bool complete = !lost[i].count(ch);
            ASSERT_EQ(bit(bm, ch), complete) << "message " << i << " chunk " << ch;
            uint64_t off = ch * chunk, len = std::min<uint64_t>(chunk, size - off);
            if (complete) {
                ASSERT_EQ(0, std::memcmp(src[i].data() + off, dst[i].data() + off, len)) << ch;
            }
        }
        // per-packet detail of one incomplete chunk matches the drop log too
        if (!lost[i].empty()) {
            uint64_t ch = *lost[i].begin();
            std::vector<uint64_t> bits(((1u << ppc_log) + 63) / 64);
            ASSERT_EQ(sdr_recv_bitmap_chunk_expand(rh[i], static_cast<uint32_t>(ch), bits.data()), SDR_SUCCESS);
            for (uint32_t p = 0; p < (1u << ppc_log); p++) {
                uint64_t pkt = (ch << ppc_log) + p;
                if (pkt * (1ull << lc.mtu_log) >= size) break;
                ASSERT_EQ((bits[p / 64] >> (p % 64)) & 1, lost_packets[i].count(pkt) ? 0u : 1u) << "packet " << pkt;
            }
        }
        ASSERT_EQ(sdr_recv_complete(rh[i]), SDR_SUCCESS);
    }
    EXPECT_GT(total_lost, 0u) << "the case should lose something";
    EXPECT_LT(total_lost, nmsgs * nchunks) << "the case should deliver something";
}

}  // namespace

TEST(SimLoss, OnePacketChunks) { run_case({"1 packet per chunk, iid 1e-2", 12, 1e-2, 0, 0, 12}); }
TEST(SimLoss, SixteenPacketChunks) { run_case({"16 packets per chunk, iid 2e-3", 16, 2e-3, 0, 0, 12}); }
TEST(SimLoss, SixtyFourPacketChunksSmallMtu) { run_case({"64 packets per chunk, MTU 1024", 16, 1e-3, 0, 0, 10}); }
TEST(SimLoss, CountedChunksOfManyPackets) { run_case({"256 packets per chunk (counter path)", 20, 2e-3, 0, 0, 12}); }
TEST(SimLoss, BurstLoss) { run_case({"Gilbert-Elliott bursts", 14, 0, 2e-3, 0.2, 12}); }
