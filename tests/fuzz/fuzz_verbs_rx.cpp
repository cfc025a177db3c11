// Fuzz target: the verbs engine's receive side (emu/nic/src/verbs/): the RC requester (ACK, NAK,
// RNR NAK, READ responses, ATOMIC ACKs), the RC responder (SEND, WRITE, READ, COMPARE SWAP, FETCH
// ADD, duplicates), UC, UD and the SRQ, behind the RoCEv2 frame parser, on NIC B of
// verbs_world.hpp (a fresh world per input).
//
// Input: one flags byte, then actions, each one byte `a`:
//   a % 4 == 0 or 1  a frame: a 16-bit little-endian length (mod 4 KiB) and that many bytes, copied
//                    into a buffer of exactly its size and handed to Nic::rx_frame;
//   a % 4 == 2       B sends up to a / 4 + 1 packets (its queued requests, ACKs, READ responses);
//   a % 4 == 3       (a / 4 + 1) ms pass and B's due timers fire (retransmissions, RNR waits).
// Flags repair what random bytes rarely get right: bit 0 the IPv4/UDP lengths (and a WRITE
// ONLY's RETH DMA length), bit 1 the IPv4 checksum, bit 2 the ICRC, bit 3 maps the BTH
// destination QP onto one of B's QPNs, bit 4 the RETH's rkey onto one of B's three keys and its
// VA into the 64 KiB at B's IOVA (guard pages included), bit 5 makes the frame come from A (MAC, IP, and a
// UD frame's Q_Key and source QP), bit 6 puts the PSN near what B expects (an ACK or READ response
// near B's send PSNs, a request near A's).
//
// Invariants after every action:
//  - a frame is counted once: one received frame, and exactly one of a drop (by reason) or a
//    packet a QP took (rx_packets, rx_acks, rx_naks) or a CNP;
//  - nothing is written outside what may change: the remote-writable region, the posted receive
//    buffers and B's READ destination; never the read-only region, B's send sources or a page
//    in no region (those are poisoned: ASan stops any access at all);
//  - a dropped frame changes no byte;
//  - what B sends is read from where it may be: a READ response from a region granting remote
//    read, a request from its send sources.
#include "frame_bytes.hpp"
#include "fuzz_input.hpp"
#include "verbs_world.hpp"

#include <sanitizer/asan_interface.h>

#include <sdr/emu/wire.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

namespace {

using namespace sdr::fuzz;
namespace emu = sdr::emu;
namespace wire = sdr::emu::wire;
using W = VerbsWorld;

constexpr size_t kBytes = W::kPages * W::kPage;

// May byte i of B's region change? The remote-writable pages, the receive buffers, the READ
// destination (page 11's first half).
bool may_change(size_t i)
{
    const size_t page = i / W::kPage;
    return (page >= 1 && page <= 3) || (page >= 8 && page <= 10) || (page == 11 && i % W::kPage < 2048);
}

// The RETH and the AtomicETH both begin with the VA and the R_Key.
bool has_reth(uint8_t op)
{
    switch (op) {
    case wire::kOpRcCmpSwap: case wire::kOpRcFetchAdd:
    case wire::kOpRcWriteFirst: case 0x0A: case 0x0B: case wire::kOpRcReadRequest:
    case wire::kOpUcWriteFirst: case 0x2A: case wire::kOpUcWriteOnlyImm: return true;
    default: return false;
    }
}

struct Target {
    W world;
    W::Side& b = world.b();
    std::vector<uint8_t> shadow;
    const bool trace = std::getenv("SDR_FUZZ_TRACE") != nullptr;

    Target()
    {
        world.queue_requests(b, world.a());
        static const bool poisoned = [this] {
            for (size_t p = 0; p < W::kPages; p++)
                if (W::no_region(p)) ASAN_POISON_MEMORY_REGION(b.mem + p * W::kPage, W::kPage);
            return true;
        }();
        (void)poisoned;
        static std::vector<uint8_t> pristine;  // B's region as every world starts (guard pages: never read)
        if (pristine.empty()) {
            pristine.resize(kBytes);
            for (size_t p = 0; p < W::kPages; p++)
                if (!W::no_region(p)) std::memcpy(pristine.data() + p * W::kPage, b.mem + p * W::kPage, W::kPage);
        }
        shadow = pristine;
    }

    uint64_t accepted() const
    {
        uint64_t n = b.nic->counters().cnp_received;
        for (uint32_t qp : b.qp) {
            const emu::verbs::QpCountersVerbs* c = b.v().qp_counters(qp);
            n += c->rx_packets + c->rx_acks + c->rx_naks;
        }
        return n;
    }

    // Bytes changed since the last scan, each checked against may_change; the shadow follows.
    uint64_t scan()
    {
        uint64_t changed = 0;
        for (size_t p = 0; p < W::kPages; p++) {
            if (W::no_region(p)) continue;
            const size_t at = p * W::kPage;
            if (!std::memcmp(b.mem + at, shadow.data() + at, W::kPage)) continue;
            for (size_t i = at; i < at + W::kPage; i++) {
                if (b.mem[i] == shadow[i]) continue;
                SDR_FUZZ_CHECK(may_change(i), "byte %zu of B's region (page %zu) written", i, p);
                shadow[i] = b.mem[i];
                changed++;
            }
        }
        return changed;
    }

    void deliver(const std::vector<uint8_t>& f)
    {
        const emu::PortCounters& pc = b.nic->counters();
        const uint64_t frames = pc.rx_frames, drops = pc.rx_drops_total(), took = accepted();
        uint64_t drops_by[static_cast<size_t>(emu::RxDrop::Count)];
        std::memcpy(drops_by, pc.rx_drops, sizeof drops_by);
        b.nic->rx_frame(f.data(), f.size());
        SDR_FUZZ_CHECK(pc.rx_frames == frames + 1, "rx_frames moved by %llu", (unsigned long long)(pc.rx_frames - frames));
        const uint64_t d = pc.rx_drops_total() - drops, k = accepted() - took;
        if (trace) {
            const char* why = "taken";
            for (size_t i = 0; d && i < static_cast<size_t>(emu::RxDrop::Count); i++)
                if (pc.rx_drops[i] != drops_by[i]) why = emu::to_string(static_cast<emu::RxDrop>(i));
            std::fprintf(stderr, "frame of %zu bytes (opcode 0x%02x): %s\n", f.size(), f.size() > kBth ? f[kBth] : 0, why);
        }
        SDR_FUZZ_CHECK(d + k == 1, "one frame counted as %llu drops and %llu packets taken", (unsigned long long)d,
                       (unsigned long long)k);
        const uint64_t changed = scan();
        SDR_FUZZ_CHECK(!d || !changed, "a dropped frame changed %llu bytes", (unsigned long long)changed);
    }

    // What B reads to send lies where it may read: a READ response's bytes in a region granting
    // remote read, a request's in B's send sources.
    void pump(size_t n)
    {
        std::vector<emu::TxPacket> sent;
        world.pump(b, n, &sent);
        for (const emu::TxPacket& p : sent) {
            // An atomic request's or ATOMIC ACK's payload pointer carries its operands, not memory.
            if (!p.payload || p.local_error || (p.meta.opcode >= wire::kOpRcAtomicAck && p.meta.opcode <= wire::kOpRcFetchAdd))
                continue;
            const size_t off = static_cast<size_t>(p.payload - b.mem), len = p.meta.dma_len;
            SDR_FUZZ_CHECK(p.payload >= b.mem && off + len <= kBytes, "B sent bytes from outside its region");
            const bool response = p.meta.opcode >= wire::kOpRcReadRespFirst && p.meta.opcode <= 0x10;
            if (response)
                SDR_FUZZ_CHECK((off >= 1 * W::kPage && off + len <= 4 * W::kPage) ||
                                   (off >= 5 * W::kPage && off + len <= 7 * W::kPage),
                               "a READ response read bytes %zu..%zu, outside the remotely readable regions", off,
                               off + len);
            else
                SDR_FUZZ_CHECK(off >= 11 * W::kPage + 2048 && off + len <= 12 * W::kPage,
                               "a request read bytes %zu..%zu, outside its send sources", off, off + len);
        }
        SDR_FUZZ_CHECK(scan() == 0, "sending changed B's memory");
    }

    void repair(uint8_t flags, std::vector<uint8_t>& f)
    {
        const size_t n = f.size();
        if (n < kExt) return;
        const uint8_t op = f[kBth];
        const bool ud = op == wire::kOpUdSendOnly || op == wire::kOpUdSendOnlyImm;
        const W::Side& a = world.a();
        // Values already right (a captured frame's) stay; others map onto B's.
        const uint32_t qpn = get24(&f[kBth + 5]);
        bool known = false;
        for (int q = 0; q < W::kQps; q++) known |= b.qpn(q) == qpn;
        if (flags & 8 && !known)
            put24(&f[kBth + 5], b.qpn(static_cast<int>(qpn % W::kQps)));
        if (flags & 16 && has_reth(op) && n >= kExt + 16) {
            const uint32_t keys[3] = {b.rw, b.ro, b.local}, key = get32(&f[kExt + 8]);
            if (std::find(keys, keys + 3, key) == keys + 3) put32(&f[kExt + 8], keys[key % 3]);
            const uint64_t va = get64(&f[kExt]);
            if (va - W::kIova >= kBytes) put64(&f[kExt], W::kIova + va % kBytes);
        }
        if (flags & 32) {
            std::memcpy(&f[6], a.nic->address().mac.data(), 6);
            put32(&f[kIp + 12], a.nic->address().ip);
            if (ud && n >= kExt + 8) {
                put32(&f[kExt], W::kUdQkey);
                put24(&f[kExt + 5], a.qpn(W::kUd));
            }
        }
        if (flags & 64) {
            const bool to_requester = op >= wire::kOpRcReadRespFirst && op <= wire::kOpRcAtomicAck;
            const uint32_t base = (to_requester ? W::kSqPsnB : W::kSqPsnA) - 8, psn = get24(&f[kBth + 9]);
            if (((psn - base) & 0xFFFFFF) >= 72) put24(&f[kBth + 9], (base + psn % 72) & 0xFFFFFF);
        }
        if (flags & 1) {
            put16(&f[kIp + 2], static_cast<uint32_t>(n - kIp));
            put16(&f[kUdp + 4], static_cast<uint32_t>(n - kUdp));
            const bool write_only = op == 0x0A || op == 0x0B || op == 0x2A || op == 0x2B;
            const size_t hdr = kExt + 16 + ((op & 0x0F) == 0x0B ? 4 : 0);
            const uint32_t pad = (f[kBth + 1] >> 4) & 3;
            if (write_only && n >= hdr + wire::kIcrcBytes + pad)
                put32(&f[kExt + 12], static_cast<uint32_t>(n - hdr - wire::kIcrcBytes - pad));
        }
        if (flags & 2) fix_ipv4_checksum(f.data());
        if (flags & 4) wire::write_icrc(f.data(), n - wire::kIcrcBytes);
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    Reader in(data, size);
    Target t;
    const uint8_t flags = in.u8();
    while (!in.empty()) {
        const uint8_t a = in.u8();
        switch (a % 4) {
        case 0:
        case 1: {
            size_t got = 0;
            const uint8_t* p = in.bytes(in.u16() % 4096, &got);
            std::vector<uint8_t> f(p, p + got);
            t.repair(flags, f);
            t.deliver(f);
            break;
        }
        case 2: t.pump(a / 4 + 1u); break;
        case 3:
            t.world.exec().advance((a / 4 + 1u) * 1'000'000ull);
            SDR_FUZZ_CHECK(t.scan() == 0, "a timer changed B's memory");
            break;
        }
    }
    return 0;
}
