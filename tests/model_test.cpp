// The analytic model (arXiv 2505.05366, appendix) against its own definitions: a Monte Carlo of the SR
// process, the SR integral summed slowly piece by piece, erasure patterns through the real codecs.
#include <sdr/reliability/codec.hpp>
#include <sdr/reliability/model.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

using namespace sdr::rel;
using namespace sdr::rel::model;

namespace {

// One packet per chunk, so the chunk drop is the packet drop; T_INJ = t_inj_ms.
Params one_packet_chunks(uint64_t n, double t_inj_ms, double rtt_ms, double p, double rto_rtts = 3)
{
    Params P;
    P.mtu = P.chunk_bytes = 4096;
    P.size_bytes = n * 4096;
    P.bw_gbps = 4096 * 8 / (t_inj_ms * 1e-3) / 1e9;
    P.rtt_ms = rtt_ms;
    P.drop = p;
    P.rto_rtts = rto_rtts;
    return P;
}

// Chunk drop probability p for the Params' packets per chunk.
Params with_chunk_drop(Params P, double p)
{
    P.drop = -std::expm1(std::log1p(-p) / packets_per_chunk(P));
    return P;
}

double rtt_s(const Params& P) { return P.rtt_ms * 1e-3; }
double rto_s(const Params& P) { return P.rto_rtts * rtt_s(P); }

// E[T_SR] by running the process the model describes: X_i = i*T + O*(Y_i - 1).
double monte_carlo_sr_s(const Params& P, int trials, uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    double T = t_inj_s(P), O = rto_s(P) + T, p = chunk_drop(P), sum = 0;
    uint64_t M = chunks(P);
    for (int t = 0; t < trials; t++) {
        double worst = 0;
        for (uint64_t i = 1; i <= M; i++) {
            uint64_t y = 1;
            while (u(rng) < p) y++;
            worst = std::max(worst, static_cast<double>(i) * T + O * static_cast<double>(y - 1));
        }
        sum += worst;
    }
    return sum / trials + rtt_s(P);
}

// E[T_SR] as the definition reads: 1 - prod_i F_i(t) integrated piece by piece between all
// breakpoints i*T + j*O, every F_i evaluated from its formula in the middle of each piece.
double reference_sr_s(const Params& P)
{
    double T = t_inj_s(P), O = rto_s(P) + T, p = chunk_drop(P);
    uint64_t M = chunks(P);
    int rounds = static_cast<int>(std::ceil(std::log(1e-19) / std::log(p))) + 2;
    std::vector<double> b{0};
    for (uint64_t i = 1; i <= M; i++)
        for (int j = 0; j < rounds; j++) b.push_back(static_cast<double>(i) * T + j * O);
    std::sort(b.begin(), b.end());
    double area = 0;
    for (size_t k = 0; k + 1 < b.size(); k++) {
        double t = (b[k] + b[k + 1]) / 2, prod = 1;
        for (uint64_t i = 1; i <= M; i++) {
            double start = static_cast<double>(i) * T;
            prod *= t < start ? 0 : 1 - std::pow(p, std::floor((t - start) / O) + 1);
        }
        area += (b[k + 1] - b[k]) * (1 - prod);
    }
    return area + rtt_s(P);
}

double seconds_of(const Params& P)
{
    auto t0 = std::chrono::steady_clock::now();
    volatile double e = e_t_sr_s(P);
    (void)e;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Probability of the erasure patterns of k + m chunks that `code` can repair, each chunk lost with p.
double decodable_by_codec(CodeKind kind, uint32_t k, uint32_t m, double p)
{
    Codec codec(kind, k, m);
    uint32_t n = k + m;
    double sum = 0;
    bool present[64];
    for (uint64_t lost = 0; lost < (1ull << n); lost++) {
        int losses = 0;
        for (uint32_t i = 0; i < n; i++) {
            present[i] = !(lost >> i & 1);
            losses += !present[i];
        }
        if (codec.decodable(present)) sum += std::pow(p, losses) * std::pow(1 - p, n - losses);
    }
    return sum;
}

}  // namespace

TEST(ModelSr, MatchesTheIntegralSummedPieceByPiece)
{
    struct Case {
        uint64_t n;
        double t_inj_ms, rtt_ms, p, rto_rtts;
    };
    // Rounds apart (n*T < RTO), overlapping (n*T > RTO, up to 9 in flight), breakpoints that
    // coincide (O a multiple of T, RTT 0 so O = T), one chunk, p up to 0.5.
    for (Case c : {Case{8, 0.0013, 25, 0.3, 3}, Case{20, 5, 5, 0.05, 3}, Case{20, 5, 5, 0.4, 1},
                   Case{17, 1, 1, 0.2, 2}, Case{12, 1, 0, 0.3, 3}, Case{1, 1, 10, 0.5, 3}, Case{30, 3, 2, 0.5, 0.5},
                   Case{25, 2, 7, 1e-3, 3}}) {
        Params P = one_packet_chunks(c.n, c.t_inj_ms, c.rtt_ms, c.p, c.rto_rtts);
        double want = reference_sr_s(P);
        EXPECT_NEAR(e_t_sr_s(P), want, 1e-11 * want)
            << "n=" << c.n << " T=" << c.t_inj_ms << "ms rtt=" << c.rtt_ms << "ms p=" << c.p << " rto=" << c.rto_rtts;
    }
}

TEST(ModelSr, MatchesMonteCarloOfTheProcess)
{
    // Rounds apart at 400 Gbit/s and 25 ms; 64 chunks with about 16 rounds in flight; one chunk.
    for (Params P : {one_packet_chunks(8, 0.00131, 25, 0.3), one_packet_chunks(64, 5, 5, 0.05),
                     one_packet_chunks(1, 1, 10, 0.3)}) {
        double want = monte_carlo_sr_s(P, 200000, 42);
        EXPECT_NEAR(e_t_sr_s(P), want, 0.005 * want) << "chunks=" << chunks(P) << " p=" << P.drop;
    }
}

// Packet memory: a chunk's packets are tracked one by one, a repeat resends the chunk and only
// its still-missing packets count; X_i as before with Y_i = rounds until every packet arrived.
std::vector<double> monte_carlo_packets(const Params& P, int trials, uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    double T = t_inj_s(P), O = rto_s(P) + T;
    uint64_t M = chunks(P);
    uint32_t N = packets_per_chunk(P);
    std::vector<double> out;
    for (int t = 0; t < trials; t++) {
        double worst = 0;
        for (uint64_t i = 1; i <= M; i++) {
            uint64_t y = 0;
            for (uint32_t k = 0; k < N; k++) {  // rounds until this packet arrived once
                uint64_t r = 1;
                while (u(rng) < P.drop) r++;
                y = std::max(y, r);
            }
            worst = std::max(worst, static_cast<double>(i) * T + O * static_cast<double>(y - 1));
        }
        out.push_back(worst + rtt_s(P));
    }
    return out;
}

TEST(ModelSr, PacketMemoryMatchesMonteCarloOfPackets)
{
    Params P;
    P.size_bytes = 64 * 65536;  // 64 chunks of 16 packets
    P.drop = 0.02;
    P.packet_memory = true;
    auto v = monte_carlo_packets(P, 40000, 3);
    double mean = 0;
    for (double x : v) mean += x / static_cast<double>(v.size());
    EXPECT_NEAR(e_t_sr_s(P), mean, 0.005 * mean);
    // Repeats lose the chunk less often than the paper's whole-chunk model says.
    Params paper = P;
    paper.packet_memory = false;
    EXPECT_LT(e_t_sr_s(P), e_t_sr_s(paper));
    // The quantile: P(T <= q99) from the samples is 0.99 give or take the sampling error.
    double q = t_sr_quantile_s(P, 0.99);
    double below = 0;
    for (double x : v) below += x <= q + 1e-12;
    EXPECT_NEAR(below / static_cast<double>(v.size()), 0.99, 0.003);
    EXPECT_DOUBLE_EQ(t_sr_quantile_s(Params{.drop = 0}, 0.999), ideal_s(Params{.drop = 0}));
}

TEST(ModelSr, OneChunkIsAGeometricSeries)
{
    Params P = one_packet_chunks(1, 2, 10, 0.25);
    double T = t_inj_s(P), O = rto_s(P) + T;
    EXPECT_NEAR(e_t_sr_s(P), T + O * 0.25 / 0.75 + rtt_s(P), 1e-12);
}

TEST(ModelSr, LosslessIsInjectionPlusRtt)
{
    Params P;
    P.drop = 0;
    double want = static_cast<double>(chunks(P)) * t_inj_s(P) + 0.025;
    EXPECT_NEAR(e_t_sr_s(P), want, 1e-12 * want);
    EXPECT_EQ(e_t_sr_s(P), ideal_s(P));
    EXPECT_EQ(e_t_ec_s(P, Code::Mds), ideal_ec_s(P));
    EXPECT_EQ(e_t_ec_s(P, Code::Xor), ideal_ec_s(P));
    EXPECT_EQ(p_fallback(P, Code::Mds), 0);
}

TEST(ModelSr, GrowsWithDropAndSize)
{
    Params P;
    double prev = ideal_s(P);
    for (double drop : {1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2}) {
        P.drop = drop;
        double e = e_t_sr_s(P);
        EXPECT_GT(e, prev) << "drop " << drop;
        prev = e;
    }
    P.drop = 1e-5;
    prev = 0;
    for (uint64_t size : {128ull << 10, 1ull << 20, 16ull << 20, 128ull << 20, 1ull << 30, 4ull << 30}) {
        P.size_bytes = size;
        double e = e_t_sr_s(P);
        EXPECT_GT(e, prev) << "size " << size;
        prev = e;
    }
}

TEST(ModelSr, FractionalChunksInterpolateAndNoneCostsOneRtt)
{
    Params P = one_packet_chunks(100, 0.01, 5, 0.2);
    EXPECT_EQ(e_t_sr_chunks_s(P, 0), rtt_s(P));
    double two = e_t_sr_chunks_s(P, 2), three = e_t_sr_chunks_s(P, 3);
    EXPECT_GT(three, two);
    EXPECT_NEAR(e_t_sr_chunks_s(P, 2.25), two + 0.25 * (three - two), 1e-15);
    EXPECT_NEAR(e_t_sr_chunks_s(P, 0.5), rtt_s(P) + 0.5 * (e_t_sr_chunks_s(P, 1) - rtt_s(P)), 1e-15);
}

TEST(ModelSr, NackVariantAndHopelessLinks)
{
    Params P;
    P.drop = 1e-4;
    Result r = evaluate(P);
    EXPECT_LT(r.e_t_sr_nack_ms, r.e_t_sr_ms);
    EXPECT_GT(r.e_t_sr_nack_ms, r.ideal_ms);
    P.drop = 0.3;  // 16 packets per chunk: p = 1 - 0.7^16 = 0.997, a hundred-odd rounds, finite
    EXPECT_TRUE(std::isfinite(e_t_sr_s(P)));
    P.chunk_bytes = 1 << 20;  // 256 packets: p rounds to 1
    EXPECT_EQ(e_t_sr_s(P), HUGE_VAL);
}

TEST(ModelSr, FastForLongLossyMessages)
{
    Params P;
    P.size_bytes = 16384ull * 65536;  // 1 GiB, M = 16384
    struct Point {
        const char* what;
        Params P;
    };
    Params huge = P;
    huge.size_bytes = 1ull << 36;  // M = 2^20, 16+ rounds in flight
    for (Point pt : {Point{"M=16384 p=0.1", with_chunk_drop(P, 0.1)}, Point{"M=16384 p=1e-2", with_chunk_drop(P, 1e-2)},
                     Point{"M=2^20 p=0.5", with_chunk_drop(huge, 0.5)}}) {
        double s = seconds_of(pt.P);
        std::printf("e_t_sr_s(%s): %.3f ms to compute, E[T_SR] = %.3f ms\n", pt.what, s * 1e3, e_t_sr_s(pt.P) * 1e3);
        EXPECT_LT(s, 0.5) << pt.what;
    }
}

TEST(ModelEc, MdsMatchesTheCodecOnEveryErasurePattern)
{
    for (auto [k, m] : {std::pair{4u, 2u}, std::pair{8u, 4u}, std::pair{10u, 3u}})
        for (double p : {0.01, 0.1, 0.3, 0.7}) {
            double want = decodable_by_codec(CodeKind::Mds, k, m, p);
            EXPECT_NEAR(p_mds(p, k, m), want, 1e-12 * want) << "k=" << k << " m=" << m << " p=" << p;
        }
}

TEST(ModelEc, XorMatchesTheCodecOnEveryErasurePattern)
{
    for (auto [k, m] : {std::pair{6u, 2u}, std::pair{8u, 4u}, std::pair{4u, 1u}})
        for (double p : {0.01, 0.1, 0.3, 0.7}) {
            double want = decodable_by_codec(CodeKind::Xor, k, m, p);
            EXPECT_NEAR(p_xor(p, k, m), want, 1e-12 * want) << "k=" << k << " m=" << m << " p=" << p;
        }
}

TEST(ModelEc, MatchesMonteCarloOfSubmessages)
{
    const uint32_t k = 32, m = 8;
    const int trials = 100000;
    for (double p : {0.05, 0.15}) {
        std::mt19937_64 rng(7);
        std::bernoulli_distribution lose(p);
        int mds_ok = 0, xor_ok = 0;
        for (int t = 0; t < trials; t++) {
            int losses = 0, group_losses[m] = {};
            for (uint32_t j = 0; j < k + m; j++) {
                if (!lose(rng)) continue;
                losses++;
                group_losses[j < k ? j % m : j - k]++;  // parity i covers data j with j mod m == i
            }
            mds_ok += losses <= static_cast<int>(m);
            xor_ok += std::all_of(group_losses, group_losses + m, [](int g) { return g <= 1; });
        }
        for (auto [got, want, what] : {std::tuple{p_mds(p, k, m), double(mds_ok) / trials, "mds"},
                                       std::tuple{p_xor(p, k, m), double(xor_ok) / trials, "xor"}}) {
            double se = std::sqrt(want * (1 - want) / trials);
            EXPECT_NEAR(got, want, 4 * se + 1e-4) << what << " p=" << p;
        }
    }
}

TEST(ModelEc, MdsDominatesXorAndLimits)
{
    for (auto [k, m] : {std::pair{32u, 8u}, std::pair{8u, 2u}, std::pair{4u, 4u}})
        for (double p : {1e-6, 1e-3, 0.05, 0.3, 0.9}) EXPECT_GE(p_mds(p, k, m), p_xor(p, k, m)) << k << "," << m << " " << p;
    EXPECT_EQ(p_mds(0, 32, 8), 1);
    EXPECT_EQ(p_xor(0, 32, 8), 1);
    EXPECT_EQ(p_mds(1, 32, 8), 0);
    EXPECT_EQ(p_xor(1, 32, 8), 0);
    // 1 - P_MDS far below double resolution still reaches P_fallback: ~C(40,9) p^9 per submessage.
    Params P;
    P.drop = 1e-9;
    double p = chunk_drop(P), per_sub = 273438880 * std::pow(p, 9);
    EXPECT_NEAR(p_fallback(P, Code::Mds), per_sub * static_cast<double>(chunks(P)) / P.k, 1e-6 * per_sub * 64);
    EXPECT_GT(p_fallback(P, Code::Mds), 0);
}

TEST(ModelEc, FallbackAndBound)
{
    Params P;
    P.drop = 1e-3;
    double L = static_cast<double>(chunks(P)) / P.k, p = chunk_drop(P);
    EXPECT_NEAR(p_fallback(P, Code::Xor), 1 - std::pow(p_xor(p, P.k, P.m), L), 1e-12);
    EXPECT_NEAR(p_fallback(P, Code::Mds), 1 - std::pow(p_mds(p, P.k, P.m), L), 1e-12);
    EXPECT_LT(p_fallback(P, Code::Mds), p_fallback(P, Code::Xor));
    // The bound is its three terms: parity-inflated injection, the fallback's wait, SR of what is left.
    double to_sr = static_cast<double>(chunks(P)) * (1 - p_xor(p, P.k, P.m));
    double want = ideal_ec_s(P) - rtt_s(P) + p_fallback(P, Code::Xor) * 1.5 * rtt_s(P) + e_t_sr_chunks_s(P, to_sr);
    EXPECT_NEAR(e_t_ec_s(P, Code::Xor), want, 1e-9 * want);
    for (double drop : {1e-7, 1e-5, 1e-3, 1e-2}) {
        P.drop = drop;
        EXPECT_GE(e_t_ec_s(P, Code::Mds), ideal_ec_s(P));
        EXPECT_GE(e_t_ec_s(P, Code::Xor), e_t_ec_s(P, Code::Mds));
    }
}

TEST(ModelEc, IdealEcCountsParityOfEverySubmessage)
{
    Params P;
    P.size_bytes = 33 * 65536;  // two submessages (the second partial): ceil(33*8/32) = 9 parity chunks
    EXPECT_NEAR(ideal_ec_s(P), 42 * t_inj_s(P) + rtt_s(P), 1e-15);
    P.header_bytes = 58;
    EXPECT_NEAR(t_inj_s(P), (65536 + 16 * 58) * 8 / 400e9, 1e-18);
}

TEST(ModelPaper, OneTwentyEightMiBAtOneInAHundredThousand)
{
    Params P;  // 128 MiB, 64 KiB chunks, 400 Gbit/s, 25 ms, drop 1e-5, RTO 3 RTT, MDS(32,8)
    Result r = evaluate(P);
    std::printf("paper point: E[T_SR] %.3f ms, E[T_SR-NACK] %.3f ms, E[T_EC MDS] >= %.3f ms, SR/EC %.2fx, "
                "ideal %.3f ms, p_chunk %.3g, fallback MDS %.3g XOR %.3g\n",
                r.e_t_sr_ms, r.e_t_sr_nack_ms, r.e_t_ec_mds_ms, r.e_t_sr_ms / r.e_t_ec_mds_ms, r.ideal_ms, r.p_chunk,
                r.p_fallback_mds, r.p_fallback_xor);
    EXPECT_EQ(r.chunks, 2048u);
    EXPECT_TRUE(r.sr_exact);
    EXPECT_GT(r.e_t_sr_ms / r.e_t_ec_mds_ms, 1.5);
    EXPECT_LT(r.e_t_ec_mds_ms, 1.01 * r.ideal_ec_ms);
}

TEST(ModelAllreduce, RoundsTimesComputePlusTransfer)
{
    EXPECT_DOUBLE_EQ(allreduce_lower_bound_s(4, 0.03, 0.01), 6 * 0.04);
    EXPECT_DOUBLE_EQ(allreduce_lower_bound_s(8, 0.03), 14 * 0.03);
    EXPECT_EQ(allreduce_lower_bound_s(1, 0.03), 0);
}

TEST(ModelValidate, RejectsEachBadFieldByName)
{
    std::string err;
    EXPECT_TRUE(validate(Params{}, &err)) << err;
    struct Bad {
        const char* field;
        void (*spoil)(Params&);
    };
    for (Bad b : {Bad{"size_bytes", [](Params& P) { P.size_bytes = 0; }},
                  Bad{"chunk_bytes", [](Params& P) { P.chunk_bytes = 1024; }},
                  Bad{"mtu", [](Params& P) { P.mtu = 1000; }}, Bad{"mtu", [](Params& P) { P.mtu = 128; }},
                  Bad{"mtu", [](Params& P) { P.mtu = 8192; }}, Bad{"drop", [](Params& P) { P.drop = 1; }},
                  Bad{"drop", [](Params& P) { P.drop = -0.1; }}, Bad{"drop", [](Params& P) { P.drop = NAN; }},
                  Bad{"bw_gbps", [](Params& P) { P.bw_gbps = 0; }},
                  Bad{"bw_gbps", [](Params& P) { P.bw_gbps = INFINITY; }},
                  Bad{"rtt_ms", [](Params& P) { P.rtt_ms = -1; }}, Bad{"rto_rtts", [](Params& P) { P.rto_rtts = 0; }},
                  Bad{"k", [](Params& P) { P.k = 0; }}, Bad{"m", [](Params& P) { P.m = 0; }},
                  Bad{"k+m", [](Params& P) { P.k = 250; }}, Bad{"beta", [](Params& P) { P.beta = -1; }},
                  Bad{"header_bytes", [](Params& P) { P.header_bytes = -1; }}}) {
        Params P;
        b.spoil(P);
        err.clear();
        EXPECT_FALSE(validate(P, &err)) << b.field;
        EXPECT_EQ(err.rfind(std::string(b.field) + ": ", 0), 0u) << err;
    }
}
