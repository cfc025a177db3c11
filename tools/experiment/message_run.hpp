// One reliable message at a time over a simulated long-haul link, payload-free, for sweeps:
// the whole stack (reliability engines and binding, C-level SDR API, firmware, NIC model, link)
// runs in virtual time; only the bytes are left out (EC is accounted, not computed). One fabric
// and QP pair serve every sample of a link setting; each sample gets fresh endpoints, so no RTT
// estimate or loss history carries over between samples.
#pragma once

#include <sdr/host/sim_world.hpp>
#include <sdr/reliability/config.hpp>
#include <sdr/reliability/model.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace sdr::exp {

struct LinkSetup {
    double bw_gbps = 400, rtt_ms = 25;
    double drop = 0;            // per-packet loss, both directions (data and control)
    uint32_t mtu = 4096, chunk_bytes = 65536, channels = 8;
    uint64_t max_bytes = 1ull << 30;  // largest message a sample may send
    uint64_t seed = 1;
    bool per_packet_events = false;  // emu::FabricParams::per_packet_events (tests)
    // A datacenter network in place of the one link (emu::Topology::parse; its long haul takes
    // the rate, RTT and loss above): sim:0 and sim:1 are the hosts that talk. Empty: one link.
    std::string topology;
    bool drop_log = false;  // emu::FabricParams::drop_log: which packets were lost, and where
};

struct Sample {
    bool ok = false;
    std::string error;
    double completion_ms = 0;   // send post to the sender's final ACK
    uint32_t retransmitted = 0, decoded = 0, fallbacks = 0;
    rel::Code code;             // what the message was sent with (auto: what the receiver picked)
};

class MessageRun {
public:
    // Installs a fresh simulated fabric for this process (one MessageRun at a time).
    explicit MessageRun(const LinkSetup& link);
    ~MessageRun();
    MessageRun(const MessageRun&) = delete;
    MessageRun& operator=(const MessageRun&) = delete;

    // One message of `bytes` with cfg's scheme; cfg's compute/rtt/bw are set from the link
    // (for auto, cfg.drop_hint is the caller's: fresh endpoints have measured nothing).
    // The receive is posted one RTT ahead, so the clear-to-send waits at the sender, as when an
    // application posts buffers before data is due. The links' random streams restart from
    // `seed`: samples of different schemes with the same seed meet the same losses as far as
    // their packet sequences agree (paired comparison), and identical configurations the same.
    Sample run(rel::Config cfg, uint64_t bytes, uint64_t seed);
    // Frames the fabric has delivered so far (data and control).
    uint64_t packets() const;
    // The fabric the samples run on: what else runs there between them (background traffic),
    // its clock, its network's counters.
    emu::SimFabric& fabric() const { return world_->fabric(); }
    // Bytes on the wire per packet beyond its payload (headers, ICRC, preamble, gap, FCS).
    static double wire_overhead_bytes();

private:
    LinkSetup link_;
    std::unique_ptr<SimWorld> world_;
    void *src_ = nullptr, *dst_ = nullptr;
    uint64_t span_ = 0;
    uint32_t lkey_[2] = {};
};

// rel::model_params (packet memory; k, m, beta from cfg) for this link and its per-packet wire
// overhead. rto_rtts is the caller's.
rel::model::Params model_params(const LinkSetup& link, uint64_t bytes, const rel::Config& cfg);
// EC does not wait for the last submessage's parity (its data completes the message): the
// paper's bound less that parity's injection, ms.
double ec_unwaited_parity_ms(const rel::model::Params& p);
// The lossless time, ms: line-rate injection (a coded scheme's with the parity it waits for) + RTT.
double lossless_ms(const rel::Config& cfg, const LinkSetup& link, uint64_t bytes);

}  // namespace sdr::exp
