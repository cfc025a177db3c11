// The emulator's conformance harness in real time (hal/conformance/harness.hpp): two emulated
// NICs on the executor of libsdr's `raw:` devices (emu/rt: RtNic, an AF_PACKET port, a polling
// thread, receive handlers on worker threads), one in each of two network namespaces joined by
// a veth (tools/sdr-netns), running the probe firmware through the emulator's HAL binding. The
// same HAL binding as on the simulator, but the timers, the clock and the threads are this
// executor's. Host calls take the NIC's lock, as libsdr's raw: device does (host/src/device_rt.cpp).
//
// Needs root (namespaces, raw sockets): without it the tests skip; as root every set-up failure
// fails them.
#include "emu_pair.hpp"
#include "netns_harness.hpp"
#include "netns_util.hpp"

#include <sdr/emu/rt_nic.hpp>

#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>

namespace sdr::hal_conformance {
namespace {

constexpr uint32_t kWorkers = 2;

class EmuRtHarness final : public Harness {
public:
    bool init(std::string* why)
    {
        bed_ = std::make_unique<sdr::test::Testbed>("hcr");
        if (!bed_->ok()) return *why = "tools/sdr-netns could not build the two namespaces", false;
        emu::RtParams p;  // not from the environment: the suite checks the HAL, not a configuration
        p.worker_threads = kWorkers;   // receive handlers on threads of their own, as with worker cores
        p.port.rx_ring_frames = 2048;  // a few thousand small frames in all
        for (int s = 0; s < 2; s++) {
            sdr::test::InNetns in(bed_->ns(s));  // the port and the NIC's threads live there
            if (!in.ok()) return *why = "cannot enter namespace " + bed_->ns(s), false;
            rt_[s] = emu::RtNic::open("raw", bed_->ns(s), kWorkers, p, why);
            if (!rt_[s]) return false;
        }
        std::scoped_lock g(rt_[kA]->lock(), rt_[kB]->lock());
        // RC: a frame the veth or a receive ring drops is sent again, so counts stay exact.
        return pair_.connect(rt_[kA]->nic(), rt_[kB]->nic(), true, &state(kA)->path, why);
    }

    probe* state(Side s) override { return reinterpret_cast<probe*>(rt_[s]->nic().firmware()); }
    uint32_t workers() const override { return kWorkers; }
    uint32_t doorbell_worker(uint32_t qp_index) const override { return qp_index % kWorkers; }  // Nic::tx_worker
    // Receive handlers run on worker threads, beside the doorbell, timer and send-completion
    // handlers under the NIC's lock.
    uint32_t concurrent_handlers() const override { return 2; }
    void doorbell(Side s, uint32_t qp_index) override
    {
        std::lock_guard g(rt_[s]->lock());
        rt_[s]->nic().doorbell(qp_index);
    }
    WorkerCounts counts(Side s, uint32_t worker) override { return emu_counts(rt_[s]->nic(), worker); }
    HostMemory host_memory(size_t nwords) override
    {
        if (nwords > host_.size()) return {};
        return {host_.data(), reinterpret_cast<uint64_t>(host_.data()), host_.size()};
    }
    uint8_t* source() override { return pair_.source.data(); }
    const uint8_t* target() override { return pair_.target.data(); }

    // The NICs run on their own threads; the test thread looks every 100 us until the deadline.
    bool run_until(const std::function<bool()>& cond, uint64_t timeout_ns) override
    {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout_ns);
        while (!cond()) {
            if (std::chrono::steady_clock::now() >= deadline) return false;
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        return true;
    }
    void run_for(uint64_t ns) override { std::this_thread::sleep_for(std::chrono::nanoseconds(ns)); }

private:
    // Destroyed bottom up: the NICs (and their threads) first, then the regions, then the testbed.
    std::unique_ptr<sdr::test::Testbed> bed_;
    EmuPair pair_;
    std::vector<uint64_t> host_ = std::vector<uint64_t>(1024);
    std::unique_ptr<emu::RtNic> rt_[2];
};

}  // namespace

std::unique_ptr<Harness> make_harness(std::string* why, bool* skip)
{
    return make_netns_harness<EmuRtHarness>(why, skip);
}

}  // namespace sdr::hal_conformance
