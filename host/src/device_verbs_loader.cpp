// The `verbs:` row of the backend table: the rdma-core backend is a separately loaded module
// (host/verbs, libsdr_hal_verbs.so), so its hal_* binding and its copy of the firmware never meet
// the emulator's in one symbol space. Found beside libsdr in sdr/ (installed: ${libdir}/sdr/;
// build tree: build/host/sdr/), or at $SDR_HAL_VERBS; loaded once, never unloaded (devices it
// opened run its code).
#include "backends.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace sdr::host {

namespace {

std::string module_path()
{
    if (const char* p = std::getenv("SDR_HAL_VERBS"); p && *p) return p;
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&open_verbs_device), &info) || !info.dli_fname) return "libsdr_hal_verbs.so";
    std::string lib = info.dli_fname;
    const size_t slash = lib.rfind('/');
    return (slash == std::string::npos ? std::string() : lib.substr(0, slash + 1)) + "sdr/libsdr_hal_verbs.so";
}

}  // namespace

std::unique_ptr<Device> open_verbs_device(const std::string& name, const std::string& arg, uint32_t num_channels,
                                          std::string* err)
{
    static std::mutex mu;
    static ModuleOpenFn open = nullptr;
    static std::string why;
    {
        std::lock_guard<std::mutex> g(mu);
        if (!open && why.empty()) {
            const std::string path = module_path();
            void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                const char* e = dlerror();
                why = "cannot load the rdma-core backend " + path + ": " + (e ? e : "?") +
                      " (it needs libibverbs.so.1: install libibverbs1; SDR_HAL_VERBS names another module)";
            } else if (!(open = reinterpret_cast<ModuleOpenFn>(dlsym(h, kVerbsModuleOpen)))) {
                why = path + " has no " + kVerbsModuleOpen + ": not SDR's rdma-core backend";
            }
        }
    }
    if (!open) return *err = "device '" + name + "': " + why, nullptr;
    if (arg.empty()) return *err = "device '" + name + "': expected verbs:IBDEV (an RDMA device, see ibv_devices)", nullptr;
    std::unique_ptr<Device> d(open(&name, &arg, num_channels, err));
    if (!d) *err = "device '" + name + "': " + *err;
    return d;
}

}  // namespace sdr::host
