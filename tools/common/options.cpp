#include "options.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>

namespace sdr::tools {

namespace {

[[noreturn]] void fail(const std::string& opt, const std::string& what) { throw OptionError(opt + ": " + what); }

std::string real_text(double v)
{
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return b;
}

// "--size" of "-s,--size": the name an error speaks of (the long one when there is one).
std::string option_name(const std::string& names)
{
    std::string first, long_name;
    size_t at = 0;
    while (at <= names.size()) {
        size_t comma = names.find(',', at);
        std::string n = names.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        if (first.empty()) first = n;
        if (n.rfind("--", 0) == 0 && long_name.empty()) long_name = n;
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    return long_name.empty() ? first : long_name;
}

}  // namespace

std::string size_text(uint64_t b)
{
    static const std::pair<uint64_t, const char*> units[] = {{1ull << 30, "GiB"}, {1ull << 20, "MiB"}, {1ull << 10, "KiB"}};
    for (auto [unit, name] : units)
        if (b >= unit && b % unit == 0) return std::to_string(b / unit) + " " + name;
    return std::to_string(b) + " B";
}

uint64_t parse_size(const std::string& opt, const std::string& text, uint64_t min, uint64_t max)
{
    const char* s = text.c_str();
    char* end;
    double v = std::strtod(s, &end);
    const std::string suf = end;
    const double mul = suf.empty() ? 1
                       : (suf == "K" || suf == "KiB") ? 0x1p10
                       : (suf == "M" || suf == "MiB") ? 0x1p20
                       : (suf == "G" || suf == "GiB") ? 0x1p30
                                                      : -1;
    const double bytes = v * mul;
    if (end == s || text[0] == '-' || mul < 0 || !std::isfinite(bytes) || bytes != std::floor(bytes))
        fail(opt, "bad size '" + text + "' (a whole number of bytes with an optional K, M or G suffix, 2^10, 2^20, 2^30 "
                  "bytes, also written KiB, MiB, GiB; e.g. 4096, 64K, 1.5M)");
    if (bytes < static_cast<double>(min) || bytes >= 0x1p64 || static_cast<uint64_t>(bytes) > max)
        fail(opt, text + " is out of range " + std::to_string(min) + " .. " + std::to_string(max) + " bytes (" +
                      size_text(min) + " .. " + (max == UINT64_MAX ? "16 EiB" : size_text(max)) + ")");
    return static_cast<uint64_t>(bytes);
}

uint64_t parse_count(const std::string& opt, const std::string& text, uint64_t min, uint64_t max)
{
    const char* s = text.c_str();
    char* end;
    errno = 0;
    unsigned long long v = std::strtoull(s, &end, 10);
    if (end == s || *end || text[0] == '-' || text[0] == '+' || errno == ERANGE)
        fail(opt, "expects a whole number in " + std::to_string(min) + " .. " + std::to_string(max) + ", got '" + text + "'");
    if (v < min || v > max) fail(opt, text + " is out of range " + std::to_string(min) + " .. " + std::to_string(max));
    return v;
}

double parse_real(const std::string& opt, const std::string& text, double min, double max, bool min_exclusive)
{
    const char* s = text.c_str();
    char* end;
    double v = std::strtod(s, &end);
    const std::string range = (min_exclusive ? "(" : "[") + real_text(min) + ", " + real_text(max) + "]";
    if (end == s || *end || !std::isfinite(v)) fail(opt, "expects a number in " + range + ", got '" + text + "'");
    if (v < min || (min_exclusive && v == min) || v > max) fail(opt, text + " is out of range " + range);
    return v;
}

CLI::Option* bind_option(CLI::App& app, const std::string& names, const std::string& type, const std::string& help,
                         std::function<void(const std::string& name, const std::string& value)> set)
{
    const std::string name = option_name(names);
    return app.add_option_function<std::string>(names, [name, set](const std::string& v) { set(name, v); }, help)
        ->type_name(type);
}

CLI::Option* add_real(CLI::App& app, const std::string& names, double* out, double min, double max,
                      const std::string& help, bool min_exclusive)
{
    return bind_option(app, names, "X", help, [=](const std::string& o, const std::string& v) {
        *out = parse_real(o, v, min, max, min_exclusive);
    });
}

ToolApp::ToolApp(const std::string& name, const std::string& description) : CLI::App(description, name)
{
    option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

bool parse_args(CLI::App& app, const std::vector<std::string>& args, bool* help, std::string* err)
{
    *help = false;
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes a vector back to front
    try {
        app.parse(reversed);
    } catch (const CLI::CallForHelp&) {
        *help = true;
    } catch (const CLI::ParseError& e) {
        *err = e.what();
        return false;
    } catch (const OptionError& e) {
        *err = e.what();
        return false;
    }
    return true;
}

void parse_or_exit(CLI::App& app, int argc, char** argv, int status)
{
    bool help;
    std::string err;
    if (!parse_args(app, std::vector<std::string>(argv + 1, argv + argc), &help, &err)) {
        std::fprintf(stderr, "%s: %s (see --help)\n", app.get_name().c_str(), err.c_str());
        std::exit(status);
    }
    if (help) {
        std::fputs(app.help().c_str(), stdout);
        std::exit(0);
    }
}

}  // namespace sdr::tools
