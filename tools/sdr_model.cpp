// sdr-model: the paper's analytic model (arXiv 2505.05366, appendix) for one message. Prints the expected
// completion time of Selective Repeat (RTO = X RTT, and the NACK variant), the decode probabilities
// of the XOR and MDS codes, the Erasure Coding lower bound with SR fallback, and the lossless
// ideals; --json prints the same as one JSON object. No simulation: closed forms and one integral.
#include <sdr/reliability/model.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace {

using namespace sdr::rel::model;

void usage(FILE* f)
{
    Params d;
    std::fprintf(f,
                 "usage: sdr-model [--size BYTES] [--chunk BYTES] [--mtu BYTES] [--bw-gbps G] [--rtt-ms R]\n"
                 "                 [--drop P] [--rto-rtts X] [--k K] [--m M] [--beta B] [--header-bytes H]\n"
                 "                 [--packet-memory] [--json]\n"
                 "Expected completion of one message under Selective Repeat and Erasure Coding (the paper's\n"
                 "analytic model), beside the lossless ideal. BYTES take K/M/G suffixes (KiB/MiB/GiB).\n"
                 "  --size BYTES        message size (%llu MiB)\n"
                 "  --chunk BYTES       chunk size, >= MTU (%u KiB)\n"
                 "  --mtu BYTES         payload per packet, a power of two in 256..4096 (%u)\n"
                 "  --bw-gbps G         link bandwidth, Gbit/s (%g)\n"
                 "  --rtt-ms R          round-trip time, ms (%g)\n"
                 "  --drop P            per-packet drop probability, 0 <= P < 1 (%g)\n"
                 "  --rto-rtts X        SR retransmission timeout in RTTs (%g)\n"
                 "  --k K, --m M        EC code: k data + m parity chunks, k + m <= 255 (%u, %u)\n"
                 "  --beta B            EC fallback waits B*RTT after injection before NACKing (%g)\n"
                 "  --header-bytes H    wire bytes per packet added to injection time (%g)\n"
                 "  --packet-memory     a repeat of a chunk needs only its still-missing packets (SDR's\n"
                 "                      per-packet bitmap); default: the paper's whole-chunk repeats\n"
                 "  --json              one JSON object instead of the table\n",
                 (unsigned long long)(d.size_bytes >> 20), d.chunk_bytes >> 10, d.mtu, d.bw_gbps, d.rtt_ms, d.drop,
                 d.rto_rtts, d.k, d.m, d.beta, d.header_bytes);
}

[[noreturn]] void bad(const std::string& msg)
{
    std::fprintf(stderr, "sdr-model: %s (see --help)\n", msg.c_str());
    std::exit(2);
}

uint64_t parse_bytes(const std::string& opt, const char* s, uint64_t max)
{
    char* end;
    double v = std::strtod(s, &end);
    std::string suf = end;
    double mul = suf.empty() ? 1 : (suf == "K" || suf == "KiB") ? 0x1p10 : (suf == "M" || suf == "MiB") ? 0x1p20
                                 : (suf == "G" || suf == "GiB") ? 0x1p30 : -1;
    double bytes = v * mul;
    if (end == s || mul < 0 || !(bytes >= 0) || bytes != std::floor(bytes) || bytes > static_cast<double>(max))
        bad(opt + " expects a whole number of bytes with an optional K/M/G suffix (e.g. 4096, 64K, 128M), got '" +
            s + "'");
    return static_cast<uint64_t>(bytes);
}

double parse_real(const std::string& opt, const char* s)
{
    char* end;
    double v = std::strtod(s, &end);
    if (end == s || *end || !std::isfinite(v)) bad(opt + " expects a number, got '" + s + "'");
    return v;
}

uint32_t parse_count(const std::string& opt, const char* s)
{
    char* end;
    unsigned long long v = std::strtoull(s, &end, 10);
    if (end == s || *end || *s == '-' || v > UINT32_MAX) bad(opt + " expects a whole number, got '" + s + "'");
    return static_cast<uint32_t>(v);
}

// validate() names Params members; the user typed options.
const std::pair<const char*, const char*> kOptionOf[] = {
    {"size_bytes", "--size"}, {"chunk_bytes", "--chunk"},   {"mtu", "--mtu"}, {"bw_gbps", "--bw-gbps"},
    {"rtt_ms", "--rtt-ms"},   {"drop", "--drop"},           {"rto_rtts", "--rto-rtts"}, {"k+m", "--k + --m"},
    {"k", "--k"},             {"m", "--m"},                 {"beta", "--beta"}, {"header_bytes", "--header-bytes"}};

Params parse(int argc, char** argv, bool* json)
{
    Params P;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            usage(stdout);
            std::exit(0);
        }
        if (a == "--json" || a == "--packet-memory") {
            (a == "--json" ? *json : P.packet_memory) = true;
            continue;
        }
        if (a.rfind("--", 0) != 0) bad("unexpected argument '" + a + "'");
        if (i + 1 >= argc) bad(a + " needs a value");
        const char* v = argv[++i];
        if (a == "--size") P.size_bytes = parse_bytes(a, v, UINT64_MAX >> 1);
        else if (a == "--chunk") P.chunk_bytes = static_cast<uint32_t>(parse_bytes(a, v, UINT32_MAX));
        else if (a == "--mtu") P.mtu = static_cast<uint32_t>(parse_bytes(a, v, UINT32_MAX));
        else if (a == "--bw-gbps") P.bw_gbps = parse_real(a, v);
        else if (a == "--rtt-ms") P.rtt_ms = parse_real(a, v);
        else if (a == "--drop") P.drop = parse_real(a, v);
        else if (a == "--rto-rtts") P.rto_rtts = parse_real(a, v);
        else if (a == "--k") P.k = parse_count(a, v);
        else if (a == "--m") P.m = parse_count(a, v);
        else if (a == "--beta") P.beta = parse_real(a, v);
        else if (a == "--header-bytes") P.header_bytes = parse_real(a, v);
        else bad("unknown option " + a);
    }
    std::string err;
    if (!validate(P, &err)) {
        for (auto [field, option] : kOptionOf) {
            std::string prefix = std::string(field) + ": ";
            if (err.rfind(prefix, 0) == 0) bad(std::string(option) + ": " + err.substr(prefix.size()));
        }
        bad(err);
    }
    return P;
}

std::string bytes_text(uint64_t b)
{
    static const std::pair<uint64_t, const char*> units[] = {{1ull << 30, "GiB"}, {1ull << 20, "MiB"}, {1ull << 10, "KiB"}};
    for (auto [unit, name] : units)
        if (b >= unit && b % unit == 0) return std::to_string(b / unit) + " " + name;
    return std::to_string(b) + " B";
}

// JSON has no infinity: a hopeless link (E[T_SR] unbounded) prints null.
std::string json_num(double v)
{
    if (!std::isfinite(v)) return "null";
    char b[32];
    std::snprintf(b, sizeof b, "%.17g", v);
    return b;
}

void print_json(const Params& P, const Result& r)
{
    std::printf("{\"size_bytes\":%llu,\"chunk_bytes\":%u,\"mtu\":%u,\"bw_gbps\":%s,\"rtt_ms\":%s,\"drop\":%s,"
                "\"rto_rtts\":%s,\"k\":%u,\"m\":%u,\"beta\":%s,\"header_bytes\":%s,\"packet_memory\":%s,\"chunks\":%llu,"
                "\"packets_per_chunk\":%u,\"t_inj_us\":%s,\"p_chunk\":%s,\"sr_exact\":%s,\"e_t_sr_ms\":%s,"
                "\"e_t_sr_nack_ms\":%s,\"p_mds\":%s,\"p_xor\":%s,\"p_fallback\":%s,\"p_fallback_mds\":%s,"
                "\"p_fallback_xor\":%s,\"e_t_ec_ms\":%s,\"e_t_ec_mds_ms\":%s,\"e_t_ec_xor_ms\":%s,\"ideal_ms\":%s,"
                "\"ideal_ec_ms\":%s,\"sr_ec_ratio\":%s}\n",
                (unsigned long long)P.size_bytes, P.chunk_bytes, P.mtu, json_num(P.bw_gbps).c_str(),
                json_num(P.rtt_ms).c_str(), json_num(P.drop).c_str(), json_num(P.rto_rtts).c_str(), P.k, P.m,
                json_num(P.beta).c_str(), json_num(P.header_bytes).c_str(), P.packet_memory ? "true" : "false",
                (unsigned long long)r.chunks,
                packets_per_chunk(P), json_num(r.t_inj_us).c_str(), json_num(r.p_chunk).c_str(),
                r.sr_exact ? "true" : "false", json_num(r.e_t_sr_ms).c_str(), json_num(r.e_t_sr_nack_ms).c_str(),
                json_num(r.p_mds).c_str(), json_num(r.p_xor).c_str(), json_num(r.p_fallback_mds).c_str(),
                json_num(r.p_fallback_mds).c_str(), json_num(r.p_fallback_xor).c_str(),
                json_num(r.e_t_ec_mds_ms).c_str(), json_num(r.e_t_ec_mds_ms).c_str(),
                json_num(r.e_t_ec_xor_ms).c_str(), json_num(r.ideal_ms).c_str(), json_num(r.ideal_ec_ms).c_str(),
                json_num(r.e_t_sr_ms / r.e_t_ec_mds_ms).c_str());
}

// "4.19x", or "n/a" where a hopeless link makes both sides infinite.
std::string ratio(double a, double b)
{
    char t[32];
    std::snprintf(t, sizeof t, "%.2fx", a / b);
    return std::isnan(a / b) ? "n/a" : t;
}

void print_table(const Params& P, const Result& r)
{
    Params nack = P;
    nack.rto_rtts = 1;
    auto exactness = [](bool exact) {
        return exact ? "exact here (M*T_INJ <= RTO)" : "lower bound here (M*T_INJ > RTO: resends queue behind first sends)";
    };
    std::printf("sdr-model: %s in %llu chunks of %s (%u packets of %u B) | %g Gbit/s, RTT %g ms, packet drop %g"
                " (chunk drop %.3g) | SR RTO %g RTT | EC k=%u m=%u, fallback after %g RTT | T_INJ %.3f us\n",
                bytes_text(P.size_bytes).c_str(), (unsigned long long)r.chunks, bytes_text(P.chunk_bytes).c_str(),
                packets_per_chunk(P), P.mtu, P.bw_gbps, P.rtt_ms, P.drop, r.p_chunk, P.rto_rtts, P.k, P.m, P.beta,
                r.t_inj_us);
    std::printf("%-16s %16s   %s\n", "quantity", "value", "note");
    std::printf("%-16s %13.3f ms   M*T_INJ + RTT\n", "ideal", r.ideal_ms);
    std::printf("%-16s %13.3f ms   %s ideal; %s\n", "E[T_SR]", r.e_t_sr_ms, ratio(r.e_t_sr_ms, r.ideal_ms).c_str(),
                exactness(r.sr_exact));
    std::printf("%-16s %13.3f ms   %s ideal; RTO = 1 RTT, %s\n", "E[T_SR-NACK]", r.e_t_sr_nack_ms,
                ratio(r.e_t_sr_nack_ms, r.ideal_ms).c_str(), exactness(sr_exact(nack)));
    std::string mds = "P_MDS(" + std::to_string(P.k) + "," + std::to_string(P.m) + ")";
    std::string xr = "P_XOR(" + std::to_string(P.k) + "," + std::to_string(P.m) + ")";
    std::printf("%-16s %16.12g   a submessage is decodable\n", mds.c_str(), r.p_mds);
    std::printf("%-16s %16.12g\n", xr.c_str(), r.p_xor);
    std::printf("%-16s %16.4g   some submessage is not: 1 - P_MDS^L, L = M/k = %g\n", "P_fallback MDS",
                r.p_fallback_mds, static_cast<double>(r.chunks) / P.k);
    std::printf("%-16s %16.4g   1 - P_XOR^L\n", "P_fallback XOR", r.p_fallback_xor);
    std::printf("%-16s %13.3f ms   (M + ceil(M*m/k))*T_INJ + RTT\n", "ideal EC", r.ideal_ec_ms);
    std::printf("%-16s >= %10.3f ms   %s ideal EC (lower bound)\n", "E[T_EC] MDS", r.e_t_ec_mds_ms,
                ratio(r.e_t_ec_mds_ms, r.ideal_ec_ms).c_str());
    std::printf("%-16s >= %10.3f ms   %s ideal EC (lower bound)\n", "E[T_EC] XOR", r.e_t_ec_xor_ms,
                ratio(r.e_t_ec_xor_ms, r.ideal_ec_ms).c_str());
    std::printf("%-16s %16s   E[T_SR] / E[T_EC MDS]\n", "SR / EC-MDS", ratio(r.e_t_sr_ms, r.e_t_ec_mds_ms).c_str());
}

}  // namespace

int main(int argc, char** argv)
{
    bool json = false;
    Params P = parse(argc, argv, &json);
    Result r = evaluate(P);
    if (json) print_json(P, r);
    else print_table(P, r);
    return 0;
}
