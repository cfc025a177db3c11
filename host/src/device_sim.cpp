// The simulator backend ("sim:N"): NIC N of the process-wide simulated fabric. One thread
// runs host and NIC, so the firmware-state operations are plain stores and calls into NIC
// memory. It also offers the emulator's controls (emu_ext.hpp).
#include <sdr/emu/fabric.hpp>

#include "backends.hpp"
#include "emu_ext.hpp"

#include <cstdlib>
#include <cstring>
#include <set>

namespace sdr::host {

namespace {

// The fabric's transit bound is exact; the margin covers the send port's batching (local
// completions are seen up to 1 us after a frame left) with room to spare.
constexpr uint64_t kLifetimeMarginNs = 10'000;

std::set<uint32_t>& open_nics()
{
    static std::set<uint32_t> s;
    return s;
}

class SimDevice final : public Device, public EmuControls {
public:
    SimDevice(emu::SimFabric& f, emu::Nic& nic, std::string name) : Device("sim", std::move(name)), fabric_(f), nic_(nic)
    {
        open_nics().insert(nic_.index());
    }
    ~SimDevice() override { open_nics().erase(nic_.index()); }

    PeerAddress address() const override { return PeerAddress{nic_.address().mac, nic_.address().ip}; }
    uint32_t num_channels() const override { return nic_.num_workers(); }
    uint64_t max_packet_lifetime_ns() const override
    {
        return (fabric_.max_transit_ps() + emu::kPsPerNs - 1) / emu::kPsPerNs + kLifetimeMarginNs;
    }
    void run_due() override { fabric_.catch_up(); }
    // The emulated NIC's RC responder drops a duplicate unplaced (emu/nic/src/sdr/nic_sdr_rc.cpp).
    bool rc_places_once() const override { return true; }

    uint32_t mr_reg(void* addr, size_t len) override { return nic_.mr_reg(addr, len); }
    bool mr_dereg(uint32_t lkey) override { return nic_.mr_dereg(lkey); }
    bool mr_covers(uint32_t lkey, uint64_t addr, uint64_t len) const override
    {
        return nic_.mr_covers(lkey, addr, len);
    }
    void* nic_alloc(size_t bytes) override { return nic_.nic_alloc(bytes); }
    void nic_free(void* p) override { nic_.nic_free(p); }
    bool nic_write(void* dst, const void* src, size_t len) override
    {
        std::memcpy(dst, src, len);
        return true;
    }
    bool rx_state_init(fw_rx_qp* rx, void* mem, const RxGeometry& g) override
    {
        fw_rx_qp_init(rx, mem, g.imm, g.nslots, g.max_packets, g.log_packets_per_chunk, g.mtu_log, g.generations,
                      g.window);
        rx->one_thread = 1;  // the simulator runs handlers and the host on the caller's thread
        return true;
    }
    bool rx_slot_arm(fw_rx_qp* rx, uint32_t slot, uint32_t generation, uint32_t msg_id, uint64_t length,
                     uint64_t* window, size_t window_words) override
    {
        std::memset(window, 0, window_words * sizeof(uint64_t));
        fw_rx_slot_arm(rx, slot, generation, msg_id, length);
        return true;
    }
    bool rx_slot_disarm(fw_rx_qp* rx, uint32_t slot) override
    {
        fw_rx_slot_disarm(rx, slot);
        return true;
    }
    bool rx_chunk_expand(const fw_rx_qp* rx, uint32_t slot, uint32_t chunk, uint64_t* bits, uint32_t nwords) override
    {
        fw_rx_chunk_expand(rx, slot, chunk, bits, nwords);
        return true;
    }
    bool fw_qp_attach(uint32_t index, const fw_qp& q) override
    {
        nic_.firmware()->qps[index] = q;
        return true;
    }
    void fw_qp_detach(uint32_t index) override { nic_.firmware()->qps[index] = fw_qp{nullptr, nullptr}; }
    bool send_post(fw_tx_qp* tx, fw_send_wr* entry, const fw_send_wr& wr, uint32_t head, uint32_t qp_index) override
    {
        *entry = wr;
        hal_store_release32(&tx->head, head);
        fabric_.catch_up();
        nic_.doorbell(qp_index);
        return true;
    }

    uint32_t qp_create(uint32_t tag, uint32_t channel, bool rc, uint32_t* qpn) override
    {
        uint32_t h = nic_.qp_create(tag, channel, rc);
        *qpn = nic_.qpn(h);
        return h;
    }
    void qp_destroy(uint32_t handle) override { nic_.qp_destroy(handle); }
    bool qp_set_spray(uint32_t handle, bool on) override { return nic_.qp_set_spray(handle, on); }
    bool qp_connect(uint32_t handle, const PeerAddress& peer, uint32_t remote_qpn, uint64_t rc_timeout_ns) override
    {
        emu::NicAddress a;
        a.mac = peer.mac;
        a.ip = peer.ip;
        return nic_.qp_connect(handle, a, remote_qpn, rc_timeout_ns);
    }
    bool qp_bind_root_key(uint32_t handle, uint32_t rkey) override
    {
        nic_.qp_bind_root_key(handle, rkey);
        return true;
    }
    uint32_t root_key_create(uint32_t nslots, uint64_t slot_bytes) override
    {
        return nic_.root_key_create(nslots, slot_bytes);
    }
    void root_key_destroy(uint32_t rkey) override { nic_.root_key_destroy(rkey); }
    bool root_key_set(uint32_t rkey, uint32_t slot, uint32_t lkey, uint64_t addr, uint64_t len) override
    {
        return nic_.root_key_set(rkey, slot, lkey, addr, len);
    }
    bool root_key_null(uint32_t rkey, uint32_t slot) override
    {
        nic_.root_key_null(rkey, slot);
        return true;
    }

    uint32_t ctrl_qp_create(uint32_t* qpn, uint32_t* qkey) override
    {
        uint32_t h = nic_.ctrl_qp_create();
        *qpn = nic_.ctrl_qpn(h);
        *qkey = nic_.ctrl_qkey(h);
        return h;
    }
    void ctrl_qp_destroy(uint32_t handle) override { nic_.ctrl_qp_destroy(handle); }
    bool ctrl_qp_connect(uint32_t handle, const PeerAddress& peer, uint32_t remote_qpn) override
    {
        return nic_.ctrl_qp_connect(handle, emu::NicAddress{peer.mac, peer.ip}, remote_qpn);
    }
    bool ctrl_send(uint32_t handle, const PeerAddress& peer, uint32_t remote_qpn, uint32_t remote_qkey,
                   const void* data, uint32_t len) override
    {
        fabric_.catch_up();
        return nic_.ctrl_send(handle, emu::NicAddress{peer.mac, peer.ip}, remote_qpn, remote_qkey, data, len);
    }
    int64_t ctrl_recv(uint32_t handle, void* buf, size_t cap) override { return nic_.ctrl_recv(handle, buf, cap); }
    uint32_t ctrl_max_bytes() const override { return emu::Nic::kCtrlMaxBytes; }

    bool progress() override { return fabric_.progress(); }
    uint64_t now_ns() override { return fabric_.host_now_ns(); }
    uint64_t host_events() override { return nic_.host_events(); }
    bool advance_to(uint64_t t_ns) override
    {
        fabric_.advance_to(to_ps(t_ns));
        return true;
    }
    bool run_until_idle() override
    {
        fabric_.run_until_idle();
        return true;
    }
    bool wait_event(uint64_t t_ns) override
    {
        fabric_.wait_event(to_ps(t_ns));
        return true;
    }
    bool pending() override { return !fabric_.sim().idle(); }
    EmuControls* emu_controls() override { return this; }
    const emu::Nic& nic() const override { return nic_; }
    emu::SimNetwork* network() override { return fabric_.network(); }

private:
    // Fabric time in ps, saturating: "wait forever" (UINT64_MAX ns) must not wrap around.
    static emu::SimTime to_ps(uint64_t t_ns)
    {
        return t_ns > UINT64_MAX / emu::kPsPerNs ? UINT64_MAX : t_ns * emu::kPsPerNs;
    }
    emu::SimFabric& fabric_;
    emu::Nic& nic_;
};

}  // namespace

std::unique_ptr<Device> open_sim_device(const std::string& n, const std::string& arg, uint32_t num_channels,
                                        std::string* err)
{
    emu::SimFabric* f = emu::SimFabric::process(err);
    if (!f) return nullptr;
    const uint32_t limit = f->host_limit();
    uint32_t index = 0;
    if (!arg.empty()) {
        const char* s = arg.c_str();
        char* end = nullptr;
        unsigned long v = std::strtoul(s, &end, 10);
        if (end == s || *end || v >= limit) {
            *err = "device '" + n + "': expected sim:N with N in 0.." + std::to_string(limit - 1) +
                   (f->network() ? " (the hosts of topology " + f->network()->topology().name + ")" : "");
            return nullptr;
        }
        index = static_cast<uint32_t>(v);
    }
    if (open_nics().count(index)) {
        *err = "device '" + n + "' is already open in this process";
        return nullptr;
    }
    emu::Nic& nic = f->nic(index, num_channels);
    if (nic.num_workers() != num_channels && !nic.reconfigure_workers(num_channels)) {
        *err = "device '" + n + "': cannot change its channel count while its transport QPs live";
        return nullptr;
    }
    return std::make_unique<SimDevice>(*f, nic, n);
}

}  // namespace sdr::host
