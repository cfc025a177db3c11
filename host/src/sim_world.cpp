#include <sdr/host/sim_world.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace sdr {

static void check(bool ok, const char* what)
{
    if (!ok) throw std::runtime_error(std::string(what) + ": " + sdr_last_error());
}

SimWorld::SimWorld(const WorldConfig& cfg)
{
    auto f = std::make_unique<emu::SimFabric>(cfg.fabric);
    fabric_ = f.get();
    emu::SimFabric::install(std::move(f));
    sdr_dev_attr da{cfg.channels, 4};
    const char* names[2] = {"sim:0", "sim:1"};
    for (int i = 0; i < 2; i++) {
        ctx_[i] = sdr_context_create(names[i], &da);
        check(ctx_[i] != nullptr, "sdr_context_create");
        sdr_qp_attr a = (i == 1 && cfg.qp_side1) ? *cfg.qp_side1 : cfg.qp;
        qp_[i] = sdr_qp_create_ext(ctx_[i], &a, &cfg.ext);
        check(qp_[i] != nullptr, "sdr_qp_create");
    }
    size_t n = 0;
    check(sdr_qp_info_size_get(qp_[0], &n) == SDR_SUCCESS, "sdr_qp_info_size_get");
    std::vector<uint8_t> info0(n), info1(n);
    check(sdr_qp_info_get(qp_[0], info0.data()) == SDR_SUCCESS, "sdr_qp_info_get");
    check(sdr_qp_info_get(qp_[1], info1.data()) == SDR_SUCCESS, "sdr_qp_info_get");
    check(sdr_qp_connect(qp_[0], info1.data()) == SDR_SUCCESS, "sdr_qp_connect");
    check(sdr_qp_connect(qp_[1], info0.data()) == SDR_SUCCESS, "sdr_qp_connect");
}

SimWorld::~SimWorld()
{
    for (sdr_mr* m : mrs_) sdr_mr_dereg(m);
    for (int i = 0; i < 2; i++) {
        if (qp_[i]) sdr_qp_destroy(qp_[i]);
        if (ctx_[i]) sdr_context_destroy(ctx_[i]);
    }
    emu::SimFabric::install(nullptr);
}

sdr_mr* SimWorld::reg(int side, void* addr, size_t len)
{
    sdr_mr* m = sdr_mr_reg(ctx_[side], addr, len, SDR_ACCESS_REMOTE_WRITE);
    check(m != nullptr, "sdr_mr_reg");
    mrs_.push_back(m);
    return m;
}

uint32_t SimWorld::lkey(int side, void* addr, size_t len)
{
    uint32_t k = 0;
    sdr_mr_lkey_get(reg(side, addr, len), &k);
    return k;
}

}  // namespace sdr
