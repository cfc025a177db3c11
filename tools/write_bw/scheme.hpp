// The bandwidth mode through the reliability layer (--scheme, sdr_rel.h): the receiver keeps
// -q reliable receives posted, the sender -q reliable sends; the layer's own clear-to-send,
// ACKs and repairs (Selective Repeat or Erasure Coding) run on the QP. Reported: messages
// delivered and failed, delivered bytes and goodput, repairs (chunks retransmitted, decoded,
// fallbacks), and with --verify the delivered messages that differ from what was sent. The sender
// adds each message's completion time (post to acknowledgement, sdr_rel_stats), mean and p99;
// both sides their endpoint's path estimate (sdr_rel_path_get) at the end of the run.
#pragma once

#include "role.hpp"

#include <memory>

namespace sdr::write_bw {

std::unique_ptr<Role> rel_sender(const Options& o, Side& s, Peer& peer, const RunParams& rp);
std::unique_ptr<Role> rel_receiver(const Options& o, Side& s, Peer& peer, const RunParams& rp);

}  // namespace sdr::write_bw
