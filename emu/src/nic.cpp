#include <sdr/emu/nic.hpp>
#include <sdr/emu/wire.hpp>

#include <cstdlib>
#include <cstring>

namespace sdr::emu {

static_assert(wire::frame_bytes_write_imm(0) == FW_FRAME_OVERHEAD_BYTES,
              "firmware pacing must count the same frame bytes the wire carries");

const char* to_string(RxDrop d)
{
    switch (d) {
    case RxDrop::Truncated: return "truncated";
    case RxDrop::NotIpv4: return "not_ipv4";
    case RxDrop::NotRoce: return "not_roce";
    case RxDrop::BadIpHeader: return "bad_ip_header";
    case RxDrop::BadLength: return "bad_length";
    case RxDrop::BadOpcode: return "bad_opcode";
    case RxDrop::BadIcrc: return "bad_icrc";
    case RxDrop::UnknownQp: return "unknown_qp";
    case RxDrop::WrongPeer: return "wrong_peer";
    case RxDrop::WrongOpcode: return "wrong_opcode";
    case RxDrop::UnknownKey: return "unknown_key";
    case RxDrop::OutOfBounds: return "out_of_bounds";
    case RxDrop::BadQkey: return "bad_qkey";
    case RxDrop::CtrlRingFull: return "ctrl_ring_full";
    case RxDrop::CqOverflow: return "cq_overflow";
    case RxDrop::Count: break;
    }
    return "?";
}

uint64_t PortCounters::rx_drops_total() const
{
    uint64_t n = 0;
    for (uint64_t d : rx_drops) n += d;
    return n;
}

// The index bits hold every transport QP and root key of 32 SDR QPs at the largest G and
// channel count (8 x 16), or of all 256 at G = 2; past that, sdr_qp_create fails cleanly.
static_assert(uint64_t{FW_MAX_GENERATIONS} * FW_MAX_CHANNELS * 32 <= 1u << NicIds::kQpnIndexBits,
              "a QPN's index bits must number the transport QPs of 32 SDR QPs at the largest G");
static_assert(uint64_t{FW_MAX_QPS} * 2 * FW_MAX_CHANNELS <= 1u << NicIds::kQpnIndexBits,
              "a QPN's index bits must number every transport QP of 256 SDR QPs at G = 2");
static_assert(uint64_t{FW_MAX_QPS} * FW_MAX_GENERATIONS <= 1u << NicIds::kRootKeyIndexBits,
              "a root key's index bits must number every root key the firmware can use");

Nic::Nic(uint32_t index, NicAddress addr, uint32_t num_workers, bool payload, NicExecutor* exec,
         std::optional<uint64_t> id_seed)
    : index_(index), addr_(addr), payload_(payload), exec_(exec), ids_(id_seed)
{
    reconfigure_workers(num_workers);
    fw_ = static_cast<fw_device*>(nic_alloc(sizeof(fw_device)));
    sq_ring_.resize(1024);
    ctrl_sq_.resize(kCtrlSqDepth);
}

Nic::~Nic() { nic_free(fw_); }

bool Nic::reconfigure_workers(uint32_t num_workers)
{
    for (const auto& q : qps_)
        if (q.live) return false;
    workers_.clear();
    rx_workers_.clear();
    for (uint32_t i = 0; i < num_workers; i++)
        for (auto* v : {&workers_, &rx_workers_}) {
            auto w = std::make_unique<hal_worker>();
            w->nic = this;
            w->index = i;
            v->push_back(std::move(w));
        }
    return true;
}

// ---- memory -----------------------------------------------------------------------------

uint32_t Nic::mr_reg(void* addr, size_t len)
{
    if (!addr || len == 0) return 0;
    size_t i = 0;
    while (i < mrs_.size() && mrs_[i].live) i++;
    if (i >> NicIds::kLkeyIndexBits) return 0;
    if (i == mrs_.size()) mrs_.emplace_back();
    MemoryRegion& r = mrs_[i];
    r = {static_cast<uint8_t*>(addr), len, ids_.lkey(static_cast<uint32_t>(i), r.lkey), true};
    return r.lkey;
}

bool Nic::mr_dereg(uint32_t lkey)
{
    uint32_t i = NicIds::lkey_index(lkey);
    if (i >= mrs_.size() || !mrs_[i].live || mrs_[i].lkey != lkey) return false;
    // A root-key entry must never outlive the memory it points at.
    for (auto& rk : root_keys_)
        for (auto& e : rk.entries)
            if (e.lkey == lkey) e = RootEntry{};
    mrs_[i] = MemoryRegion{nullptr, 0, lkey, false};
    return true;
}

void* Nic::nic_alloc(size_t bytes)
{
    size_t n = (bytes + 63) & ~size_t{63};
    void* p = std::aligned_alloc(64, n ? n : 64);
    if (p) {
        std::memset(p, 0, n);
        nic_mem_bytes_ += n;
    }
    return p;
}

void Nic::nic_free(void* p) { std::free(p); }

// ---- transport QPs and root keys ---------------------------------------------------------

uint32_t Nic::qp_create(uint32_t tag, uint32_t channel)
{
    // A dead QP's entry is reused once no WQE of it waits in the send queue (tx_done still
    // reads the entry for those).
    size_t h = 0;
    while (h < qps_.size() && (qps_[h].live || qps_[h].sq_used)) h++;
    if (h >> NicIds::kQpnIndexBits) return kNoHandle;
    if (h == qps_.size()) {
        qps_.emplace_back();
        grow_sq_ring();
    }
    TransportQp q;
    q.live = true;
    q.qpn = ids_.data_qpn(static_cast<uint32_t>(h), qps_[h].qpn);
    q.tag = tag;
    q.channel = channel % num_workers();
    qps_[h] = q;
    return static_cast<uint32_t>(h);
}

void Nic::qp_destroy(uint32_t handle)
{
    if (handle < qps_.size()) qps_[handle].live = false;
}

bool Nic::qp_connect(uint32_t handle, const NicAddress& remote, uint32_t remote_qpn)
{
    if (handle >= qps_.size() || !qps_[handle].live) return false;
    TransportQp& q = qps_[handle];
    q.remote_ip = remote.ip;
    q.remote_mac = remote.mac;
    q.remote_qpn = remote_qpn & 0xFFFFFF;
    q.peer_port = udp_src_port(q.remote_qpn);
    return true;
}

void Nic::qp_bind_root_key(uint32_t handle, uint32_t rkey)
{
    if (handle < qps_.size()) qps_[handle].rkey = rkey;
}

const QpCounters* Nic::qp_counters(uint32_t handle) const
{
    return handle < qps_.size() ? &qps_[handle].counters : nullptr;
}

uint32_t Nic::root_key_create(uint32_t nslots, uint64_t slot_bytes)
{
    size_t i = 0;
    while (i < root_keys_.size() && root_keys_[i].live) i++;
    if (i >> NicIds::kRootKeyIndexBits) return 0;
    if (i == root_keys_.size()) root_keys_.emplace_back();
    RootKey& rk = root_keys_[i];
    rk.live = true;
    rk.rkey = ids_.root_key(static_cast<uint32_t>(i), rk.rkey);
    rk.slot_bytes = slot_bytes;
    rk.slot_shift = slot_bytes > 1 && (slot_bytes & (slot_bytes - 1)) == 0 ? static_cast<uint32_t>(__builtin_ctzll(slot_bytes)) : 0;
    rk.entries.assign(nslots, RootEntry{});
    return rk.rkey;
}

Nic::RootKey* Nic::root_key(uint32_t rkey)
{
    uint32_t i = NicIds::root_key_index(rkey);
    if (i >= root_keys_.size() || !root_keys_[i].live || root_keys_[i].rkey != rkey) return nullptr;
    return &root_keys_[i];
}

void Nic::root_key_destroy(uint32_t rkey)
{
    if (RootKey* rk = root_key(rkey)) {
        rk->live = false;
        rk->entries.clear();
    }
}

bool Nic::root_key_set(uint32_t rkey, uint32_t slot, uint32_t lkey, uint64_t addr, uint64_t len)
{
    RootKey* rk = root_key(rkey);
    if (!rk || slot >= rk->entries.size() || len > rk->slot_bytes || !mr_covers(lkey, addr, len))
        return false;
    rk->entries[slot] = {reinterpret_cast<uint8_t*>(addr), len, lkey};
    return true;
}

void Nic::root_key_null(uint32_t rkey, uint32_t slot)
{
    RootKey* rk = root_key(rkey);
    if (rk && slot < rk->entries.size()) rk->entries[slot] = RootEntry{};
}

// ---- receive: the UC responder -----------------------------------------------------------

// Two MACs alike, in two loads and compares (std::array's == compared byte by byte here: 26
// instructions per packet in callgrind).
static bool same_mac(const std::array<uint8_t, 6>& a, const std::array<uint8_t, 6>& b)
{
    uint32_t a4, b4;
    uint16_t a2, b2;
    std::memcpy(&a4, a.data(), 4);
    std::memcpy(&b4, b.data(), 4);
    std::memcpy(&a2, a.data() + 4, 2);
    std::memcpy(&b2, b.data() + 4, 2);
    return ((a4 ^ b4) | uint32_t(a2 ^ b2)) == 0;
}

void Nic::drop(RxDrop d, TransportQp* qp)
{
    port_.rx_drops[static_cast<size_t>(d)]++;
    if (qp) qp->counters.rx_drops++;
}

void Nic::rx_frame(const uint8_t* frame, size_t len)
{
    port_.rx_frames++;
    port_.rx_bytes += len;
    wire::Parsed p;
    wire::Verdict v = wire::decode(frame, len, &p, true);
    switch (v) {
    case wire::Verdict::Ok: break;
    case wire::Verdict::Truncated: return drop(RxDrop::Truncated, nullptr);
    case wire::Verdict::NotIpv4: return drop(RxDrop::NotIpv4, nullptr);
    case wire::Verdict::NotRoce: return drop(RxDrop::NotRoce, nullptr);
    case wire::Verdict::BadIpHeader: return drop(RxDrop::BadIpHeader, nullptr);
    case wire::Verdict::BadLength: return drop(RxDrop::BadLength, nullptr);
    case wire::Verdict::BadOpcode: return drop(RxDrop::BadOpcode, nullptr);
    case wire::Verdict::BadIcrc: return drop(RxDrop::BadIcrc, nullptr);
    }
    PacketMeta m;
    m.va = p.h.va;
    m.dest_qp = p.h.dest_qp;
    m.psn = p.h.psn;
    m.rkey = p.h.rkey;
    m.dma_len = p.payload_len;
    m.imm = p.h.imm;
    m.opcode = p.h.opcode;
    m.udp_src_port = p.h.udp_src_port;
    m.qkey = p.h.qkey;
    m.src_qp = p.h.src_qp;
    const NicAddress src{p.h.src_mac, p.h.src_ip};
    bool ud = m.opcode == wire::kOpUdSendOnly || m.opcode == wire::kOpUdSendOnlyImm;
    if (ud && m.dest_qp >= kCtrlQpnBase) return ctrl_receive(m, p.payload, src);
    respond(m, p.payload, src);  // a UD frame for a data QP is a WrongOpcode drop there
}

void Nic::rx_packet(const PacketMeta& m, const uint8_t* payload, const NicAddress& src)
{
    port_.rx_frames++;
    port_.rx_bytes += wire::frame_bytes_write_imm(m.dma_len);
    respond(m, payload, src);
}

void Nic::respond(const PacketMeta& m, const uint8_t* payload, const NicAddress& src)
{
    uint32_t h = NicIds::qpn_index(m.dest_qp);
    if (h >= qps_.size() || qps_[h].qpn != m.dest_qp || !qps_[h].live) return drop(RxDrop::UnknownQp, nullptr);
    TransportQp& qp = qps_[h];
    // Only the connected peer's frames, before anything else is looked at (an unconnected QP
    // has a peer port no frame carries).
    if (m.udp_src_port != qp.peer_port || src.ip != qp.remote_ip || !same_mac(src.mac, qp.remote_mac))
        return drop(RxDrop::WrongPeer, &qp);
    if (m.opcode != wire::kOpUcWriteOnlyImm) return drop(RxDrop::WrongOpcode, &qp);
    RootKey* rk = (m.rkey == qp.rkey && qp.rkey) ? root_key(m.rkey) : nullptr;
    if (!rk) return drop(RxDrop::UnknownKey, &qp);
    uint64_t slot, off;
    if (rk->slot_shift) {  // SDR's slots are powers of two: no division per packet
        slot = m.va >> rk->slot_shift;
        off = m.va & (rk->slot_bytes - 1);
    } else {
        slot = m.va / rk->slot_bytes;
        off = m.va % rk->slot_bytes;
    }
    if (slot >= rk->entries.size()) return drop(RxDrop::OutOfBounds, &qp);
    const RootEntry& e = rk->entries[slot];
    if (!e.addr) {
        // NULL key: a late packet of a completed message; payload discarded, CQE still raised
        // (the firmware's tag check drops it).
        port_.rx_null_key++;
        qp.counters.rx_null_key++;
    } else if (m.dma_len != 0) {
        if (off > e.len || m.dma_len > e.len - off) return drop(RxDrop::OutOfBounds, &qp);
        if (payload) std::memcpy(e.addr + off, payload, m.dma_len);  // the DMA
        port_.rx_placed_bytes += m.dma_len;
    }
    qp.counters.rx_packets++;
    port_.rx_cqes++;
    hal_cqe cqe{};
    cqe.qp_tag = qp.tag;
    cqe.imm = m.imm;
    cqe.byte_len = m.dma_len;
    cqe.opcode = HAL_CQE_RECV_WRITE_IMM;
    cqe.status = HAL_CQE_OK;
    // The channel's DPA worker drains its CQ: at once (the simulator without its cost model),
    // on its own thread (real-time executors with worker cores), or later in virtual time.
    if (!(cqe_dispatch_ && exec_->dispatch_rx_cqe(*this, qp.channel, cqe))) run_rx_cqe(qp.channel, cqe);
}

void Nic::run_rx_cqe(uint32_t worker, const hal_cqe& cqe)
{
    hal_worker* w = rx_workers_[worker].get();
    counter_add(w->cqe_handler_calls, 1);
    fw_handle_cqe(fw_, w, &cqe);
}

// ---- control QPs ------------------------------------------------------------------------

uint32_t Nic::ctrl_qp_create()
{
    size_t h = 0;
    while (h < ctrl_qps_.size() && ctrl_qps_[h].live) h++;
    if (h >> NicIds::kQpnIndexBits) return kNoHandle;
    if (h == ctrl_qps_.size()) ctrl_qps_.emplace_back();
    CtrlQp q;
    q.live = true;
    q.qpn = ids_.ctrl_qpn(static_cast<uint32_t>(h), ctrl_qps_[h].qpn);
    q.qkey = ids_.qkey();
    // A ring entry takes memory when a datagram first lands in it (and keeps it): 256 entries
    // of 4 KiB zeroed up front cost every QP 1 MiB and most of its creation time.
    q.ring.resize(kCtrlRingDepth);
    q.len.assign(kCtrlRingDepth, 0);
    ctrl_qps_[h] = std::move(q);
    return static_cast<uint32_t>(h);
}

void Nic::ctrl_qp_destroy(uint32_t handle)
{
    if (handle >= ctrl_qps_.size()) return;
    uint32_t qpn = ctrl_qps_[handle].qpn;
    ctrl_qps_[handle] = CtrlQp{};
    ctrl_qps_[handle].qpn = qpn;  // the next QP of this entry gets another
}

bool Nic::ctrl_qp_connect(uint32_t handle, const NicAddress& remote, uint32_t remote_qpn)
{
    if (handle >= ctrl_qps_.size() || !ctrl_qps_[handle].live) return false;
    CtrlQp& q = ctrl_qps_[handle];
    q.peer = remote;
    q.peer_qpn = remote_qpn & 0xFFFFFF;
    q.peer_port = udp_src_port(q.peer_qpn);
    return true;
}

bool Nic::ctrl_send(uint32_t handle, const NicAddress& dst, uint32_t dst_qpn, uint32_t dst_qkey,
                    const void* data, uint32_t len)
{
    if (handle >= ctrl_qps_.size() || !ctrl_qps_[handle].live || len > kCtrlMaxBytes) return false;
    if (ctrl_head_ - ctrl_done_ >= kCtrlSqDepth) return false;
    CtrlSend& e = ctrl_sq_[ctrl_head_ % kCtrlSqDepth];
    e.meta = PacketMeta{};
    e.meta.opcode = wire::kOpUdSendOnly;
    e.meta.dest_qp = dst_qpn & 0xFFFFFF;
    e.meta.qkey = dst_qkey;
    e.meta.src_qp = ctrl_qpn(handle);
    e.meta.dma_len = len;
    e.meta.udp_src_port = udp_src_port(ctrl_qpn(handle));
    e.handle = handle;
    e.remote_ip = dst.ip;
    e.remote_mac = dst.mac;
    if (len) std::memcpy(e.data.data(), data, len);
    ctrl_head_++;
    exec_->tx_ready(*this);
    return true;
}

int64_t Nic::ctrl_recv(uint32_t handle, void* buf, size_t cap)
{
    if (handle >= ctrl_qps_.size() || !ctrl_qps_[handle].live) return 0;
    CtrlQp& q = ctrl_qps_[handle];
    if (q.tail == q.head) return 0;
    uint32_t i = static_cast<uint32_t>(q.tail % kCtrlRingDepth);
    if (q.len[i] > cap) return -1;
    if (q.len[i]) std::memcpy(buf, q.ring[i].data(), q.len[i]);  // an empty entry has no buffer
    q.tail++;
    return q.len[i];
}

// A received control datagram: hostile like every frame, copied into the QP's ring or dropped.
void Nic::ctrl_receive(const PacketMeta& m, const uint8_t* payload, const NicAddress& src)
{
    uint32_t h = NicIds::qpn_index(m.dest_qp);
    if (h >= ctrl_qps_.size() || ctrl_qps_[h].qpn != m.dest_qp || !ctrl_qps_[h].live || !payload)
        return drop(RxDrop::UnknownQp, nullptr);
    CtrlQp& q = ctrl_qps_[h];
    if (m.src_qp != q.peer_qpn || m.udp_src_port != q.peer_port || src.ip != q.peer.ip || !same_mac(src.mac, q.peer.mac))
        return drop(RxDrop::WrongPeer, nullptr);
    if (m.qkey != q.qkey) return drop(RxDrop::BadQkey, nullptr);
    if (m.dma_len > kCtrlMaxBytes) return drop(RxDrop::OutOfBounds, nullptr);
    if (q.head - q.tail >= kCtrlRingDepth) return drop(RxDrop::CtrlRingFull, nullptr);
    uint32_t i = static_cast<uint32_t>(q.head % kCtrlRingDepth);
    q.ring[i].assign(payload, payload + m.dma_len);
    q.len[i] = m.dma_len;
    q.head++;
    port_.rx_ctrl++;
    note_host_event();
}

// ---- send engine -------------------------------------------------------------------------

void Nic::grow_sq_ring()
{
    size_t need = qps_.size() * kSqDepth;
    if (need <= sq_ring_.size()) return;
    size_t cap = sq_ring_.size();
    while (cap < need) cap *= 2;
    std::vector<SqEntry> ring(cap);
    for (uint32_t i = 0; i < sq_count_; i++) ring[i] = sq_ring_[(sq_tail_ + i) & (sq_ring_.size() - 1)];
    sq_ring_ = std::move(ring);
    sq_tail_ = 0;
    sq_head_ = sq_count_;
}

bool Nic::hal_tx_post(hal_worker*, const hal_tx_wqe& wqe)
{
    if (wqe.qp >= qps_.size() || !qps_[wqe.qp].live) {
        port_.tx_local_errors++;
        return true;  // consumed: a WQE for a dead QP is discarded, not retried forever
    }
    TransportQp& q = qps_[wqe.qp];
    if (q.sq_used >= kSqDepth) {
        q.sq_blocked = true;
        return false;
    }
    q.sq_used++;
    sq_ring_[sq_head_++ & (sq_ring_.size() - 1)] = SqEntry{wqe.qp, wqe};
    if (sq_count_++ == 0) exec_->tx_ready(*this);
    return true;
}

// Reads the next packet's payload ahead, as a NIC's DMA engine does, while this one is
// encoded: each payload starts a new page, where the hardware prefetcher loses the stream, and
// the kernel's traffic on the sending core has evicted the message by then. perf on AF_XDP: the
// copy into the frame fell from 5.7-6.5 % of the sending core to 3.9-5.0 %. Only a registered
// range is touched. Real-time NICs only (set_tx_prefetch): in the payload-free simulator the
// lookup and 64 prefetches per packet cost 2-3x its speed for bytes nobody reads.
void Nic::prefetch_payload(const hal_tx_wqe& w) const
{
    if (!w.length || !mr_covers(w.lkey, w.local_addr, w.length)) return;
    const char* a = reinterpret_cast<const char*>(w.local_addr);
    for (uint32_t off = 0; off < w.length; off += 64) __builtin_prefetch(a + off, 0, 3);
}

bool Nic::tx_next(TxPacket* out)
{
    if (ctrl_next_ != ctrl_head_) {  // control datagrams go first
        const CtrlSend& c = ctrl_sq_[ctrl_next_++ % kCtrlSqDepth];
        *out = TxPacket{};
        out->ctrl = true;
        out->qp = c.handle;
        out->meta = c.meta;
        out->remote_ip = c.remote_ip;
        out->remote_mac = c.remote_mac;
        out->payload = c.data.data();
        return true;
    }
    if (!sq_count_) return false;
    const size_t mask = sq_ring_.size() - 1;
    const SqEntry& e = sq_ring_[sq_tail_++ & mask];  // stays put: nothing posts until tx_done
    sq_count_--;
    if (tx_prefetch_ && sq_count_) prefetch_payload(sq_ring_[sq_tail_ & mask].wqe);
    TransportQp& q = qps_[e.qp];
    const hal_tx_wqe& w = e.wqe;
    // Every field is written here (no zeroing of the whole packet first): this runs per packet.
    out->qp = e.qp;
    out->cookie = w.cookie;
    out->signaled = w.signaled;
    out->ctrl = false;
    out->local_error = !q.live || (w.length && !mr_covers(w.lkey, w.local_addr, w.length));
    if (out->local_error) return true;  // local protection error: nothing goes on the wire
    PacketMeta& m = out->meta;
    m.opcode = wire::kOpUcWriteOnlyImm;
    m.dest_qp = q.remote_qpn;
    m.psn = q.psn;
    q.psn = (q.psn + 1) & 0xFFFFFF;
    m.va = w.remote_va;
    m.rkey = w.rkey;
    m.dma_len = w.length;
    m.imm = w.imm;
    m.qkey = m.src_qp = 0;
    // Flow entropy per transport QP, as RoCEv2 NICs derive the UDP source port.
    m.udp_src_port = udp_src_port(q.qpn);
    out->remote_ip = q.remote_ip;
    out->remote_mac = q.remote_mac;
    out->payload = reinterpret_cast<const uint8_t*>(w.local_addr);
    return true;
}

void Nic::tx_done(const TxPacket& p)
{
    if (p.ctrl) {
        ctrl_done_++;
        port_.tx_frames++;
        port_.tx_ctrl++;
        port_.tx_bytes += wire::frame_bytes_ud_send(p.meta.dma_len);
        return;
    }
    TransportQp& q = qps_[p.qp];
    q.sq_used--;
    if (!q.live) return;  // destroyed with WQEs queued: its firmware slot may serve another QP now
    if (p.local_error) {
        port_.tx_local_errors++;
    } else {
        port_.tx_frames++;
        port_.tx_bytes += wire::frame_bytes_write_imm(p.meta.dma_len);
        q.counters.tx_packets++;
        q.counters.tx_bytes += p.meta.dma_len;
    }
    uint32_t fw_qp = fw_tag_qp(q.tag);
    if (p.signaled || p.local_error) {
        hal_cqe cqe{};
        cqe.qp_tag = q.tag;
        cqe.wr_cookie = p.cookie;
        cqe.opcode = HAL_CQE_SEND;
        cqe.status = p.local_error ? HAL_CQE_LOCAL_ERROR : HAL_CQE_OK;
        // An unsignalled WQE that failed still completes (as verbs does), but it must not
        // retire a request early: only signalled ones count against the request.
        if (p.signaled) {
            hal_worker* w = tx_worker(fw_qp);
            counter_add(w->cqe_handler_calls, 1);
            fw_handle_cqe(fw_, w, &cqe);
        }
    }
    // Ring the firmware once the send queue has drained to half, not per freed entry: one
    // handler call then posts a batch.
    if (q.sq_blocked && q.sq_used <= kSqDepth / 2) {
        q.sq_blocked = false;
        doorbell(fw_qp);
    }
}

wire::Headers roce_headers(const PacketMeta& m, const NicAddress& src, const NicAddress& dst)
{
    wire::Headers h;
    h.dst_mac = dst.mac;
    h.src_mac = src.mac;
    h.src_ip = src.ip;
    h.dst_ip = dst.ip;
    h.udp_src_port = m.udp_src_port;
    h.opcode = m.opcode;
    h.dest_qp = m.dest_qp;
    h.psn = m.psn;
    h.va = m.va;
    h.rkey = m.rkey;
    h.dma_len = m.dma_len;
    h.imm = m.imm;
    h.qkey = m.qkey;
    h.src_qp = m.src_qp;
    return h;
}

size_t Nic::tx_encode(const TxPacket& p, uint8_t* out, size_t cap) const
{
    NicAddress dst{p.remote_mac, p.remote_ip};
    return wire::encode(roce_headers(p.meta, addr_, dst), p.payload, p.meta.dma_len, out, cap);
}

// ---- events into the firmware ------------------------------------------------------------

void Nic::doorbell(uint32_t qp_index)
{
    hal_worker* w = tx_worker(qp_index);
    counter_add(w->doorbell_handler_calls, 1);
    fw_handle_doorbell(fw_, w, qp_index);
}

void Nic::timer_fired(uint32_t worker, uint32_t id)
{
    if (worker >= workers_.size()) return;
    hal_worker* w = workers_[worker].get();
    counter_add(w->timer_handler_calls, 1);
    fw_handle_timer(fw_, w, id);
}

uint64_t Nic::fw_counter(uint32_t counter) const
{
    uint64_t n = 0;
    if (counter < HAL_MAX_COUNTERS)
        for (uint32_t i = 0; i < workers_.size(); i++)
            n += counter_read(workers_[i]->counters[counter]) + counter_read(rx_workers_[i]->counters[counter]);
    return n;
}

hal_worker Nic::worker(uint32_t i) const
{
    hal_worker sum;
    sum.nic = const_cast<Nic*>(this);
    sum.index = i;
    for (const hal_worker* w : {workers_[i].get(), rx_workers_[i].get()}) {
        for (uint32_t c = 0; c < HAL_MAX_COUNTERS; c++) sum.counters[c] += counter_read(w->counters[c]);
        sum.window_writes += counter_read(w->window_writes);
        sum.window_adds += counter_read(w->window_adds);
        sum.window_refused += counter_read(w->window_refused);
        sum.cqe_handler_calls += counter_read(w->cqe_handler_calls);
        sum.doorbell_handler_calls += counter_read(w->doorbell_handler_calls);
        sum.timer_handler_calls += counter_read(w->timer_handler_calls);
    }
    return sum;
}

}  // namespace sdr::emu
