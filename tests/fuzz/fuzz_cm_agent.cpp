// Fuzz target: the CM agent (emu/cm, cm_agent.hpp) between two simulated NICs, its state
// machine driven by consumer calls, virtual time and hostile MADs at once.
//
// A fresh fabric per input: NIC 0 (side a) and NIC 1 (side b) with agents; b listens on one TCP
// service and one UDP service. The input is a program of operations (the first byte of each
// picks one): a consumer call on either side (create and connect, SIDR request, accept, reject,
// disconnect, destroy, on an ID the program knows from its calls and events), time passing, or a
// MAD injected into either NIC's QP1: one of the nine messages, its comm IDs set to live IDs of
// either side or to input bytes, then up to 8 bytes anywhere overwritten, the Q_Key, length and
// source address chosen by the input. After the program, virtual time runs a minute on, so every
// retry and time-wait ends.
//
// Invariants (each side, each ID):
//  - an event names an ID the consumer holds (created, or handed out by a Request or SidrRequest
//    event, and not destroyed): nothing after destroy_id;
//  - Request and SidrRequest name a new ID and a listener of that side;
//  - at most one Established per ID between its connect or Request and its end; TimewaitExit
//    only after a Disconnected;
//  - an event's private data length is its message's field (56, 196, 148, 224, 220, 180, 136);
//  - calls return 0 or an errno value, never anything else;
//  - after every DREQ received is answered and a final minute, nothing is left in time-wait:
//    every disconnect of a live ID ended in its TimewaitExit.
// SDR_FUZZ_TRACE=1 prints every event of a replayed input.
#include "fuzz_input.hpp"

#include <sdr/emu/cm_agent.hpp>
#include <sdr/emu/cm_mad.hpp>
#include <sdr/emu/fabric.hpp>
#include <sdr/emu/verbs_engine.hpp>
#include <sdr/emu/wire.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <vector>

namespace {

using sdr::fuzz::Reader;
using namespace sdr::emu;
using namespace sdr::emu::cm;

constexpr uint64_t kTcpSid = service_id(PortSpace::Tcp, 7471), kUdpSid = service_id(PortSpace::Udp, 7471);

struct IdState {
    bool connected = false;      // between Established and its end
    bool owes_drep = false;      // a DREQ came: the consumer's disconnect sends the DREP
    bool disconnected = false;   // in time-wait: its TimewaitExit not yet
};

struct Side {
    Nic* nic = nullptr;
    std::unique_ptr<CmAgent> cm;
    std::map<CmId, IdState> ids;  // held by the consumer
    std::set<CmId> listeners;
    std::set<CmId> ever;          // every ID ever held (a Request must name a new one)
    std::vector<CmId> pending;    // Request / SidrRequest / RepReceived IDs to answer
};

size_t pd_len(EventType t)
{
    switch (t) {
    case EventType::Request: return kReqPrivateData;
    case EventType::RepReceived: return kRepPrivateData;
    case EventType::Established: return 0;  // RTU (passive: 224) or our own (active: none)
    case EventType::Rejected: return kRejPrivateData;
    case EventType::Disconnected: return 0;  // DREQ 220 or DREP 224 or none (timeout)
    case EventType::SidrRequest: return kSidrReqPrivateData;
    case EventType::SidrReply: return kSidrRepPrivateData;
    default: return 0;
    }
}

const bool g_trace = std::getenv("SDR_FUZZ_TRACE") != nullptr;

void on_event(Side& s, const Event& e)
{
    if (g_trace) std::fprintf(stderr, "nic %u: event %d id 0x%08x\n", s.nic->index(), static_cast<int>(e.type), e.id);
    if (e.type == EventType::Request || e.type == EventType::SidrRequest) {
        SDR_FUZZ_CHECK(!s.ever.count(e.id), "request names an ID seen before (0x%x)", e.id);
        SDR_FUZZ_CHECK(s.listeners.count(e.listen_id), "request names no listener (0x%x)", e.listen_id);
        s.ids[e.id] = {};
        s.ever.insert(e.id);
        s.pending.push_back(e.id);
    }
    auto it = s.ids.find(e.id);
    SDR_FUZZ_CHECK(it != s.ids.end(), "event %d for an ID not held (0x%x)", static_cast<int>(e.type), e.id);
    const size_t want = pd_len(e.type);
    if (want) SDR_FUZZ_CHECK(e.private_data_len == want, "event %d: %u bytes of private data", static_cast<int>(e.type),
                             e.private_data_len);
    if (e.type == EventType::Established)
        SDR_FUZZ_CHECK(e.private_data_len == 0 || e.private_data_len == kRtuPrivateData, "Established: %u bytes",
                       e.private_data_len);
    if (e.type == EventType::Disconnected)
        SDR_FUZZ_CHECK(e.private_data_len == 0 || e.private_data_len == kDreqPrivateData ||
                           e.private_data_len == kDrepPrivateData,
                       "Disconnected: %u bytes", e.private_data_len);
    IdState& st = it->second;
    switch (e.type) {
    case EventType::Established:
        SDR_FUZZ_CHECK(!st.connected, "Established twice (0x%x)", e.id);
        st.connected = true;
        break;
    case EventType::RepReceived: s.pending.push_back(e.id); break;
    case EventType::Disconnected:
        st.connected = false;
        if (e.disconnect_cause == DisconnectCause::DreqReceived) st.owes_drep = true;
        else st.disconnected = true;
        break;
    case EventType::TimewaitExit:
        SDR_FUZZ_CHECK(st.disconnected, "TimewaitExit without Disconnected (0x%x)", e.id);
        st.disconnected = false;
        break;
    default: break;
    }
}

void check_rc(int rc, const char* what)
{
    SDR_FUZZ_CHECK(rc == 0 || rc == EINVAL || rc == EADDRINUSE || rc == EHOSTUNREACH || rc == ENOMEM,
                   "%s returned %d", what, rc);
}

struct World {
    SimFabric f;
    Side s[2];
    World() : f([] {
        FabricParams p;
        p.link.rtt_ms = 0.01;
        p.payload = true;
        return p;
    }())
    {
        for (uint32_t i = 0; i < 2; i++) {
            s[i].nic = &f.nic(i, 1);
            CmConfig c;
            c.seed = 11 + i;
            s[i].cm = std::make_unique<CmAgent>(s[i].nic->verbs(), c);
            Side* side = &s[i];
            s[i].cm->set_event_handler([side](const Event& e) { on_event(*side, e); });
        }
        for (uint64_t sid : {kTcpSid, kUdpSid}) {
            const CmId l = s[1].cm->create_id();
            s[1].ids[l] = {};
            s[1].ever.insert(l);
            s[1].listeners.insert(l);
            SDR_FUZZ_CHECK(s[1].cm->listen(l, sid) == 0, "listen");
        }
    }
    Path path(uint32_t from, uint16_t sport) const
    {
        Path p;
        p.local_ip = s[from].nic->address().ip;
        p.remote_ip = s[1 - from].nic->address().ip;
        p.local_gid = verbs::gid_from_ipv4(p.local_ip);
        p.remote_gid = verbs::gid_from_ipv4(p.remote_ip);
        p.local_port = sport;
        return p;
    }
    // An ID of side i the input picks (kNoId-ish values too: a stale or made-up handle).
    CmId pick(uint32_t i, Reader& in)
    {
        const uint8_t b = in.u8();
        Side& sd = s[i];
        if (b >= 0xF0 || sd.ids.empty()) return in.u32();
        auto it = sd.ids.begin();
        std::advance(it, b % sd.ids.size());
        return it->first;
    }
    void run(uint64_t ns) { f.advance_to(f.sim().now() + ns * 1000); }
    void inject(uint32_t to, Reader& in);
};

// A MAD into side `to`'s QP1.
void World::inject(uint32_t to, Reader& in)
{
    const uint8_t kind = in.u8(), flags = in.u8();
    auto id = [&](uint32_t side) { return (flags & 0x80) ? in.u32() : pick(side, in); };
    const CmId theirs = id(1 - to), ours = id(to);
    CmMessage msg;
    switch (kind % 9) {
    case 0: {
        ReqMsg r;
        r.local_comm_id = theirs;
        r.service_id = (flags & 1) ? kTcpSid : in.u64();
        r.path_mtu = static_cast<uint8_t>(1 + in.u8() % 5);
        r.transport = static_cast<TransportType>(in.u8() & 3);
        r.max_cm_retries = in.u8() & 15;
        r.local_cm_response_timeout = in.u8() & 31;
        encode_ip_cm_header(IpCmHeader{0, 4, 1, ip_cm_addr_v4(s[1 - to].nic->address().ip),
                                       ip_cm_addr_v4(s[to].nic->address().ip)},
                            r.private_data.data());
        msg = r;
        break;
    }
    case 1: {
        const uint8_t mraed = in.u8() & 3, timeout = in.u8() & 31;
        msg = MraMsg{theirs, ours, mraed, timeout, {}};
        break;
    }
    case 2: {
        RejMsg r;
        r.local_comm_id = theirs;
        r.remote_comm_id = (flags & 2) ? 0 : ours;
        r.message_rejected = in.u8() & 3;
        r.reason = in.u16();
        msg = r;
        break;
    }
    case 3: {
        RepMsg r;
        r.local_comm_id = theirs;
        r.remote_comm_id = ours;
        r.local_qpn = in.u32() & 0xFFFFFF;
        msg = r;
        break;
    }
    case 4: msg = RtuMsg{theirs, ours, {}}; break;
    case 5: msg = DreqMsg{theirs, ours, in.u32() & 0xFFFFFF, {}}; break;
    case 6: msg = DrepMsg{theirs, ours, {}}; break;
    case 7: {
        SidrReqMsg r;
        r.request_id = theirs;
        r.service_id = (flags & 1) ? kUdpSid : in.u64();
        encode_ip_cm_header(IpCmHeader{0, 4, 1, ip_cm_addr_v4(s[1 - to].nic->address().ip),
                                       ip_cm_addr_v4(s[to].nic->address().ip)},
                            r.private_data.data());
        msg = r;
        break;
    }
    default: {
        SidrRepMsg r;
        r.request_id = ours;
        r.status = in.u8();
        r.qpn = in.u32() & 0xFFFFFF;
        msg = r;
        break;
    }
    }
    std::vector<uint8_t> mad(kMadBytes);
    encode_mad(CmMad{MadHeader{}, msg}, mad.data());
    for (int n = in.u8() & 7; n > 0; n--) {  // hostile bytes anywhere
        const uint8_t at = in.u8();
        mad[at] = in.u8();
    }
    if (flags & 4) mad.resize(in.u8());  // short
    wire::Headers h;
    const NicAddress& src = s[1 - to].nic->address();
    h.src_mac = src.mac;
    h.dst_mac = s[to].nic->address().mac;
    h.src_ip = (flags & 8) ? 0x0A0A0A0A : src.ip;  // a stranger
    h.dst_ip = s[to].nic->address().ip;
    h.opcode = (flags & 16) ? wire::kOpUdSendOnlyImm : wire::kOpUdSendOnly;
    h.dest_qp = wire::kGsiQpn;
    h.qkey = (flags & 32) ? in.u32() : kGsiQkey;
    h.src_qp = wire::kGsiQpn;
    h.pad = true;
    std::vector<uint8_t> frame(2048);
    frame.resize(wire::encode(h, mad.data(), static_cast<uint32_t>(mad.size()), frame.data(), frame.size()));
    if (!frame.empty()) f.inject_frame(to, std::move(frame), f.sim().now() + 1000);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    World w;
    Reader in(data, size);
    for (int ops = 0; !in.empty() && ops < 256; ops++) {
        const uint8_t op = in.u8();
        const uint32_t i = op >> 7;  // the side it concerns
        if (g_trace) std::fprintf(stderr, "op 0x%02x\n", op);
        Side& sd = w.s[i];
        switch (op & 15) {
        case 0:
        case 1: {  // create an ID and connect (RC, or SIDR for UD)
            const CmId id = sd.cm->create_id();
            if (id == kNoId) break;
            sd.ids[id] = {};
            sd.ever.insert(id);
            const uint8_t b = in.u8();
            const uint64_t sid = (b & 1) ? (op & 1 ? kUdpSid : kTcpSid) : in.u64();
            std::vector<uint8_t> pd(in.u8() % 200, 0x5A);
            ConnParams p;
            p.qpn = in.u32() & 0xFFFFFF;
            p.path_mtu = 256u << (in.u8() % 5);
            check_rc((op & 1) ? sd.cm->sidr_request(id, sid, w.path(i, 1000), pd.data(), pd.size())
                              : sd.cm->connect(id, sid, w.path(i, 1000), p, pd.data(), pd.size()),
                     "connect");
            break;
        }
        case 2:
        case 3: {  // answer what waits: accept (REP or RTU), SIDR reply, or reject
            if (sd.pending.empty()) break;
            const CmId id = sd.pending.front();
            sd.pending.erase(sd.pending.begin());
            ConnParams p;
            p.qpn = 0x123;
            const uint8_t pd[8] = {1, 2, 3, 4, 5, 6, 7, 8};
            if (op & 1) {
                check_rc(sd.cm->reject(id, in.u16(), pd, sizeof pd), "reject");
            } else {
                const int rc = sd.cm->accept(id, p, pd, sizeof pd);
                check_rc(rc, "accept");
                if (rc == EINVAL)
                    check_rc(sd.cm->sidr_reply(id, 0x77, 0x1234, SidrStatus::Valid, pd, sizeof pd), "sidr_reply");
            }
            break;
        }
        case 4: {
            const CmId id = w.pick(i, in);
            const int rc = sd.cm->disconnect(id);
            check_rc(rc, "disconnect");
            if (rc == 0 && sd.ids.count(id) && sd.ids[id].owes_drep) {
                sd.ids[id].owes_drep = false;
                sd.ids[id].disconnected = true;  // the DREP went: time-wait
            }
            break;
        }
        case 5: {
            const CmId id = w.pick(i, in);
            const int rc = sd.cm->destroy_id(id);
            check_rc(rc, "destroy_id");
            SDR_FUZZ_CHECK((rc == 0) == (sd.ids.count(id) == 1), "destroy_id of 0x%x returned %d", id, rc);
            sd.ids.erase(id);
            sd.listeners.erase(id);
            break;
        }
        case 6: {
            const CmId id = w.pick(i, in);
            const int rc = sd.cm->listen(id, in.u8() & 1 ? kTcpSid : in.u64());
            check_rc(rc, "listen");
            if (rc == 0) sd.listeners.insert(id);
            break;
        }
        case 7: w.run(uint64_t{in.u16()} * 100'000); break;  // up to 6.5 s
        default: w.inject(i, in); break;
        }
        w.run(100'000);  // 100 us: the packets of this step land
    }
    // Every DREQ answered (the consumer's part), then a minute: every retry and time-wait is over.
    for (Side& sd : w.s)
        for (auto& [id, st] : sd.ids)
            if (st.owes_drep && sd.cm->disconnect(id) == 0) {
                st.owes_drep = false;
                st.disconnected = true;
            }
    w.run(60'000'000'000);
    for (const Side& sd : w.s)
        for (const auto& [id, st] : sd.ids)
            SDR_FUZZ_CHECK(!st.disconnected, "ID 0x%x still in time-wait after a minute", id);
    return 0;
}
