#include <sdr/reliability/config.hpp>
#include <sdr/reliability/scheme.hpp>

#include <cstdlib>

namespace sdr::rel {

const char* to_string(Scheme s)
{
    const char* name = scheme_name(s);
    return name ? name : "?";
}

std::string to_string(const Code& c)
{
    std::string s = to_string(c.scheme);
    if (is_ec(c.scheme)) s += ":" + std::to_string(c.k) + "," + std::to_string(c.m);
    return s;
}

bool parse_scheme(const std::string& text, Config* cfg, std::string* err)
{
    std::string name = text, params;
    if (auto colon = text.find(':'); colon != std::string::npos) {
        name = text.substr(0, colon);
        params = text.substr(colon + 1);
    }
    Config c = *cfg;
    const SchemeOps* o = find_scheme(name);
    if (!o) {
        *err = "unknown scheme '" + name + "': expected";
        const char* sep = " ";
        for (const SchemeOps* s : registered_schemes()) {
            *err += sep + std::string(s->name()) + (s->takes_params ? "[:k,m]" : "");
            sep = ", ";
        }
        *err += " or auto[:k,m]";
        return false;
    }
    c.scheme = o->id;
    if (!params.empty()) {
        char* end = nullptr;
        unsigned long k = std::strtoul(params.c_str(), &end, 10);
        unsigned long m = (*end == ',') ? std::strtoul(end + 1, &end, 10) : 0;
        if (!o->takes_params) {
            *err = "scheme '" + text + "': only ";
            for (const SchemeOps* s : registered_schemes())
                if (s->takes_params) *err += std::string(s->name()) + ", ";
            err->resize(err->size() - 2);
            *err += " and auto take parameters";
            return false;
        }
        if (*end || k == 0 || m == 0) {
            *err = "scheme '" + text + "': parameters are written :k,m with k, m >= 1 (e.g. ec-mds:32,8)";
            return false;
        }
        if (k > 255 || m > 255 || k + m > 255) return *err = "scheme '" + text + "': k + m <= 255 (ISA-L's GF(2^8) limit)", false;
        c.k = static_cast<uint32_t>(k);
        c.m = static_cast<uint32_t>(m);
    }
    if (!validate(c, err)) return false;
    *cfg = c;
    return true;
}

bool validate(const Config& c, std::string* err)
{
    const SchemeOps* o = find_scheme(static_cast<uint8_t>(c.scheme));
    if (!o) return *err = "scheme is not a registered scheme's id", false;
    if (o->valid && !o->valid(c.k, c.m, err)) return false;
    if (!(c.drop_hint >= 0 && c.drop_hint < 1)) return *err = "drop_hint must lie in [0, 1)", false;
    if (!(c.rtt_ms > 0) || !(c.bw_gbps > 0)) return *err = "rtt_ms and bw_gbps must be positive", false;
    if (!(c.alpha >= 0) || !(c.fto_alpha >= 0) || !(c.reorder_us >= 0) || !(c.ack_interval_us >= 0) ||
        !(c.timeout_ms >= 0))
        return *err = "alpha, fto_alpha, reorder_us, ack_interval_us and timeout_ms must be >= 0", false;
    if (c.max_rounds < 1 || c.max_rounds > 1000) return *err = "max_rounds must lie in [1, 1000]", false;
    return true;
}

}  // namespace sdr::rel
