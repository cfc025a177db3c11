// Ring Allreduce over SDR on the simulator (tools/experiment): lossless completion against the
// dependent-round model, every run of a lossy sweep delivered, EC ahead of SR at 1e-3, dead
// links and bad parameters end with a message instead of a hang.
#include "allreduce.hpp"
#include "message_run.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

using namespace sdr;
using namespace sdr::exp;

namespace {

AllreduceParams params(uint32_t nodes, uint64_t bytes, const char* scheme = "sr", double drop = 0, uint64_t seed = 1)
{
    AllreduceParams p;
    p.nodes = nodes;
    p.bytes = bytes;
    p.drop = drop;
    p.seed = seed;
    std::string err;
    EXPECT_TRUE(rel::parse_scheme(scheme, &p.rel, &err)) << err;
    return p;
}

// Wire time of one message at line rate: payload plus per-packet headers, preamble, gap, FCS.
double inject_ms(const AllreduceParams& p, uint64_t bytes)
{
    double packets = static_cast<double>((bytes + p.mtu - 1) / p.mtu);
    return (static_cast<double>(bytes) + packets * MessageRun::wire_overhead_bytes()) * 8 / (p.bw_gbps * 1e6);
}

// Injection time of the largest segment; EC adds the parity of every submessage but the last
// (the segment is whole before the last parity is on the wire).
double segment_inject_ms(const AllreduceParams& p)
{
    uint64_t seg = 0;
    for (uint32_t s = 0; s < p.nodes; s++) seg = std::max(seg, segment_bytes(p, s));
    double ms = inject_ms(p, seg);
    if (rel::is_ec(p.rel.scheme)) {
        uint64_t chunks = (seg + p.chunk_bytes - 1) / p.chunk_bytes, subs = (chunks + p.rel.k - 1) / p.rel.k;
        ms += static_cast<double>(subs - 1) * inject_ms(p, uint64_t{p.rel.m} * p.chunk_bytes);
    }
    return ms;
}

// Lossless Allreduce: a round's send waits only for the previous round's receive, so each of
// the 2N-2 rounds costs a segment's injection, its one-way trip (RTT/2) and, in reduce-scatter,
// the reduction; the last segment's final ACK adds the way back.
double lossless_ms(const AllreduceParams& p)
{
    double rounds = 2.0 * p.nodes - 2;
    return rounds * (segment_inject_ms(p) + p.rtt_ms / 2) + (p.nodes - 1) * p.compute_us / 1e3 + p.rtt_ms / 2;
}

// The paper's model (arXiv 2505.05366, appendix): (2N-2)(C + mu_X) with mu_X a whole acknowledged message (injection + RTT):
// the schedule of an Allreduce whose rounds wait for their own send's ACK as well (sendrecv).
double sendrecv_ms(const AllreduceParams& p)
{
    return (2.0 * p.nodes - 2) * (p.compute_us / 1e3 + segment_inject_ms(p) + p.rtt_ms);
}

double wall_s(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void expect_lossless(const AllreduceParams& p)
{
    auto t0 = std::chrono::steady_clock::now();
    AllreduceResult r = run_allreduce(p);
    double wall = wall_s(t0);
    ASSERT_TRUE(r.ok) << r.error;
    double model = lossless_ms(p);
    std::printf("N=%u %8.2f MiB %-12s C=%4.0f us: %9.3f ms, model %9.3f ms (%.4fx); sendrecv bound %9.3f ms | "
                "%.2f s wall, %llu packets, %.2f Mpkt/s\n",
                p.nodes, p.bytes / 1048576.0, rel::to_string(p.rel.scheme), p.compute_us, r.completion_ms, model,
                r.completion_ms / model, sendrecv_ms(p), wall, (unsigned long long)r.packets, r.packets / wall / 1e6);
    EXPECT_GE(r.completion_ms, model * 0.999);
    EXPECT_LE(r.completion_ms, model * 1.01);
    ASSERT_EQ(r.round_ms.size(), 2u * p.nodes - 2);
    for (uint32_t i = 0; i < r.round_ms.size(); i++) {
        double round = segment_inject_ms(p) + p.rtt_ms / 2 + (i >= 1 && i < p.nodes ? p.compute_us / 1e3 : 0);
        EXPECT_NEAR(r.round_ms[i], round, 0.01 * round) << "round " << i;
    }
    EXPECT_EQ(r.retransmitted_chunks, 0u);
    EXPECT_EQ(r.decoded_chunks, 0u);
}

}  // namespace

TEST(Allreduce, LosslessRoundsAreInjectionPlusOneWay)
{
    for (uint32_t n : {4u, 6u})
        for (uint64_t bytes : {64ull << 20, 1ull << 20}) expect_lossless(params(n, bytes));
}

TEST(Allreduce, LosslessWithParityAndReduction)
{
    expect_lossless(params(4, 64ull << 20, "ec-mds:32,8"));
    AllreduceParams p = params(5, 8ull << 20);
    p.compute_us = 800;
    expect_lossless(p);
}

// N=4, 64 MiB, 400 Gbit/s, 25 ms: every run delivers; at 1e-3 EC (MDS 32,8) finishes sooner
// than SR on average, since SR pays an RTO (3 RTT or more) in nearly every round.
TEST(Allreduce, LossySrAndEcAllDeliverAndEcWinsAt1e3)
{
    const uint64_t seeds = 5;
    for (double drop : {1e-4, 1e-3}) {
        double mean[2] = {0, 0};
        const char* schemes[2] = {"sr", "ec-mds:32,8"};
        for (int s = 0; s < 2; s++)
            for (uint64_t seed = 1; seed <= seeds; seed++) {
                AllreduceParams p = params(4, 64ull << 20, schemes[s], drop, seed);
                auto t0 = std::chrono::steady_clock::now();
                AllreduceResult r = run_allreduce(p);
                ASSERT_TRUE(r.ok) << schemes[s] << " drop " << drop << " seed " << seed << ": " << r.error;
                std::printf("drop %g %-12s seed %llu: %9.3f ms (lossless %.3f ms), %llu retransmitted, %llu decoded, "
                            "%llu fallbacks, %.2f s wall\n",
                            drop, schemes[s], (unsigned long long)seed, r.completion_ms, lossless_ms(p),
                            (unsigned long long)r.retransmitted_chunks, (unsigned long long)r.decoded_chunks,
                            (unsigned long long)r.fallbacks, wall_s(t0));
                EXPECT_GE(r.completion_ms, lossless_ms(p) * 0.999);
                mean[s] += r.completion_ms / seeds;
            }
        std::printf("drop %g: mean sr %.3f ms, ec-mds:32,8 %.3f ms, sr/ec %.2fx\n", drop, mean[0], mean[1],
                    mean[0] / mean[1]);
        if (drop >= 1e-3) {
            EXPECT_LT(mean[1], mean[0]);
        }
    }
}

// Twice the rounds: SR pays its RTOs in more of them. Prints the wall time per run.
TEST(Allreduce, EightNodesAt1e3)
{
    double ms[2];
    const char* schemes[2] = {"sr", "ec-mds:32,8"};
    for (int s = 0; s < 2; s++) {
        AllreduceParams p = params(8, 64ull << 20, schemes[s], 1e-3);
        auto t0 = std::chrono::steady_clock::now();
        AllreduceResult r = run_allreduce(p);
        ASSERT_TRUE(r.ok) << schemes[s] << ": " << r.error;
        ms[s] = r.completion_ms;
        std::printf("N=8 drop 1e-3 %-12s %9.3f ms (lossless %.3f ms), %.2f s wall, %llu packets\n", schemes[s],
                    r.completion_ms, lossless_ms(p), wall_s(t0), (unsigned long long)r.packets);
    }
    std::printf("N=8 drop 1e-3: sr/ec %.2fx\n", ms[0] / ms[1]);
    EXPECT_LT(ms[1], ms[0]);
}

TEST(Allreduce, DeadLinkFailsWithAReason)
{
    AllreduceParams p = params(3, 1ull << 20, "sr", 1.0);
    p.rtt_ms = 1;
    p.rel.max_rounds = 2;
    p.rel.timeout_ms = 20;
    auto t0 = std::chrono::steady_clock::now();
    AllreduceResult r = run_allreduce(p);
    EXPECT_LT(wall_s(t0), 5.0);
    EXPECT_FALSE(r.ok);
    std::printf("dead link: %s\n", r.error.c_str());
    EXPECT_NE(r.error.find("round 0, sim:"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("timeout"), std::string::npos) << r.error;

    p.drop = 0;  // the same ring with working links delivers
    AllreduceResult ok = run_allreduce(p);
    EXPECT_TRUE(ok.ok) << ok.error;
}

TEST(Allreduce, BadParametersAreRefused)
{
    auto refused = [](AllreduceParams p, const char* says) {
        AllreduceResult r = run_allreduce(p);
        EXPECT_FALSE(r.ok);
        EXPECT_NE(r.error.find(says), std::string::npos) << "error: " << r.error;
        std::printf("refused: %s\n", r.error.c_str());
    };
    AllreduceParams p = params(4, 1ull << 20);
    p.nodes = 1;
    refused(p, "nodes must be 2..256");
    p.nodes = 300;
    refused(p, "nodes must be 2..256");
    p = params(4, 3 * 65536);
    refused(p, "at least one chunk of 65536 bytes per node");
    p = params(4, 0);
    refused(p, "at least one chunk");
    p = params(4, 1ull << 20);
    p.mtu = 1000;
    refused(p, "mtu must be a power of two");
    p = params(4, 1ull << 20);
    p.chunk_bytes = 2048;
    refused(p, "chunk_bytes must be a power of two in mtu");
    p = params(4, 1ull << 20);
    p.drop = 1.5;
    refused(p, "drop in [0, 1]");
    p = params(4, 1ull << 20);
    p.channels = 0;
    refused(p, "num_channels");
    p = params(4, 1ull << 20, "ec-mds:32,8");
    p.rel.k = 250;
    refused(p, "k + m");
    p = params(2, 8ull << 30);  // 4 GiB segments: beyond one SDR slot
    refused(p, "slot");
}
