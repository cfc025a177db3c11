// Real sockets repair only what they lose: sdr_write_bw --scheme across the two-namespace
// testbed. At zero loss no scheme repeats a chunk, with 8 messages in flight and with 1, over
// raw: and xdp:; at 1e-3 loss the chunks SR and sr-nack repeat are the chunks the link lost.
#include "write_bw_util.hpp"

#include <unistd.h>

#include <string>
#include <tuple>

using namespace sdr::test;

namespace {

nlohmann::json parse(const std::string& line) { return nlohmann::json::parse(line); }

class NoSpuriousRepair : public ::testing::TestWithParam<std::tuple<std::string, std::string, int>> {};

// One warm-up message: the first touches the receiver's buffer pages, a cold start no path
// estimate foresees; the measured messages are what sdr_write_bw reports.
TEST_P(NoSpuriousRepair, ZeroChunksRepeatedAtZeroLoss)
{
    if (auto why = netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    const auto& [kind, scheme, in_flight] = GetParam();
    Testbed tb("sdrnsr");
    ASSERT_TRUE(tb.ok());
    const std::string port = std::to_string(18600 + getpid() % 64);
    const WriteBwRun r = run_write_bw(tb, kind, port, "--timeout-ms 20000",
                                      "--scheme " + scheme + " -s 2M -n 12 -w 1 -q " + std::to_string(in_flight) +
                                          " --timeout-ms 20000");
    ASSERT_TRUE(r.ok());
    const auto c = parse(r.cj), s = parse(r.sj);
    EXPECT_EQ(c["messages_delivered"], 12) << r.cj;
    EXPECT_EQ(c["retransmitted_chunks"], 0) << r.cj;
    EXPECT_EQ(s["fallbacks"], 0) << r.sj;
    EXPECT_EQ(s["decoded_chunks"], 0) << "nothing was lost, nothing to rebuild: " << r.sj;
}

INSTANTIATE_TEST_SUITE_P(Schemes, NoSpuriousRepair,
                         ::testing::Combine(::testing::Values("raw", "xdp"),
                                            ::testing::Values("sr", "sr-nack", "ec-xor:32,8", "ec-mds:32,8", "ec-lt",
                                                              "auto"),
                                            ::testing::Values(8, 1)),
                         [](const auto& info) {
                             std::string s = std::get<1>(info.param);
                             for (char& ch : s)
                                 if (ch == '-' || ch == ':' || ch == ',') ch = '_';
                             return std::get<0>(info.param) + "_" + s + "_q" + std::to_string(std::get<2>(info.param));
                         });

// A chunk of one packet (--chunk 4096 = the MTU), so every frame the client's shaper drops is
// one lost chunk (or a lost repeat of one), and no warm-up: every message is counted on both sides.
class RepeatsMatchLosses : public ::testing::TestWithParam<std::string> {};

TEST_P(RepeatsMatchLosses, RepeatedOverLostAtMost1_1AtOnePerMille)
{
    if (auto why = netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    Testbed tb("sdrrml");
    ASSERT_TRUE(tb.ok());
    const std::string port = std::to_string(18680 + getpid() % 64);
    const WriteBwRun r = run_write_bw(tb, "raw", port, "--timeout-ms 20000",
                                      "--scheme " + GetParam() +
                                          " -s 4M --chunk 4096 -n 64 -w 0 -q 8 --loss 1e-3 --seed 11 --timeout-ms 20000");
    ASSERT_TRUE(r.ok());
    const auto c = parse(r.cj);
    const double repeated = c["retransmitted_chunks"].get<double>(), lost = c["counters"]["shaper.dropped"].get<double>();
    EXPECT_EQ(c["messages_delivered"], 64) << r.cj;
    ASSERT_GT(lost, 20) << "the loss dropped too few frames to judge: " << r.cj;
    EXPECT_GE(repeated, lost * 0.9) << "every lost chunk is repeated (a lost control frame excepted)";
    EXPECT_LE(repeated, lost * 1.1) << r.cj;
}

INSTANTIATE_TEST_SUITE_P(Sr, RepeatsMatchLosses, ::testing::Values("sr", "sr-nack"),
                         [](const auto& info) { return info.param == "sr" ? std::string("sr") : std::string("sr_nack"); });

}  // namespace
