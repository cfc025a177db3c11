// ec-mds:k,m: Reed-Solomon over GF(2^8) with a Cauchy matrix (ISA-L): any m losses among a
// submessage's k + m chunks are repaired (arXiv 2505.05366, section 3).
#include "estimates.hpp"

namespace sdr::rel {

namespace {
bool valid(uint32_t k, uint32_t m, std::string* err) { return Codec::valid(CodeKind::Mds, k, m, err); }

// Chunks past the message end are known zeros; any k of the k + m positions suffice.
bool decodable(const Code& c, const SubmessageView& v) { return (c.k - v.n) + v.data_held + v.parity_held >= c.k; }

std::unique_ptr<Coder> coder(const Code& c) { return std::make_unique<CodecCoder>(CodeKind::Mds, c.k, c.m); }

// The configured code, then stronger ones: below the bandwidth-delay product their parity costs
// microseconds against a round trip, and they keep a lossy path's tail free of fallbacks.
void estimate(const model::Params& base, const Config& cfg, std::vector<SchemeEstimate>* out)
{
    model::Params p = base;
    out->push_back(ec_estimate(Scheme::EcMds, p, model::Code::Mds));
    for (uint32_t m = 2 * cfg.m; m <= 4 * cfg.m && cfg.k + m <= 255; m *= 2) {
        p.m = m;
        out->push_back(ec_estimate(Scheme::EcMds, p, model::Code::Mds));
    }
}

ModelMean mean(model::Params p, const Config&) { return {model::e_t_ec_s(p, model::Code::Mds), ModelFit::LowerBound}; }
}  // namespace

const SchemeOps kEcMdsOps{
    .id = Scheme::EcMds,
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
