// sr-nack: Selective Repeat where the receiver names the holes behind later arrivals once they
// persisted reorder_us, and the sender repeats them at once; the RTO remains for tail losses.
#include "estimates.hpp"

namespace sdr::rel {

namespace {
void estimate(const model::Params& p, const Config&, std::vector<SchemeEstimate>* out)
{
    out->push_back(sr_estimate(Scheme::SrNack, p, 1.0));  // a hole is repaired after one RTT
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
    .cts_params = nullptr,
    .repair_request = nullptr,
};

}  // namespace sdr::rel
