// Parsing of the SDR_SIM_* / SDR_RT_* environment variables shared by the simulator and the
// real-time executor: numbers in ranges, and the impairment settings both accept.
#include <sdr/emu/env_parse.hpp>

#include <cerrno>
#include <cstdlib>

namespace sdr::emu {

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

bool impairment_from_env(const std::string& prefix, ImpairmentParams* imp, std::string* err)
{
    double v;
    if (const char* s = std::getenv((prefix + "LOSS").c_str())) {
        if (!parse_double((prefix + "LOSS").c_str(), s, 0, 1, &v, err)) return false;
        imp->loss = v;
    }
    if (const char* s = std::getenv((prefix + "DUP").c_str())) {
        if (!parse_double((prefix + "DUP").c_str(), s, 0, 1, &v, err)) return false;
        imp->duplicate = v;
    }
    if (const char* s = std::getenv((prefix + "CE_MARK").c_str())) {
        if (!parse_double((prefix + "CE_MARK").c_str(), s, 0, 1, &v, err)) return false;
        imp->ce_mark = v;
    }
    if (const char* s = std::getenv((prefix + "REORDER").c_str())) {  // "prob,max_delay_us"
        std::string f[3];
        double prob, us;
        if (split3(s, f) != 2 || !parse_double((prefix + "REORDER probability").c_str(), f[0].c_str(), 0, 1, &prob, err) ||
            !parse_double((prefix + "REORDER max delay (us)").c_str(), f[1].c_str(), 0, 1e9, &us, err)) {
            if (err && err->empty()) *err = prefix + "REORDER: expected 'probability,max_delay_us'";
            return false;
        }
        imp->reorder = prob;
        imp->reorder_max_ps = static_cast<uint64_t>(us * 1e6);
    }
    if (const char* s = std::getenv((prefix + "BURST").c_str())) {  // "p_good_bad,p_bad_good[,loss_bad]"
        std::string f[3];
        int n = split3(s, f);
        double gb, bg, lb = 1.0;
        if ((n != 2 && n != 3) || !parse_double((prefix + "BURST p_good_bad").c_str(), f[0].c_str(), 0, 1, &gb, err) ||
            !parse_double((prefix + "BURST p_bad_good").c_str(), f[1].c_str(), 0, 1, &bg, err) ||
            (n == 3 && !parse_double((prefix + "BURST loss_bad").c_str(), f[2].c_str(), 0, 1, &lb, err))) {
            if (err && err->empty()) *err = prefix + "BURST: expected 'p_good_bad,p_bad_good[,loss_bad]'";
            return false;
        }
        imp->ge_p_good_bad = gb;
        imp->ge_p_bad_good = bg;
        imp->ge_loss_bad = lb;
    }
    return true;
}

bool u64_from_env(const char* name, uint64_t* out, std::string* err)
{
    if (const char* s = std::getenv(name)) {
        char* end = nullptr;
        unsigned long long seed = std::strtoull(s, &end, 0);
        if (end == s || *end) {
            if (err) *err = std::string(name) + "='" + s + "': expected an integer";
            return false;
        }
        *out = seed;
    }
    return true;
}

}  // namespace sdr::emu
