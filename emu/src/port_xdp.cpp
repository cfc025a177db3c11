// AF_XDP port: being written (issue 3). Until then it refuses with a clear message.
#include <sdr/emu/port.hpp>

namespace sdr::emu {

std::unique_ptr<Port> open_xdp_port(const std::string& ifname, const PortOptions&, std::string* err)
{
    *err = "xdp:" + ifname + ": the AF_XDP port is not part of this build yet; use raw:" + ifname;
    return nullptr;
}

}  // namespace sdr::emu
