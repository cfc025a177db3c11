// pcap tap: classic pcap on top of libpcap's savefile writer, pcapng with our own writer.
#include <sdr/emu/pcap_writer.hpp>

#include <pcap/pcap.h>

#include <algorithm>
#include <utility>

namespace sdr::emu {

PcapWriter::PcapWriter(PcapWriter&& o) noexcept
    : dead_(std::exchange(o.dead_, nullptr)), dumper_(std::exchange(o.dumper_, nullptr)), ng_(std::move(o.ng_))
{
}

PcapWriter& PcapWriter::operator=(PcapWriter&& o) noexcept
{
    if (this != &o) {
        close();
        dead_ = std::exchange(o.dead_, nullptr);
        dumper_ = std::exchange(o.dumper_, nullptr);
        ng_ = std::move(o.ng_);
    }
    return *this;
}

PcapWriter::~PcapWriter() { close(); }

PcapWriter::Format PcapWriter::format_of(const std::string& path)
{
    const std::string ext = ".pcapng";
    return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0 ? Format::Pcapng
                                                                                                      : Format::Pcap;
}

bool PcapWriter::open(const std::string& path, Format format, std::string* err)
{
    close();
    if (format == Format::Pcapng) {
        auto w = std::make_unique<pcapng::Writer>();
        if (!w->open(path, err)) return false;
        ng_ = std::move(w);
        return true;
    }
    // Nanosecond precision (the file's magic is 0xa1b23c4d): simulated packets of a 400 Gbit/s
    // link are ~80 ns apart, which microsecond stamps would collapse.
    dead_ = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, kSnapLen, PCAP_TSTAMP_PRECISION_NANO);
    if (!dead_) {
        if (err) *err = "pcap_open_dead failed";
        return false;
    }
    dumper_ = pcap_dump_open(dead_, path.c_str());
    if (!dumper_) {
        if (err) *err = std::string("pcap: ") + path + ": " + pcap_geterr(dead_);
        pcap_close(dead_);
        dead_ = nullptr;
        return false;
    }
    return true;
}

void PcapWriter::write_ns(uint64_t ns, const uint8_t* bytes, uint32_t caplen, uint32_t origlen,
                          const pcapng::FrameNote& note)
{
    if (ng_) {
        ng_->write(ns, bytes, std::min(caplen, origlen), origlen, note);
        return;
    }
    if (!dumper_) return;
    pcap_pkthdr hdr{};
    hdr.ts.tv_sec = static_cast<time_t>(ns / 1000000000u);
    // With a nanosecond pcap_t, libpcap stores this field as nanoseconds despite its name.
    hdr.ts.tv_usec = static_cast<suseconds_t>(ns % 1000000000u);
    // A record longer than the snap length, or than the frame itself, makes readers reject the file.
    hdr.caplen = std::min({caplen, origlen, kSnapLen});
    hdr.len = origlen;
    pcap_dump(reinterpret_cast<u_char*>(dumper_), &hdr, bytes);
}

void PcapWriter::flush()
{
    if (ng_) ng_->flush();
    if (dumper_) pcap_dump_flush(dumper_);
}

void PcapWriter::close()
{
    ng_.reset();  // closes
    if (dumper_) {
        pcap_dump_close(dumper_);  // flushes
        dumper_ = nullptr;
    }
    if (dead_) {
        pcap_close(dead_);
        dead_ = nullptr;
    }
}

}  // namespace sdr::emu
