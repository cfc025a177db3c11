// The registry of reliability schemes: the lines of sdr_rel_schemes.def, each naming its file's
// SchemeOps. Adding a scheme is its file plus one line there.
#include <sdr/reliability/scheme.hpp>

#include <array>

namespace sdr::rel {

namespace {
constexpr std::array kSchemes{
#define SDR_REL_SCHEME(id, name, c, cxx) &k##cxx##Ops,
#include <sdr_rel_schemes.def>
#undef SDR_REL_SCHEME
};
}  // namespace

// auto is no scheme of its own: until the receiver's CTS names a code, a message is its data.
// Its k, m are the code its EC candidates start from, so they must suit ec-mds.
const SchemeOps kAutoOps{
    .id = Scheme::Auto,
    .takes_params = true,
    .repair = Repair::Timer,
    .valid = [](uint32_t k, uint32_t m, std::string* err) {
        if (kEcMdsOps.valid(k, m, err)) return true;
        *err = "auto: " + *err;
        return false;
    },
    .parity_slots = nullptr,
    .parity_first = nullptr,
    .decodable = nullptr,
    .coder = nullptr,
    .estimate = nullptr,
    .mean = nullptr,
    .cts_params = nullptr,
    .repair_request = nullptr,
};

std::span<const SchemeOps* const> registered_schemes() { return kSchemes; }

const SchemeOps* find_scheme(std::string_view name)
{
    if (name == kAutoOps.name()) return &kAutoOps;
    for (const SchemeOps* s : kSchemes)
        if (name == s->name()) return s;
    return nullptr;
}

std::string scheme_list()
{
    std::string s;
    for (const SchemeOps* o : kSchemes) s += std::string(s.empty() ? "" : ", ") + o->name() + (o->takes_params ? ":k,m" : "");
    return s;
}

// By table: the engines ask for a message's scheme several times per progress call.
const SchemeOps* find_scheme(uint8_t wire_id)
{
    static const std::array<const SchemeOps*, 256> by_id = [] {
        std::array<const SchemeOps*, 256> t{};
        t[static_cast<uint8_t>(Scheme::Auto)] = &kAutoOps;
        for (const SchemeOps* s : kSchemes) t[static_cast<uint8_t>(s->id)] = s;
        return t;
    }();
    return by_id[wire_id];
}

const SchemeOps& ops(Scheme s)
{
    const SchemeOps* o = find_scheme(static_cast<uint8_t>(s));
    return o ? *o : kSrOps;  // Config and CtrlMsg hold registered ids only (validate, decode)
}

bool is_ec(Scheme s) { return ops(s).coded(); }

}  // namespace sdr::rel
