// The verbs device's objects in the NIC: protection domains, memory regions with their PD,
// access flags and bounds, address handles (GID -> MAC/IP, the one resolution hook) and
// completion queues (bounded rings the host polls; overflow puts the CQ in error).

#include <sdr/emu/verbs_engine.hpp>

#include <cerrno>
#include <cstring>

namespace sdr::emu {

VerbsEngine::VerbsEngine(Nic& nic, NicCore& core)
    : nic_(nic), core_(core), addr_(core.addr_), exec_(core.exec_), ids_(core.ids_), port_(core.port_)
{
}

VerbsEngine::~VerbsEngine() = default;

namespace verbs {

Gid gid_from_ipv4(uint32_t ip)
{
    Gid g{};
    g[10] = g[11] = 0xFF;
    g[12] = uint8_t(ip >> 24);
    g[13] = uint8_t(ip >> 16);
    g[14] = uint8_t(ip >> 8);
    g[15] = uint8_t(ip);
    return g;
}

bool ipv4_from_gid(const Gid& g, uint32_t* ip)
{
    for (int i = 0; i < 10; i++)
        if (g[i]) return false;
    if (g[10] != 0xFF || g[11] != 0xFF) return false;
    *ip = uint32_t(g[12]) << 24 | uint32_t(g[13]) << 16 | uint32_t(g[14]) << 8 | g[15];
    return true;
}

}  // namespace verbs

uint32_t VerbsEngine::pd_alloc()
{
    size_t i = 0;
    while (i < vpds_.size() && vpds_[i].live) i++;
    if (i >= kMaxVerbsQps) return kNoHandle;
    if (i == vpds_.size()) vpds_.emplace_back();
    vpds_[i] = VerbsPd{true, 0};
    return static_cast<uint32_t>(i);
}

int VerbsEngine::pd_dealloc(uint32_t pd)
{
    if (pd >= vpds_.size() || !vpds_[pd].live) return EINVAL;
    if (vpds_[pd].users) return EBUSY;
    vpds_[pd].live = false;
    return 0;
}

uint32_t VerbsEngine::mr_reg(uint32_t pd, void* addr, size_t len, uint32_t access)
{
    return mr_reg(pd, addr, len, access, reinterpret_cast<uint64_t>(addr));
}

uint32_t VerbsEngine::mr_reg(uint32_t pd, void* addr, size_t len, uint32_t access, uint64_t iova)
{
    if (pd >= vpds_.size() || !vpds_[pd].live || !addr || len == 0) return 0;
    // IBTA: remote write (and atomics) need local write too; verbs refuses the region otherwise.
    if ((access & (verbs::kRemoteWrite | verbs::kRemoteAtomic)) && !(access & verbs::kLocalWrite)) return 0;
    size_t i = 0;
    while (i < vmrs_.size() && vmrs_[i].live) i++;
    if (i >> NicIds::kLkeyIndexBits) return 0;
    if (i == vmrs_.size()) vmrs_.emplace_back();
    VerbsMr& r = vmrs_[i];
    if (iova + len < iova) return 0;
    r = VerbsMr{true, ids_.lkey(static_cast<uint32_t>(i), r.key), pd, access, static_cast<uint8_t*>(addr), len, iova, 0, {}};
    vpds_[pd].users++;
    return r.key;
}

int VerbsEngine::mr_dereg(uint32_t key)
{
    VerbsMr* r = verbs_mr(key);
    if (!r) return EINVAL;
    vpds_[r->pd].users--;
    r->live = false;  // keeps its key: the next region of this entry draws another
    r->addr = nullptr;
    r->len = 0;
    r->slot_bytes = 0;
    r->entries.clear();
    return 0;
}

int VerbsEngine::mr_rereg(uint32_t key, uint32_t pd, void* addr, size_t len, uint32_t access, uint64_t iova)
{
    VerbsMr* r = verbs_mr(key);
    if (!r || r->slot_bytes || pd >= vpds_.size() || !vpds_[pd].live || !addr || len == 0 || iova + len < iova)
        return EINVAL;
    if ((access & (verbs::kRemoteWrite | verbs::kRemoteAtomic)) && !(access & verbs::kLocalWrite)) return EINVAL;
    // A root key's entry holds an address range of its region: a new translation would leave
    // it pointing at memory the region no longer covers.
    for (const VerbsMr& m : vmrs_)
        if (m.live && m.slot_bytes)
            for (const VerbsRootEntry& e : m.entries)
                if (e.key == key) return EBUSY;
    vpds_[r->pd].users--;
    vpds_[pd].users++;
    r->pd = pd;
    r->access = access;
    r->addr = static_cast<uint8_t*>(addr);
    r->len = len;
    r->iova = iova;
    return 0;
}

uint32_t VerbsEngine::root_key_create(uint32_t pd, uint32_t nslots, uint64_t slot_bytes)
{
    if (pd >= vpds_.size() || !vpds_[pd].live || nslots == 0 || slot_bytes == 0) return 0;
    if (slot_bytes > (UINT64_MAX / nslots)) return 0;
    size_t i = 0;
    while (i < vmrs_.size() && vmrs_[i].live) i++;
    if (i >> NicIds::kLkeyIndexBits) return 0;
    if (i == vmrs_.size()) vmrs_.emplace_back();
    VerbsMr& r = vmrs_[i];
    r = VerbsMr{true, ids_.lkey(static_cast<uint32_t>(i), r.key), pd, verbs::kRemoteWrite, nullptr, 0, 0, 0, {}};
    r.slot_bytes = slot_bytes;
    r.entries.assign(nslots, VerbsRootEntry{});
    vpds_[pd].users++;
    return r.key;
}

int VerbsEngine::root_key_set(uint32_t key, uint32_t slot, uint32_t mr_key, uint64_t addr, uint64_t len)
{
    VerbsMr* rk = verbs_mr(key);
    const VerbsMr* mr = verbs_mr(mr_key);
    if (!rk || !rk->slot_bytes || slot >= rk->entries.size() || !mr || mr->slot_bytes || mr->pd != rk->pd ||
        !(mr->access & verbs::kRemoteWrite) || len > rk->slot_bytes || mr->iova != reinterpret_cast<uint64_t>(mr->addr))
        return EINVAL;
    const uint64_t base = reinterpret_cast<uint64_t>(mr->addr);
    if (addr < base || len > mr->len || addr - base > mr->len - len) return EINVAL;
    rk->entries[slot] = VerbsRootEntry{mr_key, addr, len};
    return 0;
}

int VerbsEngine::root_key_null(uint32_t key, uint32_t slot)
{
    VerbsMr* rk = verbs_mr(key);
    if (!rk || !rk->slot_bytes || slot >= rk->entries.size()) return EINVAL;
    rk->entries[slot] = VerbsRootEntry{};
    return 0;
}

RxDrop VerbsEngine::verbs_write_target(const VerbsQp& q, uint32_t key, uint64_t va, uint64_t write_len, uint8_t** dst)
{
    // A WRITE of no bytes names no memory: its R_Key and VA are not checked (IBTA vol. 1
    // C9-88; rxe skips them too), only the QP's remote write access. UCX's rc_verbs flushes a QP
    // with one to R_Key 0; rsockets sends its credit updates so, as a WRITE with immediate.
    if (write_len == 0) {
        *dst = nullptr;
        return (q.access & verbs::kRemoteWrite) ? RxDrop::Count : RxDrop::AccessDenied;
    }
    const VerbsMr* mr = verbs_mr(key);
    if (!mr) return RxDrop::UnknownKey;
    if (mr->pd != q.pd || !(mr->access & verbs::kRemoteWrite) || !(q.access & verbs::kRemoteWrite))
        return RxDrop::AccessDenied;
    if (!mr->slot_bytes) {
        uint8_t* p = mr->remote(va, write_len);
        if (!p) return RxDrop::OutOfBounds;
        *dst = p;
        return RxDrop::Count;
    }
    // A root key: the write stays inside one slot; its entry is looked up on every packet, as
    // the host may re-point it between packets (a NULL entry discards what still arrives).
    const uint64_t slot = va / mr->slot_bytes, off = va % mr->slot_bytes;
    if (slot >= mr->entries.size() || write_len > mr->slot_bytes - off) return RxDrop::OutOfBounds;
    const VerbsRootEntry& e = mr->entries[slot];
    if (!e.key) {
        *dst = nullptr;
        return RxDrop::Count;
    }
    const VerbsMr* target = verbs_mr(e.key);
    if (!target || target->slot_bytes) return RxDrop::UnknownKey;  // its region was deregistered
    if (write_len && (off > e.len || write_len > e.len - off)) return RxDrop::OutOfBounds;
    *dst = reinterpret_cast<uint8_t*>(e.addr) + off;
    return RxDrop::Count;
}

bool VerbsEngine::verbs_sges_ok(uint32_t pd, const verbs::Sge* sg, uint32_t n, uint32_t access, uint32_t* total)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        sum += sg[i].length;
        if (!sg[i].length) continue;
        const VerbsMr* r = verbs_mr(sg[i].lkey);
        if (!r || r->pd != pd || (r->access & access) != access) return false;
        if (r->iova != reinterpret_cast<uint64_t>(r->addr)) return false;  // remote-only (mr_reg)
        uint64_t base = reinterpret_cast<uint64_t>(r->addr);
        if (sg[i].addr < base || sg[i].length > r->len || sg[i].addr - base > r->len - sg[i].length) return false;
    }
    if (sum > UINT32_MAX) return false;
    *total = static_cast<uint32_t>(sum);
    return true;
}

void VerbsEngine::verbs_scatter(const verbs::RecvWr& r, uint32_t off, const uint8_t* src, uint32_t len)
{
    for (uint32_t i = 0; i < r.num_sge && len; i++) {
        const verbs::Sge& s = r.sg[i];
        if (off >= s.length) {
            off -= s.length;
            continue;
        }
        uint32_t n = std::min(len, s.length - off);
        std::memcpy(reinterpret_cast<uint8_t*>(s.addr) + off, src, n);  // the DMA
        src += n;
        len -= n;
        off = 0;
    }
}

bool VerbsEngine::resolve_gid(const verbs::Gid& gid, NicAddress* out) const
{
    uint32_t ip;
    if (!verbs::ipv4_from_gid(gid, &ip)) return false;  // RoCEv2 over IPv4 only
    out->ip = ip;
    if (wire::is_ipv4_multicast(ip)) {  // a group: its MAC follows from the address, no neighbour
        out->mac = wire::ipv4_multicast_mac(ip);
        return true;
    }
    return exec_->resolve_mac(ip, &out->mac);
}

uint32_t VerbsEngine::ah_create(uint32_t pd, const verbs::Gid& gid)
{
    if (pd >= vpds_.size() || !vpds_[pd].live) return kNoHandle;
    NicAddress dst;
    if (!resolve_gid(gid, &dst)) return kNoHandle;
    size_t i = 0;
    while (i < vahs_.size() && vahs_[i].live) i++;
    if (i == vahs_.size()) vahs_.emplace_back();
    vahs_[i] = VerbsAh{true, pd, dst, wire::is_ipv4_multicast(dst.ip)};
    vpds_[pd].users++;
    return static_cast<uint32_t>(i);
}

int VerbsEngine::ah_destroy(uint32_t ah)
{
    if (ah >= vahs_.size() || !vahs_[ah].live) return EINVAL;
    vahs_[ah].live = false;
    vpds_[vahs_[ah].pd].users--;
    return 0;
}

uint32_t VerbsEngine::cq_create(uint32_t depth)
{
    if (depth == 0 || depth > (1u << 20)) return kNoHandle;
    size_t i = 0;
    while (i < vcqs_.size() && vcqs_[i]) i++;
    if (i == vcqs_.size()) vcqs_.emplace_back();
    vcqs_[i] = std::make_unique<VerbsCq>(depth);
    return static_cast<uint32_t>(i);
}

int VerbsEngine::cq_destroy(uint32_t cq)
{
    if (cq >= vcqs_.size() || !vcqs_[cq]) return EINVAL;
    if (vcqs_[cq]->users) return EBUSY;
    vcqs_[cq].reset();
    return 0;
}

int VerbsEngine::cq_resize(uint32_t cq, uint32_t depth)
{
    if (cq >= vcqs_.size() || !vcqs_[cq] || depth == 0 || depth > (1u << 20)) return EINVAL;
    VerbsCq& c = *vcqs_[cq];
    // What it holds, and the completions already owed to it: signaled sends posted on its QPs
    // and not yet complete (they would overrun a CQ made too small for them). A software NIC
    // completes a just-posted send some microseconds later than the post returned; counted
    // here, a resize right after posting sees what a hardware NIC's CQ would already hold.
    uint64_t need = c.ring.head() - c.ring.tail();
    for (const auto& q : vqps_)
        if (q && q->live && q->send_cq == cq)
            for (uint64_t i = q->sq.tail(); i != q->sq.head(); i++) need += q->sq.at(i).wr.signaled;
    if (c.overflowed || need > depth) return EINVAL;
    // A new CQ entry under the same handle (QPs name CQs by handle), holding what this one held.
    auto fresh = std::make_unique<VerbsCq>(depth);
    for (uint64_t i = c.ring.tail(); i != c.ring.head(); i++) (void)fresh->ring.push(c.ring.at(i));  // fits: checked
    fresh->users = c.users;
    vcqs_[cq] = std::move(fresh);
    return 0;
}

uint32_t VerbsEngine::cq_clean(uint32_t cq, uint32_t qpn)
{
    if (cq >= vcqs_.size() || !vcqs_[cq]) return 0;
    VerbsCq& c = *vcqs_[cq];
    uint32_t removed = 0;
    for (uint64_t i = c.ring.tail(); i != c.ring.head(); i++) removed += c.ring.at(i).qp_num == qpn;
    if (!removed) return 0;
    auto fresh = std::make_unique<VerbsCq>(c.ring.depth());
    for (uint64_t i = c.ring.tail(); i != c.ring.head(); i++)
        if (c.ring.at(i).qp_num != qpn) (void)fresh->ring.push(c.ring.at(i));  // fewer than before: fits
    fresh->users = c.users;
    fresh->overflowed = c.overflowed;
    vcqs_[cq] = std::move(fresh);
    return removed;
}

int VerbsEngine::cq_poll(uint32_t cq, verbs::Wc* wc, int n)
{
    if (cq >= vcqs_.size() || !vcqs_[cq]) return -1;
    VerbsCq& c = *vcqs_[cq];
    int k = 0;
    while (k < n && !c.ring.empty()) {
        wc[k++] = c.ring.front();
        c.ring.pop();
    }
    // Completions queued before the overflow are still handed out; then the CQ is in error.
    if (k == 0 && c.overflowed) return -1;
    return k;
}

bool VerbsEngine::cq_overflowed(uint32_t cq) const { return cq < vcqs_.size() && vcqs_[cq] && vcqs_[cq]->overflowed; }

// The IBTA leaves a CQ overrun as a CQ error (an asynchronous IBV_EVENT_CQ_ERR): the completion
// cannot be kept, and the CQ is not usable afterwards.
void VerbsEngine::verbs_complete(uint32_t cq, const verbs::Wc& wc)
{
    VerbsCq& c = *vcqs_[cq];
    if (c.overflowed) return;
    if (!c.ring.push(wc)) {
        c.overflowed = true;
        verbs_cq_errors_++;
        exec_->verbs_cq_event(nic_, cq, true);
        exec_->verbs_async_event(verbs::AsyncEvent::CqErr, cq);
        return;
    }
    core_.note_host_event();
    exec_->verbs_cq_event(nic_, cq, wc.solicited || wc.status != verbs::WcStatus::Success);
}

}  // namespace sdr::emu
