// Root keys on any rdma-core device: zero-based staging regions, and a copy per chunk
// (root_keys.hpp, StagingRootKeys; host/verbs/README.md, "Root and NULL keys").
#include "root_keys.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sdr::hal_verbs {

namespace {

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

// Staging memory is mapped, not allocated: untouched slots cost no memory until the device pins
// them, and a region is page-aligned as devices like it.
uint8_t* map_bytes(size_t bytes)
{
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}

}  // namespace

std::unique_ptr<StagingRootKeys> StagingRootKeys::make(ibv_pd* pd, const fw_device* fw, std::string* why)
{
    // Probe once: a device that cannot place a write at address 0 of a region cannot serve SDR's
    // zero-based offsets this way either.
    const size_t page = 4096;
    uint8_t* p = map_bytes(page);
    if (!p) return *why = std::string("staging: mmap: ") + std::strerror(errno), nullptr;
    ibv_mr* mr = ibv_reg_mr_iova(pd, p, page, 0, kAccess);
    const int e = errno;
    if (mr) ibv_dereg_mr(mr);
    munmap(p, page);
    if (!mr) return *why = std::string("staging: ibv_reg_mr_iova with iova 0: ") + std::strerror(e), nullptr;
    return std::make_unique<StagingRootKeys>(pd, fw);
}

StagingRootKeys::~StagingRootKeys()
{
    for (auto& [rkey, r] : regions_) release(r);
}

void StagingRootKeys::release(Region& r)
{
    if (r.mr) ibv_dereg_mr(r.mr);
    if (r.base) munmap(r.base, r.bytes);
    r = Region{};
}

uint32_t StagingRootKeys::create(uint32_t nslots, uint64_t slot_bytes, std::string* err)
{
    if (!nslots || !slot_bytes || slot_bytes > SIZE_MAX / nslots)
        return *err = "staging: " + std::to_string(nslots) + " slots of " + std::to_string(slot_bytes) + " B", 0;
    Region r;
    r.bytes = static_cast<size_t>(nslots * slot_bytes);
    r.slot_bytes = slot_bytes;
    if (!(r.base = map_bytes(r.bytes)))
        return *err = "staging: mmap of " + std::to_string(r.bytes) + " B: " + std::strerror(errno), 0;
    if (!(r.mr = ibv_reg_mr_iova(pd_, r.base, r.bytes, 0, kAccess))) {
        *err = "staging: ibv_reg_mr_iova of " + std::to_string(r.bytes) + " B: " + std::strerror(errno);
        release(r);
        return 0;
    }
    r.slots.assign(nslots, Target{});
    const uint32_t rkey = r.mr->rkey;
    std::lock_guard lock(mu_);
    regions_[rkey] = std::move(r);
    return rkey;
}

bool StagingRootKeys::set(uint32_t rkey, uint32_t slot, ibv_mr* mr, uint64_t addr, uint64_t len, std::string* err)
{
    const uint64_t base = reinterpret_cast<uint64_t>(mr->addr);
    if (addr < base || len > mr->length || addr - base > mr->length - len)
        return *err = "staging: the buffer is not inside its region", false;
    std::lock_guard lock(mu_);
    auto it = regions_.find(rkey);
    if (it == regions_.end() || slot >= it->second.slots.size() || len > it->second.slot_bytes)
        return *err = "staging: no such root key, slot, or a buffer larger than the slot", false;
    it->second.slots[slot] = Target{reinterpret_cast<uint8_t*>(addr), len};
    return true;
}

bool StagingRootKeys::null(uint32_t rkey, uint32_t slot, std::string* err)
{
    std::lock_guard lock(mu_);
    auto it = regions_.find(rkey);
    if (it == regions_.end() || slot >= it->second.slots.size()) return *err = "staging: no such root key or slot", false;
    it->second.slots[slot] = Target{};
    return true;
}

void StagingRootKeys::destroy(uint32_t rkey)
{
    std::lock_guard lock(mu_);
    auto it = regions_.find(rkey);
    if (it == regions_.end()) return;
    release(it->second);
    regions_.erase(it);
    std::erase_if(rkey_of_, [&](const auto& kv) { return kv.second == rkey; });
}

void StagingRootKeys::attach(uint32_t qp_index, uint64_t window)
{
    std::lock_guard lock(mu_);
    qp_of_window_[window] = qp_index;  // a window's memory reused by a later QP names that QP
}

void StagingRootKeys::bind(uint32_t qp_index, uint32_t generation, uint32_t rkey)
{
    std::lock_guard lock(mu_);
    rkey_of_[{qp_index, generation}] = rkey;
}

// On a worker, in the firmware's hal_window_add64: word is (slot, bitmap word) of the QP's
// receive window, bit the chunk's. The slot's tag says which generation, so which staging
// region, holds the chunk; the root-key entry says where it goes.
void StagingRootKeys::before_chunk_bit(const hal_window* win, uint64_t word, uint64_t bit)
{
    Target t;
    const uint8_t* src;
    uint32_t chunk_log, chunk;
    {
        std::lock_guard lock(mu_);
        auto q = qp_of_window_.find(win->host_addr);
        if (q == qp_of_window_.end()) return;
        const fw_rx_qp* rx = __atomic_load_n(&fw_->qps[q->second].rx, __ATOMIC_ACQUIRE);
        if (!rx || !rx->slot_window_words) return;
        const uint64_t slot = word / rx->slot_window_words, w = word % rx->slot_window_words;
        if (slot > rx->slot_mask || w >= rx->bitmap_words) return;
        const uint32_t tag = __atomic_load_n(&rx->slots[slot].tag, __ATOMIC_ACQUIRE);
        if (!(tag & FW_SLOT_ARMED)) return;
        auto k = rkey_of_.find({q->second, (tag & ~FW_SLOT_ARMED) >> 24});
        if (k == rkey_of_.end()) return;
        auto r = regions_.find(k->second);
        if (r == regions_.end() || !bit) return;
        t = r->second.slots[slot];
        src = r->second.base + slot * r->second.slot_bytes;
        chunk_log = rx->mtu_log + rx->log_packets_per_chunk;
        chunk = static_cast<uint32_t>(w * 64 + static_cast<uint64_t>(__builtin_ctzll(bit)));
    }
    const uint64_t off = uint64_t{chunk} << chunk_log;
    if (!t.dst || off >= t.len) return;
    std::memcpy(t.dst + off, src + off, std::min<uint64_t>(uint64_t{1} << chunk_log, t.len - off));
}

}  // namespace sdr::hal_verbs
