// The simulator backend: NIC N of the process-wide simulated fabric.
#include <sdr/emu/fabric.hpp>
#include <sdr/host/device.hpp>

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

class SimDevice final : public Device {
public:
    SimDevice(emu::SimFabric& f, emu::Nic& nic, std::string name)
        : fabric_(f), nic_(nic), name_(std::move(name))
    {
        open_nics().insert(nic_.index());
    }
    ~SimDevice() override { open_nics().erase(nic_.index()); }

    const std::string& name() const override { return name_; }
    PeerAddress address() const override { return PeerAddress{nic_.address().mac, nic_.address().ip}; }
    uint32_t num_channels() const override { return nic_.num_workers(); }
    uint64_t max_packet_lifetime_ns() const override
    {
        return (fabric_.max_transit_ps() + emu::kPsPerNs - 1) / emu::kPsPerNs + kLifetimeMarginNs;
    }
    void run_due() override { fabric_.catch_up(); }

    uint32_t mr_reg(void* addr, size_t len) override { return nic_.mr_reg(addr, len); }
    bool mr_dereg(uint32_t lkey) override { return nic_.mr_dereg(lkey); }
    bool mr_covers(uint32_t lkey, uint64_t addr, uint64_t len) const override
    {
        return nic_.mr_covers(lkey, addr, len);
    }
    void* nic_alloc(size_t bytes) override { return nic_.nic_alloc(bytes); }
    void nic_free(void* p) override { nic_.nic_free(p); }
    fw_device* firmware() override { return nic_.firmware(); }

    uint32_t qp_create(uint32_t tag, uint32_t channel, uint32_t* qpn) override
    {
        uint32_t h = nic_.qp_create(tag, channel);
        *qpn = nic_.qpn(h);
        return h;
    }
    void qp_destroy(uint32_t handle) override { nic_.qp_destroy(handle); }
    bool qp_connect(uint32_t handle, const PeerAddress& peer, uint32_t remote_qpn) override
    {
        emu::NicAddress a;
        a.mac = peer.mac;
        a.ip = peer.ip;
        return nic_.qp_connect(handle, a, remote_qpn);
    }
    void qp_bind_root_key(uint32_t handle, uint32_t rkey) override { nic_.qp_bind_root_key(handle, rkey); }
    uint32_t root_key_create(uint32_t nslots, uint64_t slot_bytes) override
    {
        return nic_.root_key_create(nslots, slot_bytes);
    }
    void root_key_destroy(uint32_t rkey) override { nic_.root_key_destroy(rkey); }
    bool root_key_set(uint32_t rkey, uint32_t slot, uint32_t lkey, uint64_t addr, uint64_t len) override
    {
        return nic_.root_key_set(rkey, slot, lkey, addr, len);
    }
    void root_key_null(uint32_t rkey, uint32_t slot) override { nic_.root_key_null(rkey, slot); }
    void doorbell(uint32_t q) override
    {
        fabric_.catch_up();
        nic_.doorbell(q);
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
    const emu::Nic* emu_nic() const override { return &nic_; }

private:
    // Fabric time in ps, saturating: "wait forever" (UINT64_MAX ns) must not wrap around.
    static emu::SimTime to_ps(uint64_t t_ns)
    {
        return t_ns > UINT64_MAX / emu::kPsPerNs ? UINT64_MAX : t_ns * emu::kPsPerNs;
    }
    emu::SimFabric& fabric_;
    emu::Nic& nic_;
    std::string name_;
};

}  // namespace

std::unique_ptr<Device> open_device(const char* name, uint32_t num_channels, std::string* err)
{
    std::string n = name;
    if (n == "sim" || n.rfind("sim:", 0) == 0) {
        uint32_t index = 0;
        if (n.size() > 4) {
            const char* s = n.c_str() + 4;
            char* end = nullptr;
            unsigned long v = std::strtoul(s, &end, 10);
            if (end == s || *end || v > 255) {
                *err = "device '" + n + "': expected sim:N with N in 0..255";
                return nullptr;
            }
            index = static_cast<uint32_t>(v);
        }
        if (open_nics().count(index)) {
            *err = "device '" + n + "' is already open in this process";
            return nullptr;
        }
        emu::SimFabric* f = emu::SimFabric::process(err);
        if (!f) return nullptr;
        emu::Nic& nic = f->nic(index, num_channels);
        if (nic.num_workers() != num_channels && !nic.reconfigure_workers(num_channels)) {
            *err = "device '" + n + "': cannot change its channel count while its transport QPs live";
            return nullptr;
        }
        return std::make_unique<SimDevice>(*f, nic, n);
    }
    for (const char* kind : {"xdp", "raw"})
        if (n.rfind(std::string(kind) + ":", 0) == 0) return open_rt_device(kind, n.substr(4), num_channels, err);
    if (n.rfind("verbs:", 0) == 0) {
        *err = "device '" + n + "': the rdma-core backend is not part of this build yet; use sim:N, raw:IF or xdp:IF";
        return nullptr;
    }
    *err = "unknown device '" + n + "': expected sim:N (simulated NIC N), raw:IFNAME (AF_PACKET) or xdp:IFNAME (AF_XDP), see README";
    return nullptr;
}

}  // namespace sdr::host
