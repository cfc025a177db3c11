// inspect.hpp: the device's name and the emulated NIC behind a context, through the emulator's
// extension.
#include <sdr/host/inspect.hpp>

#include "emu_ext.hpp"
#include "internal.hpp"

namespace sdr::host {

std::string device_name(sdr_context* ctx) { return ctx ? ctx->dev->name() : std::string(); }

const emu::Nic* nic_of(sdr_context* ctx)
{
    EmuControls* e = ctx ? ctx->dev->emu_controls() : nullptr;
    return e ? &e->nic() : nullptr;
}

emu::RtNic* rt_of(sdr_context* ctx)
{
    EmuControls* e = ctx ? ctx->dev->emu_controls() : nullptr;
    return e ? e->rt() : nullptr;
}

}  // namespace sdr::host
