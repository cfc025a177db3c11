// The paper's figures from sdr_sweep's CSV files (messages.csv, allreduce.csv), drawn by gnuplot.
// tools/REPRODUCTION.md ("Figures") says what each figure shows and which figure of the paper it mirrors.
#pragma once

#include <string>
#include <vector>

namespace sdr::exp {

// Writes each figure's numbers (<name>.dat) and gnuplot script (<name>.gp) into out_dir (created
// if absent) and runs gnuplot there, which draws <name>.svg and <name>.png. The scripts and data
// stay, so a figure can be restyled and redrawn with `gnuplot <name>.gp`. An empty csv path skips
// the figures drawn from it, and a figure whose rows are absent (no `auto` rows, no exact model)
// is skipped; *written gets the paths of the figure files drawn. false + *err on failure: a CSV
// that cannot be read or is malformed (the file, its line and the column), gnuplot missing
// ("install gnuplot-nox") or failing (its stderr).
bool write_plots(const std::string& out_dir, const std::string& messages_csv, const std::string& allreduce_csv,
                 std::vector<std::string>* written, std::string* err);

}  // namespace sdr::exp
