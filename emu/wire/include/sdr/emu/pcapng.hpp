// pcapng (the PCAP Next Generation capture format, IETF draft-ietf-opsawg-pcapng): the block
// and option codes SDR writes and reads, and a small writer. Debian's libpcap reads pcapng but
// cannot write it, and a pcapng file is what carries what the link and the NIC decided about a
// frame: one interface per NIC port and direction (if_name "nic1.rx"), nanosecond stamps
// (if_tsresol 9), and per frame the direction and drop bits of epb_flags and a comment.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace sdr::emu::pcapng {

inline constexpr uint32_t kShb = 0x0A0D0D0A;  // Section Header Block
inline constexpr uint32_t kIdb = 0x00000001;  // Interface Description Block
inline constexpr uint32_t kEpb = 0x00000006;  // Enhanced Packet Block
inline constexpr uint32_t kByteOrderMagic = 0x1A2B3C4D;
inline constexpr uint16_t kOptEnd = 0, kOptComment = 1;
inline constexpr uint16_t kShbUserAppl = 4;
inline constexpr uint16_t kIfName = 2, kIfTsresol = 9;
inline constexpr uint16_t kEpbFlags = 2;
inline constexpr uint16_t kLinkEthernet = 1;

// epb_flags: bits 0-1 the direction, bits 16-31 link-layer-dependent errors. The format has no
// "dropped" bit; a frame the link lost carries bit 24, the CRC error: on Ethernet a frame lost
// on the wire is one whose FCS failed, and tshark shows it as frame.packet_flags_crc_error.
inline constexpr uint32_t kFlagInbound = 0x1, kFlagOutbound = 0x2;
inline constexpr uint32_t kFlagLinkDrop = 1u << 24;

// What the capture says about one frame beyond its bytes.
struct FrameNote {
    uint32_t iface = 0;       // an id from Writer::interface
    uint32_t flags = 0;       // epb_flags (0: the option is left out)
    std::string_view comment; // opt_comment (empty: none)
};

class Writer {
public:
    Writer() = default;
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;
    ~Writer() { close(); }

    // Creates (truncates) path and writes the section header; false + *err if it cannot.
    [[nodiscard]] bool open(const std::string& path, std::string* err);
    // The id of the interface named `name` (Ethernet, nanosecond stamps); its description
    // block is written on first use.
    uint32_t interface(const std::string& name);
    void write(uint64_t ts_ns, const uint8_t* bytes, uint32_t caplen, uint32_t origlen, const FrameNote& note);
    void flush();
    void close();
    bool is_open() const { return f_ != nullptr; }

private:
    void block(uint32_t type, const std::vector<uint8_t>& body);
    FILE* f_ = nullptr;
    std::vector<std::string> names_;
    std::vector<uint8_t> buf_;
};

}  // namespace sdr::emu::pcapng
