// The latency mode (--latency): ping-pong of one message each way, as perftest's ib_write_lat.
// Both sides keep a ring of receives and post the next one before they send, so every message
// finds its receive posted without a clear-to-send round: the pinger posts the receive of the
// pong before the ping, the ponger the receive of the next ping before the pong. A message is
// in when its bitmap is full. Reported, in microseconds: half of each round trip (ib_write_lat's
// one-way figure), its minimum, maximum, median (t_typical), mean, standard deviation, 99th and
// 99.9th percentiles. Raw SDR has no repair: a lost message ends the run with an error.
#pragma once

#include "role.hpp"

#include <memory>

namespace sdr::write_bw {

std::unique_ptr<Role> pinger(const Options& o, Side& s, Peer& peer, const RunParams& rp);
std::unique_ptr<Role> ponger(const Options& o, Side& s, Peer& peer, const RunParams& rp);

}  // namespace sdr::write_bw
