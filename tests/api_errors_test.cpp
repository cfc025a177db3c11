// Bad arguments to every C API call: SDR_ERROR (or NULL) with a readable message, no crash;
// sdr_last_error() and sdr_rel_last_error() keep the last failure's message across successes.
#include "sim_util.hpp"

#include <sdr_rel.h>
#include <sdr_sim.h>
#include <sdr_stats.h>

using namespace sdr;
using namespace sdr::test;

namespace {

// The message must be this call's own ("sdr_qp_create: ..."): successes leave sdr_last_error()
// as it was, so a call that failed silently would show an earlier call's message.
void expect_own_message(const char* call)
{
    const std::string c = call, fn = c.substr(0, c.find('(')), msg = sdr_last_error();
    EXPECT_EQ(msg.rfind(fn + ": ", 0), 0u) << c << " left no message of its own, sdr_last_error() is \"" << msg << "\"";
}

}  // namespace

#define EXPECT_API_ERROR(call)                     \
    do {                                           \
        EXPECT_EQ((call), SDR_ERROR) << #call;     \
        expect_own_message(#call);                 \
    } while (0)
#define EXPECT_API_NULL(call)                      \
    do {                                           \
        EXPECT_EQ((call), nullptr) << #call;       \
        expect_own_message(#call);                 \
    } while (0)

TEST(ApiErrors, ContextAndMemory)
{
    emu::SimFabric::install(nullptr);
    sdr_dev_attr da{8, 4};
    EXPECT_API_NULL(sdr_context_create(nullptr, &da));
    EXPECT_API_NULL(sdr_context_create("sim:0", nullptr));
    EXPECT_API_NULL(sdr_context_create("mlx5_0", &da));
    EXPECT_API_NULL(sdr_context_create("sim:x", &da));
    EXPECT_API_NULL(sdr_context_create("sim:999", &da));
    EXPECT_API_NULL(sdr_context_create("xdp:veth0", &da));
    sdr_dev_attr zero{0, 4}, many{17, 4}, qps{8, 9};
    EXPECT_API_NULL(sdr_context_create("sim:0", &zero));
    EXPECT_API_NULL(sdr_context_create("sim:0", &many));
    EXPECT_API_NULL(sdr_context_create("sim:0", &qps));
    sdr_context* ctx = sdr_context_create("sim:0", &da);
    ASSERT_NE(ctx, nullptr) << sdr_last_error();
    EXPECT_API_NULL(sdr_context_create("sim:0", &da));  // already open
    EXPECT_API_ERROR(sdr_context_destroy(nullptr));

    std::vector<uint8_t> buf(4096);
    EXPECT_API_NULL(sdr_mr_reg(nullptr, buf.data(), 4096, SDR_ACCESS_REMOTE_WRITE));
    EXPECT_API_NULL(sdr_mr_reg(ctx, nullptr, 4096, SDR_ACCESS_REMOTE_WRITE));
    EXPECT_API_NULL(sdr_mr_reg(ctx, buf.data(), 0, SDR_ACCESS_REMOTE_WRITE));
    EXPECT_API_NULL(sdr_mr_reg(ctx, buf.data(), 4096, static_cast<sdr_access_flags>(7)));
    sdr_mr* mr = sdr_mr_reg(ctx, buf.data(), 4096, SDR_ACCESS_REMOTE_WRITE);
    ASSERT_NE(mr, nullptr);
    uint32_t k;
    EXPECT_API_ERROR(sdr_mr_lkey_get(nullptr, &k));
    EXPECT_API_ERROR(sdr_mr_lkey_get(mr, nullptr));
    EXPECT_API_ERROR(sdr_mr_rkey_get(nullptr, &k));
    EXPECT_API_ERROR(sdr_mr_rkey_get(mr, nullptr));
    EXPECT_API_ERROR(sdr_mr_dereg(nullptr));
    EXPECT_API_ERROR(sdr_context_destroy(ctx));  // a region is still registered
    EXPECT_EQ(sdr_mr_dereg(mr), SDR_SUCCESS);
    EXPECT_EQ(sdr_context_destroy(ctx), SDR_SUCCESS);
    EXPECT_API_ERROR(sdr_sim_advance_to(nullptr, 1));
    EXPECT_API_ERROR(sdr_sim_run_until_idle(nullptr));
}

TEST(ApiErrors, QueuePairs)
{
    emu::SimFabric::install(nullptr);
    sdr_dev_attr da{4, 1};
    sdr_context* ctx = sdr_context_create("sim:0", &da);
    ASSERT_NE(ctx, nullptr);
    sdr_qp_attr ok{16, 30, 7, SDR_MTU_4096, 1, 1, 0};
    EXPECT_API_NULL(sdr_qp_create(nullptr, &ok));
    EXPECT_API_NULL(sdr_qp_create(ctx, nullptr));
    for (sdr_qp_attr bad : {sdr_qp_attr{11, 30, 7, SDR_MTU_4096, 1, 1, 0},                // chunk < MTU
                            sdr_qp_attr{16, 30, 11, SDR_MTU_4096, 1, 1, 0},               // > 1024 messages
                            sdr_qp_attr{16, 20, 7, SDR_MTU_4096, 1, 1, 0},                // slot < chunk
                            sdr_qp_attr{16, 38, 0, SDR_MTU_4096, 1, 1, 0},                // 2^26 packets/slot
                            sdr_qp_attr{16, 30, 7, static_cast<sdr_mtu>(9), 1, 1, 0},     // no such MTU
                            sdr_qp_attr{16, 30, 7, SDR_MTU_4096, 0, 0, 0}}) {             // neither side
        sdr_qp_attr a = bad;
        EXPECT_API_NULL(sdr_qp_create(ctx, &a));
    }
    sdr_qp* q1 = sdr_qp_create(ctx, &ok);
    sdr_qp* q2 = sdr_qp_create(ctx, &ok);
    ASSERT_NE(q1, nullptr);
    ASSERT_NE(q2, nullptr);
    EXPECT_API_NULL(sdr_qp_create(ctx, &ok));  // log_max_qps = 1: two QPs at most
    size_t n = 0;
    EXPECT_API_ERROR(sdr_qp_info_size_get(nullptr, &n));
    EXPECT_API_ERROR(sdr_qp_info_size_get(q1, nullptr));
    ASSERT_EQ(sdr_qp_info_size_get(q1, &n), SDR_SUCCESS);
    std::vector<uint8_t> info(n);
    EXPECT_API_ERROR(sdr_qp_info_get(nullptr, info.data()));
    EXPECT_API_ERROR(sdr_qp_info_get(q1, nullptr));
    EXPECT_API_ERROR(sdr_qp_connect(nullptr, info.data()));
    EXPECT_API_ERROR(sdr_qp_connect(q1, nullptr));
    std::vector<uint8_t> junk(n, 0x5A);
    EXPECT_API_ERROR(sdr_qp_connect(q1, junk.data()));
    ASSERT_EQ(sdr_qp_info_get(q2, info.data()), SDR_SUCCESS);
    std::vector<uint8_t> corrupt = info;
    corrupt[8] = 99;  // MTU log
    EXPECT_API_ERROR(sdr_qp_connect(q1, corrupt.data()));
    // a peer with another chunk size
    sdr_qp_attr other = ok;
    other.bitmap_chunk_size_log_bytes = 14;
    EXPECT_EQ(sdr_qp_destroy(q2), SDR_SUCCESS);
    q2 = sdr_qp_create(ctx, &other);
    ASSERT_NE(q2, nullptr);
    ASSERT_EQ(sdr_qp_info_get(q2, info.data()), SDR_SUCCESS);
    EXPECT_API_ERROR(sdr_qp_connect(q1, info.data()));
    EXPECT_API_ERROR(sdr_qp_destroy(nullptr));
    EXPECT_EQ(sdr_qp_destroy(q1), SDR_SUCCESS);
    EXPECT_EQ(sdr_qp_destroy(q2), SDR_SUCCESS);
    EXPECT_EQ(sdr_context_destroy(ctx), SDR_SUCCESS);
}

TEST(ApiErrors, SendsAndReceives)
{
    SimWorld w(config(16, 30, 7));
    std::vector<uint8_t> buf(1 << 20), big(16 << 20);
    uint32_t k0 = w.lkey(0, buf.data(), buf.size()), k1 = w.lkey(1, buf.data(), buf.size());
    (void)k0;
    // receives
    sdr_recv_handle* rh = nullptr;
    sdr_recv_wr rw{1 << 20, k1, reinterpret_cast<uint64_t>(buf.data())};
    EXPECT_API_ERROR(sdr_recv_post(nullptr, &rw, &rh));
    EXPECT_API_ERROR(sdr_recv_post(w.qp(1), nullptr, &rh));
    EXPECT_API_ERROR(sdr_recv_post(w.qp(1), &rw, nullptr));
    sdr_recv_wr too_long{16 << 20, k1, reinterpret_cast<uint64_t>(buf.data())};
    EXPECT_API_ERROR(sdr_recv_post(w.qp(1), &too_long, &rh));  // > the 8 MiB slot
    sdr_recv_wr outside{1 << 20, k1, reinterpret_cast<uint64_t>(buf.data() + 1)};
    EXPECT_API_ERROR(sdr_recv_post(w.qp(1), &outside, &rh));
    sdr_recv_wr badkey{4096, 0xBAD, reinterpret_cast<uint64_t>(buf.data())};
    EXPECT_API_ERROR(sdr_recv_post(w.qp(1), &badkey, &rh));
    ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &rh), SDR_SUCCESS);
    uint8_t* bm;
    size_t nb;
    uint32_t imm;
    uint64_t bits[1];
    EXPECT_API_ERROR(sdr_recv_bitmap_get(nullptr, &bm, &nb));
    EXPECT_API_ERROR(sdr_recv_bitmap_get(rh, nullptr, &nb));
    EXPECT_API_ERROR(sdr_recv_bitmap_get(rh, &bm, nullptr));
    EXPECT_API_ERROR(sdr_recv_imm_get(nullptr, &imm));
    EXPECT_API_ERROR(sdr_recv_imm_get(rh, nullptr));
    EXPECT_API_ERROR(sdr_recv_bitmap_chunk_expand(nullptr, 0, bits));
    EXPECT_API_ERROR(sdr_recv_bitmap_chunk_expand(rh, 0, nullptr));
    EXPECT_API_ERROR(sdr_recv_bitmap_chunk_expand(rh, 16, bits));  // 1 MiB = 16 chunks
    EXPECT_API_ERROR(sdr_recv_complete(nullptr));
    EXPECT_EQ(sdr_recv_complete(rh), SDR_SUCCESS);
    EXPECT_API_ERROR(sdr_recv_complete(rh));  // twice
    EXPECT_API_ERROR(sdr_recv_bitmap_get(rh, &bm, &nb));

    // sends
    sdr_send_handle* sh = nullptr;
    sdr_send_wr sw{SDR_WR_WRITE, 0, 4096, k0, reinterpret_cast<uint64_t>(buf.data()), 0};
    EXPECT_API_ERROR(sdr_send_post(nullptr, &sw, &sh));
    EXPECT_API_ERROR(sdr_send_post(w.qp(0), nullptr, &sh));
    EXPECT_API_ERROR(sdr_send_post(w.qp(0), &sw, nullptr));
    for (sdr_send_wr bad : {sdr_send_wr{static_cast<sdr_wr_opcode>(5), 0, 4096, k0, reinterpret_cast<uint64_t>(buf.data()), 0},
                            sdr_send_wr{SDR_WR_WRITE, 0, 4096, 0xBAD, reinterpret_cast<uint64_t>(buf.data()), 0},
                            sdr_send_wr{SDR_WR_WRITE, 0, 8192, k0, reinterpret_cast<uint64_t>(buf.data() + buf.size() - 4096), 0},
                            sdr_send_wr{SDR_WR_WRITE, 0, 4096, k0, reinterpret_cast<uint64_t>(buf.data()), 128},  // 128 chunks = 8 MiB
                            sdr_send_wr{SDR_WR_WRITE, 0, 1 << 20, k0, reinterpret_cast<uint64_t>(buf.data()), 120}}) {
        sdr_send_wr b = bad;
        EXPECT_API_ERROR(sdr_send_post(w.qp(0), &b, &sh));
    }
    sdr_send_start_wr st{SDR_WR_WRITE, 0};
    EXPECT_API_ERROR(sdr_streaming_send_start(nullptr, &st, &sh));
    EXPECT_API_ERROR(sdr_streaming_send_start(w.qp(0), nullptr, &sh));
    EXPECT_API_ERROR(sdr_streaming_send_start(w.qp(0), &st, nullptr));
    sdr_send_continue_wr cw{4096, reinterpret_cast<uint64_t>(buf.data()), k0, 0};
    EXPECT_API_ERROR(sdr_streaming_send_continue(nullptr, &cw));
    EXPECT_API_ERROR(sdr_streaming_send_end(nullptr));
    int done;
    EXPECT_API_ERROR(sdr_send_poll(nullptr, &done, nullptr));
    ASSERT_EQ(sdr_send_post(w.qp(0), &sw, &sh), SDR_SUCCESS);
    EXPECT_API_ERROR(sdr_send_poll(sh, nullptr, nullptr));
    EXPECT_API_ERROR(sdr_streaming_send_continue(sh, &cw));  // not a streaming send
    wait_send(sh);
    EXPECT_API_ERROR(sdr_send_poll(sh, &done, nullptr));  // already completed
    ASSERT_EQ(sdr_streaming_send_start(w.qp(0), &st, &sh), SDR_SUCCESS);
    EXPECT_API_ERROR(sdr_streaming_send_continue(sh, nullptr));
    sdr_send_continue_wr far{4096, reinterpret_cast<uint64_t>(buf.data()), k0, 1000};
    EXPECT_API_ERROR(sdr_streaming_send_continue(sh, &far));
    ASSERT_EQ(sdr_streaming_send_end(sh), SDR_SUCCESS);
    EXPECT_API_ERROR(sdr_streaming_send_end(sh));
    EXPECT_API_ERROR(sdr_streaming_send_continue(sh, &cw));
    wait_send(sh);
}

TEST(ApiErrors, SendOnUnconnectedOrReceiveOnlyQp)
{
    emu::SimFabric::install(nullptr);
    sdr_dev_attr da{2, 2};
    sdr_context* ctx = sdr_context_create("sim:0", &da);
    ASSERT_NE(ctx, nullptr);
    sdr_qp_attr send_only{16, 30, 7, SDR_MTU_4096, 1, 0, 0}, recv_only{16, 30, 7, SDR_MTU_4096, 0, 1, 0};
    sdr_qp* s = sdr_qp_create(ctx, &send_only);
    sdr_qp* r = sdr_qp_create(ctx, &recv_only);
    ASSERT_TRUE(s && r);
    std::vector<uint8_t> buf(4096);
    sdr_mr* mr = sdr_mr_reg(ctx, buf.data(), 4096, SDR_ACCESS_REMOTE_WRITE);
    uint32_t k;
    sdr_mr_lkey_get(mr, &k);
    sdr_send_wr sw{SDR_WR_WRITE, 0, 4096, k, reinterpret_cast<uint64_t>(buf.data()), 0};
    sdr_send_handle* sh;
    EXPECT_API_ERROR(sdr_send_post(s, &sw, &sh));  // not connected
    EXPECT_API_ERROR(sdr_send_post(r, &sw, &sh));  // receive-only
    sdr_recv_wr rw{4096, k, reinterpret_cast<uint64_t>(buf.data())};
    sdr_recv_handle* rh;
    EXPECT_API_ERROR(sdr_recv_post(s, &rw, &rh));  // send-only
    size_t n;
    sdr_qp_info_size_get(r, &n);
    std::vector<uint8_t> info(n);
    sdr_qp_info_get(s, info.data());
    EXPECT_API_ERROR(sdr_qp_connect(s, info.data()));  // peer cannot receive
    sdr_mr_dereg(mr);
    sdr_qp_destroy(s);
    sdr_qp_destroy(r);
    sdr_context_destroy(ctx);
}

// Like errno: a failing call sets the message, later calls that succeed leave it (among them the
// two that once cleared it, sdr_context_create and sdr_context_stats_get), the next failure
// replaces it. sdr_rel_last_error() the same for sdr_rel.h.
TEST(ApiErrors, ASuccessLeavesTheLastErrorAsItWas)
{
    emu::SimFabric::install(nullptr);
    sdr_dev_attr da{2, 1};
    EXPECT_EQ(sdr_context_create("nonexistent", &da), nullptr);
    const std::string failed = sdr_last_error();
    EXPECT_EQ(failed.rfind("sdr_context_create: unknown device 'nonexistent'", 0), 0u) << failed;

    sdr_context* ctx = sdr_context_create("sim:0", &da);
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(sdr_last_error(), failed);
    size_t n = 0;
    ASSERT_EQ(sdr_context_stats_get(ctx, nullptr, 0, &n), SDR_SUCCESS);
    EXPECT_EQ(sdr_last_error(), failed);
    sdr_qp_attr qa{16, 24, 2, SDR_MTU_4096, 1, 1, 0};
    sdr_qp* qp = sdr_qp_create(ctx, &qa);
    ASSERT_NE(qp, nullptr);
    ASSERT_EQ(sdr_qp_info_size_get(qp, &n), SDR_SUCCESS);
    std::vector<uint8_t> buf(4096);
    sdr_mr* mr = sdr_mr_reg(ctx, buf.data(), buf.size(), SDR_ACCESS_REMOTE_WRITE);
    ASSERT_NE(mr, nullptr);
    uint32_t key = 0;
    ASSERT_EQ(sdr_mr_lkey_get(mr, &key), SDR_SUCCESS);
    EXPECT_EQ(sdr_sim_run_until_idle(ctx), SDR_SUCCESS);
    EXPECT_EQ(sdr_last_error(), failed);

    EXPECT_EQ(sdr_qp_destroy(nullptr), SDR_ERROR);
    const std::string replaced = sdr_last_error();
    EXPECT_EQ(replaced, "sdr_qp_destroy: qp is NULL");
    EXPECT_EQ(sdr_mr_dereg(mr), SDR_SUCCESS);
    EXPECT_EQ(sdr_qp_destroy(qp), SDR_SUCCESS);
    EXPECT_EQ(sdr_context_destroy(ctx), SDR_SUCCESS);
    EXPECT_EQ(sdr_last_error(), replaced);

    sdr_rel_attr ra;
    sdr_rel_attr_default(&ra);
    EXPECT_EQ(sdr_rel_attr_parse_scheme(&ra, "no-such-scheme"), SDR_ERROR);
    const std::string rel_failed = sdr_rel_last_error();
    EXPECT_EQ(rel_failed.rfind("sdr_rel_attr_parse_scheme: ", 0), 0u) << rel_failed;
    EXPECT_EQ(sdr_rel_attr_parse_scheme(&ra, "ec-mds:8,2"), SDR_SUCCESS);
    EXPECT_EQ(sdr_rel_last_error(), rel_failed);
    EXPECT_EQ(sdr_rel_endpoint_destroy(nullptr), SDR_ERROR);
    EXPECT_EQ(std::string(sdr_rel_last_error()), "sdr_rel_endpoint_destroy: endpoint is NULL");
}
