// The emulator's extension of a device: controls only the emulated NIC has, offered through
// Device::emu_controls() by the simulator and real-time emulator backends and by no other.
// The C API reaches them through sdr_sim.h (virtual time) and sdr_stats.h (counters), tools and
// tests through inspect.hpp. Not part of the backend seam.
#pragma once

#include <sdr/host/device.hpp>

#include <mutex>

namespace sdr::emu {
class Nic;
class RtNic;
class SimNetwork;
}  // namespace sdr::emu

namespace sdr::host {

class EmuControls {
public:
    virtual ~EmuControls() = default;
    // Virtual-time control; false on an emulator that runs in real time.
    virtual bool advance_to(uint64_t t_ns) = 0;
    virtual bool run_until_idle() = 0;
    // The lock of a NIC that runs on its own thread, for reading its counters; nullptr where
    // one thread does everything.
    virtual std::mutex* nic_lock() { return nullptr; }
    // The emulated NIC, for its counters (inspect.hpp, sdr_stats.h).
    virtual const emu::Nic& nic() const = 0;
    // The real-time executor of "raw:"/"xdp:"; nullptr on the simulator.
    virtual emu::RtNic* rt() { return nullptr; }
    // The simulator's network of switches, if its fabric has a topology.
    virtual emu::SimNetwork* network() { return nullptr; }
};

// Holds an emulated NIC's lock, if it has one, for the scope.
class NicGuard {
public:
    explicit NicGuard(EmuControls& e) : m_(e.nic_lock())
    {
        if (m_) m_->lock();
    }
    ~NicGuard()
    {
        if (m_) m_->unlock();
    }
    NicGuard(const NicGuard&) = delete;
    NicGuard& operator=(const NicGuard&) = delete;

private:
    std::mutex* m_;
};

}  // namespace sdr::host
