// sdr-pcap summary: frames -> SDR data messages and reliable messages (pcap_summary.hpp).
#include "pcap_summary.hpp"

#include "attribute.hpp"
#include "common/json.hpp"

#include <sdr/emu/capture_notes.hpp>
#include <sdr/emu/ids.hpp>
#include <sdr/emu/pcapng.hpp>
#include <sdr/emu/wire.hpp>
#include <sdr/firmware/imm.h>
#include <sdr/reliability/config.hpp>

#include <algorithm>
#include <cinttypes>
#include <tuple>

namespace sdr::tools {
namespace {

namespace wire = emu::wire;

uint32_t be32(const uint8_t* p) { return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3]; }
uint32_t be24(const uint8_t* p) { return uint32_t{p[0]} << 16 | uint32_t{p[1]} << 8 | p[2]; }
uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

// The RoCEv2 fields the summary needs, read from a frame that may be cut at a snap length
// (data frames usually are; control datagrams are kept whole).
struct Frame {
    uint32_t src_ip = 0, dst_ip = 0, dest_qp = 0, rkey = 0, imm = 0;
    uint8_t opcode = 0;
    const uint8_t* payload = nullptr;  // UD SEND: the datagram (whole frames only)
    size_t payload_len = 0;
};

bool parse(const std::vector<uint8_t>& b, Frame* f)
{
    constexpr size_t kIp = wire::kEthBytes, kUdp = kIp + wire::kIpv4Bytes, kBth = kUdp + wire::kUdpBytes,
                     kExt = kBth + wire::kBthBytes;
    if (b.size() < kExt || be16(&b[12]) != 0x0800 || (b[kIp] >> 4) != 4 || b[kIp + 9] != 17 ||
        be16(&b[kUdp + 2]) != wire::kRoceUdpPort)
        return false;
    f->src_ip = be32(&b[kIp + 12]);
    f->dst_ip = be32(&b[kIp + 16]);
    f->opcode = b[kBth];
    f->dest_qp = be24(&b[kBth + 5]);
    if (f->opcode == wire::kOpUcWriteOnlyImm) {
        if (b.size() < kExt + wire::kRethBytes + 4) return false;
        f->rkey = be32(&b[kExt + 8]);
        f->imm = be32(&b[kExt + wire::kRethBytes]);
        return true;
    }
    if (wire::has_deth(f->opcode)) {
        size_t start = kExt + wire::kDethBytes + (f->opcode == wire::kOpUdSendOnlyImm ? 4 : 0);
        size_t ip_len = be16(&b[kIp + 2]);
        size_t pad = (b[kBth + 1] >> 4) & 3;
        size_t end = kIp + ip_len;  // the ICRC and the pad bytes end the datagram
        if (end < start + 4 + pad || end > b.size()) return true;  // cut: not decodable
        f->payload = &b[start];
        f->payload_len = end - 4 - pad - start;
    }
    return true;
}

std::string ranges(const std::vector<uint32_t>& v)
{
    std::string out;
    for (size_t i = 0; i < v.size();) {
        size_t j = i;
        while (j + 1 < v.size() && v[j + 1] == v[j] + 1) j++;
        if (!out.empty()) out += ",";
        out += std::to_string(v[i]);
        if (j > i) out += "-" + std::to_string(v[j]);
        i = j + 1;
    }
    return out;
}

bool bit(const std::vector<uint8_t>& bits, uint32_t i) { return i / 8 < bits.size() && (bits[i / 8] >> (i % 8) & 1); }

// An ACK's held chunks (everything below base, then its bitmap) and its holes (missing chunks
// behind a held one), as the dissector shows them.
void ack_ranges(const rel::CtrlMsg& m, AckRecord* a)
{
    std::vector<uint32_t> held, holes;
    for (uint32_t c = 0; c < m.base; c++) held.push_back(c);
    uint32_t last = 0;
    bool any = false;
    for (uint32_t i = 0; i < m.nbits; i++)
        if (bit(m.bits, i)) {
            held.push_back(m.base + i);
            last = i;
            any = true;
        }
    if (any)
        for (uint32_t i = 0; i < last; i++)
            if (!bit(m.bits, i)) holes.push_back(m.base + i);
    if (m.base < 1u << 20) a->held = ranges(held);  // a huge base is printed as its range only
    else a->held = "0-" + std::to_string(m.base - 1) + (any ? ",..." : "");
    a->holes = ranges(holes);
}

// Splits a record's comment ("a; b") into the notes the tap writes.
std::vector<std::string> notes_of(const std::string& c)
{
    std::vector<std::string> out;
    for (size_t at = 0; at < c.size();) {
        size_t semi = c.find("; ", at);
        out.push_back(c.substr(at, semi == std::string::npos ? std::string::npos : semi - at));
        if (semi == std::string::npos) break;
        at = semi + 2;
    }
    return out;
}

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// A control QP's number: bit 23 set, the index's top bit clear (set: a verbs QP, whose UD
// datagrams are the application's, not the reliability layer's).
bool control_qp(uint32_t qpn)
{
    return (qpn & emu::NicIds::kCtrlQpnBit) && !(qpn & (1u << (emu::NicIds::kQpnIndexBits - 1)));
}

// What a datagram the decoder refused says in its header's first fields (ctrl_msg.hpp), so that
// a person can tell which message it was meant for.
std::string header_of(const Frame& f)
{
    if (!f.payload) return "cut before its end";
    if (f.payload_len < rel::kCtrlHeaderBytes)
        return std::to_string(f.payload_len) + " bytes, shorter than the " + std::to_string(rel::kCtrlHeaderBytes) +
               "-byte header";
    const uint8_t* p = f.payload;
    uint64_t seq = 0;
    for (int i = 7; i >= 0; i--) seq = seq << 8 | p[8 + i];  // little-endian
    return "version " + std::to_string(p[0]) + ", type " + std::to_string(p[1]) + ", scheme " + std::to_string(p[3]) +
           ", seq " + std::to_string(seq);
}

}  // namespace

std::string ip_string(uint32_t ip)
{
    return std::to_string(ip >> 24) + "." + std::to_string(ip >> 16 & 255) + "." + std::to_string(ip >> 8 & 255) + "." +
           std::to_string(ip & 255);
}

bool summarize(const std::string& path, const SummaryOptions& o, Summary* s, std::string* err)
{
    std::vector<emu::CaptureRecord> recs;
    if (!emu::read_capture(path, &recs, err)) return false;
    const fw_imm_layout layout{static_cast<uint8_t>(o.msg_bits), static_cast<uint8_t>(o.offset_bits),
                               static_cast<uint8_t>(o.frag_bits)};
    if (!fw_imm_layout_valid(layout) || o.mtu_bytes == 0 || o.chunk_bytes < o.mtu_bytes) {
        if (err) *err = "bad immediate split or chunk/MTU";
        return false;
    }
    for (const auto& r : recs) s->pcapng |= !r.iface.empty();
    // (src, dst, rkey, msg id) -> current message: an SDR message is its id and its slot
    // generation, whose root key the RETH carries; (src, dst) -> messages started so far.
    std::map<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>, size_t> open;
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> started;
    std::map<std::tuple<uint32_t, uint32_t, uint32_t, uint64_t>, size_t> rels;
    const uint64_t wrap = uint64_t{1} << (o.msg_bits - 1);

    for (size_t i = 0; i < recs.size(); i++) {
        const emu::CaptureRecord& r = recs[i];
        s->frames++;
        const bool dropped = r.flags & emu::pcapng::kFlagLinkDrop;
        bool nic_drop = false;
        for (const auto& n : notes_of(r.comment)) {
            if (starts_with(n, "link drop: ") || starts_with(n, emu::capture_note::kNicDropPrefix)) s->causes[n]++;
            nic_drop |= starts_with(n, emu::capture_note::kNicDropPrefix);
            s->injected += n == emu::capture_note::kInjected;
        }
        s->link_dropped += dropped;
        s->nic_dropped += nic_drop;
        Frame f;
        if (!parse(r.bytes, &f)) {
            s->other++;
            continue;
        }
        if (f.opcode == wire::kOpUcWriteOnlyImm) {
            fw_imm d = fw_imm_decode(layout, f.imm);
            auto key = std::make_tuple(f.src_ip, f.dst_ip, f.rkey, d.msg_id);
            uint64_t& n = started[{f.src_ip, f.dst_ip}];
            auto it = open.find(key);
            // Ids repeat every 2^msg_bits messages; once half of them started since, the id is
            // a new message (the C API starts message n + S only after n completed).
            if (it == open.end() || n - s->data[it->second].ordinal >= wrap) {
                DataMessage m;
                m.src_ip = f.src_ip;
                m.dst_ip = f.dst_ip;
                m.rkey = f.rkey;
                m.msg_id = d.msg_id;
                m.first_ns = r.ts_ns;
                m.ordinal = n++;
                s->data.push_back(std::move(m));
                open[key] = s->data.size() - 1;
                it = open.find(key);
            }
            DataMessage& m = s->data[it->second];
            m.last_ns = r.ts_ns;
            m.packets_sent++;
            m.lost += dropped;
            m.nic_dropped += nic_drop;
            uint32_t& sends = m.sends[d.packet_offset];
            if (sends == 0 && !s->pcapng && d.packet_offset < m.highest) {
                // A classic pcap holds only what arrived, and a sender injects a message's
                // packets in offset order: a first sight below the highest offset is a repeat
                // whose first copy was lost before the capture point.
                sends++;
                m.lost_inferred++;
            }
            if (sends++ > 0) m.retransmitted++;
            m.highest = std::max(m.highest, d.packet_offset);
            continue;
        }
        if (!wire::has_deth(f.opcode) || !control_qp(f.dest_qp)) {
            s->other++;
            continue;
        }
        rel::CtrlMsg c;
        if (!f.payload || !rel::decode(f.payload, f.payload_len, &c)) {
            s->undecoded.push_back(UndecodedCtrl{i + 1, r.ts_ns, f.src_ip, f.dst_ip, header_of(f)});
            continue;
        }
        const bool from_receiver = c.type == rel::CtrlType::Cts || c.type == rel::CtrlType::Ack ||
                                   c.type == rel::CtrlType::Nack;
        const uint32_t src = from_receiver ? f.dst_ip : f.src_ip, dst = from_receiver ? f.src_ip : f.dst_ip;
        const uint32_t receiver = from_receiver ? c.from : c.to;
        auto key = std::make_tuple(src, dst, receiver, c.seq);
        auto it = rels.find(key);
        if (it == rels.end()) {
            ReliableMessage m;
            m.src_ip = src;
            m.dst_ip = dst;
            m.receiver = receiver;
            m.seq = c.seq;
            m.first_ns = r.ts_ns;
            s->reliable.push_back(std::move(m));
            it = rels.emplace(key, s->reliable.size() - 1).first;
        }
        ReliableMessage& m = s->reliable[it->second];
        m.last_ns = r.ts_ns;
        switch (c.type) {
        case rel::CtrlType::Cts:
            if (!dropped && !m.has_cts) {
                m.has_cts = true;
                m.cts_ns = r.ts_ns;
                m.length = c.length;
                m.code = rel::to_string(rel::Code{c.scheme, c.k, c.m});
                m.streams = rel::is_ec(c.scheme) ? 2 : 1;  // as the sender opens them (SendEngine::streams)
            }
            break;
        case rel::CtrlType::Ack: {
            AckRecord a;
            a.t_ns = r.ts_ns;
            a.lost = dropped;
            a.final = c.flags & rel::kAckFinal;
            a.failed = c.flags & rel::kAckFailed;
            a.base = c.base;
            a.nbits = c.nbits;
            ack_ranges(c, &a);
            if (!dropped && (a.final || a.failed) && !m.final && !m.failed) {
                m.final = a.final;
                m.failed = a.failed;
                m.final_ns = r.ts_ns;
            }
            m.acks.push_back(std::move(a));
            break;
        }
        case rel::CtrlType::Nack: {
            NackRecord n;
            n.t_ns = r.ts_ns;
            n.lost = dropped;
            std::vector<uint32_t> v;
            for (uint32_t i = 0; i < c.nbits; i++)
                if (bit(c.bits, i)) v.push_back(c.base + i);
            n.chunks = ranges(v);
            m.nacks.push_back(std::move(n));
            break;
        }
        case rel::CtrlType::Req: m.reqs++; break;
        case rel::CtrlType::Abort: m.aborts++; break;
        }
    }

    const uint32_t ppc = o.chunk_bytes / o.mtu_bytes;
    for (DataMessage& m : s->data) {
        std::map<uint32_t, uint32_t> chunk_repeats;
        for (const auto& [off, n] : m.sends) chunk_repeats[off / ppc] = std::max(chunk_repeats[off / ppc], n - 1);
        for (const auto& [c, n] : chunk_repeats) m.retransmitted_chunks += n;
    }
    attribute(o, s);
    return true;
}

namespace {

struct Totals {
    uint64_t sent = 0, lost = 0, inferred = 0, retrans = 0, chunks = 0, nic = 0, first = UINT64_MAX;
};

Totals totals(const Summary& s, const ReliableMessage& r)
{
    Totals t;
    for (size_t i : r.data) {
        const DataMessage& d = s.data[i];
        t.sent += d.packets_sent;
        t.lost += d.lost;
        t.inferred += d.lost_inferred;
        t.retrans += d.retransmitted;
        t.chunks += d.retransmitted_chunks;
        t.nic += d.nic_dropped;
        t.first = std::min(t.first, d.first_ns);
    }
    return t;
}

double sec(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

void text_data(const DataMessage& d, FILE* f, const char* indent)
{
    std::fprintf(f,
                 "%ssdr msg %u rkey 0x%08x: %" PRIu64 " packets sent, %" PRIu64 " lost, %" PRIu64
                 " retransmitted (%" PRIu64 " chunk repeats)",
                 indent, d.msg_id, d.rkey, d.packets_sent, d.lost + d.lost_inferred, d.retransmitted,
                 d.retransmitted_chunks);
    if (d.lost_inferred) std::fprintf(f, " [%" PRIu64 " losses inferred]", d.lost_inferred);
    if (d.nic_dropped) std::fprintf(f, ", %" PRIu64 " dropped by the NIC", d.nic_dropped);
    std::fprintf(f, ", frames %.9f .. %.9f\n", sec(d.first_ns), sec(d.last_ns));
}

Json json_data(const DataMessage& d)
{
    return Json{{"msg_id", d.msg_id},
                {"rkey", d.rkey},
                {"packets_sent", d.packets_sent},
                {"lost", d.lost},
                {"lost_inferred", d.lost_inferred},
                {"retransmitted", d.retransmitted},
                {"retransmitted_chunks", d.retransmitted_chunks},
                {"nic_dropped", d.nic_dropped},
                {"first_ns", d.first_ns},
                {"last_ns", d.last_ns}};
}

}  // namespace

void print_text(const Summary& s, FILE* f)
{
    std::fprintf(f, "%" PRIu64 " frames (%s): %" PRIu64 " dropped by the link, %" PRIu64 " dropped by a NIC, %" PRIu64
                 " injected\n",
                 s.frames, s.pcapng ? "pcapng" : "classic pcap: drops inferred from gaps", s.link_dropped,
                 s.nic_dropped, s.injected);
    for (const auto& [cause, n] : s.causes) std::fprintf(f, "  %-40s %" PRIu64 "\n", cause.c_str(), n);
    if (!s.undecoded.empty())
        std::fprintf(f, "%zu control datagrams the reliability layer cannot decode (counted in no message):\n",
                     s.undecoded.size());
    for (const auto& u : s.undecoded)
        std::fprintf(f, "  frame %" PRIu64 " at %.9f, %s -> %s: %s\n", u.frame, sec(u.t_ns), ip_string(u.src_ip).c_str(),
                     ip_string(u.dst_ip).c_str(), u.header.c_str());
    for (const auto& r : s.reliable) {
        Totals t = totals(s, r);
        std::fprintf(f, "\n%s -> %s  message seq %" PRIu64 " (receiver 0x%08x) %s, %" PRIu64 " bytes\n",
                     ip_string(r.src_ip).c_str(), ip_string(r.dst_ip).c_str(), r.seq, r.receiver,
                     r.code.empty() ? "(no CTS decoded)" : r.code.c_str(), r.length);
        if (r.data.empty())
            std::fprintf(f,
                         "  no SDR message found for it (its CTS, or an earlier seq's, is not decoded, or none of its "
                         "data frames was captured); frames %.9f .. %.9f\n",
                         sec(r.first_ns), sec(r.last_ns));
        else
            std::fprintf(f,
                         "  %" PRIu64 " packets sent, %" PRIu64 " lost, %" PRIu64 " retransmitted (%" PRIu64
                         " chunk repeats); frames %.9f .. %.9f\n",
                         t.sent, t.lost + t.inferred, t.retrans, t.chunks, sec(r.first_ns), sec(r.last_ns));
        for (size_t i : r.data) text_data(s.data[i], f, "  ");
        size_t holed = 0;
        for (const auto& a : r.acks) {
            if (a.holes.empty()) continue;
            holed++;
            std::fprintf(f, "  ACK %.9f held=%s holes=%s%s\n", sec(a.t_ns), a.held.c_str(), a.holes.c_str(),
                         a.lost ? " (lost)" : "");
        }
        for (const auto& n : r.nacks)
            std::fprintf(f, "  NACK %.9f repeat=%s%s\n", sec(n.t_ns), n.chunks.c_str(), n.lost ? " (lost)" : "");
        std::fprintf(f, "  %zu ACKs (%zu with holes), %zu NACKs, %" PRIu64 " REQs, %" PRIu64 " ABORTs\n", r.acks.size(),
                     holed, r.nacks.size(), r.reqs, r.aborts);
        const char* end = r.final ? "complete (FINAL ACK)" : "FAILED";
        if ((r.final || r.failed) && t.first != UINT64_MAX)
            std::fprintf(f, "  %s at %.9f: %.3f ms after the first data frame\n", end, sec(r.final_ns),
                         static_cast<double>(r.final_ns - t.first) / 1e6);
        else if (r.final || r.failed)
            std::fprintf(f, "  %s at %.9f\n", end, sec(r.final_ns));
        else
            std::fprintf(f, "  not complete in the capture\n");
    }
    bool header = false;
    for (const auto& d : s.data) {
        if (d.rel >= 0) continue;
        if (!header) std::fprintf(f, "\nSDR messages of no reliable message (no decoded CTS leads to them):\n");
        header = true;
        std::fprintf(f, "  %s -> %s ", ip_string(d.src_ip).c_str(), ip_string(d.dst_ip).c_str());
        text_data(d, f, "");
    }
}

void print_json(const Summary& s, FILE* f)
{
    Json causes = Json::object();
    for (const auto& [cause, n] : s.causes) causes[cause] = n;
    Json messages = Json::array();
    for (const ReliableMessage& r : s.reliable) {
        Totals t = totals(s, r);
        Json m{{"src", ip_string(r.src_ip)},
               {"dst", ip_string(r.dst_ip)},
               {"seq", r.seq},
               {"receiver", r.receiver},
               {"code", r.code},
               {"length", r.length},
               {"packets_sent", t.sent},
               {"lost", t.lost},
               {"lost_inferred", t.inferred},
               {"retransmitted", t.retrans},
               {"retransmitted_chunks", t.chunks},
               {"nic_dropped", t.nic},
               {"first_ns", r.first_ns},
               {"last_ns", r.last_ns},
               {"complete", r.final},
               {"failed", r.failed}};
        if (r.final || r.failed) m["final_ns"] = r.final_ns;
        if ((r.final || r.failed) && t.first != UINT64_MAX) m["completion_ns"] = r.final_ns - t.first;
        Json data = Json::array(), acks = Json::array(), nacks = Json::array();
        for (size_t i : r.data) data.push_back(json_data(s.data[i]));
        for (const AckRecord& a : r.acks)
            acks.push_back(Json{{"t_ns", a.t_ns}, {"base", a.base}, {"nbits", a.nbits}, {"held", a.held}, {"holes", a.holes},
                                {"final", a.final}, {"failed", a.failed}, {"lost", a.lost}});
        for (const auto& n : r.nacks) nacks.push_back(Json{{"t_ns", n.t_ns}, {"chunks", n.chunks}, {"lost", n.lost}});
        m["sdr_messages"] = std::move(data);
        m["acks"] = std::move(acks);
        m["nacks"] = std::move(nacks);
        m["reqs"] = r.reqs;
        m["aborts"] = r.aborts;
        messages.push_back(std::move(m));
    }
    Json undecoded = Json::array();
    for (const auto& u : s.undecoded)
        undecoded.push_back(Json{{"frame", u.frame},
                                 {"t_ns", u.t_ns},
                                 {"src", ip_string(u.src_ip)},
                                 {"dst", ip_string(u.dst_ip)},
                                 {"header", u.header}});
    Json unattributed = Json::array();
    for (const auto& d : s.data)
        if (d.rel < 0)
            unattributed.push_back(Json{{"src", ip_string(d.src_ip)}, {"dst", ip_string(d.dst_ip)}, {"message", json_data(d)}});
    print_json(Json{{"pcapng", s.pcapng},
                    {"frames", s.frames},
                    {"link_dropped", s.link_dropped},
                    {"nic_dropped", s.nic_dropped},
                    {"injected", s.injected},
                    {"causes", std::move(causes)},
                    {"ctrl_undecoded", s.undecoded.size()},
                    {"undecoded", std::move(undecoded)},
                    {"messages", std::move(messages)},
                    {"unattributed", std::move(unattributed)}},
               f);
}

}  // namespace sdr::tools
