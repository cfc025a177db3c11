// DCQCN in the NIC model on the simulator (Nic::set_dcqcn), with the link's ECN mark in place of
// a congested switch (ImpairmentParams::ce_mark): ECT(0) data, the NP's CNPs and their limit,
// the RP's rate and the pacing, and transfers that still deliver every byte.
#include "sim_util.hpp"

#include <sdr/emu/dcqcn.hpp>

using namespace sdr;
using namespace sdr::test;

namespace {

// side 0 sends `size` bytes to side 1; true if they all arrived byte-exact.
bool deliver(SimWorld& w, size_t size, uint64_t* elapsed_ns = nullptr)
{
    std::vector<uint8_t> src(size), dst(size, 0);
    fill(src, 11);
    const uint32_t sk = w.lkey(0, src.data(), size), rk = w.lkey(1, dst.data(), size);
    sdr_recv_wr rw{static_cast<uint32_t>(size), rk, reinterpret_cast<uint64_t>(dst.data())};
    sdr_recv_handle* rh = nullptr;
    EXPECT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS) << sdr_last_error();
    sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(size), sk, reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh = nullptr;
    const uint64_t t0 = w.fabric().sim().now() / 1000;
    EXPECT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS) << sdr_last_error();
    wait_send(sh);
    w.run_until_idle();
    if (elapsed_ns) *elapsed_ns = w.fabric().sim().now() / 1000 - t0;
    EXPECT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
    return dst == src;
}

WorldConfig marked(double ce_mark, uint32_t channels = 1)
{
    WorldConfig c = config(16, 31, 7, channels);  // slots of 16 MiB
    c.fabric.directed[{0, 1}].ce_mark = ce_mark;  // the data direction only
    return c;
}

void dcqcn_on(SimWorld& w)
{
    emu::DcqcnParams p = emu::DcqcnParams::for_line_rate(100);  // config()'s links
    p.enabled = true;
    w.nic(0).set_dcqcn(p);
    w.nic(1).set_dcqcn(p);
}

}  // namespace

// Every data packet is ECT(0) and so marked; the receiver answers at most one CNP per QP per
// 50 us, and the sender takes every one.
TEST(DcqcnSim, NotificationPointSendsAtMostOneCnpPerQpPer50us)
{
    SimWorld w(marked(1.0));
    dcqcn_on(w);
    uint64_t elapsed = 0;
    ASSERT_TRUE(deliver(w, size_t{16} << 20, &elapsed));
    const auto& rx = w.nic(1).counters();
    const auto& tx = w.nic(0).counters();
    EXPECT_EQ(rx.rx_ce, 4096u) << "every data packet marked";
    EXPECT_EQ(w.fabric().link(0, 1)->ce_marked(), 4096u);
    EXPECT_GE(rx.cnp_sent, 1u);
    EXPECT_LE(rx.cnp_sent, elapsed / 50'000 + 1) << elapsed << " ns";
    EXPECT_EQ(tx.cnp_received, rx.cnp_sent);
    EXPECT_EQ(tx.rx_drops_total(), 0u);
    EXPECT_LT(w.nic(0).qp_dcqcn_rate_gbps(0), 100.0) << "the sender slowed down";
}

// One marked packet, one CNP: the rate halves (alpha starts at 1). With no more marks it climbs
// back as the timers predict (dcqcn_test): line - line / 2^(k+1) after k increase periods, so
// within 0.1 % of line rate after 9 periods (2.7 ms), not after 7.
TEST(DcqcnSim, RateHalvesThenRecoversWhenMarkingStops)
{
    for (uint64_t periods : {7u, 9u}) {
        SimWorld w(marked(1.0));
        dcqcn_on(w);
        ASSERT_TRUE(deliver(w, 4096));
        ASSERT_EQ(w.nic(0).counters().cnp_received, 1u);
        EXPECT_DOUBLE_EQ(w.nic(0).qp_dcqcn_rate_gbps(0), 50.0);
        const emu::DcqcnParams& p = w.nic(0).dcqcn();
        w.fabric().sim().run_until(w.fabric().sim().now() + periods * p.increase_timer_ns * 1000);
        const double rate = w.nic(0).qp_dcqcn_rate_gbps(0);
        if (periods == 7) EXPECT_DOUBLE_EQ(rate, 100 - 100.0 / 256) << "the CNP came less than a period before";
        else EXPECT_GE(rate, 0.999 * 100);
    }
}

// Paced: a marked transfer takes longer than an unmarked one, and delivers every byte; with 1 %
// marking and several channels too.
TEST(DcqcnSim, PacedTransfersDeliverEveryByte)
{
    uint64_t plain = 0, slowed = 0;
    {
        SimWorld w(marked(0.0));
        dcqcn_on(w);
        ASSERT_TRUE(deliver(w, size_t{16} << 20, &plain));
        EXPECT_EQ(w.nic(1).counters().cnp_sent, 0u);
    }
    {
        SimWorld w(marked(1.0));
        dcqcn_on(w);
        ASSERT_TRUE(deliver(w, size_t{16} << 20, &slowed));
    }
    EXPECT_GT(slowed, plain * 3 / 2) << plain << " vs " << slowed << " ns";
    SimWorld w(marked(0.01, 4));
    dcqcn_on(w);
    for (int i = 0; i < 4; i++) ASSERT_TRUE(deliver(w, size_t{16} << 20)) << i;
    EXPECT_GT(w.nic(1).counters().cnp_sent, 0u);
    EXPECT_EQ(w.nic(0).counters().cnp_received, w.nic(1).counters().cnp_sent);
    EXPECT_EQ(w.nic(1).counters().rx_drops_total(), 0u);
}
