// The sweep's CSV files and the headline numbers read back from them (arXiv 2505.05366, evaluation): the
// largest SR / EC slowdown over the grid, SR-NACK's gain, where EC wins, the XOR vs MDS fallback
// crossover, the Allreduce speedup, auto against the best fixed scheme, model agreement.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace sdr::exp {

inline constexpr const char* kMessagesHeader =
    "size_bytes,drop,scheme,k,m,samples,failed,mean_ms,p50_ms,p99_ms,p999_ms,min_ms,max_ms,fallback_samples,"
    "fallback_rate,retransmitted_per_sample,decoded_per_sample,model_ms,model_kind,ideal_ms,chosen,wall_s,packets";
inline constexpr const char* kAllreduceHeader =
    "nodes,bytes,drop,scheme,k,m,samples,failed,mean_ms,p50_ms,p99_ms,p999_ms,min_ms,max_ms,model_ms,wall_s,packets";

// A CSV file with a header line, fields looked up by column name.
struct Table {
    std::vector<std::string> columns;
    std::vector<std::vector<std::string>> rows;
    // false + *err naming the file and what is wrong
    bool load(const std::string& path, const std::vector<std::string>& required, std::string* err);
    const std::string& at(size_t row, const std::string& col) const;
    double num(size_t row, const std::string& col) const;

private:
    std::map<std::string, size_t> index_;
};

// Prints the headline numbers of whichever CSV paths are non-empty; false + *err if one cannot be read.
bool print_summary(FILE* out, const std::string& messages_csv, const std::string& allreduce_csv, std::string* err);

}  // namespace sdr::exp
