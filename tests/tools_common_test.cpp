// tools/common: the one size/count/number parser every tool uses, its CLI11 binding, the
// JSON writer (strings escaped, no infinities, one line), and the note for a device without
// counters.
#include "common/counters.hpp"
#include "common/json.hpp"
#include "common/options.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace {

using namespace sdr::tools;

std::string error_of(auto f)
{
    try {
        f();
    } catch (const OptionError& e) {
        return e.what();
    }
    return "";
}

TEST(ToolOptions, SizesAreBinaryWithOrWithoutTheI)
{
    EXPECT_EQ(parse_size("--size", "4096", 0, UINT64_MAX), 4096u);
    EXPECT_EQ(parse_size("--size", "64K", 0, UINT64_MAX), 65536u);
    EXPECT_EQ(parse_size("--size", "64KiB", 0, UINT64_MAX), 65536u);
    EXPECT_EQ(parse_size("--size", "1.5M", 0, UINT64_MAX), 3u << 19);
    EXPECT_EQ(parse_size("--size", "2MiB", 0, UINT64_MAX), 2u << 20);
    EXPECT_EQ(parse_size("--size", "1G", 0, UINT64_MAX), 1u << 30);
    EXPECT_EQ(parse_size("--size", "3GiB", 0, UINT64_MAX), 3ull << 30);
    EXPECT_EQ(parse_size("--size", "0", 0, 10), 0u);
}

TEST(ToolOptions, ABadSizeNamesTheOptionAndTheRange)
{
    EXPECT_EQ(error_of([] { parse_size("--size", "12Q", 1, 100); }).rfind("--size: bad size '12Q' (", 0), 0u);
    EXPECT_NE(error_of([] { parse_size("--chunk", "0.1K", 1, 1 << 20); }).find("--chunk: bad size '0.1K'"),
              std::string::npos)
        << "102.4 bytes is not a whole number";
    EXPECT_NE(error_of([] { parse_size("--size", "-1", 0, 100); }).find("bad size"), std::string::npos);
    EXPECT_NE(error_of([] { parse_size("--size", "1k", 0, 100); }).find("bad size"), std::string::npos)
        << "suffixes are K, M, G (KiB, MiB, GiB)";
    EXPECT_EQ(error_of([] { parse_size("--size", "4G", 1, (1ull << 32) - 1); }),
              "--size: 4G is out of range 1 .. 4294967295 bytes (1 B .. 4294967295 B)");
    EXPECT_EQ(error_of([] { parse_size("--mtu", "8K", 64, 4096); }), "--mtu: 8K is out of range 64 .. 4096 bytes (64 B .. 4 KiB)");
    EXPECT_EQ(error_of([] { parse_size("--size", "0", 1, 10); }), "--size: 0 is out of range 1 .. 10 bytes (1 B .. 10 B)");
}

TEST(ToolOptions, CountsAndRealsNameTheirRange)
{
    EXPECT_EQ(parse_count("-q", "1024", 1, 1024), 1024u);
    EXPECT_EQ(error_of([] { parse_count("-q", "1025", 1, 1024); }), "-q: 1025 is out of range 1 .. 1024");
    EXPECT_EQ(error_of([] { parse_count("-n", "1K", 1, 10); }), "-n: expects a whole number in 1 .. 10, got '1K'");
    EXPECT_EQ(error_of([] { parse_count("-n", "-3", 0, 10); }), "-n: expects a whole number in 0 .. 10, got '-3'");
    EXPECT_DOUBLE_EQ(parse_real("--loss", "1e-4", 0, 1), 1e-4);
    EXPECT_EQ(error_of([] { parse_real("--loss", "1.5", 0, 1); }), "--loss: 1.5 is out of range [0, 1]");
    EXPECT_EQ(error_of([] { parse_real("--bw-gbps", "0", 0, 1e6, true); }), "--bw-gbps: 0 is out of range (0, 1e+06]");
    EXPECT_EQ(error_of([] { parse_real("--rtt-ms", "inf", 0, 1e6); }), "--rtt-ms: expects a number in [0, 1e+06], got 'inf'");
}

TEST(ToolOptions, TheCli11BindingParsesTakesTheLastValueAndReportsTheOption)
{
    ToolApp app("t", "test");
    uint64_t size = 7;
    uint32_t n = 0;
    double x = 0;
    bool flag = false;
    add_size(app, "-s,--size", &size, 1, 1u << 30, "size");
    add_count(app, "-n", &n, 0, 100, "n");
    add_real(app, "--x", &x, 0, 1, "x");
    app.add_flag("--flag", flag, "flag");
    bool help;
    std::string err;
    ASSERT_TRUE(parse_args(app, {"-s", "64K", "--size", "1M", "-n", "3", "--x", "0.5", "--flag"}, &help, &err)) << err;
    EXPECT_FALSE(help);
    EXPECT_EQ(size, 1u << 20) << "given twice, the last one counts";
    EXPECT_EQ(n, 3u);
    EXPECT_EQ(x, 0.5);
    EXPECT_TRUE(flag);
    EXPECT_FALSE(parse_args(app, {"-s", "12Q"}, &help, &err));
    EXPECT_EQ(err.rfind("--size: bad size '12Q'", 0), 0u) << "the long name, though -s was typed: " << err;
    EXPECT_FALSE(parse_args(app, {"--nope"}, &help, &err));
    EXPECT_NE(err.find("--nope"), std::string::npos) << err;
    EXPECT_TRUE(parse_args(app, {"--help"}, &help, &err));
    EXPECT_TRUE(help);
}

std::string printed(const Json& j)
{
    FILE* f = std::tmpfile();
    print_json(j, f);
    std::rewind(f);
    std::string s;
    for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
    std::fclose(f);
    return s;
}

TEST(ToolJson, EscapesStringsAndPrintsNoInfinity)
{
    const std::string device = "raw:a\"b\\c\td\x01";
    Json j{{"role", "server"}, {"device", device}, {"e_t_sr_ms", json_real(HUGE_VAL)}, {"nan", json_real(std::nan(""))},
           {"gbps", json_real(12.5)}, {"n", uint64_t{1} << 63}};
    const std::string s = printed(j);
    ASSERT_EQ(s.back(), '\n');
    EXPECT_EQ(s.find('\n'), s.size() - 1) << "one line";
    EXPECT_EQ(s.rfind("{\"role\":\"server\",\"device\":", 0), 0u) << "members in the order given: " << s;
    const auto back = nlohmann::json::parse(s);
    EXPECT_EQ(back["device"], device);
    EXPECT_TRUE(back["e_t_sr_ms"].is_null());
    EXPECT_TRUE(back["nan"].is_null());
    EXPECT_EQ(back["gbps"], 12.5);
    EXPECT_EQ(back["n"], uint64_t{1} << 63);
}

TEST(ToolJson, BytesThatAreNotUtf8StillMakeValidJson)
{
    const std::string s = printed(Json{{"device", std::string("raw:\xff\xfe")}});
    EXPECT_TRUE(nlohmann::json::accept(s)) << s;
}

// The note names the device's kind, not the device: every device of the kind keeps none.
TEST(ToolCounters, AnUnavailableListNamesTheDeviceKind)
{
    EXPECT_EQ(counters_unavailable("verbs:mlx5_0"), "counters not available on verbs:");
    EXPECT_EQ(counters_unavailable("verbs:sdr:0"), "counters not available on verbs:");
    EXPECT_EQ(counters_unavailable("sim"), "counters not available on sim");
}

}  // namespace
