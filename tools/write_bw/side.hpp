// What every mode of sdr_write_bw shares: the run's parameters and the control messages the two
// sides exchange (little-endian; both ends are this program), the channel they travel on (the
// TCP bootstrap, or a queue when both sides live in this process), one side's context and QP,
// its clock and its NIC's counters.
#pragma once

#include "options.hpp"

#include "common/json.hpp"

#include <sdr.h>
#include <sdr_oob.h>
#include <sdr_rel.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sdr::write_bw {

enum class Mode : uint32_t { Bandwidth = 0, Latency = 1 };

// What the client tells the server before each run.
struct RunParams {
    uint32_t magic = 0x53445257;  // "SDRW"
    uint32_t version = 3;         // 2: several runs per connection (-a); 3: mode, -b, scheme
    uint64_t size = 0;
    uint32_t iters = 0, warmup = 0, in_flight = 0, mtu = 0, chunk = 0, channels = 0;
    Mode mode = Mode::Bandwidth;
    uint32_t bidirectional = 0;
    char scheme[32] = {};  // sdr_rel.h scheme name; "" = raw sdr_send
    bool valid() const { return magic == RunParams{}.magic && version == RunParams{}.version; }
};
struct Credit {
    uint32_t type = 1;  // receives posted so far (cumulative)
    uint32_t posted = 0;
};
struct SentUpTo {
    uint32_t type = 2;  // sends completed so far (cumulative)
    uint32_t sent = 0;
    uint64_t frames = 0;  // with every send completed: the frames the sender's kernel took (raw:/xdp:)
};
struct Result {
    uint32_t type = 3;
    uint32_t messages = 0;
    uint64_t chunks_expected = 0, chunks_received = 0;
    uint64_t bytes_received = 0;  // in complete chunks (scheme: delivered messages' bytes)
    double seconds = 0;           // first measured arrival to last measured completion
    uint32_t failed = 0;          // scheme: messages the reliability layer gave up on
    uint32_t corrupt = 0;         // --verify: corrupt chunks (scheme: messages)
};
// The last message of a run: after it nothing of that run is on the channel.
struct Done {
    uint32_t type = 4;
};

[[noreturn]] void die(const std::string& what);
[[noreturn]] void die_sdr(const std::string& what);
[[noreturn]] void die_rel(const std::string& what);

bool pow2(uint64_t v);
uint32_t log2_ceil(uint64_t v);
// The bytes every message carries, so the receiver can check what it received on its own.
inline uint8_t pattern(size_t i) { return static_cast<uint8_t>(i * 131 + 7); }

// The control messages between the two sides.
class Peer {
public:
    virtual ~Peer() = default;
    virtual void send(const void* p, size_t n) = 0;
    // One message into *m if one is there within timeout_ms (0: only if one is waiting now).
    virtual bool poll(std::vector<uint8_t>* m, int timeout_ms = 0) = 0;
    template <class T>
    void send(const T& v)
    {
        send(&v, sizeof v);
    }
};
std::unique_ptr<Peer> oob_peer(sdr_oob* oob);
// Two ends of an in-process queue (-d sim).
std::pair<std::unique_ptr<Peer>, std::unique_ptr<Peer>> local_peers();

template <class T>
bool take(const std::vector<uint8_t>& m, T* out)
{
    if (m.size() != sizeof(T)) return false;
    std::memcpy(out, m.data(), sizeof(T));
    if constexpr (requires { out->type; }) return out->type == T{}.type;
    return true;
}

// One context and QP shaped by the run's parameters (send and receive enabled: -b and the
// latency mode send both ways, the reliability layer needs its control path back).
struct Side {
    std::string device;
    sdr_context* ctx = nullptr;
    sdr_qp* qp = nullptr;
    sdr_qp_attr attr{};
    uint32_t slots = 0;
    sdr_rel_endpoint* ep = nullptr;  // --scheme

    Side(const Options& o, const std::string& device, const RunParams& rp);
    void connect(Peer& peer, int timeout_ms);  // exchanges QP info over the peer
    void connect(Side& other);                 // both in this process
    // --scheme: the endpoint on the connected QP.
    void open_endpoint(const RunParams& rp, double rtt_ms, double bw_gbps);
    double now_s() const;  // the device's clock: virtual time on sim:, else monotonic
    // Sleep until `dt` seconds from now or the first event (virtual time skips idle gaps).
    void wait(double dt) const;
    std::string port_mode() const;
    ~Side();
    Side(const Side&) = delete;
    Side& operator=(const Side&) = delete;
};

// Every counter of the context's NIC (sdr_stats.h), by name; one of them (0 if absent).
std::vector<std::pair<std::string, uint64_t>> nic_counters(sdr_context* ctx);
uint64_t counter(const std::vector<std::pair<std::string, uint64_t>>& all, const std::string& name);
// What the NIC counted, as text (a summary line, then every non-zero counter) or JSON members;
// on a device that keeps none ("verbs:"), that they are not available.
std::string nic_report(sdr_context* ctx);
void nic_report(sdr_context* ctx, tools::Json* j);

}  // namespace sdr::write_bw
