// The pcap tap: records frames that crossed an emulated link, stamped with virtual time (the
// simulator) or the wall clock (real time), in a nanosecond-resolution capture file that
// Wireshark/tshark read: classic pcap (libpcap's writer), or pcapng (pcapng.hpp) when the path
// ends in ".pcapng". Only pcapng carries what the link and the NIC decided (interfaces,
// directions, drop flags, comments); a classic pcap gets the bytes of the frames that arrived.
// One writer per file, used from one thread (the simulator's, or the tap's); not synchronised.
#pragma once

#include <sdr/emu/pcapng.hpp>

#include <cstdint>
#include <memory>
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

    enum class Format { Pcap, Pcapng };
    // Pcapng for a path ending in ".pcapng", classic pcap otherwise.
    static Format format_of(const std::string& path);

    // Creates (truncates) path in the format its name asks for. On failure returns false and,
    // if err is not null, says why. Opening an open writer closes the old file first.
    [[nodiscard]] bool open(const std::string& path, std::string* err) { return open(path, format_of(path), err); }
    [[nodiscard]] bool open(const std::string& path, Format format, std::string* err);
    // The file records decisions (pcapng): callers write dropped frames and notes only then.
    bool pcapng() const { return ng_ != nullptr; }
    // pcapng: the id of the named interface (pcapng::Writer::interface); classic pcap: 0.
    uint32_t interface(const std::string& name) { return ng_ ? ng_->interface(name) : 0; }
    // ts_ps: picoseconds of (virtual) time, recorded with nanosecond resolution.
    // caplen bytes of bytes are stored; origlen is the frame's length on the wire (caplen <
    // origlen records a truncated capture, e.g. headers only). No-op if not open.
    void write(uint64_t ts_ps, const uint8_t* bytes, uint32_t caplen, uint32_t origlen)
    {
        write_ns(ts_ps / 1000, bytes, caplen, origlen, pcapng::FrameNote{});
    }
    // The same with the frame's interface, flags and comment (kept only by pcapng).
    void write(uint64_t ts_ps, const uint8_t* bytes, uint32_t caplen, uint32_t origlen, const pcapng::FrameNote& note)
    {
        write_ns(ts_ps / 1000, bytes, caplen, origlen, note);
    }
    // ts_ns: nanoseconds, e.g. since the epoch (the real-time tap's wall clock, which in
    // picoseconds would overflow 64 bits).
    void write_ns(uint64_t ts_ns, const uint8_t* bytes, uint32_t caplen, uint32_t origlen, const pcapng::FrameNote& note);
    // Hands what was written to the file, so a reader (tshark on a live run, a test) sees every
    // whole record so far.
    void flush();
    // Flushes and closes; safe to call twice.
    void close();
    bool is_open() const { return dumper_ != nullptr || ng_ != nullptr; }

    static constexpr uint32_t kSnapLen = 65535;

private:
    pcap_t* dead_ = nullptr;          // a pcap_t with no device: only carries link type + precision
    pcap_dumper_t* dumper_ = nullptr;
    std::unique_ptr<pcapng::Writer> ng_;
};

}  // namespace sdr::emu
