// sdr-model: the paper's analytic model (arXiv 2505.05366, appendix) for one message. Prints the expected
// completion time of Selective Repeat (RTO = X RTT, and the NACK variant), the decode probabilities
// of the XOR and MDS codes, the Erasure Coding lower bound with SR fallback, and the lossless
// ideals; --json prints the same as one JSON object. No simulation: closed forms and one integral.
#include "common/json.hpp"
#include "common/options.hpp"

#include <sdr/reliability/model.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace {

using namespace sdr::rel::model;
using namespace sdr::tools;

[[noreturn]] void bad(const std::string& msg)
{
    std::fprintf(stderr, "sdr-model: %s (see --help)\n", msg.c_str());
    std::exit(2);
}

std::string num(double v)
{
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return b;
}

// validate() names Params members; the user typed options.
const std::pair<const char*, const char*> kOptionOf[] = {
    {"size_bytes", "--size"}, {"chunk_bytes", "--chunk"},   {"mtu", "--mtu"}, {"bw_gbps", "--bw-gbps"},
    {"rtt_ms", "--rtt-ms"},   {"drop", "--drop"},           {"rto_rtts", "--rto-rtts"}, {"k+m", "--k + --m"},
    {"k", "--k"},             {"m", "--m"},                 {"beta", "--beta"}, {"header_bytes", "--header-bytes"}};

Params parse(int argc, char** argv, bool* json)
{
    Params P;
    sdr::tools::ToolApp app("sdr-model",
                            "Expected completion of one message under Selective Repeat and Erasure Coding (the paper's\n"
                            "analytic model), beside the lossless ideal.");
    app.footer("BYTES take K/M/G (also KiB/MiB/GiB) suffixes, binary: 64K = 65536. A bad value exits 2.");
    add_size(app, "--size", &P.size_bytes, 0, UINT64_MAX >> 1, "message size")->default_str("128M");
    add_size(app, "--chunk", &P.chunk_bytes, 0, UINT32_MAX, "chunk size, >= MTU")->default_str("64K");
    add_size(app, "--mtu", &P.mtu, 0, UINT32_MAX, "payload per packet, a power of two in 256..4096")->default_str("4096");
    add_real(app, "--bw-gbps", &P.bw_gbps, -HUGE_VAL, HUGE_VAL, "link bandwidth, Gbit/s")->default_str(num(P.bw_gbps));
    add_real(app, "--rtt-ms", &P.rtt_ms, -HUGE_VAL, HUGE_VAL, "round-trip time, ms")->default_str(num(P.rtt_ms));
    add_real(app, "--drop", &P.drop, -HUGE_VAL, HUGE_VAL, "per-packet drop probability, 0 <= P < 1")->default_str(num(P.drop));
    add_real(app, "--rto-rtts", &P.rto_rtts, -HUGE_VAL, HUGE_VAL, "SR retransmission timeout in RTTs")->default_str(num(P.rto_rtts));
    add_count(app, "--k", &P.k, 0, UINT32_MAX, "EC code: k data chunks, k + m <= 255")->default_str(num(P.k));
    add_count(app, "--m", &P.m, 0, UINT32_MAX, "EC code: m parity chunks")->default_str(num(P.m));
    add_real(app, "--beta", &P.beta, -HUGE_VAL, HUGE_VAL, "EC fallback waits beta*RTT after injection before NACKing")
        ->default_str(num(P.beta));
    add_real(app, "--header-bytes", &P.header_bytes, -HUGE_VAL, HUGE_VAL, "wire bytes per packet added to injection time")
        ->default_str(num(P.header_bytes));
    app.add_flag("--packet-memory", P.packet_memory,
                 "a repeat of a chunk needs only its still-missing packets (SDR's per-packet bitmap); default: the "
                 "paper's whole-chunk repeats");
    app.add_flag("--json", *json, "one JSON object instead of the table");
    parse_or_exit(app, argc, argv, 2);
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

// The 99.9th percentiles: SR's from the model's distribution of max_i X_i (RTO = X RTT and 1 RTT),
// EC-MDS's only where at most 1 message in 1000 falls back (then it is the lossless EC time; the
// model has no distribution for the fallback's share). NaN where not defined.
struct Tail {
    double sr_ms, sr_nack_ms, ec_mds_ms;
};
Tail tail(const Params& P, const Result& r)
{
    Params nack = P;
    nack.rto_rtts = 1;
    return Tail{t_sr_quantile_s(P, 0.999) * 1e3, t_sr_quantile_s(nack, 0.999) * 1e3,
                r.p_fallback_mds <= 1e-3 ? r.ideal_ec_ms : NAN};
}

void print(const Params& P, const Result& r)
{
    Json j;
    j["size_bytes"] = P.size_bytes;
    j["chunk_bytes"] = P.chunk_bytes;
    j["mtu"] = P.mtu;
    j["bw_gbps"] = json_real(P.bw_gbps);
    j["rtt_ms"] = json_real(P.rtt_ms);
    j["drop"] = json_real(P.drop);
    j["rto_rtts"] = json_real(P.rto_rtts);
    j["k"] = P.k;
    j["m"] = P.m;
    j["beta"] = json_real(P.beta);
    j["header_bytes"] = json_real(P.header_bytes);
    j["packet_memory"] = P.packet_memory;
    j["chunks"] = r.chunks;
    j["packets_per_chunk"] = packets_per_chunk(P);
    j["t_inj_us"] = json_real(r.t_inj_us);
    j["p_chunk"] = json_real(r.p_chunk);
    j["sr_exact"] = r.sr_exact;
    j["e_t_sr_ms"] = json_real(r.e_t_sr_ms);
    j["e_t_sr_nack_ms"] = json_real(r.e_t_sr_nack_ms);
    j["p_mds"] = json_real(r.p_mds);
    j["p_xor"] = json_real(r.p_xor);
    j["p_fallback"] = json_real(r.p_fallback_mds);
    j["p_fallback_mds"] = json_real(r.p_fallback_mds);
    j["p_fallback_xor"] = json_real(r.p_fallback_xor);
    j["e_t_ec_ms"] = json_real(r.e_t_ec_mds_ms);
    j["e_t_ec_mds_ms"] = json_real(r.e_t_ec_mds_ms);
    j["e_t_ec_xor_ms"] = json_real(r.e_t_ec_xor_ms);
    j["ideal_ms"] = json_real(r.ideal_ms);
    j["ideal_ec_ms"] = json_real(r.ideal_ec_ms);
    j["sr_ec_ratio"] = json_real(r.e_t_sr_ms / r.e_t_ec_mds_ms);
    Tail t = tail(P, r);
    j["p999_sr_ms"] = json_real(t.sr_ms);
    j["p999_sr_nack_ms"] = json_real(t.sr_nack_ms);
    j["p999_ec_mds_ms"] = json_real(t.ec_mds_ms);  // NaN (not modelled) prints null
    j["p999_sr_ec_ratio"] = json_real(t.sr_ms / t.ec_mds_ms);
    print_json(j);
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
                size_text(P.size_bytes).c_str(), (unsigned long long)r.chunks, size_text(P.chunk_bytes).c_str(),
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
    Tail t = tail(P, r);
    std::printf("%-16s %13.3f ms   RTO = %g RTT\n", "p99.9 SR", t.sr_ms, P.rto_rtts);
    std::printf("%-16s %13.3f ms   RTO = 1 RTT\n", "p99.9 SR-NACK", t.sr_nack_ms);
    if (std::isnan(t.ec_mds_ms))
        std::printf("%-16s %16s   more than 1 in 1000 messages fall back\n", "p99.9 EC MDS", "n/a");
    else
        std::printf("%-16s %13.3f ms   ideal EC: at most 1 in 1000 messages falls back\n", "p99.9 EC MDS", t.ec_mds_ms);
    std::printf("%-16s %16s   p99.9 SR / p99.9 EC MDS\n", "SR / EC-MDS p99.9", ratio(t.sr_ms, t.ec_mds_ms).c_str());
}

}  // namespace

int main(int argc, char** argv)
{
    bool json = false;
    Params P = parse(argc, argv, &json);
    Result r = evaluate(P);
    if (json) print(P, r);
    else print_table(P, r);
    return 0;
}
