// ec-xor:k,m: parity i is the XOR of the data chunks j with j mod m == i (arXiv 2505.05366,
// section 3): each group of about k/m + 1 chunks survives one loss.
#include "estimates.hpp"

namespace sdr::rel {

namespace {
bool valid(uint32_t k, uint32_t m, std::string* err) { return Codec::valid(CodeKind::Xor, k, m, err); }

// Every group (data chunks j ≡ i mod m and parity i) misses at most one chunk.
bool decodable(const Code& c, const SubmessageView& v)
{
    for (uint32_t i = 0; i < c.m; i++) {
        uint32_t lost = !v.parity(i);
        for (uint32_t j = i; j < v.n; j += c.m) lost += !v.data(j);
        if (lost > 1) return false;
    }
    return true;
}

std::unique_ptr<Coder> coder(const Code& c) { return std::make_unique<CodecCoder>(CodeKind::Xor, c.k, c.m); }

void estimate(const model::Params& p, const Config& cfg, std::vector<SchemeEstimate>* out)
{
    if (cfg.m <= cfg.k) out->push_back(ec_estimate(Scheme::EcXor, p, model::Code::Xor));
}

ModelMean mean(model::Params p, const Config&) { return {model::e_t_ec_s(p, model::Code::Xor), ModelFit::LowerBound}; }
}  // namespace

const SchemeOps kEcXorOps{
    .id = Scheme::EcXor,
    .takes_params = true,
    .repair = Repair::Code,
    .valid = valid,
    .parity_slots = m_parity,
    .parity_first = m_parity,
    .decodable = decodable,
    .coder = coder,
    .estimate = estimate,
    .mean = mean,
    .cts_params = nullptr,
    .repair_request = nullptr,
};

}  // namespace sdr::rel
