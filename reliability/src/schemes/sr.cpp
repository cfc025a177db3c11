// sr: Selective Repeat (arXiv 2505.05366, section 3): chunks injected in one streaming send,
// each repeated when its retransmission timer, RTO = RTT·(1+α), expires before an ACK covers it.
#include "estimates.hpp"

namespace sdr::rel {

namespace {
void estimate(const model::Params& p, const Config& cfg, std::vector<SchemeEstimate>* out)
{
    out->push_back(sr_estimate(Scheme::Sr, p, 1 + cfg.alpha));
}
}  // namespace

const SchemeOps kSrOps{
    .id = Scheme::Sr,
    .takes_params = false,
    .repair = Repair::Timer,
    .valid = nullptr,
    .parity_slots = nullptr,
    .parity_first = nullptr,
    .decodable = nullptr,
    .coder = nullptr,
    .estimate = estimate,
    .cts_params = nullptr,
    .repair_request = nullptr,
};

}  // namespace sdr::rel
