// The backend table: which backend opens a device, chosen by the prefix of its name, as
// rdma-core chooses a provider by its driver. A new backend is one file with its Device
// subclass and open function, plus one row here (host/README.md). A row whose open is nullptr
// is a backend this build does not provide: opening it fails like any unfilled operation.
#include "backends.hpp"

namespace sdr::host {

namespace {

struct Backend {
    const char* prefix;  // "sim" matches "sim" and "sim:..."; the others need "prefix:"
    OpenFn open;         // nullptr: not part of this build
    const char* why_absent;
};

constexpr Backend kBackends[] = {
    {"sim", open_sim_device, nullptr},
    {"raw", open_raw_device, nullptr},
    {"xdp", open_xdp_device, nullptr},
    {"verbs", open_verbs_device, nullptr},
};

}  // namespace

std::unique_ptr<Device> open_device(const char* name, uint32_t num_channels, std::string* err)
{
    const std::string n = name;
    for (const Backend& b : kBackends) {
        const std::string p = b.prefix;
        const bool bare = n == p && p == "sim";  // "sim" alone is sim:0
        if (!bare && n.rfind(p + ":", 0) != 0) continue;
        if (!b.open) {
            *err = "device '" + n + "': the '" + p + "' backend does not provide open: " + b.why_absent;
            return nullptr;
        }
        return b.open(n, bare ? std::string() : n.substr(p.size() + 1), num_channels, err);
    }
    *err = "unknown device '" + n + "': expected sim:N (simulated NIC N), raw:IFNAME (AF_PACKET), xdp:IFNAME (AF_XDP) or verbs:IBDEV (rdma-core), see README";
    return nullptr;
}

}  // namespace sdr::host
