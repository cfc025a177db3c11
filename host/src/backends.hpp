// The open function of each backend in the table of backends.cpp.
#pragma once

#include <sdr/host/device.hpp>

#include <memory>
#include <string>

namespace sdr::host {

// name: the whole device name; arg: what follows "prefix:" ("" for a bare "sim").
using OpenFn = std::unique_ptr<Device> (*)(const std::string& name, const std::string& arg, uint32_t num_channels,
                                           std::string* err);

std::unique_ptr<Device> open_sim_device(const std::string& name, const std::string& arg, uint32_t num_channels,
                                        std::string* err);  // device_sim.cpp
std::unique_ptr<Device> open_raw_device(const std::string& name, const std::string& arg, uint32_t num_channels,
                                        std::string* err);  // device_rt.cpp
std::unique_ptr<Device> open_xdp_device(const std::string& name, const std::string& arg, uint32_t num_channels,
                                        std::string* err);  // device_rt.cpp

}  // namespace sdr::host
