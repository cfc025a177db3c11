// The simulated fabric: emulated NICs joined by point-to-point links, all on one virtual
// clock. A NIC's port serialises its packets at the link bandwidth; each directed pair of NICs
// has its own link (propagation delay, impairments, own seeded random stream). Optional pcap
// tap of every frame that crossed a link, stamped with its virtual arrival time; a pcapng tap
// also records the frames the link dropped and what the link and the receiving NIC did.
#pragma once

#include <sdr/emu/dpa_model.hpp>
#include <sdr/emu/fifo_ring.hpp>
#include <sdr/emu/impairment.hpp>
#include <sdr/emu/network.hpp>
#include <sdr/emu/nic.hpp>
#include <sdr/emu/pcap_writer.hpp>
#include <sdr/emu/simulator.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sdr::emu {

struct LinkParams {
    double bandwidth_gbps = 100.0;
    double rtt_ms = 25.0;  // propagation delay is rtt / 2 each way
    ImpairmentParams impairment;
};

struct FabricParams {
    LinkParams link;
    // Impairments of single directed links {src NIC, dst NIC} in place of link.impairment:
    // asymmetric paths, such as a lossy reverse direction that drops only ACKs and NACKs.
    std::map<std::pair<uint32_t, uint32_t>, ImpairmentParams> directed;
    bool payload = true;     // false: frames carry headers and lengths only (paper-scale runs)
    std::string pcap_path;   // empty: no capture; "*.pcapng": pcapng with the link's decisions
    uint32_t pcap_snaplen = 0;  // bytes kept per data frame in the pcap; 0 = whole frames
                                // (control datagrams are always kept whole)
    bool drop_log = false;   // record every dropped packet (tests compare bitmaps with it)
    uint64_t seed = 1;
    // Pace the fabric by the wall clock (CLOCK_MONOTONIC from its creation): an event runs when
    // its time has come, waits block in real time, and hosts read wall time. The in-memory
    // port as a real-time emulator, run inline on the thread that polls. Default: virtual time.
    bool wall_clock = false;
    // The DPA and PCIe cost model (dpa_model.hpp); off by default: handlers cost nothing.
    DpaParams dpa;
    // One event per packet on both sides of a link: the port starts one packet per event (no
    // 1 us batch) and a link delivers one packet per event (no run-ahead). Slower; the
    // reference the batched default is tested against (tests/sim_batching_test.cpp).
    bool per_packet_events = false;
    // A datacenter network in place of the point-to-point links (topology.hpp, network.hpp):
    // switches, queues, ECMP. Unset (the default): every pair of NICs has its own link as above.
    std::optional<Topology> topology;
    // Switch ports whose egress the pcapng tap records too ("leaf0:2", or "leaf0" for all of a
    // switch's ports): each frame as it starts on the wire, each drop-tail drop, each ECN mark.
    std::vector<std::string> capture_ports;
    // The queue lengths of switch ports over time (queue_log.hpp): a CSV and a gnuplot script
    // beside it; the ports as capture_ports (empty: every port).
    std::string queue_log;
    std::vector<std::string> queue_log_ports;
    SimTime queue_log_interval_ps = 1'000'000;  // 1 us

    // Defaults overridden by SDR_SIM_* environment variables (see README). false + err on a
    // malformed value.
    [[nodiscard]] static bool from_env(FabricParams* out, std::string* err);
};

struct DropRecord {
    SimTime t;
    uint32_t src_nic, dst_nic;
    PacketMeta meta;
};

class SimFabric;

// One direction between two NICs. On cache-line boundaries: its first lines hold what a
// packet's send and delivery read (see the members).
class alignas(64) SimLink final : public SimTarget {
public:
    SimLink(SimFabric& fabric, Nic& dst, uint32_t src_index, const LinkParams& p, uint64_t seed);
    // The per-packet steps are hidden (called only inside libsdr, never interposed), so the
    // compiler may inline them into the port's and the link's events.
    [[gnu::visibility("hidden")]] void send(SimTime leaves, const PacketMeta& m, uint8_t* frame, uint32_t frame_len);
    void fire(SimTime now, uint64_t arg) override;
    void reseed(uint64_t seed) { imp_.reseed(seed); }
    uint64_t delivered() const { return delivered_; }
    uint64_t dropped() const { return dropped_; }
    uint64_t dropped_burst() const { return dropped_burst_; }  // of dropped(): Gilbert-Elliott
    uint64_t duplicated() const { return duplicated_; }
    uint64_t reordered() const { return reordered_; }
    uint64_t ce_marked() const { return ce_marked_; }

private:
    struct InFlight {
        SimTime arrival;
        PacketMeta meta;
        uint8_t* frame;
        uint32_t frame_len;
        uint8_t note;  // capture_note bits: what the link did (delayed, duplicated, the copy)
    };
    static_assert(sizeof(InFlight) == 64, "a packet in flight takes one cache line");
    [[gnu::visibility("hidden")]] void deliver(const InFlight& f);
    void tap_deliver(const InFlight& f);  // deliver with the pcap tap on
    void push_late(const InFlight& f);
    [[gnu::visibility("hidden")]] void send_impaired(SimTime leaves, const PacketMeta& m, uint8_t* frame, uint32_t frame_len);
    [[gnu::visibility("hidden")]] void push_fifo(SimTime arrival, const PacketMeta& m, uint8_t* frame, uint32_t frame_len, uint8_t note);
    static bool later(const InFlight& a, const InFlight& b) { return a.arrival > b.arrival; }
    static constexpr int kMaxRunAhead = 64;

    // What a packet's send reads, on the object's first cache line, and what its delivery
    // reads besides, on the second: with many NICs each line a packet touches is a cache miss.
    SimFabric& fabric_;
    Nic& dst_;
    // Arrivals in order. It starts small and grows to the packets in flight: a ring cycles
    // through all its slots, and 1024 of them per link (64 KiB) put every packet on a cold line
    // and a page of its own to fault in, over 128 links.
    FifoRing<InFlight> fifo_{32};
    SimTime prop_ps_;
    bool plain_ = false;  // imp_.none(), set once imp_ is built
    alignas(64) uint64_t delivered_ = 0;
    const int max_run_ahead_;  // kMaxRunAhead, or 1 with FabricParams::per_packet_events
    uint32_t src_index_;
    NicAddress src_addr_;  // what the source NIC's frames carry (payload-free packets have none)
    Impairment imp_;
    std::vector<InFlight> late_;  // reordered and duplicated packets (min-heap on arrival)
    uint64_t dropped_ = 0, dropped_burst_ = 0, duplicated_ = 0, reordered_ = 0, ce_marked_ = 0;
};

class SimFabric final : public NicExecutor {
public:
    explicit SimFabric(const FabricParams& p);
    ~SimFabric();

    const FabricParams& params() const { return params_; }
    Simulator& sim() { return sim_; }

    // NIC `index` of the fabric, created on first use with num_workers DPA workers.
    Nic& nic(uint32_t index, uint32_t num_workers);
    Nic* find_nic(uint32_t index);
    Nic* nic_by_ip(uint32_t ip);
    // NIC i's addresses: 10.0.0.(i+1), never leaving the process (inline: every payload-free
    // packet's receipt names its sender by them).
    static NicAddress address_of(uint32_t index)
    {
        NicAddress a;
        a.mac = {0x02, 0x00, 0x00, 0x00, static_cast<uint8_t>(index >> 8), static_cast<uint8_t>(index + 1)};
        a.ip = (10u << 24) | (index + 1);
        return a;
    }
    // How many NICs (hosts) the fabric can hold: a topology's hosts, else 256.
    uint32_t host_limit() const { return net_ ? net_->topology().hosts : 256; }
    // The network of switches, if params().topology is set.
    SimNetwork* network() { return net_.get(); }
    const SimNetwork* network() const { return net_.get(); }

    // Run up to max_events events within kProgressSlicePs of virtual time, moving the clock by
    // at most one slice when nothing is due sooner (wall clock: all events already due); false
    // if nothing is pending.
    static constexpr SimTime kProgressSlicePs = 10'000'000;  // 10 us
    bool progress(uint64_t max_events = 4096);
    void run_until_idle();
    // Run events up to time t, but stop right after the first one a host could notice
    // (Nic::host_events of any NIC changes); the clock ends at t if none did (t = UINT64_MAX:
    // wait for an event without a time limit; the clock stays at the last event). On a wall
    // clock this blocks until then.
    void wait_event(SimTime t);
    // Run everything due until t and set the clock to t (wall clock: block until t).
    void advance_to(SimTime t);
    // The clock hosts read (sdr_now_ns), in ns: virtual time, or wall time on a wall clock.
    uint64_t host_now_ns() const;
    // Wall clock: run what is due and bring the clock to the wall, so that what a host starts
    // now (a doorbell, a datagram) happens now and not back when the fabric last ran. No-op in
    // virtual time.
    void catch_up();

    // Deliver raw bytes to a NIC at virtual time `at` (hostile-input tests, out-of-band peers).
    void inject_frame(uint32_t dst_nic, std::vector<uint8_t> frame, SimTime at);

    SimLink* link(uint32_t src, uint32_t dst);
    // The longest a frame can take from leaving a port to arriving at its NIC, over every
    // link: propagation, the largest reorder delay, and the 1 ns a duplicate trails by.
    SimTime max_transit_ps() const;
    const std::vector<DropRecord>& drop_log() const { return drops_; }
    uint64_t packets_delivered() const;
    // Restart every link's random stream as if the fabric had been created with `seed`: runs
    // that reseed alike see the same losses for the same packet sequence (paired comparisons).
    void reseed(uint64_t seed);

    // NicExecutor
    uint64_t now_ns() override { return sim_.now() / kPsPerNs; }
    void tx_ready(Nic& nic) override;
    void arm_timer(Nic& nic, uint32_t worker, uint32_t id, uint64_t deadline_ns) override;
    bool dispatch_rx_cqe(Nic& nic, uint32_t worker, const hal_cqe& cqe) override;
    bool resolve_mac(uint32_t ip, std::array<uint8_t, 6>* mac) override;
    // Verbs asynchronous events, in the order the NICs raised them (tests read the log).
    struct VerbsAsync {
        verbs::AsyncEvent ev;
        uint32_t handle;
    };
    void verbs_async_event(verbs::AsyncEvent ev, uint32_t handle) override { verbs_async_.push_back({ev, handle}); }
    const std::vector<VerbsAsync>& verbs_async_log() const { return verbs_async_; }
    // Multicast (fabric_mcast.cpp): the membership table the NICs keep current, group (IPv4,
    // host order) -> the indices of the NICs with a QP attached, ascending; nullptr for a
    // group without members. On the full mesh the sending port replicates a frame to the
    // group to every member NIC's link but its own, one copy each (mcast_send).
    void mcast_membership(Nic& nic, uint32_t group_ip, bool member) override;
    const std::vector<uint32_t>* mcast_members(uint32_t group_ip) const;
    // Who hears of verbs completions, at the event that made them (one listener; empty: none):
    // a generator in the fabric (traffic.hpp) polls the CQ named, in virtual time, no host thread.
    using VerbsCqListener = std::function<void(Nic& nic, uint32_t cq)>;
    void set_verbs_cq_listener(VerbsCqListener f) { verbs_cq_listener_ = std::move(f); }
    void verbs_cq_event(Nic& nic, uint32_t cq, bool) override
    {
        if (verbs_cq_listener_) verbs_cq_listener_(nic, cq);
    }
    // The cost model, if params().dpa.enabled (its per-NIC statistics).
    DpaModel* dpa() { return dpa_.get(); }

    // Frame buffers for the full-payload mode.
    uint8_t* frame_alloc();
    void frame_free(uint8_t* f);
    static constexpr uint32_t kFrameCap = 4224;

    // The process-wide fabric behind "sim:N" device names: created from the environment on
    // first use, or installed explicitly (tests, tools) before the first context is opened.
    [[nodiscard]] static SimFabric* process(std::string* err);
    static void install(std::unique_ptr<SimFabric> fabric);

    // What a host could notice so far (SimFabric::wait_event watches it; pipes into NICs too).
    uint64_t host_events_now() const { return host_events(); }

private:
    friend class SimLink;
    friend class SimNetwork;
    friend class Egress;
    friend class SimSwitch;
    // A frame reaches NIC `dst` from host `src` at `arrival` (the network's last hop), with the
    // pcap tap if it is open.
    void deliver_to_nic(uint32_t dst, uint32_t src, SimTime arrival, const PacketMeta& m, uint8_t* frame,
                        uint32_t frame_len, uint8_t note);
    void tap_rx(Nic& dst, uint32_t src, SimTime arrival, const PacketMeta& m, uint8_t* frame, uint32_t frame_len,
                uint8_t note);
    // A switch dropped a packet (drop-tail, a lossy link, no route): logged, captured, freed.
    void network_drop(SimTime t, uint32_t src, uint32_t dst, const PacketMeta& m, uint8_t* frame, uint32_t frame_len,
                      const char* cause);
    // The tap of a switch port (pcapng interface id `iface`): p leaves it (marked: ECN CE set
    // there), or is dropped there (drop: the capture_note cause).
    void tap_switch(uint32_t iface, SimTime t, const FabricPacket& p, bool marked, const char* drop);
    uint32_t tap_interface(const std::string& name) { return pcap_.interface(name); }
    bool tap_pcapng() const { return pcap_.pcapng(); }
    // The pcapng tap. A dropped frame waits in pending_drops_ until the tap reaches the time it
    // would have arrived, so the file stays in time order; so does a switch port's record.
    struct PendingDrop {
        SimTime t;
        uint64_t seq;       // equal times: in the order they were made
        uint32_t dst;
        const char* cause;  // a capture_note string
        uint32_t origlen;
        std::vector<uint8_t> bytes;
        uint32_t iface;     // a switch port's interface + 1; 0: the receiving NIC's
        uint32_t flags;     // pcapng flags
    };
    static bool pending_later(const PendingDrop& a, const PendingDrop& b)
    {
        return a.t != b.t ? a.t > b.t : a.seq > b.seq;
    }
    void capture_drop(SimTime t, uint32_t src, uint32_t dst, const PacketMeta& m, const uint8_t* frame,
                      uint32_t frame_len, const char* cause);
    void flush_drops(SimTime upto);
    uint32_t rx_interface(uint32_t nic);
    // The bytes the tap keeps of a frame (cut at the snaplen; payload-free: its headers).
    size_t capture_bytes(const PacketMeta& m, uint32_t src, uint32_t dst, const uint8_t* frame, uint32_t frame_len,
                         const uint8_t** bytes, uint8_t* hdr, uint32_t* origlen) const;
    std::vector<PendingDrop> pending_drops_;
    uint64_t pending_seq_ = 0;
    bool tap_ = false;                 // the pcap tap is open
    std::vector<uint32_t> rx_ifaces_;  // pcapng interface id + 1 per NIC (0: not declared yet)
    SimTime wall_ps() const;
    uint64_t link_seed(uint64_t pair) const;
    uint64_t id_seed(uint32_t nic) const;
    void sleep_until(SimTime t) const;
    uint64_t host_events() const;
    class Port;
    class Timers;
    // A packet of `src` to a multicast group, leaving its port at `leaves`, encoded in `frame`
    // (taken, freed here): a copy into each member's link (the sender's own NIC excepted).
    void mcast_send(Nic& src, SimTime leaves, const TxPacket& p, uint8_t* frame, uint32_t len);
    std::map<uint32_t, std::vector<uint32_t>> mcast_;  // group -> member NICs, ascending
    FabricParams params_;
    std::chrono::steady_clock::time_point wall_zero_ = std::chrono::steady_clock::now();
    Simulator sim_;
    // Host events of all NICs (each NIC counts its own too): what wait_event watches, one load
    // per event instead of a sum over the NICs. Declared before nics_, which count into it.
    std::atomic<uint64_t> host_events_{0};
    std::vector<std::unique_ptr<Nic>> nics_;
    std::vector<std::unique_ptr<Port>> ports_;
    std::map<uint64_t, std::unique_ptr<SimLink>> links_;
    std::unique_ptr<Timers> timers_;
    std::vector<uint8_t*> free_frames_;
    std::vector<std::unique_ptr<uint8_t[]>> frame_blocks_;
    std::vector<DropRecord> drops_;
    std::vector<VerbsAsync> verbs_async_;
    VerbsCqListener verbs_cq_listener_;
    PcapWriter pcap_;
    struct Injected {
        uint32_t dst;
        std::vector<uint8_t> frame;
    };
    class Injector;
    std::unique_ptr<Injector> injector_;
    std::unique_ptr<DpaModel> dpa_;
    std::unique_ptr<SimNetwork> net_;  // declared last: its pipes hold frames of frame_blocks_
};

}  // namespace sdr::emu
