// The Communication Manager agent of one NIC: the IBTA's connection protocol (vol. 1 chapter 12)
// spoken through the NIC's GSI QP1 over RoCEv2, with the RDMA IP CM service's header in the
// private data (vol. 1 Annex A11), so that rdma_cm served in user space (the verbs provider's
// rdma_cm device) meets another SDR NIC, or any RoCEv2 CM, on the wire. The MADs themselves are
// cm_mad.hpp's (pure encode/decode); this agent keeps each connection's state, timers and
// retries, and turns MADs into events for its one listener.
//
// Threading: one agent per verbs engine (NIC), attached to the engine's QP1 at construction and
// detached at destruction. Every public call runs under the NIC executor's lock, as
// VerbsEngine's create/modify/destroy do (the simulator: between runs or from a host event; the
// real-time provider: holding the executor's lock, engine.cpp). The agent's own work (received
// MADs, timers) runs on the NIC's thread under that same lock. Events reach the handler
// (set_event_handler) synchronously, with the lock held: from inside the NIC's receive or timer
// path, or from inside the public call that caused them (accept on the active side raises
// Established at once). The handler must not call the agent: it copies the event (Event is a
// value: its private data is inside it) and acts on it later, outside the handler.
#pragma once

#include <sdr/emu/verbs.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

namespace sdr::emu {

class VerbsEngine;

namespace cm {

// QP1, the General Services Interface (IBTA vol. 1 chapter 13): every CM MAD goes to and from
// it, with the well-known GSI Q_Key and the default P_Key.
inline constexpr uint32_t kGsiQpn = 1;
inline constexpr uint32_t kGsiQkey = 0x80010000u;
inline constexpr uint16_t kDefaultPkey = 0xFFFF;

// The RDMA IP CM service (IBTA vol. 1 Annex A11; the Linux kernel's rdma_get_service_id):
// service ID = port space << 16 | port, the port space numbered as librdmacm's RDMA_PS_*
// (0x01 in its high byte is the service's prefix, 0x0000000001xxxxxx on the wire).
enum class PortSpace : uint16_t { Ipoib = 0x0002, Tcp = 0x0106, Udp = 0x0111, Ib = 0x013F };
constexpr uint64_t service_id(PortSpace ps, uint16_t port)
{
    return static_cast<uint64_t>(ps) << 16 | port;
}

// Private data after the 36-byte IP CM header (Annex A11): what a consumer may send in each
// message, and what it gets (the whole field: IB carries no length, so the kernel's rdma_cm
// hands the full field too, zero-padded).
inline constexpr size_t kIpCmHeaderBytes = 36;
inline constexpr size_t kReqPrivateData = 92 - kIpCmHeaderBytes;             // 56
inline constexpr size_t kSidrReqPrivateData = 216 - kIpCmHeaderBytes;        // 180
inline constexpr size_t kRepPrivateData = 196, kRejPrivateData = 148, kRtuPrivateData = 224;
inline constexpr size_t kDreqPrivateData = 220, kDrepPrivateData = 224, kMraPrivateData = 222;
inline constexpr size_t kSidrRepPrivateData = 136;
inline constexpr size_t kMaxPrivateData = 224;

// A connection's handle on this agent: its local communication ID (nonzero; an index in the low
// bits and random bits above, so a stale handle or a forged MAD names nobody).
using CmId = uint32_t;
inline constexpr CmId kNoId = 0;

// The path between the two ports (RoCEv2 over IPv4: GIDs are IPv4-mapped, ::ffff:a.b.c.d).
// Addresses are host order. local_port/remote_port are rdma_cm's ports: the source port travels
// in the IP CM header, the destination port in the service ID.
struct Path {
    verbs::Gid local_gid{}, remote_gid{};
    uint32_t local_ip = 0, remote_ip = 0;
    uint16_t local_port = 0, remote_port = 0;
    uint8_t traffic_class = 0, hop_limit = 64;
    uint32_t flow_label = 0;  // 20 bits
    uint16_t pkey = kDefaultPkey;
    uint8_t local_ack_timeout = 14;  // the REQ's Primary Local ACK Timeout (the QP's timeout code)
};

// What one side tells the other about its QP (the REQ's and REP's fields). In an event these are
// the peer's. qp_type: RC or UC (UD goes through SIDR).
struct ConnParams {
    uint32_t qpn = 0;           // 24 bits
    uint32_t starting_psn = 0;  // 24 bits: the PSN this side sends first (the peer's rq_psn)
    verbs::QpType qp_type = verbs::QpType::Rc;
    uint8_t responder_resources = 0, initiator_depth = 0;  // READs as responder / requester
    uint8_t retry_count = 7, rnr_retry_count = 7;         // 3 bits each (REP carries no retry count)
    bool srq = false;
    bool flow_control = true;  // End-to-End Flow Control
    uint32_t path_mtu = 1024;  // bytes: 256 .. 4096
};

// The protocol's timers and limits (IBTA vol. 1 chapter 12: CM Response Timeout, Max CM
// Retries, MRA service timeout, time-wait): a MAD is sent again after the response
// timeout (4.096 us * 2^code, plus the peer's MRA service timeout once it sent one), up to
// max_retries times; then a REQ or SIDR_REQ is Unreachable, a REP Unreachable on the passive
// side, a DREQ Disconnected. Small by default (about 0.54 s per try, 4 tries: a dead peer is
// reported within about 2.2 s); the kernel's rdma_cm waits far longer (code 20, 15 retries).
struct CmConfig {
    uint8_t response_timeout_code = 17;  // this side's CM Response Timeout (REQ: Local CM Response Timeout)
    uint8_t max_retries = 3;             // REQ: Max CM Retries (4 bits)
    uint8_t mra_service_timeout_code = 20;  // what an MRA of ours asks the peer to add
    uint64_t timewait_ns = 100'000'000;     // after a disconnect, before the ID is free (TimewaitExit)
    // Comm IDs' random bits: replayable with a seed (the simulator), getrandom() without.
    std::optional<uint64_t> seed;
};

// REJ reasons (IBTA vol. 1 12.6.7, the kernel's enum ib_cm_rej_reason): unscoped, as the
// field is any 16-bit value (reject() sends and Event::reject_reason reports the number).
enum RejectReason : uint16_t {
    kRejNoQp = 1, kRejTimeout = 4, kRejInvalidCommId = 6, kRejInvalidServiceId = 8,
    kRejInvalidTransportType = 9, kRejStaleConnection = 10, kRejInvalidMtu = 26, kRejConsumer = 28,
    kRejInvalidClassVersion = 31,
};
// SIDR_REP status (IBTA vol. 1 12.11.2).
enum class SidrStatus : uint8_t { Valid = 0, ServiceIdNotSupported = 1, Rejected = 2, NoQp = 3, Redirect = 4 };

enum class EventType : uint8_t {
    Request,       // passive: a REQ to a listener; `id` is new, `listen_id` the listener's
    RepReceived,   // active: the peer accepted; move the QP to RTR and RTS, then accept(id) sends RTU
    Established,   // passive: RTU received; active: RTU sent
    Rejected,      // REJ received (reject_reason), before or instead of a connection
    Unreachable,   // our REQ, REP or SIDR_REQ got no answer after every retry
    Disconnected,  // DREQ received (send DREP by disconnect), DREP received, or DREQ unanswered
    TimewaitExit,  // the ID left time-wait: its QP may be reused
    SidrRequest,   // passive: a SIDR_REQ to a listener; `id` is new (answer by sidr_reply)
    SidrReply,     // active: the SIDR_REP (sidr_status, sidr_qpn, sidr_qkey)
};

// Why a Disconnected event came.
enum class DisconnectCause : uint8_t { DreqReceived, DrepReceived, DreqTimeout };

struct Event {
    EventType type = EventType::Request;
    CmId id = kNoId;
    CmId listen_id = kNoId;   // Request, SidrRequest
    uint64_t service_id = 0;  // Request, SidrRequest
    ConnParams peer;          // Request, RepReceived: the peer's side
    // Request, SidrRequest: the path as seen from this side (local = ours), filled from the REQ
    // and the frame; the peer's rdma_cm address (remote_ip, remote_port) from its IP CM header,
    // local_ip from the header's destination and local_port from the service ID.
    Path path;
    uint8_t peer_ip_version = 4;  // the IP CM header's (only 4 is accepted)
    uint16_t reject_reason = 0;  // Rejected: the REJ's reason (RejectReason numbering)
    DisconnectCause disconnect_cause = DisconnectCause::DreqReceived;  // Disconnected
    SidrStatus sidr_status = SidrStatus::Valid;                        // SidrReply
    uint32_t sidr_qpn = 0, sidr_qkey = 0;                              // SidrReply
    // The message's private data after the IP CM header (Request, SidrRequest) or whole (the
    // others): the full field, as IB carries no length.
    std::array<uint8_t, kMaxPrivateData> private_data{};
    uint8_t private_data_len = 0;
};
using EventHandler = std::function<void(const Event&)>;

// MADs counted by attribute (cm_mad.hpp's Attr, in this order).
enum class MadKind : uint8_t { Req, Mra, Rej, Rep, Rtu, Dreq, Drep, SidrReq, SidrRep, Count };
// Why a received datagram to QP1 was dropped.
enum class CmDrop : uint8_t {
    Short,            // fewer than 256 bytes of MAD
    BadQkey,          // DETH Q_Key not 0x80010000
    BadBaseVersion,   // MAD base version not 1
    BadClass,         // management class not 0x07 (CM)
    BadClassVersion,  // CM class version not 2
    BadMethod,        // not Send (0x03)
    UnknownAttr,      // LAP, APR, ClassPortInfo and anything else
    BadField,         // a field out of range (IP CM header version, MTU code, transport type)
    UnknownCommId,    // names no connection of ours (or a stale one)
    WrongState,       // a valid message the connection's state does not take
    NoRoute,          // our answer had no MAC for the peer's address
    Count
};
struct CmCounters {
    std::array<uint64_t, static_cast<size_t>(MadKind::Count)> tx{}, rx{};  // rx: accepted for processing
    std::array<uint64_t, static_cast<size_t>(CmDrop::Count)> drops{};
    uint64_t retransmits = 0;  // MADs sent again after a timeout
    uint64_t duplicates = 0;   // a retried REQ, REP or DREQ answered again, not taken as new
    // REQs and SIDR_REQs for a service another process on the port listens to, or that
    // another one answers for the port (VerbsEngine::port_share)
    uint64_t left_to_others = 0;
    uint64_t sent(MadKind k) const { return tx[static_cast<size_t>(k)]; }
    uint64_t received(MadKind k) const { return rx[static_cast<size_t>(k)]; }
    uint64_t drop(CmDrop d) const { return drops[static_cast<size_t>(d)]; }
};

class CmAgent {
public:
    // Attaches to the engine's QP1: from now on its UD datagrams to QPN 1 come here (one agent
    // per engine: a second replaces the first). The engine must outlive the agent.
    explicit CmAgent(VerbsEngine& engine, CmConfig cfg = {});
    ~CmAgent();  // detaches; open connections vanish without a message
    CmAgent(const CmAgent&) = delete;
    CmAgent& operator=(const CmAgent&) = delete;

    void set_event_handler(EventHandler h);

    // IDs. destroy_id does what the kernel's CM does when an ID goes: a pending REQ gets a REJ
    // (timeout), a request or reply the consumer has not answered a REJ (consumer reject), a
    // SIDR_REQ a SIDR_REP (rejected), a connection a DREQ (or the DREP it owes); the ID is gone
    // for the consumer at once (no more events), its slot free after the disconnect and
    // time-wait run out. kNoId: every ID in use.
    [[nodiscard]] CmId create_id();
    [[nodiscard]] int destroy_id(CmId id);  // EINVAL: no such ID

    // Passive side: REQs and SIDR_REQs to service_id come to this ID (Request, SidrRequest).
    // EADDRINUSE: another ID listens on it; EINVAL: not an idle ID.
    [[nodiscard]] int listen(CmId id, uint64_t service_id);

    // Active side: send a REQ (IP CM header from path, then private_data, at most
    // kReqPrivateData bytes). path.remote_gid's MAC through VerbsEngine::resolve_gid.
    // EINVAL: bad ID, state, QP type or length; EHOSTUNREACH: no MAC for the peer.
    [[nodiscard]] int connect(CmId id, uint64_t service_id, const Path& path, const ConnParams& params,
                              const uint8_t* private_data, size_t len);

    // Passive side (after Request): send a REP with our params (at most kRepPrivateData).
    // Active side (after RepReceived, its QP in RTS): send the RTU (params ignored, at most
    // kRtuPrivateData) and raise Established.
    [[nodiscard]] int accept(CmId id, const ConnParams& params, const uint8_t* private_data, size_t len);

    // Refuse a REQ (passive, after Request) or a REP (active, after RepReceived): REJ with
    // `reason` (kRejConsumer for rdma_reject), at most kRejPrivateData. The ID goes idle.
    [[nodiscard]] int reject(CmId id, uint16_t reason, const uint8_t* private_data, size_t len);

    // Established: send a DREQ (Disconnected follows at the DREP or its timeout). After a
    // DREQ was received: send the DREP. Either way time-wait follows (TimewaitExit).
    // EINVAL: neither connected nor disconnecting.
    [[nodiscard]] int disconnect(CmId id, const uint8_t* private_data = nullptr, size_t len = 0);

    // UD through SIDR (the UDP port space): ask service_id at path's peer for its QPN and Q_Key
    // (private data after the IP CM header, at most kSidrReqPrivateData); SidrReply answers.
    [[nodiscard]] int sidr_request(CmId id, uint64_t service_id, const Path& path, const uint8_t* private_data,
                                   size_t len);
    // Passive (after SidrRequest): the SIDR_REP; the ID goes idle (destroy it when done).
    [[nodiscard]] int sidr_reply(CmId id, uint32_t qpn, uint32_t qkey, SidrStatus status,
                                 const uint8_t* private_data, size_t len);

    const CmCounters& counters() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace cm
}  // namespace sdr::emu
