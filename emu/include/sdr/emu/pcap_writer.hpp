// The pcap tap: records frames that crossed an emulated link, stamped with (virtual) time, in a
// nanosecond-resolution pcap file that Wireshark/tshark read. One writer per file, used from one
// thread (the simulator's, or the tap's); not synchronised.
#pragma once

#include <cstdint>
#include <string>

typedef struct pcap pcap_t;
typedef struct pcap_dumper pcap_dumper_t;

namespace sdr::emu {

class PcapWriter {
public:
    PcapWriter() = default;
    PcapWriter(const PcapWriter&) = delete;
    PcapWriter& operator=(const PcapWriter&) = delete;
    PcapWriter(PcapWriter&& o) noexcept;
    PcapWriter& operator=(PcapWriter&& o) noexcept;
    ~PcapWriter();

    // Creates (truncates) path. On failure returns false and, if err is not null, says why.
    // Opening an open writer closes the old file first.
    bool open(const std::string& path, std::string* err);
    // ts_ps: picoseconds of (virtual) time, recorded with nanosecond resolution.
    // caplen bytes of bytes are stored; origlen is the frame's length on the wire (caplen <
    // origlen records a truncated capture, e.g. headers only). No-op if not open.
    void write(uint64_t ts_ps, const uint8_t* bytes, uint32_t caplen, uint32_t origlen);
    // Hands what was written to the file, so a reader (tshark on a live run, a test) sees every
    // whole record so far.
    void flush();
    // Flushes and closes; safe to call twice.
    void close();
    bool is_open() const { return dumper_ != nullptr; }

    static constexpr uint32_t kSnapLen = 65535;

private:
    pcap_t* dead_ = nullptr;          // a pcap_t with no device: only carries link type + precision
    pcap_dumper_t* dumper_ = nullptr;
};

}  // namespace sdr::emu
