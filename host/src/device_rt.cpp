// The real-time backend: "raw:IFNAME" (AF_PACKET) and "xdp:IFNAME" (AF_XDP). The emulated NIC
// runs on its own polling thread (RtNic); every call here takes the NIC lock, so the host and
// that thread never touch the NIC model at once. Configured by SDR_RT_* variables (README).
#include <sdr/emu/rt_nic.hpp>
#include <sdr/host/device.hpp>

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

class RtDevice final : public Device {
    template <class F>
    auto locked(F&& f) const
    {
        std::lock_guard<std::mutex> g(rt_->lock());
        return f();
    }

public:
    RtDevice(std::unique_ptr<emu::RtNic> rt, std::string name) : rt_(std::move(rt)), nic_(rt_->nic()), name_(std::move(name))
    {
        open_ports().insert(name_);
    }
    ~RtDevice() override
    {
        rt_.reset();  // stops the polling thread first
        open_ports().erase(name_);
    }

    const std::string& name() const override { return name_; }
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

    uint32_t mr_reg(void* addr, size_t len) override { return locked([&] { return nic_.mr_reg(addr, len); }); }
    bool mr_dereg(uint32_t lkey) override { return locked([&] { return nic_.mr_dereg(lkey); }); }
    bool mr_covers(uint32_t lkey, uint64_t addr, uint64_t len) const override
    {
        return locked([&] { return nic_.mr_covers(lkey, addr, len); });
    }
    void* nic_alloc(size_t bytes) override { return locked([&] { return nic_.nic_alloc(bytes); }); }
    void nic_free(void* p) override { locked([&] { nic_.nic_free(p); }); }
    fw_device* firmware() override { return nic_.firmware(); }

    uint32_t qp_create(uint32_t tag, uint32_t channel, uint32_t* qpn) override
    {
        return locked([&] {
            uint32_t h = nic_.qp_create(tag, channel);
            *qpn = nic_.qpn(h);
            return h;
        });
    }
    void qp_destroy(uint32_t handle) override { locked([&] { nic_.qp_destroy(handle); }); }
    bool qp_connect(uint32_t handle, const PeerAddress& peer, uint32_t remote_qpn) override
    {
        return locked([&] { return nic_.qp_connect(handle, emu::NicAddress{peer.mac, peer.ip}, remote_qpn); });
    }
    void qp_bind_root_key(uint32_t handle, uint32_t rkey) override
    {
        locked([&] { nic_.qp_bind_root_key(handle, rkey); });
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
    void root_key_null(uint32_t rkey, uint32_t slot) override { locked([&] { nic_.root_key_null(rkey, slot); }); }
    void doorbell(uint32_t q) override { locked([&] { nic_.doorbell(q); }); }

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
    std::mutex* nic_lock() override { return &rt_->lock(); }
    void drain_handlers() override { rt_->drain_workers(); }
    const emu::Nic* emu_nic() const override { return &nic_; }
    emu::RtNic* rt_nic() override { return rt_.get(); }

private:
    std::unique_ptr<emu::RtNic> rt_;
    emu::Nic& nic_;
    std::string name_;
};

}  // namespace

std::unique_ptr<Device> open_rt_device(const std::string& kind, const std::string& ifname, uint32_t num_channels,
                                       std::string* err)
{
    std::string name = kind + ":" + ifname;
    if (open_ports().count(name)) {
        *err = "device '" + name + "' is already open in this process";
        return nullptr;
    }
    emu::RtParams p;
    if (!emu::RtParams::from_env(&p, err)) return nullptr;
    auto rt = emu::RtNic::open(kind, ifname, num_channels, p, err);
    if (!rt) return nullptr;
    return std::make_unique<RtDevice>(std::move(rt), name);
}

}  // namespace sdr::host
