#include "sim_link.hpp"

#include "side.hpp"

#include <cstdlib>
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
    // A topology's long haul takes the link as adjusted here, not as the environment left it.
    if (const char* t = std::getenv("SDR_SIM_TOPOLOGY"); t && *t) {
        emu::Topology topo;
        if (!emu::Topology::parse(t, fp.link, &topo, &err)) die("--topology: " + err);
        fp.topology = std::move(topo);
    }
    return fp;
}

}  // namespace sdr::write_bw
