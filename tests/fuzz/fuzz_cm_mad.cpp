// Fuzz target: the CM MAD codec (emu/cm, cm_mad.hpp), what the CM agent runs on every datagram
// QP1 receives.
//
// The input is the datagram: decode_mad reads it in place (libFuzzer's buffer is exactly the
// input's size, so AddressSanitizer sees any read past it). Invariants:
//  - fewer than 256 bytes is Short, whatever they hold;
//  - a MAD it accepts re-encodes to 256 bytes that decode to the same header and message, and
//    encoding that again gives the same bytes (decode keeps every field; only reserved bits
//    drop);
//  - the bytes every message defines (the common header but its reserved 16 bits, the
//    message's first word, a comm or request ID) re-encode unchanged;
//  - the RDMA IP CM header read from any 36 bytes re-encodes to bytes that read back the same.
#include "fuzz_input.hpp"

#include <sdr/emu/cm_mad.hpp>

#include <array>
#include <cstring>
#include <variant>

using namespace sdr::emu::cm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    CmMad m;
    const MadVerdict v = decode_mad(data, size, &m);
    if (size < kMadBytes) SDR_FUZZ_CHECK(v == MadVerdict::Short, "%zu bytes decoded as %d", size, static_cast<int>(v));
    if (v == MadVerdict::Ok) {
        std::array<uint8_t, kMadBytes> once{}, twice{};
        encode_mad(m, once.data());
        CmMad again;
        SDR_FUZZ_CHECK(decode_mad(once.data(), once.size(), &again) == MadVerdict::Ok, "re-encoded MAD refused");
        SDR_FUZZ_CHECK(again == m, "re-encoded MAD decodes differently (attribute 0x%04x)", m.hdr.attr_id);
        SDR_FUZZ_CHECK(static_cast<uint16_t>(attr_of(m.msg)) == m.hdr.attr_id, "attribute 0x%04x decoded as another",
                       m.hdr.attr_id);
        encode_mad(again, twice.data());
        SDR_FUZZ_CHECK(once == twice, "encoding is not stable (attribute 0x%04x)", m.hdr.attr_id);
        // Bytes every message defines come back as they were: the common header (its reserved
        // bytes 18..19 aside) and the first word of the message (a comm or request ID).
        SDR_FUZZ_CHECK(std::memcmp(once.data(), data, 18) == 0 && std::memcmp(once.data() + 20, data + 20, 8) == 0,
                       "defined bytes changed");
    }
    if (size >= kIpCmHeaderSize) {
        const IpCmHeader h = decode_ip_cm_header(data);
        uint8_t out[kIpCmHeaderSize];
        encode_ip_cm_header(h, out);
        SDR_FUZZ_CHECK(decode_ip_cm_header(out) == h, "IP CM header re-encodes differently");
        uint32_t ip;
        if (ip_cm_addr_to_v4(h.src_ip, &ip)) SDR_FUZZ_CHECK(ip_cm_addr_v4(ip) == h.src_ip, "IPv4 address round trip");
    }
    return 0;
}
