// CM MADs to and from their 256 bytes (cm_mad.hpp). Every read stays inside the 256 bytes the
// length check admitted; every field is masked to its width on the way out.

#include <sdr/emu/cm_mad.hpp>

#include <cstring>
#include <type_traits>

namespace sdr::emu::cm {

namespace {

// Big-endian accessors over the message body (offsets after the common header).
struct Reader {
    const uint8_t* p;
    uint8_t u8(size_t o) const { return p[o]; }
    uint16_t u16(size_t o) const { return static_cast<uint16_t>(p[o] << 8 | p[o + 1]); }
    uint32_t u24(size_t o) const { return uint32_t{p[o]} << 16 | uint32_t{p[o + 1]} << 8 | p[o + 2]; }
    uint32_t u32(size_t o) const { return uint32_t{u16(o)} << 16 | u16(o + 2); }
    uint64_t u64(size_t o) const { return uint64_t{u32(o)} << 32 | u32(o + 4); }
    // bits [shift, shift + width) of byte o, counted from its least significant bit
    uint8_t bits(size_t o, unsigned shift, unsigned width) const
    {
        return static_cast<uint8_t>((p[o] >> shift) & ((1u << width) - 1));
    }
    template <size_t N>
    void bytes(size_t o, std::array<uint8_t, N>* a) const
    {
        std::memcpy(a->data(), p + o, N);
    }
};

struct Writer {
    uint8_t* p;
    void u8(size_t o, uint8_t v) { p[o] = v; }
    void u16(size_t o, uint16_t v)
    {
        p[o] = static_cast<uint8_t>(v >> 8);
        p[o + 1] = static_cast<uint8_t>(v);
    }
    void u24(size_t o, uint32_t v)
    {
        p[o] = static_cast<uint8_t>(v >> 16);
        p[o + 1] = static_cast<uint8_t>(v >> 8);
        p[o + 2] = static_cast<uint8_t>(v);
    }
    void u32(size_t o, uint32_t v)
    {
        u16(o, static_cast<uint16_t>(v >> 16));
        u16(o + 2, static_cast<uint16_t>(v));
    }
    void u64(size_t o, uint64_t v)
    {
        u32(o, static_cast<uint32_t>(v >> 32));
        u32(o + 4, static_cast<uint32_t>(v));
    }
    // OR v (width bits) into byte o at shift: the byte starts zeroed, fields share it.
    void bits(size_t o, unsigned shift, unsigned width, unsigned v)
    {
        p[o] = static_cast<uint8_t>(p[o] | ((v & ((1u << width) - 1)) << shift));
    }
    template <size_t N>
    void bytes(size_t o, const std::array<uint8_t, N>& a)
    {
        std::memcpy(p + o, a.data(), N);
    }
};

// A REQ path (primary at 52, alternate at 96): LIDs, GIDs, flow label (20 bits) and packet
// rate (low 6 bits of the fourth byte), traffic class, hop limit, SL and subnet local, ACK timeout.
void read_path(const Reader& r, size_t o, PathInfo* pi)
{
    pi->local_lid = r.u16(o);
    pi->remote_lid = r.u16(o + 2);
    r.bytes(o + 4, &pi->local_gid);
    r.bytes(o + 20, &pi->remote_gid);
    pi->flow_label = r.u32(o + 36) >> 12;
    pi->packet_rate = r.bits(o + 39, 0, 6);
    pi->traffic_class = r.u8(o + 40);
    pi->hop_limit = r.u8(o + 41);
    pi->sl = r.bits(o + 42, 4, 4);
    pi->subnet_local = r.bits(o + 42, 3, 1);
    pi->local_ack_timeout = r.bits(o + 43, 3, 5);
}

void write_path(Writer& w, size_t o, const PathInfo& pi)
{
    w.u16(o, pi.local_lid);
    w.u16(o + 2, pi.remote_lid);
    w.bytes(o + 4, pi.local_gid);
    w.bytes(o + 20, pi.remote_gid);
    w.u32(o + 36, (pi.flow_label & 0xFFFFF) << 12);
    w.bits(o + 39, 0, 6, pi.packet_rate);
    w.u8(o + 40, pi.traffic_class);
    w.u8(o + 41, pi.hop_limit);
    w.bits(o + 42, 4, 4, pi.sl);
    w.bits(o + 42, 3, 1, pi.subnet_local);
    w.bits(o + 43, 3, 5, pi.local_ack_timeout);
}

void read(const Reader& r, ReqMsg* m)
{
    m->local_comm_id = r.u32(0);
    m->vendor_id = r.u24(5);
    m->service_id = r.u64(8);
    m->local_ca_guid = r.u64(16);
    m->local_qkey = r.u32(28);
    m->local_qpn = r.u24(32);
    m->responder_resources = r.u8(35);
    m->local_eecn = r.u24(36);
    m->initiator_depth = r.u8(39);
    m->remote_eecn = r.u24(40);
    m->remote_cm_response_timeout = r.bits(43, 3, 5);
    m->transport = static_cast<TransportType>(r.bits(43, 1, 2));
    m->flow_control = r.bits(43, 0, 1);
    m->starting_psn = r.u24(44);
    m->local_cm_response_timeout = r.bits(47, 3, 5);
    m->retry_count = r.bits(47, 0, 3);
    m->pkey = r.u16(48);
    m->path_mtu = r.bits(50, 4, 4);
    m->rdc_exists = r.bits(50, 3, 1);
    m->rnr_retry_count = r.bits(50, 0, 3);
    m->max_cm_retries = r.bits(51, 4, 4);
    m->srq = r.bits(51, 3, 1);
    m->extended_transport = r.bits(51, 0, 3);
    read_path(r, 52, &m->primary);
    read_path(r, 96, &m->alternate);
    m->sap_supported = r.bits(139, 2, 1);
    r.bytes(140, &m->private_data);
}

void write(Writer& w, const ReqMsg& m)
{
    w.u32(0, m.local_comm_id);
    w.u24(5, m.vendor_id);
    w.u64(8, m.service_id);
    w.u64(16, m.local_ca_guid);
    w.u32(28, m.local_qkey);
    w.u24(32, m.local_qpn);
    w.u8(35, m.responder_resources);
    w.u24(36, m.local_eecn);
    w.u8(39, m.initiator_depth);
    w.u24(40, m.remote_eecn);
    w.bits(43, 3, 5, m.remote_cm_response_timeout);
    w.bits(43, 1, 2, static_cast<unsigned>(m.transport));
    w.bits(43, 0, 1, m.flow_control);
    w.u24(44, m.starting_psn);
    w.bits(47, 3, 5, m.local_cm_response_timeout);
    w.bits(47, 0, 3, m.retry_count);
    w.u16(48, m.pkey);
    w.bits(50, 4, 4, m.path_mtu);
    w.bits(50, 3, 1, m.rdc_exists);
    w.bits(50, 0, 3, m.rnr_retry_count);
    w.bits(51, 4, 4, m.max_cm_retries);
    w.bits(51, 3, 1, m.srq);
    w.bits(51, 0, 3, m.extended_transport);
    write_path(w, 52, m.primary);
    write_path(w, 96, m.alternate);
    w.bits(139, 2, 1, m.sap_supported);
    w.bytes(140, m.private_data);
}

void read(const Reader& r, MraMsg* m)
{
    m->local_comm_id = r.u32(0);
    m->remote_comm_id = r.u32(4);
    m->message_mraed = r.bits(8, 6, 2);
    m->service_timeout = r.bits(9, 3, 5);
    r.bytes(10, &m->private_data);
}

void write(Writer& w, const MraMsg& m)
{
    w.u32(0, m.local_comm_id);
    w.u32(4, m.remote_comm_id);
    w.bits(8, 6, 2, m.message_mraed);
    w.bits(9, 3, 5, m.service_timeout);
    w.bytes(10, m.private_data);
}

void read(const Reader& r, RejMsg* m)
{
    m->local_comm_id = r.u32(0);
    m->remote_comm_id = r.u32(4);
    m->message_rejected = r.bits(8, 6, 2);
    m->rejected_info_length = r.bits(9, 1, 7);
    m->reason = r.u16(10);
    r.bytes(12, &m->ari);
    r.bytes(84, &m->private_data);
}

void write(Writer& w, const RejMsg& m)
{
    w.u32(0, m.local_comm_id);
    w.u32(4, m.remote_comm_id);
    w.bits(8, 6, 2, m.message_rejected);
    w.bits(9, 1, 7, m.rejected_info_length);
    w.u16(10, m.reason);
    w.bytes(12, m.ari);
    w.bytes(84, m.private_data);
}

void read(const Reader& r, RepMsg* m)
{
    m->local_comm_id = r.u32(0);
    m->remote_comm_id = r.u32(4);
    m->local_qkey = r.u32(8);
    m->local_qpn = r.u24(12);
    m->local_eecn = r.u24(16);
    m->starting_psn = r.u24(20);
    m->responder_resources = r.u8(24);
    m->initiator_depth = r.u8(25);
    m->target_ack_delay = r.bits(26, 3, 5);
    m->failover_accepted = r.bits(26, 1, 2);
    m->flow_control = r.bits(26, 0, 1);
    m->rnr_retry_count = r.bits(27, 5, 3);
    m->srq = r.bits(27, 4, 1);
    m->local_ca_guid = r.u64(28);
    r.bytes(36, &m->private_data);
}

void write(Writer& w, const RepMsg& m)
{
    w.u32(0, m.local_comm_id);
    w.u32(4, m.remote_comm_id);
    w.u32(8, m.local_qkey);
    w.u24(12, m.local_qpn);
    w.u24(16, m.local_eecn);
    w.u24(20, m.starting_psn);
    w.u8(24, m.responder_resources);
    w.u8(25, m.initiator_depth);
    w.bits(26, 3, 5, m.target_ack_delay);
    w.bits(26, 1, 2, m.failover_accepted);
    w.bits(26, 0, 1, m.flow_control);
    w.bits(27, 5, 3, m.rnr_retry_count);
    w.bits(27, 4, 1, m.srq);
    w.u64(28, m.local_ca_guid);
    w.bytes(36, m.private_data);
}

// RTU and DREP: the two comm IDs and 224 bytes of private data.
template <class M>
void read_ids_pd(const Reader& r, M* m)
{
    m->local_comm_id = r.u32(0);
    m->remote_comm_id = r.u32(4);
    r.bytes(8, &m->private_data);
}

template <class M>
void write_ids_pd(Writer& w, const M& m)
{
    w.u32(0, m.local_comm_id);
    w.u32(4, m.remote_comm_id);
    w.bytes(8, m.private_data);
}

void read(const Reader& r, RtuMsg* m) { read_ids_pd(r, m); }
void write(Writer& w, const RtuMsg& m) { write_ids_pd(w, m); }
void read(const Reader& r, DrepMsg* m) { read_ids_pd(r, m); }
void write(Writer& w, const DrepMsg& m) { write_ids_pd(w, m); }

void read(const Reader& r, DreqMsg* m)
{
    m->local_comm_id = r.u32(0);
    m->remote_comm_id = r.u32(4);
    m->remote_qpn = r.u24(8);
    r.bytes(12, &m->private_data);
}

void write(Writer& w, const DreqMsg& m)
{
    w.u32(0, m.local_comm_id);
    w.u32(4, m.remote_comm_id);
    w.u24(8, m.remote_qpn);
    w.bytes(12, m.private_data);
}

void read(const Reader& r, SidrReqMsg* m)
{
    m->request_id = r.u32(0);
    m->pkey = r.u16(4);
    m->service_id = r.u64(8);
    r.bytes(16, &m->private_data);
}

void write(Writer& w, const SidrReqMsg& m)
{
    w.u32(0, m.request_id);
    w.u16(4, m.pkey);
    w.u64(8, m.service_id);
    w.bytes(16, m.private_data);
}

void read(const Reader& r, SidrRepMsg* m)
{
    m->request_id = r.u32(0);
    m->status = r.u8(4);
    m->additional_info_length = r.u8(5);
    m->qpn = r.u24(8);
    m->service_id = r.u64(12);
    m->qkey = r.u32(20);
    r.bytes(24, &m->additional_info);
    r.bytes(96, &m->private_data);
}

void write(Writer& w, const SidrRepMsg& m)
{
    w.u32(0, m.request_id);
    w.u8(4, m.status);
    w.u8(5, m.additional_info_length);
    w.u24(8, m.qpn);
    w.u64(12, m.service_id);
    w.u32(20, m.qkey);
    w.bytes(24, m.additional_info);
    w.bytes(96, m.private_data);
}

template <class M>
void decode_as(const Reader& body, CmMessage* msg)
{
    M m;
    read(body, &m);
    *msg = m;
}

}  // namespace

Attr attr_of(const CmMessage& msg)
{
    static constexpr Attr kAttrs[] = {Attr::Req,  Attr::Mra,  Attr::Rej,     Attr::Rep,    Attr::Rtu,
                                      Attr::Dreq, Attr::Drep, Attr::SidrReq, Attr::SidrRep};
    static_assert(std::size(kAttrs) == std::variant_size_v<CmMessage>);
    return kAttrs[msg.index()];
}

MadVerdict decode_mad(const uint8_t* p, size_t len, CmMad* out)
{
    if (len < kMadBytes) return MadVerdict::Short;
    const Reader r{p};
    MadHeader& h = out->hdr;
    h.base_version = r.u8(0);
    h.mgmt_class = r.u8(1);
    h.class_version = r.u8(2);
    h.method = r.u8(3);
    h.status = r.u16(4);
    h.class_specific = r.u16(6);
    h.tid = r.u64(8);
    h.attr_id = r.u16(16);
    h.attr_mod = r.u32(20);
    if (h.base_version != kMadBaseVersion) return MadVerdict::BadBaseVersion;
    if (h.mgmt_class != kMgmtClassCm) return MadVerdict::BadClass;
    if (h.class_version != kCmClassVersion) return MadVerdict::BadClassVersion;
    if (h.method != kMethodSend) return MadVerdict::BadMethod;
    const Reader body{p + kMadHeaderBytes};
    switch (static_cast<Attr>(h.attr_id)) {
    case Attr::Req: decode_as<ReqMsg>(body, &out->msg); break;
    case Attr::Mra: decode_as<MraMsg>(body, &out->msg); break;
    case Attr::Rej: decode_as<RejMsg>(body, &out->msg); break;
    case Attr::Rep: decode_as<RepMsg>(body, &out->msg); break;
    case Attr::Rtu: decode_as<RtuMsg>(body, &out->msg); break;
    case Attr::Dreq: decode_as<DreqMsg>(body, &out->msg); break;
    case Attr::Drep: decode_as<DrepMsg>(body, &out->msg); break;
    case Attr::SidrReq: decode_as<SidrReqMsg>(body, &out->msg); break;
    case Attr::SidrRep: decode_as<SidrRepMsg>(body, &out->msg); break;
    default: return MadVerdict::UnknownAttr;  // LAP, APR, ClassPortInfo: not served
    }
    return MadVerdict::Ok;
}

void encode_mad(const CmMad& m, uint8_t* out)
{
    std::memset(out, 0, kMadBytes);
    Writer w{out};
    const MadHeader& h = m.hdr;
    w.u8(0, h.base_version);
    w.u8(1, h.mgmt_class);
    w.u8(2, h.class_version);
    w.u8(3, h.method);
    w.u16(4, h.status);
    w.u16(6, h.class_specific);
    w.u64(8, h.tid);
    w.u16(16, static_cast<uint16_t>(attr_of(m.msg)));
    w.u32(20, h.attr_mod);
    Writer body{out + kMadHeaderBytes};
    std::visit([&](const auto& msg) { write(body, msg); }, m.msg);
}

uint8_t mtu_code(uint32_t bytes)
{
    for (uint8_t c = 1; c <= 5; c++)
        if (mtu_bytes(c) == bytes) return c;
    return 0;
}

uint32_t mtu_bytes(uint8_t code) { return code >= 1 && code <= 5 ? 128u << code : 0; }

void encode_ip_cm_header(const IpCmHeader& h, uint8_t* out)
{
    Writer w{out};
    std::memset(out, 0, kIpCmHeaderSize);
    w.u8(0, h.version);
    w.bits(1, 4, 4, h.ip_version);
    w.u16(2, h.src_port);
    w.bytes(4, h.src_ip);
    w.bytes(20, h.dst_ip);
}

IpCmHeader decode_ip_cm_header(const uint8_t* p)
{
    const Reader r{p};
    IpCmHeader h;
    h.version = r.u8(0);
    h.ip_version = r.bits(1, 4, 4);
    h.src_port = r.u16(2);
    r.bytes(4, &h.src_ip);
    r.bytes(20, &h.dst_ip);
    return h;
}

std::array<uint8_t, 16> ip_cm_addr_v4(uint32_t ip)
{
    std::array<uint8_t, 16> a{};
    Writer{a.data()}.u32(12, ip);
    return a;
}

bool ip_cm_addr_to_v4(const std::array<uint8_t, 16>& a, uint32_t* ip)
{
    for (size_t i = 0; i < 12; i++)
        if (a[i]) return false;
    *ip = Reader{a.data()}.u32(12);
    return true;
}

}  // namespace sdr::emu::cm
