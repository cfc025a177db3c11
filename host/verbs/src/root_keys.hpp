// SDR's root keys over rdma-core: a zero-based key over the S slots of one generation whose
// entries the receiver re-points slot by slot at user buffers, the NULL key in between. Each
// device offers it its own way (host/verbs/README.md, "Root and NULL keys").
#pragma once

#include "worker.hpp"

#include <infiniband/verbs.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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

// The portable fallback, for any device that registers a zero-based region (ibv_reg_mr_iova
// with iova 0): per generation one staging region of S slots is the root key; packets land
// there, and the worker copies each chunk into the receive's buffer when the firmware sets the
// chunk's bit (ChunkCopier). Not zero-copy: one memcpy per chunk on the worker, and G x S x
// slot bytes of staging memory (pinned by the device). A NULL entry is a slot nothing is copied
// from; a late packet writes only staging memory.
class StagingRootKeys final : public RootKeys, public ChunkCopier {
public:
    // nullptr + *why when the device refuses a zero-based region.
    static std::unique_ptr<StagingRootKeys> make(ibv_pd* pd, const fw_device* fw, std::string* why);
    StagingRootKeys(ibv_pd* pd, const fw_device* fw) : pd_(pd), fw_(fw) {}
    ~StagingRootKeys() override;
    const char* kind() const override { return "staging"; }
    uint32_t create(uint32_t nslots, uint64_t slot_bytes, std::string* err) override;
    bool set(uint32_t rkey, uint32_t slot, ibv_mr* mr, uint64_t addr, uint64_t len, std::string* err) override;
    bool null(uint32_t rkey, uint32_t slot, std::string* err) override;
    void destroy(uint32_t rkey) override;
    // What the copy needs to find a chunk's region from its window: the SDR QP whose receive
    // window it is (fw_qp_attach), and each generation's root key (qp_bind_root_key).
    void attach(uint32_t qp_index, uint64_t window);
    void bind(uint32_t qp_index, uint32_t generation, uint32_t rkey);
    void before_chunk_bit(const hal_window* win, uint64_t word, uint64_t bit) override;

private:
    struct Target {
        uint8_t* dst = nullptr;  // nullptr: the NULL entry
        uint64_t len = 0;
    };
    struct Region {
        uint8_t* base = nullptr;
        size_t bytes = 0;
        uint64_t slot_bytes = 0;
        ibv_mr* mr = nullptr;
        std::vector<Target> slots;
    };
    void release(Region& r);

    ibv_pd* pd_;
    const fw_device* fw_;
    std::mutex mu_;  // the host thread changes these while workers copy
    std::map<uint32_t, Region> regions_;                          // by rkey
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> rkey_of_;  // (QP index, generation)
    std::map<uint64_t, uint32_t> qp_of_window_;
};

}  // namespace sdr::hal_verbs
