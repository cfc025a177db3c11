// Fuzz target: the RoCEv2 frame parser and the UC responder of the emulated NIC, with the
// firmware's receive handler behind it, on a NIC with live posted receives (nic_world.hpp).
//
// Input: one flags byte, then frames, each a 16-bit little-endian length and that many bytes.
// Each frame is copied into a buffer of exactly its size (ASan sees any read past it) and
// handed to Nic::rx_frame. Flags repair what random bytes rarely get right, so the fuzzer also
// reaches the checks behind them: bit 0 sets the IPv4 and UDP lengths (and RETH DMA length)
// from the frame size, bit 1 recomputes the IPv4 header checksum, bit 2 the ICRC; bit 3 maps
// the BTH destination QP to one of the NIC's live QPNs (value mod their count), bit 4 the
// RETH rkey to one of its root keys (a control datagram's Q_Key to its QP's), and bit 5 makes
// the frame come from the connected peer: its MAC and IP, the UDP source port of the peer QP
// connected to the destination QP (ids.hpp udp_src_port) and, for a control datagram, the
// peer control QP's QPN in the DETH. Without bit 5 a frame is almost always a WrongPeer drop.
//
// Invariants after every frame:
//  - it is counted once: one received frame, and exactly one of a drop (by reason), a CQE or a
//    control datagram;
//  - no byte of the registered region outside the posted receives changed (guard pages, the
//    tails past max_length, the buffers of completed receives), a frame changed no more bytes
//    than it placed, and a dropped frame or a control datagram changed nothing at all (checked
//    after each frame that raised a CQE or placed bytes, and over the whole input at its end);
//  - no firmware window write was refused, and every chunk bit in the host window belongs to
//    a chunk of its posted receive whose packets are all set in the per-packet bitmap.
// SDR_FUZZ_TRACE=1 prints what became of each frame (replaying one input).
// After each input the world goes back to its start (region bytes, firmware slot state, host
// window, control ring), so every input sees the same NIC.
#include "frame_bytes.hpp"
#include "fuzz_input.hpp"
#include "nic_world.hpp"

#include <sdr/emu/ids.hpp>
#include <sdr/emu/wire.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace {

using sdr::fuzz::Reader;
namespace wire = sdr::emu::wire;

// The first 64-byte block at or after `from` where a and b differ (n, a multiple of 64, if
// none). Plain loads, not memcmp: ASan's and libFuzzer's memcmp interceptors, checking and
// hashing 32 KiB per frame, were most of a run.
__attribute__((no_sanitize("address"))) size_t first_diff_block(const uint8_t* a, const uint8_t* b, size_t from,
                                                                size_t n)
{
    for (size_t i = from; i < n; i += 64) {
        uint64_t x = 0;
        for (size_t k = 0; k < 64; k += 8) {
            uint64_t u, v;
            __builtin_memcpy(&u, a + i + k, 8);
            __builtin_memcpy(&v, b + i + k, 8);
            x |= u ^ v;
        }
        if (x) return i;
    }
    return n;
}

struct Target {
    sdr::fuzz::NicWorld nw;
    sdr::emu::Nic& nic = nw.receiver();
    fw_rx_qp* rx = nic.firmware()->qps[0].rx;
    std::vector<uint8_t> pristine, shadow, fw_mem, window;
    std::vector<uint8_t> guard;  // 1 = a byte no frame may change
    std::vector<uint32_t> qpns, rkeys, peer_qpns;  // peer_qpns[i]: connected to qpns[i]
    sdr::emu::NicAddress peer;
    uint64_t fw_mem_bytes = 0;
    const bool trace = std::getenv("SDR_FUZZ_TRACE") != nullptr;  // say what became of each frame

    Target()
    {
        pristine = nw.region();
        guard.assign(pristine.size(), 1);
        for (const auto& r : nw.posted()) std::fill_n(guard.begin() + r.offset, r.length, 0);
        fw_mem_bytes = fw_rx_qp_mem_bytes(rx->slot_mask + 1, rx->max_packets, rx->log_packets_per_chunk);
        fw_mem.assign(reinterpret_cast<uint8_t*>(rx->slots), reinterpret_cast<uint8_t*>(rx->slots) + fw_mem_bytes);
        auto* win = reinterpret_cast<uint8_t*>(rx->window.host_addr);
        window.assign(win, win + rx->window.nwords * 8);
        // The world connects transport QP h of one NIC to transport QP h of the other, and
        // control QP 0 to control QP 0.
        sdr::emu::Nic& sender = nw.world().nic(0);
        peer = sender.address();
        for (uint32_t h = 0; nic.qp_counters(h); h++) {
            qpns.push_back(nic.qpn(h));
            peer_qpns.push_back(sender.qpn(h));
            uint32_t k = nic.qp_root_key(h);
            if (k && std::find(rkeys.begin(), rkeys.end(), k) == rkeys.end()) rkeys.push_back(k);
        }
        qpns.push_back(nic.ctrl_qpn(0));
        peer_qpns.push_back(sender.ctrl_qpn(0));
        shadow = pristine;
    }

    void restore()
    {
        std::memcpy(nw.region().data(), pristine.data(), pristine.size());
        shadow = pristine;
        std::memcpy(rx->slots, fw_mem.data(), fw_mem_bytes);
        std::memcpy(reinterpret_cast<void*>(rx->window.host_addr), window.data(), window.size());
        uint8_t buf[4096];
        size_t n;
        while (sdr_ctrl_recv(nw.world().qp(1), buf, sizeof buf, &n) == SDR_SUCCESS) {
        }
    }

    uint64_t refused() const
    {
        uint64_t n = 0;
        for (uint32_t i = 0; i < nic.num_workers(); i++) n += nic.worker(i).window_refused;
        return n;
    }

    void check_bitmaps() const
    {
        const auto* words = reinterpret_cast<const uint64_t*>(rx->window.host_addr);
        for (uint32_t s = 0; s <= rx->slot_mask; s++) {
            const fw_slot& slot = rx->slots[s];
            const uint64_t* w = words + uint64_t{s} * rx->slot_window_words;
            uint32_t ppc = 1u << rx->log_packets_per_chunk;
            for (uint32_t c = 0; c < rx->bitmap_words * 64; c++) {
                if (!w[c / 64]) {  // whole empty words at once
                    c |= 63;
                    continue;
                }
                if (!(w[c / 64] >> (c % 64) & 1)) continue;
                SDR_FUZZ_CHECK(slot.tag & FW_SLOT_ARMED, "chunk %u set in idle slot %u", c, s);
                SDR_FUZZ_CHECK(c < slot.nchunks, "chunk %u set in slot %u of %u chunks", c, s, slot.nchunks);
                uint32_t n = c + 1 == slot.nchunks ? slot.last_chunk_packets : ppc;
                for (uint32_t i = 0; i < n; i++) {
                    uint32_t p = c * ppc + i;
                    SDR_FUZZ_CHECK(slot.packet_bitmap[p / 64] >> (p % 64) & 1,
                                   "chunk %u of slot %u complete without packet %u", c, s, p);
                }
            }
        }
    }

    // Bytes of the region changed since the last scan; none may be a guard byte, and none may
    // have changed at all unless `may_change`. The shadow then follows the region.
    uint64_t scan(bool may_change)
    {
        const std::vector<uint8_t>& region = nw.region();
        uint64_t changed = 0;
        for (size_t b = 0; (b = first_diff_block(region.data(), shadow.data(), b, region.size())) < region.size();
             b += 64) {
            for (size_t i = b; i < b + 64; i++) {
                if (region[i] == shadow[i]) continue;
                SDR_FUZZ_CHECK(!guard[i], "byte %zu of the region (page %zu, outside every posted receive) written", i,
                               i / sdr::fuzz::NicWorld::kPage);
                SDR_FUZZ_CHECK(may_change, "a frame that raised no CQE changed byte %zu", i);
                changed++;
            }
        }
        if (changed) std::memcpy(shadow.data(), region.data(), region.size());
        return changed;
    }

    void deliver(const std::vector<uint8_t>& f)
    {
        const auto& pc = nic.counters();
        uint64_t frames = pc.rx_frames, drops = pc.rx_drops_total(), cqes = pc.rx_cqes, ctrl = pc.rx_ctrl;
        uint64_t placed = pc.rx_placed_bytes, refused0 = refused();
        uint64_t drops_by[static_cast<size_t>(sdr::emu::RxDrop::Count)];
        std::memcpy(drops_by, pc.rx_drops, sizeof drops_by);
        nic.rx_frame(f.data(), f.size());
        SDR_FUZZ_CHECK(pc.rx_frames == frames + 1, "rx_frames moved by %llu",
                       (unsigned long long)(pc.rx_frames - frames));
        uint64_t d = pc.rx_drops_total() - drops, q = pc.rx_cqes - cqes, k = pc.rx_ctrl - ctrl;
        if (trace) {
            const char* why = q ? "CQE" : k ? "control datagram" : "drop";
            for (size_t i = 0; d && i < static_cast<size_t>(sdr::emu::RxDrop::Count); i++)
                if (pc.rx_drops[i] != drops_by[i]) why = sdr::emu::to_string(static_cast<sdr::emu::RxDrop>(i));
            std::fprintf(stderr, "frame of %zu bytes: %s, %llu bytes placed\n", f.size(), why,
                         (unsigned long long)(pc.rx_placed_bytes - placed));
        }
        SDR_FUZZ_CHECK(d + q + k == 1, "one frame counted as %llu drops, %llu CQEs, %llu datagrams",
                       (unsigned long long)d, (unsigned long long)q, (unsigned long long)k);
        SDR_FUZZ_CHECK(refused() == refused0, "the firmware wrote outside its host window");
        // Only the responder's placement writes user memory, and it counts what it places: a
        // frame that raised a CQE or placed bytes is checked at once, every other frame by the
        // scan at the end of the input (nothing may have changed since the last check).
        if (q || pc.rx_placed_bytes != placed) {
            uint64_t changed = scan(q == 1);
            SDR_FUZZ_CHECK(changed <= pc.rx_placed_bytes - placed, "%llu bytes changed, %llu placed",
                           (unsigned long long)changed, (unsigned long long)(pc.rx_placed_bytes - placed));
        }
        check_bitmaps();
    }
};

using namespace sdr::fuzz;  // frame_bytes.hpp

void repair(const Target& t, uint8_t flags, std::vector<uint8_t>& f)
{
    const size_t n = f.size();
    const bool write_imm = n > kBth && f[kBth] == wire::kOpUcWriteOnlyImm;
    const bool datagram = n > kBth && (f[kBth] == wire::kOpUdSendOnly || f[kBth] == wire::kOpUdSendOnlyImm);
    if (flags & 8 && n >= kExt) put24(&f[kBth + 5], t.qpns[get24(&f[kBth + 5]) % t.qpns.size()]);
    if (flags & 16 && write_imm && n >= kExt + 12 && !t.rkeys.empty())
        put32(&f[kExt + 8], t.rkeys[get32(&f[kExt + 8]) % t.rkeys.size()]);
    if (flags & 16 && datagram && n >= kExt + 8) put32(&f[kExt], t.nic.ctrl_qkey(0));
    if (flags & 32 && n >= kExt) {
        std::copy(t.peer.mac.begin(), t.peer.mac.end(), f.begin() + 6);
        put32(&f[kIp + 12], t.peer.ip);
        const auto at = std::find(t.qpns.begin(), t.qpns.end(), get24(&f[kBth + 5]));
        if (at != t.qpns.end()) {
            const uint32_t remote = t.peer_qpns[static_cast<size_t>(at - t.qpns.begin())];
            put16(&f[kUdp], sdr::emu::udp_src_port(*at, remote));
            if (datagram && n >= kExt + 8) put24(&f[kExt + 5], remote);
        }
    }
    if (flags & 1 && n >= kBth) {
        put16(&f[kIp + 2], static_cast<uint32_t>(n - kIp));
        put16(&f[kUdp + 4], static_cast<uint32_t>(n - kUdp));
        if (write_imm && n >= wire::kWriteImmHeaderBytes + wire::kIcrcBytes) {
            uint32_t pad = (f[kBth + 1] >> 4) & 3, body = static_cast<uint32_t>(n - wire::kWriteImmHeaderBytes - 4);
            put32(&f[kExt + 12], body >= pad ? body - pad : 0);
        }
    }
    if (flags & 2 && n >= kUdp) fix_ipv4_checksum(f.data());
    if (flags & 4 && n >= kExt + wire::kIcrcBytes) wire::write_icrc(f.data(), n - wire::kIcrcBytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    static Target* t = new Target;  // built once; restore() returns it to its start per input
    Reader in(data, size);
    uint8_t flags = in.u8();
    while (!in.empty()) {
        size_t want = in.u16() % 8192, got = 0;
        const uint8_t* b = in.bytes(want, &got);
        std::vector<uint8_t> f(b, b + got);
        repair(*t, flags, f);
        t->deliver(f);
    }
    t->scan(false);
    t->restore();
    return 0;
}
