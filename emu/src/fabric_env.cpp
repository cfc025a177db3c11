// SDR_SIM_* environment variables: the documented configuration of the "sim:N" fabric.
#include <sdr/emu/fabric.hpp>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace sdr::emu {

namespace {

bool parse_double(const char* name, const char* s, double lo, double hi, double* out, std::string* err)
{
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(s, &end);
    if (errno || end == s || *end != '\0' || !(v >= lo && v <= hi)) {
        if (err) *err = std::string(name) + "='" + s + "': expected a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        return false;
    }
    *out = v;
    return true;
}

// "a,b[,c]" → up to three numbers
int split3(const char* s, std::string parts[3])
{
    int n = 0;
    std::string cur;
    for (const char* p = s;; p++) {
        if (*p == ',' || *p == '\0') {
            if (n < 3) parts[n] = cur;
            n++;
            cur.clear();
            if (!*p) break;
        } else {
            cur += *p;
        }
    }
    return n;
}

}  // namespace

bool FabricParams::from_env(FabricParams* out, std::string* err)
{
    FabricParams p = *out;
    double v;
    if (const char* s = std::getenv("SDR_SIM_BW_GBPS")) {
        if (!parse_double("SDR_SIM_BW_GBPS", s, 1e-3, 1e6, &v, err)) return false;
        p.link.bandwidth_gbps = v;
    }
    if (const char* s = std::getenv("SDR_SIM_RTT_MS")) {
        if (!parse_double("SDR_SIM_RTT_MS", s, 0, 1e6, &v, err)) return false;
        p.link.rtt_ms = v;
    }
    if (const char* s = std::getenv("SDR_SIM_LOSS")) {
        if (!parse_double("SDR_SIM_LOSS", s, 0, 1, &v, err)) return false;
        p.link.impairment.loss = v;
    }
    if (const char* s = std::getenv("SDR_SIM_DUP")) {
        if (!parse_double("SDR_SIM_DUP", s, 0, 1, &v, err)) return false;
        p.link.impairment.duplicate = v;
    }
    if (const char* s = std::getenv("SDR_SIM_REORDER")) {  // "prob,max_delay_us"
        std::string f[3];
        double prob, us;
        if (split3(s, f) != 2 || !parse_double("SDR_SIM_REORDER probability", f[0].c_str(), 0, 1, &prob, err) ||
            !parse_double("SDR_SIM_REORDER max delay (us)", f[1].c_str(), 0, 1e9, &us, err)) {
            if (err && err->empty()) *err = "SDR_SIM_REORDER: expected 'probability,max_delay_us'";
            return false;
        }
        p.link.impairment.reorder = prob;
        p.link.impairment.reorder_max_ps = static_cast<uint64_t>(us * 1e6);
    }
    if (const char* s = std::getenv("SDR_SIM_BURST")) {  // "p_good_bad,p_bad_good[,loss_bad]"
        std::string f[3];
        int n = split3(s, f);
        double gb, bg, lb = 1.0;
        if ((n != 2 && n != 3) || !parse_double("SDR_SIM_BURST p_good_bad", f[0].c_str(), 0, 1, &gb, err) ||
            !parse_double("SDR_SIM_BURST p_bad_good", f[1].c_str(), 0, 1, &bg, err) ||
            (n == 3 && !parse_double("SDR_SIM_BURST loss_bad", f[2].c_str(), 0, 1, &lb, err))) {
            if (err && err->empty()) *err = "SDR_SIM_BURST: expected 'p_good_bad,p_bad_good[,loss_bad]'";
            return false;
        }
        p.link.impairment.ge_p_good_bad = gb;
        p.link.impairment.ge_p_bad_good = bg;
        p.link.impairment.ge_loss_bad = lb;
    }
    if (const char* s = std::getenv("SDR_SIM_SEED")) {
        char* end = nullptr;
        unsigned long long seed = std::strtoull(s, &end, 0);
        if (end == s || *end) {
            if (err) *err = std::string("SDR_SIM_SEED='") + s + "': expected an integer";
            return false;
        }
        p.seed = seed;
    }
    if (const char* s = std::getenv("SDR_SIM_PAYLOAD")) {
        std::string v2 = s;
        if (v2 != "0" && v2 != "1") {
            if (err) *err = "SDR_SIM_PAYLOAD must be 0 (headers only) or 1 (full frames)";
            return false;
        }
        p.payload = v2 == "1";
    }
    if (const char* s = std::getenv("SDR_SIM_PCAP")) p.pcap_path = s;
    if (const char* s = std::getenv("SDR_SIM_CLOCK")) {
        std::string v2 = s;
        if (v2 != "virtual" && v2 != "wall") {
            if (err) *err = "SDR_SIM_CLOCK must be 'virtual' (default) or 'wall' (paced by the wall clock)";
            return false;
        }
        p.wall_clock = v2 == "wall";
    }
    *out = p;
    return true;
}

}  // namespace sdr::emu
