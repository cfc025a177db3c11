// Root keys on ConnectX (mlx5): an indirect mkey per generation (mlx5dv_create_mkey with
// MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT) whose layout is the list of its slots, re-listed with
// one UMR work request (mlx5dv_wr_mr_list) on every change: a slot pointed at a user buffer is
// the buffer's range followed by the NULL key up to the slot's size, a NULL slot the NULL key
// (ibv_alloc_null_mr) for the whole slot, so the list's byte slot x slot_bytes + offset is the
// zero-based address a sender writes. The UMRs go through a private RC QP connected to itself
// (a UMR is a local operation, but the QP must be in RTS), waited for before the call returns.
//
// Compiled, not run on hardware here (host/verbs/README.md says how a ConnectX user checks it).
#include "root_keys.hpp"

#include <infiniband/mlx5dv.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

namespace sdr::hal_verbs {

namespace {

constexpr uint32_t kMaxEntries = 65535;  // mlx5dv_mkey_init_attr::max_entries is 16 bits

struct IndirectKey {
    mlx5dv_mkey* mkey = nullptr;
    uint64_t slot_bytes = 0;
    std::vector<ibv_sge> slots;  // one per slot: lkey 0 = the NULL key for the whole slot
};

class Mlx5RootKeys final : public RootKeys {
public:
    Mlx5RootKeys(ibv_context* ctx, ibv_pd* pd) : ctx_(ctx), pd_(pd) {}
    ~Mlx5RootKeys() override
    {
        for (auto& [rkey, k] : keys_) mlx5dv_destroy_mkey(k.mkey);
        if (qp_) ibv_destroy_qp(qp_);
        if (cq_) ibv_destroy_cq(cq_);
        if (null_) ibv_dereg_mr(null_);
    }

    // The NULL key, the UMR QP and its CQ, the QP connected to itself through gid_index.
    bool open(uint8_t port, uint8_t gid_index, std::string* why)
    {
        if (!(null_ = ibv_alloc_null_mr(pd_))) return *why = std::string("ibv_alloc_null_mr: ") + std::strerror(errno), false;
        if (!(cq_ = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0)))
            return *why = std::string("ibv_create_cq (UMR): ") + std::strerror(errno), false;
        ibv_qp_init_attr_ex ia{};
        ia.qp_type = IBV_QPT_RC;
        ia.send_cq = ia.recv_cq = cq_;
        ia.cap.max_send_wr = 16;
        ia.cap.max_recv_wr = 1;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        ia.pd = pd_;
        ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
        mlx5dv_qp_init_attr ma{};
        ma.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS;
        ma.send_ops_flags = MLX5DV_QP_EX_WITH_MR_LIST;
        if (!(qp_ = mlx5dv_create_qp(ctx_, &ia, &ma)))
            return *why = std::string("mlx5dv_create_qp (UMR): ") + std::strerror(errno), false;
        qpx_ = ibv_qp_to_qp_ex(qp_);
        mqpx_ = qpx_ ? mlx5dv_qp_ex_from_ibv_qp_ex(qpx_) : nullptr;
        if (!mqpx_) return *why = "the UMR QP has no mlx5dv_qp_ex", false;
        ibv_gid gid{};
        if (ibv_query_gid(ctx_, port, gid_index, &gid))
            return *why = std::string("ibv_query_gid: ") + std::strerror(errno), false;
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = port;
        if (ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
            return *why = std::string("ibv_modify_qp(UMR, INIT): ") + std::strerror(errno), false;
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = IBV_MTU_1024;
        a.dest_qp_num = qp_->qp_num;
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = gid;
        a.ah_attr.grh.sgid_index = gid_index;
        a.ah_attr.grh.hop_limit = 1;
        a.ah_attr.port_num = port;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 12;
        if (ibv_modify_qp(qp_, &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
            return *why = std::string("ibv_modify_qp(UMR, RTR): ") + std::strerror(errno), false;
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTS;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 1;
        if (ibv_modify_qp(qp_, &a,
                          IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                              IBV_QP_MAX_QP_RD_ATOMIC))
            return *why = std::string("ibv_modify_qp(UMR, RTS): ") + std::strerror(errno), false;
        return true;
    }

    const char* kind() const override { return "mlx5"; }
    uint32_t create(uint32_t nslots, uint64_t slot_bytes, std::string* err) override
    {
        // Two list entries per slot at most (the buffer, then the NULL key to the slot's end).
        if (nslots == 0 || nslots > kMaxEntries / 2 || slot_bytes == 0 || slot_bytes > UINT32_MAX)
            return *err = "mlx5 root key: at most 32767 slots of at most 4 GiB - 1", 0;
        mlx5dv_mkey_init_attr ma{};
        ma.pd = pd_;
        ma.create_flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT;
        ma.max_entries = static_cast<uint16_t>(2 * nslots);
        IndirectKey k;
        if (!(k.mkey = mlx5dv_create_mkey(&ma))) return *err = std::string("mlx5dv_create_mkey: ") + std::strerror(errno), 0;
        k.slot_bytes = slot_bytes;
        k.slots.assign(nslots, ibv_sge{0, static_cast<uint32_t>(slot_bytes), 0});
        if (!relist(k, err)) {
            mlx5dv_destroy_mkey(k.mkey);
            return 0;
        }
        const uint32_t rkey = k.mkey->rkey;
        keys_[rkey] = std::move(k);
        return rkey;
    }
    bool set(uint32_t rkey, uint32_t slot, ibv_mr* mr, uint64_t addr, uint64_t len, std::string* err) override
    {
        auto it = keys_.find(rkey);
        if (it == keys_.end() || slot >= it->second.slots.size() || len == 0 || len > it->second.slot_bytes)
            return *err = "mlx5 root key: no such key or slot, or a length beyond the slot", false;
        it->second.slots[slot] = ibv_sge{addr, static_cast<uint32_t>(len), mr->lkey};
        return relist(it->second, err);
    }
    bool null(uint32_t rkey, uint32_t slot, std::string* err) override
    {
        auto it = keys_.find(rkey);
        if (it == keys_.end() || slot >= it->second.slots.size()) return *err = "mlx5 root key: no such key or slot", false;
        it->second.slots[slot] = ibv_sge{0, static_cast<uint32_t>(it->second.slot_bytes), 0};
        return relist(it->second, err);
    }
    void destroy(uint32_t rkey) override
    {
        auto it = keys_.find(rkey);
        if (it == keys_.end()) return;
        mlx5dv_destroy_mkey(it->second.mkey);
        keys_.erase(it);
    }

private:
    // The whole layout again in one UMR, signalled and waited for: a slot's new entry is in
    // force before sdr_recv_post returns (the sender writes only after the receiver's credit).
    bool relist(IndirectKey& k, std::string* err)
    {
        list_.clear();
        for (const ibv_sge& s : k.slots) {
            if (!s.lkey) {
                list_.push_back(ibv_sge{0, static_cast<uint32_t>(k.slot_bytes), null_->lkey});
                continue;
            }
            list_.push_back(s);
            if (s.length < k.slot_bytes)
                list_.push_back(ibv_sge{0, static_cast<uint32_t>(k.slot_bytes - s.length), null_->lkey});
        }
        ibv_wr_start(qpx_);
        qpx_->wr_id = ++umrs_;
        qpx_->wr_flags = IBV_SEND_SIGNALED;
        mlx5dv_wr_mr_list(mqpx_, k.mkey, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                          static_cast<uint16_t>(list_.size()), list_.data());
        if (int e = ibv_wr_complete(qpx_)) return *err = std::string("mlx5dv_wr_mr_list: ") + std::strerror(e), false;
        ibv_wc wc{};
        int n;
        while ((n = ibv_poll_cq(cq_, 1, &wc)) == 0) {
        }
        if (n < 0 || wc.status != IBV_WC_SUCCESS)
            return *err = std::string("UMR completion: ") + (n < 0 ? "poll failed" : ibv_wc_status_str(wc.status)), false;
        return true;
    }

    ibv_context* ctx_;
    ibv_pd* pd_;
    ibv_mr* null_ = nullptr;
    ibv_cq* cq_ = nullptr;
    ibv_qp* qp_ = nullptr;
    ibv_qp_ex* qpx_ = nullptr;
    mlx5dv_qp_ex* mqpx_ = nullptr;
    uint64_t umrs_ = 0;
    std::vector<ibv_sge> list_;
    std::map<uint32_t, IndirectKey> keys_;
};

}  // namespace

std::unique_ptr<RootKeys> make_mlx5_root_keys(ibv_context* ctx, ibv_pd* pd, uint8_t port, uint8_t gid_index,
                                              std::string* why)
{
    if (!mlx5dv_is_supported(ctx->device)) return *why = "not an mlx5 device", nullptr;
    auto k = std::make_unique<Mlx5RootKeys>(ctx, pd);
    if (!k->open(port, gid_index, why)) return nullptr;
    return k;
}

}  // namespace sdr::hal_verbs
