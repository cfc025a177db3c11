// The late-packet case, shared by the simulator test (late_packet_test) and the real-time one
// (rt_late_packet_test): 4 slots of 4 KiB; one message goes on the wire, its receive is
// completed before the packet arrived (the application gave up on it); then receives are
// posted and completed until slot 0 has been reused `reuses` times, the last one stays live.
// Checks: every early sdr_recv_post of a quiet (slot, generation) pair answers SDR_RETRY and
// the post succeeds once the quiet time has passed; when the packet finally arrives it touches
// no buffer (bytes as posted, bitmap bit 0 clear, counted as a NULL-key arrival). With the
// quiet time turned off (lifetime 0) the same case shows the hole instead: when the live
// receive has the late packet's (slot, generation), its bytes are overwritten and nothing
// notices (bitmap bit 0 stays clear).
#pragma once

#include "sim_util.hpp"

#include <sdr/host/inspect.hpp>
#include <sdr_ext.h>
#include <sdr_sim.h>

#include <mutex>
#include <string>
#include <vector>

namespace sdr::test {

inline constexpr uint32_t kLateSlots = 4, kLateBytes = 4096;

// 4 slots of 4 KiB, 4 KiB chunks and MTU: every message is one chunk and one packet.
inline sdr_qp_attr late_qp_attr() { return sdr_qp_attr{12, 14, 2, SDR_MTU_4096, 1, 1, 0}; }

enum class Clock { Virtual, Real };

struct ReceiverCounts {
    uint64_t cqes = 0, null_key = 0, placed = 0, stale = 0;
};

inline ReceiverCounts receiver_counts(sdr_context* ctx)
{
    std::unique_lock<std::mutex> g;
    if (emu::RtNic* rt = host::rt_of(ctx)) g = std::unique_lock<std::mutex>(rt->lock());
    const emu::Nic* nic = host::nic_of(ctx);
    const emu::PortCounters& c = nic->counters();
    return {c.rx_cqes, c.rx_null_key, c.rx_placed_bytes, nic->fw_counter(FW_CNT_RX_STALE)};
}

// Runs the case on a freshly connected pair: qp[0] sends, qp[1] receives.
inline void late_packet_case(sdr_context* const ctx[2], sdr_qp* const qp[2], uint32_t reuses, Clock clock,
                             bool expect_overwrite)
{
    sdr_qp_attr_ext x;
    ASSERT_EQ(sdr_qp_attr_ext_get(qp[1], &x), SDR_SUCCESS);
    const uint32_t G = x.num_generations;
    const uint64_t L = x.max_packet_lifetime_ns;
    const uint32_t last = kLateSlots * reuses;  // the live receive: slot 0 again
    auto now = [&] { return sdr_now_ns(ctx[1]); };

    std::vector<uint8_t> src(kLateBytes), dst(size_t{last + 1} * kLateBytes);
    fill(src, 7);
    std::vector<std::vector<uint8_t>> posted(last + 1, std::vector<uint8_t>(kLateBytes));
    for (uint32_t m = 0; m <= last; m++) {
        fill(posted[m], 1000 + m);
        std::memcpy(dst.data() + size_t{m} * kLateBytes, posted[m].data(), kLateBytes);
    }
    sdr_mr* smr = sdr_mr_reg(ctx[0], src.data(), src.size(), SDR_ACCESS_REMOTE_WRITE);
    sdr_mr* dmr = sdr_mr_reg(ctx[1], dst.data(), dst.size(), SDR_ACCESS_REMOTE_WRITE);
    ASSERT_TRUE(smr && dmr) << sdr_last_error();
    uint32_t sk, dk;
    sdr_mr_lkey_get(smr, &sk);
    sdr_mr_lkey_get(dmr, &dk);
    auto wr = [&](uint32_t m) {
        return sdr_recv_wr{kLateBytes, dk, reinterpret_cast<uint64_t>(dst.data() + size_t{m} * kLateBytes)};
    };
    const ReceiverCounts before = receiver_counts(ctx[1]);

    // Message 0 goes on the wire; the application gives up on it before its packet arrives.
    std::vector<uint64_t> done_lo(last + 1), done_hi(last + 1);  // bounds on each completion's clock
    auto complete = [&](uint32_t m, sdr_recv_handle* h) {
        done_lo[m] = now();
        ASSERT_EQ(sdr_recv_complete(h), SDR_SUCCESS) << sdr_last_error();
        done_hi[m] = now();
    };
    sdr_recv_handle* h = nullptr;
    sdr_recv_wr w0 = wr(0);
    ASSERT_EQ(sdr_recv_post(qp[1], &w0, &h), SDR_SUCCESS) << sdr_last_error();
    sdr_send_wr sw{SDR_WR_WRITE, 0, kLateBytes, sk, reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh = nullptr;
    ASSERT_EQ(sdr_send_post(qp[0], &sw, &sh), SDR_SUCCESS) << sdr_last_error();
    wait_send(sh);  // the packet left the sending NIC
    complete(0, h);
    ASSERT_EQ(receiver_counts(ctx[1]).cqes, before.cqes) << "the packet arrived before its receive was completed";

    // Receives 1 .. last; every one but the last is completed at once.
    for (uint32_t m = 1; m <= last; m++) {
        SCOPED_TRACE("message " + std::to_string(m));
        const bool repeat = L && m >= kLateSlots * G;  // its pair was last used by m - S·G
        const uint64_t quiet_lo = repeat ? done_lo[m - kLateSlots * G] + L : 0;
        const uint64_t quiet_hi = repeat ? done_hi[m - kLateSlots * G] + L : 0;
        uint32_t retries = 0;
        sdr_recv_wr w = wr(m);
        for (;;) {
            uint64_t t0 = now();
            int rc = sdr_recv_post(qp[1], &w, &h);
            uint64_t t1 = now();
            if (rc == SDR_SUCCESS) {
                EXPECT_GE(t1, quiet_lo) << "re-armed before the quiet time had passed";
                break;
            }
            ASSERT_EQ(rc, SDR_RETRY) << sdr_last_error();
            ASSERT_TRUE(repeat) << "only a pair used before can be quiet: " << sdr_last_error();
            EXPECT_LT(t0, quiet_hi) << "still quiet after the quiet time";
            EXPECT_NE(std::string(sdr_last_error()).find("is quiet for another"), std::string::npos) << sdr_last_error();
            retries++;
            if (clock == Clock::Virtual) {
                // Exactly: still quiet one nanosecond before the end, free at the end.
                ASSERT_EQ(sdr_sim_advance_to(ctx[1], quiet_hi - 1), SDR_SUCCESS);
                EXPECT_EQ(sdr_recv_post(qp[1], &w, &h), SDR_RETRY);
                ASSERT_EQ(sdr_sim_advance_to(ctx[1], quiet_hi), SDR_SUCCESS);
            } else {
                sdr_sim_wait(ctx[1], t1 + 200'000);
            }
        }
        // The first repeated pair is posted right after receive 0 was completed (on the
        // simulator's clock, in the same nanosecond): it must have been refused.
        if (repeat && m == kLateSlots * G && clock == Clock::Virtual) {
            EXPECT_GT(retries, 0u) << "the early post was not refused";
        }
        if (m < last) complete(m, h);
    }

    // Let the late packet arrive.
    if (clock == Clock::Virtual) {
        sdr_sim_run_until_idle(ctx[1]);
    } else {
        const uint64_t give_up = now() + 10'000'000'000ull;
        while (receiver_counts(ctx[1]).cqes == before.cqes && now() < give_up) sdr_sim_wait(ctx[1], now() + 1'000'000);
    }
    const ReceiverCounts after = receiver_counts(ctx[1]);
    ASSERT_EQ(after.cqes - before.cqes, 1u) << "the late packet never arrived";
    EXPECT_EQ(after.stale - before.stale, 1u) << "the firmware's tag check drops its CQE";

    uint8_t* bm = nullptr;
    size_t nb = 0;
    ASSERT_EQ(sdr_recv_bitmap_get(h, &bm, &nb), SDR_SUCCESS);
    EXPECT_FALSE(bit(bm, 0)) << "the live receive's chunk bit";
    const uint8_t* live = dst.data() + size_t{last} * kLateBytes;
    if (expect_overwrite) {
        EXPECT_EQ(after.placed - before.placed, kLateBytes);
        EXPECT_EQ(std::memcmp(live, src.data(), kLateBytes), 0) << "the hole: the late packet is in the live buffer";
    } else {
        EXPECT_EQ(after.null_key - before.null_key, 1u) << "the late packet met a NULL key";
        EXPECT_EQ(after.placed - before.placed, 0u);
        EXPECT_EQ(std::memcmp(live, posted[last].data(), kLateBytes), 0) << "the live buffer was written";
    }
    for (uint32_t m = 0; m < last; m++) {
        EXPECT_EQ(std::memcmp(dst.data() + size_t{m} * kLateBytes, posted[m].data(), kLateBytes), 0)
            << "the buffer of completed message " << m << " was written";
    }
    EXPECT_EQ(sdr_recv_complete(h), SDR_SUCCESS);
    sdr_mr_dereg(smr);
    sdr_mr_dereg(dmr);
}

}  // namespace sdr::test
