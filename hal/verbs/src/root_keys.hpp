// SDR's root keys over rdma-core: a zero-based key over the S slots of one generation whose
// entries the receiver re-points slot by slot at user buffers, the NULL key in between. Each
// device offers it its own way (hal/verbs/README.md, "Root and NULL keys").
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>

namespace sdr::hal_verbs {

class RootKeys {
public:
    virtual ~RootKeys() = default;
    virtual const char* kind() const = 0;
    // The rkey a sender names; 0 on failure (*err says why).
    virtual uint32_t create(uint32_t nslots, uint64_t slot_bytes, std::string* err) = 0;
    // Entry slot := [addr, addr + len) of mr (registered with remote write).
    virtual bool set(uint32_t rkey, uint32_t slot, ibv_mr* mr, uint64_t addr, uint64_t len, std::string* err) = 0;
    virtual bool null(uint32_t rkey, uint32_t slot, std::string* err) = 0;
    virtual void destroy(uint32_t rkey) = 0;
};

// SDR's own verbs device (emu/verbs): the provider's sdrdv extension. nullptr + *why when the
// device is not one of that provider's.
std::unique_ptr<RootKeys> make_sdrdv_root_keys(ibv_context* ctx, ibv_pd* pd, std::string* why);

#ifdef SDR_HAL_VERBS_MLX5
// ConnectX (mlx5): indirect mkeys re-listed by UMR through a private RC QP on port/gid_index.
// nullptr + *why when the device is not mlx5 or the UMR QP cannot be set up.
std::unique_ptr<RootKeys> make_mlx5_root_keys(ibv_context* ctx, ibv_pd* pd, uint8_t port, uint8_t gid_index,
                                              std::string* why);
#endif

}  // namespace sdr::hal_verbs
