// The paper's figures, each from the points of one CSV: nothing when its rows are absent.
// tools/REPRODUCTION.md ("Figures") says what each shows and which figure of the paper it mirrors.
#pragma once

#include "gnuplot.hpp"
#include "plot_points.hpp"

#include <optional>

namespace sdr::exp::plot {

std::optional<Figure> completion_vs_size(const Messages& g);
std::optional<Figure> slowdown_heatmap(const Messages& g);
std::optional<Figure> fallback_rate(const Messages& g);
std::optional<Figure> auto_vs_best(const Messages& g);
std::optional<Figure> model_vs_sim(const Messages& g);
std::optional<Figure> allreduce(const Allreduce& a);

}  // namespace sdr::exp::plot
