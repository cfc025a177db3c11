// SDR_SIM_* environment variables: the documented configuration of the "sim:N" fabric.
#include <sdr/emu/fabric.hpp>

#include <sdr/emu/env_parse.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace sdr::emu {

bool FabricParams::from_env(FabricParams* out, std::string* err)
{
    FabricParams p = *out;
    double v;
    if (const char* s = std::getenv("SDR_SIM_BW_GBPS")) {
        if (!parse_double("SDR_SIM_BW_GBPS", s, 1e-3, 1e6, &v, err)) return false;
        p.link.bandwidth_gbps = v;
    }
    if (const char* s = std::getenv("SDR_SIM_RTT_MS")) {
        if (!parse_double("SDR_SIM_RTT_MS", s, 0, 1e6, &v, err)) return false;
        p.link.rtt_ms = v;
    }
    if (!impairment_from_env("SDR_SIM_", &p.link.impairment, err)) return false;
    if (!u64_from_env("SDR_SIM_SEED", &p.seed, err)) return false;
    if (const char* s = std::getenv("SDR_SIM_PAYLOAD")) {
        std::string v2 = s;
        if (v2 != "0" && v2 != "1") {
            if (err) *err = "SDR_SIM_PAYLOAD must be 0 (headers only) or 1 (full frames)";
            return false;
        }
        p.payload = v2 == "1";
    }
    if (const char* s = std::getenv("SDR_SIM_PCAP")) p.pcap_path = s;
    if (const char* s = std::getenv("SDR_SIM_CLOCK")) {
        std::string v2 = s;
        if (v2 != "virtual" && v2 != "wall") {
            if (err) *err = "SDR_SIM_CLOCK must be 'virtual' (default) or 'wall' (paced by the wall clock)";
            return false;
        }
        p.wall_clock = v2 == "wall";
    }
    if (!DpaParams::from_env(&p.dpa, err)) return false;
    // Last: a topology's long haul takes its defaults from the link knobs above.
    if (const char* s = std::getenv("SDR_SIM_TOPOLOGY"); s && *s) {
        Topology t;
        if (!Topology::parse(s, p.link, &t, err)) {
            if (err) *err = "SDR_SIM_TOPOLOGY: " + *err;
            return false;
        }
        p.topology = std::move(t);
    }
    // Lists of switch ports ("leaf0:2,spine1") of the topology.
    auto ports = [&](const char* var, std::vector<std::string>* out_ports) {
        const char* s = std::getenv(var);
        if (!s || !*s) return true;
        if (!p.topology) {
            if (err) *err = std::string(var) + " names switch ports: it needs SDR_SIM_TOPOLOGY";
            return false;
        }
        std::string list = s;
        for (size_t at = 0; at <= list.size();) {
            size_t comma = std::min(list.find(',', at), list.size());
            std::string spec = list.substr(at, comma - at);
            int sw, port;
            if (!SimNetwork::find_capture_port(*p.topology, spec, &sw, &port, err)) {
                if (err) *err = std::string(var) + ": " + *err;
                return false;
            }
            out_ports->push_back(spec);
            at = comma + 1;
        }
        return true;
    };
    if (!ports("SDR_SIM_PCAP_PORTS", &p.capture_ports) || !ports("SDR_SIM_QUEUE_PORTS", &p.queue_log_ports)) return false;
    if (const char* s = std::getenv("SDR_SIM_QUEUE_LOG"); s && *s) {
        if (!p.topology) {
            if (err) *err = "SDR_SIM_QUEUE_LOG logs switch queues: it needs SDR_SIM_TOPOLOGY";
            return false;
        }
        p.queue_log = s;
    }
    if (const char* s = std::getenv("SDR_SIM_QUEUE_LOG_US")) {
        if (!parse_double("SDR_SIM_QUEUE_LOG_US", s, 1e-3, 1e9, &v, err)) return false;
        p.queue_log_interval_ps = static_cast<SimTime>(v * 1e6);
    }
    *out = p;
    return true;
}

}  // namespace sdr::emu
