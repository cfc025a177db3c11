// Root keys on SDR's own verbs device: the provider's direct-verbs extension (sdrdv.h), found
// in the provider libibverbs loaded (dl_iterate_phdr, then dlopen with RTLD_NOLOAD + dlsym).
#include "root_keys.hpp"

#include <sdr/verbs/sdrdv.h>

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <map>

namespace sdr::hal_verbs {

namespace {

int find_provider(dl_phdr_info* info, size_t, void* out)
{
    const char* name = info->dlpi_name ? info->dlpi_name : "";
    const char* base = std::strrchr(name, '/');
    base = base ? base + 1 : name;
    if (std::strncmp(base, SDRDV_PROVIDER_PREFIX, std::strlen(SDRDV_PROVIDER_PREFIX)) != 0) return 0;
    *static_cast<std::string*>(out) = name;
    return 1;
}

bool lookup(sdrdv_ops* ops, std::string* why)
{
    std::string path;
    dl_iterate_phdr(find_provider, &path);
    if (path.empty()) return *why = "SDR's verbs provider (" SDRDV_PROVIDER_PREFIX "*.so) is not loaded", false;
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (!h) return *why = path + ": " + dlerror(), false;
    auto sym = [&](const char* n) { return dlsym(h, n); };
    ops->is_supported = reinterpret_cast<decltype(ops->is_supported)>(sym("sdrdv_is_supported"));
    ops->root_key_create = reinterpret_cast<decltype(ops->root_key_create)>(sym("sdrdv_root_key_create"));
    ops->root_key_set = reinterpret_cast<decltype(ops->root_key_set)>(sym("sdrdv_root_key_set"));
    ops->root_key_null = reinterpret_cast<decltype(ops->root_key_null)>(sym("sdrdv_root_key_null"));
    ops->root_key_destroy = reinterpret_cast<decltype(ops->root_key_destroy)>(sym("sdrdv_root_key_destroy"));
    dlclose(h);  // drops only our reference: libibverbs keeps the provider loaded
    if (!ops->is_supported || !ops->root_key_create || !ops->root_key_set || !ops->root_key_null ||
        !ops->root_key_destroy)
        return *why = path + " has no sdrdv root keys (an older provider?)", false;
    return true;
}

class SdrdvRootKeys final : public RootKeys {
public:
    SdrdvRootKeys(const sdrdv_ops& ops, ibv_pd* pd) : ops_(ops), pd_(pd) {}
    ~SdrdvRootKeys() override
    {
        for (auto& [rkey, k] : keys_) ops_.root_key_destroy(k);
    }
    const char* kind() const override { return "sdrdv"; }
    uint32_t create(uint32_t nslots, uint64_t slot_bytes, std::string* err) override
    {
        sdrdv_root_key* k = ops_.root_key_create(pd_, nslots, slot_bytes);
        if (!k) return *err = std::string("sdrdv_root_key_create: ") + std::strerror(errno), 0;
        keys_[k->rkey] = k;
        return k->rkey;
    }
    bool set(uint32_t rkey, uint32_t slot, ibv_mr* mr, uint64_t addr, uint64_t len, std::string* err) override
    {
        auto it = keys_.find(rkey);
        int e = it == keys_.end() ? EINVAL : ops_.root_key_set(it->second, slot, mr, addr, len);
        return e ? (*err = std::string("sdrdv_root_key_set: ") + std::strerror(e), false) : true;
    }
    bool null(uint32_t rkey, uint32_t slot, std::string* err) override
    {
        auto it = keys_.find(rkey);
        int e = it == keys_.end() ? EINVAL : ops_.root_key_null(it->second, slot);
        return e ? (*err = std::string("sdrdv_root_key_null: ") + std::strerror(e), false) : true;
    }
    void destroy(uint32_t rkey) override
    {
        auto it = keys_.find(rkey);
        if (it == keys_.end()) return;
        ops_.root_key_destroy(it->second);
        keys_.erase(it);
    }

private:
    sdrdv_ops ops_;
    ibv_pd* pd_;
    std::map<uint32_t, sdrdv_root_key*> keys_;
};

}  // namespace

std::unique_ptr<RootKeys> make_sdrdv_root_keys(ibv_context* ctx, ibv_pd* pd, std::string* why)
{
    sdrdv_ops ops{};
    if (!lookup(&ops, why)) return nullptr;
    if (!ops.is_supported(ctx)) return *why = "not a device of SDR's verbs provider", nullptr;
    return std::make_unique<SdrdvRootKeys>(ops, pd);
}

}  // namespace sdr::hal_verbs
