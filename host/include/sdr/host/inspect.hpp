// C++ access to what sits behind a context, for tools and tests that report NIC counters:
// the device's name, the emulated NIC (port, QP and firmware counters) and, on "raw:"/"xdp:"
// devices, the real-time executor (port statistics, impairment counters). Not part of the C API.
#pragma once

#include <sdr.h>
#include <sdr/emu/nic.hpp>
#include <sdr/emu/rt_nic.hpp>

#include <string>

namespace sdr::host {

// The name the context's device was opened with ("verbs:mlx5_0"); "" for a NULL context. A
// report names the device kind that keeps no counters (sdr_stats.h lists none on "verbs:").
std::string device_name(sdr_context* ctx);
// The context's emulated NIC; nullptr for a NULL context or a device that is not emulated.
const emu::Nic* nic_of(sdr_context* ctx);
// The real-time executor of a "raw:"/"xdp:" context; nullptr otherwise.
emu::RtNic* rt_of(sdr_context* ctx);

}  // namespace sdr::host
