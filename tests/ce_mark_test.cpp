// The link's ECN mark (ImpairmentParams::ce_mark, SDR_SIM_CE_MARK / SDR_RT_CE_MARK): a verdict
// to mark CE drawn per packet, the variable parsed like the other knobs, and only ECT packets
// change (wire::mark_ce; wire_test checks the frame itself).
#include "sim_util.hpp"

#include <sdr/emu/env_parse.hpp>
#include <sdr/emu/impairment.hpp>

#include <cstdlib>

using namespace sdr;
using namespace sdr::test;

TEST(CeMark, EveryPacketAtOneAQuarterAtAQuarterNothingElseHappens)
{
    emu::ImpairmentParams p;
    p.ce_mark = 1;
    emu::Impairment all(p);
    EXPECT_FALSE(all.none());
    for (int i = 0; i < 1000; i++) {
        emu::ImpairmentVerdict v = all.decide();
        ASSERT_TRUE(v.ce);
        ASSERT_FALSE(v.drop || v.duplicate || v.extra_delay_ps);
    }
    p.ce_mark = 0.25;
    emu::Impairment quarter(p);
    uint64_t marked = 0;
    for (int i = 0; i < 100000; i++) marked += quarter.decide().ce;
    EXPECT_NEAR(marked / 100000.0, 0.25, 0.01);  // 7 standard deviations
}

// Off, it draws nothing: a lossy run's stream (and so its losses) is the one it had before.
TEST(CeMark, OffLeavesTheRandomStreamAsItWas)
{
    emu::ImpairmentParams p;
    p.loss = 0.1;
    p.duplicate = 0.05;
    emu::Impairment before(p), with_knob([&] {
        emu::ImpairmentParams q = p;
        q.ce_mark = 0;
        return q;
    }());
    for (int i = 0; i < 10000; i++) {
        emu::ImpairmentVerdict a = before.decide(), b = with_knob.decide();
        ASSERT_EQ(a.drop, b.drop);
        ASSERT_EQ(a.duplicate, b.duplicate);
        ASSERT_FALSE(b.ce);
    }
}

TEST(CeMark, EnvironmentVariableIsParsedAndCheckedLikeTheOthers)
{
    emu::ImpairmentParams p;
    std::string err;
    setenv("SDR_TEST_CE_MARK", "0.01", 1);
    ASSERT_TRUE(emu::impairment_from_env("SDR_TEST_", &p, &err)) << err;
    EXPECT_EQ(p.ce_mark, 0.01);
    setenv("SDR_TEST_CE_MARK", "2", 1);
    EXPECT_FALSE(emu::impairment_from_env("SDR_TEST_", &p, &err));
    EXPECT_NE(err.find("SDR_TEST_CE_MARK"), std::string::npos) << err;
    unsetenv("SDR_TEST_CE_MARK");
}

// Frames that are not ECN-capable (every frame of a NIC without DCQCN) are never marked: all
// bytes arrive and the link counts no mark.
TEST(CeMark, NotEctFramesPassUnmarked)
{
    WorldConfig c = config(16, 30, 7, 2);
    c.fabric.link.impairment.ce_mark = 1;
    SimWorld w(c);
    const size_t size = size_t{1} << 20;
    std::vector<uint8_t> src(size), dst(size, 0);
    fill(src, 3);
    const uint32_t sk = w.lkey(0, src.data(), size), rk = w.lkey(1, dst.data(), size);
    sdr_recv_wr rw{static_cast<uint32_t>(size), rk, reinterpret_cast<uint64_t>(dst.data())};
    sdr_recv_handle* rh = nullptr;
    ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS);
    sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(size), sk, reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh = nullptr;
    ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS);
    wait_send(sh);
    w.run_until_idle();
    EXPECT_EQ(dst, src);
    EXPECT_EQ(w.fabric().link(0, 1)->ce_marked(), 0u);
    EXPECT_GE(w.fabric().link(0, 1)->delivered(), 256u) << "every data packet";
    EXPECT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
}
