// The QP-info blob exchanged out of band: fixed layout, little-endian, versioned, so two
// hosts (or two builds) agree on it byte for byte.
#include "internal.hpp"

#include <cstring>

namespace {

constexpr uint32_t kMagic = 0x31524453;  // "SDR1"
// 2: control QP number and Q_Key; 3: rows for FW_MAX_GENERATIONS generations (G of them
// used), the sender's packet-lifetime bound; 4: the transport (RC or UC).
constexpr uint32_t kVersion = 4;

void put8(uint8_t*& p, uint32_t v) { *p++ = static_cast<uint8_t>(v); }
void put32(uint8_t*& p, uint32_t v)
{
    for (int i = 0; i < 4; i++) *p++ = static_cast<uint8_t>(v >> (8 * i));
}
void put64(uint8_t*& p, uint64_t v)
{
    put32(p, static_cast<uint32_t>(v));
    put32(p, static_cast<uint32_t>(v >> 32));
}
uint32_t get8(const uint8_t*& p) { return *p++; }
uint32_t get32(const uint8_t*& p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= uint32_t{*p++} << (8 * i);
    return v;
}
uint64_t get64(const uint8_t*& p)
{
    uint64_t lo = get32(p);
    return lo | uint64_t{get32(p)} << 32;
}

}  // namespace

size_t qp_info_size() { return 4 + 4 + 8 + 3 + 6 + 4 + 4 * FW_MAX_GENERATIONS * (1 + FW_MAX_CHANNELS) + 8 + 8; }

void qp_info_write(const QpInfo& in, uint8_t* out)
{
    uint8_t* p = out;
    put32(p, kMagic);
    put32(p, kVersion);
    for (uint32_t v : {in.mtu_log, in.chunk_log, in.slot_log, in.log_slots, in.generations, in.channels, in.recv_enable,
                       static_cast<uint8_t>(in.rc | in.spray << 1)})
        put8(p, v);
    put8(p, in.imm.msg_bits);
    put8(p, in.imm.offset_bits);
    put8(p, in.imm.frag_bits);
    std::memcpy(p, in.addr.mac.data(), 6);
    p += 6;
    put32(p, in.addr.ip);
    for (uint32_t g = 0; g < FW_MAX_GENERATIONS; g++) {
        put32(p, in.rkey[g]);
        for (uint32_t c = 0; c < FW_MAX_CHANNELS; c++) put32(p, in.qpn[g][c]);
    }
    put32(p, in.ctrl_qpn);
    put32(p, in.ctrl_qkey);
    put64(p, in.path_lifetime_ns);
}

bool qp_info_read(const uint8_t* in, QpInfo* out, std::string* err)
{
    const uint8_t* p = in;
    if (get32(p) != kMagic) {
        *err = "remote QP info is not an SDR QP-info blob (bad magic)";
        return false;
    }
    if (uint32_t v = get32(p); v != kVersion) {
        *err = "remote QP info has version " + std::to_string(v) + ", this library speaks " + std::to_string(kVersion);
        return false;
    }
    QpInfo r;
    r.mtu_log = static_cast<uint8_t>(get8(p));
    r.chunk_log = static_cast<uint8_t>(get8(p));
    r.slot_log = static_cast<uint8_t>(get8(p));
    r.log_slots = static_cast<uint8_t>(get8(p));
    r.generations = static_cast<uint8_t>(get8(p));
    r.channels = static_cast<uint8_t>(get8(p));
    r.recv_enable = static_cast<uint8_t>(get8(p));
    const uint32_t transport = get8(p);  // bit 0: RC, bit 1: spraying; above: not ours
    r.rc = static_cast<uint8_t>(transport & 1);
    r.spray = static_cast<uint8_t>(transport >> 1);
    r.imm.msg_bits = static_cast<uint8_t>(get8(p));
    r.imm.offset_bits = static_cast<uint8_t>(get8(p));
    r.imm.frag_bits = static_cast<uint8_t>(get8(p));
    std::memcpy(r.addr.mac.data(), p, 6);
    p += 6;
    r.addr.ip = get32(p);
    for (uint32_t g = 0; g < FW_MAX_GENERATIONS; g++) {
        r.rkey[g] = get32(p);
        for (uint32_t c = 0; c < FW_MAX_CHANNELS; c++) r.qpn[g][c] = get32(p);
    }
    r.ctrl_qpn = get32(p);
    r.ctrl_qkey = get32(p);
    r.path_lifetime_ns = get64(p);
    // The geometry must be one sdr_qp_create could have made (its check_attr): the sender
    // shifts by slot_log and numbers packets and messages in the immediate's fields.
    if (r.generations == 0 || r.spray > 1 || r.generations > FW_MAX_GENERATIONS || r.path_lifetime_ns > SDR_MAX_LIFETIME_NS ||
        r.channels == 0 || r.channels > FW_MAX_CHANNELS ||
        !fw_imm_layout_valid(r.imm) || r.mtu_log < 6 || r.mtu_log > 12 || r.chunk_log < r.mtu_log ||
        r.chunk_log > 30 || r.slot_log < r.chunk_log || r.slot_log > 32 ||
        r.slot_log - r.mtu_log > r.imm.offset_bits || r.log_slots > r.imm.msg_bits || r.slot_log + r.log_slots > 40) {
        *err = "remote QP info is inconsistent (corrupt blob?)";
        return false;
    }
    *out = r;
    return true;
}
