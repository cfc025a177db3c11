// sdr-pcap's model of a capture: the SDR data messages (one per sender, receiver, message id
// and slot generation, which the root key of the RETH names) with every transmission of every
// packet offset, and the reliable messages of the reliability layer (one per receiver
// incarnation and seq) with their CTS, ACKs and NACKs, decoded with the layer's own decoder,
// and the SDR messages each carries (attribute.hpp). What sdr_rel_send_poll reports, seen from
// the wire; the control datagrams the decoder refuses are listed, never guessed at.
#pragma once

#include <sdr/emu/capture_reader.hpp>
#include <sdr/reliability/ctrl_msg.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sdr::tools {

struct SummaryOptions {
    uint32_t msg_bits = 10, offset_bits = 18, frag_bits = 4;  // the immediate split (fw_imm_layout)
    uint32_t chunk_bytes = 65536, mtu_bytes = 4096;            // packets per chunk = chunk / MTU
};

// One SDR message (sdr_send_post) on the wire.
struct DataMessage {
    uint32_t src_ip = 0, dst_ip = 0, rkey = 0, msg_id = 0;  // rkey: the generation's root key
    uint64_t first_ns = 0, last_ns = 0;
    uint64_t packets_sent = 0;           // transmissions captured, dropped ones included
    uint64_t lost = 0;                   // of those, flagged dropped by the link
    uint64_t lost_inferred = 0;          // classic pcap: first copies missing before the capture point
    uint64_t retransmitted = 0;          // transmissions of an offset already sent in this message
    uint64_t retransmitted_chunks = 0;   // per chunk, how often its most repeated packet was repeated
    uint64_t nic_dropped = 0;            // delivered but dropped by the receiving NIC
    std::map<uint32_t, uint32_t> sends;  // packet offset -> transmissions (inferred lost first copy included)
    uint32_t highest = 0;
    uint64_t ordinal = 0;                // which message this was on its connection (id wrap)
    int rel = -1;                        // index into Summary::reliable, -1 if none
};

struct AckRecord {
    uint64_t t_ns = 0;
    bool lost = false, final = false, failed = false;
    uint32_t base = 0, nbits = 0;
    std::string held, holes;  // chunk ranges, "0-42,44"
};

struct NackRecord {
    uint64_t t_ns = 0;
    bool lost = false;
    std::string chunks;
};

// One reliable message (sdr_rel_send / sdr_rel_recv) of one connection.
struct ReliableMessage {
    uint32_t src_ip = 0, dst_ip = 0;  // the data's direction: sender -> receiver
    uint32_t receiver = 0;            // the receiver's incarnation
    uint64_t seq = 0, length = 0;
    std::string code;                 // "sr", "ec-mds:8,2" (from the CTS)
    uint64_t cts_ns = 0;
    bool has_cts = false;
    uint32_t streams = 0;             // SDR messages the CTS posted: 1, or 2 for EC (data, parity)
    std::vector<AckRecord> acks;
    std::vector<NackRecord> nacks;
    uint64_t reqs = 0, aborts = 0;
    bool final = false, failed = false;
    uint64_t final_ns = 0;                 // the first FINAL (or FAILED) ACK that arrived
    std::vector<size_t> data;              // indices into Summary::data
    uint64_t first_ns = 0, last_ns = 0;    // its frames, data and control
};

// A datagram to a control QP that the reliability layer's decoder refuses (an unknown scheme id
// or version, a cut or malformed datagram): its message is unknown, so it joins none.
struct UndecodedCtrl {
    uint64_t frame = 0;  // 1-based, as tshark's frame.number
    uint64_t t_ns = 0;
    uint32_t src_ip = 0, dst_ip = 0;
    std::string header;  // what its header says ("version 1, type 1, scheme 200, seq 3"), or why none
};

struct Summary {
    bool pcapng = false;   // the file records the link's decisions
    uint64_t frames = 0, link_dropped = 0, nic_dropped = 0, injected = 0, other = 0;
    std::vector<UndecodedCtrl> undecoded;
    std::map<std::string, uint64_t> causes;  // comment -> frames ("link drop: loss (i.i.d.)", "nic drop: wrong_peer")
    std::vector<DataMessage> data;
    std::vector<ReliableMessage> reliable;
};

// Builds the summary of path; false + *err if the file cannot be read.
bool summarize(const std::string& path, const SummaryOptions& o, Summary* out, std::string* err);

std::string ip_string(uint32_t ip);
void print_text(const Summary& s, FILE* f);
void print_json(const Summary& s, FILE* f);

}  // namespace sdr::tools
