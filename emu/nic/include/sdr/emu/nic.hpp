// The emulated SmartNIC with SDR's engine: memory regions, UC and RC transport QPs, root keys,
// the UC responder that places payload and raises one CQE per packet, the emulated DPA workers
// that run the firmware per CQE, the send engine that turns firmware WQEs into packets, control
// QPs and counters. The verbs device (RC/UC/UD QPs for libibverbs) is the other engine,
// verbs_engine.hpp, attached on first use (verbs()); this header does not include it.
// Executor-agnostic: the simulator (or a real-time loop) calls rx_*/tx_* and provides time.
#pragma once

#include <sdr/emu/dcqcn.hpp>
#include <sdr/emu/fifo_ring.hpp>
#include <sdr/emu/nic_core.hpp>
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

class VerbsEngine;

class Nic : public NicCore {
public:
    static constexpr uint32_t kSqDepth = 512;
    // SDR's RC transport QPs (nic_sdr_rc.cpp): their retransmission timers (id: the QP handle),
    // an ACK at least every kSdrRcAckEvery packets, retries before the QP fails.
    static constexpr uint32_t kSdrRcTimerWorker = 0xFFFE;
    static constexpr uint32_t kSdrRcAckEvery = 16;
    static constexpr uint32_t kSdrRcRetries = 7;
    static constexpr uint64_t kSdrRcDefaultTimeoutNs = 10'000'000;
    static constexpr uint32_t kDcqcnTimerWorker = NicCore::kDcqcnTimerWorker;

    // id_seed: QPNs, keys and Q_Keys drawn from a generator with this seed (replayable runs);
    // nullopt: from getrandom() (ids.hpp).
    Nic(uint32_t index, NicAddress addr, uint32_t num_workers, bool payload, NicExecutor* exec,
        std::optional<uint64_t> id_seed);
    ~Nic();

    // The verbs device of this NIC (verbs_engine.hpp), attached on the first call (nic_verbs.cpp).
    VerbsEngine& verbs();
    // Read each next packet's payload ahead while the current frame is encoded (see tx_next).
    // It pays only where frames are built from user memory on a real port: the real-time NIC
    // turns it on; the simulator never pays for memory it does not read.
    void set_tx_prefetch(bool on) { tx_prefetch_ = on && payload_; }
    // Offer each receive CQE to the executor (NicExecutor::dispatch_rx_cqe) before running its
    // handler inline: for executors with worker threads. Off, no virtual call per packet.
    void set_cqe_dispatch(bool on) { cqe_dispatch_ = on; }
    uint32_t num_workers() const { return static_cast<uint32_t>(workers_.size()); }
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
    // the remote QP: its MAC, its IP and the UDP source port of the pair of QPNs (udp_src_port).
    // rc_timeout_ns: an RC QP's retransmission timeout (0: kSdrRcDefaultTimeoutNs).
    [[nodiscard]] uint32_t qp_create(uint32_t tag, uint32_t channel, bool rc = false);
    void qp_destroy(uint32_t handle);
    uint32_t qpn(uint32_t handle) const { return handle < qps_.size() ? qps_[handle].rx.qpn : 0; }
    bool qp_is_rc(uint32_t handle) const { return handle < qps_.size() && qps_[handle].rc; }
    [[nodiscard]] bool qp_connect(uint32_t handle, const NicAddress& remote, uint32_t remote_qpn, uint64_t rc_timeout_ns = 0);
    void qp_bind_root_key(uint32_t handle, uint32_t rkey);
    // DCQCN (dcqcn.hpp, nic_dcqcn.cpp), NIC-wide; off by default. On: every data packet of SDR's
    // transport QPs and of the verbs engine's RC/UC/UD QPs leaves ECT(0); a CE-marked one makes
    // this NIC (the notification point) send a CNP to its sender, at most one per QP per
    // p.cnp_interval_ns; a CNP cuts the named QP's rate (the reaction point), and the send
    // engines pace each QP's packets at that rate (its line rate: p.line_gbps). The transport
    // QPs of one NIC share one send queue in post order, so a QP that must wait holds the QPs
    // behind it (one flow per NIC and peer, as SDR's channels to one peer are); a paced verbs
    // QP lets the other verbs QPs go. Both ends should run it: a CNP to a NIC without DCQCN is a
    // counted drop (wrong_opcode). Resets every QP's rate to line rate.
    void set_dcqcn(const DcqcnParams& p);
    const DcqcnParams& dcqcn() const { return dcqcn_; }
    // A transport QP's current DCQCN rate (Gbit/s) at the executor's now; 0: no such QP.
    double qp_dcqcn_rate_gbps(uint32_t handle);
    // Packet spraying (ids.hpp sprayed_udp_src_port): the QP sends each packet from another UDP
    // source port of 0xC000-0xFFFF, and accepts its peer's frames from any of them (MAC, IP
    // and QPN still checked). Both ends of a connection must agree: a QP that does not spray
    // drops a spraying peer's frames as wrong_peer. For transports that tolerate reordering
    // (SDR's UC QPs); an RC QP sees the reordering of diverse paths as loss. False: no such QP.
    [[nodiscard]] bool qp_set_spray(uint32_t handle, bool on);
    uint32_t qp_root_key(uint32_t handle) const { return handle < qps_.size() ? qps_[handle].rx.rkey : 0; }

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
        return !sq_ring_.empty() || ctrl_next_ != ctrl_head_ || engine_tx_ || rc_queued_ || !cnps_.empty();
    }
    [[nodiscard]] bool tx_next(TxPacket* out);
    // Start loading the send queue's next n WQEs into the cache: a port calls it before the work
    // that precedes its tx_next calls (with many NICs each WQE is a cache miss).
    void tx_prefetch_wqes(size_t n) const
    {
        for (size_t k = 0; k < n && k < sq_ring_.size(); k++) __builtin_prefetch(&sq_ring_.at(k));
    }
    // The packets left the port (or failed locally), in the order tx_next gave them.
    void tx_done(const TxPacket* batch, size_t n);
    void tx_done(const TxPacket& p) { tx_done(&p, 1); }
    // Encode the whole frame of p (headers, payload, ICRC); returns bytes, 0 if cap too small.
    size_t tx_encode(const TxPacket& p, uint8_t* out, size_t cap) const;
    // Bytes of the frame tx_encode makes of a control or verbs packet (a verbs pad included).
    static size_t other_frame_bytes(const TxPacket& p)
    {
        return p.kind == TxPacket::Kind::Ctrl ? wire::frame_bytes_ud_send(p.meta.dma_len) : padded_frame_bytes(p);
    }

    // Control QPs: the small datagram channel beside each SDR QP (arXiv 2505.05366, the
    // paper's UD control QP). Datagrams travel as RoCEv2 UD SEND Only frames with a DETH over
    // the same port and link as data, ahead of queued data packets (strict priority), and always
    // with their payload, also in payload-free runs: the host reads them. Received datagrams are
    // copied into a bounded ring per control QP that the host drains.
    static constexpr uint32_t kCtrlQpnBase = NicIds::kCtrlQpnBit;  // control QPNs have bit 23 set
    static constexpr uint32_t kCtrlMaxBytes = 4096;
    // Received, not yet read by the host: a 25 ms path at RTT/64 ACK pacing with 8 messages in
    // flight brings about 512 a RTT, and a host thread not scheduled for milliseconds reads none.
    static constexpr uint32_t kCtrlRingDepth = 4096;
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

    std::optional<QpCounters> qp_counters(uint32_t handle) const;
    // f(tag, counters) for every live transport QP (counter reports).
    template <class F>
    void for_each_qp(F&& f) const
    {
        for (const TransportQp& q : qps_)
            if (q.live) f(q.tag, q.counters());
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
    // A transport QP in two cache lines: what the send engine and the port's completions read
    // and update per packet, and what the responder does (rx). With 128 NICs every line a
    // packet touches misses the caches (cachegrind: the entry, 288 bytes with its hot fields
    // over three lines, cost five misses per packet); so each side reads one line, and the few
    // fields both sides check (live, rc, the peer's address, the tag) are kept in both.
    struct alignas(64) TransportQp {
        bool live = false;
        bool rc = false;
        bool rc_failed = false;   // RC: retries exhausted or a NAK: every WQE completes in error
        bool spray = false;
        bool sq_blocked = false;  // firmware was refused: doorbell when space frees
        uint16_t conn_port = 0xC000;  // udp_src_port(qpn, remote_qpn): this QP's frames
        uint32_t remote_qpn = 0, psn = 0, remote_ip = 0;
        std::array<uint8_t, 6> remote_mac{};
        uint32_t spray_n = 0;  // packets sprayed: the next one's port
        uint32_t sq_used = 0;  // WQEs queued or in the port (RC: until acknowledged)
        uint32_t tag = 0;
        uint32_t in_port = 0;  // RC: WQEs between tx_next and tx_done
        uint64_t tx_packets = 0, tx_bytes = 0;
        struct alignas(64) Rx {
            bool live = false, rc = false;
            // What the peer's frames must carry: (port | port_mask) == peer_port. Connected:
            // udp_src_port(qpn, remote_qpn) and mask 0, or spraying kSprayPeerPort, kSprayPortMask.
            uint16_t port_mask = 0;
            uint32_t qpn = 0;
            uint32_t peer_port = kNoPeer;
            uint32_t remote_ip = 0;
            std::array<uint8_t, 6> remote_mac{};
            uint32_t rkey = 0, channel = 0, tag = 0;
            uint64_t packets = 0, drops = 0, null_key = 0;
        } rx;
        uint64_t tx_retransmits = 0;
        // RC requester (nic_sdr_rc.cpp): PSNs [una, psn) are sent and not acknowledged, their
        // WQEs in sent[psn % kSqDepth] (sq_used bounds them); resend is the next to send again.
        bool resend_queued = false;  // in rc_resends_
        bool timer_armed = false;    // the executor holds a timer for this QP
        uint32_t una = 0, resend = 0, retry_left = 0;
        uint64_t rc_timeout_ns = 0, timer_ns = 0;  // timer_ns: the deadline in force, 0: none
        std::vector<hal_tx_wqe> sent;
        // RC responder: the expected PSN, messages received (AETH MSN), packets since the last ACK
        bool ack_queued = false, nak_sent = false;
        uint8_t nak_code = 0;  // 1 + the NAK code the queued response carries, 0: an ACK
        uint32_t epsn = 0, msn = 0, unacked_rx = 0;
        // DCQCN (nic_dcqcn.cpp): the time the next packet may leave and the sender's rate, what
        // every packet reads, on a line of their own (DcqcnRp's per-packet fields come first);
        // the receiver's CNP limit.
        alignas(64) uint64_t next_send_ns = 0;
        DcqcnRp rp;
        DcqcnNp np;

        void set_live(bool on) { live = rx.live = on; }
        QpCounters counters() const
        {
            return QpCounters{rx.packets, rx.drops, rx.null_key, tx_packets, tx_bytes, tx_retransmits};
        }
    };
    static_assert(sizeof(TransportQp::Rx) == 64, "the responder's fields take one cache line");
    struct CtrlQp {
        bool live = false;
        uint32_t qpn = 0, qkey = 0;
        NicAddress peer;
        uint32_t peer_qpn = 0, peer_port = kNoPeer;
        std::vector<std::vector<uint8_t>> ring;  // up to kCtrlRingDepth datagrams, added as first used
        std::vector<uint32_t> len;
        uint64_t head = 0, tail = 0;
    };
    struct CtrlSend {  // its datagram's bytes: ctrl_data(slot)
        PacketMeta meta;
        uint32_t handle = 0, remote_ip = 0;
        std::array<uint8_t, 6> remote_mac{};
    };
    uint8_t* ctrl_data(uint64_t slot) const { return ctrl_data_.get() + (slot % kCtrlSqDepth) * kCtrlMaxBytes; }

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
    // ---- DCQCN (nic_dcqcn.cpp) ----
    [[gnu::cold, gnu::noinline]] void dcqcn_notify(TransportQp& q);  // NP: a CE-marked packet for q
    void dcqcn_cnp(const PacketMeta& m, const NicAddress& src);   // RP: a CNP arrived
    bool dcqcn_may_send(const TransportQp& q, uint64_t now_ns)  // false: paced, wake-up armed
    {
        return !q.live || dcqcn_due(q.next_send_ns, now_ns);
    }
    // Not inline: the send engine's path without DCQCN keeps its registers.
    [[gnu::noinline]] void dcqcn_sent(TransportQp& q, PacketMeta& m);  // ECT(0), the rate's next slot
    bool cnp_tx_next(TxPacket* out);
    // The UDP source port of a transport QP's next packet: flow entropy, the connection's port
    // as RoCEv2 NICs derive it, or a sprayed one.
    static uint16_t tx_port(TransportQp& q)
    {
        return q.spray ? sprayed_udp_src_port(q.conn_port, q.spray_n++) : q.conn_port;
    }
    hal_worker* tx_worker(uint32_t qp_index) { return &workers_[qp_index % workers_.size()]; }

    // The members every packet reads first, on cache lines of their own (as NicCore's): the
    // receive path reads the first two lines, the send engine the first three.
    alignas(64) bool tx_prefetch_ = false;
    bool cqe_dispatch_ = false;
    bool verbs_turn_ = false;  // toggled per packet while both SDR and verbs have work
    uint32_t rc_queued_ = 0;   // entries of rc_acks_ and rc_resends_: one word for the send engine to test
    std::vector<TransportQp> qps_;
    FifoRing<hal_tx_wqe> sq_ring_;  // every transport QP's WQEs, in posting order
    fw_device* fw_ = nullptr;
    // One record per DPA worker and context (worker.hpp): workers_ for send completions,
    // doorbells and timers (under the executor's lock), rx_workers_ for the receive handler
    // (run_rx_cqe, on the worker's own thread when the executor has worker threads).
    std::vector<hal_worker> rx_workers_;
    std::vector<RootKey> root_keys_;
    uint64_t ctrl_head_ = 0, ctrl_next_ = 0;
    std::vector<MemoryRegion> mrs_;
    uint64_t ctrl_done_ = 0;
    std::deque<uint32_t> rc_acks_, rc_resends_;  // RC transport QPs with an ACK / packets to send again
    std::vector<hal_worker> workers_;
    std::vector<CtrlQp> ctrl_qps_;
    std::vector<CtrlSend> ctrl_sq_;  // kCtrlSqDepth from the first control QP; entries live until tx_done
    // The datagrams' bytes, kCtrlMaxBytes a slot, never cleared: a slot's pages are taken when a
    // datagram first fills them, so a NIC that sends a few small datagrams keeps 256 KiB free.
    std::unique_ptr<uint8_t[]> ctrl_data_;
    uint64_t nic_mem_bytes_ = 0;
};

}  // namespace sdr::emu
