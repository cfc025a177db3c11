// The NIC core: what the NIC's two engines share and what the executors see. The SDR engine
// (nic.hpp: SDR's regions, root keys, transport and control QPs, DPA workers, the HAL binding)
// derives from it; the verbs engine (verbs_engine.hpp: RC/UC/UD QPs for libibverbs) uses it
// through a reference. Neither engine includes the other's header: the NIC hands the verbs
// engine its frames, timers and port turns through NicEngine.
#pragma once

#include <sdr/emu/dcqcn.hpp>
#include <sdr/emu/ids.hpp>
#include <sdr/emu/rx_drop.hpp>
#include <sdr/emu/wire.hpp>
#include <sdr/hal/hal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

namespace sdr::emu {

// Preamble + start delimiter (8), inter-frame gap (12) and FCS (4): the wire time of a frame is
// (frame + 24) bytes, so a port's serialisation, DCQCN's paced rate and goodput figures count a
// line rate as real Ethernet does.
inline constexpr uint32_t kWireOverheadBytes = 24;

class Nic;
namespace verbs {
enum class AsyncEvent : uint8_t;  // verbs.hpp
}

// What one RoCEv2 packet says (decoded from a frame, or never encoded: payload-free mode).
struct PacketMeta {
    uint64_t va = 0;
    // dma_len: the payload's bytes (a verbs WRITE FIRST's RETH length travels beside it)
    // imm: the ImmDt, or an RC ACK's or READ response's AETH (no opcode carries both)
    uint32_t dest_qp = 0, psn = 0, rkey = 0, dma_len = 0, imm = 0;
    uint32_t qkey = 0, src_qp = 0;  // DETH of a control datagram (UD SEND)
    uint16_t udp_src_port = 0;  // flow entropy
    uint8_t opcode = 0;
    bool solicited : 1 = false;  // the BTH's SE bit (verbs: on a message's last packet)
    bool ack_req : 1 = false;    // the BTH's AckReq bit (SDR's RC packets: nic_sdr_rc.cpp)
    // The IPv4 header's ECN bits (wire::kEcn*): what the sender set (ECT(0) with DCQCN on, else
    // Not-ECT), CE once a switch or the link marked it. In the spare bits of the last byte.
    uint8_t ecn : 2 = wire::kEcnNotEct;
};
static_assert(sizeof(PacketMeta) == 40, "PacketMeta is half of a TxPacket's 80 bytes");

struct NicAddress {
    std::array<uint8_t, 6> mac{};
    uint32_t ip = 0;  // host order
};


// The RoCEv2 headers of a packet between two NICs: the one place a PacketMeta becomes a frame
// header (the send engine's frames and the payload-free pcap records alike).
wire::Headers roce_headers(const PacketMeta& m, const NicAddress& src, const NicAddress& dst);

// The ones every packet adds to first, together (NicCore keeps them beside its other per-packet
// fields): with many NICs each line a packet touches is a cache miss.
struct PortCounters {
    uint64_t rx_frames = 0, rx_bytes = 0, rx_placed_bytes = 0, rx_cqes = 0, rx_null_key = 0;
    uint64_t tx_frames = 0, tx_bytes = 0, tx_local_errors = 0;
    uint64_t rx_drops[static_cast<size_t>(RxDrop::Count)] = {};
    uint64_t rx_ctrl = 0, tx_ctrl = 0;  // control datagrams (also counted in rx/tx_frames)
    // DCQCN (dcqcn.hpp): CE-marked data packets received, CNPs sent (as NP) and taken (as RP)
    uint64_t rx_ce = 0, cnp_sent = 0, cnp_received = 0;
    uint64_t rx_drop(RxDrop d) const { return rx_drops[static_cast<size_t>(d)]; }
    uint64_t rx_drops_total() const;
};

struct QpCounters {
    uint64_t rx_packets = 0, rx_drops = 0, rx_null_key = 0, tx_packets = 0, tx_bytes = 0;
    uint64_t tx_retransmits = 0;  // RC: packets sent again (go-back-N after a NAK or a timeout)
};

// A packet the send engine hands to the port.
struct TxPacket {
    PacketMeta meta;
    uint32_t remote_ip = 0;
    std::array<uint8_t, 6> remote_mac{};
    const uint8_t* payload = nullptr;  // local MR bytes (full-payload mode); atomics: encode_padded
    uint32_t qp = 0;                   // transport QP handle
    uint32_t cookie = 0;               // verbs: the send queue index of the packet's WQE
    uint32_t reth_len = 0;             // verbs WRITE FIRST, READ request: the RETH's DMA length
    bool signaled = false;             // verbs: the last packet of its WQE
    // Sdr: a transport QP's WRITE-with-immediate; Ctrl: a control datagram (qp: the control
    // QP handle); Verbs: a verbs QP's packet (qp: the verbs QP handle); SdrAck: an RC transport
    // QP's ACK or NAK (qp: its handle). One byte, so SDR's per-packet path tests one value for
    // "not SDR". Cnp: a DCQCN congestion notification (wire::kOpCnp) to a sending QP; no QP
    // of ours completes with it. Every kind but Sdr and Verbs is control traffic.
    enum class Kind : uint8_t { Sdr, Ctrl, Verbs, SdrAck, Cnp } kind = Kind::Sdr;
    bool local_error = false;          // lkey/bounds check failed: no packet, error completion
    // RC request: the BTH's AckReq bit. (An RC ACK's or READ response's AETH travels in
    // meta.imm: no opcode carries both; so the packet stays 80 bytes, the batch stride SDR pays.)
    bool ack_req = false;
};

// What the NIC needs from whatever runs it.
class NicExecutor {
public:
    virtual uint64_t now_ns() = 0;
    virtual void tx_ready(Nic& nic) = 0;  // the send engine has work
    virtual void arm_timer(Nic& nic, uint32_t worker, uint32_t id, uint64_t deadline_ns) = 0;
    // A receive CQE of `nic` for `worker`: true if the executor hands it to that worker's own
    // thread or a later time (which calls Nic::run_rx_cqe, or drops it as a CQ overflow), false
    // to run the handler inline, now.
    virtual bool dispatch_rx_cqe(Nic& nic, uint32_t worker, const hal_cqe& cqe)
    {
        (void)nic;
        (void)worker;
        (void)cqe;
        return false;
    }
    // The next hop's MAC towards IPv4 address ip (host order), for a verbs address vector: the
    // one place a GID becomes a MAC (VerbsEngine::resolve_gid). The simulator knows every NIC's address;
    // the real-time executor asks the kernel's route and neighbour tables (neighbour.hpp).
    virtual bool resolve_mac(uint32_t ip, std::array<uint8_t, 6>* mac)
    {
        (void)ip;
        (void)mac;
        return false;
    }
    // A completion reached verbs CQ `cq` of `nic`, or the CQ went into error
    // (VerbsEngine::verbs_complete, with the executor's lock held): where a provider raises its
    // completion-channel event, and where an executor of many NICs learns which CQ to poll now.
    // `solicited`: a receive of a solicited message or an error completion (or the overrun),
    // what a CQ armed for solicited completions only waits for.
    virtual void verbs_cq_event(Nic& nic, uint32_t cq, bool solicited)
    {
        (void)nic;
        (void)cq;
        (void)solicited;
    }
    // An asynchronous event of the verbs object `handle` (a CQ, QP or SRQ handle, by the event's
    // kind), with the executor's lock held: where a provider writes its async event record.
    virtual void verbs_async_event(verbs::AsyncEvent ev, uint32_t handle)
    {
        (void)ev;
        (void)handle;
    }

    // Multicast membership of `nic` (VerbsEngine::mcast_attach/mcast_detach, with the executor's
    // lock held): member = true when its first QP joins IPv4 group `group_ip` (host order,
    // 224.0.0.0/4), false when its last leaves. Where a fabric keeps its replication table and
    // a real port accepts the group's Ethernet address.
    virtual void mcast_membership(Nic& nic, uint32_t group_ip, bool member)
    {
        (void)nic;
        (void)group_ip;
        (void)member;
    }

protected:
    ~NicExecutor() = default;
};

// A transport engine beside SDR's data path (the verbs engine), attached on first use
// (Nic::verbs): the NIC hands it the frames, timers and port turns that are its own. Only its
// packets pay for the indirect call.
class NicEngine {
public:
    virtual ~NicEngine() = default;
    // A frame to a QPN of its space (NicCore::kVerbsQpnBit); ip_header and hd as decoded.
    virtual void receive(const PacketMeta& m, const uint8_t* payload, const NicAddress& src,
                         const uint8_t* ip_header, const wire::Headers& hd) = 0;
    [[nodiscard]] virtual bool tx_next(TxPacket* out) = 0;  // its next packet, if it has one
    virtual void tx_done(const TxPacket& p) = 0;            // one of its packets left the port
    virtual void timer(uint32_t id) = 0;                     // its timer `id` fired
    virtual void dcqcn_reset() = 0;  // DCQCN went on or off (Nic::set_dcqcn): every QP at line rate
};

// The whole frame of a padded verbs-style packet (a verbs QP's, an RC ACK or NAK): headers,
// payload, pad and ICRC; bytes written, 0 if cap is too small.
size_t encode_padded(const TxPacket& p, const NicAddress& src, uint8_t* out, size_t cap);
// Bytes of the frame encode_padded makes of p.
inline size_t padded_frame_bytes(const TxPacket& p) { return wire::frame_bytes(p.meta.opcode, p.meta.dma_len, true); }

class NicCore {
public:
    static constexpr uint32_t kNoHandle = 0xFFFFFFFFu;  // a create call found every index in use
    // The QPN space (ids.hpp): bit 23 clear names SDR's transport QPs; set, bit 12 names a verbs
    // QP, clear a control QP.
    static constexpr uint32_t kVerbsQpnBit = 1u << (NicIds::kQpnIndexBits - 1);
    static constexpr uint32_t kMaxVerbsQps = kVerbsQpnBit;  // 4096 verbs QPs, 4096 control QPs
    // The verbs engine's timers (RC retransmission and RNR wait) go through
    // NicExecutor::arm_timer with this worker number, above every DPA worker's, and the QP
    // handle as id: SDR's timer ids stay theirs.
    static constexpr uint32_t kVerbsTimerWorker = 0xFFFF;
    // DCQCN's pacing wake-up (nic_dcqcn.cpp), for the QPs of both engines: when every packet
    // that could go waits for its QP's rate, the send engine asks for this timer (id 0) and
    // resumes at its deadline.
    static constexpr uint32_t kDcqcnTimerWorker = 0xFFFD;

    NicCore(const NicCore&) = delete;
    NicCore& operator=(const NicCore&) = delete;

    uint32_t index() const { return index_; }
    const NicAddress& address() const { return addr_; }
    bool payload() const { return payload_; }
    NicExecutor* executor() const { return exec_; }
    const PortCounters& counters() const { return port_; }

    // Events a polling host could notice: host-window writes by the firmware and received
    // control datagrams. A virtual-time waiter stops when this changes. One counter, read per
    // delivered packet by the simulator's run-ahead, written by whichever thread made the event.
    uint64_t host_events() const { return host_events_.load(std::memory_order_acquire); }
    void note_host_event()
    {
        host_events_.fetch_add(1, std::memory_order_release);
        if (event_sink_) event_sink_->fetch_add(1, std::memory_order_release);
    }
    // Also count host events in *sink (a fabric's count over all its NICs; nullptr: no more).
    void count_host_events_in(std::atomic<uint64_t>* sink) { event_sink_ = sink; }

protected:
    // id_seed: QPNs, keys and Q_Keys drawn from a generator with this seed (replayable runs);
    // nullopt: from getrandom() (ids.hpp).
    NicCore(uint32_t index, NicAddress addr, bool payload, NicExecutor* exec, std::optional<uint64_t> id_seed)
        : payload_(payload), index_(index), exec_(exec), addr_(addr), ids_(id_seed)
    {
    }
    ~NicCore() = default;

    friend class VerbsEngine;  // the attached engine shares the identity, ids, counters and executor
    // ---- DCQCN (dcqcn.hpp, nic_dcqcn.cpp), NIC-wide: both engines' QPs ----
    struct CnpSend {  // a CNP waiting for the port
        uint32_t dest_qp = 0, remote_ip = 0;
        std::array<uint8_t, 6> remote_mac{};
        uint16_t udp_src_port = 0;
    };
    // NP: a CNP to the sending QP dest_qp at `to`, from UDP source port `port`, next in the port.
    void dcqcn_queue_cnp(uint32_t dest_qp, const NicAddress& to, uint16_t port);
    // A QP whose next packet may leave at next_send_ns: true if by now_ns (the executor's now),
    // else false and the wake-up armed for it (one timer, for the earliest deadline of any QP).
    // Inline, as dcqcn_paced: both run per packet.
    bool dcqcn_due(uint64_t next_send_ns, uint64_t now_ns) { return next_send_ns <= now_ns || dcqcn_wait(next_send_ns); }
    [[gnu::noinline]] bool dcqcn_wait(uint64_t next_send_ns);  // dcqcn_due's wake-up: false
    // A data packet of frame_bytes left a QP with reaction point rp at now_ns: the time its next
    // may leave (wire bytes at the rate Rc after this one), and the byte counter.
    void dcqcn_paced(DcqcnRp& rp, uint64_t* next_send_ns, uint64_t frame_bytes, uint64_t now_ns)
    {
        *next_send_ns = std::max(*next_send_ns, now_ns) + rp.pace(now_ns, frame_bytes + kWireOverheadBytes);
    }
    // What the per-packet paths read or count first, on the object's first two cache lines.
    bool dcqcn_on_ = false;    // dcqcn_.enabled: the one flag the per-packet paths test
    bool payload_;
    bool engine_tx_ = false;  // the attached engine has packets to send (NicEngine::tx_next)
    uint32_t index_;
    NicExecutor* exec_;
    std::atomic<uint64_t> host_events_{0};
    std::atomic<uint64_t>* event_sink_ = nullptr;
    PortCounters port_;
    NicAddress addr_;
    NicIds ids_;
    DcqcnParams dcqcn_;
    uint64_t dcqcn_wake_ns_ = 0;  // the pacing timer's deadline in force, 0: none
    std::deque<CnpSend> cnps_;
    std::unique_ptr<NicEngine> engine_;  // attached on first use; last, so it goes first
};

}  // namespace sdr::emu
