// -d sim's fabric: one simulated link between the two sides, shaped by the same options that
// shape a real path, in both directions (a real side shapes only what it sends).
#pragma once

#include "options.hpp"

#include <sdr/emu/fabric.hpp>

namespace sdr::write_bw {

// A data-centre link (100 Gbit/s, 10 us RTT) unless SDR_SIM_BW_GBPS / SDR_SIM_RTT_MS say
// otherwise; its RTT grown by 2 x --delay-ms (both sides' delay on a real path), its rate
// --rate-gbps's if given, the SDR_SIM_* impairments (--loss .. --pcap set them), the capture cut
// at --snaplen. Dies on a malformed SDR_SIM_* value.
emu::FabricParams sim_fabric_params(const Options& o);

}  // namespace sdr::write_bw
