// The backend seam of libsdr: what the generic host library needs from a device. One
// implementation per device kind (the simulator's emulated NIC, the real-time emulator's
// AF_PACKET/AF_XDP ports), chosen by device name in open_device(). Set-up calls and polling
// only: the per-packet path stays inside the NIC and its firmware.
#pragma once

#include <sdr/firmware/fw.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace sdr::emu {
class Nic;
class RtNic;
}  // namespace sdr::emu

namespace sdr::host {

struct PeerAddress {
    std::array<uint8_t, 6> mac{};
    uint32_t ip = 0;
};

class Device {
public:
    static constexpr uint32_t kInvalid = 0xFFFFFFFFu;
    virtual ~Device() = default;

    virtual const std::string& name() const = 0;
    virtual PeerAddress address() const = 0;
    virtual uint32_t num_channels() const = 0;
    // Largest Ethernet frame (no FCS) the device can put on its wire; 0: no limit.
    virtual uint32_t max_frame_bytes() const { return 0; }
    // The longest a frame this device sends can take from leaving its port to being handled
    // by the peer's NIC, margin included: the default maximum packet lifetime of its QPs
    // (sdr_ext.h), advertised to the peer in the QP-info blob.
    virtual uint64_t max_packet_lifetime_ns() const = 0;
    // Handle what is already due (a wall-clock simulator runs behind its clock), so a packet
    // that arrived before now is placed or dropped before a receive slot is re-armed.
    virtual void run_due() {}

    virtual uint32_t mr_reg(void* addr, size_t len) = 0;  // lkey, 0 on failure
    virtual bool mr_dereg(uint32_t lkey) = 0;
    virtual bool mr_covers(uint32_t lkey, uint64_t addr, uint64_t len) const = 0;

    virtual void* nic_alloc(size_t bytes) = 0;  // zeroed NIC memory for firmware state
    virtual void nic_free(void* p) = 0;
    virtual fw_device* firmware() = 0;

    // Transport (UC) QPs; kInvalid on failure.
    virtual uint32_t qp_create(uint32_t tag, uint32_t channel, uint32_t* qpn) = 0;
    virtual void qp_destroy(uint32_t handle) = 0;
    virtual bool qp_connect(uint32_t handle, const PeerAddress& peer, uint32_t remote_qpn) = 0;
    virtual void qp_bind_root_key(uint32_t handle, uint32_t rkey) = 0;

    virtual uint32_t root_key_create(uint32_t nslots, uint64_t slot_bytes) = 0;
    virtual void root_key_destroy(uint32_t rkey) = 0;
    virtual bool root_key_set(uint32_t rkey, uint32_t slot, uint32_t lkey, uint64_t addr,
                              uint64_t len) = 0;
    virtual void root_key_null(uint32_t rkey, uint32_t slot) = 0;

    virtual void doorbell(uint32_t fw_qp_index) = 0;

    // The control QP of an SDR QP (unreliable datagrams, sdr_ctrl.h); kInvalid on failure. The
    // device picks its QPN and Q_Key; it takes datagrams only from the QP it is connected to.
    virtual uint32_t ctrl_qp_create(uint32_t* qpn, uint32_t* qkey) = 0;
    virtual void ctrl_qp_destroy(uint32_t handle) = 0;
    virtual bool ctrl_qp_connect(uint32_t handle, const PeerAddress& peer, uint32_t remote_qpn) = 0;
    virtual bool ctrl_send(uint32_t handle, const PeerAddress& peer, uint32_t remote_qpn, uint32_t remote_qkey,
                           const void* data, uint32_t len) = 0;  // false: send queue full
    virtual int64_t ctrl_recv(uint32_t handle, void* buf, size_t cap) = 0;  // bytes, 0 none, -1 cap too small
    virtual uint32_t ctrl_max_bytes() const = 0;

    // Make progress (the simulator runs a batch of events); false if nothing is pending.
    virtual bool progress() = 0;
    virtual uint64_t now_ns() = 0;
    // Virtual-time control; false on devices that run in real time.
    virtual bool advance_to(uint64_t t_ns) = 0;
    virtual bool run_until_idle() = 0;
    // Advance virtual time towards t_ns, stopping at the first event a host could notice;
    // false on devices that run in real time.
    virtual bool wait_event(uint64_t t_ns) = 0;
    virtual bool pending() = 0;

    // The lock of a NIC that runs on its own thread (real-time backends), for host code that
    // touches firmware state in NIC memory directly; nullptr where one thread does everything.
    virtual std::mutex* nic_lock() { return nullptr; }
    // With the NIC lock held: wait until receive handlers running on worker threads have
    // finished every CQE handed to them, so firmware state they read can be torn down.
    virtual void drain_handlers() {}
    // What inspect.hpp hands to tools and tests.
    virtual const emu::Nic* emu_nic() const = 0;
    virtual emu::RtNic* rt_nic() { return nullptr; }
};

// Holds a device's NIC lock, if it has one, for the scope.
class NicGuard {
public:
    explicit NicGuard(Device& d) : m_(d.nic_lock())
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

// "sim" / "sim:N": NIC N of the process's simulated fabric; "raw:IF" / "xdp:IF": the real-time
// emulator on interface IF (AF_PACKET / AF_XDP). NULL + err otherwise.
std::unique_ptr<Device> open_device(const char* name, uint32_t num_channels, std::string* err);
std::unique_ptr<Device> open_rt_device(const std::string& kind, const std::string& ifname, uint32_t num_channels,
                                       std::string* err);

}  // namespace sdr::host
