// The DPA cost model's predictions against the paper's published BlueField-3 points (arXiv
// 2505.05366): within 15 % of every point not used for calibration.
#include "dpa.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

TEST(DpaModel, PredictsThePapersPointsWithin15Percent)
{
    std::vector<sdr::exp::PaperPoint> points;
    std::string err;
    auto csv = (std::filesystem::temp_directory_path() / "dpa_model_test.csv").string();
    ASSERT_TRUE(sdr::exp::run_dpa_experiment(sdr::emu::DpaParams{}, sdr::exp::DpaSweep{}, csv, &points, &err)) << err;
    int predicted = 0;
    for (const auto& p : points) {
        if (p.calibration) continue;
        predicted++;
        EXPECT_LT(std::fabs(p.rel_error()), 0.15) << p.what << ": paper " << p.paper << ", simulated " << p.predicted;
    }
    EXPECT_EQ(predicted, 4);
    std::filesystem::remove(csv);
}
