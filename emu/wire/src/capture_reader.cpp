// Capture reader: pcapng parsed block by block (either byte order, any if_tsresol), classic
// pcap through libpcap at nanosecond precision.
#include <sdr/emu/capture_reader.hpp>
#include <sdr/emu/pcapng.hpp>

#include <pcap/pcap.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

namespace sdr::emu {
namespace {

struct Iface {
    std::string name;
    uint64_t units_per_s = 1'000'000;  // if_tsresol default: microseconds
    uint16_t linktype = 0;
};

class Blocks {
public:
    Blocks(const std::vector<uint8_t>& d, bool swap) : d_(d), swap_(swap) {}
    uint16_t u16(size_t at) const
    {
        uint16_t v;
        std::memcpy(&v, &d_[at], 2);
        return swap_ ? __builtin_bswap16(v) : v;
    }
    uint32_t u32(size_t at) const
    {
        uint32_t v;
        std::memcpy(&v, &d_[at], 4);
        return swap_ ? __builtin_bswap32(v) : v;
    }
    // Calls f(code, offset, length) for each option in [at, end); false if one overruns.
    template <class F> bool options(size_t at, size_t end, F&& f) const
    {
        while (at + 4 <= end) {
            uint16_t code = u16(at), len = u16(at + 2);
            if (code == pcapng::kOptEnd) return true;
            if (at + 4 + len > end) return false;
            f(code, at + 4, len);
            at += 4 + ((len + 3u) & ~3u);
        }
        return true;
    }

private:
    const std::vector<uint8_t>& d_;
    bool swap_;
};

bool read_pcapng(const std::string& path, const std::vector<uint8_t>& d, std::vector<CaptureRecord>* out,
                 std::string* err)
{
    auto fail = [&](const std::string& why, size_t at) {
        if (err) *err = path + ": " + why + " at byte " + std::to_string(at);
        return false;
    };
    std::vector<Iface> ifaces;
    bool swap = false;
    for (size_t at = 0; at < d.size();) {
        if (at + 12 > d.size()) return fail("truncated block", at);
        uint32_t type;
        std::memcpy(&type, &d[at], 4);
        if (type == pcapng::kShb) {  // its byte-order magic sets the order of the section
            uint32_t bom;
            std::memcpy(&bom, &d[at + 8], 4);
            if (bom == pcapng::kByteOrderMagic) swap = false;
            else if (bom == __builtin_bswap32(pcapng::kByteOrderMagic)) swap = true;
            else return fail("bad byte-order magic", at);
            ifaces.clear();
        } else if (at == 0) {
            return fail("not a pcapng section header", at);
        }
        Blocks b(d, swap);
        type = b.u32(at);
        const uint32_t len = b.u32(at + 4);
        if (len < 12 || len % 4 || at + len > d.size()) return fail("bad block length", at);
        const size_t end = at + len - 4;
        if (type == pcapng::kIdb) {
            if (len < 20) return fail("short interface block", at);
            Iface i;
            i.linktype = b.u16(at + 8);
            bool ok = b.options(at + 16, end, [&](uint16_t code, size_t o, uint16_t n) {
                if (code == pcapng::kIfName) i.name.assign(reinterpret_cast<const char*>(&d[o]), n);
                if (code == pcapng::kIfTsresol && n >= 1) {
                    uint8_t r = d[o];
                    i.units_per_s = r & 0x80 ? uint64_t{1} << (r & 0x7F)
                                             : static_cast<uint64_t>(std::llround(std::pow(10.0, r)));
                }
            });
            if (!ok) return fail("bad interface option", at);
            if (i.linktype != pcapng::kLinkEthernet) return fail("interface is not Ethernet", at);
            ifaces.push_back(std::move(i));
        } else if (type == pcapng::kEpb) {
            if (len < 32) return fail("short packet block", at);
            uint32_t id = b.u32(at + 8);
            if (id >= ifaces.size()) return fail("packet of an undeclared interface", at);
            const Iface& i = ifaces[id];
            uint64_t ts = (uint64_t{b.u32(at + 12)} << 32) | b.u32(at + 16);
            uint32_t caplen = b.u32(at + 20);
            CaptureRecord r;
            r.origlen = b.u32(at + 24);
            size_t data = at + 28;
            if (data + caplen > end) return fail("packet overruns its block", at);
            r.bytes.assign(d.begin() + static_cast<long>(data), d.begin() + static_cast<long>(data + caplen));
            r.ts_ns = i.units_per_s == 1'000'000'000 ? ts
                                                     : static_cast<uint64_t>(static_cast<long double>(ts) * 1e9L /
                                                                             static_cast<long double>(i.units_per_s));
            r.iface = i.name;
            bool ok = b.options(data + ((caplen + 3u) & ~3u), end, [&](uint16_t code, size_t o, uint16_t n) {
                if (code == pcapng::kEpbFlags && n == 4) r.flags = b.u32(o);
                if (code == pcapng::kOptComment) {
                    if (!r.comment.empty()) r.comment += "; ";
                    r.comment.append(reinterpret_cast<const char*>(&d[o]), n);
                }
            });
            if (!ok) return fail("bad packet option", at);
            out->push_back(std::move(r));
        }
        at += len;
    }
    return true;
}

bool read_pcap(const std::string& path, std::vector<CaptureRecord>* out, std::string* err)
{
    char e[PCAP_ERRBUF_SIZE] = "";
    pcap_t* p = pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, e);
    if (!p) {
        if (err) *err = path + ": " + e;
        return false;
    }
    if (pcap_datalink(p) != DLT_EN10MB) {
        pcap_close(p);
        if (err) *err = path + ": not an Ethernet capture";
        return false;
    }
    pcap_pkthdr* h;
    const u_char* bytes;
    int rc;
    while ((rc = pcap_next_ex(p, &h, &bytes)) == 1) {
        CaptureRecord r;
        r.ts_ns = static_cast<uint64_t>(h->ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(h->ts.tv_usec);
        r.origlen = h->len;
        r.bytes.assign(bytes, bytes + h->caplen);
        out->push_back(std::move(r));
    }
    bool ok = rc == PCAP_ERROR_BREAK;
    if (!ok && err) *err = path + ": " + pcap_geterr(p);
    pcap_close(p);
    return ok;
}

}  // namespace

bool read_capture(const std::string& path, std::vector<CaptureRecord>* out, std::string* err)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        if (err) *err = path + ": " + std::strerror(errno);
        return false;
    }
    std::vector<uint8_t> d((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint32_t magic = 0;
    if (d.size() >= 4) std::memcpy(&magic, d.data(), 4);
    if (magic == pcapng::kShb) return read_pcapng(path, d, out, err);
    return read_pcap(path, out, err);
}

}  // namespace sdr::emu
