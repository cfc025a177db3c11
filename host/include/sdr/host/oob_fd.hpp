// The out-of-band bootstrap (sdr_oob.h) on a stream socket the caller already holds: the
// handshake runs on it at once, then it is an sdr_oob like any other. Any connected stream
// socket will do (a socketpair feeds the framing from a test or a fuzz target, an inherited
// socket from a launcher). Not part of the C API.
#pragma once

#include <sdr_oob.h>

#include <string>

namespace sdr::host {

// Takes fd over (sdr_oob_close closes it; so does a failure). `peer` names the other end in
// error messages; timeout_ms bounds the handshake and later sends as in sdr_oob_connect.
// nullptr with sdr_last_error() set if the handshake fails.
[[nodiscard]] sdr_oob* oob_adopt(int fd, std::string peer, int timeout_ms);

}  // namespace sdr::host
