// Topology::parse: a topology from JSON (text or a file) or from "type:key=value,...". Both
// forms name the same flat keys; an unknown key is an error, so a typo never goes unnoticed.
#include <sdr/emu/fabric.hpp>
#include <sdr/emu/topology.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

namespace sdr::emu {

namespace {

using json = nlohmann::json;

// "fat_tree:k=8,ecn=0" as the JSON object {"type": "fat_tree", "k": 8, "ecn": 0}; values that
// read as numbers are numbers, "true"/"false" booleans, anything else a string.
bool spec_to_json(const std::string& spec, json* out, std::string* err)
{
    json j = json::object();
    const size_t colon = spec.find(':');
    j["type"] = spec.substr(0, colon);
    if (colon != std::string::npos) {
        std::stringstream ss(spec.substr(colon + 1));
        std::string item;
        while (std::getline(ss, item, ',')) {
            const size_t eq = item.find('=');
            if (eq == std::string::npos || eq == 0) {
                *err = "topology '" + spec + "': expected key=value, got '" + item + "'";
                return false;
            }
            std::string key = item.substr(0, eq), val = item.substr(eq + 1);
            json v = json::parse(val, nullptr, false);
            j[key] = v.is_discarded() || v.is_object() || v.is_array() ? json(val) : v;
        }
    }
    *out = std::move(j);
    return true;
}

bool load_json(const std::string& spec, json* out, std::string* err)
{
    if (!spec.empty() && spec.front() == '{') {
        *out = json::parse(spec, nullptr, false);
        if (out->is_discarded()) *err = "topology: the JSON text does not parse";
        return !out->is_discarded();
    }
    std::ifstream f(spec);
    if (f) {
        *out = json::parse(f, nullptr, false);
        if (out->is_discarded() || !out->is_object()) {
            *err = "topology file " + spec + ": not a JSON object";
            return false;
        }
        return true;
    }
    if (spec.find('/') != std::string::npos || spec.ends_with(".json")) {
        *err = "topology file " + spec + ": cannot be read";
        return false;
    }
    return spec_to_json(spec, out, err);
}

// Reads the keys of one object, each once; what is left unread is reported as unknown.
class Keys {
public:
    Keys(const json& j, std::string* err) : j_(j), err_(err) {}
    bool ok() const { return ok_; }
    bool num(const char* key, double lo, double hi, double* v)
    {
        used_.insert(key);
        if (!ok_ || !j_.contains(key)) return ok_;
        const json& x = j_[key];
        double d = x.is_boolean() ? (x.get<bool>() ? 1.0 : 0.0) : x.is_number() ? x.get<double>() : NAN;
        if (!(d >= lo && d <= hi)) return fail(std::string(key) + " must be a number in [" + fmt(lo) + ", " + fmt(hi) + "]");
        *v = d;
        return true;
    }
    template <class T>
    bool whole(const char* key, double lo, double hi, T* v)
    {
        double d = static_cast<double>(*v);
        if (!num(key, lo, hi, &d)) return false;
        if (d != std::floor(d)) return fail(std::string(key) + " must be a whole number");
        *v = static_cast<T>(d);
        return true;
    }
    bool flag(const char* key, bool* v)
    {
        double d = *v;
        if (!num(key, 0, 1, &d)) return false;
        *v = d != 0;
        return true;
    }
    bool str(const char* key, std::string* v)
    {
        used_.insert(key);
        if (!ok_ || !j_.contains(key)) return ok_;
        if (!j_[key].is_string()) return fail(std::string(key) + " must be a string");
        *v = j_[key].get<std::string>();
        return true;
    }
    bool mark(const char* key)
    {
        used_.insert(key);
        return ok_;
    }
    bool finish()
    {
        for (const auto& [k, v] : j_.items())
            if (!used_.count(k)) return fail("unknown key '" + k + "'");
        return ok_;
    }
    bool fail(std::string m)
    {
        if (ok_) *err_ = std::move(m);
        ok_ = false;
        return false;
    }

private:
    static std::string fmt(double d)
    {
        std::ostringstream o;
        o << d;
        return o.str();
    }
    const json& j_;
    std::string* err_;
    std::set<std::string> used_;
    bool ok_ = true;
};

bool read_switch(Keys& k, SwitchParams* s)
{
    std::string buffer = s->shared_buffer ? "shared" : "per_port";
    double latency_ns = static_cast<double>(s->latency_ps) / kPsPerNs;
    k.str("buffer", &buffer);
    k.whole("buffer_bytes", 1, 1e12, &s->buffer_bytes);
    k.whole("reserve_bytes", 0, 1e9, &s->reserve_bytes);
    k.num("dt_alpha", 1.0 / 1024, 1024, &s->dt_alpha);
    k.flag("ecn", &s->ecn);
    k.whole("kmin_bytes", 0, 1e12, &s->kmin_bytes);
    k.whole("kmax_bytes", 0, 1e12, &s->kmax_bytes);
    k.num("pmax", 0, 1, &s->pmax);
    k.flag("pfc", &s->pfc);
    k.whole("pfc_xoff_bytes", 0, 1e12, &s->pfc_xoff_bytes);
    k.whole("pfc_xon_bytes", 0, 1e12, &s->pfc_xon_bytes);
    k.num("latency_ns", 0, 1e9, &latency_ns);
    if (!k.ok()) return false;
    if (buffer != "shared" && buffer != "per_port") return k.fail("buffer must be 'shared' or 'per_port'");
    s->shared_buffer = buffer == "shared";
    s->latency_ps = static_cast<SimTime>(std::llround(latency_ns * kPsPerNs));
    if (s->kmax_bytes && s->kmin_bytes > s->kmax_bytes) return k.fail("kmin_bytes must not exceed kmax_bytes");
    if (s->pfc_xon_bytes && s->pfc_xon_bytes > s->pfc_xoff_bytes) return k.fail("pfc_xon_bytes must not exceed pfc_xoff_bytes");
    return true;
}

bool read_custom_links(const json& j, Keys& k, Topology* t)
{
    k.mark("switches");
    k.mark("links");
    if (!j.contains("switches") || !j["switches"].is_array() || !j.contains("links") || !j["links"].is_array())
        return k.fail("a custom topology needs arrays 'switches' (names) and 'links'");
    for (const json& s : j["switches"]) t->add_switch(s.is_string() ? s.get<std::string>() : s.dump());
    for (const json& l : j["links"]) {
        if (!l.is_object()) return k.fail("each link is an object {\"a\", \"b\", \"gbps\", \"delay_us\", \"loss\"}");
        std::string lerr;
        Keys lkeys(l, &lerr);
        TopoLink tl;
        double delay_us = 1.0;
        lkeys.whole("a", 0, 65535, &tl.a);
        lkeys.whole("b", 0, 65535, &tl.b);
        lkeys.num("gbps", 1e-3, 1e6, &tl.gbps);
        lkeys.num("delay_us", 0, 1e9, &delay_us);
        lkeys.num("loss", 0, 1, &tl.impairment.loss);
        if (!lkeys.finish()) return k.fail("link " + l.dump() + ": " + lerr);
        tl.delay_ps = static_cast<SimTime>(std::llround(delay_us * 1e6));
        t->links.push_back(tl);
    }
    return true;
}

}  // namespace

bool Topology::parse(const std::string& spec, const LinkParams& link, Topology* out, std::string* err)
{
    json j;
    if (!load_json(spec, &j, err)) return false;
    if (!j.is_object()) {
        *err = "topology: expected a JSON object";
        return false;
    }
    std::string kerr;
    Keys k(j, &kerr);
    std::string type;
    k.str("type", &type);
    uint32_t leaves = 2, spines = 2, hosts_per_leaf = 4, k_ary = 4, hosts = 0;
    double gbps = link.bandwidth_gbps, oversub = 1.0, delay_us = 1.0;
    TopoLink lh;
    lh.gbps = link.bandwidth_gbps;
    double lh_rtt_ms = link.rtt_ms;
    lh.impairment = link.impairment;
    k.num("gbps", 1e-3, 1e6, &gbps);
    k.num("delay_us", 0, 1e9, &delay_us);
    const SimTime delay_ps = static_cast<SimTime>(std::llround(delay_us * 1e6));
    SwitchParams sw;
    read_switch(k, &sw);
    bool dcqcn = true;
    k.flag("dcqcn", &dcqcn);
    Topology t;
    if (type == "leaf_spine") {
        k.whole("leaves", 1, 4096, &leaves);
        k.whole("spines", 1, 4096, &spines);
        k.whole("hosts_per_leaf", 1, 4096, &hosts_per_leaf);
        k.num("oversubscription", 1e-3, 1e3, &oversub);
        t = leaf_spine(leaves, spines, hosts_per_leaf, gbps, oversub, delay_ps);
    } else if (type == "fat_tree") {
        uint32_t o = 1;
        k.whole("k", 2, 64, &k_ary);
        k.whole("oversubscription", 1, 64, &o);
        if (k_ary % 2) k.fail("k must be even");
        t = fat_tree(k_ary, gbps, o, delay_ps);
    } else if (type == "two_datacenters" || type == "two_dc") {
        hosts_per_leaf = 2;
        k.whole("leaves", 1, 4096, &leaves);
        k.whole("spines", 1, 4096, &spines);
        k.whole("hosts_per_leaf", 1, 4096, &hosts_per_leaf);
        k.num("long_haul_gbps", 1e-3, 1e6, &lh.gbps);
        k.num("long_haul_rtt_ms", 0, 1e6, &lh_rtt_ms);
        k.num("long_haul_loss", 0, 1, &lh.impairment.loss);
        lh.delay_ps = static_cast<SimTime>(std::llround(lh_rtt_ms * 1e9 / 2.0));
        t = two_datacenters(leaves, spines, hosts_per_leaf, gbps, lh, delay_ps);
    } else if (type == "custom") {
        k.whole("hosts", 1, 65535, &hosts);
        t.name = "custom";
        t.hosts = hosts;
        read_custom_links(j, k, &t);
    } else {
        *err = "topology '" + spec + "': type must be leaf_spine, fat_tree, two_datacenters or custom";
        return false;
    }
    // The hosts' links at their own rate (a NIC slower than the fabric behind it, such as hosts
    // that may not outrun the long haul they share); 0: the fabric's.
    double host_gbps = 0;
    if (type != "custom") k.num("host_gbps", 0, 1e6, &host_gbps);
    if (!k.finish()) {
        *err = "topology '" + spec + "': " + kerr;
        return false;
    }
    if (host_gbps > 0)
        for (TopoLink& l : t.links)
            if (t.is_host(l.a) || t.is_host(l.b)) l.gbps = host_gbps;
    t.sw = sw;
    t.dcqcn = dcqcn;
    if (!t.check(err)) return false;
    *out = std::move(t);
    return true;
}

}  // namespace sdr::emu
