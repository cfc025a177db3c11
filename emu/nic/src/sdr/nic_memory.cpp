// The NIC's memory and keys: registered regions (lkeys), NIC memory for firmware state, and
// the zero-based indirect root keys whose entries point a slot at a posted buffer or NULL.

#include <sdr/emu/nic.hpp>

#include <cstdlib>
#include <cstring>

namespace sdr::emu {

uint32_t Nic::mr_reg(void* addr, size_t len)
{
    if (!addr || len == 0) return 0;
    size_t i = 0;
    while (i < mrs_.size() && mrs_[i].live) i++;
    if (i >> NicIds::kLkeyIndexBits) return 0;
    if (i == mrs_.size()) mrs_.emplace_back();
    MemoryRegion& r = mrs_[i];
    r = {static_cast<uint8_t*>(addr), len, ids_.lkey(static_cast<uint32_t>(i), r.lkey), true};
    return r.lkey;
}

bool Nic::mr_dereg(uint32_t lkey)
{
    uint32_t i = NicIds::lkey_index(lkey);
    if (i >= mrs_.size() || !mrs_[i].live || mrs_[i].lkey != lkey) return false;
    // A root-key entry must never outlive the memory it points at.
    for (auto& rk : root_keys_)
        for (auto& e : rk.entries)
            if (e.lkey == lkey) e = RootEntry{};
    mrs_[i] = MemoryRegion{nullptr, 0, lkey, false};
    return true;
}

void* Nic::nic_alloc(size_t bytes)
{
    size_t n = (bytes + 63) & ~size_t{63};
    void* p = std::aligned_alloc(64, n ? n : 64);
    if (p) {
        std::memset(p, 0, n);
        nic_mem_bytes_ += n;
    }
    return p;
}

void Nic::nic_free(void* p) { std::free(p); }

uint32_t Nic::root_key_create(uint32_t nslots, uint64_t slot_bytes)
{
    size_t i = 0;
    while (i < root_keys_.size() && root_keys_[i].live) i++;
    if (i >> NicIds::kRootKeyIndexBits) return 0;
    if (i == root_keys_.size()) root_keys_.emplace_back();
    RootKey& rk = root_keys_[i];
    rk.live = true;
    rk.rkey = ids_.root_key(static_cast<uint32_t>(i), rk.rkey);
    rk.slot_bytes = slot_bytes;
    rk.slot_shift = slot_bytes > 1 && (slot_bytes & (slot_bytes - 1)) == 0 ? static_cast<uint32_t>(__builtin_ctzll(slot_bytes)) : 0;
    rk.entries.assign(nslots, RootEntry{});
    return rk.rkey;
}

void Nic::root_key_destroy(uint32_t rkey)
{
    if (RootKey* rk = root_key(rkey)) {
        rk->live = false;
        rk->entries.clear();
    }
}

bool Nic::root_key_set(uint32_t rkey, uint32_t slot, uint32_t lkey, uint64_t addr, uint64_t len)
{
    RootKey* rk = root_key(rkey);
    if (!rk || slot >= rk->entries.size() || len > rk->slot_bytes || !mr_covers(lkey, addr, len))
        return false;
    rk->entries[slot] = {reinterpret_cast<uint8_t*>(addr), len, lkey};
    return true;
}

void Nic::root_key_null(uint32_t rkey, uint32_t slot)
{
    RootKey* rk = root_key(rkey);
    if (rk && slot < rk->entries.size()) rk->entries[slot] = RootEntry{};
}

}  // namespace sdr::emu
