// sr-nack: Selective Repeat where the receiver names the holes behind later arrivals once they
// persisted reorder_us, and the sender repeats them at once; the RTO remains for tail losses.
#include "estimates.hpp"

namespace sdr::rel {

namespace {
void estimate(const model::Params& p, const Config&, std::vector<SchemeEstimate>* out)
{
    out->push_back(sr_estimate(Scheme::SrNack, p, 1.0));  // a hole is repaired after one RTT
}

// SR's model with the RTO one RTT: approximate, as a named hole waits reorder_us and a tail loss
// still waits for the timer.
ModelMean mean(model::Params p, const Config&)
{
    p.rto_rtts = 1;
    return {model::e_t_sr_s(p), ModelFit::Approx};
}
}  // namespace

const SchemeOps kSrNackOps{
    .id = Scheme::SrNack,
    .takes_params = false,
    .repair = Repair::NameHoles,
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
