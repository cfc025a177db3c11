// The bandwidth mode over raw SDR writes: the receiver posts receives into a ring of slots and
// grants clear-to-send credits as it does; the sender streams sends into them and reports its
// progress; the receiver ends each message when its bitmap is full or nothing more can arrive,
// and sends the result back.
#pragma once

#include "role.hpp"

#include <memory>

namespace sdr::write_bw {

std::unique_ptr<Role> bw_sender(const Options& o, Side& s, Peer& peer, const RunParams& rp);
std::unique_ptr<Role> bw_receiver(const Options& o, Side& s, Peer& peer, const RunParams& rp);

}  // namespace sdr::write_bw
