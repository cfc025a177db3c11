// Fuzz target: the out-of-band bootstrap's framing (sdr_oob.h, host/src/oob.cpp): everything
// that parses bytes from the peer, the handshake and the length-framed messages.
//
// Input: one byte choosing the receive buffer size, then the bytes the peer sends. They are
// written into one end of a socketpair, which is then shut for writing (the peer is done); the
// other end becomes an sdr_oob (sdr::host::oob_adopt runs the handshake) and sdr_oob_recv is
// called until it fails. With every byte already in the socket and its end marked, a timeout of
// 0 makes each call deterministic. An independent reading of the same bytes is the oracle:
//  - the handshake succeeds exactly when the bytes start with "SDRB" and version 1, and the
//    peer received exactly our own 8-byte handshake;
//  - each message comes out whole, in order, byte for byte; one larger than the buffer fails
//    with SDR_ERROR and stays queued (a larger buffer then gets it); a length above
//    SDR_OOB_MAX_MESSAGE or a message cut short by the closed connection fails with SDR_ERROR
//    and a message; nothing is returned past the bytes that were sent.
#include "fuzz_input.hpp"

#include <sdr.h>
#include <sdr/host/oob_fd.hpp>
#include <sdr_oob.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace {

uint32_t le32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }

// sdr_last_error() outlives successes (as errno), so a failure that set no message would show an
// older one: a known message goes in before each call, and a failure must have replaced it.
constexpr const char* kBefore = "sdr_oob_send: connection is NULL";
void mark_before() { (void)sdr_oob_send(nullptr, nullptr, 0); }
bool replaced() { return *sdr_last_error() && std::strcmp(sdr_last_error(), kBefore) != 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    static std::vector<uint8_t> big(SDR_OOB_MAX_MESSAGE), small(4096);
    static const size_t caps[8] = {0, 1, 3, 8, 100, 4096, 4096, 4096};
    if (size == 0) return 0;
    const size_t cap = caps[data[0] % 8];
    data++;
    size--;

    int sv[2];
    SDR_FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
    size_t sent = 0;  // what fits the socket buffer is what the peer sent
    while (sent < size) {
        ssize_t n = send(sv[1], data + sent, size - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
    }
    shutdown(sv[1], SHUT_WR);

    mark_before();
    sdr_oob* o = sdr::host::oob_adopt(sv[0], "fuzz peer", 0);
    uint8_t hello[16];
    ssize_t got = recv(sv[1], hello, sizeof hello, MSG_DONTWAIT);
    SDR_FUZZ_CHECK(got == 8 && std::memcmp(hello, "SDRB\1\0\0\0", 8) == 0, "our handshake: %zd bytes", got);
    const bool good = sent >= 8 && std::memcmp(data, "SDRB", 4) == 0 && le32(data + 4) == 1;
    SDR_FUZZ_CHECK((o != nullptr) == good, "handshake %s for bytes the model %s: %s", o ? "accepted" : "refused",
                   good ? "accepts" : "refuses", o ? "" : sdr_last_error());
    if (!o) {
        SDR_FUZZ_CHECK(replaced(), "a refused handshake without a message");
        close(sv[1]);
        return 0;
    }
    size_t pos = 8;
    for (;;) {
        size_t len = 0;
        mark_before();
        int rc = sdr_oob_recv(o, small.data(), cap, &len, 0);
        const bool whole_length = sent - pos >= 4;
        const uint32_t want = whole_length ? le32(data + pos) : 0;
        const bool whole = whole_length && want <= SDR_OOB_MAX_MESSAGE && sent - pos - 4 >= want;
        if (rc == SDR_SUCCESS) {
            SDR_FUZZ_CHECK(whole && len == want && want <= cap, "got %zu bytes at %zu, model: %u", len, pos, want);
            SDR_FUZZ_CHECK(std::memcmp(small.data(), data + pos + 4, len) == 0, "message at %zu differs", pos);
            pos += 4 + len;
            continue;
        }
        SDR_FUZZ_CHECK(rc == SDR_ERROR, "sdr_oob_recv returned %d", rc);
        SDR_FUZZ_CHECK(replaced(), "SDR_ERROR without a message");
        if (!whole) break;  // cut short, or an impossible length: the connection is done
        SDR_FUZZ_CHECK(want > cap, "a whole message of %u bytes refused with a %zu-byte buffer: %s", want, cap,
                       sdr_last_error());
        rc = sdr_oob_recv(o, big.data(), big.size(), &len, 0);  // kept: a larger buffer gets it
        SDR_FUZZ_CHECK(rc == SDR_SUCCESS && len == want, "the kept message of %u bytes: %d, %zu", want, rc, len);
        SDR_FUZZ_CHECK(std::memcmp(big.data(), data + pos + 4, len) == 0, "kept message at %zu differs", pos);
        pos += 4 + len;
    }
    SDR_FUZZ_CHECK(pos <= sent, "read past the bytes sent");
    sdr_oob_close(o);
    close(sv[1]);
    return 0;
}
