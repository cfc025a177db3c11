// The DPA experiment's measurements (dpa.hpp): a simulated world with the cost model on, the
// real firmware and host library, payload-free.
#include "dpa.hpp"

#include <sdr/emu/wire.hpp>
#include <sdr/host/sim_world.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace sdr::exp {

namespace {

constexpr uint32_t kMtu = 4096;
constexpr uint64_t kSlotBytes = 8ull << 20;  // 2048 packets: the largest message of the sweep
constexpr uint32_t kSlotsLog = 2;            // 4 slots

uint32_t log2_of(uint64_t v)
{
    uint32_t l = 0;
    while ((uint64_t{1} << l) < v) l++;
    return l;
}

// Untouched anonymous pages as message memory: the NICs never read payload here.
class Buffers {
public:
    explicit Buffers(uint64_t bytes) : bytes_(bytes)
    {
        for (void** p : {&src_, &dst_}) {
            *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (*p == MAP_FAILED) throw std::runtime_error("cannot map message memory");
        }
    }
    ~Buffers()
    {
        munmap(src_, bytes_);
        munmap(dst_, bytes_);
    }
    uint64_t src(uint64_t off) const { return reinterpret_cast<uint64_t>(src_) + off; }
    uint64_t dst(uint64_t off) const { return reinterpret_cast<uint64_t>(dst_) + off; }
    void* src_ = nullptr;
    void* dst_ = nullptr;
    uint64_t bytes_;
};

WorldConfig world(const emu::DpaParams& dpa, uint32_t threads, double bw_gbps, uint32_t chunk_log)
{
    WorldConfig w;
    w.channels = FW_MAX_CHANNELS;
    w.fabric.payload = false;
    w.fabric.link.bandwidth_gbps = bw_gbps;
    w.fabric.link.rtt_ms = 0.002;  // a lab's back-to-back link: 2 us
    w.fabric.dpa = dpa;
    w.fabric.dpa.enabled = true;
    w.fabric.dpa.threads = threads;
    w.qp = sdr_qp_attr{chunk_log, log2_of(kSlotBytes) + kSlotsLog, kSlotsLog, SDR_MTU_4096, 1, 1, 0};
    return w;
}

}  // namespace

RateResult run_rate(const emu::DpaParams& dpa, uint32_t threads, uint32_t chunk_packets)
{
    RateResult r;
    constexpr uint32_t kMessages = 1u << kSlotsLog;
    emu::DpaParams p = dpa;
    p.tx_wqe_ns = 0;            // the receiver is measured
    p.cq_depth = 1u << 16;      // the whole burst fits: capacity, not overflow, is measured
    // A wire 32x faster than 400 Gbit/s: it offers packets faster than 128 threads take them.
    SimWorld w(world(p, threads, 12800, log2_of(uint64_t{chunk_packets} * kMtu)));
    Buffers buf(kMessages * kSlotBytes);
    uint32_t lkey_src = w.lkey(0, buf.src_, buf.bytes_), lkey_dst = w.lkey(1, buf.dst_, buf.bytes_);
    sdr_recv_handle* rh[kMessages];
    sdr_send_handle* sh[kMessages];
    for (uint32_t i = 0; i < kMessages; i++) {
        sdr_recv_wr rw{static_cast<uint32_t>(kSlotBytes), lkey_dst, buf.dst(i * kSlotBytes)};
        if (sdr_recv_post(w.qp(1), &rw, &rh[i]) != SDR_SUCCESS) {
            r.error = std::string("sdr_recv_post: ") + sdr_last_error();
            return r;
        }
    }
    for (uint32_t i = 0; i < kMessages; i++) {
        sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(kSlotBytes), lkey_src, buf.src(i * kSlotBytes), 0};
        if (sdr_send_post(w.qp(0), &sw, &sh[i]) != SDR_SUCCESS) {
            r.error = std::string("sdr_send_post: ") + sdr_last_error();
            return r;
        }
    }
    w.run_until_idle();
    const emu::DpaStats& st = w.fabric().dpa()->stats(1);
    r.cqes = st.handled;
    r.overflows = st.overflows;
    r.mpps = st.mpps();
    const uint64_t expect = kMessages * (kSlotBytes / kMtu);
    r.ok = r.cqes == expect && r.overflows == 0;
    if (!r.ok) r.error = "handled " + std::to_string(r.cqes) + " of " + std::to_string(expect) + " CQEs";
    return r;
}

GoodputResult run_goodput(const emu::DpaParams& dpa, uint32_t threads, uint64_t bytes)
{
    GoodputResult r;
    constexpr uint32_t kInFlight = 2;
    constexpr uint32_t kChunkLog = 16;  // 64 KiB chunks
    constexpr double kBwGbps = 400;
    const uint64_t half_rtt_ns = 1000;
    if (bytes == 0 || bytes > kSlotBytes) {
        r.error = "message size outside 1.." + std::to_string(kSlotBytes);
        return r;
    }
    const uint32_t n = static_cast<uint32_t>(std::max<uint64_t>(16, (64ull << 20) / bytes));
    r.messages = n;
    const uint64_t packets = (bytes + kMtu - 1) / kMtu;
    const double frame_ns = double(emu::wire::frame_bytes_write_imm(kMtu) + emu::kWireOverheadBytes) * 8 / kBwGbps;
    r.line_gbps = kBwGbps * kMtu / double(emu::wire::frame_bytes_write_imm(kMtu) + emu::kWireOverheadBytes);

    // RC write: the recurrence (dpa.hpp).
    {
        std::vector<double> ack(n);
        double wire_free = 0, first = -1, last = 0;
        for (uint32_t i = 0; i < n; i++) {
            double ready = (i < kInFlight ? 0 : ack[i - kInFlight]) + dpa.tx_wqe_ns;
            double start = std::max(wire_free, ready);
            if (first < 0) first = start;
            wire_free = start + double(packets) * frame_ns;
            double arrived = wire_free + double(half_rtt_ns);
            ack[i] = arrived + double(half_rtt_ns);
            last = arrived + dpa.handler_ns;  // the one CQE of the message
        }
        r.rc_gbps = double(n) * double(bytes) * 8 / (last - first);
    }

    // SDR: simulated.
    SimWorld w(world(dpa, threads, kBwGbps, kChunkLog));
    Buffers buf(kSlotBytes << kSlotsLog);
    uint32_t lkey_src = w.lkey(0, buf.src_, buf.bytes_), lkey_dst = w.lkey(1, buf.dst_, buf.bytes_);
    const uint64_t chunks = (bytes + (1ull << kChunkLog) - 1) >> kChunkLog;
    // Repost: the message's packet bitmap, its chunk bitmap and immediate word.
    const uint64_t words = (packets + 63) / 64 + (chunks + 63) / 64 + 1;
    const uint64_t repost_ns = static_cast<uint64_t>(dpa.repost_ns(words));
    struct Msg {
        uint64_t post_at = 0, send_at = 0;
        bool posted = false, sent = false, done = false;
        sdr_recv_handle* rh = nullptr;
        sdr_send_handle* sh = nullptr;
    };
    std::vector<Msg> m(n);
    uint64_t rx_host_free = w.now_ns(), first_send = 0, last_done = 0;
    auto schedule = [&](uint32_t i, uint64_t now) {
        m[i].post_at = std::max(now, rx_host_free) + repost_ns;  // the slot is armed after the repost
        rx_host_free = m[i].post_at;
        m[i].send_at = m[i].post_at + half_rtt_ns;  // the clear-to-send reaches the sender
    };
    for (uint32_t i = 0; i < kInFlight && i < n; i++) schedule(i, w.now_ns());
    uint32_t next_done = 0, stalls = 0;
    while (next_done < n) {
        uint64_t next = UINT64_MAX;
        for (uint32_t i = next_done; i < n && i < next_done + kInFlight; i++) {
            if (!m[i].posted && m[i].post_at) next = std::min(next, m[i].post_at);
            else if (m[i].posted && !m[i].sent) next = std::min(next, m[i].send_at);
        }
        const uint64_t before = w.now_ns();
        w.fabric().wait_event(next == UINT64_MAX ? UINT64_MAX : next * emu::kPsPerNs);
        const uint64_t now = w.now_ns();
        bool acted = false;
        for (uint32_t i = next_done; i < n && i < next_done + kInFlight; i++) {
            Msg& x = m[i];
            const uint64_t off = (i & ((1u << kSlotsLog) - 1)) * kSlotBytes;
            if (!x.posted && x.post_at && x.post_at <= now) {
                sdr_recv_wr rw{static_cast<uint32_t>(bytes), lkey_dst, buf.dst(off)};
                if (sdr_recv_post(w.qp(1), &rw, &x.rh) != SDR_SUCCESS) {
                    r.error = std::string("sdr_recv_post: ") + sdr_last_error();
                    return r;
                }
                x.posted = acted = true;
            }
            if (x.posted && !x.sent && x.send_at <= now) {
                sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(bytes), lkey_src, buf.src(off), 0};
                if (sdr_send_post(w.qp(0), &sw, &x.sh) != SDR_SUCCESS) {
                    r.error = std::string("sdr_send_post: ") + sdr_last_error();
                    return r;
                }
                if (i == 0) first_send = now;
                x.sent = acted = true;
            }
        }
        // The oldest message: complete once every chunk bit is in.
        Msg& o = m[next_done];
        if (o.sent) {
            uint8_t* bits = nullptr;
            size_t nb = 0;
            if (sdr_recv_bitmap_get(o.rh, &bits, &nb) != SDR_SUCCESS) {
                r.error = std::string("sdr_recv_bitmap_get: ") + sdr_last_error();
                return r;
            }
            uint64_t have = 0;
            for (size_t b = 0; b < nb; b++) have += static_cast<uint64_t>(__builtin_popcount(bits[b]));
            if (have == chunks) {
                // Injection ended before the last packet arrived: the send is complete.
                int flag = 0;
                sdr_send_status status{};
                if (sdr_send_poll(o.sh, &flag, &status) != SDR_SUCCESS || !flag) {
                    r.error = "message " + std::to_string(next_done) + " received before its send completed";
                    return r;
                }
                sdr_recv_complete(o.rh);
                o.done = acted = true;
                last_done = now;
                if (next_done + kInFlight < n) schedule(next_done + kInFlight, now);
                next_done++;
            }
        }
        stalls = (acted || now != before) ? 0 : stalls + 1;
        if (stalls > 1000) {
            r.error = "stalled at message " + std::to_string(next_done);
            return r;
        }
    }
    r.sdr_gbps = double(n) * double(bytes) * 8 / double(last_done - first_send);
    r.ok = w.fabric().find_nic(1)->counters().rx_drop(emu::RxDrop::CqOverflow) == 0;
    if (!r.ok) r.error = "CQ overflow";
    return r;
}

}  // namespace sdr::exp
