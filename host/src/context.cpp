// Contexts (one per opened device), memory regions and the virtual-clock extension.
#include <sdr_sim.h>

#include "emu_ext.hpp"
#include "internal.hpp"
#include "stats.hpp"

using sdr::host::set_error;

extern "C" {

sdr_context* sdr_context_create(const char* dev_name, sdr_dev_attr* attr)
{
    if (!dev_name) return set_error("sdr_context_create: dev_name is NULL"), nullptr;
    if (!attr) return set_error("sdr_context_create: dev_attr is NULL"), nullptr;
    if (attr->num_channels == 0 || attr->num_channels > FW_MAX_CHANNELS)
        return set_error("sdr_context_create: num_channels must be 1.." + std::to_string(FW_MAX_CHANNELS) +
                         ", got " + std::to_string(attr->num_channels)),
               nullptr;
    if (attr->log_max_qps > 8)
        return set_error("sdr_context_create: log_max_qps must be <= 8 (256 QPs), got " +
                         std::to_string(attr->log_max_qps)),
               nullptr;
    std::string err;
    auto dev = sdr::host::open_device(dev_name, attr->num_channels, &err);
    if (!dev) return set_error("sdr_context_create: " + err), nullptr;
    auto* ctx = new sdr_context;
    ctx->dev = std::move(dev);
    ctx->log_max_qps = attr->log_max_qps;
    sdr::host::stats_context_opened(ctx);
    return ctx;
}

int sdr_context_destroy(sdr_context* ctx)
{
    if (!ctx) return set_error("sdr_context_destroy: context is NULL");
    for (sdr_qp* q : ctx->qps)
        if (q) return set_error("sdr_context_destroy: destroy its QPs first");
    if (ctx->live_mrs) return set_error("sdr_context_destroy: deregister its memory regions first");
    sdr::host::stats_context_closing(ctx);
    delete ctx;
    return SDR_SUCCESS;
}

sdr_mr* sdr_mr_reg(sdr_context* ctx, void* addr, size_t length, enum sdr_access_flags access)
{
    if (!ctx) return set_error("sdr_mr_reg: context is NULL"), nullptr;
    if (!addr) return set_error("sdr_mr_reg: addr is NULL"), nullptr;
    if (length == 0) return set_error("sdr_mr_reg: length is 0"), nullptr;
    if (sdr::host::raw_enum(access) != SDR_ACCESS_REMOTE_WRITE) return set_error("sdr_mr_reg: unknown access flags"), nullptr;
    uint32_t lkey = ctx->dev->mr_reg(addr, length);
    if (!lkey) return sdr::host::device_error(*ctx->dev, "sdr_mr_reg: the device refused the region"), nullptr;
    ctx->live_mrs++;
    return new sdr_mr{ctx, lkey};
}

int sdr_mr_dereg(sdr_mr* mr)
{
    if (!mr) return set_error("sdr_mr_dereg: mr is NULL");
    if (!mr->ctx->dev->mr_dereg(mr->lkey)) return set_error("sdr_mr_dereg: the region is not registered");
    mr->ctx->live_mrs--;
    delete mr;
    return SDR_SUCCESS;
}

int sdr_mr_lkey_get(sdr_mr* mr, uint32_t* lkey)
{
    if (!mr || !lkey) return set_error("sdr_mr_lkey_get: mr or lkey is NULL");
    *lkey = mr->lkey;
    return SDR_SUCCESS;
}

// SDR never exposes a region to the peer by its own key (the root key covers every receive),
// so the rkey is the lkey: it names the region in sdr_recv_wr just the same.
int sdr_mr_rkey_get(sdr_mr* mr, uint32_t* rkey)
{
    if (!mr || !rkey) return set_error("sdr_mr_rkey_get: mr or rkey is NULL");
    *rkey = mr->lkey;
    return SDR_SUCCESS;
}

}  // extern "C"

namespace {

// The virtual-time controls of sdr_sim.h are the emulator's extension (emu_ext.hpp).
sdr::host::EmuControls* emu_of(sdr_context* ctx) { return ctx->dev->emu_controls(); }

}  // namespace

extern "C" {

uint64_t sdr_now_ns(sdr_context* ctx) { return ctx ? ctx->dev->now_ns() : 0; }

uint64_t sdr_host_events(sdr_context* ctx) { return ctx ? ctx->dev->host_events() : 0; }

int sdr_sim_advance_to(sdr_context* ctx, uint64_t t_ns)
{
    if (!ctx) return set_error("sdr_sim_advance_to: context is NULL");
    sdr::host::EmuControls* e = emu_of(ctx);
    if (!e) return set_error("sdr_sim_advance_to: " + ctx->dev->name() + " is not an emulated device");
    if (!e->advance_to(t_ns)) return set_error("sdr_sim_advance_to: device runs in real time");
    return SDR_SUCCESS;
}

int sdr_sim_wait(sdr_context* ctx, uint64_t t_ns)
{
    if (!ctx) return set_error("sdr_sim_wait: context is NULL");
    if (!ctx->dev->wait_event(t_ns))
        return sdr::host::device_error(*ctx->dev, "sdr_sim_wait: device runs in real time");
    return SDR_SUCCESS;
}

int sdr_sim_run_until_idle(sdr_context* ctx)
{
    if (!ctx) return set_error("sdr_sim_run_until_idle: context is NULL");
    sdr::host::EmuControls* e = emu_of(ctx);
    if (!e) return set_error("sdr_sim_run_until_idle: " + ctx->dev->name() + " is not an emulated device");
    if (!e->run_until_idle()) return set_error("sdr_sim_run_until_idle: device runs in real time");
    return SDR_SUCCESS;
}

int sdr_sim_pending(sdr_context* ctx) { return ctx && ctx->dev->pending() ? 1 : 0; }

}  // extern "C"
