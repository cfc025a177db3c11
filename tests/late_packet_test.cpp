// Late packets on the simulator: the maximum packet lifetime (a TIME_WAIT per slot and
// generation) keeps a packet of a completed receive out of every later receive, for any number
// of generations G; G and the lifetime come through SDR_QP_NUM_GENERATIONS and sdr_ext.h, and
// bad values are refused.
#include "late_packet.hpp"

#include <cstdlib>

using namespace sdr;
using namespace sdr::test;

namespace {

// One-way delay 1 ms, and every packet held back by up to another 0.5 ms: the default
// lifetime is 1 ms + 0.5 ms + the 10 us margin.
WorldConfig late_world(uint32_t generations, uint64_t lifetime_ns = SDR_LIFETIME_FROM_PATH)
{
    WorldConfig c;
    c.channels = 2;
    c.fabric.link.rtt_ms = 2;
    c.fabric.link.impairment.reorder = 1.0;
    c.fabric.link.impairment.reorder_max_ps = 500'000'000;
    c.qp = late_qp_attr();
    c.ext = sdr_qp_attr_ext{generations, lifetime_ns, SDR_TRANSPORT_UC, 0};
    return c;
}

constexpr uint64_t kDefaultLifetimeNs = 1'000'000 + 500'000 + 10'000;

// Sets an environment variable for a scope.
class Env {
public:
    Env(const char* k, const char* v) : k_(k) { setenv(k, v, 1); }
    ~Env() { unsetenv(k_); }

private:
    const char* k_;
};

class LatePacket : public ::testing::TestWithParam<uint32_t> {};

}  // namespace

TEST_P(LatePacket, NeverTouchesALiveReceive)
{
    const uint32_t G = GetParam();
    for (uint32_t reuses = 1; reuses <= 2 * G + 1; reuses++) {
        SCOPED_TRACE("slot 0 reused " + std::to_string(reuses) + " times, G = " + std::to_string(G));
        SimWorld w(late_world(G));
        sdr_qp_attr_ext x;
        ASSERT_EQ(sdr_qp_attr_ext_get(w.qp(1), &x), SDR_SUCCESS);
        ASSERT_EQ(x.num_generations, G);
        ASSERT_EQ(x.max_packet_lifetime_ns, kDefaultLifetimeNs);
        sdr_context* ctx[2] = {w.ctx(0), w.ctx(1)};
        sdr_qp* qp[2] = {w.qp(0), w.qp(1)};
        late_packet_case(ctx, qp, reuses, Clock::Virtual, false);
        if (HasFatalFailure()) return;
    }
}

// The same case with the quiet time turned off: the test sees the hole it guards against.
TEST_P(LatePacket, WithoutAQuietTimeTheLiveReceiveIsOverwritten)
{
    const uint32_t G = GetParam();
    for (uint32_t reuses = 1; reuses <= 2 * G + 1; reuses++) {
        SCOPED_TRACE("slot 0 reused " + std::to_string(reuses) + " times, G = " + std::to_string(G));
        SimWorld w(late_world(G, 0));
        sdr_context* ctx[2] = {w.ctx(0), w.ctx(1)};
        sdr_qp* qp[2] = {w.qp(0), w.qp(1)};
        // Only a live receive of the late packet's own generation is reachable through its root key.
        late_packet_case(ctx, qp, reuses, Clock::Virtual, reuses % G == 0);
        if (HasFatalFailure()) return;
    }
}

INSTANTIATE_TEST_SUITE_P(Generations, LatePacket, ::testing::Values(1u, 2u, 4u),
                         [](const auto& i) { return "G" + std::to_string(i.param); });

TEST(QpExt, GenerationsComeFromTheEnvironmentOrTheExtension)
{
    SimWorld w(late_world(0));  // 0: SDR_QP_NUM_GENERATIONS (unset here), else 2
    sdr_qp_attr_ext x;
    ASSERT_EQ(sdr_qp_attr_ext_get(w.qp(0), &x), SDR_SUCCESS);
    EXPECT_EQ(x.num_generations, 2u);
    EXPECT_EQ(w.nic(1).firmware()->qps[0].rx->num_generations, 2u);
    sdr_qp_attr a = late_qp_attr();
    {
        Env e("SDR_QP_NUM_GENERATIONS", "5");
        sdr_qp* q = sdr_qp_create(w.ctx(1), &a);
        ASSERT_NE(q, nullptr) << sdr_last_error();
        ASSERT_EQ(sdr_qp_attr_ext_get(q, &x), SDR_SUCCESS);
        EXPECT_EQ(x.num_generations, 5u);
        EXPECT_EQ(w.nic(1).firmware()->qps[1].rx->num_generations, 5u);  // the firmware's copy
        EXPECT_EQ(w.nic(1).firmware()->qps[1].tx->num_generations, 5u);
        EXPECT_EQ(sdr_qp_destroy(q), SDR_SUCCESS);
        // The extension wins over the environment; a lifetime given is the lifetime used.
        sdr_qp_attr_ext e8{8, 123'456, SDR_TRANSPORT_UC, 0};
        q = sdr_qp_create_ext(w.ctx(1), &a, &e8);
        ASSERT_NE(q, nullptr) << sdr_last_error();
        ASSERT_EQ(sdr_qp_attr_ext_get(q, &x), SDR_SUCCESS);
        EXPECT_EQ(x.num_generations, 8u);
        EXPECT_EQ(x.max_packet_lifetime_ns, 123'456u);
        EXPECT_EQ(sdr_qp_destroy(q), SDR_SUCCESS);
    }
    sdr_qp_attr_ext init;
    sdr_qp_attr_ext_init(&init);
    EXPECT_EQ(init.num_generations, 0u);
    EXPECT_EQ(init.max_packet_lifetime_ns, SDR_LIFETIME_FROM_PATH);
}

TEST(QpExt, BadValuesAreRefused)
{
    SimWorld w(late_world(0));
    sdr_qp_attr a = late_qp_attr();
    for (const char* v : {"0", "9", "-1", "two", "", "2x", "+3", "99999999999999999999"}) {
        SCOPED_TRACE(std::string("SDR_QP_NUM_GENERATIONS='") + v + "'");
        Env e("SDR_QP_NUM_GENERATIONS", v);
        EXPECT_EQ(sdr_qp_create(w.ctx(1), &a), nullptr);
        EXPECT_EQ(std::string(sdr_last_error()),
                  std::string("sdr_qp_create: SDR_QP_NUM_GENERATIONS='") + v +
                      "': expected a number of generations in 1..8 (the transport-QP tag has 3 generation bits)");
    }
    sdr_qp_attr_ext g9{9, SDR_LIFETIME_FROM_PATH, SDR_TRANSPORT_UC, 0};
    EXPECT_EQ(sdr_qp_create_ext(w.ctx(1), &a, &g9), nullptr);
    EXPECT_NE(std::string(sdr_last_error()).find("num_generations must be 0 (SDR_QP_NUM_GENERATIONS, else 2) or 1..8"),
              std::string::npos)
        << sdr_last_error();
    sdr_qp_attr_ext too_long{2, SDR_MAX_LIFETIME_NS + 1, SDR_TRANSPORT_UC, 0};
    EXPECT_EQ(sdr_qp_create_ext(w.ctx(1), &a, &too_long), nullptr);
    EXPECT_NE(std::string(sdr_last_error()).find("max_packet_lifetime_ns must be at most 60000000000"), std::string::npos)
        << sdr_last_error();
    sdr_qp_attr_ext x;
    EXPECT_EQ(sdr_qp_attr_ext_get(nullptr, &x), SDR_ERROR);
    EXPECT_EQ(sdr_qp_attr_ext_get(w.qp(0), nullptr), SDR_ERROR);
}

TEST(QpExt, BothSidesMustAgreeOnG)
{
    WorldConfig c = late_world(2);
    SimWorld w(c);
    sdr_qp_attr a = late_qp_attr();
    sdr_qp_attr_ext g4{4, SDR_LIFETIME_FROM_PATH, SDR_TRANSPORT_UC, 0};
    sdr_qp* q = sdr_qp_create_ext(w.ctx(0), &a, &g4);
    ASSERT_NE(q, nullptr) << sdr_last_error();
    size_t n = 0;
    sdr_qp_info_size_get(w.qp(1), &n);
    std::vector<uint8_t> info(n);
    sdr_qp_info_get(w.qp(1), info.data());
    EXPECT_EQ(sdr_qp_connect(q, info.data()), SDR_ERROR);
    EXPECT_EQ(std::string(sdr_last_error()),
              "sdr_qp_connect: number of generations differs (local G = 4, remote G = 2): create both QPs with the same "
              "SDR_QP_NUM_GENERATIONS or num_generations");
    EXPECT_EQ(sdr_qp_destroy(q), SDR_SUCCESS);
}

// The default is the path's bound: the larger reorder delay of the two directions counts, and
// a peer whose frames take longer (its bound travels in the QP-info blob) raises it at connect.
TEST(QpExt, DefaultLifetimeIsThePathsBound)
{
    WorldConfig c = late_world(2);
    emu::ImpairmentParams slow = c.fabric.link.impairment;
    slow.reorder_max_ps = 3'000'000'000;  // 3 ms on the direction from NIC 1 to NIC 0
    c.fabric.directed[{1, 0}] = slow;
    SimWorld w(c);
    sdr_qp_attr_ext x;
    ASSERT_EQ(sdr_qp_attr_ext_get(w.qp(1), &x), SDR_SUCCESS);
    EXPECT_EQ(x.max_packet_lifetime_ns, 1'000'000u + 3'000'000u + 10'000u);

    // The blob ends with the sender's bound (little-endian, 8 bytes).
    sdr_qp_attr a = late_qp_attr();
    sdr_qp_attr_ext uc{0, SDR_LIFETIME_FROM_PATH, SDR_TRANSPORT_UC, 0};  // the world's QPs are UC
    sdr_qp* from_path = sdr_qp_create_ext(w.ctx(1), &a, &uc);
    sdr_qp_attr_ext fixed{2, 50'000, SDR_TRANSPORT_UC, 0};
    sdr_qp* explicit_l = sdr_qp_create_ext(w.ctx(1), &a, &fixed);
    ASSERT_TRUE(from_path && explicit_l) << sdr_last_error();
    size_t n = 0;
    sdr_qp_info_size_get(w.qp(0), &n);
    std::vector<uint8_t> info(n);
    sdr_qp_info_get(w.qp(0), info.data());
    const uint64_t peer_bound = 40'000'000;
    for (int i = 0; i < 8; i++) info[n - 8 + i] = static_cast<uint8_t>(peer_bound >> (8 * i));
    ASSERT_EQ(sdr_qp_connect(from_path, info.data()), SDR_SUCCESS) << sdr_last_error();
    ASSERT_EQ(sdr_qp_connect(explicit_l, info.data()), SDR_SUCCESS) << sdr_last_error();
    ASSERT_EQ(sdr_qp_attr_ext_get(from_path, &x), SDR_SUCCESS);
    EXPECT_EQ(x.max_packet_lifetime_ns, peer_bound);
    ASSERT_EQ(sdr_qp_attr_ext_get(explicit_l, &x), SDR_SUCCESS);
    EXPECT_EQ(x.max_packet_lifetime_ns, 50'000u);

    // A bound beyond a minute is no bound a peer can mean: the blob is refused.
    sdr_qp* q = sdr_qp_create_ext(w.ctx(1), &a, &uc);
    ASSERT_NE(q, nullptr) << sdr_last_error();
    for (int i = 0; i < 8; i++) info[n - 8 + i] = 0xFF;
    EXPECT_EQ(sdr_qp_connect(q, info.data()), SDR_ERROR);
    EXPECT_NE(std::string(sdr_last_error()).find("inconsistent"), std::string::npos) << sdr_last_error();
    for (sdr_qp* p : {from_path, explicit_l, q}) EXPECT_EQ(sdr_qp_destroy(p), SDR_SUCCESS);
}

// The quiet time refuses exactly the pair it guards: with G = 2 and 4 slots, message 8 (slot 0,
// generation 0 again) waits for the lifetime after receive 0 was completed; messages 4..7 (the
// other generation) do not.
TEST(QpExt, OnlyTheRepeatedPairWaits)
{
    SimWorld w(late_world(2));
    std::vector<uint8_t> buf(kLateBytes);
    uint32_t k = w.lkey(1, buf.data(), buf.size());
    sdr_recv_wr rw{kLateBytes, k, reinterpret_cast<uint64_t>(buf.data())};
    sdr_recv_handle* h;
    const uint64_t t0 = sdr_now_ns(w.ctx(1));
    for (uint32_t m = 0; m < 8; m++) {
        ASSERT_EQ(sdr_recv_post(w.qp(1), &rw, &h), SDR_SUCCESS) << m << ": " << sdr_last_error();
        ASSERT_EQ(sdr_recv_complete(h), SDR_SUCCESS);
    }
    EXPECT_EQ(sdr_recv_post(w.qp(1), &rw, &h), SDR_RETRY);
    EXPECT_EQ(std::string(sdr_last_error()),
              "sdr_recv_post: slot 0, generation 0 is quiet for another 1510000 ns (until " + std::to_string(t0 + kDefaultLifetimeNs) +
                  " ns): its previous receive was completed less than the maximum packet lifetime of 1510000 ns ago, "
                  "and a packet of it may still arrive");
    ASSERT_EQ(sdr_sim_advance_to(w.ctx(1), t0 + kDefaultLifetimeNs), SDR_SUCCESS);
    EXPECT_EQ(sdr_recv_post(w.qp(1), &rw, &h), SDR_SUCCESS) << sdr_last_error();
    EXPECT_EQ(sdr_recv_complete(h), SDR_SUCCESS);
}
