// sr: Selective Repeat (arXiv 2505.05366, section 3): chunks injected in one streaming send,
// each repeated when its retransmission timer, RTO = RTT·(1+α), expires before an ACK covers it.
#include "estimates.hpp"

namespace sdr::rel {

namespace {
void estimate(const model::Params& p, const Config& cfg, std::vector<SchemeEstimate>* out)
{
    out->push_back(sr_estimate(Scheme::Sr, p, 1 + cfg.alpha));
}

// The sender repeats a chunk after RTT·(1+α) plus the ACK interval (RTT/64 unless configured).
// The model is exact while no repeat has to queue behind first sends (model::sr_exact).
ModelMean mean(model::Params p, const Config& cfg)
{
    p.rto_rtts = 1 + cfg.alpha + (cfg.ack_interval_us > 0 ? cfg.ack_interval_us * 1e-3 / p.rtt_ms : 1.0 / 64);
    return {model::e_t_sr_s(p), model::sr_exact(p) ? ModelFit::Exact : ModelFit::LowerBound};
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
    .mean = mean,
    .cts_params = nullptr,
    .repair_request = nullptr,
};

}  // namespace sdr::rel
