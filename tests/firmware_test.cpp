// Firmware handlers in isolation: immediate codec, slot arming, per-packet bitmaps, chunk
// completion written exactly once, user-immediate reassembly, stale-CQE drops.
#include <sdr/emu/worker.hpp>
#include <sdr/firmware/fw.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace {

TEST(ImmCodec, RoundTripsDefaultAndAlternativeSplits)
{
    for (fw_imm_layout l : {FW_IMM_DEFAULT_LAYOUT, fw_imm_layout{8, 22, 2}, fw_imm_layout{12, 16, 4}}) {
        ASSERT_TRUE(fw_imm_layout_valid(l));
        std::mt19937_64 rng(l.msg_bits);
        for (int i = 0; i < 10000; i++) {
            uint32_t m = rng() & ((1u << l.msg_bits) - 1), p = rng() & ((1u << l.offset_bits) - 1),
                     f = rng() & ((1u << l.frag_bits) - 1);
            fw_imm d = fw_imm_decode(l, fw_imm_encode(l, m, p, f));
            ASSERT_EQ(d.msg_id, m);
            ASSERT_EQ(d.packet_offset, p);
            ASSERT_EQ(d.frag, f);
        }
    }
    EXPECT_EQ(fw_imm_encode(FW_IMM_DEFAULT_LAYOUT, 0x3FF, 0, 0), 0xFFC00000u);  // id in the top 10 bits
    EXPECT_EQ(fw_imm_encode(FW_IMM_DEFAULT_LAYOUT, 0, 1, 0), 0x10u);
    EXPECT_FALSE(fw_imm_layout_valid(fw_imm_layout{10, 18, 3}));
    EXPECT_FALSE(fw_imm_layout_valid(fw_imm_layout{10, 17, 4}));
    EXPECT_FALSE(fw_imm_layout_valid(fw_imm_layout{0, 28, 4}));
}

// Found by fuzz_firmware: layout 26+2+4 was accepted, but a short message's padding packet for
// fragment j goes at packet offset j (4..7 here), which 2 offset bits cannot hold: the offset
// spilled into the message id and the padding of message 0 claimed to be message 1. Every
// valid layout must carry every fragment index as a packet offset.
TEST(ImmCodec, EveryValidLayoutAddressesEveryPaddingFragment)
{
    EXPECT_FALSE(fw_imm_layout_valid(fw_imm_layout{26, 2, 4}));
    EXPECT_FALSE(fw_imm_layout_valid(fw_imm_layout{27, 4, 1}));
    EXPECT_TRUE(fw_imm_layout_valid(fw_imm_layout{26, 5, 1}));
    int valid = 0;
    for (uint8_t m = 1; m < 32; m++)
        for (uint8_t f = 1; m + f < 32; f++) {
            fw_imm_layout l{m, static_cast<uint8_t>(32 - m - f), f};
            if (!fw_imm_layout_valid(l)) continue;
            valid++;
            for (uint32_t j = 0; j < fw_imm_num_frags(l); j++) {
                fw_imm d = fw_imm_decode(l, fw_imm_encode(l, 0, j, 0));
                ASSERT_EQ(d.packet_offset, j) << int(m) << "+" << int(l.offset_bits) << "+" << int(f);
                ASSERT_EQ(d.msg_id, 0u) << int(m) << "+" << int(l.offset_bits) << "+" << int(f);
            }
        }
    EXPECT_GT(valid, 100);
}

// One receive QP in "NIC memory" with its host window, driven CQE by CQE.
struct RxRig {
    fw_rx_qp qp{};
    std::vector<uint64_t> mem, window;
    hal_worker w{};
    fw_imm_layout imm;
    RxRig(uint32_t nslots, uint32_t max_packets, uint32_t log_ppc, fw_imm_layout l = FW_IMM_DEFAULT_LAYOUT) : imm(l)
    {
        mem.resize(fw_rx_qp_mem_bytes(nslots, max_packets, log_ppc) / 8 + 1);
        uint32_t nchunks = (max_packets + (1u << log_ppc) - 1) >> log_ppc;
        window.assign(nslots * ((nchunks + 63) / 64 + 1), 0);
        fw_rx_qp_init(&qp, mem.data(), l, nslots, max_packets, log_ppc, 12, 2,
                      hal_window{reinterpret_cast<uint64_t>(window.data()), window.size()});
    }
    void cqe(uint32_t gen, uint32_t msg, uint32_t p, uint32_t user_imm, uint32_t len = 4096)
    {
        hal_cqe c{};
        c.imm = fw_imm_encode(imm, msg, p, fw_imm_user_frag(imm, user_imm, fw_imm_frag_index(imm, p)));
        c.byte_len = len;
        fw_rx_cqe(&qp, gen, &w, &c);
    }
    uint64_t* slot_words(uint32_t s) { return window.data() + s * qp.slot_window_words; }
    bool chunk_bit(uint32_t s, uint32_t c) { return slot_words(s)[c / 64] >> (c % 64) & 1; }
    uint64_t imm_word(uint32_t s) { return slot_words(s)[qp.bitmap_words]; }
};

void check_exactly_once(uint32_t log_ppc, uint64_t length, bool one_thread)
{
    SCOPED_TRACE(testing::Message() << "log_ppc " << log_ppc << (one_thread ? ", one thread" : ", atomics"));
    const uint32_t max_packets = 4096;
    RxRig r(4, max_packets, log_ppc);
    r.qp.one_thread = one_thread;
    fw_rx_slot_arm(&r.qp, 2, 1, 6, length);
    uint32_t npk = static_cast<uint32_t>((length + 4095) / 4096);
    uint32_t ppc = 1u << log_ppc, nchunks = (npk + ppc - 1) / ppc;
    std::vector<uint32_t> order(npk);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937 rng(log_ppc);
    std::shuffle(order.begin(), order.end(), rng);
    // every packet twice (duplicates), in random order
    std::vector<uint32_t> twice = order;
    twice.insert(twice.end(), order.begin(), order.end());
    std::shuffle(twice.begin(), twice.end(), rng);
    std::vector<uint32_t> seen(npk, 0);
    for (uint32_t p : twice) {
        bool chunk_was_done = r.chunk_bit(2, p >> log_ppc);
        r.cqe(1, 6, p, 0xDEADBEEF);
        seen[p]++;
        // the chunk bit appears exactly when its last missing packet arrives
        uint32_t c = p >> log_ppc;
        bool all = true;
        for (uint32_t q = c * ppc; q < std::min(npk, (c + 1) * ppc); q++) all &= seen[q] > 0;
        ASSERT_EQ(r.chunk_bit(2, c), all) << "packet " << p;
        if (chunk_was_done) {
            ASSERT_TRUE(r.chunk_bit(2, c));
        }
    }
    // one host write per chunk plus one for the immediate, whatever the duplicates
    EXPECT_EQ(r.w.window_writes, nchunks + 1u);
    EXPECT_EQ(r.w.counters[FW_CNT_CHUNK_COMPLETE], nchunks);
    EXPECT_EQ(r.w.counters[FW_CNT_RX_DUPLICATE], npk);
    EXPECT_EQ(r.imm_word(2), FW_IMM_VALID | 0xDEADBEEFull);
    for (uint32_t c = nchunks; c < 64 * r.qp.bitmap_words; c++) ASSERT_FALSE(r.chunk_bit(2, c));
    // other slots untouched
    for (uint32_t s : {0u, 1u, 3u})
        for (uint32_t i = 0; i < r.qp.slot_window_words; i++) ASSERT_EQ(r.slot_words(s)[i], 0u);
}

TEST(FirmwareRx, ChunkBitWrittenExactlyOncePerChunk)
{
    // Both ways of updating NIC memory: atomics, and the simulator's plain read-modify-writes.
    for (bool one_thread : {false, true}) {
        check_exactly_once(0, 4096 * 100, one_thread);        // 1-packet chunks
        check_exactly_once(4, 4096 * 1000 + 17, one_thread);  // 16-packet chunks, partial last packet and chunk
        check_exactly_once(6, 4096 * 4096, one_thread);       // 64-packet chunks, full words
        check_exactly_once(8, 4096 * 1500 - 1, one_thread);   // 256-packet chunks: per-chunk counters
    }
}

TEST(FirmwareRx, StaleMessageGenerationAndOffsetAreDropped)
{
    RxRig r(4, 64, 2);
    fw_rx_slot_arm(&r.qp, 1, 0, 5, 8 * 4096);
    r.cqe(1, 5, 0, 0);   // right id, other generation
    r.cqe(0, 9, 0, 0);   // id 9 maps to slot 1 too, but is not the armed message
    r.cqe(0, 5, 8, 0);   // beyond the 8 packets of the posted buffer
    EXPECT_EQ(r.w.counters[FW_CNT_RX_STALE], 2u);
    EXPECT_EQ(r.w.counters[FW_CNT_RX_BAD_OFFSET], 1u);
    EXPECT_EQ(r.w.window_writes, 0u);
    fw_rx_slot_disarm(&r.qp, 1);
    r.cqe(0, 5, 0, 0);  // after complete: NULL key and idle slot
    EXPECT_EQ(r.w.counters[FW_CNT_RX_STALE], 3u);
    uint64_t bits[1];
    fw_rx_chunk_expand(&r.qp, 1, 0, bits, 1);
    EXPECT_EQ(bits[0], 0u);
}

TEST(FirmwareRx, ReArmClearsThePreviousMessage)
{
    RxRig r(2, 64, 2);
    fw_rx_slot_arm(&r.qp, 0, 0, 0, 16 * 4096);
    for (uint32_t p = 0; p < 16; p += 2) r.cqe(0, 0, p, 0x12345678);
    fw_rx_slot_disarm(&r.qp, 0);
    std::fill(r.window.begin(), r.window.end(), 0);  // the host clears its words on repost
    fw_rx_slot_arm(&r.qp, 0, 1, 2, 16 * 4096);
    uint64_t bits[1];
    fw_rx_chunk_expand(&r.qp, 0, 0, bits, 1);
    EXPECT_EQ(bits[0], 0u);
    for (uint32_t p = 1; p < 16; p += 2) r.cqe(1, 2, p, 0);
    for (uint32_t c = 0; c < 4; c++) EXPECT_FALSE(r.chunk_bit(0, c)) << "old packets must not count";
}

TEST(FirmwareRx, ImmediateFromShortMessagesViaZeroLengthPadding)
{
    // 16 fragments of 2 bits with the 8+22+2 split; a 3-packet message plus 13 padding packets
    RxRig r(2, 64, 0, fw_imm_layout{8, 22, 2});
    fw_rx_slot_arm(&r.qp, 0, 0, 0, 3 * 4096);
    for (uint32_t p = 0; p < 3; p++) r.cqe(0, 0, p, 0xA5C3E10F);
    EXPECT_EQ(r.imm_word(0), 0u) << "13 fragments still missing";
    for (uint32_t p = 3; p < 16; p++) r.cqe(0, 0, p, 0xA5C3E10F, 0);
    EXPECT_EQ(r.imm_word(0), FW_IMM_VALID | 0xA5C3E10Full);
    EXPECT_EQ(r.w.counters[FW_CNT_CHUNK_COMPLETE], 3u) << "padding sets no bits";
}

TEST(FirmwareRx, WindowRefusesWritesOutsideIt)
{
    RxRig r(2, 64, 0);
    r.qp.window.nwords = 1;  // pretend the host gave a window too small for slot 1
    fw_rx_slot_arm(&r.qp, 1, 0, 1, 4096);
    r.cqe(0, 1, 0, 0);
    EXPECT_EQ(r.w.window_refused, 1u);
    EXPECT_EQ(r.window[r.qp.slot_window_words], 0u);
}

}  // namespace
