// Which reliable message each SDR message of a capture carries (sdr-pcap summary).
//
// A sender opens the SDR messages of one connection's reliable messages in seq order: one per
// message, two for EC (data, then parity), as many as its CTS posted. Consecutive seqs thus
// take consecutive message ids, however many are in flight. A connection's first seq with a
// CTS takes the first SDR message from its sender to its receiver that started after that CTS
// and is not another connection's; each following seq the ids after it, each in the first SDR
// message with that id that started after the seq's own CTS (a later one: the id wrapped).
// A seq whose CTS is missing or undecodable ends the chain: how many ids it took is unknown, so
// the SDR messages from there on stay unattributed rather than being given to the wrong seq.
// Connections between the same two hosts are told apart by time: one at a time per direction.
#pragma once

#include "pcap_summary.hpp"

namespace sdr::tools {

// Fills ReliableMessage::data (and its first and last frame times) and DataMessage::rel.
void attribute(const SummaryOptions& o, Summary* s);

}  // namespace sdr::tools
