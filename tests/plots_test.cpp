// write_plots (tools/experiment/plots.hpp): sdr_sweep's CSV files become the paper's figures
// through gnuplot, a figure without rows is skipped, and a malformed CSV is refused with a
// message naming the file and the column. SDR_PLOTS_KEEP=DIR draws the figures into DIR and
// keeps them, to look at.
#include "plots.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kFigures = {"completion_vs_size", "slowdown_heatmap", "fallback_rate",
                                           "auto_vs_best", "model_vs_sim", "allreduce"};

const char* kMessagesHeader =
    "size_bytes,drop,scheme,k,m,samples,failed,mean_ms,p50_ms,p99_ms,p999_ms,min_ms,max_ms,fallback_samples,"
    "fallback_rate,retransmitted_per_sample,decoded_per_sample,model_ms,model_kind,ideal_ms,chosen,wall_s,packets";
const char* kAllreduceHeader = "nodes,bytes,drop,scheme,k,m,samples,failed,mean_ms,p50_ms,p99_ms,p999_ms,min_ms,max_ms,model_ms,wall_s,packets";

bool have_gnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

std::string slurp(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// A directory of its own per test, removed afterwards unless SDR_PLOTS_KEEP names one to keep.
class PlotsTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (const char* keep = std::getenv("SDR_PLOTS_KEEP")) {
            dir_ = keep;
            keep_ = true;
        } else {
            const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
            dir_ = fs::temp_directory_path() / ("sdr_plots_" + std::string(t->name()) + "_" + std::to_string(getpid()));
        }
        fs::create_directories(dir_);
    }
    void TearDown() override
    {
        if (!keep_) fs::remove_all(dir_);
    }
    std::string write(const std::string& name, const std::string& text)
    {
        std::ofstream(dir_ / name) << text;
        return (dir_ / name).string();
    }
    fs::path dir_;
    bool keep_ = false;
};

// Plausible numbers over a 3x3 grid (1M, 16M, 128M x 1e-5, 1e-4, 1e-3) for every scheme: SR pays
// RTOs as loss grows, EC pays its parity and falls back at high loss (XOR sooner), auto misses
// its 10 % target at one point.
std::string messages_csv(bool with_auto)
{
    std::ostringstream s;
    s << kMessagesHeader << "\n";
    struct Scheme {
        const char* name;
        int k, m;
    };
    std::vector<Scheme> schemes = {{"sr", 0, 0}, {"sr-nack", 0, 0}, {"ec-xor", 32, 8}, {"ec-mds", 32, 8}};
    if (with_auto) schemes.push_back({"auto", 0, 0});
    for (uint64_t size : {1ull << 20, 16ull << 20, 128ull << 20}) {
        for (double drop : {1e-5, 1e-4, 1e-3}) {
            double ideal = 25 + static_cast<double>(size) * 8 / 400e9 * 1e3;
            double lossy = std::min(1.0, drop * static_cast<double>(size) / 65536 * 16);  // P(some chunk lost)
            for (const Scheme& sc : schemes) {
                std::string n = sc.name;
                double mean = n == "sr"        ? ideal + lossy * 75
                              : n == "sr-nack" ? ideal + lossy * 25
                                               : ideal * 1.02 + lossy * (n == "ec-xor" ? 20 : 2);
                double submessages = static_cast<double>(size) / (32 * 65536);
                double fallback = n == "ec-xor" ? std::min(1.0, drop * 20 * submessages)
                                  : n == "ec-mds" ? std::min(1.0, drop * submessages) : 0;
                std::string chosen;
                if (n == "auto") {
                    mean = ideal * 1.02 + lossy * 2;
                    if (size == 16ull << 20 && drop == 1e-4) mean *= 1.3;  // auto picked badly here
                    chosen = "ec-mds:32/8";
                }
                double p999 = mean * (1 + lossy * 2);
                std::string kind = n == "sr" ? "exact" : n == "auto" ? "none" : "lower_bound";
                double model = n == "auto" ? NAN : mean / (n == "sr" ? 1 + 0.03 * lossy - 0.01 : 1.1);
                s << size << "," << drop << "," << n << "," << sc.k << "," << sc.m << ",100,0," << mean << "," << mean
                  << "," << p999 << "," << p999 << "," << ideal << "," << p999 << "," << fallback * 100 << ","
                  << fallback << ",0,0," << model << "," << kind << "," << ideal << "," << chosen << ",1.5,1000\n";
            }
        }
    }
    return s.str();
}

// Ring Allreduce rows: nodes 4, 6, 8 x drops 1e-4, 1e-3 for sr and ec-mds.
std::string allreduce_csv()
{
    std::ostringstream s;
    s << kAllreduceHeader << "\n";
    for (int nodes : {4, 6, 8}) {
        for (double drop : {1e-4, 1e-3}) {
            double rounds = 2.0 * nodes - 2;
            for (const char* scheme : {"sr", "ec-mds"}) {
                bool sr = std::string(scheme) == "sr";
                double p999 = rounds * (sr ? 30 + drop * 1e5 : 31);
                s << nodes << "," << (64 << 20) << "," << drop << "," << scheme << "," << (sr ? 0 : 32) << ","
                  << (sr ? 0 : 8) << ",50,0," << p999 / 2 << "," << p999 / 2 << "," << p999 << "," << p999 << ","
                  << rounds * 25 << "," << p999 << "," << rounds * 30 << ",2.0,5000\n";
            }
        }
    }
    return s.str();
}

TEST_F(PlotsTest, DrawsEveryFigureFromTheSweepsCsv)
{
    if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
    std::string messages = write("messages.csv", messages_csv(true)), allreduce = write("allreduce.csv", allreduce_csv());
    std::vector<std::string> written;
    std::string err;
    ASSERT_TRUE(sdr::exp::write_plots(dir_.string(), messages, allreduce, &written, &err)) << err;
    EXPECT_EQ(written.size(), 2 * kFigures.size());
    for (const auto& name : kFigures) {
        fs::path svg = dir_ / (name + ".svg"), png = dir_ / (name + ".png");
        ASSERT_TRUE(fs::exists(svg)) << svg;
        EXPECT_GT(fs::file_size(svg), 0u) << svg;
        EXPECT_NE(slurp(svg).find("<svg"), std::string::npos) << svg;
        EXPECT_EQ(slurp(png).substr(1, 3), "PNG") << png;
        EXPECT_NE(std::find(written.begin(), written.end(), svg.string()), written.end()) << svg;
        // The script and its data stay for the user to restyle and redraw.
        EXPECT_NE(slurp(dir_ / (name + ".gp")).find("gnuplot " + name + ".gp"), std::string::npos) << name;
        EXPECT_TRUE(fs::exists(dir_ / (name + ".dat"))) << name;
    }
    // The heat map annotates its cells: SR over EC-MDS at 128M, 1e-3 is (27.7+75)/(27.7·1.02+2).
    EXPECT_NE(slurp(dir_ / "slowdown_heatmap.svg").find(">3.4<"), std::string::npos);
    // The point where auto misses its target is labelled with the ratio.
    EXPECT_NE(slurp(dir_ / "auto_vs_best.svg").find(">1.30<"), std::string::npos);
}

TEST_F(PlotsTest, SkipsFiguresWhoseRowsAreAbsent)
{
    if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
    std::string messages = write("messages.csv", messages_csv(false));
    std::vector<std::string> written;
    std::string err;
    ASSERT_TRUE(sdr::exp::write_plots(dir_.string(), messages, "", &written, &err)) << err;
    auto drawn = [&](const std::string& name) {
        return std::find(written.begin(), written.end(), (dir_ / (name + ".svg")).string()) != written.end();
    };
    EXPECT_TRUE(drawn("completion_vs_size"));
    EXPECT_TRUE(drawn("slowdown_heatmap"));
    EXPECT_FALSE(drawn("auto_vs_best"));  // no auto rows
    EXPECT_FALSE(drawn("allreduce"));     // no allreduce CSV
    EXPECT_FALSE(fs::exists(dir_ / "auto_vs_best.svg"));
}

TEST_F(PlotsTest, MalformedCsvNamesTheFileAndColumn)
{
    std::string missing = kMessagesHeader;
    missing.replace(missing.find(",p999_ms"), 8, "");
    std::string path = write("no_p999.csv", missing + "\n");
    std::string err;
    EXPECT_FALSE(sdr::exp::write_plots(dir_.string(), path, "", nullptr, &err));
    EXPECT_NE(err.find(path), std::string::npos) << err;
    EXPECT_NE(err.find("p999_ms"), std::string::npos) << err;

    // A field that is not a number: the file, its line and the column.
    std::string csv = allreduce_csv();
    size_t second_line = csv.find('\n', csv.find('\n') + 1) + 1;
    csv.replace(second_line, 1, "x");
    path = write("bad_nodes.csv", csv);
    EXPECT_FALSE(sdr::exp::write_plots(dir_.string(), "", path, nullptr, &err));
    EXPECT_NE(err.find(path + ":3: column 'nodes'"), std::string::npos) << err;

    EXPECT_FALSE(sdr::exp::write_plots(dir_.string(), (dir_ / "absent.csv").string(), "", nullptr, &err));
    EXPECT_NE(err.find("absent.csv: cannot open"), std::string::npos) << err;
}

}  // namespace
