// The emulator's conformance harness on the simulator (hal/conformance/harness.hpp): two
// emulated NICs on the fabric that runs libsdr's `sim:` devices, each running the probe
// firmware on two DPA workers through the emulator's HAL binding (emu/nic/src/sdr/hal_emu.cpp),
// in virtual time, every handler on the calling thread. Only the NIC's public SDR API and the
// fabric are used; this program does not link sdr_firmware, the probe takes its place.
#include "emu_pair.hpp"

#include <sdr/emu/fabric.hpp>

#include <algorithm>

namespace sdr::hal_conformance {
namespace {

using emu::SimTime;

constexpr uint32_t kWorkers = 2;

emu::FabricParams fabric_params()
{
    emu::FabricParams p;  // not from the environment: the suite checks the HAL, not a configuration
    p.link.rtt_ms = 0.01;
    p.payload = true;
    return p;
}

class EmuSimHarness final : public Harness {
public:
    EmuSimHarness() : fabric_(fabric_params()) {}

    bool init(std::string* why)
    {
        nic_[kA] = &fabric_.nic(0, kWorkers);
        nic_[kB] = &fabric_.nic(1, kWorkers);
        return pair_.connect(*nic_[kA], *nic_[kB], false, &state(kA)->path, why);  // UC: the links lose nothing
    }

    // The Nic's own zeroed device block in NIC memory, which it passes every handler.
    probe* state(Side s) override { return reinterpret_cast<probe*>(nic_[s]->firmware()); }
    uint32_t workers() const override { return kWorkers; }
    uint32_t doorbell_worker(uint32_t qp_index) const override { return qp_index % kWorkers; }  // Nic::tx_worker
    uint32_t concurrent_handlers() const override { return 1; }  // the simulator's one thread
    void doorbell(Side s, uint32_t qp_index) override { nic_[s]->doorbell(qp_index); }
    WorkerCounts counts(Side s, uint32_t worker) override { return emu_counts(*nic_[s], worker); }
    HostMemory host_memory(size_t nwords) override
    {
        if (nwords > host_.size()) return {};
        return {host_.data(), reinterpret_cast<uint64_t>(host_.data()), host_.size()};
    }
    uint8_t* source() override { return pair_.source.data(); }
    const uint8_t* target() override { return pair_.target.data(); }

    // Event by event up to the deadline in virtual time, so cond() is looked at after each
    // instant at which something happened.
    bool run_until(const std::function<bool()>& cond, uint64_t timeout_ns) override
    {
        const SimTime deadline = (fabric_.host_now_ns() + timeout_ns) * emu::kPsPerNs;
        for (;;) {
            if (cond()) return true;
            emu::Simulator& sim = fabric_.sim();
            if (sim.now() >= deadline) return false;
            fabric_.advance_to(sim.idle() ? deadline : std::min(sim.next_time(), deadline));
        }
    }
    void run_for(uint64_t ns) override { fabric_.advance_to(fabric_.sim().now() + ns * emu::kPsPerNs); }

private:
    EmuPair pair_;  // the regions outlive the NICs that point at them
    std::vector<uint64_t> host_ = std::vector<uint64_t>(1024);
    emu::SimFabric fabric_;
    emu::Nic* nic_[2] = {};
};

}  // namespace

std::unique_ptr<Harness> make_harness(std::string* why, bool* skip)
{
    *skip = false;
    auto h = std::make_unique<EmuSimHarness>();
    if (!h->init(why)) return nullptr;
    return h;
}

}  // namespace sdr::hal_conformance
