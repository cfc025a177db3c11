// Findings of the fuzz targets (tests/fuzz), each reproduced through the code's own API in the
// ordinary build. The crashing inputs themselves are in tests/fuzz/corpus/<target>/, so every
// fuzz run replays them too.
#include <sdr/host/sim_world.hpp>
#include <sdr/reliability/engine.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using namespace sdr::rel;

// fuzz_ctrl_msg (input 68 00 00 00 06 99): three empty messages, auto scheme, the receiver's
// first CTS lost. The receiver delivers an empty message at once, so it never repeats that
// CTS; the sender's message waited for it with no deadline in next_deadline(), and a caller
// sleeping until the next deadline never called on_timer: the send stayed open forever.
TEST(FuzzRegression, SendWaitingForALostCtsStillTimesOut)
{
    Config cfg;
    cfg.rtt_ms = 1;
    cfg.timeout_ms = 50;
    Geometry geo;
    SendEngine tx(cfg, geo, 1);
    RecvEngine rx(cfg, geo, 2);
    const uint64_t t0 = 1'000'000;
    uint64_t seq = tx.post(t0, 0);
    rx.post(t0, 0, rx.choose_code(0, cfg.rtt_ms, cfg.bw_gbps));
    Action a;
    while (rx.poll_action(&a))
        if (a.kind == Action::PostRecv) rx.on_posted(t0, a.seq);  // its CTS and FINAL ACKs are lost
    while (rx.poll_action(&a)) {
    }
    ASSERT_EQ(tx.stats(seq), nullptr);
    uint64_t t = tx.next_deadline();
    ASSERT_NE(t, kNever) << "a send waiting for CTS must say when it times out";
    EXPECT_EQ(t, t0 + 50'000'000u);
    tx.on_timer(t);
    bool finished = false;
    while (tx.poll_action(&a))
        if (a.kind == Action::Finish) {
            finished = true;
            EXPECT_FALSE(a.ok);
            EXPECT_NE(a.error.find("no clear-to-send"), std::string::npos) << a.error;
        }
    EXPECT_TRUE(finished);
    ASSERT_NE(tx.stats(seq), nullptr);
    EXPECT_FALSE(tx.stats(seq)->ok);
}

// fuzz_qp_info (a real blob with byte 10, the slot size's log2, set to 84): sdr_qp_connect
// accepted it, and the sender's 1 << slot_log (qp.cpp) shifted a 64-bit value by 84 (UBSan).
// A blob must describe a QP sdr_qp_create could have made; these each break one of its rules.
TEST(FuzzRegression, QpInfoWithImpossibleGeometryIsRefused)
{
    sdr::WorldConfig c;
    c.channels = 2;
    c.qp = sdr_qp_attr{12, 20, 4, SDR_MTU_4096, 1, 1, 0};
    sdr::SimWorld w(c);
    size_t n = 0;
    ASSERT_EQ(sdr_qp_info_size_get(w.qp(1), &n), SDR_SUCCESS);
    std::vector<uint8_t> good(n);
    ASSERT_EQ(sdr_qp_info_get(w.qp(1), good.data()), SDR_SUCCESS);
    // bytes 8..11: log2 of MTU (12), chunk (12), slot (16), slot count (4); 17: packet-offset
    // bits (18)
    ASSERT_EQ(good[8], 12);
    ASSERT_EQ(good[10], 16);
    ASSERT_EQ(good[17], 18);
    struct Bad {
        const char* what;
        size_t byte;
        uint8_t value;
    } bad[] = {{"slot of 2^84 bytes (the finding)", 10, 84},
               {"slot of 2^33 bytes", 10, 33},
               {"2^19 packets a slot, 18 offset bits", 10, 31}};
    for (const Bad& b : bad) {
        SCOPED_TRACE(b.what);
        std::vector<uint8_t> blob = good;
        blob[b.byte] = b.value;
        sdr_qp_attr a = c.qp;
        sdr_qp_attr_ext uc;  // the world's QPs are UC
        sdr_qp_attr_ext_init(&uc);
        uc.transport = SDR_TRANSPORT_UC;
        sdr_qp* qp = sdr_qp_create_ext(w.ctx(0), &a, &uc);
        ASSERT_NE(qp, nullptr) << sdr_last_error();
        EXPECT_EQ(sdr_qp_connect(qp, blob.data()), SDR_ERROR);
        EXPECT_NE(std::string(sdr_last_error()).find("inconsistent"), std::string::npos) << sdr_last_error();
        // the untouched blob still connects the same QP
        EXPECT_EQ(sdr_qp_connect(qp, good.data()), SDR_SUCCESS) << sdr_last_error();
        sdr_qp_destroy(qp);
    }
}

}  // namespace
