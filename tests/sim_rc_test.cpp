// RC transport QPs under SDR (the published SDK's default, SDR_USE_UC_QP unset): the NIC sends
// lost packets again, so a plain sdr_send delivers every chunk over a link that loses,
// reorders and duplicates, where UC leaves holes; the transport is chosen by attribute or
// SDR_USE_UC_QP, must match at connect, and the reliability layer insists on UC.
#include "sim_util.hpp"

#include <sdr/reliability/endpoint.hpp>
#include <sdr_ext.h>

#include <cstdlib>

using namespace sdr;
using namespace sdr::test;

namespace {

struct Outcome {
    uint64_t chunks_set = 0, chunks = 0, corrupt = 0;
    uint64_t retransmits = 0, link_drops = 0, psn_gaps = 0, duplicates = 0, cqe_errors = 0;
};

uint64_t retransmits(const emu::Nic& n)
{
    uint64_t r = 0;
    n.for_each_qp([&](uint32_t, const emu::QpCounters& q) { r += q.tx_retransmits; });
    return r;
}

// Three 4 MiB messages (plus a partial packet) over a link with this loss, 5 % reordering and
// 1 % duplication; every chunk's bit and bytes checked.
Outcome transfer(uint32_t transport, double loss, uint64_t seed)
{
    WorldConfig c = config(16, 30, 7);
    c.ext.transport = transport;
    c.fabric.seed = seed;
    c.fabric.link.impairment.loss = loss;
    c.fabric.link.impairment.reorder = 0.05;
    c.fabric.link.impairment.reorder_max_ps = 20'000'000;
    c.fabric.link.impairment.duplicate = 0.01;
    SimWorld w(c);
    const size_t size = (4u << 20) + 3 * 1000;
    const uint32_t nmsgs = 3;
    std::vector<std::vector<uint8_t>> src(nmsgs, std::vector<uint8_t>(size)), dst(nmsgs, std::vector<uint8_t>(size, 0));
    std::vector<sdr_recv_handle*> rh(nmsgs);
    std::vector<sdr_send_handle*> sh(nmsgs);
    for (uint32_t i = 0; i < nmsgs; i++) {
        fill(src[i], 7 + i);
        sdr_recv_wr rw{static_cast<uint32_t>(size), w.lkey(1, dst[i].data(), size), reinterpret_cast<uint64_t>(dst[i].data())};
        EXPECT_EQ(sdr_recv_post(w.qp(1), &rw, &rh[i]), SDR_SUCCESS);
    }
    for (uint32_t i = 0; i < nmsgs; i++) {
        sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(size), w.lkey(0, src[i].data(), size),
                       reinterpret_cast<uint64_t>(src[i].data()), 0};
        EXPECT_EQ(sdr_send_post(w.qp(0), &sw, &sh[i]), SDR_SUCCESS) << sdr_last_error();
    }
    for (auto* h : sh) wait_send(h);
    w.run_until_idle();
    Outcome r;
    const uint64_t chunk = 1u << 16;
    for (uint32_t i = 0; i < nmsgs; i++) {
        uint8_t* bm;
        size_t nb;
        EXPECT_EQ(sdr_recv_bitmap_get(rh[i], &bm, &nb), SDR_SUCCESS);
        for (uint64_t ch = 0; ch * chunk < size; ch++, r.chunks++) {
            if (!bit(bm, ch)) continue;
            r.chunks_set++;
            const uint64_t off = ch * chunk, len = std::min<uint64_t>(chunk, size - off);
            if (std::memcmp(src[i].data() + off, dst[i].data() + off, len)) r.corrupt++;
        }
    }
    r.retransmits = retransmits(w.nic(0));
    r.link_drops = w.fabric().link(0, 1)->dropped();
    r.psn_gaps = w.nic(1).counters().rx_drop(emu::RxDrop::PsnSequence);
    r.duplicates = w.nic(1).counters().rx_drop(emu::RxDrop::Duplicate);
    r.cqe_errors = w.nic(0).fw_counter(FW_CNT_TX_CQE_ERROR);
    return r;
}

}  // namespace

TEST(SdrRc, LossReorderingAndDuplicationStillDeliverEveryChunk)
{
    const Outcome rc = transfer(SDR_TRANSPORT_RC, 0.01, 31);
    EXPECT_GT(rc.link_drops, 0u);
    EXPECT_EQ(rc.chunks_set, rc.chunks) << "RC sends every lost packet again";
    EXPECT_EQ(rc.corrupt, 0u);
    EXPECT_GE(rc.retransmits, rc.link_drops / 2) << "go-back-N resends at least what the link lost of the data";
    EXPECT_GT(rc.psn_gaps, 0u) << "the responder drops what follows a gap";
    EXPECT_EQ(rc.cqe_errors, 0u);
    // The same link under UC: chunks stay missing, nothing is sent again.
    const Outcome uc = transfer(SDR_TRANSPORT_UC, 0.01, 31);
    EXPECT_GT(uc.link_drops, 0u);
    EXPECT_LT(uc.chunks_set, uc.chunks);
    EXPECT_EQ(uc.corrupt, 0u);
    EXPECT_EQ(uc.retransmits, 0u);
}

TEST(SdrRc, ACleanLinkSendsNothingTwice)
{
    const Outcome r = transfer(SDR_TRANSPORT_RC, 0, 5);
    EXPECT_EQ(r.chunks_set, r.chunks);
    EXPECT_EQ(r.corrupt, 0u);
    // Reordering makes gaps (and go-back-N then resends), so only the loss-free, in-order case
    // sends nothing twice.
    WorldConfig c = config(16, 30, 7);
    c.ext.transport = SDR_TRANSPORT_RC;
    SimWorld w(c);
    std::vector<uint8_t> src(1 << 20), dst(1 << 20);
    fill(src, 3);
    sdr_recv_wr rw{1u << 20, w.lkey(1, dst.data(), dst.size()), reinterpret_cast<uint64_t>(dst.data())};
    sdr_recv_handle* rh;
    ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS);
    sdr_send_wr sw{SDR_WR_WRITE, 0, 1u << 20, w.lkey(0, src.data(), src.size()), reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh;
    ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS);
    wait_send(sh);
    w.run_until_idle();
    EXPECT_EQ(src, dst);
    EXPECT_EQ(retransmits(w.nic(0)), 0u);
    EXPECT_EQ(w.nic(1).counters().rx_drops_total(), 0u);
    EXPECT_GT(w.nic(1).counters().tx_frames, 0u) << "the receiver acknowledged";
    EXPECT_LT(w.nic(1).counters().tx_frames, 256u / 2) << "ACKs are coalesced (256 packets)";
}

// A link that loses everything: after the timeout and kSdrRcRetries retries the QP fails and
// every WQE completes in error, so the send completes rather than hanging.
// Retries exhausted: the send completes with SDR_ERROR and SDR_SEND_STATUS_FAILED, its handle
// released, and the QP is in the error state (a later send is refused, saying why).
TEST(SdrRc, RetriesExhaustedFailTheSendAndTheQp)
{
    WorldConfig c = config(16, 30, 7);
    c.ext.transport = SDR_TRANSPORT_RC;
    c.fabric.link.impairment.loss = 1.0;
    SimWorld w(c);
    std::vector<uint8_t> src(64 << 10), dst(64 << 10);
    sdr_recv_wr rw{64u << 10, w.lkey(1, dst.data(), dst.size()), reinterpret_cast<uint64_t>(dst.data())};
    sdr_recv_handle* rh;
    ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS);
    sdr_send_wr sw{SDR_WR_WRITE, 0, 64u << 10, w.lkey(0, src.data(), src.size()), reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh;
    ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS);
    int done = 0, rc;
    sdr_send_status st{};
    while ((rc = sdr_send_poll(sh, &done, &st)) == SDR_RETRY) {
    }
    EXPECT_EQ(rc, SDR_ERROR);
    EXPECT_EQ(done, 1);
    EXPECT_EQ(st.flags, SDR_SEND_STATUS_FAILED);
    EXPECT_NE(std::string(sdr_last_error()).find("not delivered"), std::string::npos) << sdr_last_error();
    EXPECT_EQ(sdr_send_poll(sh, &done, &st), SDR_ERROR) << "the handle is released";
    EXPECT_GT(w.nic(0).fw_counter(FW_CNT_TX_CQE_ERROR), 0u);
    EXPECT_EQ(retransmits(w.nic(0)), uint64_t{16} * emu::Nic::kSdrRcRetries) << "16 packets, each sent 1 + retries times";
    EXPECT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_ERROR);
    EXPECT_NE(std::string(sdr_last_error()).find("error state"), std::string::npos) << sdr_last_error();
}

TEST(SdrRc, TheTransportComesFromTheAttributeOrSdrUseUcQpAndMustMatch)
{
    WorldConfig c = config(16, 24, 2);
    SimWorld w(c);  // its own QPs are UC (the simulator's worlds carry the schemes)
    sdr_qp_attr a = c.qp;
    sdr_qp_attr_ext got;
    unsetenv("SDR_USE_UC_QP");
    sdr_qp* dflt = sdr_qp_create(w.ctx(0), &a);
    ASSERT_NE(dflt, nullptr) << sdr_last_error();
    ASSERT_EQ(sdr_qp_attr_ext_get(dflt, &got), SDR_SUCCESS);
    EXPECT_EQ(got.transport, uint32_t{SDR_TRANSPORT_RC}) << "RC by default, as the published SDK";
    setenv("SDR_USE_UC_QP", "1", 1);
    sdr_qp* uc = sdr_qp_create(w.ctx(1), &a);
    ASSERT_NE(uc, nullptr) << sdr_last_error();
    ASSERT_EQ(sdr_qp_attr_ext_get(uc, &got), SDR_SUCCESS);
    EXPECT_EQ(got.transport, uint32_t{SDR_TRANSPORT_UC});
    setenv("SDR_USE_UC_QP", "yes", 1);
    EXPECT_EQ(sdr_qp_create(w.ctx(1), &a), nullptr);
    EXPECT_EQ(std::string(sdr_last_error()),
              "sdr_qp_create: SDR_USE_UC_QP='yes': expected 1 (UC transport QPs) or 0 (RC, the default)");
    unsetenv("SDR_USE_UC_QP");
    sdr_qp_attr_ext bad;
    sdr_qp_attr_ext_init(&bad);
    bad.transport = 3;
    EXPECT_EQ(sdr_qp_create_ext(w.ctx(1), &a, &bad), nullptr);
    EXPECT_NE(std::string(sdr_last_error()).find("transport must be"), std::string::npos) << sdr_last_error();

    size_t n;
    ASSERT_EQ(sdr_qp_info_size_get(uc, &n), SDR_SUCCESS);
    std::vector<uint8_t> info(n);
    ASSERT_EQ(sdr_qp_info_get(uc, info.data()), SDR_SUCCESS);
    EXPECT_EQ(sdr_qp_connect(dflt, info.data()), SDR_ERROR);
    EXPECT_EQ(std::string(sdr_last_error()),
              "sdr_qp_connect: transport differs (local RC, remote UC): create both QPs with the same SDR_USE_UC_QP "
              "or sdr_qp_attr_ext.transport");

    // The reliability layer recovers packets itself: it takes UC QPs only.
    std::string err;
    rel::Config cfg;
    EXPECT_EQ(rel::Endpoint::create(w.ctx(0), dflt, a, cfg, &err), nullptr);
    EXPECT_NE(err.find("needs a QP with UC transport QPs"), std::string::npos) << err;
    EXPECT_NE(rel::Endpoint::create(w.ctx(0), w.qp(0), c.qp, cfg, &err), nullptr) << err;
    EXPECT_EQ(sdr_qp_destroy(dflt), SDR_SUCCESS);
    EXPECT_EQ(sdr_qp_destroy(uc), SDR_SUCCESS);
}

// The emulated NIC's RC responder places a packet at most once, so a complete receive's pair
// re-arms at once (a program reposting into the slot it just completed, as the published SDK's
// benchmark does with one generation, is not held to one message per lifetime); a receive
// completed with chunks missing may still get them, resent, for as long as the sender's NIC
// retries (8 sends x the RC timeout), and its pair waits L and that much more.
TEST(SdrRc, ACompleteReceiveReArmsAtOnceAnIncompleteOneWaitsOutTheResendHorizon)
{
    WorldConfig c = config(16, 20, 0);  // one slot of 1 MiB
    c.ext = sdr_qp_attr_ext{1, SDR_LIFETIME_FROM_PATH, SDR_TRANSPORT_RC, 0};  // one generation
    SimWorld w(c);
    sdr_qp_attr_ext x;
    ASSERT_EQ(sdr_qp_attr_ext_get(w.qp(1), &x), SDR_SUCCESS);
    const uint64_t L = x.max_packet_lifetime_ns;
    // rc_timeout = 2 x (both ends' bounds), at least 1 ms; 8 sends.
    const uint64_t horizon = 8 * std::max<uint64_t>(2 * (L + L), 1'000'000);
    std::vector<uint8_t> src(64 << 10), dst(1 << 20);
    fill(src, 9);
    auto post = [&](sdr_recv_handle** h) {
        sdr_recv_wr rw{1u << 20, w.lkey(1, dst.data(), dst.size()), reinterpret_cast<uint64_t>(dst.data())};
        return sdr_recv_post(w.qp(1), &rw, h);
    };
    // A complete receive (the whole 64 KiB posted as 64 KiB): at once.
    sdr_recv_handle* h;
    sdr_recv_wr small{64u << 10, w.lkey(1, dst.data(), dst.size()), reinterpret_cast<uint64_t>(dst.data())};
    ASSERT_EQ(sdr_recv_post(w.qp(1), &small, &h), SDR_SUCCESS);
    sdr_send_wr sw{SDR_WR_WRITE, 0, 64u << 10, w.lkey(0, src.data(), src.size()), reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh;
    ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS);
    wait_send(sh);
    w.run_until_idle();
    uint8_t* bm;
    size_t nb;
    ASSERT_EQ(sdr_recv_bitmap_get(h, &bm, &nb), SDR_SUCCESS);
    ASSERT_EQ(bm[0], 1);
    ASSERT_EQ(sdr_recv_complete(h), SDR_SUCCESS);
    ASSERT_EQ(post(&h), SDR_SUCCESS) << sdr_last_error();
    // An incomplete one (nothing arrived of its 16 chunks): L + the resend horizon.
    const uint64_t t0 = w.now_ns();
    ASSERT_EQ(sdr_recv_complete(h), SDR_SUCCESS);
    w.advance_to(t0 + L + 1);
    EXPECT_EQ(post(&h), SDR_RETRY);
    w.advance_to(t0 + L + horizon - 1000);
    EXPECT_EQ(post(&h), SDR_RETRY);
    w.advance_to(t0 + L + horizon + 1);
    EXPECT_EQ(post(&h), SDR_SUCCESS) << sdr_last_error();
}
