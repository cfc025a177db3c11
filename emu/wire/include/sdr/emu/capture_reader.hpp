// Reads a capture the tap wrote, classic pcap (through libpcap) or pcapng (its blocks, which
// libpcap reads but without the interface names, flags and comments that carry the link's and
// the NIC's decisions), into records: what sdr-pcap and the capture tests look at.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sdr::emu {

struct CaptureRecord {
    uint64_t ts_ns = 0;
    uint32_t origlen = 0;
    std::vector<uint8_t> bytes;  // the captured bytes (caplen of them)
    std::string iface;           // pcapng if_name ("" in a classic pcap)
    uint32_t flags = 0;          // pcapng epb_flags (0 if absent)
    std::string comment;         // pcapng opt_comment, several joined by "; "
};

// Every record of path, in file order; false + *err (the file and what is wrong) if it cannot
// be read, is neither pcap nor pcapng, or is not Ethernet.
[[nodiscard]] bool read_capture(const std::string& path, std::vector<CaptureRecord>* out, std::string* err);

}  // namespace sdr::emu
