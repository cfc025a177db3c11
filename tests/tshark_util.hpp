// Test helper: run tshark on a pcap and return the requested dissector fields, one row per
// packet. Used by the pcap tests to check that Wireshark reads our frames as we meant them.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sdr::test {

// True if an executable `tshark` is on PATH (looked up directly: no shell, no process).
inline bool tshark_available()
{
    const char* path = std::getenv("PATH");
    if (!path) return false;
    std::string_view rest(path);
    while (true) {
        size_t colon = rest.find(':');
        std::string dir(rest.substr(0, colon));
        if (dir.empty()) dir = ".";
        if (access((dir + "/tshark").c_str(), X_OK) == 0) return true;
        if (colon == std::string_view::npos) return false;
        rest.remove_prefix(colon + 1);
    }
}

// Quote for /bin/sh: '...' with embedded ' as '\''.
inline std::string shell_quote(const std::string& s)
{
    std::string q = "'";
    for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// `tshark -r pcap -T fields -E occurrence=f -e f1 -e f2 ...`: the first occurrence of each
// field (some, like infiniband.immdt, appear twice per packet), tab-separated, one row per
// packet; an absent field is an empty string. stderr is dropped (as root tshark warns).
// `options` go after those (e.g. -X lua_script:FILE, -o pref:value, -E occurrence=a for every
// occurrence, comma-separated). nullopt plus *err if tshark cannot be run or exits non-zero.
inline std::optional<std::vector<std::vector<std::string>>> tshark_fields(
    const std::string& pcap, const std::vector<std::string>& fields, std::string* err,
    const std::vector<std::string>& options = {})
{
    std::string cmd = "tshark -n -r " + shell_quote(pcap) + " -T fields -E occurrence=f -E separator=/t";
    for (const auto& o : options) cmd += " " + shell_quote(o);
    for (const auto& f : fields) cmd += " -e " + shell_quote(f);
    cmd += " 2>/dev/null";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) {
        if (err) *err = "popen failed: " + cmd;
        return std::nullopt;
    }
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int status = pclose(p);
    if (status != 0) {
        if (err) *err = "tshark failed (status " + std::to_string(status) + "): " + cmd;
        return std::nullopt;
    }
    std::vector<std::vector<std::string>> rows;
    size_t pos = 0;
    while (pos < out.size()) {
        size_t nl = out.find('\n', pos);
        if (nl == std::string::npos) nl = out.size();
        std::string_view line(out.data() + pos, nl - pos);
        pos = nl + 1;
        std::vector<std::string> row;
        size_t start = 0;
        while (true) {
            size_t tab = line.find('\t', start);
            row.emplace_back(line.substr(start, tab == std::string_view::npos ? line.npos : tab - start));
            if (tab == std::string_view::npos) break;
            start = tab + 1;
        }
        rows.push_back(std::move(row));
    }
    return rows;
}

// Parses a tshark number as printed: "0x..." is hex, anything else decimal (never octal, so a
// zero-padded decimal stays decimal). nullopt if not a whole number.
inline std::optional<uint64_t> parse_tshark_uint(const std::string& s)
{
    if (s.empty()) return std::nullopt;
    int base = 10;
    size_t start = 0;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        start = 2;
    }
    uint64_t v = 0;
    for (size_t i = start; i < s.size(); ++i) {
        char c = s[i];
        unsigned d;
        if (c >= '0' && c <= '9') d = unsigned(c - '0');
        else if (base == 16 && c >= 'a' && c <= 'f') d = unsigned(c - 'a' + 10);
        else if (base == 16 && c >= 'A' && c <= 'F') d = unsigned(c - 'A' + 10);
        else return std::nullopt;
        v = v * unsigned(base) + d;
    }
    return v;
}

// Parses an FT_BYTES field such as infiniband.immdt, which tshark prints as bare hex digits
// ("80000001", or "80:00:00:01" in some versions), as a big-endian number of up to 8 bytes.
inline std::optional<uint64_t> parse_tshark_bytes_be(const std::string& s)
{
    std::string hex;
    for (char c : s)
        if (c != ':') hex += c;
    if (hex.empty() || hex.size() > 16) return std::nullopt;
    return parse_tshark_uint("0x" + hex);
}

}  // namespace sdr::test
