// The NIC's two engines meet here, and only here: the SDR engine (nic.hpp) attaches the verbs
// engine (verbs_engine.hpp) on first use, so a NIC that never serves verbs carries none of it.
#include <sdr/emu/nic.hpp>
#include <sdr/emu/verbs_engine.hpp>

namespace sdr::emu {

VerbsEngine& Nic::verbs()
{
    if (!engine_) engine_ = std::make_unique<VerbsEngine>(*this, *this);
    return static_cast<VerbsEngine&>(*engine_);
}

}  // namespace sdr::emu
