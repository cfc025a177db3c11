// The extended QP attributes (sdr_ext.h): the number of generations G, from the attribute or
// the published SDK's SDR_QP_NUM_GENERATIONS, the maximum packet lifetime L, and the per-packet
// transport, from the attribute or the published SDK's SDR_USE_UC_QP (RC by default).
#include <sdr_ext.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "internal.hpp"

static_assert(SDR_MAX_GENERATIONS == FW_MAX_GENERATIONS, "sdr_ext.h and the firmware disagree on G's limit");

namespace sdr::host {

namespace {

constexpr uint32_t kDefaultGenerations = 2;

std::string range() { return "1.." + std::to_string(FW_MAX_GENERATIONS) + " (the transport-QP tag has 3 generation bits)"; }

// G from SDR_QP_NUM_GENERATIONS (read at every QP creation, as the published SDK does).
bool generations_from_env(uint32_t* g, std::string* err)
{
    const char* s = std::getenv("SDR_QP_NUM_GENERATIONS");
    if (!s) {
        *g = kDefaultGenerations;
        return true;
    }
    char* end = nullptr;
    unsigned long v = std::strtoul(s, &end, 10);
    if (end == s || *end || *s == '-' || *s == '+' || v < 1 || v > FW_MAX_GENERATIONS) {
        *err = std::string("SDR_QP_NUM_GENERATIONS='") + s + "': expected a number of generations in " + range();
        return false;
    }
    *g = static_cast<uint32_t>(v);
    return true;
}

// RC unless SDR_USE_UC_QP is 1 (read at every QP creation, as the published SDK does).
bool transport_from_env(bool* rc, std::string* err)
{
    const char* s = std::getenv("SDR_USE_UC_QP");
    if (!s || !std::strcmp(s, "0") || !*s) {
        *rc = true;
        return true;
    }
    if (std::strcmp(s, "1") != 0) {
        *err = std::string("SDR_USE_UC_QP='") + s + "': expected 1 (UC transport QPs) or 0 (RC, the default)";
        return false;
    }
    *rc = false;
    return true;
}

}  // namespace

bool resolve_ext(const sdr_qp_attr_ext* ext, const Device& dev, ExtValues* out, std::string* err)
{
    sdr_qp_attr_ext e;
    sdr_qp_attr_ext_init(&e);
    if (ext) e = *ext;
    if (e.num_generations > FW_MAX_GENERATIONS) {
        *err = "num_generations must be 0 (SDR_QP_NUM_GENERATIONS, else 2) or " + range() + ", got " +
               std::to_string(e.num_generations);
        return false;
    }
    if (e.num_generations) out->generations = e.num_generations;
    else if (!generations_from_env(&out->generations, err)) return false;
    if (e.max_packet_lifetime_ns != SDR_LIFETIME_FROM_PATH && e.max_packet_lifetime_ns > SDR_MAX_LIFETIME_NS) {
        *err = "max_packet_lifetime_ns must be at most " + std::to_string(SDR_MAX_LIFETIME_NS) +
               " (one minute) or SDR_LIFETIME_FROM_PATH, got " + std::to_string(e.max_packet_lifetime_ns);
        return false;
    }
    if (e.transport > SDR_TRANSPORT_UC) {
        *err = "transport must be SDR_TRANSPORT_FROM_ENV (0), SDR_TRANSPORT_RC (1) or SDR_TRANSPORT_UC (2), got " +
               std::to_string(e.transport);
        return false;
    }
    if (e.transport != SDR_TRANSPORT_FROM_ENV) out->rc = e.transport == SDR_TRANSPORT_RC;
    else if (!transport_from_env(&out->rc, err)) return false;
    if (e.spray > 1) {
        *err = "spray must be 0 (one UDP source port) or 1 (packet spraying), got " + std::to_string(e.spray);
        return false;
    }
    out->spray = e.spray == 1;
    out->lifetime_from_path = e.max_packet_lifetime_ns == SDR_LIFETIME_FROM_PATH;
    // A device bound beyond the explicit limit (minutes of configured delay) is capped there.
    out->lifetime_ns = out->lifetime_from_path ? std::min<uint64_t>(dev.max_packet_lifetime_ns(), SDR_MAX_LIFETIME_NS)
                                               : e.max_packet_lifetime_ns;
    return true;
}

}  // namespace sdr::host

extern "C" {

void sdr_qp_attr_ext_init(sdr_qp_attr_ext* ext)
{
    if (!ext) return;
    ext->num_generations = 0;
    ext->max_packet_lifetime_ns = SDR_LIFETIME_FROM_PATH;
    ext->transport = SDR_TRANSPORT_FROM_ENV;
    ext->spray = 0;
}

int sdr_qp_attr_ext_get(sdr_qp* qp, sdr_qp_attr_ext* ext)
{
    if (!qp || !ext) return sdr::host::set_error("sdr_qp_attr_ext_get: qp or ext is NULL");
    ext->num_generations = qp->generations;
    ext->max_packet_lifetime_ns = qp->lifetime_ns;
    ext->transport = qp->rc ? SDR_TRANSPORT_RC : SDR_TRANSPORT_UC;
    ext->spray = qp->spray ? 1 : 0;
    return SDR_SUCCESS;
}

}  // extern "C"
