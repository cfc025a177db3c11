// A small simulated world in a few lines: two NICs ("sim:0", "sim:1") on a fresh fabric with
// the given link, one connected SDR QP on each, memory registration, and the virtual clock.
// Everything else goes through the ordinary C API on ctx()/qp(), exactly as an application
// would use it. Throws std::runtime_error (with sdr_last_error()) if set-up fails.
#pragma once

#include <sdr.h>
#include <sdr/emu/fabric.hpp>
#include <sdr_ext.h>
#include <sdr_mr.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace sdr {

struct WorldConfig {
    emu::FabricParams fabric;
    uint32_t channels = 8;
    sdr_qp_attr qp{16, 30, 7, SDR_MTU_4096, 1, 1, 0};  // 64 KiB chunks, 128 slots of 8 MiB
    std::optional<sdr_qp_attr> qp_side1;             // side 1's QP if it differs
    // G, the packet lifetime and the transport, both sides. UC: the simulator's worlds carry the
    // reliability schemes and the sweep, which recover lost packets themselves.
    sdr_qp_attr_ext ext{0, SDR_LIFETIME_FROM_PATH, SDR_TRANSPORT_UC, 0};
};

class SimWorld {
public:
    explicit SimWorld(const WorldConfig& cfg);
    ~SimWorld();
    SimWorld(const SimWorld&) = delete;
    SimWorld& operator=(const SimWorld&) = delete;

    sdr_context* ctx(int side) const { return ctx_[side]; }
    sdr_qp* qp(int side) const { return qp_[side]; }
    emu::SimFabric& fabric() const { return *fabric_; }
    emu::Nic& nic(int side) const { return *fabric_->find_nic(static_cast<uint32_t>(side)); }

    // Register [addr, addr+len) on side's context; the world deregisters it at the end.
    sdr_mr* reg(int side, void* addr, size_t len);
    uint32_t lkey(int side, void* addr, size_t len);

    uint64_t now_ns() const { return fabric_->host_now_ns(); }
    void advance_to(uint64_t t_ns) { fabric_->advance_to(t_ns * emu::kPsPerNs); }
    void run_until_idle() { fabric_->run_until_idle(); }

private:
    emu::SimFabric* fabric_ = nullptr;
    sdr_context* ctx_[2] = {};
    sdr_qp* qp_[2] = {};
    std::vector<sdr_mr*> mrs_;
};

}  // namespace sdr
