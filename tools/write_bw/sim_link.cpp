#include "sim_link.hpp"

#include "side.hpp"

#include <string>

namespace sdr::write_bw {

emu::FabricParams sim_fabric_params(const Options& o)
{
    emu::FabricParams fp;
    fp.link.rtt_ms = 0.01;  // the fabric's own default (25 ms) is a WAN's; this tool measures a NIC
    std::string err;
    if (!emu::FabricParams::from_env(&fp, &err)) die(err);
    fp.link.rtt_ms += 2 * o.delay_ms;
    if (o.rate_gbps > 0) fp.link.bandwidth_gbps = o.rate_gbps;
    fp.pcap_snaplen = o.snaplen;
    return fp;
}

}  // namespace sdr::write_bw
