// The direct-verbs extension (include/sdr/verbs/sdrdv.h): SDR's root keys as indirect keys of
// the NIC model (VerbsEngine::root_key_*), exported from the provider (provider.map).
#include <sdr/verbs/sdrdv.h>

#include "engine.hpp"
#include "provider.hpp"

#include <cerrno>
#include <mutex>
#include <new>

namespace sdr::verbs {
namespace {

struct RootKey {
    sdrdv_root_key pub;  // first: the caller's pointer is this
    Pd* pd;
};

RootKey* to_key(sdrdv_root_key* k) { return reinterpret_cast<RootKey*>(k); }

}  // namespace
}  // namespace sdr::verbs

using sdr::verbs::Pd;
using sdr::verbs::RootKey;

extern "C" {

__attribute__((visibility("default"))) int sdrdv_is_supported(ibv_context* ctx)
{
    return ctx && sdr::verbs::is_provider_device(ctx->device) ? 1 : 0;
}

__attribute__((visibility("default"))) sdrdv_root_key* sdrdv_root_key_create(ibv_pd* ibpd, uint32_t nslots,
                                                                             uint64_t slot_bytes)
{
    if (!ibpd || !sdrdv_is_supported(ibpd->context)) {
        errno = EOPNOTSUPP;
        return nullptr;
    }
    if (nslots == 0 || slot_bytes == 0) {
        errno = EINVAL;
        return nullptr;
    }
    auto* k = new (std::nothrow) RootKey{};
    if (!k) {
        errno = ENOMEM;
        return nullptr;
    }
    Pd* pd = reinterpret_cast<Pd*>(ibpd);
    k->pd = pd;
    {
        std::lock_guard lock(pd->engine->lock());
        k->pub.rkey = pd->engine->nic().verbs().root_key_create(pd->h, nslots, slot_bytes);
    }
    if (k->pub.rkey == 0) {
        delete k;
        errno = ENOMEM;
        return nullptr;
    }
    return &k->pub;
}

__attribute__((visibility("default"))) int sdrdv_root_key_set(sdrdv_root_key* key, uint32_t slot, ibv_mr* mr,
                                                              uint64_t addr, uint64_t len)
{
    if (!key || !mr) return EINVAL;
    if (!sdrdv_is_supported(mr->context)) return EOPNOTSUPP;
    RootKey* k = sdr::verbs::to_key(key);
    std::lock_guard lock(k->pd->engine->lock());
    return k->pd->engine->nic().verbs().root_key_set(key->rkey, slot, mr->lkey, addr, len);
}

__attribute__((visibility("default"))) int sdrdv_root_key_null(sdrdv_root_key* key, uint32_t slot)
{
    if (!key) return EINVAL;
    RootKey* k = sdr::verbs::to_key(key);
    std::lock_guard lock(k->pd->engine->lock());
    return k->pd->engine->nic().verbs().root_key_null(key->rkey, slot);
}

__attribute__((visibility("default"))) int sdrdv_root_key_destroy(sdrdv_root_key* key)
{
    if (!key) return EINVAL;
    RootKey* k = sdr::verbs::to_key(key);
    int err;
    {
        std::lock_guard lock(k->pd->engine->lock());
        err = k->pd->engine->nic().verbs().mr_dereg(key->rkey);
    }
    if (err) return err;
    delete k;
    return 0;
}

}  // extern "C"
