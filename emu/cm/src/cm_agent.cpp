// The CM agent (cm_agent.hpp): one connection record per ID, the IBTA's CM state machine
// (vol. 1 12.9) for the messages served, and one executor timer for every retry and time-wait
// deadline. MADs come from and go to the verbs engine's QP1 (gsi.hpp).

#include <sdr/emu/cm_agent.hpp>
#include <sdr/emu/cm_mad.hpp>
#include <sdr/emu/rng.hpp>
#include <sdr/emu/verbs_engine.hpp>

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <random>
#include <vector>

namespace sdr::emu::cm {

namespace {

constexpr uint32_t kIdIndexBits = 12;  // 4096 IDs per agent; 20 random bits above
constexpr uint32_t kMaxIds = 1u << kIdIndexBits;
constexpr uint16_t kRejNoResources = 3;
constexpr uint16_t kPermissiveLid = 0xFFFF;  // RoCE has no LIDs

// 4.096 us * 2^code (IBTA's timeout encoding, 5 bits).
uint64_t timeout_ns(uint8_t code) { return uint64_t{4096} << std::min<uint8_t>(code, 31); }

// The modified EUI-64 of a MAC: the port's GUID, as RoCE devices derive it.
uint64_t guid_of(const std::array<uint8_t, 6>& mac)
{
    const uint8_t b[8] = {static_cast<uint8_t>(mac[0] ^ 2), mac[1], mac[2], 0xFF, 0xFE, mac[3], mac[4], mac[5]};
    uint64_t g = 0;
    for (uint8_t x : b) g = g << 8 | x;
    return g;
}

// MadKind numbers the message types in CmMessage's order.
static_assert(static_cast<size_t>(MadKind::Count) == std::variant_size_v<CmMessage>);
size_t kind(const CmMessage& m) { return m.index(); }

enum class State : uint8_t {
    Idle, Listen, ReqSent, MraRcvd, RepRcvd, ReqRcvd, RepSent, Established, DreqSent, DreqRcvd, Timewait,
    SidrReqSent, SidrReqRcvd, SidrRepSent,
};

}  // namespace

struct CmAgent::Impl final : GsiAgent {
    struct Conn {
        CmId id = kNoId;     // kNoId: the slot is free
        bool user = false;   // the consumer holds it (destroy_id clears): events only then
        State state = State::Idle;
        uint64_t service_id = 0;
        CmId listen_id = kNoId;
        uint32_t remote_id = 0;    // the peer's comm ID (SIDR: its request ID)
        bool indexed = false;      // in by_remote (a REQ or SIDR_REQ we took)
        NicAddress peer;
        uint32_t peer_qpn = wire::kGsiQpn;
        uint64_t tid = 0;
        ConnParams local, remote;
        std::array<uint8_t, kMadBytes> last{};  // the MAD a retry or a duplicate gets again
        MadKind last_kind = MadKind::Req;
        uint64_t deadline = 0;                  // ns, 0: none
        uint64_t try_ns = 0;                    // one try's timeout
        uint8_t retries_left = 0;
    };

    Impl(VerbsEngine& e, const CmConfig& c) : eng(e), cfg(c)
    {
        if (cfg.seed) rng.emplace(*cfg.seed);
        eng.gsi_attach(this);
    }
    ~Impl() { eng.gsi_attach(nullptr); }

    VerbsEngine& eng;
    CmConfig cfg;
    EventHandler handler;
    CmCounters counters;
    std::vector<Conn> conns;
    std::vector<uint32_t> free_slots;
    std::vector<uint32_t> prev_ids;          // the ID each slot had last, never handed out again next
    std::map<uint64_t, CmId> listeners;     // service ID -> listening ID
    std::map<uint64_t, CmId> by_remote;     // peer IP << 32 | peer's comm ID -> our ID (passive)
    std::optional<Rng> rng;
    uint64_t armed = 0;  // the executor timer's deadline, 0: none
    uint32_t tid_seq = 0;

    // ---- IDs ----
    uint32_t random32()
    {
        if (rng) return static_cast<uint32_t>(rng->next() >> 32);
        uint32_t v = 0;
        ssize_t n;
        while ((n = getrandom(&v, sizeof v, 0)) != static_cast<ssize_t>(sizeof v))
            if (n >= 0 || errno != EINTR) return std::random_device{}();  // no getrandom: the same pool
        return v;
    }
    Conn* find(CmId id)
    {
        const uint32_t i = id & (kMaxIds - 1);
        if (id == kNoId || i >= conns.size() || conns[i].id != id) return nullptr;
        return &conns[i];
    }
    Conn* alloc()
    {
        uint32_t i;
        if (!free_slots.empty()) {
            i = free_slots.back();
            free_slots.pop_back();
        } else {
            if (conns.size() >= kMaxIds) return nullptr;
            i = static_cast<uint32_t>(conns.size());
            conns.emplace_back();
            prev_ids.push_back(0);
        }
        CmId id;
        do {
            id = i | (random32() << kIdIndexBits);
        } while ((id >> kIdIndexBits) == 0 || id == prev_ids[i]);
        conns[i] = Conn{};
        conns[i].id = id;
        conns[i].user = true;
        return &conns[i];
    }
    void unindex(Conn& c)
    {
        if (c.indexed) by_remote.erase(uint64_t{c.peer.ip} << 32 | c.remote_id);
        c.indexed = false;
    }
    void release(Conn& c)
    {
        unindex(c);
        if (c.state == State::Listen) {
            listeners.erase(c.service_id);
            if (PortShare* share = eng.port_share()) share->release_service(c.service_id);
        }
        const uint32_t i = c.id & (kMaxIds - 1);
        prev_ids[i] = c.id;
        c = Conn{};
        free_slots.push_back(i);
    }
    // Back to idle for the consumer; a slot nobody holds is freed.
    void to_idle(Conn& c)
    {
        c.deadline = 0;
        unindex(c);
        if (!c.user) return release(c);
        c.state = State::Idle;
    }

    // ---- events ----
    void emit(const Conn& c, Event& ev)
    {
        ev.id = c.id;
        if (c.user && handler) handler(ev);
    }
    void emit(const Conn& c, EventType t)
    {
        Event ev;
        ev.type = t;
        emit(c, ev);
    }

    // ---- sending ----
    MadHeader header(uint64_t tid) const
    {
        MadHeader h;
        h.tid = tid;
        return h;
    }
    uint64_t new_tid(CmId id) { return uint64_t{id} << 32 | ++tid_seq; }
    void send_to(const NicAddress& to, uint32_t qpn, const CmMad& m, uint8_t* keep = nullptr)
    {
        uint8_t buf[kMadBytes];
        uint8_t* out = keep ? keep : buf;
        encode_mad(m, out);
        if (!eng.gsi_send(to, qpn, out, kMadBytes)) return;  // QP1's queue full: the retry timer covers it
        counters.tx[kind(m.msg)]++;
    }
    void send(Conn& c, const CmMessage& msg, bool keep)
    {
        if (keep) c.last_kind = static_cast<MadKind>(kind(msg));
        send_to(c.peer, c.peer_qpn, CmMad{header(c.tid), msg}, keep ? c.last.data() : nullptr);
    }
    void resend(Conn& c)  // the kept MAD again: a retry, or the answer to a duplicate
    {
        if (!eng.gsi_send(c.peer, c.peer_qpn, c.last.data(), kMadBytes)) return;
        counters.tx[static_cast<size_t>(c.last_kind)]++;
    }

    // ---- timers ----
    void arm(Conn& c, uint64_t try_ns, uint8_t retries)
    {
        c.try_ns = try_ns;
        c.retries_left = retries;
        c.deadline = eng.now_ns() + try_ns;
        reschedule();
    }
    void reschedule()
    {
        uint64_t next = 0;
        for (const Conn& c : conns)
            if (c.id != kNoId && c.deadline && (!next || c.deadline < next)) next = c.deadline;
        if (!next || (armed && armed <= next)) return;  // the armed one comes first; it re-arms
        armed = next;
        eng.gsi_arm_timer(next);
    }
    void gsi_timer() override
    {
        armed = 0;
        const uint64_t now = eng.now_ns();
        for (Conn& c : conns)
            if (c.id != kNoId && c.deadline && c.deadline <= now) expire(c, now);
        reschedule();
    }
    void expire(Conn& c, uint64_t now)
    {
        c.deadline = 0;
        if (c.state == State::Timewait) {
            if (!c.user) return release(c);
            c.state = State::Idle;
            unindex(c);
            return emit(c, EventType::TimewaitExit);
        }
        if (c.retries_left > 0) {
            c.retries_left--;
            if (c.state == State::MraRcvd) c.state = State::ReqSent;
            counters.retransmits++;
            resend(c);
            c.deadline = now + c.try_ns;
            return;
        }
        switch (c.state) {
        case State::ReqSent:
        case State::MraRcvd:
        case State::RepSent:
        case State::SidrReqSent:
            emit(c, EventType::Unreachable);
            return to_idle(c);
        case State::DreqSent: {
            Event ev;
            ev.type = EventType::Disconnected;
            ev.disconnect_cause = DisconnectCause::DreqTimeout;
            emit(c, ev);
            return enter_timewait(c);
        }
        default: return;
        }
    }
    void enter_timewait(Conn& c)
    {
        c.state = State::Timewait;
        arm(c, cfg.timewait_ns, 0);
    }

    // ---- receiving ----
    void drop(CmDrop d) { counters.drops[static_cast<size_t>(d)]++; }
    void gsi_receive(const GsiDatagram& d) override
    {
        if (d.qkey != kGsiQkey) return drop(CmDrop::BadQkey);
        CmMad m;
        switch (decode_mad(d.mad, d.len, &m)) {
        case MadVerdict::Ok: break;
        case MadVerdict::Short: return drop(CmDrop::Short);
        case MadVerdict::BadBaseVersion: return drop(CmDrop::BadBaseVersion);
        case MadVerdict::BadClass: return drop(CmDrop::BadClass);
        case MadVerdict::BadClassVersion: return drop(CmDrop::BadClassVersion);
        case MadVerdict::BadMethod: return drop(CmDrop::BadMethod);
        case MadVerdict::UnknownAttr: return drop(CmDrop::UnknownAttr);
        }
        counters.rx[kind(m.msg)]++;
        std::visit([&](const auto& msg) { on(msg, m.hdr, d); }, m.msg);
    }
    // The connection a reply names by our comm ID, from the peer it talks to; nullptr (counted) if none.
    Conn* named(uint32_t our_id, const GsiDatagram& d)
    {
        Conn* c = find(our_id);
        if (!c || c->state == State::Idle || c->state == State::Listen || c->peer.ip != d.src.ip) {
            drop(CmDrop::UnknownCommId);
            return nullptr;
        }
        return c;
    }
    Conn* named(uint32_t our_id, uint32_t their_id, const GsiDatagram& d)
    {
        Conn* c = named(our_id, d);
        if (c && c->remote_id != their_id) {
            drop(CmDrop::UnknownCommId);
            return nullptr;
        }
        return c;
    }
    Conn* by_peer(uint32_t ip, uint32_t their_id)
    {
        auto it = by_remote.find(uint64_t{ip} << 32 | their_id);
        return it == by_remote.end() ? nullptr : find(it->second);
    }
    // The IP CM header at the start of private data; false: not one this agent takes (IPv4 only).
    static bool ip_header(const uint8_t* pd, IpCmHeader* h, uint32_t* src, uint32_t* dst)
    {
        *h = decode_ip_cm_header(pd);
        return h->version == 0 && h->ip_version == 4 && ip_cm_addr_to_v4(h->src_ip, src) &&
               ip_cm_addr_to_v4(h->dst_ip, dst);
    }
    static void take_private(Event& ev, const uint8_t* p, size_t n)
    {
        std::memcpy(ev.private_data.data(), p, n);
        ev.private_data_len = static_cast<uint8_t>(n);
    }
    // A new passive ID under listener `l` for a request from d.
    Conn* accept_request(Conn& l, uint64_t sid, uint32_t their_id, const MadHeader& h, const GsiDatagram& d)
    {
        const CmId lid = l.id;  // (alloc may move the table)
        Conn* c = alloc();
        if (!c) return nullptr;
        c->listen_id = lid;
        c->service_id = sid;
        c->remote_id = their_id;
        c->peer = d.src;
        c->peer_qpn = d.src_qp;
        c->tid = h.tid;
        c->indexed = true;
        by_remote[uint64_t{d.src.ip} << 32 | their_id] = c->id;
        return c;
    }
    Conn* listener(uint64_t sid)
    {
        auto it = listeners.find(sid);
        return it == listeners.end() ? nullptr : find(it->second);
    }
    // A request none of our IDs listens to, on a port other processes share: the one that
    // listens answers it, or, if none does, the one that answers for the port.
    bool answered_elsewhere(uint64_t sid)
    {
        PortShare* share = eng.port_share();
        if (!share || (!share->listened_elsewhere(sid) && share->answers_for_port())) return false;
        counters.left_to_others++;
        return true;
    }

    void on(const ReqMsg& req, const MadHeader& h, const GsiDatagram& d)
    {
        if (Conn* c = by_peer(d.src.ip, req.local_comm_id)) {  // a retry of a REQ we took
            counters.duplicates++;
            if (c->state == State::ReqRcvd) {  // the consumer still decides: ask for patience
                MraMsg mra;
                mra.local_comm_id = c->id;
                mra.remote_comm_id = c->remote_id;
                mra.message_mraed = 0;
                mra.service_timeout = cfg.mra_service_timeout_code;
                send(*c, mra, false);
            } else if (c->state == State::RepSent) {
                resend(*c);
            }
            return;
        }
        IpCmHeader ih;
        uint32_t src_ip, dst_ip;
        if ((req.transport != TransportType::Rc && req.transport != TransportType::Uc) || !mtu_bytes(req.path_mtu) ||
            !ip_header(req.private_data.data(), &ih, &src_ip, &dst_ip))
            return drop(CmDrop::BadField);
        Conn* l = listener(req.service_id);
        if (!l && answered_elsewhere(req.service_id)) return;
        Conn* c = l ? accept_request(*l, req.service_id, req.local_comm_id, h, d) : nullptr;
        if (!c) {  // nobody listens (the kernel's answer: invalid service ID), or no ID left
            RejMsg rej;
            rej.remote_comm_id = req.local_comm_id;
            rej.message_rejected = 0;
            rej.reason = l ? kRejNoResources : uint16_t{kRejInvalidServiceId};
            return send_to(d.src, d.src_qp, CmMad{header(h.tid), rej});
        }
        c->state = State::ReqRcvd;
        c->try_ns = timeout_ns(req.local_cm_response_timeout);  // how long the active side takes
        c->retries_left = req.max_cm_retries;
        ConnParams& p = c->remote;
        p.qpn = req.local_qpn;
        p.starting_psn = req.starting_psn;
        p.qp_type = req.transport == TransportType::Uc ? verbs::QpType::Uc : verbs::QpType::Rc;
        p.responder_resources = req.responder_resources;
        p.initiator_depth = req.initiator_depth;
        p.retry_count = req.retry_count;
        p.rnr_retry_count = req.rnr_retry_count;
        p.srq = req.srq;
        p.flow_control = req.flow_control;
        p.path_mtu = mtu_bytes(req.path_mtu);
        Event ev;
        ev.type = EventType::Request;
        ev.listen_id = c->listen_id;
        ev.service_id = req.service_id;
        ev.peer = p;
        Path& path = ev.path;
        path.local_gid = req.primary.remote_gid;
        path.remote_gid = req.primary.local_gid;
        path.local_ip = dst_ip;
        path.remote_ip = src_ip;
        path.local_port = static_cast<uint16_t>(req.service_id);
        path.remote_port = ih.src_port;
        path.traffic_class = req.primary.traffic_class;
        path.hop_limit = req.primary.hop_limit;
        path.flow_label = req.primary.flow_label;
        path.pkey = req.pkey;
        path.local_ack_timeout = req.primary.local_ack_timeout;
        ev.peer_ip_version = ih.ip_version;
        take_private(ev, req.private_data.data() + kIpCmHeaderBytes, kReqPrivateData);
        emit(*c, ev);
    }

    void on(const RepMsg& rep, const MadHeader&, const GsiDatagram& d)
    {
        Conn* c = named(rep.remote_comm_id, d);
        if (!c) return;
        if (c->state == State::ReqSent || c->state == State::MraRcvd) {
            c->remote_id = rep.local_comm_id;
            c->deadline = 0;
            c->state = State::RepRcvd;
            ConnParams& p = c->remote;
            p = c->local;  // REP carries no QP type, MTU or retry count: the REQ's stand
            p.qpn = rep.local_qpn;
            p.starting_psn = rep.starting_psn;
            p.responder_resources = rep.responder_resources;
            p.initiator_depth = rep.initiator_depth;
            p.rnr_retry_count = rep.rnr_retry_count;
            p.srq = rep.srq;
            p.flow_control = rep.flow_control;
            Event ev;
            ev.type = EventType::RepReceived;
            ev.peer = p;
            take_private(ev, rep.private_data.data(), kRepPrivateData);
            return emit(*c, ev);
        }
        if (c->remote_id != rep.local_comm_id) return drop(CmDrop::UnknownCommId);
        if (c->state == State::Established) {  // our RTU was lost: the same RTU again
            counters.duplicates++;
            return resend(*c);
        }
        if (c->state == State::RepRcvd) return void(counters.duplicates++);
        drop(CmDrop::WrongState);
    }

    void on(const RtuMsg& rtu, const MadHeader&, const GsiDatagram& d)
    {
        Conn* c = named(rtu.remote_comm_id, rtu.local_comm_id, d);
        if (!c) return;
        if (c->state == State::RepSent) {
            c->deadline = 0;
            c->state = State::Established;
            Event ev;
            ev.type = EventType::Established;
            take_private(ev, rtu.private_data.data(), kRtuPrivateData);
            return emit(*c, ev);
        }
        if (c->state == State::Established) return void(counters.duplicates++);
        drop(CmDrop::WrongState);
    }

    void on(const RejMsg& rej, const MadHeader&, const GsiDatagram& d)
    {
        // Remote comm ID 0: the sender withdraws its REQ before it learnt our ID (its ID was
        // destroyed, reason timeout); we know that REQ by its sender and comm ID.
        Conn* c = rej.remote_comm_id ? named(rej.remote_comm_id, d) : by_peer(d.src.ip, rej.local_comm_id);
        if (!c) {
            if (!rej.remote_comm_id) drop(CmDrop::UnknownCommId);
            return;
        }
        // A REJ of our REQ names no ID of the peer's (it may have made none). Otherwise the
        // peer refuses our REP, or withdraws its REQ (ReqRcvd) or its REP (RepRcvd), as the
        // kernel's CM does when its consumer destroys the ID.
        const bool of_req = c->state == State::ReqSent || c->state == State::MraRcvd;
        const bool later = c->state == State::RepSent || c->state == State::ReqRcvd || c->state == State::RepRcvd;
        if (!of_req && !later) return drop(CmDrop::WrongState);
        if (!of_req && c->remote_id != rej.local_comm_id) return drop(CmDrop::UnknownCommId);
        Event ev;
        ev.type = EventType::Rejected;
        ev.reject_reason = rej.reason;
        take_private(ev, rej.private_data.data(), kRejPrivateData);
        emit(*c, ev);
        to_idle(*c);
    }

    void on(const MraMsg& mra, const MadHeader&, const GsiDatagram& d)
    {
        Conn* c = named(mra.remote_comm_id, d);
        if (!c) return;
        const bool req = mra.message_mraed == 0 && (c->state == State::ReqSent || c->state == State::MraRcvd);
        const bool rep = mra.message_mraed == 1 && c->state == State::RepSent && c->remote_id == mra.local_comm_id;
        if (!req && !rep) return drop(CmDrop::WrongState);
        // The peer needs its service timeout more: no retry until then and one try after.
        if (req) c->state = State::MraRcvd;
        c->deadline = eng.now_ns() + timeout_ns(mra.service_timeout) + c->try_ns;
        reschedule();
    }

    void on(const DreqMsg& dreq, const MadHeader& h, const GsiDatagram& d)
    {
        Conn* c = named(dreq.remote_comm_id, dreq.local_comm_id, d);
        if (!c) return;
        switch (c->state) {
        case State::RepSent:      // the RTU was lost, the peer is done already
        case State::Established: {
            c->deadline = 0;
            c->state = State::DreqRcvd;
            c->tid = h.tid;
            Event ev;
            ev.type = EventType::Disconnected;
            ev.disconnect_cause = DisconnectCause::DreqReceived;
            take_private(ev, dreq.private_data.data(), kDreqPrivateData);
            emit(*c, ev);
            if (!c->user) send_drep(*c, nullptr, 0);  // destroyed meanwhile: answer for it
            return;
        }
        case State::DreqSent: {  // both disconnect at once: answer, and wait for our DREP
            DrepMsg drep;
            drep.local_comm_id = c->id;
            drep.remote_comm_id = c->remote_id;
            return send_to(c->peer, c->peer_qpn, CmMad{header(h.tid), drep});
        }
        case State::Timewait: {  // our DREP was lost (or crossed our DREQ): a DREP again
            counters.duplicates++;
            DrepMsg drep;
            drep.local_comm_id = c->id;
            drep.remote_comm_id = c->remote_id;
            return send_to(c->peer, c->peer_qpn, CmMad{header(h.tid), drep});
        }
        case State::DreqRcvd: counters.duplicates++; return;
        default: return drop(CmDrop::WrongState);
        }
    }

    void on(const DrepMsg& drep, const MadHeader&, const GsiDatagram& d)
    {
        Conn* c = named(drep.remote_comm_id, drep.local_comm_id, d);
        if (!c) return;
        if (c->state != State::DreqSent) return drop(CmDrop::WrongState);
        Event ev;
        ev.type = EventType::Disconnected;
        ev.disconnect_cause = DisconnectCause::DrepReceived;
        take_private(ev, drep.private_data.data(), kDrepPrivateData);
        emit(*c, ev);
        enter_timewait(*c);
    }

    void on(const SidrReqMsg& sreq, const MadHeader& h, const GsiDatagram& d)
    {
        if (Conn* c = by_peer(d.src.ip, sreq.request_id)) {
            counters.duplicates++;
            if (c->state == State::SidrRepSent) resend(*c);
            return;
        }
        IpCmHeader ih;
        uint32_t src_ip, dst_ip;
        if (!ip_header(sreq.private_data.data(), &ih, &src_ip, &dst_ip)) return drop(CmDrop::BadField);
        Conn* l = listener(sreq.service_id);
        if (!l && answered_elsewhere(sreq.service_id)) return;
        Conn* c = l ? accept_request(*l, sreq.service_id, sreq.request_id, h, d) : nullptr;
        if (!c) {
            SidrRepMsg rep;
            rep.request_id = sreq.request_id;
            rep.status = static_cast<uint8_t>(l ? SidrStatus::Rejected : SidrStatus::ServiceIdNotSupported);
            rep.service_id = sreq.service_id;
            return send_to(d.src, d.src_qp, CmMad{header(h.tid), rep});
        }
        c->state = State::SidrReqRcvd;
        Event ev;
        ev.type = EventType::SidrRequest;
        ev.listen_id = c->listen_id;
        ev.service_id = sreq.service_id;
        ev.path.local_ip = dst_ip;
        ev.path.remote_ip = src_ip;
        ev.path.local_gid = verbs::gid_from_ipv4(dst_ip);
        ev.path.remote_gid = verbs::gid_from_ipv4(src_ip);
        ev.path.local_port = static_cast<uint16_t>(sreq.service_id);
        ev.path.remote_port = ih.src_port;
        ev.path.pkey = sreq.pkey;
        ev.peer_ip_version = ih.ip_version;
        take_private(ev, sreq.private_data.data() + kIpCmHeaderBytes, kSidrReqPrivateData);
        emit(*c, ev);
    }

    void on(const SidrRepMsg& srep, const MadHeader&, const GsiDatagram& d)
    {
        Conn* c = named(srep.request_id, d);
        if (!c) return;
        if (c->state != State::SidrReqSent) return drop(CmDrop::WrongState);
        Event ev;
        ev.type = EventType::SidrReply;
        ev.sidr_status = static_cast<SidrStatus>(srep.status);
        ev.sidr_qpn = srep.qpn;
        ev.sidr_qkey = srep.qkey;
        take_private(ev, srep.private_data.data(), kSidrRepPrivateData);
        emit(*c, ev);
        to_idle(*c);
    }

    // ---- messages the consumer starts ----
    static bool private_ok(const uint8_t* p, size_t len, size_t max) { return len <= max && (p || !len); }
    template <size_t N>
    static void put_private(std::array<uint8_t, N>& field, size_t at, const uint8_t* p, size_t len)
    {
        if (len) std::memcpy(field.data() + at, p, len);
    }
    void send_drep(Conn& c, const uint8_t* p, size_t len)
    {
        DrepMsg drep;
        drep.local_comm_id = c.id;
        drep.remote_comm_id = c.remote_id;
        put_private(drep.private_data, 0, p, len);
        send(c, drep, true);
        enter_timewait(c);
    }
    void send_dreq(Conn& c, const uint8_t* p, size_t len)
    {
        DreqMsg dreq;
        dreq.local_comm_id = c.id;
        dreq.remote_comm_id = c.remote_id;
        dreq.remote_qpn = c.remote.qpn;
        put_private(dreq.private_data, 0, p, len);
        c.tid = new_tid(c.id);
        c.state = State::DreqSent;
        send(c, dreq, true);
        arm(c, timeout_ns(cfg.response_timeout_code), cfg.max_retries);
    }
    void send_rej(Conn& c, uint16_t reason, uint8_t what, const uint8_t* p, size_t len)
    {
        RejMsg rej;
        rej.local_comm_id = c.id;
        rej.remote_comm_id = c.remote_id;
        rej.message_rejected = what;
        rej.reason = reason;
        put_private(rej.private_data, 0, p, len);
        send(c, rej, false);
    }
    int start_request(Conn& c, const Path& path, NicAddress* to)
    {
        uint32_t ip;
        if (!verbs::ipv4_from_gid(path.remote_gid, &ip)) return EINVAL;
        if (!eng.resolve_gid(path.remote_gid, to)) return EHOSTUNREACH;
        c.tid = new_tid(c.id);
        c.peer = *to;
        c.peer_qpn = wire::kGsiQpn;
        return 0;
    }
    IpCmHeader ip_header_of(const Path& path) const
    {
        IpCmHeader ih;
        ih.src_port = path.local_port;
        ih.src_ip = ip_cm_addr_v4(path.local_ip);
        ih.dst_ip = ip_cm_addr_v4(path.remote_ip);
        return ih;
    }
};

CmAgent::CmAgent(VerbsEngine& engine, CmConfig cfg) : impl_(std::make_unique<Impl>(engine, cfg)) {}
CmAgent::~CmAgent() = default;

void CmAgent::set_event_handler(EventHandler h) { impl_->handler = std::move(h); }

const CmCounters& CmAgent::counters() const { return impl_->counters; }

CmId CmAgent::create_id()
{
    Impl::Conn* c = impl_->alloc();
    return c ? c->id : kNoId;
}

// As the kernel's CM does when its ID goes: what the state owes the peer is sent (a REJ for a
// pending request or reply, a DREQ or DREP for a connection), and a connection then goes
// through its disconnect and time-wait silently before the slot is free.
int CmAgent::destroy_id(CmId id)
{
    Impl& m = *impl_;
    Impl::Conn* c = m.find(id);
    if (!c || !c->user) return EINVAL;
    c->user = false;
    switch (c->state) {
    case State::ReqSent:
    case State::MraRcvd: m.send_rej(*c, kRejTimeout, 0, nullptr, 0); break;
    case State::ReqRcvd: m.send_rej(*c, kRejConsumer, 0, nullptr, 0); break;
    case State::RepRcvd: m.send_rej(*c, kRejConsumer, 1, nullptr, 0); break;
    case State::RepSent: m.send_rej(*c, kRejConsumer, 1, nullptr, 0); break;
    case State::Established: m.send_dreq(*c, nullptr, 0); return 0;
    case State::DreqRcvd: m.send_drep(*c, nullptr, 0); return 0;
    case State::DreqSent:
    case State::Timewait: return 0;  // finishes on its own, then frees the slot
    case State::SidrReqRcvd: {
        SidrRepMsg rep;
        rep.request_id = c->remote_id;
        rep.status = static_cast<uint8_t>(SidrStatus::Rejected);
        rep.service_id = c->service_id;
        m.send(*c, rep, false);
        break;
    }
    default: break;
    }
    m.release(*c);
    m.reschedule();
    return 0;
}

int CmAgent::listen(CmId id, uint64_t service_id)
{
    Impl& m = *impl_;
    Impl::Conn* c = m.find(id);
    if (!c || !c->user || c->state != State::Idle) return EINVAL;
    if (m.listeners.count(service_id)) return EADDRINUSE;
    if (PortShare* share = m.eng.port_share())
        if (int err = share->claim_service(service_id)) return err;  // another process listens
    m.listeners[service_id] = id;
    c->state = State::Listen;
    c->service_id = service_id;
    return 0;
}

int CmAgent::connect(CmId id, uint64_t service_id, const Path& path, const ConnParams& params,
                     const uint8_t* private_data, size_t len)
{
    Impl& m = *impl_;
    Impl::Conn* c = m.find(id);
    if (!c || !c->user || c->state != State::Idle || !Impl::private_ok(private_data, len, kReqPrivateData) ||
        (params.qp_type != verbs::QpType::Rc && params.qp_type != verbs::QpType::Uc) || !mtu_code(params.path_mtu))
        return EINVAL;
    NicAddress to;
    if (int e = m.start_request(*c, path, &to)) return e;
    ReqMsg req;
    req.local_comm_id = c->id;
    req.service_id = service_id;
    req.local_ca_guid = guid_of(m.eng.address().mac);
    req.local_qpn = params.qpn & 0xFFFFFF;
    req.responder_resources = params.responder_resources;
    req.initiator_depth = params.initiator_depth;
    req.remote_cm_response_timeout = m.cfg.response_timeout_code;
    req.transport = params.qp_type == verbs::QpType::Uc ? TransportType::Uc : TransportType::Rc;
    req.flow_control = params.flow_control;
    req.starting_psn = params.starting_psn & 0xFFFFFF;
    req.local_cm_response_timeout = m.cfg.response_timeout_code;
    req.retry_count = params.retry_count;
    req.pkey = path.pkey;
    req.path_mtu = mtu_code(params.path_mtu);
    req.rnr_retry_count = params.rnr_retry_count;
    req.max_cm_retries = m.cfg.max_retries;
    req.srq = params.srq;
    PathInfo& pp = req.primary;
    pp.local_lid = pp.remote_lid = kPermissiveLid;
    pp.local_gid = path.local_gid;
    pp.remote_gid = path.remote_gid;
    pp.flow_label = path.flow_label;
    pp.traffic_class = path.traffic_class;
    pp.hop_limit = path.hop_limit;
    pp.subnet_local = path.hop_limit <= 1;
    pp.local_ack_timeout = path.local_ack_timeout;
    encode_ip_cm_header(m.ip_header_of(path), req.private_data.data());
    Impl::put_private(req.private_data, kIpCmHeaderBytes, private_data, len);
    c->state = State::ReqSent;
    c->service_id = service_id;
    c->local = params;
    m.send(*c, req, true);
    m.arm(*c, timeout_ns(m.cfg.response_timeout_code), m.cfg.max_retries);
    return 0;
}

int CmAgent::accept(CmId id, const ConnParams& params, const uint8_t* private_data, size_t len)
{
    Impl& m = *impl_;
    Impl::Conn* c = m.find(id);
    if (!c || !c->user) return EINVAL;
    if (c->state == State::ReqRcvd) {
        if (!Impl::private_ok(private_data, len, kRepPrivateData)) return EINVAL;
        RepMsg rep;
        rep.local_comm_id = c->id;
        rep.remote_comm_id = c->remote_id;
        rep.local_qpn = params.qpn & 0xFFFFFF;
        rep.starting_psn = params.starting_psn & 0xFFFFFF;
        rep.responder_resources = params.responder_resources;
        rep.initiator_depth = params.initiator_depth;
        rep.flow_control = params.flow_control;
        rep.rnr_retry_count = params.rnr_retry_count;
        rep.srq = params.srq;
        rep.local_ca_guid = guid_of(m.eng.address().mac);
        Impl::put_private(rep.private_data, 0, private_data, len);
        c->local = params;
        c->state = State::RepSent;
        m.send(*c, rep, true);
        m.arm(*c, c->try_ns, c->retries_left);  // the REQ's Local CM Response Timeout and Max CM Retries
        return 0;
    }
    if (c->state == State::RepRcvd) {
        if (!Impl::private_ok(private_data, len, kRtuPrivateData)) return EINVAL;
        RtuMsg rtu;
        rtu.local_comm_id = c->id;
        rtu.remote_comm_id = c->remote_id;
        Impl::put_private(rtu.private_data, 0, private_data, len);
        c->state = State::Established;
        m.send(*c, rtu, true);  // kept: a duplicate REP gets it again
        m.emit(*c, EventType::Established);
        return 0;
    }
    return EINVAL;
}

int CmAgent::reject(CmId id, uint16_t reason, const uint8_t* private_data, size_t len)
{
    Impl& m = *impl_;
    Impl::Conn* c = m.find(id);
    if (!c || !c->user || (c->state != State::ReqRcvd && c->state != State::RepRcvd) ||
        !Impl::private_ok(private_data, len, kRejPrivateData))
        return EINVAL;
    m.send_rej(*c, reason, c->state == State::ReqRcvd ? 0 : 1, private_data, len);
    m.to_idle(*c);
    return 0;
}

int CmAgent::disconnect(CmId id, const uint8_t* private_data, size_t len)
{
    Impl& m = *impl_;
    Impl::Conn* c = m.find(id);
    if (!c || !c->user) return EINVAL;
    if (c->state == State::Established || c->state == State::RepSent) {
        if (!Impl::private_ok(private_data, len, kDreqPrivateData)) return EINVAL;
        m.send_dreq(*c, private_data, len);
        return 0;
    }
    if (c->state == State::DreqRcvd) {
        if (!Impl::private_ok(private_data, len, kDrepPrivateData)) return EINVAL;
        m.send_drep(*c, private_data, len);
        return 0;
    }
    return EINVAL;
}

int CmAgent::sidr_request(CmId id, uint64_t service_id, const Path& path, const uint8_t* private_data, size_t len)
{
    Impl& m = *impl_;
    Impl::Conn* c = m.find(id);
    if (!c || !c->user || c->state != State::Idle || !Impl::private_ok(private_data, len, kSidrReqPrivateData))
        return EINVAL;
    NicAddress to;
    if (int e = m.start_request(*c, path, &to)) return e;
    SidrReqMsg req;
    req.request_id = c->id;
    req.pkey = path.pkey;
    req.service_id = service_id;
    encode_ip_cm_header(m.ip_header_of(path), req.private_data.data());
    Impl::put_private(req.private_data, kIpCmHeaderBytes, private_data, len);
    c->state = State::SidrReqSent;
    c->service_id = service_id;
    m.send(*c, req, true);
    m.arm(*c, timeout_ns(m.cfg.response_timeout_code), m.cfg.max_retries);
    return 0;
}

int CmAgent::sidr_reply(CmId id, uint32_t qpn, uint32_t qkey, SidrStatus status, const uint8_t* private_data,
                        size_t len)
{
    Impl& m = *impl_;
    Impl::Conn* c = m.find(id);
    if (!c || !c->user || c->state != State::SidrReqRcvd || !Impl::private_ok(private_data, len, kSidrRepPrivateData))
        return EINVAL;
    SidrRepMsg rep;
    rep.request_id = c->remote_id;
    rep.status = static_cast<uint8_t>(status);
    rep.qpn = qpn & 0xFFFFFF;
    rep.service_id = c->service_id;
    rep.qkey = qkey;
    Impl::put_private(rep.private_data, 0, private_data, len);
    c->state = State::SidrRepSent;  // a retried SIDR_REQ gets the same reply
    m.send(*c, rep, true);
    return 0;
}

}  // namespace sdr::emu::cm
