// Findings of the fuzz targets (tests/fuzz), each reproduced through the code's own API in the
// ordinary build. The crashing inputs themselves are in tests/fuzz/corpus/<target>/, so every
// fuzz run replays them too.
#include <sdr/reliability/engine.hpp>

#include <gtest/gtest.h>

#include <string>

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
    rx.post(t0, 0, rx.choose_code(0, cfg.rtt_ms));
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

}  // namespace
