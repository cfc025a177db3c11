// Fuzz target: the firmware's CQE, doorbell and timer handlers under any event stream.
//
// The firmware is compiled into this program against a HAL of its own (below), which is also
// the oracle: it checks every window write and every posted WQE as it happens. The device is
// laid out as the host library lays it out (host/src/qp.cpp, recv.cpp, send.cpp): QP 0 sends and
// receives, QP 1 only receives, with a geometry and immediate layout taken from the input. The
// input is then a program of events: receive CQEs (well-formed for a slot, or any 16 bytes),
// send CQEs, doorbells and timers for any QP, host receives posted and completed, host sends
// posted, WQEs leaving the send queues, time passing.
//
// Invariants:
//  - every window write lies inside its window (the HAL would refuse it; here it is a bug);
//  - a chunk bit is written once per arm, one bit per write, only for a chunk of the posted
//    receive all of whose packets arrived (a shadow bitmap kept from the CQEs delivered);
//    at the end, every chunk whose packets all arrived has its bit (and no other bit is set);
//  - the immediate word is written once, when every fragment is in, with the fragments of
//    the first packets that carried them;
//  - every WQE belongs to the request being posted: its generation's channel QP and root key,
//    its message id, a packet offset and remote address inside its slot, local bytes inside
//    the request, the right immediate fragment; each request is posted whole;
//  - done_cursor only grows, never passes the host's head, and (unless the stream contained
//    invented send CQEs) retires a request only after all its WQEs left; after the input, with
//    the send queues drained and the timers run, every request is retired.
#include "fuzz_input.hpp"

#include <sdr/firmware/fw.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

// The HAL's opaque worker, as this harness defines it.
struct hal_worker {
    uint32_t index = 0;
    uint64_t counters[HAL_MAX_COUNTERS] = {};
};

namespace {

using sdr::fuzz::Reader;

constexpr uint32_t kRingSize = 4096;  // the host library's send ring (kSendRingSize)
constexpr uint32_t kSqDepth = 16;     // per transport QP: small, so the firmware meets a full queue
constexpr uint32_t kRxQps = 2;

struct SlotModel {  // what the host posted in a slot and which packets the CQEs delivered
    bool armed = false;
    uint32_t gen = 0, msg_id = 0, npackets = 0, nchunks = 0, last_chunk_packets = 0;
    std::vector<uint8_t> pkt;
    uint32_t frag_mask = 0, imm = 0;
    bool imm_written = false;
    void reset(uint32_t packets)  // keeps pkt's memory: allocations were a large part of a run
    {
        armed = imm_written = false;
        gen = msg_id = nchunks = last_chunk_packets = frag_mask = imm = 0;
        npackets = packets;
        pkt.assign(packets, 0);
    }
};

struct RxQp {
    fw_rx_qp rx{};
    std::vector<uint64_t> mem, window;
    std::vector<SlotModel> slots;
    uint64_t posted = 0;
};

struct Wqe {
    hal_tx_wqe w;
    bool error;
};

struct World {
    // geometry (both ends alike)
    uint32_t mtu_log = 12, chunk_log = 12, slot_log = 12, log_slots = 0, channels = 1, gens = 2;
    fw_imm_layout imm{10, 18, 4};
    uint64_t now_ns = 0;
    std::vector<hal_worker> workers;
    fw_device dev{};
    RxQp rxq[kRxQps];
    fw_tx_qp tx{};
    std::vector<fw_send_wr> ring = std::vector<fw_send_wr>(kRingSize);
    uint64_t tx_window[2] = {};  // [0] done cursor, [1] FW_TX_FAILED | first failed request
    // the NIC: transport QP handles h = (qp * gens + g) * channels + c, send queues in post order
    std::vector<Wqe> sq;  // queued WQEs from sq_head on (a vector: a deque allocated per 9 WQEs)
    size_t sq_head = 0;
    std::vector<uint32_t> sq_used;
    std::vector<uint8_t> blocked;
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> timers;  // (worker, id) -> deadline
    // the host's send side and what the firmware posted per ring entry
    uint64_t sends_posted = 0;
    uint32_t wr_head = 0, checked_post = 0, last_done = 0;
    std::vector<uint8_t> send_active;
    std::vector<uint32_t> send_last_wr;
    std::vector<uint64_t> wr_bytes = std::vector<uint64_t>(kRingSize);
    std::vector<uint32_t> wr_wqes = std::vector<uint32_t>(kRingSize), wr_queued = std::vector<uint32_t>(kRingSize);
    bool invented_send_cqe = false;

    // Back to the state of a new World. The host writes ring entries from 0 on, and the
    // firmware changes (and WQEs count against) only entries the host wrote, so zeroing those
    // restores the ring.
    void reset()
    {
        const uint32_t used = std::min(wr_head, kRingSize);
        std::fill_n(ring.begin(), used, fw_send_wr{});
        std::fill_n(wr_bytes.begin(), used, 0);
        std::fill_n(wr_wqes.begin(), used, 0);
        std::fill_n(wr_queued.begin(), used, 0);
        mtu_log = chunk_log = slot_log = 12;
        log_slots = 0;
        channels = 1;
        gens = 2;
        imm = fw_imm_layout{10, 18, 4};
        now_ns = 0;
        workers.clear();
        dev = fw_device{};
        for (RxQp& q : rxq) {
            q.rx = fw_rx_qp{};
            for (SlotModel& m : q.slots) m.reset(0);
            q.posted = 0;
        }
        tx = fw_tx_qp{};
        tx_window[0] = tx_window[1] = 0;
        sq.clear();
        sq_head = 0;
        timers.clear();
        sends_posted = 0;
        wr_head = checked_post = last_done = 0;
        invented_send_cqe = false;
    }

    uint32_t mtu() const { return 1u << mtu_log; }
    uint64_t slot_bytes() const { return 1ull << slot_log; }
    uint32_t nslots() const { return 1u << log_slots; }
    uint32_t max_packets() const { return 1u << (slot_log - mtu_log); }
    uint32_t log_ppc() const { return chunk_log - mtu_log; }
    uint32_t handle(uint32_t qp, uint32_t g, uint32_t c) const { return (qp * gens + g) * channels + c; }
    uint32_t tag_of(uint32_t h) const
    {
        return fw_qp_tag(h / (gens * channels), (h / channels) % gens, h % channels);
    }
};

World* W = nullptr;

RxQp* rx_of_window(const hal_window* win)
{
    for (RxQp& q : W->rxq)
        if (win->host_addr == reinterpret_cast<uint64_t>(q.window.data())) return &q;
    return nullptr;
}

uint32_t popcount(uint32_t v) { return static_cast<uint32_t>(__builtin_popcount(v)); }

uint32_t data_packets(uint32_t length) { return (length + W->mtu() - 1) >> W->mtu_log; }

}  // namespace

// ---- the HAL, and the checks at each call ----------------------------------------------------

extern "C" {

void hal_window_write64(hal_worker*, const hal_window* win, uint64_t word, uint64_t value)
{
    SDR_FUZZ_CHECK(word < win->nwords, "window write of word %llu, window of %llu words",
                   (unsigned long long)word, (unsigned long long)win->nwords);
    if (win->host_addr == reinterpret_cast<uint64_t>(W->tx_window) && word == 1) {
        SDR_FUZZ_CHECK(W->tx_window[1] == 0, "the failed-request word written twice");
        SDR_FUZZ_CHECK(value & FW_TX_FAILED, "the failed-request word written without FW_TX_FAILED");
        const uint32_t at = static_cast<uint32_t>(value);
        SDR_FUZZ_CHECK(static_cast<int32_t>(at - W->last_done) >= 0 && static_cast<int32_t>(W->wr_head - at) > 0,
                       "failed request %u outside [%u, %u)", at, W->last_done, W->wr_head);
    } else if (win->host_addr == reinterpret_cast<uint64_t>(W->tx_window)) {
        uint32_t done = static_cast<uint32_t>(value);
        SDR_FUZZ_CHECK(static_cast<int32_t>(done - W->last_done) >= 0, "done_cursor went back from %u to %u",
                       W->last_done, done);
        SDR_FUZZ_CHECK(static_cast<int32_t>(W->wr_head - done) >= 0, "done_cursor %u is past the host's head %u",
                       done, W->wr_head);
        for (uint32_t i = W->last_done; i != done; i++)
            SDR_FUZZ_CHECK(W->invented_send_cqe || W->wr_queued[i % kRingSize] == 0,
                           "request %u retired with %u of its WQEs still queued", i, W->wr_queued[i % kRingSize]);
        W->last_done = done;
    } else {
        RxQp* q = rx_of_window(win);
        SDR_FUZZ_CHECK(q, "write to an unknown window");
        uint32_t sww = q->rx.slot_window_words;
        uint32_t s = static_cast<uint32_t>(word / sww), wi = static_cast<uint32_t>(word % sww);
        SDR_FUZZ_CHECK(wi == q->rx.bitmap_words, "a plain write into chunk-bitmap word %u of slot %u", wi, s);
        SlotModel& m = q->slots[s];
        SDR_FUZZ_CHECK(m.armed, "immediate written for idle slot %u", s);
        SDR_FUZZ_CHECK(!m.imm_written, "immediate of slot %u written twice", s);
        uint32_t nf = fw_imm_num_frags(W->imm);
        uint32_t all = nf >= 32 ? 0xFFFFFFFFu : (1u << nf) - 1u;
        SDR_FUZZ_CHECK(m.frag_mask == all, "immediate of slot %u published with fragments %#x of %#x", s,
                       m.frag_mask, all);
        SDR_FUZZ_CHECK(value == (FW_IMM_VALID | m.imm), "immediate %#llx, expected %#llx", (unsigned long long)value,
                       (unsigned long long)(FW_IMM_VALID | m.imm));
        m.imm_written = true;
    }
    reinterpret_cast<uint64_t*>(win->host_addr)[word] = value;
}

void hal_window_add64(hal_worker*, const hal_window* win, uint64_t word, uint64_t value)
{
    SDR_FUZZ_CHECK(word < win->nwords, "window add to word %llu, window of %llu words", (unsigned long long)word,
                   (unsigned long long)win->nwords);
    RxQp* q = rx_of_window(win);
    SDR_FUZZ_CHECK(q, "atomic add to a window that holds no chunk bitmap");
    uint32_t sww = q->rx.slot_window_words;
    uint32_t s = static_cast<uint32_t>(word / sww), wi = static_cast<uint32_t>(word % sww);
    SDR_FUZZ_CHECK(wi < q->rx.bitmap_words, "chunk bit added into the immediate word of slot %u", s);
    SDR_FUZZ_CHECK(value && !(value & (value - 1)), "chunk-bit add of %#llx is not one bit", (unsigned long long)value);
    uint64_t* p = reinterpret_cast<uint64_t*>(win->host_addr) + word;
    SDR_FUZZ_CHECK(!(*p & value), "chunk bit %#llx of slot %u word %u added twice (the add carries)",
                   (unsigned long long)value, s, wi);
    uint32_t c = wi * 64 + static_cast<uint32_t>(__builtin_ctzll(value));
    const SlotModel& m = q->slots[s];
    SDR_FUZZ_CHECK(m.armed, "chunk %u of idle slot %u completed", c, s);
    SDR_FUZZ_CHECK(c < m.nchunks, "chunk %u completed in slot %u of %u chunks", c, s, m.nchunks);
    uint32_t first = c << W->log_ppc(), n = c + 1 == m.nchunks ? m.last_chunk_packets : 1u << W->log_ppc();
    for (uint32_t i = 0; i < n; i++)
        SDR_FUZZ_CHECK(m.pkt[first + i], "chunk %u of slot %u completed without packet %u", c, s, first + i);
    *p += value;
}

static bool post_one(const hal_tx_wqe* wqe)
{
    World& w = *W;
    SDR_FUZZ_CHECK(wqe->cookie < kRingSize && wqe->cookie == (w.tx.post_cursor & (kRingSize - 1)),
                   "WQE cookie %u, request being posted %u", wqe->cookie, w.tx.post_cursor);
    const fw_send_wr& wr = w.ring[wqe->cookie];
    SDR_FUZZ_CHECK(wr.generation < w.gens, "request of generation %u", wr.generation);
    bool channel = false;
    for (uint32_t c = 0; c < w.channels; c++) channel |= wqe->qp == w.handle(0, wr.generation, c);
    SDR_FUZZ_CHECK(channel, "WQE on transport QP %u, not a channel of generation %u", wqe->qp, wr.generation);
    SDR_FUZZ_CHECK(wqe->rkey == w.tx.rkey[wr.generation], "WQE rkey %#x, generation %u's is %#x", wqe->rkey,
                   wr.generation, w.tx.rkey[wr.generation]);
    fw_imm im = fw_imm_decode(w.imm, wqe->imm);
    SDR_FUZZ_CHECK(im.msg_id == wr.msg_id, "WQE message id %u, request's %u", im.msg_id, wr.msg_id);
    uint32_t j = fw_imm_frag_index(w.imm, im.packet_offset);
    SDR_FUZZ_CHECK(im.frag == fw_imm_user_frag(w.imm, wr.user_imm, j), "fragment %u carries %u", j, im.frag);
    uint64_t base = uint64_t{wr.slot} * w.slot_bytes();
    if (wqe->length) {
        uint32_t ndata = data_packets(wr.length);
        SDR_FUZZ_CHECK(wqe->length <= w.mtu(), "WQE of %u bytes, MTU %u", wqe->length, w.mtu());
        SDR_FUZZ_CHECK(im.packet_offset >= wr.first_packet && im.packet_offset - wr.first_packet < ndata,
                       "packet offset %u outside the request's [%u, +%u)", im.packet_offset, wr.first_packet, ndata);
        SDR_FUZZ_CHECK(wqe->remote_va == base + (uint64_t{im.packet_offset} << w.mtu_log),
                       "remote va %#llx for packet %u of slot %u", (unsigned long long)wqe->remote_va,
                       im.packet_offset, wr.slot);
        SDR_FUZZ_CHECK(wqe->remote_va + wqe->length <= base + w.slot_bytes(), "WQE ends past slot %u", wr.slot);
        SDR_FUZZ_CHECK(wqe->local_addr >= wr.local_addr &&
                           wqe->local_addr + wqe->length <= wr.local_addr + wr.length,
                       "WQE reads local bytes outside its request");
        SDR_FUZZ_CHECK(wqe->lkey == wr.lkey, "WQE lkey differs from its request's");
    } else {
        SDR_FUZZ_CHECK(wqe->remote_va == base, "padding packet addresses %#llx, not its slot base",
                       (unsigned long long)wqe->remote_va);
        SDR_FUZZ_CHECK(im.packet_offset < 32 && (wr.pad_frags >> im.packet_offset & 1),
                       "padding packet at offset %u, pad fragments %#x", im.packet_offset, wr.pad_frags);
    }
    if (w.sq_used[wqe->qp] >= kSqDepth) {
        w.blocked[wqe->qp] = 1;
        return false;
    }
    w.sq_used[wqe->qp]++;
    w.wr_bytes[wqe->cookie] += wqe->length;
    w.wr_wqes[wqe->cookie]++;
    w.wr_queued[wqe->cookie]++;
    w.sq.push_back({*wqe, false});
    return true;
}

uint32_t hal_tx_post(hal_worker*, const hal_tx_wqe* wqe, uint32_t n)
{
    SDR_FUZZ_CHECK(n >= 1, "a burst of %u WQEs", n);
    uint32_t i = 0;
    while (i < n && post_one(&wqe[i])) i++;
    return i;
}

uint64_t hal_clock_ns(hal_worker*) { return W->now_ns; }

void hal_timer_arm(hal_worker* w, uint32_t timer_id, uint64_t deadline_ns)
{
    W->timers[{w->index, timer_id}] = deadline_ns;  // re-arming replaces the deadline
}

void hal_counter_add(hal_worker* w, uint32_t counter, uint64_t n)
{
    SDR_FUZZ_CHECK(counter < HAL_MAX_COUNTERS, "counter %u", counter);
    w->counters[counter] += n;
}

}  // extern "C"

namespace {

// ---- set-up, as the host library does it ------------------------------------------------------

bool geometry(World& w, Reader& in)
{
    w.mtu_log = 6 + in.u8() % 7;                           // 64 .. 4096 bytes
    w.chunk_log = w.mtu_log + in.u8() % 9;                 // 1 .. 256 packets per chunk
    w.slot_log = w.chunk_log + in.u8() % 4;                // 1 .. 8 chunks per slot
    if (w.slot_log - w.mtu_log > 8) w.slot_log = w.mtu_log + 8;  // at most 256 packets a slot
    w.log_slots = in.u8() % 4;
    const uint8_t cb = in.u8();
    w.channels = 1 + cb % FW_MAX_CHANNELS;
    w.gens = 1 + ((cb >> 4) + 1) % FW_MAX_GENERATIONS;  // G: 2 for the seeds' small channel bytes
    uint8_t lb = in.u8();
    // any valid immediate layout whose fields hold this geometry
    uint8_t frag_bits = static_cast<uint8_t>(1u << (lb % 5));
    uint8_t msg_bits = static_cast<uint8_t>(1 + (lb >> 3) % 29);
    w.imm = fw_imm_layout{10, 18, 4};
    if (lb & 0x80 && msg_bits + frag_bits < 32) {
        fw_imm_layout l{msg_bits, static_cast<uint8_t>(32 - msg_bits - frag_bits), frag_bits};
        if (fw_imm_layout_valid(l) && l.offset_bits >= w.slot_log - w.mtu_log && l.msg_bits >= w.log_slots)
            w.imm = l;
    }
    uint8_t rate = in.u8();
    w.tx.rate_mbps = rate & 1 ? 1u + (rate >> 1) * 100u : 0;
    return true;
}

void layout(World& w)
{
    w.workers.resize(w.channels);
    for (uint32_t i = 0; i < w.channels; i++) w.workers[i].index = i;
    uint32_t nslots = w.nslots(), max_packets = w.max_packets();
    for (uint32_t q = 0; q < kRxQps; q++) {
        RxQp& r = w.rxq[q];
        uint64_t mem = fw_rx_qp_mem_bytes(nslots, max_packets, w.log_ppc());
        r.mem.assign((mem + 7) / 8 + 1, 0);
        uint32_t nchunks_max = 1u << (w.slot_log - w.chunk_log);
        r.window.assign(uint64_t{nslots} * ((nchunks_max + 63) / 64 + 1), 0);
        fw_rx_qp_init(&r.rx, r.mem.data(), w.imm, nslots, max_packets, w.log_ppc(), w.mtu_log,
                      w.gens, hal_window{reinterpret_cast<uint64_t>(r.window.data()), r.window.size()});
        r.rx.one_thread = q % 2;  // both ways of updating NIC memory: atomics, plain (the simulator's)
        r.slots.resize(nslots);
        w.dev.qps[q].rx = &r.rx;
    }
    fw_tx_qp& t = w.tx;
    t.imm = w.imm;
    t.mtu_log = w.mtu_log;
    t.num_channels = w.channels;
    t.num_generations = w.gens;
    t.index = 0;
    t.ring = w.ring.data();
    t.ring_mask = kRingSize - 1;
    t.window = hal_window{reinterpret_cast<uint64_t>(w.tx_window), 2};
    for (uint32_t g = 0; g < w.gens; g++)
        for (uint32_t c = 0; c < w.channels; c++) t.channel_qp[g][c] = w.handle(0, g, c);
    // connected to a peer of the same geometry (sdr_qp_connect)
    t.slot_bytes = w.slot_bytes();
    for (uint32_t g = 0; g < w.gens; g++) t.rkey[g] = 0x1000u + g;
    w.dev.qps[0].tx = &t;
    uint32_t handles = kRxQps * w.gens * w.channels;
    w.sq_used.assign(handles, 0);
    w.blocked.assign(handles, 0);
    w.send_active.assign(nslots, 0);
    w.send_last_wr.assign(nslots, 0);
}

// ---- events -------------------------------------------------------------------------------

// Every request the firmware finished posting was posted whole.
void check_posted()
{
    World& w = *W;
    for (; w.checked_post != w.tx.post_cursor; w.checked_post++) {
        uint32_t i = w.checked_post % kRingSize;
        const fw_send_wr& wr = w.ring[i];
        uint32_t want = data_packets(wr.length) + popcount(wr.pad_frags);
        SDR_FUZZ_CHECK(w.wr_wqes[i] == want, "request %u posted as %u WQEs, needs %u", w.checked_post, w.wr_wqes[i],
                       want);
        SDR_FUZZ_CHECK(w.wr_bytes[i] == wr.length, "request %u posted %llu bytes of %u", w.checked_post,
                       (unsigned long long)w.wr_bytes[i], wr.length);
        w.wr_wqes[i] = 0;
        w.wr_bytes[i] = 0;
    }
}

hal_worker* worker(uint32_t i) { return &W->workers[i % W->channels]; }

void doorbell(uint32_t qp_index)
{
    fw_handle_doorbell(&W->dev, worker(qp_index), qp_index);
    check_posted();
}

// A receive CQE: the shadow learns what it delivers (the firmware's contract), then the handler.
void rx_cqe(const hal_cqe& cqe, uint32_t channel)
{
    World& w = *W;
    uint32_t q = fw_tag_qp(cqe.qp_tag);
    if (cqe.opcode == HAL_CQE_RECV_WRITE_IMM && cqe.status == HAL_CQE_OK && q < kRxQps) {
        fw_imm im = fw_imm_decode(w.imm, cqe.imm);
        SlotModel& m = w.rxq[q].slots[im.msg_id & (w.nslots() - 1)];
        if (m.armed && m.gen == fw_tag_generation(cqe.qp_tag) && m.msg_id == im.msg_id) {
            bool placed = cqe.byte_len == 0 || im.packet_offset < m.npackets;
            if (cqe.byte_len && placed) m.pkt[im.packet_offset] = 1;
            uint32_t j = fw_imm_frag_index(w.imm, im.packet_offset);
            if (placed && !(m.frag_mask >> j & 1)) {
                m.frag_mask |= 1u << j;
                m.imm |= im.frag << (j * w.imm.frag_bits);
            }
        }
    }
    if (cqe.opcode == HAL_CQE_SEND && q == 0) w.invented_send_cqe = true;
    fw_handle_cqe(&w.dev, worker(channel), &cqe);
    check_posted();
}

void host_recv_post(uint32_t q, uint64_t length)
{
    World& w = *W;
    RxQp& r = w.rxq[q];
    uint64_t n = r.posted;
    uint32_t s = static_cast<uint32_t>(n & (w.nslots() - 1));
    if (r.slots[s].armed) return;  // the host answers SDR_RETRY
    uint32_t gen = static_cast<uint32_t>((n >> w.log_slots) % w.gens);
    uint32_t msg_id = static_cast<uint32_t>(n & ((1ull << w.imm.msg_bits) - 1));
    uint32_t sww = r.rx.slot_window_words;
    std::fill_n(r.window.begin() + uint64_t{s} * sww, sww, 0);
    fw_rx_slot_arm(&r.rx, s, gen, msg_id, length);
    SlotModel& m = r.slots[s];
    m.reset(0);
    m.armed = true;
    m.gen = gen;
    m.msg_id = msg_id;
    m.npackets = static_cast<uint32_t>((length + w.mtu() - 1) >> w.mtu_log);
    uint32_t ppc = 1u << w.log_ppc();
    m.nchunks = (m.npackets + ppc - 1) / ppc;
    m.last_chunk_packets = m.npackets - (m.nchunks ? (m.nchunks - 1) * ppc : 0);
    m.pkt.assign(m.npackets, 0);
    r.posted++;
}

void host_recv_complete(uint32_t q, uint32_t s)
{
    RxQp& r = W->rxq[q];
    s &= W->nslots() - 1;
    if (!r.slots[s].armed) return;
    fw_rx_slot_disarm(&r.rx, s);
    r.slots[s].armed = false;
}

void post_wr(uint64_t local_addr, uint32_t length, uint32_t first_packet, uint32_t msg_id, uint32_t gen,
             uint32_t slot, uint32_t user_imm, uint32_t pad_frags)
{
    World& w = *W;
    fw_send_wr& wr = w.ring[w.wr_head % kRingSize];
    wr = fw_send_wr{};
    wr.local_addr = local_addr;
    wr.lkey = length ? 0x77u : 0u;
    wr.length = length;
    wr.first_packet = first_packet;
    wr.msg_id = msg_id;
    wr.generation = gen;
    wr.slot = slot;
    wr.user_imm = user_imm;
    wr.pad_frags = pad_frags;
    w.wr_head++;
    hal_store_release32(&w.tx.head, w.wr_head);
    doorbell(0);
}

// sdr_send_post: one message of `length` bytes at chunk `chunk_offset` of the remote slot.
void host_send(uint32_t length, uint32_t chunk_offset, bool with_imm, uint32_t user_imm)
{
    World& w = *W;
    uint64_t n = w.sends_posted;
    uint32_t s = static_cast<uint32_t>(n & (w.nslots() - 1));
    if (w.send_active[s]) {  // sdr_send_poll: done once its last request retired
        if (static_cast<int32_t>(static_cast<uint32_t>(w.tx_window[0]) - w.send_last_wr[s]) < 0) return;
        w.send_active[s] = 0;
    }
    if (kRingSize - (w.wr_head - static_cast<uint32_t>(w.tx_window[0])) < 2) return;
    uint32_t slot_chunks = 1u << (w.slot_log - w.chunk_log);
    chunk_offset %= slot_chunks;
    uint64_t room = w.slot_bytes() - (uint64_t{chunk_offset} << w.chunk_log);
    length = static_cast<uint32_t>(std::min<uint64_t>(length, room));
    uint32_t msg_id = static_cast<uint32_t>(n & ((1ull << w.imm.msg_bits) - 1));
    uint32_t gen = static_cast<uint32_t>((n >> w.log_slots) % w.gens);
    uint32_t first = chunk_offset << w.log_ppc();
    uint32_t npk = data_packets(length);
    uint32_t nf = fw_imm_num_frags(w.imm), all = nf >= 32 ? 0xFFFFFFFFu : (1u << nf) - 1u;
    uint32_t carried = 0;
    if (npk >= nf) carried = all;
    else
        for (uint32_t p = first; p < first + npk; p++) carried |= 1u << fw_imm_frag_index(w.imm, p);
    w.sends_posted++;
    // Each message reads its own (never dereferenced) range of local addresses.
    uint64_t local = 0x10000000ull + n * w.slot_bytes();
    if (length) post_wr(local, length, first, msg_id, gen, s, with_imm ? user_imm : 0, 0);
    uint32_t pad = with_imm ? all & ~carried : 0;
    if (pad) post_wr(0, 0, 0, msg_id, gen, s, user_imm, pad);
    w.send_active[s] = 1;
    w.send_last_wr[s] = w.wr_head;
}

// The NIC sends up to n queued WQEs (in post order), completing the signalled ones, and rings
// the firmware once a full queue has drained to half.
void nic_send(uint32_t n, bool local_error)
{
    World& w = *W;
    while (n-- && w.sq_head < w.sq.size()) {
        Wqe e = w.sq[w.sq_head++];
        if (w.sq_head == w.sq.size()) {
            w.sq.clear();
            w.sq_head = 0;
        }
        uint32_t h = e.w.qp;
        w.sq_used[h]--;
        w.wr_queued[e.w.cookie]--;
        if (e.w.signaled) {
            hal_cqe c{};
            c.qp_tag = w.tag_of(h);
            c.wr_cookie = e.w.cookie;
            c.opcode = HAL_CQE_SEND;
            c.status = local_error ? HAL_CQE_LOCAL_ERROR : HAL_CQE_OK;
            fw_handle_cqe(&w.dev, worker(fw_tag_qp(c.qp_tag)), &c);
            check_posted();
        }
        if (w.blocked[h] && w.sq_used[h] <= kSqDepth / 2) {
            w.blocked[h] = 0;
            doorbell(fw_tag_qp(w.tag_of(h)));
        }
    }
}

// The earliest armed timer fires (the clock moves to it if it lies ahead).
bool fire_timer()
{
    World& w = *W;
    if (w.timers.empty()) return false;
    auto it = std::min_element(w.timers.begin(), w.timers.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
    auto [wi, id] = it->first;
    w.now_ns = std::max(w.now_ns, it->second);
    w.timers.erase(it);
    fw_handle_timer(&w.dev, worker(wi), id);
    check_posted();
    return true;
}

void run(Reader& in)
{
    World& w = *W;
    while (!in.empty()) {
        switch (in.u8() % 12) {
        case 0:
        case 1: {  // a receive CQE addressed like a packet of a slot's message
            uint32_t q = in.u8() % kRxQps;
            uint32_t s = in.u8() & (w.nslots() - 1);
            const SlotModel& m = w.rxq[q].slots[s];
            uint8_t how = in.u8();
            uint32_t gen = how & 1 ? in.u8() % 8 : m.gen;
            uint32_t msg = how & 2 ? in.u16() : m.msg_id;
            uint32_t p = in.u16() % (m.npackets + 2);
            uint32_t frag = in.u8() & ((1u << w.imm.frag_bits) - 1);
            hal_cqe c{};
            c.qp_tag = fw_qp_tag(q, gen, in.u8() % w.channels);
            c.imm = fw_imm_encode(w.imm, msg & ((1u << w.imm.msg_bits) - 1), p, frag);
            uint64_t tail = m.npackets ? 1 + (in.u16() % w.mtu()) : 0;
            switch ((how >> 2) & 3) {
            case 0: c.byte_len = w.mtu(); break;
            case 1: c.byte_len = 0; break;
            case 2: c.byte_len = static_cast<uint32_t>(tail); break;
            default: c.byte_len = in.u32(); break;
            }
            c.opcode = HAL_CQE_RECV_WRITE_IMM;
            c.status = how & 0x10 ? HAL_CQE_LOCAL_ERROR : HAL_CQE_OK;
            rx_cqe(c, c.qp_tag & 31);
            break;
        }
        case 2: {  // any CQE at all
            hal_cqe c{};
            c.qp_tag = in.u32();
            c.imm = in.u32();
            c.byte_len = in.u32();
            c.wr_cookie = in.u32();
            c.opcode = in.u8() % 4;
            c.status = in.u8() % 3;
            rx_cqe(c, in.u8());
            break;
        }
        case 3: doorbell(in.u8() & 1 ? in.u32() : in.u8() % 4); break;
        case 4: {
            uint32_t wi = in.u8(), id = in.u8() & 1 ? in.u32() : in.u8() % 4;
            fw_handle_timer(&w.dev, worker(wi), id);
            check_posted();
            break;
        }
        case 5: fire_timer(); break;
        case 6: {
            uint32_t q = in.u8() % kRxQps;
            uint8_t how = in.u8();
            uint64_t len = how & 1 ? w.slot_bytes() : in.u32() % (w.slot_bytes() + 1);
            host_recv_post(q, len);
            break;
        }
        case 7: {
            uint32_t q = in.u8() % kRxQps;
            host_recv_complete(q, in.u8());
            break;
        }
        case 8:
        case 9: {
            uint32_t len = in.u8() & 1 ? static_cast<uint32_t>(w.slot_bytes()) : in.u16() * (1u << (w.mtu_log - 6));
            uint32_t chunk = in.u8();
            uint8_t imm = in.u8();
            host_send(len, chunk, imm & 1, in.u32());
            break;
        }
        case 10: {
            uint8_t n = in.u8();
            nic_send(1 + n % 64, n >= 0xF8);
            break;
        }
        default: w.now_ns += uint64_t{in.u16()} * 1000; break;
        }
    }
}

// After the input: the shadow and the host window agree, and a drained NIC retires everything.
void finish()
{
    World& w = *W;
    for (uint32_t q = 0; q < kRxQps; q++) {
        const RxQp& r = w.rxq[q];
        for (uint32_t s = 0; s < w.nslots(); s++) {
            const SlotModel& m = r.slots[s];
            if (!m.armed) continue;
            const uint64_t* words = r.window.data() + uint64_t{s} * r.rx.slot_window_words;
            uint32_t ppc = 1u << w.log_ppc();
            for (uint32_t c = 0; c < r.rx.bitmap_words * 64; c++) {
                bool bit = words[c / 64] >> (c % 64) & 1;
                bool whole = c < m.nchunks;
                uint32_t n = c + 1 == m.nchunks ? m.last_chunk_packets : ppc;
                for (uint32_t i = 0; whole && i < n; i++) whole = m.pkt[c * ppc + i];
                SDR_FUZZ_CHECK(bit == whole, "slot %u of QP %u: chunk %u bit %d, all packets arrived %d", s, q, c,
                               bit, whole);
            }
            uint32_t nf = fw_imm_num_frags(w.imm);
            uint32_t all = nf >= 32 ? 0xFFFFFFFFu : (1u << nf) - 1u;
            bool valid = words[r.rx.bitmap_words] & FW_IMM_VALID;
            SDR_FUZZ_CHECK(valid == (m.frag_mask == all), "slot %u of QP %u: immediate valid %d, fragments %#x", s,
                           q, valid, m.frag_mask);
        }
    }
    if (w.invented_send_cqe) return;
    for (int steps = 0; steps < 1000000; steps++) {
        if (w.sq_head < w.sq.size()) nic_send(64, false);
        else if (!fire_timer()) break;
    }
    SDR_FUZZ_CHECK(w.sq_head == w.sq.size() && w.timers.empty(), "the NIC did not drain");
    SDR_FUZZ_CHECK(static_cast<uint32_t>(w.tx_window[0]) == w.wr_head,
                   "drained NIC, yet %u of %u requests retired (post cursor %u)", static_cast<uint32_t>(w.tx_window[0]),
                   w.wr_head, w.tx.post_cursor);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    // One world for the process, returned to its initial state per input: fresh allocations of
    // the 224 KiB ring cost more than the firmware's work.
    static World world;
    world.reset();
    W = &world;
    Reader in(data, size);
    geometry(world, in);
    layout(world);
    run(in);
    finish();
    W = nullptr;
    return 0;
}
