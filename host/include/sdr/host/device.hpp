// The backend seam of libsdr, shaped like an rdma-core provider: the generic layer (context,
// qp, recv, send .cpp) validates every argument and keeps the host's own bookkeeping; a backend
// provides the operations below, which touch the device. Each operation has a body here that
// is the "unfilled" operation (rdma-core's dummy ops): it records that backend B does not
// provide operation OP and returns failure, so the C call that needed it returns SDR_ERROR with
// both names in sdr_last_error(). A backend overrides the operations it provides.
//
// Backends are chosen by device-name prefix from one table (backends.cpp): `sim:` (the
// simulator's emulated NIC), `raw:`/`xdp:` (the real-time emulator), `verbs:` (reserved). A new
// backend is one file that derives from Device plus one row in that table (host/README.md).
//
// Firmware state lives in NIC memory, and the host reaches it only through the operations
// under "Firmware state": it never dereferences a NIC-memory pointer itself. On the emulator
// they are plain stores and calls into NIC memory (under the NIC lock where the NIC runs on its
// own thread); on a DPA they would be flexio_host2dev_memcpy of the range, or an RPC that runs
// the firmware's set-up function on the device.
//
// Emulator-only controls (virtual time, run-until-idle, the NIC lock, the NIC object for
// inspection) are not part of the seam: a backend that has them offers them through
// emu_controls() (emu_ext.hpp, inside the library).
#pragma once

#include <sdr/firmware/fw.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace sdr::host {

class EmuControls;

struct PeerAddress {
    std::array<uint8_t, 6> mac{};
    uint32_t ip = 0;
};

// What fw_rx_qp_init needs to lay out a QP's receive state in NIC memory.
struct RxGeometry {
    fw_imm_layout imm{};
    uint32_t nslots = 0, max_packets = 0, log_packets_per_chunk = 0, mtu_log = 0, generations = 0;
    hal_window window{};  // host memory the firmware writes: S x (bitmap words + immediate word)
};

class Device {
public:
    static constexpr uint32_t kInvalid = 0xFFFFFFFFu;
    // backend: the table row's prefix ("sim", "raw", ...); name: the device name as opened.
    Device(std::string backend, std::string name) : backend_(std::move(backend)), name_(std::move(name)) {}
    virtual ~Device() = default;
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    const std::string& name() const { return name_; }
    const std::string& backend() const { return backend_; }
    // Why the last operation that failed did (an unfilled operation names itself and the
    // backend), then forgets it; "" if nothing was said.
    std::string take_failure()
    {
        std::string s;
        s.swap(failure_);
        return s;
    }

    // ---- Device attributes -------------------------------------------------------------------
    virtual PeerAddress address() const { return unfilled("address"), PeerAddress{}; }
    virtual uint32_t num_channels() const { return unfilled("num_channels"), 0; }
    // Largest Ethernet frame (no FCS) the device can put on its wire; 0: no limit.
    virtual uint32_t max_frame_bytes() const { return 0; }
    // The longest a frame this device sends can take from leaving its port to being handled
    // by the peer's NIC, margin included: the default maximum packet lifetime of its QPs
    // (sdr_ext.h), advertised to the peer in the QP-info blob.
    virtual uint64_t max_packet_lifetime_ns() const { return unfilled("max_packet_lifetime_ns"), 0; }
    // Its RC responder never places a packet twice: one at a PSN already passed is dropped (and
    // acknowledged again), so a receive complete over RC has no late packet to wait out. Not
    // every responder promises this for RDMA WRITEs, so a backend says it only when it knows.
    virtual bool rc_places_once() const { return false; }
    // Handle what is already due (a wall-clock simulator runs behind its clock), so a packet
    // that arrived before now is placed or dropped before a receive slot is re-armed.
    virtual void run_due() {}

    // ---- Memory registration -----------------------------------------------------------------
    [[nodiscard]] virtual uint32_t mr_reg(void*, size_t) { return unfilled("mr_reg"), 0; }  // lkey, 0 on failure
    [[nodiscard]] virtual bool mr_dereg(uint32_t) { return unfilled("mr_dereg"), false; }
    [[nodiscard]] virtual bool mr_covers(uint32_t, uint64_t, uint64_t) const { return unfilled("mr_covers"), false; }

    // ---- Firmware state in NIC memory --------------------------------------------------------
    // Zeroed NIC memory; nullptr when exhausted. The address is the NIC's: the host hands it to
    // the operations below and into firmware structures, never dereferences it.
    [[nodiscard]] virtual void* nic_alloc(size_t) { return unfilled("nic_alloc"), nullptr; }
    virtual void nic_free(void*) { unfilled("nic_free"); }
    // Copy a host range into NIC memory (DPA: flexio_host2dev_memcpy).
    [[nodiscard]] virtual bool nic_write(void*, const void*, size_t) { return unfilled("nic_write"), false; }
    // Lay out a QP's receive state (fw_rx_qp_init) at rx, its slot table at mem.
    [[nodiscard]] virtual bool rx_state_init(fw_rx_qp*, void*, const RxGeometry&) { return unfilled("rx_state_init"), false; }
    // Clear a slot's host window words, then arm the slot for (generation, msg_id, length)
    // (fw_rx_slot_arm), so no handler sees a half-cleared window.
    [[nodiscard]] virtual bool rx_slot_arm(fw_rx_qp*, uint32_t /*slot*/, uint32_t /*generation*/, uint32_t /*msg_id*/,
                                           uint64_t /*length*/, uint64_t* /*window*/, size_t /*window_words*/)
    {
        return unfilled("rx_slot_arm"), false;
    }
    [[nodiscard]] virtual bool rx_slot_disarm(fw_rx_qp*, uint32_t) { return unfilled("rx_slot_disarm"), false; }
    // Read the per-packet bits of one chunk of an armed slot (fw_rx_chunk_expand).
    [[nodiscard]] virtual bool rx_chunk_expand(const fw_rx_qp*, uint32_t, uint32_t, uint64_t*, uint32_t)
    {
        return unfilled("rx_chunk_expand"), false;
    }
    // Install an SDR QP's receive and send state in the firmware's QP table at index; detach
    // first waits until no handler still runs a CQE of that QP, so its state can be freed.
    [[nodiscard]] virtual bool fw_qp_attach(uint32_t, const fw_qp&) { return unfilled("fw_qp_attach"), false; }
    virtual void fw_qp_detach(uint32_t) { unfilled("fw_qp_detach"); }
    // The per-message hot path: write one send work request into the ring entry at `entry`,
    // publish head (release) and ring the doorbell of SDR QP `qp_index`.
    [[nodiscard]] virtual bool send_post(fw_tx_qp*, fw_send_wr* /*entry*/, const fw_send_wr&, uint32_t /*head*/,
                                         uint32_t /*qp_index*/)
    {
        return unfilled("send_post"), false;
    }

    // ---- Transport QPs (RC or UC) and root keys; kInvalid / 0 on failure --------------------
    // rc_timeout_ns: an RC QP's retransmission timeout.
    [[nodiscard]] virtual uint32_t qp_create(uint32_t /*tag*/, uint32_t /*channel*/, bool /*rc*/, uint32_t* /*qpn*/)
    {
        return unfilled("qp_create"), kInvalid;
    }
    virtual void qp_destroy(uint32_t) { unfilled("qp_destroy"); }
    // Packet spraying over UDP source ports (sdr_ext.h); a backend without it leaves it unfilled.
    [[nodiscard]] virtual bool qp_set_spray(uint32_t, bool) { return unfilled("qp_set_spray"), false; }
    [[nodiscard]] virtual bool qp_connect(uint32_t, const PeerAddress&, uint32_t /*remote_qpn*/, uint64_t /*rc_timeout_ns*/)
    {
        return unfilled("qp_connect"), false;
    }
    [[nodiscard]] virtual bool qp_bind_root_key(uint32_t, uint32_t) { return unfilled("qp_bind_root_key"), false; }
    [[nodiscard]] virtual uint32_t root_key_create(uint32_t, uint64_t) { return unfilled("root_key_create"), 0; }
    virtual void root_key_destroy(uint32_t) { unfilled("root_key_destroy"); }
    [[nodiscard]] virtual bool root_key_set(uint32_t /*rkey*/, uint32_t /*slot*/, uint32_t /*lkey*/, uint64_t /*addr*/,
                                            uint64_t /*len*/)
    {
        return unfilled("root_key_set"), false;
    }
    [[nodiscard]] virtual bool root_key_null(uint32_t, uint32_t) { return unfilled("root_key_null"), false; }

    // ---- The control QP of an SDR QP (unreliable datagrams, sdr_ctrl.h) ----------------------
    // kInvalid on failure. The device picks its QPN and Q_Key; it takes datagrams only from the
    // QP it is connected to.
    [[nodiscard]] virtual uint32_t ctrl_qp_create(uint32_t*, uint32_t*) { return unfilled("ctrl_qp_create"), kInvalid; }
    virtual void ctrl_qp_destroy(uint32_t) { unfilled("ctrl_qp_destroy"); }
    [[nodiscard]] virtual bool ctrl_qp_connect(uint32_t, const PeerAddress&, uint32_t)
    {
        return unfilled("ctrl_qp_connect"), false;
    }
    // false: send queue full (or unfilled: take_failure() says so).
    [[nodiscard]] virtual bool ctrl_send(uint32_t, const PeerAddress&, uint32_t /*remote_qpn*/, uint32_t /*remote_qkey*/,
                                         const void*, uint32_t)
    {
        return unfilled("ctrl_send"), false;
    }
    // bytes, 0 none, -1 cap too small, -2 failed (unfilled)
    [[nodiscard]] virtual int64_t ctrl_recv(uint32_t, void*, size_t) { return unfilled("ctrl_recv"), -2; }
    virtual uint32_t ctrl_max_bytes() const { return 0; }

    // ---- Polling -----------------------------------------------------------------------------
    // Make progress (the simulator runs a batch of events); false if nothing is pending.
    virtual bool progress() { return false; }
    virtual uint64_t now_ns() { return unfilled("now_ns"), 0; }
    // Advance time towards t_ns, stopping at the first event a host could notice (virtual time
    // on the simulator; real-time devices block); false if the device cannot wait.
    virtual bool wait_event(uint64_t) { return unfilled("wait_event"), false; }
    virtual bool pending() { return false; }
    // A count that moves at every event wait_event wakes for. A device that cannot tell
    // returns a new value at every call, so a caller comparing two reads never skips work.
    virtual uint64_t host_events() { return ++host_events_unknown_; }

    // ---- Extension ---------------------------------------------------------------------------
    // The emulator's controls; nullptr on a device that is not the emulated NIC.
    virtual EmuControls* emu_controls() { return nullptr; }

protected:
    uint64_t host_events_unknown_ = 0;
    // Record, for take_failure(), that this backend does not provide op.
    void unfilled(const char* op) const
    {
        failure_ = "the '" + backend_ + "' backend of " + name_ + " does not provide " + op;
    }
    // Record, for take_failure(), why an operation the backend provides failed.
    void failed(std::string why) const { failure_ = std::move(why); }

private:
    std::string backend_, name_;
    mutable std::string failure_;
};

// Open a device by name through the backend table: the row whose prefix the name starts with
// ("sim", "sim:N", "raw:IF", "xdp:IF", "verbs:DEV"). nullptr + err otherwise.
[[nodiscard]] std::unique_ptr<Device> open_device(const char* name, uint32_t num_channels, std::string* err);

}  // namespace sdr::host
