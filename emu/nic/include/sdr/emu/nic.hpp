// The emulated SmartNIC: memory regions, UC transport QPs, root keys, the UC responder that
// places payload and raises one CQE per packet, the emulated DPA workers that run the
// firmware per CQE, the send engine that turns firmware WQEs into packets, and counters; and
// the verbs device beside SDR: PDs, regions, address handles, CQs and RC/UC/UD QPs (verbs.hpp).
// Executor-agnostic: the simulator (or a real-time loop) calls rx_*/tx_* and provides time.
#pragma once

#include <sdr/emu/fifo_ring.hpp>
#include <sdr/emu/ids.hpp>
#include <sdr/emu/rx_drop.hpp>
#include <sdr/emu/verbs.hpp>
#include <sdr/emu/wire.hpp>
#include <sdr/emu/worker.hpp>
#include <sdr/firmware/fw.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sdr::emu {

class Nic;

// What one RoCEv2 packet says (decoded from a frame, or never encoded: payload-free mode).
struct PacketMeta {
    uint64_t va = 0;
    // dma_len: the payload's bytes (a verbs WRITE FIRST's RETH length travels beside it)
    // imm: the ImmDt, or an RC ACK's or READ response's AETH (no opcode carries both)
    uint32_t dest_qp = 0, psn = 0, rkey = 0, dma_len = 0, imm = 0;
    uint32_t qkey = 0, src_qp = 0;  // DETH of a control datagram (UD SEND)
    uint16_t udp_src_port = 0;  // flow entropy
    uint8_t opcode = 0;
    bool solicited : 1 = false;  // the BTH's SE bit (verbs: on a message's last packet)
    bool ack_req : 1 = false;    // the BTH's AckReq bit (SDR's RC packets: nic_sdr_rc.cpp)
};

struct NicAddress {
    std::array<uint8_t, 6> mac{};
    uint32_t ip = 0;  // host order
};


// The RoCEv2 headers of a packet between two NICs: the one place a PacketMeta becomes a frame
// header (the send engine's frames and the payload-free pcap records alike).
wire::Headers roce_headers(const PacketMeta& m, const NicAddress& src, const NicAddress& dst);

struct PortCounters {
    uint64_t rx_frames = 0, rx_bytes = 0, rx_placed_bytes = 0, rx_null_key = 0, rx_cqes = 0;
    uint64_t rx_drops[static_cast<size_t>(RxDrop::Count)] = {};
    uint64_t tx_frames = 0, tx_bytes = 0, tx_local_errors = 0;
    uint64_t rx_ctrl = 0, tx_ctrl = 0;  // control datagrams (also counted in rx/tx_frames)
    uint64_t rx_drop(RxDrop d) const { return rx_drops[static_cast<size_t>(d)]; }
    uint64_t rx_drops_total() const;
};

struct QpCounters {
    uint64_t rx_packets = 0, rx_drops = 0, rx_null_key = 0, tx_packets = 0, tx_bytes = 0;
    uint64_t tx_retransmits = 0;  // RC: packets sent again (go-back-N after a NAK or a timeout)
};

// A packet the send engine hands to the port.
struct TxPacket {
    PacketMeta meta;
    uint32_t remote_ip = 0;
    std::array<uint8_t, 6> remote_mac{};
    const uint8_t* payload = nullptr;  // local MR bytes (full-payload mode)
    uint32_t qp = 0;                   // transport QP handle
    uint32_t cookie = 0;               // verbs: the send queue index of the packet's WQE
    uint32_t reth_len = 0;             // verbs WRITE FIRST, READ request: the RETH's DMA length
    bool signaled = false;             // verbs: the last packet of its WQE
    // Sdr: a transport QP's WRITE-with-immediate; Ctrl: a control datagram (qp: the control
    // QP handle); Verbs: a verbs QP's packet (qp: the verbs QP handle); SdrAck: an RC transport
    // QP's ACK or NAK (qp: its handle). One byte, so SDR's per-packet path tests one value for
    // "not SDR".
    enum class Kind : uint8_t { Sdr, Ctrl, Verbs, SdrAck } kind = Kind::Sdr;
    bool local_error = false;          // lkey/bounds check failed: no packet, error completion
    // RC request: the BTH's AckReq bit. (An RC ACK's or READ response's AETH travels in
    // meta.imm: no opcode carries both; so the packet stays 80 bytes, the batch stride SDR pays.)
    bool ack_req = false;
};

// What the NIC needs from whatever runs it.
class NicExecutor {
public:
    virtual uint64_t now_ns() = 0;
    virtual void tx_ready(Nic& nic) = 0;  // the send engine has work
    virtual void arm_timer(Nic& nic, uint32_t worker, uint32_t id, uint64_t deadline_ns) = 0;
    // A receive CQE of `nic` for `worker`: true if the executor hands it to that worker's own
    // thread or a later time (which calls Nic::run_rx_cqe, or drops it as a CQ overflow), false
    // to run the handler inline, now.
    virtual bool dispatch_rx_cqe(Nic& nic, uint32_t worker, const hal_cqe& cqe)
    {
        (void)nic;
        (void)worker;
        (void)cqe;
        return false;
    }
    // The next hop's MAC towards IPv4 address ip (host order), for a verbs address vector: the
    // one place a GID becomes a MAC (Nic::resolve_gid). The simulator knows every NIC's address;
    // the real-time executor asks the kernel's route and neighbour tables (neighbour.hpp).
    virtual bool resolve_mac(uint32_t ip, std::array<uint8_t, 6>* mac)
    {
        (void)ip;
        (void)mac;
        return false;
    }
    // A completion reached verbs CQ `cq`, or the CQ went into error (Nic::verbs_complete, with
    // the executor's lock held): where a provider raises its completion-channel event.
    // `solicited`: a receive of a solicited message or an error completion (or the overrun),
    // what a CQ armed for solicited completions only waits for.
    virtual void verbs_cq_event(uint32_t cq, bool solicited)
    {
        (void)cq;
        (void)solicited;
    }
    // An asynchronous event of the verbs object `handle` (a CQ, QP or SRQ handle, by the event's
    // kind), with the executor's lock held: where a provider writes its async event record.
    virtual void verbs_async_event(verbs::AsyncEvent ev, uint32_t handle)
    {
        (void)ev;
        (void)handle;
    }

protected:
    ~NicExecutor() = default;
};

class Nic {
public:
    static constexpr uint32_t kSqDepth = 512;
    static constexpr uint32_t kNoHandle = 0xFFFFFFFFu;  // qp_create: every index is in use

    // id_seed: QPNs, keys and Q_Keys drawn from a generator with this seed (replayable runs);
    // nullopt: from getrandom() (ids.hpp).
    Nic(uint32_t index, NicAddress addr, uint32_t num_workers, bool payload, NicExecutor* exec,
        std::optional<uint64_t> id_seed);
    ~Nic();
    Nic(const Nic&) = delete;
    Nic& operator=(const Nic&) = delete;

    uint32_t index() const { return index_; }
    const NicAddress& address() const { return addr_; }
    bool payload() const { return payload_; }
    // Read each next packet's payload ahead while the current frame is encoded (see tx_next).
    // It pays only where frames are built from user memory on a real port: the real-time NIC
    // turns it on; the simulator never pays for memory it does not read.
    void set_tx_prefetch(bool on) { tx_prefetch_ = on && payload_; }
    // Offer each receive CQE to the executor (NicExecutor::dispatch_rx_cqe) before running its
    // handler inline: for executors with worker threads. Off, no virtual call per packet.
    void set_cqe_dispatch(bool on) { cqe_dispatch_ = on; }
    uint32_t num_workers() const { return static_cast<uint32_t>(workers_.size()); }
    NicExecutor* executor() const { return exec_; }
    // Change the number of DPA workers; only while no transport QP lives.
    [[nodiscard]] bool reconfigure_workers(uint32_t num_workers);

    // Memory regions: lkey 0 is never valid; 0 when 2^16 regions live.
    [[nodiscard]] uint32_t mr_reg(void* addr, size_t len);
    [[nodiscard]] bool mr_dereg(uint32_t lkey);
    // true if [addr, addr+len) lies inside the region of lkey (inline: the send engine checks
    // every packet's source)
    bool mr_covers(uint32_t lkey, uint64_t addr, uint64_t len) const
    {
        uint32_t i = NicIds::lkey_index(lkey);
        if (i >= mrs_.size() || !mrs_[i].live || mrs_[i].lkey != lkey) return false;
        const MemoryRegion& r = mrs_[i];
        uint64_t base = reinterpret_cast<uint64_t>(r.addr);
        return addr >= base && len <= r.len && addr - base <= r.len - len;
    }

    // NIC memory for firmware state (zeroed, 64-byte aligned); counted.
    [[nodiscard]] void* nic_alloc(size_t bytes);
    void nic_free(void* p);
    uint64_t nic_mem_bytes() const { return nic_mem_bytes_; }
    fw_device* firmware() { return fw_; }

    // Transport QPs, UC or RC (rc: nic_sdr_rc.cpp): returns a handle (kNoHandle if 8192 live),
    // its QPN is random (ids.hpp). A QP accepts frames only once connected, and then only from
    // the remote QP: its MAC, its IP and the UDP source port its QPN gives (udp_src_port).
    // rc_timeout_ns: an RC QP's retransmission timeout (0: kSdrRcDefaultTimeoutNs).
    [[nodiscard]] uint32_t qp_create(uint32_t tag, uint32_t channel, bool rc = false);
    void qp_destroy(uint32_t handle);
    uint32_t qpn(uint32_t handle) const { return handle < qps_.size() ? qps_[handle].qpn : 0; }
    bool qp_is_rc(uint32_t handle) const { return handle < qps_.size() && qps_[handle].rc; }
    [[nodiscard]] bool qp_connect(uint32_t handle, const NicAddress& remote, uint32_t remote_qpn, uint64_t rc_timeout_ns = 0);
    void qp_bind_root_key(uint32_t handle, uint32_t rkey);
    uint32_t qp_root_key(uint32_t handle) const { return handle < qps_.size() ? qps_[handle].rkey : 0; }

    // Zero-based indirect root keys: nslots entries of slot_bytes each, all NULL at start; 0
    // when 4096 live.
    [[nodiscard]] uint32_t root_key_create(uint32_t nslots, uint64_t slot_bytes);
    void root_key_destroy(uint32_t rkey);
    [[nodiscard]] bool root_key_set(uint32_t rkey, uint32_t slot, uint32_t lkey, uint64_t addr, uint64_t len);
    void root_key_null(uint32_t rkey, uint32_t slot);

    // Receive path. rx_frame treats bytes as hostile (full decode + ICRC); rx_packet is the
    // responder proper for a packet from `src` (payload == nullptr in payload-free mode).
    void rx_frame(const uint8_t* frame, size_t len);
    void rx_packet(const PacketMeta& m, const uint8_t* payload, const NicAddress& src);

    // Send engine: control datagrams first, then SDR's WQEs in post order across its QPs and
    // the verbs QPs' messages, one packet each in turn while both have work (nic_tx.cpp).
    bool tx_pending() const
    {
        return !sq_ring_.empty() || ctrl_next_ != ctrl_head_ || !verbs_active_.empty() || !rc_acks_.empty() ||
               !rc_resends_.empty();
    }
    [[nodiscard]] bool tx_next(TxPacket* out);
    // The packets left the port (or failed locally), in the order tx_next gave them.
    void tx_done(const TxPacket* batch, size_t n);
    void tx_done(const TxPacket& p) { tx_done(&p, 1); }
    // Encode the whole frame of p (headers, payload, ICRC); returns bytes, 0 if cap too small.
    size_t tx_encode(const TxPacket& p, uint8_t* out, size_t cap) const;
    // Bytes of the frame tx_encode makes of a control or verbs packet (a verbs pad included).
    static size_t verbs_frame_bytes(const TxPacket& p) { return wire::frame_bytes(p.meta.opcode, p.meta.dma_len, true); }
    static size_t other_frame_bytes(const TxPacket& p)
    {
        return p.kind == TxPacket::Kind::Ctrl ? wire::frame_bytes_ud_send(p.meta.dma_len) : verbs_frame_bytes(p);
    }

    // Control QPs: the small datagram channel beside each SDR QP (arXiv 2505.05366, the
    // paper's UD control QP). Datagrams travel as RoCEv2 UD SEND Only frames with a DETH over
    // the same port and link as data, ahead of queued data packets (strict priority), and always
    // with their payload, also in payload-free runs: the host reads them. Received datagrams are
    // copied into a bounded ring per control QP that the host drains.
    static constexpr uint32_t kCtrlQpnBase = NicIds::kCtrlQpnBit;  // control QPNs have bit 23 set
    static constexpr uint32_t kCtrlMaxBytes = 4096;
    static constexpr uint32_t kCtrlRingDepth = 256;  // received, not yet read by the host
    static constexpr uint32_t kCtrlSqDepth = 64;     // queued for the wire, per NIC
    [[nodiscard]] uint32_t ctrl_qp_create();  // handle (kNoHandle if 8192 live), random QPN and Q_Key
    void ctrl_qp_destroy(uint32_t handle);
    uint32_t ctrl_qpn(uint32_t handle) const { return handle < ctrl_qps_.size() ? ctrl_qps_[handle].qpn : 0; }
    uint32_t ctrl_qkey(uint32_t handle) const { return handle < ctrl_qps_.size() ? ctrl_qps_[handle].qkey : 0; }
    // Datagrams are taken only once connected, and then only from the remote control QP: its
    // QPN in the DETH, its MAC, IP and UDP source port.
    [[nodiscard]] bool ctrl_qp_connect(uint32_t handle, const NicAddress& remote, uint32_t remote_qpn);
    // false if the control send queue is full (or len > kCtrlMaxBytes, or no such QP).
    [[nodiscard]] bool ctrl_send(uint32_t handle, const NicAddress& dst, uint32_t dst_qpn, uint32_t dst_qkey,
                   const void* data, uint32_t len);
    // Oldest received datagram: its length (copied into buf), 0 if none, -1 if cap is smaller
    // than the datagram (which stays queued).
    int64_t ctrl_recv(uint32_t handle, void* buf, size_t cap);

    // ---- verbs objects (nic_verbs_objects.cpp, nic_verbs_qp.cpp) ----------------------------
    // The NIC as an RDMA device: protection domains, memory regions with access flags, address
    // handles, completion queues and RC/UC/UD QPs, beside SDR's own regions, root keys and QPs
    // (which stay as they are). Failures return an errno value (EINVAL, ENOMEM, EBUSY), as
    // verbs does, or 0 / kNoHandle where a handle or key is returned. Create, modify and destroy
    // run under the executor's lock; post_send/post_recv/cq_poll are one side of a
    // single-producer/single-consumer ring each (verbs.hpp), the NIC the other.
    static constexpr uint32_t kVerbsQpnBit = 1u << (NicIds::kQpnIndexBits - 1);  // in the control QPN space
    static constexpr uint32_t kMaxVerbsQps = kVerbsQpnBit;  // 4096 verbs QPs, 4096 control QPs
    // RC QPs' timers (retransmission and RNR wait) go through NicExecutor::arm_timer with this
    // worker number, above every DPA worker's, and the QP handle as id: SDR's timer ids stay theirs.
    static constexpr uint32_t kVerbsTimerWorker = 0xFFFF;
    // SDR's RC transport QPs (nic_sdr_rc.cpp): their retransmission timers (id: the QP handle),
    // an ACK at least every kSdrRcAckEvery packets, retries before the QP fails.
    static constexpr uint32_t kSdrRcTimerWorker = 0xFFFE;
    static constexpr uint32_t kSdrRcAckEvery = 16;
    static constexpr uint32_t kSdrRcRetries = 7;
    static constexpr uint64_t kSdrRcDefaultTimeoutNs = 10'000'000;
    // A retransmission timeout is 4.096 us * 2^timeout (IBTA), but never below this: a software
    // NIC's polling thread on a shared core stalls for longer than the IBTA's short timeouts.
    static constexpr uint64_t kRcMinTimeoutNs = 1'000'000;
    static constexpr uint32_t kRcAckReqEvery = 64;  // AckReq on every 64th packet of a long message
    static constexpr uint32_t kRcRespDepth = 64;    // queued ACKs/NAKs and READ responses per RC QP
    static constexpr uint32_t kRcMaxRdAtomic = 16;  // max_rd_atomic / max_dest_rd_atomic
    [[nodiscard]] uint32_t verbs_pd_alloc();  // kNoHandle if none left
    [[nodiscard]] int verbs_pd_dealloc(uint32_t pd);  // EBUSY while a region, AH or QP uses it
    // A region of `pd` with IBV_ACCESS_* flags: its key serves as lkey and rkey (random, ids.hpp);
    // 0 on failure (remote write without local write is refused, as verbs does). Remote
    // requests address it from iova (ibv_reg_mr_iova; the address itself by default); a region
    // with another iova serves remote requests only, a local SGE naming it is refused.
    [[nodiscard]] uint32_t verbs_mr_reg(uint32_t pd, void* addr, size_t len, uint32_t access);
    [[nodiscard]] uint32_t verbs_mr_reg(uint32_t pd, void* addr, size_t len, uint32_t access, uint64_t iova);
    [[nodiscard]] int verbs_mr_dereg(uint32_t key);  // also destroys a root key
    // The equivalent of mlx5's indirect mkey, for SDR over verbs (emu/verbs/README.md, "SDR's
    // root keys"): a remote-write key of `pd` over nslots zero-based slots of slot_bytes, each
    // the NULL key (writes discarded, a WRITE-with-immediate still completes its receive WQE)
    // until set to a range of a region of the same PD. 0 on failure.
    [[nodiscard]] uint32_t verbs_root_key_create(uint32_t pd, uint32_t nslots, uint64_t slot_bytes);
    // Point slot at [addr, addr + len) of region mr_key (len <= slot_bytes, inside the region,
    // remote write allowed); EINVAL otherwise. verbs_root_key_null: back to the NULL key.
    [[nodiscard]] int verbs_root_key_set(uint32_t key, uint32_t slot, uint32_t mr_key, uint64_t addr, uint64_t len);
    [[nodiscard]] int verbs_root_key_null(uint32_t key, uint32_t slot);
    // An address handle: the destination GID resolved once to MAC and IP (resolve_gid).
    [[nodiscard]] uint32_t verbs_ah_create(uint32_t pd, const verbs::Gid& gid);
    [[nodiscard]] int verbs_ah_destroy(uint32_t ah);
    // A completion queue of `depth` entries. Overflow: the completion is lost and the CQ is in
    // error from then on (IBV_EVENT_CQ_ERR): cq_poll returns -1 (verbs_cq_overflowed).
    [[nodiscard]] uint32_t verbs_cq_create(uint32_t depth);
    [[nodiscard]] int verbs_cq_destroy(uint32_t cq);  // EBUSY while a QP uses it
    [[nodiscard]] int verbs_cq_poll(uint32_t cq, verbs::Wc* wc, int n);  // completions taken, -1: CQ in error
    bool verbs_cq_overflowed(uint32_t cq) const;
    // srq: a shared receive queue the QP takes its receives from (kNoHandle: its own receive
    // queue of rq_depth; with an SRQ rq_depth is ignored and verbs_post_recv is EINVAL).
    [[nodiscard]] uint32_t verbs_qp_create(verbs::QpType type, uint32_t pd, uint32_t send_cq, uint32_t recv_cq,
                             uint32_t sq_depth, uint32_t rq_depth, uint32_t srq = kNoHandle);
    [[nodiscard]] int verbs_qp_destroy(uint32_t qp);
    uint32_t verbs_qpn(uint32_t qp) const;
    // ibv_modify_qp: RESET->INIT->RTR->RTS, *->ERR (flushes both queues), *->RESET; the
    // attributes each transition needs (README), EINVAL otherwise.
    [[nodiscard]] int verbs_qp_modify(uint32_t qp, const verbs::QpAttr& attr, uint32_t mask);
    verbs::QpState verbs_qp_state(uint32_t qp) const;
    [[nodiscard]] int verbs_post_send(uint32_t qp, const verbs::SendWr& wr);  // ENOMEM: send queue full
    [[nodiscard]] int verbs_post_recv(uint32_t qp, const verbs::RecvWr& wr);  // ENOMEM: receive queue full
    const verbs::QpCountersVerbs* verbs_qp_counters(uint32_t qp) const;
    // Shared receive queues (nic_verbs_srq.cpp): receive WQEs of `pd` that any QP attached to
    // the SRQ consumes, one per message, bound to that QP at the message's first packet. The
    // limit, when armed (non-zero), raises SrqLimitReached once when a QP takes a WQE and fewer
    // than `limit` stay posted, then disarms (reads 0) until armed again (IBTA 10.2.9.4).
    [[nodiscard]] uint32_t verbs_srq_create(uint32_t pd, uint32_t depth, uint32_t limit);  // kNoHandle on failure
    [[nodiscard]] int verbs_srq_destroy(uint32_t srq);                      // EBUSY while a QP uses it
    [[nodiscard]] int verbs_srq_arm(uint32_t srq, uint32_t limit);          // EINVAL above the depth
    uint32_t verbs_srq_limit(uint32_t srq) const;             // 0: disarmed
    uint32_t verbs_srq_posted(uint32_t srq) const;            // WQEs waiting in it
    [[nodiscard]] int verbs_post_srq_recv(uint32_t srq, const verbs::RecvWr& wr);  // ENOMEM: full
    uint64_t verbs_cq_errors() const { return verbs_cq_errors_; }
    // IPv4-mapped GID -> the peer's MAC and IP, through the executor's resolve_mac.
    bool resolve_gid(const verbs::Gid& gid, NicAddress* out) const;

    // Events a polling host could notice: host-window writes by the firmware and received
    // control datagrams. A virtual-time waiter stops when this changes. One counter, read per
    // delivered packet by the simulator's run-ahead, written by whichever thread made the event.
    uint64_t host_events() const { return host_events_.load(std::memory_order_acquire); }
    void note_host_event()
    {
        host_events_.fetch_add(1, std::memory_order_release);
        if (event_sink_) event_sink_->fetch_add(1, std::memory_order_release);
    }
    // Also count host events in *sink (a fabric's count over all its NICs; nullptr: no more).
    void count_host_events_in(std::atomic<uint64_t>* sink) { event_sink_ = sink; }

    // Host → firmware: a send doorbell for SDR QP qp_index.
    void doorbell(uint32_t qp_index);
    void timer_fired(uint32_t worker, uint32_t id);
    // The firmware's receive handler on DPA worker `worker` (inline, or on the worker's thread:
    // it touches only firmware receive state, with atomics, and that worker's counters).
    void run_rx_cqe(uint32_t worker, const hal_cqe& cqe);
    // A receive CQE the executor could not queue (its DPA thread's CQ was full): counted.
    void cq_overflow() { drop(RxDrop::CqOverflow, nullptr); }

    // HAL entry points (hal_emu.cpp forwards here). Inline: the firmware posts every packet.
    // A burst of WQEs into the send queue; returns how many were taken (a WQE for a dead QP is
    // taken and discarded, not retried forever), stopping at the first whose QP's queue is full.
    [[nodiscard]] uint32_t hal_tx_post(hal_worker*, const hal_tx_wqe* wqe, uint32_t n)
    {
        TransportQp* const qps = qps_.data();
        const size_t nqps = qps_.size();
        const bool was_empty = sq_ring_.empty();
        const auto back = sq_ring_.reserve(n);
        uint32_t i = 0, queued = 0;
        for (; i < n; i++) {
            const hal_tx_wqe& w = wqe[i];
            if (w.qp >= nqps || !qps[w.qp].live) {
                port_.tx_local_errors++;
                continue;
            }
            TransportQp& q = qps[w.qp];
            if (q.sq_used >= kSqDepth) {
                q.sq_blocked = true;
                break;
            }
            q.sq_used++;
            // Field by field: the firmware has just stored the WQE so, and a wider load spanning
            // two of its stores waits for them to retire (store-to-load forwarding fails); perf
            // put half of this function's samples on such a load when the struct was copied
            // whole. The empty asm keeps the compiler from merging 4-byte loads into 8-byte ones.
            uint32_t qp = w.qp, imm = w.imm, lkey = w.lkey, length = w.length, rkey = w.rkey, cookie = w.cookie;
            asm("" : "+r"(qp), "+r"(imm), "+r"(lkey), "+r"(length), "+r"(rkey), "+r"(cookie));
            hal_tx_wqe& e = back[queued++];
            e.qp = qp;
            e.imm = imm;
            e.local_addr = w.local_addr;
            e.lkey = lkey;
            e.length = length;
            e.remote_va = w.remote_va;
            e.rkey = rkey;
            e.cookie = cookie;
            e.signaled = w.signaled;
        }
        sq_ring_.commit(queued);
        if (was_empty && queued) exec_->tx_ready(*this);
        return i;
    }

    const PortCounters& counters() const { return port_; }
    const QpCounters* qp_counters(uint32_t handle) const;
    // f(tag, counters) for every live transport QP (counter reports).
    template <class F>
    void for_each_qp(F&& f) const
    {
        for (const TransportQp& q : qps_)
            if (q.live) f(q.tag, q.counters);
    }
    // DPA worker i's counters: a snapshot summed over its two contexts (worker.hpp).
    hal_worker worker(uint32_t i) const;
    // Sum of one firmware counter over all workers; safe while handlers run on other threads.
    uint64_t fw_counter(uint32_t counter) const;

private:
    void prefetch_payload(const hal_tx_wqe& w) const;
    // Table entries keep their last identifier when they die, so the next one differs from it.
    struct MemoryRegion {
        uint8_t* addr = nullptr;
        uint64_t len = 0;
        uint32_t lkey = 0;
        bool live = false;
    };
    struct RootEntry {
        uint8_t* addr = nullptr;  // nullptr: NULL key, payload discarded
        uint64_t len = 0;
        uint32_t lkey = 0;
    };
    struct RootKey {
        bool live = false;
        uint32_t rkey = 0;
        uint32_t slot_shift = 0;  // log2(slot_bytes) when a power of two, else 0
        uint64_t slot_bytes = 0;
        std::vector<RootEntry> entries;
    };
    // A UDP source port no frame carries: the peer port of a QP that is not connected.
    static constexpr uint32_t kNoPeer = 0x10000;
    struct TransportQp {
        bool live = false;
        uint32_t qpn = 0;
        uint32_t tag = 0, channel = 0, rkey = 0;
        uint32_t remote_qpn = 0, remote_ip = 0, psn = 0;
        std::array<uint8_t, 6> remote_mac{};
        uint32_t peer_port = kNoPeer;  // udp_src_port(remote_qpn) once connected
        uint32_t sq_used = 0;     // WQEs queued or in the port (RC: until acknowledged)
        bool sq_blocked = false;  // firmware was refused: doorbell when space frees
        bool rc = false;
        QpCounters counters;
        // RC requester (nic_sdr_rc.cpp): PSNs [una, psn) are sent and not acknowledged, their
        // WQEs in sent[psn % kSqDepth] (sq_used bounds them); resend is the next to send again.
        bool rc_failed = false;      // retries exhausted or a NAK: every WQE completes in error
        bool resend_queued = false;  // in rc_resends_
        bool timer_armed = false;    // the executor holds a timer for this QP
        uint32_t una = 0, resend = 0, retry_left = 0, in_port = 0;  // in_port: between tx_next and tx_done
        uint64_t rc_timeout_ns = 0, timer_ns = 0;  // timer_ns: the deadline in force, 0: none
        std::vector<hal_tx_wqe> sent;
        // RC responder: the expected PSN, messages received (AETH MSN), packets since the last ACK
        bool ack_queued = false, nak_sent = false;
        uint8_t nak_code = 0;  // 1 + the NAK code the queued response carries, 0: an ACK
        uint32_t epsn = 0, msn = 0, unacked_rx = 0;
    };

    struct CtrlQp {
        bool live = false;
        uint32_t qpn = 0, qkey = 0;
        NicAddress peer;
        uint32_t peer_qpn = 0, peer_port = kNoPeer;
        std::vector<std::vector<uint8_t>> ring;  // kCtrlRingDepth datagrams
        std::vector<uint32_t> len;
        uint64_t head = 0, tail = 0;
    };
    struct CtrlSend {
        PacketMeta meta;
        uint32_t handle = 0, remote_ip = 0;
        std::array<uint8_t, 6> remote_mac{};
        std::array<uint8_t, kCtrlMaxBytes> data;
    };

    // ---- verbs objects ----
    struct VerbsPd {
        bool live = false;
        uint32_t users = 0;
    };
    // A root-key entry of an indirect region: a range of a direct region of the same PD, by
    // key (a region deregistered since no longer resolves); key 0 is the NULL key.
    struct VerbsRootEntry {
        uint32_t key = 0;
        uint64_t addr = 0, len = 0;
    };
    struct VerbsMr {
        bool live = false;
        uint32_t key = 0, pd = 0, access = 0;
        uint8_t* addr = nullptr;
        uint64_t len = 0;
        uint64_t iova = 0;  // where remote requests address addr
        // [va, va + n) of a remote request inside the region: where it lands, else nullptr.
        uint8_t* remote(uint64_t va, uint64_t n) const
        {
            return va < iova || n > len || va - iova > len - n ? nullptr : addr + (va - iova);
        }
        // Indirect (a root key, verbs_root_key_create): slot_bytes != 0, addr/len unused. A
        // write at zero-based va lands in entry va / slot_bytes, offset va % slot_bytes.
        uint64_t slot_bytes = 0;
        std::vector<VerbsRootEntry> entries;
    };
    struct VerbsAh {
        bool live = false;
        uint32_t pd = 0;
        NicAddress dst;
    };
    struct VerbsCq {
        explicit VerbsCq(uint32_t depth) : ring(depth) {}
        verbs::SpscRing<verbs::Wc> ring;
        bool overflowed = false;
        uint32_t users = 0;
    };
    struct VerbsSrq {
        VerbsSrq(uint32_t pd_, uint32_t depth, uint32_t limit_) : ring(depth), pd(pd_), limit(limit_) {}
        verbs::SpscRing<verbs::RecvWr> ring;  // the host posts under the lock, the NIC takes
        uint32_t pd = 0, limit = 0, users = 0;
    };
    struct VerbsSend {
        verbs::SendWr wr;
        uint32_t total = 0;  // bytes of the message (sum of its SGEs)
        uint32_t psn = 0;     // RC: the PSN of its first packet (a READ: of its first response)
        uint32_t rd_done = 0; // RC READ: response bytes landed
        bool sent = false;    // RC: its first packet went out (psn is valid)
    };
    // RC responder output: an ACK/NAK (one packet) or a READ's responses (one per MTU).
    struct RcResp {
        bool read = false;
        uint32_t psn = 0, aeth = 0;       // ACK/NAK; READ: the PSN of its first response
        uint32_t key = 0, len = 0, off = 0;  // READ: rkey, length, bytes sent
        uint64_t va = 0;
    };
    struct VerbsQp {
        VerbsQp(uint32_t sq_depth, uint32_t rq_depth) : sq(sq_depth), rq(rq_depth) {}
        bool live = true;
        verbs::QpType type = verbs::QpType::Uc;
        verbs::QpState state = verbs::QpState::Reset;
        uint32_t qpn = 0, pd = 0, send_cq = 0, recv_cq = 0;
        uint32_t access = 0, qkey = 0, pmtu = 4096;
        uint32_t sq_psn = 0, epsn = 0, dest_qpn = 0;
        NicAddress remote;
        verbs::SpscRing<VerbsSend> sq;
        verbs::SpscRing<verbs::RecvWr> rq;
        // Requester: sq tail <= sq_next <= head. Entries before sq_next have every packet out;
        // UC/UD retire one when its last packet leaves (tx_done), RC when it is acknowledged.
        uint64_t sq_next = 0;
        uint32_t wqe_off = 0;  // bytes of WQE sq_next already sent
        bool queued = false;   // its handle is in verbs_active_ (a new QP in the entry inherits it)
        // UC responder: the message in progress (a SEND fills rq.front()).
        bool in_msg = false, msg_write = false;
        uint32_t msg_off = 0;      // bytes received of it
        uint64_t write_va = 0;     // WRITE: RETH of its FIRST
        uint32_t write_len = 0, write_key = 0;
        verbs::QpCountersVerbs counters;
        // SRQ-attached: the SRQ, and the WQE taken from it for the message in progress (taken at
        // its first packet, so that the QP's MIDDLE and LAST find it while other QPs take more).
        uint32_t srq = kNoHandle;
        bool srq_bound = false;
        verbs::RecvWr srq_wqe;
        // RC attributes (QpAttr)
        uint8_t timeout = 0, retry_cnt = 0, rnr_retry = 0, min_rnr_timer = 0, max_rd = 0, max_dest_rd = 0;
        // RC requester: PSNs [una, psn_high) are sent and not yet acknowledged; sq_psn is the next
        // to send (behind psn_high after a go-back-N rewind).
        uint32_t una = 0, psn_high = 0;
        uint32_t retry_left = 0, rnr_left = 0, rd_out = 0;  // rd_out: READs sent, not complete
        bool rnr_wait = false;                               // after an RNR NAK until its timer
        uint32_t rd_rewound = 0xFFFFFFFF;  // a READ's missing response PSN already asked again
        uint64_t timer_ns = 0;   // the retransmission (or RNR wait) deadline, 0: none
        uint64_t timer_set = 0;  // the executor's timer pending for this QP, 0: none
        // RC responder
        uint32_t msn = 0;        // messages completed (AETH MSN)
        bool nak_sent = false;   // a NAK went out: no other until the expected PSN arrives
        std::vector<RcResp> resp;  // kRcRespDepth entries (RC QPs only)
        uint32_t resp_head = 0, resp_n = 0, rd_queued = 0;
    };
    VerbsMr* verbs_mr(uint32_t key)
    {
        uint32_t i = NicIds::lkey_index(key);
        if (i >= vmrs_.size() || !vmrs_[i].live || vmrs_[i].key != key) return nullptr;
        return &vmrs_[i];
    }
    // Where a WRITE of write_len bytes at va through key lands, for QP q: *dst is byte 0 of the
    // write in host memory, nullptr for a root key's NULL entry (discard). Drop reason, or
    // RxDrop::Count when the write is allowed.
    RxDrop verbs_write_target(const VerbsQp& q, uint32_t key, uint64_t va, uint64_t write_len, uint8_t** dst);
    VerbsQp* vqp(uint32_t h) const { return h < vqps_.size() ? vqps_[h].get() : nullptr; }
    // Every SGE of a WQE inside a live region of pd (with `access`); its bytes in *total.
    bool verbs_sges_ok(uint32_t pd, const verbs::Sge* sg, uint32_t n, uint32_t access, uint32_t* total);
    // Copy len bytes to offset `off` of the scatter list (checked with verbs_sges_ok).
    static void verbs_scatter(const verbs::RecvWr& r, uint32_t off, const uint8_t* src, uint32_t len);
    void verbs_complete(uint32_t cq, const verbs::Wc& wc);
    // The receive WQE the QP's next (or current) message fills: its receive queue's head, or
    // one bound from its SRQ (taken now if none is bound); nullptr if there is none.
    // verbs_rq_take consumes it once the message completes; verbs_rq_pd is the PD its SGEs
    // belong to (the SRQ's for an SRQ's WQE).
    const verbs::RecvWr* verbs_rq_head(VerbsQp& q);
    void verbs_rq_take(VerbsQp& q);
    uint32_t verbs_rq_pd(const VerbsQp& q) const { return q.srq == kNoHandle ? q.pd : vsrqs_[q.srq]->pd; }
    void verbs_flush(VerbsQp& q);  // ERR: every queued WQE completes with WR_FLUSH_ERR
    void verbs_doorbell(uint32_t h);  // the QP has send work: into verbs_active_
    bool verbs_has_tx(const VerbsQp& q) const;
    // The bytes [off, off + len) of a send WQE's gather list: in place, or in verbs_gather_.
    const uint8_t* verbs_payload(const verbs::SendWr& w, uint32_t off, uint32_t len);
    static uint8_t verbs_data_opcode(verbs::WrOpcode op, bool first, bool last, bool rc);
    bool verbs_tx_next(TxPacket* out);
    void verbs_tx_done(const TxPacket& p);
    size_t verbs_encode(const TxPacket& p, uint8_t* out, size_t cap) const;
    // hd: the decoded headers: the RETH's DMA length (a WRITE FIRST's is the message's, a READ
    // request's the READ's; m.dma_len is the payload's), the AETH, the AckReq bit
    void verbs_receive(const PacketMeta& m, const uint8_t* payload, const NicAddress& src, const uint8_t* ip_header,
                       const wire::Headers& hd);
    void uc_receive(VerbsQp& q, const PacketMeta& m, const uint8_t* payload, const NicAddress& src,
                    uint32_t reth_len);
    void ud_receive(VerbsQp& q, const PacketMeta& m, const uint8_t* payload, const uint8_t* ip_header);
    void verbs_drop(RxDrop d, VerbsQp* q);
    // ---- RC (nic_rc_requester.cpp, nic_rc_responder.cpp, nic_rc_read.cpp) ----
    static uint32_t rc_npkts(uint32_t len, uint32_t pmtu) { return len ? (len + pmtu - 1) / pmtu : 1; }
    void rc_receive(VerbsQp& q, uint32_t h, const PacketMeta& m, const uint8_t* payload, const NicAddress& src,
                    const wire::Headers& hd);
    bool rc_tx_next(VerbsQp& q, uint32_t h, TxPacket* out);  // responses first, then requests
    bool rc_requester_ready(const VerbsQp& q) const;
    void rc_ack_received(VerbsQp& q, uint32_t h, uint32_t psn, uint32_t aeth);
    bool rc_retire(VerbsQp& q, uint32_t h, uint32_t psn);  // every PSN up to psn acknowledged
    void rc_rewind(VerbsQp& q, uint32_t h, uint32_t psn);  // go-back-N to psn
    void rc_fail(VerbsQp& q, uint64_t idx, verbs::WcStatus st);  // WQE idx fails: QP to ERR
    void rc_enter_err(VerbsQp& q);
    void rc_arm(VerbsQp& q, uint32_t h, uint64_t deadline_ns);
    void rc_timer(uint32_t h);
    void rc_request(VerbsQp& q, uint32_t h, const PacketMeta& m, const uint8_t* payload, const wire::Headers& hd);
    void rc_queue_ack(VerbsQp& q, uint32_t h, uint32_t psn, uint32_t syndrome);
    void rc_responder_error(VerbsQp& q, uint32_t h, uint32_t psn, uint32_t nak_code);
    bool rc_resp_next(VerbsQp& q, uint32_t h, TxPacket* out);
    void rc_read_request(VerbsQp& q, uint32_t h, const PacketMeta& m, const wire::Headers& hd, bool duplicate);
    void rc_read_response(VerbsQp& q, uint32_t h, const PacketMeta& m, const uint8_t* payload, uint32_t aeth);

    RootKey* root_key(uint32_t rkey)  // inline: the responder looks one up per packet
    {
        uint32_t i = NicIds::root_key_index(rkey);
        if (i >= root_keys_.size() || !root_keys_[i].live || root_keys_[i].rkey != rkey) return nullptr;
        return &root_keys_[i];
    }
    void ctrl_receive(const PacketMeta& m, const uint8_t* payload, const NicAddress& src);
    // The receive path's steps are hidden (never called from outside libsdr, so never
    // interposed): the compiler may then inline them into rx_packet, which it flattens.
    [[gnu::visibility("hidden")]] void respond(const PacketMeta& m, const uint8_t* payload, const NicAddress& src);  // the UC responder
    // The root key's placement and the receive CQE of one WRITE-with-immediate; false: dropped.
    [[gnu::visibility("hidden")]] bool place(TransportQp& qp, const PacketMeta& m, const uint8_t* payload);
    void complete_send(TransportQp& q, uint32_t cookie, bool signaled, bool error);
    void tx_done_other(const TxPacket& p);  // a control, verbs or RC-ACK packet left the port
    // ---- SDR's RC transport QPs (nic_sdr_rc.cpp) ----
    void sdr_rc_sent(TransportQp& q, uint32_t h, const hal_tx_wqe& w, TxPacket* out);
    bool sdr_rc_tx_next(TxPacket* out);  // queued ACKs/NAKs, then packets sent again
    void sdr_rc_receive(TransportQp& q, uint32_t h, const PacketMeta& m, const uint8_t* payload);
    void sdr_rc_ack(const PacketMeta& m, uint32_t aeth, const NicAddress& src);
    void sdr_rc_queue_ack(TransportQp& q, uint32_t h, uint8_t nak_code);
    void sdr_rc_retire(TransportQp& q, uint32_t through_psn);
    void sdr_rc_rewind(TransportQp& q, uint32_t h, uint32_t psn);
    void sdr_rc_fail(TransportQp& q);
    void sdr_rc_arm(TransportQp& q, uint32_t h);
    void sdr_rc_timer(uint32_t h);
    void drop(RxDrop d, TransportQp* qp);
    hal_worker* tx_worker(uint32_t qp_index) { return workers_[qp_index % workers_.size()].get(); }

    uint32_t index_;
    NicAddress addr_;
    bool payload_;
    bool tx_prefetch_ = false;
    bool cqe_dispatch_ = false;
    NicExecutor* exec_;
    // One record per DPA worker and context (worker.hpp): workers_ for send completions,
    // doorbells and timers (under the executor's lock), rx_workers_ for the receive handler
    // (run_rx_cqe, on the worker's own thread when the executor has worker threads).
    std::vector<std::unique_ptr<hal_worker>> workers_;
    std::vector<std::unique_ptr<hal_worker>> rx_workers_;
    std::vector<MemoryRegion> mrs_;
    std::vector<RootKey> root_keys_;
    std::vector<TransportQp> qps_;
    FifoRing<hal_tx_wqe> sq_ring_;  // every transport QP's WQEs, in posting order
    std::deque<uint32_t> rc_acks_, rc_resends_;  // RC transport QPs with an ACK / packets to send again
    std::vector<CtrlQp> ctrl_qps_;
    std::vector<CtrlSend> ctrl_sq_;  // kCtrlSqDepth; entries live until tx_done
    uint64_t ctrl_head_ = 0, ctrl_next_ = 0, ctrl_done_ = 0;
    fw_device* fw_ = nullptr;
    uint64_t nic_mem_bytes_ = 0;
    NicIds ids_;
    PortCounters port_;
    std::atomic<uint64_t> host_events_{0};
    std::atomic<uint64_t>* event_sink_ = nullptr;
    // The verbs device (after SDR's state, which the per-packet path touches).
    std::vector<VerbsPd> vpds_;
    std::vector<VerbsMr> vmrs_;
    std::vector<VerbsAh> vahs_;
    std::vector<std::unique_ptr<VerbsCq>> vcqs_;
    std::vector<std::unique_ptr<VerbsSrq>> vsrqs_;
    std::vector<std::unique_ptr<VerbsQp>> vqps_;
    // Verbs QPs with packets to send, served in turn: a ring of handles, each at most once (its
    // queued flag), so as many entries as QP entries suffice.
    FifoRing<uint32_t> verbs_active_{16};  // verbs QP handles with send work, in turn
    bool verbs_turn_ = false;  // toggled per packet while both SDR and verbs have work
    std::array<uint8_t, 4096> verbs_gather_{};  // a packet spanning SGEs, until it is encoded
    uint64_t verbs_cq_errors_ = 0;
};

}  // namespace sdr::emu
