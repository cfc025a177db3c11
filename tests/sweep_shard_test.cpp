// sdr_sweep across hosts: a grid run whole and as 3 shards (each on its own job count), merged,
// gives the same CSV rows in the same order (wall_s aside), the same headline summary and the same
// figure data; the results do not depend on --jobs; the shard assignment covers every point once
// and spreads the cost; a merge refuses shards of different sweeps, a missing or doubled shard and
// a shard whose CSV lost or gained rows, naming what is wrong. SDR_SHARD_KEEP=1 keeps the runs'
// directories (under the test temp dir) to look at.
#include "child_util.hpp"
#include "shard.hpp"
#include "sweep_grid.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// The sweep smoke test's grid: 5 sizes x 2 drops x 5 schemes and 2 node counts x 2 drops x 2
// schemes, 14 points, under a second in all.
const std::string kGrid =
    "--sizes 128K:2M --drops 1e-3:1e-2 --samples 8 --min-samples 4 --nodes 4:5 --ar-bytes 4M --ar-samples 2 --no-progress";

bool have_gnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

// sdr_sweep with `args`; stdout alone unless with_stderr.
std::string sweep(const std::string& args, int* status, bool with_stderr = false)
{
    std::string cmd = std::string(SDR_SWEEP) + " " + args;
    sdr::test::Child c(with_stderr ? cmd : "(" + cmd + " 2>/dev/null)");
    return c.finish(status);
}

std::vector<std::string> lines_of(const std::string& text)
{
    std::vector<std::string> v;
    std::stringstream ss(text);
    for (std::string l; std::getline(ss, l);) v.push_back(l);
    return v;
}

std::string slurp(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// A CSV's lines with the wall_s field taken out of each (the one column that may differ).
std::vector<std::string> without_wall(const fs::path& csv)
{
    auto lines = lines_of(slurp(csv));
    if (lines.empty()) return lines;
    std::vector<std::string> header;
    std::stringstream hs(lines[0]);
    for (std::string f; std::getline(hs, f, ',');) header.push_back(f);
    size_t wall = std::find(header.begin(), header.end(), "wall_s") - header.begin();
    EXPECT_LT(wall, header.size()) << csv;
    for (auto& l : lines) {
        std::vector<std::string> f;
        std::stringstream ls(l);
        for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
        if (!l.empty() && l.back() == ',') f.emplace_back();
        EXPECT_EQ(f.size(), header.size()) << csv << ": " << l;
        if (wall < f.size()) f.erase(f.begin() + static_cast<long>(wall));
        std::string joined;
        for (size_t i = 0; i < f.size(); i++) joined += (i ? "," : "") + f[i];
        l = joined;
    }
    return lines;
}

// A message row's key: size, drop, scheme ("2097152,0.01,auto,").
std::string key_of(const std::string& row)
{
    size_t at = 0;
    for (int i = 0; i < 3; i++) at = row.find(',', at) + 1;
    return row.substr(0, at);
}

// The headline summary in a run's stdout: everything but the timing line, paths and figures.
std::vector<std::string> summary_of(const std::string& out)
{
    std::vector<std::string> v;
    for (const auto& l : lines_of(out))
        if (l.rfind("sdr_sweep:", 0) != 0 && l.rfind("figure:", 0) != 0 && l.find(".csv") == std::string::npos) v.push_back(l);
    return v;
}

class SweepShard : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        dir_ = new fs::path(fs::path(::testing::TempDir()) / ("sdr_sweep_shard_" + std::to_string(getpid())));
        fs::remove_all(*dir_);
        fs::create_directories(*dir_);
        plots_ = have_gnuplot();
        const std::string plots = plots_ ? "" : " --no-plots";
        whole_out_ = new std::string(sweep(kGrid + " --jobs 2 --out " + path("whole") + plots, &whole_status_));
        for (int i = 0; i < 3; i++) {
            int st = 0;
            shard_out_[i] = new std::string(
                sweep(kGrid + " --shard " + std::to_string(i) + "/3 --jobs " + std::to_string(1 + i % 2) + " --out " +
                          path("shard" + std::to_string(i)),
                      &st));
            shard_status_[i] = st;
        }
        merged_out_ = new std::string(
            sweep("--merge " + path("shard0") + " " + path("shard1") + " " + path("shard2") + " --out " + path("merged") + plots,
                  &merged_status_));
    }
    static void TearDownTestSuite()
    {
        if (!std::getenv("SDR_SHARD_KEEP")) fs::remove_all(*dir_);
        delete dir_;
        delete whole_out_;
        delete merged_out_;
        for (auto* s : shard_out_) delete s;
    }
    static std::string path(const std::string& sub) { return (*dir_ / sub).string(); }

    static fs::path* dir_;
    static bool plots_;
    static std::string *whole_out_, *merged_out_, *shard_out_[3];
    static int whole_status_, merged_status_, shard_status_[3];
};

fs::path* SweepShard::dir_;
bool SweepShard::plots_;
std::string *SweepShard::whole_out_, *SweepShard::merged_out_, *SweepShard::shard_out_[3];
int SweepShard::whole_status_, SweepShard::merged_status_, SweepShard::shard_status_[3];

TEST_F(SweepShard, ThreeShardsMergedEqualTheWholeRun)
{
    ASSERT_EQ(whole_status_, 0) << *whole_out_;
    for (int i = 0; i < 3; i++) ASSERT_EQ(shard_status_[i], 0) << *shard_out_[i];
    ASSERT_EQ(merged_status_, 0) << *merged_out_;
    for (const char* csv : {"messages.csv", "allreduce.csv"}) {
        auto whole = without_wall(path("whole") + "/" + csv), merged = without_wall(path("merged") + "/" + csv);
        EXPECT_GT(whole.size(), 1u) << csv;
        EXPECT_EQ(whole, merged) << csv;
    }
    // 5 sizes x 2 drops x 5 schemes message rows, 2 node counts x 2 drops x 2 schemes Allreduce rows.
    EXPECT_EQ(lines_of(slurp(path("merged") + "/messages.csv")).size(), 1u + 50);
    EXPECT_EQ(lines_of(slurp(path("merged") + "/allreduce.csv")).size(), 1u + 8);
    auto summary = summary_of(*whole_out_);
    EXPECT_GE(summary.size(), 10u) << *whole_out_;
    EXPECT_EQ(summary, summary_of(*merged_out_));
    EXPECT_NE(merged_out_->find("sdr_sweep: merged 3 shards: 416 samples"), std::string::npos) << *merged_out_;
    if (!plots_) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox): figures not compared";
    int figures = 0;
    for (const auto& e : fs::directory_iterator(path("whole")))
        if (e.path().extension() == ".dat") {
            figures++;
            EXPECT_EQ(slurp(e.path()), slurp(fs::path(path("merged")) / e.path().filename())) << e.path().filename();
            EXPECT_TRUE(fs::exists(fs::path(path("merged")) / e.path().filename().replace_extension(".svg")));
        }
    EXPECT_EQ(figures, 6);
}

TEST_F(SweepShard, ShardsSplitTheRowsAndDrawNothing)
{
    for (int i = 0; i < 3; i++) ASSERT_EQ(shard_status_[i], 0) << *shard_out_[i];
    size_t message_rows = 0, allreduce_rows = 0;
    for (int i = 0; i < 3; i++) {
        const std::string d = path("shard" + std::to_string(i));
        sdr::exp::ShardManifest m;
        std::string err;
        ASSERT_TRUE(sdr::exp::read_manifest(d, &m, &err)) << err;
        EXPECT_EQ(m.id.index, static_cast<uint32_t>(i));
        EXPECT_EQ(m.id.count, 3u);
        EXPECT_FALSE(m.tasks.empty());
        message_rows += lines_of(slurp(d + "/messages.csv")).size() - 1;
        allreduce_rows += lines_of(slurp(d + "/allreduce.csv")).size() - 1;
        // A shard's job is its rows: no headline summary, no figures.
        EXPECT_EQ(shard_out_[i]->find("SR / EC-MDS"), std::string::npos) << *shard_out_[i];
        for (const auto& e : fs::directory_iterator(d)) EXPECT_NE(e.path().extension(), ".svg") << e.path();
    }
    EXPECT_EQ(message_rows, 50u);
    EXPECT_EQ(allreduce_rows, 8u);
}

TEST_F(SweepShard, ResultsDoNotDependOnJobs)
{
    ASSERT_EQ(whole_status_, 0) << *whole_out_;
    int st = 0;
    std::string out = sweep(kGrid + " --jobs 1 --no-plots --out " + path("jobs1"), &st);
    ASSERT_EQ(st, 0) << out;
    for (const char* csv : {"messages.csv", "allreduce.csv"})
        EXPECT_EQ(without_wall(path("whole") + "/" + csv), without_wall(path("jobs1") + "/" + csv)) << csv;
}

TEST_F(SweepShard, MergeRefusesMismatchedOrIncompleteSets)
{
    for (int i = 0; i < 3; i++) ASSERT_EQ(shard_status_[i], 0) << *shard_out_[i];
    int st = 0;
    const std::string s0 = path("shard0"), s1 = path("shard1"), s2 = path("shard2"), out = " --out " + path("refused");
    // Shard 2 of another seed.
    std::string o = sweep(kGrid + " --seed 2 --shard 2/3 --out " + path("seed2"), &st);
    ASSERT_EQ(st, 0) << o;
    o = sweep("--merge " + s0 + " " + s1 + " " + path("seed2") + out, &st, true);
    EXPECT_EQ(st, 1);
    EXPECT_NE(o.find("the shards are of different sweeps: --seed is 1 in " + s0 + " but 2 in " + path("seed2")), std::string::npos) << o;
    // A shard of a 4-way split among 3-way ones.
    o = sweep(kGrid + " --shard 1/4 --out " + path("of4"), &st);
    ASSERT_EQ(st, 0) << o;
    o = sweep("--merge " + s0 + " " + path("of4") + " " + s2 + out, &st, true);
    EXPECT_EQ(st, 1);
    EXPECT_NE(o.find("split the grid differently: " + s0 + " is shard 0/3, " + path("of4") + " is shard 1/4"), std::string::npos) << o;
    // Missing and doubled shards.
    o = sweep("--merge " + s0 + " " + s2 + out, &st, true);
    EXPECT_EQ(st, 1);
    EXPECT_NE(o.find("incomplete set of shards: missing 1/3"), std::string::npos) << o;
    o = sweep("--merge " + s0 + " " + s1 + " " + s1 + " " + s2 + out, &st, true);
    EXPECT_EQ(st, 1);
    EXPECT_NE(o.find("shard 1/3 given twice"), std::string::npos) << o;
    // A directory that holds no finished shard.
    o = sweep("--merge " + s0 + " " + s1 + " " + path("whole") + out, &st, true);
    EXPECT_EQ(st, 1);
    EXPECT_NE(o.find(path("whole") + "/shard.txt: cannot read"), std::string::npos) << o;
    // A shard whose messages.csv lost its last row.
    fs::copy(s1, path("cut"), fs::copy_options::recursive);
    auto rows = lines_of(slurp(path("cut") + "/messages.csv"));
    ASSERT_GT(rows.size(), 1u);
    std::string cut = rows.back();
    rows.pop_back();
    {
        std::ofstream f(path("cut") + "/messages.csv");
        for (const auto& r : rows) f << r << "\n";
    }
    o = sweep("--merge " + s0 + " " + path("cut") + " " + s2 + out, &st, true);
    EXPECT_EQ(st, 1);
    EXPECT_NE(o.find(path("cut") + "/messages.csv: ends after"), std::string::npos) << o;
    EXPECT_NE(o.find("without the row of " + key_of(cut)), std::string::npos) << o;
    // Grid options go with the shards, not with the merge; nothing was written.
    o = sweep("--merge " + s0 + " " + s1 + " " + s2 + " --seed 2" + out, &st, true);
    EXPECT_EQ(st, 2);
    EXPECT_NE(o.find("--seed cannot go with it"), std::string::npos) << o;
    EXPECT_FALSE(fs::exists(path("refused")));
}

TEST(ShardAssignment, EveryPointOnceDeterministicAndBalanced)
{
    sdr::exp::SweepOptions o;  // the default paper sweep: 70 message and 25 Allreduce points
    sdr::exp::SweepGrid g;
    std::string err;
    ASSERT_TRUE(sdr::exp::make_grid(o, &g, &err)) << err;
    ASSERT_EQ(g.tasks(), 95u);
    std::vector<uint64_t> cost(g.tasks());
    for (size_t t = 0; t < g.tasks(); t++) cost[t] = g.cost(t);
    const uint64_t total = std::accumulate(cost.begin(), cost.end(), uint64_t{0});
    const uint64_t largest = *std::max_element(cost.begin(), cost.end());
    for (uint32_t n : {1u, 2u, 3u, 7u, 16u, 95u, 200u}) {
        auto shard = sdr::exp::assign_shards(cost, n);
        EXPECT_EQ(shard, sdr::exp::assign_shards(cost, n));
        std::vector<uint64_t> load(n, 0);
        for (size_t t = 0; t < g.tasks(); t++) {
            ASSERT_LT(shard[t], n);
            load[shard[t]] += cost[t];
        }
        // Greedy by cost, largest first: no shard above the mean by more than one point.
        EXPECT_LE(*std::max_element(load.begin(), load.end()), total / n + largest) << n << " shards";
    }
    // At 3 shards the default sweep's estimated cost splits within 1 % of even.
    auto shard = sdr::exp::assign_shards(cost, 3);
    std::vector<uint64_t> load(3, 0);
    for (size_t t = 0; t < g.tasks(); t++) load[shard[t]] += cost[t];
    EXPECT_LE(*std::max_element(load.begin(), load.end()), total / 3 * 101 / 100);
    // Ties go to the lower task and the lower shard: equal costs deal round-robin.
    EXPECT_EQ(sdr::exp::assign_shards({5, 5, 5, 5, 5}, 2), (std::vector<uint32_t>{0, 1, 0, 1, 0}));
}

}  // namespace
