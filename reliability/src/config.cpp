#include <sdr/reliability/codec.hpp>
#include <sdr/reliability/config.hpp>

#include <cstdlib>

namespace sdr::rel {

const char* to_string(Scheme s)
{
    switch (s) {
    case Scheme::Sr: return "sr";
    case Scheme::SrNack: return "sr-nack";
    case Scheme::EcXor: return "ec-xor";
    case Scheme::EcMds: return "ec-mds";
    case Scheme::Auto: return "auto";
    }
    return "?";
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
    if (name == "sr") c.scheme = Scheme::Sr;
    else if (name == "sr-nack") c.scheme = Scheme::SrNack;
    else if (name == "ec-xor") c.scheme = Scheme::EcXor;
    else if (name == "ec-mds") c.scheme = Scheme::EcMds;
    else if (name == "auto") c.scheme = Scheme::Auto;
    else {
        *err = "unknown scheme '" + name + "': expected sr, sr-nack, ec-xor[:k,m], ec-mds[:k,m] or auto[:k,m]";
        return false;
    }
    if (!params.empty()) {
        char* end = nullptr;
        unsigned long k = std::strtoul(params.c_str(), &end, 10);
        unsigned long m = (*end == ',') ? std::strtoul(end + 1, &end, 10) : 0;
        if (!is_ec(c.scheme) && c.scheme != Scheme::Auto)
            return *err = "scheme '" + text + "': only ec-xor, ec-mds and auto take parameters", false;
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
    if (c.scheme < Scheme::Sr || c.scheme > Scheme::Auto) return *err = "scheme is not a Scheme value", false;
    if (is_ec(c.scheme) && !Codec::valid(c.scheme == Scheme::EcXor ? CodeKind::Xor : CodeKind::Mds, c.k, c.m, err))
        return false;
    if (c.scheme == Scheme::Auto && !Codec::valid(CodeKind::Mds, c.k, c.m, err))  // XOR joins if valid too
        return *err = "auto: " + *err, false;
    if (!(c.drop_hint >= 0 && c.drop_hint < 1)) return *err = "drop_hint must lie in [0, 1)", false;
    if (!(c.rtt_ms > 0) || !(c.bw_gbps > 0)) return *err = "rtt_ms and bw_gbps must be positive", false;
    if (!(c.alpha >= 0) || !(c.fto_alpha >= 0) || !(c.reorder_us >= 0) || !(c.ack_interval_us >= 0) ||
        !(c.timeout_ms >= 0))
        return *err = "alpha, fto_alpha, reorder_us, ack_interval_us and timeout_ms must be >= 0", false;
    if (c.max_rounds < 1 || c.max_rounds > 1000) return *err = "max_rounds must lie in [1, 1000]", false;
    return true;
}

}  // namespace sdr::rel
