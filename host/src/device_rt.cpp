// The real-time backend: "raw:IFNAME" (AF_PACKET) and "xdp:IFNAME" (AF_XDP). The emulated NIC
// runs on its own polling thread (RtNic); every call here takes the NIC lock, so the host and
// that thread never touch the NIC model at once: the firmware-state operations are stores and
// calls into NIC memory under that lock (the send ring's entry and head excepted: the firmware
// reads them after the release store of head). It also offers the emulator's controls.
// Configured by SDR_RT_* variables (README).
#include <sdr/emu/rt_nic.hpp>

#include "backends.hpp"
#include "emu_ext.hpp"

#include <cstring>

#include <mutex>
#include <set>

namespace sdr::host {

namespace {

// Beyond the impairment stage's own delays, a frame can wait in the kernel's queues (the
// AF_PACKET receive ring hands a block over after at most 1 ms) and for a polling thread the
// scheduler has not run yet.
constexpr uint64_t kLifetimeMarginNs = 5'000'000;

std::set<std::string>& open_ports()
{
    static std::set<std::string> s;
    return s;
}

class RtDevice final : public Device, public EmuControls {
    template <class F>
    auto locked(F&& f) const
    {
        std::lock_guard<std::mutex> g(rt_->lock());
        return f();
    }

public:
    RtDevice(std::unique_ptr<emu::RtNic> rt, const std::string& kind, const std::string& name)
        : Device(kind, name), rt_(std::move(rt)), nic_(rt_->nic())
    {
        open_ports().insert(name);
    }
    ~RtDevice() override
    {
        rt_.reset();  // stops the polling thread first
        open_ports().erase(name());
    }

    PeerAddress address() const override { return PeerAddress{nic_.address().mac, nic_.address().ip}; }
    uint32_t num_channels() const override { return nic_.num_workers(); }
    uint32_t max_frame_bytes() const override { return rt_->port_info().max_frame; }
    // What the impairment stage can hold a frame for: the delay line, the largest reorder
    // delay and the microsecond a duplicate trails by (the rate limit's backlog is unbounded:
    // with SDR_RT_RATE_GBPS, set the lifetime explicitly). Plus the margin for queues.
    uint64_t max_packet_lifetime_ns() const override
    {
        const emu::ShaperParams& s = rt_->params().shaper;
        uint64_t reorder = s.impairment.reorder > 0 ? (s.impairment.reorder_max_ps + 999) / 1000 : 0;
        uint64_t dup = s.impairment.duplicate > 0 ? 1000 : 0;
        return s.delay_ns + reorder + dup + kLifetimeMarginNs;
    }

    // The emulated NIC's RC responder drops a duplicate unplaced (emu/nic/src/sdr/nic_sdr_rc.cpp).
    bool rc_places_once() const override { return true; }

    uint32_t mr_reg(void* addr, size_t len) override { return locked([&] { return nic_.mr_reg(addr, len); }); }
    bool mr_dereg(uint32_t lkey) override { return locked([&] { return nic_.mr_dereg(lkey); }); }
    bool mr_covers(uint32_t lkey, uint64_t addr, uint64_t len) const override
    {
        return locked([&] { return nic_.mr_covers(lkey, addr, len); });
    }
    void* nic_alloc(size_t bytes) override { return locked([&] { return nic_.nic_alloc(bytes); }); }
    void nic_free(void* p) override { locked([&] { nic_.nic_free(p); }); }
    bool nic_write(void* dst, const void* src, size_t len) override
    {
        locked([&] { std::memcpy(dst, src, len); });
        return true;
    }
    bool rx_state_init(fw_rx_qp* rx, void* mem, const RxGeometry& g) override
    {
        locked([&] {
            fw_rx_qp_init(rx, mem, g.imm, g.nslots, g.max_packets, g.log_packets_per_chunk, g.mtu_log, g.generations,
                          g.window);
        });
        return true;
    }
    bool rx_slot_arm(fw_rx_qp* rx, uint32_t slot, uint32_t generation, uint32_t msg_id, uint64_t length,
                     uint64_t* window, size_t window_words) override
    {
        locked([&] {
            std::memset(window, 0, window_words * sizeof(uint64_t));
            fw_rx_slot_arm(rx, slot, generation, msg_id, length);
        });
        return true;
    }
    bool rx_slot_disarm(fw_rx_qp* rx, uint32_t slot) override
    {
        locked([&] { fw_rx_slot_disarm(rx, slot); });
        return true;
    }
    bool rx_chunk_expand(const fw_rx_qp* rx, uint32_t slot, uint32_t chunk, uint64_t* bits, uint32_t nwords) override
    {
        locked([&] { fw_rx_chunk_expand(rx, slot, chunk, bits, nwords); });
        return true;
    }
    bool fw_qp_attach(uint32_t index, const fw_qp& q) override
    {
        locked([&] { nic_.firmware()->qps[index] = q; });
        return true;
    }
    void fw_qp_detach(uint32_t index) override
    {
        locked([&] {
            rt_->drain_workers();  // a worker thread may still run a receive CQE of this QP
            nic_.firmware()->qps[index] = fw_qp{nullptr, nullptr};
        });
    }
    bool send_post(fw_tx_qp* tx, fw_send_wr* entry, const fw_send_wr& wr, uint32_t head, uint32_t qp_index) override
    {
        *entry = wr;
        hal_store_release32(&tx->head, head);
        locked([&] { nic_.doorbell(qp_index); });
        return true;
    }

    uint32_t qp_create(uint32_t tag, uint32_t channel, bool rc, uint32_t* qpn) override
    {
        return locked([&] {
            uint32_t h = nic_.qp_create(tag, channel, rc);
            *qpn = nic_.qpn(h);
            return h;
        });
    }
    void qp_destroy(uint32_t handle) override { locked([&] { nic_.qp_destroy(handle); }); }
    bool qp_set_spray(uint32_t handle, bool on) override
    {
        return locked([&] { return nic_.qp_set_spray(handle, on); });
    }
    bool qp_connect(uint32_t handle, const PeerAddress& peer, uint32_t remote_qpn, uint64_t rc_timeout_ns) override
    {
        return locked(
            [&] { return nic_.qp_connect(handle, emu::NicAddress{peer.mac, peer.ip}, remote_qpn, rc_timeout_ns); });
    }
    bool qp_bind_root_key(uint32_t handle, uint32_t rkey) override
    {
        locked([&] { nic_.qp_bind_root_key(handle, rkey); });
        return true;
    }
    uint32_t root_key_create(uint32_t nslots, uint64_t slot_bytes) override
    {
        return locked([&] { return nic_.root_key_create(nslots, slot_bytes); });
    }
    void root_key_destroy(uint32_t rkey) override { locked([&] { nic_.root_key_destroy(rkey); }); }
    bool root_key_set(uint32_t rkey, uint32_t slot, uint32_t lkey, uint64_t addr, uint64_t len) override
    {
        return locked([&] { return nic_.root_key_set(rkey, slot, lkey, addr, len); });
    }
    bool root_key_null(uint32_t rkey, uint32_t slot) override
    {
        locked([&] { nic_.root_key_null(rkey, slot); });
        return true;
    }

    uint32_t ctrl_qp_create(uint32_t* qpn, uint32_t* qkey) override
    {
        return locked([&] {
            uint32_t h = nic_.ctrl_qp_create();
            *qpn = nic_.ctrl_qpn(h);
            *qkey = nic_.ctrl_qkey(h);
            return h;
        });
    }
    void ctrl_qp_destroy(uint32_t handle) override { locked([&] { nic_.ctrl_qp_destroy(handle); }); }
    bool ctrl_qp_connect(uint32_t handle, const PeerAddress& peer, uint32_t remote_qpn) override
    {
        return locked([&] { return nic_.ctrl_qp_connect(handle, emu::NicAddress{peer.mac, peer.ip}, remote_qpn); });
    }
    bool ctrl_send(uint32_t handle, const PeerAddress& peer, uint32_t remote_qpn, uint32_t remote_qkey,
                   const void* data, uint32_t len) override
    {
        bool ok = locked([&] {
            return nic_.ctrl_send(handle, emu::NicAddress{peer.mac, peer.ip}, remote_qpn, remote_qkey, data, len);
        });
        if (ok) rt_->kick();
        return ok;
    }
    int64_t ctrl_recv(uint32_t handle, void* buf, size_t cap) override
    {
        return locked([&] { return nic_.ctrl_recv(handle, buf, cap); });
    }
    uint32_t ctrl_max_bytes() const override { return emu::Nic::kCtrlMaxBytes; }

    // The polling thread makes progress on its own; polling calls have nothing to run.
    bool progress() override { return true; }
    uint64_t now_ns() override { return rt_->now_ns(); }
    uint64_t host_events() override { return nic_.host_events(); }
    bool advance_to(uint64_t) override { return false; }
    bool run_until_idle() override { return false; }
    // Blocks in real time until a host-visible event or t_ns: sdr_sim_wait works here too.
    bool wait_event(uint64_t t_ns) override
    {
        rt_->wait_event(t_ns);
        return true;
    }
    // A real port can always receive from a peer in another process.
    bool pending() override { return true; }
    EmuControls* emu_controls() override { return this; }
    std::mutex* nic_lock() override { return &rt_->lock(); }
    const emu::Nic& nic() const override { return nic_; }
    emu::RtNic* rt() override { return rt_.get(); }

private:
    std::unique_ptr<emu::RtNic> rt_;
    emu::Nic& nic_;
};

std::unique_ptr<Device> open_rt_device(const std::string& kind, const std::string& name, const std::string& ifname,
                                       uint32_t num_channels, std::string* err)
{
    if (open_ports().count(name)) {
        *err = "device '" + name + "' is already open in this process";
        return nullptr;
    }
    emu::RtParams p;
    if (!emu::RtParams::from_env(&p, err)) return nullptr;
    auto rt = emu::RtNic::open(kind, ifname, num_channels, p, err);
    if (!rt) return nullptr;
    return std::make_unique<RtDevice>(std::move(rt), kind, name);
}

}  // namespace

std::unique_ptr<Device> open_raw_device(const std::string& name, const std::string& ifname, uint32_t num_channels,
                                        std::string* err)
{
    return open_rt_device("raw", name, ifname, num_channels, err);
}

std::unique_ptr<Device> open_xdp_device(const std::string& name, const std::string& ifname, uint32_t num_channels,
                                        std::string* err)
{
    return open_rt_device("xdp", name, ifname, num_channels, err);
}

}  // namespace sdr::host
