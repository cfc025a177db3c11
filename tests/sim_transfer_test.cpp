// End-to-end transfers on the simulator through the public C API: byte-exact placement,
// bitmaps, immediates, streaming, ordering and resource limits.
#include "sim_util.hpp"

#include <sdr_sim.h>

using namespace sdr;
using namespace sdr::test;

namespace {

struct Result {
    std::vector<uint8_t> bitmap;
    std::vector<uint8_t> data;
    uint32_t imm = 0;
    bool imm_ok = false;
};

// Send `size` bytes from side 0 to side 1 as one message and return what side 1 saw.
Result transfer(SimWorld& w, size_t size, uint64_t seed, uint32_t imm = 0, bool with_imm = false)
{
    Result r;
    std::vector<uint8_t> src(size), dst(size, 0xEE);
    src.reserve(1);  // registration needs an address even for an empty message
    dst.reserve(1);
    fill(src, seed);
    uint32_t sk = w.lkey(0, src.data(), std::max<size_t>(size, 1)), rk = w.lkey(1, dst.data(), std::max<size_t>(size, 1));
    sdr_recv_wr rw{static_cast<uint32_t>(size), rk, reinterpret_cast<uint64_t>(dst.data())};
    sdr_recv_handle* rh = nullptr;
    EXPECT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS) << sdr_last_error();
    sdr_send_wr sw{with_imm ? SDR_WR_WRITE_WITH_IMM : SDR_WR_WRITE, imm, static_cast<uint32_t>(size), sk,
                   reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh = nullptr;
    EXPECT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS) << sdr_last_error();
    wait_send(sh);
    w.run_until_idle();
    uint8_t* bm = nullptr;
    size_t nb = 0;
    EXPECT_EQ(sdr_recv_bitmap_get(rh, &bm, &nb), SDR_SUCCESS);
    r.bitmap.assign(bm, bm + nb);
    r.imm_ok = sdr_recv_imm_get(rh, &r.imm) == SDR_SUCCESS;
    EXPECT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
    EXPECT_EQ(dst, src) << "payload differs";
    r.data = std::move(dst);
    return r;
}

void expect_all_set(const std::vector<uint8_t>& bm, uint64_t nchunks)
{
    ASSERT_EQ(bm.size(), (nchunks + 7) / 8);
    for (uint64_t c = 0; c < nchunks; c++) ASSERT_TRUE(bit(bm.data(), c)) << "chunk " << c;
    for (uint64_t c = nchunks; c < bm.size() * 8; c++) ASSERT_FALSE(bit(bm.data(), c)) << "padding bit " << c;
}

}  // namespace

TEST(SimTransfer, LosslessSizesArriveByteExactWithEveryBitSet)
{
    // 4 KiB .. 256 MiB; slots of 256 MiB (2^31 in flight / 2^3 messages), 64 KiB chunks.
    SimWorld w(config(16, 31, 3));
    uint64_t seed = 1;
    for (size_t size : {size_t{4096}, size_t{5000}, size_t{65536}, size_t{1} << 20, size_t{3} << 20 | 123,
                        size_t{64} << 20, size_t{256} << 20}) {
        SCOPED_TRACE(size);
        Result r = transfer(w, size, seed++);
        expect_all_set(r.bitmap, (size + 65535) / 65536);
    }
    EXPECT_EQ(w.nic(1).counters().rx_drops_total(), 0u);
}

// sdr_host_events is what lets a poll loop skip a QP (rel::Endpoint::progress): while the count
// stands still, nothing the host reads may change. Stepped through a 1 MiB message in virtual
// time, every step where the receiver's count held left its bitmap as it was, and the count
// moved at least once per chunk.
TEST(SimTransfer, HostEventCountHoldsOnlyWhileTheHostHasNothingNew)
{
    SimWorld w(config(16, 31, 3));
    const size_t size = size_t{1} << 20;
    std::vector<uint8_t> src(size, 5), dst(size, 0);
    uint32_t sk = w.lkey(0, src.data(), size), rk = w.lkey(1, dst.data(), size);
    sdr_recv_wr rw{static_cast<uint32_t>(size), rk, reinterpret_cast<uint64_t>(dst.data())};
    sdr_recv_handle* rh = nullptr;
    ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS) << sdr_last_error();
    uint8_t* bm = nullptr;
    size_t nb = 0;
    ASSERT_EQ(sdr_recv_bitmap_get(rh, &bm, &nb), SDR_SUCCESS);
    EXPECT_EQ(sdr_host_events(nullptr), 0u);
    const uint64_t idle = sdr_host_events(w.ctx(1));
    EXPECT_EQ(sdr_host_events(w.ctx(1)), idle) << "nothing happened, yet the count moved";
    sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(size), sk, reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh = nullptr;
    ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS) << sdr_last_error();
    uint64_t seen = sdr_host_events(w.ctx(1)), moves = 0, held = 0;
    std::vector<uint8_t> before(bm, bm + nb);
    while (sdr_sim_pending(w.ctx(1))) {
        ASSERT_EQ(sdr_sim_wait(w.ctx(1), sdr_now_ns(w.ctx(1)) + 200), SDR_SUCCESS);
        const uint64_t now = sdr_host_events(w.ctx(1));
        if (now == seen) {
            held++;
            ASSERT_EQ(std::vector<uint8_t>(bm, bm + nb), before) << "the bitmap changed while the count held";
        } else {
            moves++;
        }
        seen = now;
        before.assign(bm, bm + nb);
    }
    expect_all_set(before, size / 65536);
    EXPECT_GE(moves, size / 65536);
    EXPECT_GT(held, 0u);
    wait_send(sh);
    EXPECT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
}

TEST(SimTransfer, ChannelCountsGiveIdenticalBitmapsUnderLoss)
{
    std::vector<uint8_t> ref;
    for (uint32_t ch : {1u, 8u, 16u}) {
        WorldConfig c = config(14, 30, 7, ch);  // 16 KiB chunks: 4 packets each
        c.fabric.link.impairment.loss = 0.02;
        c.fabric.seed = 99;
        SimWorld w(c);
        std::vector<uint8_t> src(4 << 20), dst(4 << 20, 0);
        fill(src, 7);
        uint32_t sk = w.lkey(0, src.data(), src.size()), rk = w.lkey(1, dst.data(), dst.size());
        sdr_recv_wr rw{static_cast<uint32_t>(dst.size()), rk, reinterpret_cast<uint64_t>(dst.data())};
        sdr_recv_handle* rh;
        ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS);
        sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(src.size()), sk, reinterpret_cast<uint64_t>(src.data()), 0};
        sdr_send_handle* sh;
        ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS);
        wait_send(sh);
        w.run_until_idle();
        uint8_t* bm;
        size_t nb;
        ASSERT_EQ(sdr_recv_bitmap_get(rh, &bm, &nb), SDR_SUCCESS);
        std::vector<uint8_t> got(bm, bm + nb);
        if (ref.empty()) {
            ref = got;
            size_t missing = 0;
            for (size_t c = 0; c < 256; c++) missing += !bit(got.data(), c);
            EXPECT_GT(missing, 0u) << "the loss rate should leave holes";
        } else {
            EXPECT_EQ(got, ref) << ch << " channels";
        }
        ASSERT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
    }
}

TEST(SimTransfer, UserImmediateRecoveredForOneAndManyPacketMessages)
{
    SimWorld w(config(12, 30, 7));  // 4 KiB chunks = 1 packet
    for (size_t size : {size_t{0}, size_t{1}, size_t{4096}, size_t{3 * 4096}, size_t{7 * 4096 + 5}, size_t{8 * 4096},
                        size_t{1} << 20}) {
        SCOPED_TRACE(size);
        uint32_t imm = 0xC0FFEE00u ^ static_cast<uint32_t>(size);
        Result r = transfer(w, size, size + 3, imm, true);
        ASSERT_TRUE(r.imm_ok);
        EXPECT_EQ(r.imm, imm);
    }
}

TEST(SimTransfer, ReorderingAndDuplicationChangeNothing)
{
    WorldConfig c = config(16, 30, 7);
    c.fabric.link.impairment.reorder = 0.2;
    c.fabric.link.impairment.reorder_max_ps = 50'000'000;  // up to 50 us late
    c.fabric.link.impairment.duplicate = 0.1;
    SimWorld w(c);
    Result r = transfer(w, 8 << 20, 5, 0xABCD1234u, true);
    expect_all_set(r.bitmap, 128);
    EXPECT_TRUE(r.imm_ok);
    EXPECT_EQ(r.imm, 0xABCD1234u);
    EXPECT_GT(w.fabric().link(0, 1)->reordered(), 100u);
    EXPECT_GT(w.fabric().link(0, 1)->duplicated(), 100u);
    EXPECT_GT(w.nic(1).fw_counter(FW_CNT_RX_DUPLICATE), 100u);
}

TEST(SimTransfer, StreamingSendsToAnyChunkOffset)
{
    SimWorld w(config(16, 30, 7));
    const size_t chunk = 65536, n = 16;
    std::vector<uint8_t> src(n * chunk), dst(n * chunk, 0);
    fill(src, 11);
    uint32_t sk = w.lkey(0, src.data(), src.size()), rk = w.lkey(1, dst.data(), dst.size());
    sdr_recv_wr rw{static_cast<uint32_t>(dst.size()), rk, reinterpret_cast<uint64_t>(dst.data())};
    sdr_recv_handle* rh;
    ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS);
    sdr_send_start_wr st{SDR_WR_WRITE_WITH_IMM, 0x5EED};
    sdr_send_handle* sh;
    ASSERT_EQ(sdr_streaming_send_start(w.qp(0), &st, &sh), SDR_SUCCESS);
    // odd chunks first, then even ones backwards: any order, any offset
    std::vector<size_t> order;
    for (size_t c = 1; c < n; c += 2) order.push_back(c);
    for (size_t c = n; c-- > 0;)
        if (c % 2 == 0) order.push_back(c);
    for (size_t c : order) {
        sdr_send_continue_wr cw{static_cast<uint32_t>(chunk), reinterpret_cast<uint64_t>(src.data() + c * chunk), sk, c};
        ASSERT_EQ(sdr_streaming_send_continue(sh, &cw), SDR_SUCCESS) << sdr_last_error();
        if (c == 1) {  // after the first piece only chunk 1 can be complete
            w.run_until_idle();
            uint8_t* bm;
            size_t nb;
            ASSERT_EQ(sdr_recv_bitmap_get(rh, &bm, &nb), SDR_SUCCESS);
            EXPECT_EQ(bm[0], 0x02);
            EXPECT_EQ(bm[1], 0x00);
        }
    }
    int done = 0;
    EXPECT_EQ(sdr_send_poll(sh, &done, nullptr), SDR_RETRY) << "not ended yet";
    ASSERT_EQ(sdr_streaming_send_end(sh), SDR_SUCCESS);
    wait_send(sh);
    w.run_until_idle();
    uint8_t* bm;
    size_t nb;
    ASSERT_EQ(sdr_recv_bitmap_get(rh, &bm, &nb), SDR_SUCCESS);
    EXPECT_EQ(nb, 2u);
    EXPECT_EQ(bm[0], 0xFF);
    EXPECT_EQ(bm[1], 0xFF);
    uint32_t imm = 0;
    EXPECT_EQ(sdr_recv_imm_get(rh, &imm), SDR_SUCCESS);
    EXPECT_EQ(imm, 0x5EEDu);
    EXPECT_EQ(dst, src);
    ASSERT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
}

TEST(SimTransfer, MessageIdWrapsPast1024Messages)
{
    // 4 slots: message n reuses slot n % 4; ids wrap at 1024, generations alternate per reuse.
    SimWorld w(config(12, 14, 2));
    std::vector<uint8_t> src(4096), dst(4096);
    uint32_t sk = w.lkey(0, src.data(), src.size()), rk = w.lkey(1, dst.data(), dst.size());
    for (uint32_t n = 0; n < 2600; n++) {
        fill(src, n);
        sdr_recv_wr rw{4096, rk, reinterpret_cast<uint64_t>(dst.data())};
        sdr_recv_handle* rh;
        ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS) << n;
        sdr_send_wr sw{SDR_WR_WRITE_WITH_IMM, n, 4096, sk, reinterpret_cast<uint64_t>(src.data()), 0};
        sdr_send_handle* sh;
        ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS) << n;
        wait_send(sh);
        uint32_t imm = 0;
        w.run_until_idle();
        ASSERT_EQ(sdr_recv_imm_get(rh, &imm), SDR_SUCCESS) << n;
        ASSERT_EQ(imm, n);
        w.run_until_idle();
        uint8_t* bm;
        size_t nb;
        ASSERT_EQ(sdr_recv_bitmap_get(rh, &bm, &nb), SDR_SUCCESS);
        ASSERT_EQ(bm[0], 1) << n;
        ASSERT_EQ(dst, src) << n;
        ASSERT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
    }
    EXPECT_EQ(w.nic(1).fw_counter(FW_CNT_RX_STALE), 0u);
}

TEST(SimTransfer, RetryWhenSlotsRunOutAndRecoveryAfterCompletion)
{
    SimWorld w(config(12, 14, 2));  // 4 slots of 4 KiB
    std::vector<uint8_t> src(4096, 0x3C), dst(5 * 4096, 0);
    uint32_t sk = w.lkey(0, src.data(), src.size()), rk = w.lkey(1, dst.data(), dst.size());
    sdr_recv_handle* rh[5];
    auto recv_wr = [&](int i) { return sdr_recv_wr{4096, rk, reinterpret_cast<uint64_t>(dst.data() + 4096 * i)}; };
    for (int i = 0; i < 4; i++) {
        sdr_recv_wr rw = recv_wr(i);
        ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh[i]), SDR_SUCCESS);
    }
    sdr_recv_wr rw4 = recv_wr(4);
    EXPECT_EQ(sdr_recv_post(w.qp(1), &rw4, &rh[4]), SDR_RETRY) << "all 4 receive slots are held";
    sdr_send_handle* sh[5];
    sdr_send_wr sw{SDR_WR_WRITE, 0, 4096, sk, reinterpret_cast<uint64_t>(src.data()), 0};
    for (int i = 0; i < 4; i++) ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh[i]), SDR_SUCCESS);
    EXPECT_EQ(sdr_send_post(w.qp(0), &sw, &sh[4]), SDR_RETRY) << "4 sends outstanding";
    for (int i = 0; i < 4; i++) wait_send(sh[i]);
    w.run_until_idle();
    // recovery: the freed slot takes the fifth message, which lands
    ASSERT_EQ(sdr_recv_complete(rh[0]), SDR_SUCCESS);
    ASSERT_EQ(sdr_recv_post(w.qp(1), &rw4, &rh[4]), SDR_SUCCESS);
    ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh[4]), SDR_SUCCESS);
    wait_send(sh[4]);
    w.run_until_idle();
    uint8_t* bm;
    size_t nb;
    ASSERT_EQ(sdr_recv_bitmap_get(rh[4], &bm, &nb), SDR_SUCCESS);
    EXPECT_EQ(bm[0], 1);
    EXPECT_EQ(std::vector<uint8_t>(dst.begin() + 4 * 4096, dst.end()), src);
    for (int i = 1; i <= 4; i++) ASSERT_EQ(sdr_recv_complete(rh[i]), SDR_SUCCESS);
}

TEST(SimTransfer, RetryWhenInFlightBytesRunOut)
{
    WorldConfig c = config(12, 13, 1);    // side 0 may have 8 KiB in flight
    c.qp_side1 = sdr_qp_attr{12, 16, 4, SDR_MTU_4096, 1, 1, 0};  // side 1: 16 slots of 4 KiB
    SimWorld w(c);
    std::vector<uint8_t> src(4096), dst(16 * 4096);
    uint32_t sk = w.lkey(0, src.data(), src.size()), rk = w.lkey(1, dst.data(), dst.size());
    sdr_recv_handle* rh[3];
    for (int i = 0; i < 3; i++) {
        sdr_recv_wr rw{4096, rk, reinterpret_cast<uint64_t>(dst.data() + 4096 * i)};
        ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh[i]), SDR_SUCCESS);
    }
    sdr_send_wr sw{SDR_WR_WRITE, 0, 4096, sk, reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh[3];
    ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh[0]), SDR_SUCCESS);
    ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh[1]), SDR_SUCCESS);
    EXPECT_EQ(sdr_send_post(w.qp(0), &sw, &sh[2]), SDR_RETRY) << "8 KiB in flight";
    wait_send(sh[0]);
    ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh[2]), SDR_SUCCESS);
    wait_send(sh[1]);
    wait_send(sh[2]);
    for (auto* h : rh) ASSERT_EQ(sdr_recv_complete(h), SDR_SUCCESS);
}

TEST(SimTransfer, LatePacketAfterCompleteNeverTouchesTheNextMessage)
{
    // Packets of message 0 are held back 1 ms by reordering; the receiver completes message 0
    // early (holes allowed), posts message 4 into the same slot, and the late packets must
    // neither change message 4's buffer nor set its bits.
    WorldConfig c = config(12, 14, 2);
    c.fabric.link.impairment.reorder = 1.0;
    c.fabric.link.impairment.reorder_max_ps = 1'000'000'000;  // up to 1 ms
    SimWorld w(c);
    std::vector<uint8_t> src(4096, 0xAA), next(4096, 0x55);
    uint32_t sk = w.lkey(0, src.data(), 4096), nk = w.lkey(1, next.data(), 4096);
    std::vector<uint8_t> first(4096, 0);
    uint32_t fk = w.lkey(1, first.data(), 4096);
    sdr_recv_wr rw{4096, fk, reinterpret_cast<uint64_t>(first.data())};
    sdr_recv_handle* rh;
    ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS);
    sdr_send_wr sw{SDR_WR_WRITE, 0, 4096, sk, reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh;
    ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS);
    wait_send(sh);
    ASSERT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);  // before the packet arrived
    // messages 1..3 use other slots; message 4 reuses slot 0 with the other generation
    for (int i = 1; i <= 4; i++) {
        sdr_recv_wr nw{4096, nk, reinterpret_cast<uint64_t>(next.data())};
        ASSERT_EQ(sdr_recv_post(w.qp(1), &nw, &rh), SDR_SUCCESS);
        if (i < 4) {
            ASSERT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
        }
    }
    w.run_until_idle();  // the late packet lands now
    EXPECT_EQ(next, std::vector<uint8_t>(4096, 0x55)) << "late packet wrote into the next message";
    EXPECT_EQ(first, std::vector<uint8_t>(4096, 0)) << "late packet wrote after complete";
    uint8_t* bm;
    size_t nb;
    ASSERT_EQ(sdr_recv_bitmap_get(rh, &bm, &nb), SDR_SUCCESS);
    EXPECT_EQ(bm[0], 0);
    EXPECT_EQ(w.nic(1).counters().rx_null_key, 1u);
    EXPECT_EQ(w.nic(1).fw_counter(FW_CNT_RX_STALE), 1u);
    ASSERT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
}

TEST(SimTransfer, CqeOfStaleGenerationIsDropped)
{
    // Message 0 owns slot 0 with generation 0. A packet that carries message id 0 but arrives
    // on a generation-1 transport QP (with generation 1's valid root key) passes the
    // transport checks; the firmware must drop its CQE, so it never counts for message 0.
    SimWorld w(config(12, 14, 2));  // 8 channels: transport QP handles 0..7 gen 0, 8..15 gen 1
    std::vector<uint8_t> dst(4096, 0x11);
    uint32_t rk = w.lkey(1, dst.data(), 4096);
    sdr_recv_wr rw{4096, rk, reinterpret_cast<uint64_t>(dst.data())};
    sdr_recv_handle* rh;
    ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS);
    emu::PacketMeta m;
    m.opcode = 0x2B;
    m.dest_qp = w.nic(1).qpn(8);
    m.rkey = w.nic(1).qp_root_key(8);
    m.udp_src_port = emu::udp_src_port(w.nic(0).qpn(8), w.nic(1).qpn(8));  // from the peer QP of handle 8
    m.dma_len = 0;
    m.imm = fw_imm_encode(FW_IMM_DEFAULT_LAYOUT, 0, 0, 0xF);
    const emu::NicAddress peer = emu::SimFabric::address_of(0);
    w.nic(1).rx_packet(m, nullptr, peer);
    EXPECT_EQ(w.nic(1).counters().rx_drops_total(), 0u) << "the transport accepted it";
    EXPECT_EQ(w.nic(1).counters().rx_cqes, 1u);
    EXPECT_EQ(w.nic(1).fw_counter(FW_CNT_RX_STALE), 1u) << "the firmware dropped the CQE";
    // the same packet on generation 0 is taken
    m.dest_qp = w.nic(1).qpn(0);
    m.rkey = w.nic(1).qp_root_key(0);
    m.udp_src_port = emu::udp_src_port(w.nic(0).qpn(0), w.nic(1).qpn(0));
    w.nic(1).rx_packet(m, nullptr, peer);
    EXPECT_EQ(w.nic(1).fw_counter(FW_CNT_RX_STALE), 1u);
    ASSERT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
}

TEST(SimTransfer, RateLimitPacesTheSenderWithFirmwareTimers)
{
    // 1 MiB = 256 frames of 4174 bytes; at 1000 Mbit/s they take 256 * 33.392 us = 8.548 ms
    // of virtual time to post, against ~86 us at the 100 Gbit/s line rate.
    for (uint32_t rate : {0u, 1000u}) {
        WorldConfig c = config(16, 30, 7);
        c.qp.rate_limit = rate;
        SimWorld w(c);
        std::vector<uint8_t> src(1 << 20), dst(1 << 20);
        fill(src, 9);
        uint32_t sk = w.lkey(0, src.data(), src.size()), rk = w.lkey(1, dst.data(), dst.size());
        sdr_recv_wr rw{1 << 20, rk, reinterpret_cast<uint64_t>(dst.data())};
        sdr_recv_handle* rh;
        ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS);
        sdr_send_wr sw{SDR_WR_WRITE, 0, 1 << 20, sk, reinterpret_cast<uint64_t>(src.data()), 0};
        sdr_send_handle* sh;
        ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS);
        wait_send(sh);
        uint64_t injected_ns = w.now_ns();
        w.run_until_idle();
        EXPECT_EQ(dst, src);
        if (rate) {
            EXPECT_NEAR(static_cast<double>(injected_ns), 255 * 33392.0 + 344, 0.01 * 8.548e6) << "paced";
            EXPECT_GT(w.nic(0).fw_counter(FW_CNT_TX_PACED), 200u);
        } else {
            EXPECT_LT(injected_ns, 100'000u) << "line rate";
            EXPECT_EQ(w.nic(0).fw_counter(FW_CNT_TX_PACED), 0u);
        }
        ASSERT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
    }
}
