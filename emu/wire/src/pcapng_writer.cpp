// The pcapng writer: blocks in host byte order (the section header's byte-order magic tells
// readers which), every block and option padded to 32 bits.
#include <sdr/emu/pcapng.hpp>

#include <cerrno>
#include <cstring>

namespace sdr::emu::pcapng {
namespace {

void put(std::vector<uint8_t>& b, const void* p, size_t n)
{
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
}
template <class T> void put(std::vector<uint8_t>& b, T v) { put(b, &v, sizeof v); }
void pad(std::vector<uint8_t>& b) { b.resize((b.size() + 3) & ~size_t{3}, 0); }
void option(std::vector<uint8_t>& b, uint16_t code, const void* p, size_t n)
{
    put(b, code);
    put(b, static_cast<uint16_t>(n));
    put(b, p, n);
    pad(b);
}
void end_options(std::vector<uint8_t>& b) { put(b, uint32_t{0}); }

}  // namespace

bool Writer::open(const std::string& path, std::string* err)
{
    close();
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) {
        if (err) *err = "pcapng: " + path + ": " + std::strerror(errno);
        return false;
    }
    std::vector<uint8_t> b;
    put(b, kByteOrderMagic);
    put(b, uint16_t{1});  // version 1.0
    put(b, uint16_t{0});
    put(b, int64_t{-1});  // section length not given
    const char app[] = "SDR (software-defined reliability) emulator";
    option(b, kShbUserAppl, app, sizeof app - 1);
    end_options(b);
    block(kShb, b);
    return true;
}

uint32_t Writer::interface(const std::string& name)
{
    for (uint32_t i = 0; i < names_.size(); i++)
        if (names_[i] == name) return i;
    if (f_) {
        std::vector<uint8_t> b;
        put(b, kLinkEthernet);
        put(b, uint16_t{0});
        put(b, uint32_t{0});  // no snap length limit
        option(b, kIfName, name.data(), name.size());
        const uint8_t tsresol = 9;  // 10^-9 s
        option(b, kIfTsresol, &tsresol, 1);
        end_options(b);
        block(kIdb, b);
    }
    names_.push_back(name);
    return static_cast<uint32_t>(names_.size() - 1);
}

void Writer::write(uint64_t ts_ns, const uint8_t* bytes, uint32_t caplen, uint32_t origlen, const FrameNote& note)
{
    if (!f_) return;
    // A frame must name a declared interface, or readers reject the file.
    const uint32_t iface = note.iface < names_.size() ? note.iface : interface("sdr");
    buf_.clear();
    put(buf_, iface);
    put(buf_, static_cast<uint32_t>(ts_ns >> 32));
    put(buf_, static_cast<uint32_t>(ts_ns));
    put(buf_, caplen);
    put(buf_, origlen);
    put(buf_, bytes, caplen);
    pad(buf_);
    if (!note.comment.empty()) option(buf_, kOptComment, note.comment.data(), note.comment.size());
    if (note.flags) option(buf_, kEpbFlags, &note.flags, sizeof note.flags);
    end_options(buf_);
    block(kEpb, buf_);
}

void Writer::block(uint32_t type, const std::vector<uint8_t>& body)
{
    const uint32_t total = static_cast<uint32_t>(body.size() + 12);
    std::fwrite(&type, 4, 1, f_);
    std::fwrite(&total, 4, 1, f_);
    std::fwrite(body.data(), 1, body.size(), f_);
    std::fwrite(&total, 4, 1, f_);
}

void Writer::flush()
{
    if (f_) std::fflush(f_);
}

void Writer::close()
{
    if (f_) {
        std::fclose(f_);
        f_ = nullptr;
    }
    names_.clear();
}

}  // namespace sdr::emu::pcapng
