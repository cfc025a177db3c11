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
std::unique_ptr<Device> open_verbs_device(const std::string& name, const std::string& arg, uint32_t num_channels,
                                          std::string* err);  // device_verbs_loader.cpp

// What the verbs module (host/verbs) exports: the open function behind C linkage, so libsdr finds
// it with dlsym. The module is built from the same tree (same Device layout).
extern "C" typedef Device* (*ModuleOpenFn)(const std::string* name, const std::string* arg, uint32_t num_channels,
                                           std::string* err);
inline constexpr const char* kVerbsModuleOpen = "sdr_hal_verbs_open";

}  // namespace sdr::host
