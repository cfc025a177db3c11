// The command line of every SDR tool: sizes, counts and real numbers parsed one way, with
// errors that name the option and its allowed range, bound to CLI11 options.
//
// Sizes: a whole number of bytes, optionally with a binary suffix: K, M, G (and the same as
// KiB, MiB, GiB) are 2^10, 2^20, 2^30 bytes. Binary because every size SDR deals in (MTU,
// chunk, slot, message buffers) is a power of two, as in perftest and the verbs API. A fraction
// is fine when the result is a whole number of bytes (1.5K = 1536), a negative value never.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

namespace sdr::tools {

// A bad value: what() is "--option: what is wrong (the allowed range)".
struct OptionError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// "4096", "64K", "1.5M", "1GiB" -> bytes in [min, max]; OptionError otherwise.
uint64_t parse_size(const std::string& opt, const std::string& text, uint64_t min, uint64_t max);
// A whole number without suffix in [min, max].
uint64_t parse_count(const std::string& opt, const std::string& text, uint64_t min, uint64_t max);
// A finite real number in [min, max]; with min_exclusive, in (min, max].
double parse_real(const std::string& opt, const std::string& text, double min, double max, bool min_exclusive = false);

// "64 KiB", "4 GiB", "1000 B": the exact size, in the largest binary unit that divides it.
std::string size_text(uint64_t bytes);

// Binds option `names` ("-s,--size") of type `type` ("BYTES") to `set`, which gets the long name
// (for errors) and the value; what the add_* functions below share.
CLI::Option* bind_option(CLI::App& app, const std::string& names, const std::string& type, const std::string& help,
                         std::function<void(const std::string& name, const std::string& value)> set);

// Options bound to a variable through the parsers above (the variable keeps its value when the
// option is absent; given twice, the last one counts). The range is also clipped to what T holds.
template <class T>
CLI::Option* add_size(CLI::App& app, const std::string& names, T* out, uint64_t min, uint64_t max, const std::string& help)
{
    max = std::min<uint64_t>(max, std::numeric_limits<T>::max());
    return bind_option(app, names, "BYTES", help, [=](const std::string& o, const std::string& v) {
        *out = static_cast<T>(parse_size(o, v, min, max));
    });
}
template <class T>
CLI::Option* add_count(CLI::App& app, const std::string& names, T* out, uint64_t min, uint64_t max, const std::string& help)
{
    max = std::min<uint64_t>(max, static_cast<uint64_t>(std::numeric_limits<T>::max()));
    return bind_option(app, names, "N", help, [=](const std::string& o, const std::string& v) {
        *out = static_cast<T>(parse_count(o, v, min, max));
    });
}
CLI::Option* add_real(CLI::App& app, const std::string& names, double* out, double min, double max,
                      const std::string& help, bool min_exclusive = false);

// The App of tool `name`: its options take their last value when repeated.
struct ToolApp : CLI::App {
    ToolApp(const std::string& name, const std::string& description);
};

// Parses argv (or args, in order). --help prints the help to stdout and exits 0; a bad command
// line prints "NAME: what (see --help)" to stderr and exits `status`.
void parse_or_exit(CLI::App& app, int argc, char** argv, int status);
// The same without exiting: false + *err (without the tool's name) on a bad command line,
// true + *help on --help.
bool parse_args(CLI::App& app, const std::vector<std::string>& args, bool* help, std::string* err);

}  // namespace sdr::tools
