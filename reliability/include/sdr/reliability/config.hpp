// What a reliable connection is configured with, and what it reports per message.
#pragma once

#include <cstdint>
#include <string>

namespace sdr::rel {

// A scheme's wire id (the control messages' scheme byte): one per line of sdr_rel_schemes.def,
// the registry (Sr = 1, SrNack = 2, ...). What each scheme does lives in its SchemeOps
// (scheme.hpp, one file per scheme in src/schemes/).
// Auto: the receiver picks one of the registered schemes that declare a model per message
// (policy.hpp) and announces it in the clear-to-send.
enum class Scheme : uint8_t {
#define SDR_REL_SCHEME(id, name, c, cxx) cxx = id,
#include <sdr_rel_schemes.def>
#undef SDR_REL_SCHEME
    Auto = 5,
};

// "sr", "ec-mds", "auto"; nullptr for an id that is neither registered nor auto. Being a switch,
// it is also the compile-time check that no two lines of the registry (or one and auto) share an
// id: a duplicate case does not compile.
constexpr const char* scheme_name(Scheme s)
{
    switch (s) {
#define SDR_REL_SCHEME(id, name, c, cxx) \
    case Scheme::cxx:                    \
        return name;
#include <sdr_rel_schemes.def>
#undef SDR_REL_SCHEME
    case Scheme::Auto:
        return "auto";
    }
    return nullptr;
}
const char* to_string(Scheme s);  // scheme_name, "?" for none
// The scheme sends parity: k data + parity chunks per submessage, data and parity SDR messages.
bool is_ec(Scheme s);

// What one message is sent with: a fixed scheme and, for EC, its k and m (0 otherwise).
struct Code {
    Scheme scheme = Scheme::Sr;
    uint32_t k = 0, m = 0;
    bool operator==(const Code&) const = default;
};
std::string to_string(const Code& c);  // "sr", "ec-mds:32,8"

struct Config {
    Scheme scheme = Scheme::Sr;
    uint32_t k = 32, m = 8;       // EC; auto: the code its EC candidates start from
    double rtt_ms = 25;           // first RTT estimate; measured afterwards (path_meter.hpp)
    double bw_gbps = 100;         // first delivery-rate estimate (injection times, the FTO); measured afterwards
    double alpha = 2;             // RTO = RTT·(1+α)
    double fto_alpha = 1;         // EC fallback timeout FTO = bytes/BW + 0.5·fto_alpha·RTT
    double ack_interval_us = 0;   // ACK pacing per message; 0 = the measured RTT/64
    double reorder_us = 20;       // sr-nack: a hole must persist this long before it is named
    uint64_t window_bytes = 0;    // SR: injected but unacknowledged bytes; 0 = unlimited
    uint32_t max_rounds = 16;     // bound on retransmissions of a chunk, NACK rounds, probes
    double timeout_ms = 0;        // per message, from post; 0 = derived (see README)
    bool compute = true;          // false: payload-free simulation — EC accounted, not computed
    double drop_hint = 0;         // auto: per-packet drop rate assumed until the receiver has measured one

};

// The code of a fixed scheme (k, m kept for EC only); auto has none until the receiver picks.
inline Code fixed_code(const Config& c)
{
    return {c.scheme, is_ec(c.scheme) ? c.k : 0, is_ec(c.scheme) ? c.m : 0};
}

// A registered scheme's name or "auto", optionally ":k,m" after those that take parameters
// ("ec-mds:32,8").
[[nodiscard]] bool parse_scheme(const std::string& text, Config* cfg, std::string* err);
// Every field in range (EC codes ISA-L supports, positive times); false + err otherwise.
[[nodiscard]] bool validate(const Config& cfg, std::string* err);

struct MessageStats {
    uint64_t id = 0, bytes = 0;
    Code code;                         // what the message was sent with (auto: what was picked)
    bool ok = false;
    std::string error;                 // why it failed
    uint64_t post_ns = 0, done_ns = 0; // completion: sender = final ACK, receiver = data whole
    uint32_t chunks = 0;               // data chunks
    uint32_t retransmitted_chunks = 0; // sender: chunk retransmissions; receiver: 0
    uint32_t decoded_chunks = 0;       // receiver: data chunks rebuilt by the code
    uint32_t fallbacks = 0;            // EC submessages repaired by SR
    uint32_t rounds = 0;               // retransmission / NACK rounds
};

}  // namespace sdr::rel
