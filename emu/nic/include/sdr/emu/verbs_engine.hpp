// The verbs engine: the NIC as an RDMA device beside SDR's data path, with protection domains,
// memory regions with access flags, address handles, completion queues, shared receive queues
// and RC/UC/UD QPs (objects.cpp, qp.cpp, srq.cpp; the requester tx.cpp, receive dispatch rx.cpp,
// the transport rules uc.cpp, ud.cpp, rc_requester.cpp, rc_responder.cpp, rc_read.cpp,
// rc_atomic.cpp in src/verbs/). It uses the NIC core (nic_core.hpp) and never the SDR engine's
// header: the NIC attaches it on first use (Nic::verbs) and hands it its frames, timers and port
// turns.
#pragma once

#include <sdr/emu/dcqcn.hpp>
#include <sdr/emu/fifo_ring.hpp>
#include <sdr/emu/gsi.hpp>
#include <sdr/emu/nic_core.hpp>
#include <sdr/emu/port_share.hpp>
#include <sdr/emu/verbs.hpp>
#include <sdr/emu/wire.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

namespace sdr::emu {

class VerbsEngine final : public NicEngine {
public:
    static constexpr uint32_t kNoHandle = NicCore::kNoHandle;
    static constexpr uint32_t kVerbsQpnBit = NicCore::kVerbsQpnBit;
    static constexpr uint32_t kMaxVerbsQps = NicCore::kMaxVerbsQps;
    static constexpr uint32_t kVerbsTimerWorker = NicCore::kVerbsTimerWorker;

    // nic and core are the same NIC: the one the executor's calls name, and the state shared.
    VerbsEngine(Nic& nic, NicCore& core);
    ~VerbsEngine() override;

    // The NIC as an RDMA device: protection domains, memory regions with access flags, address
    // handles, completion queues and RC/UC/UD QPs, beside SDR's own regions, root keys and QPs
    // (which stay as they are). Failures return an errno value (EINVAL, ENOMEM, EBUSY), as
    // verbs does, or 0 / kNoHandle where a handle or key is returned. Create, modify and destroy
    // run under the executor's lock; post_send/post_recv/cq_poll are one side of a
    // single-producer/single-consumer ring each (verbs.hpp), the NIC the other.
    // A retransmission timeout is 4.096 us * 2^timeout (IBTA), but never below this: a software
    // NIC's polling thread on a shared core stalls for longer than the IBTA's short timeouts.
    static constexpr uint64_t kRcMinTimeoutNs = 1'000'000;
    static constexpr uint32_t kRcAckReqEvery = 64;  // AckReq on every 64th packet of a long message
    static constexpr uint32_t kRcRespDepth = 64;    // queued ACKs/NAKs and READ responses per RC QP
    static constexpr uint32_t kRcMaxRdAtomic = 16;  // max_rd_atomic / max_dest_rd_atomic
    // Atomic results an RC responder keeps (by PSN) to answer a duplicate atomic again without
    // executing it twice: a requester has at most max_rd_atomic (<= 16) READs and atomics
    // outstanding, so the one it sends again is among the last 16 the responder executed.
    static constexpr uint32_t kRcAtomicCache = kRcMaxRdAtomic;
    [[nodiscard]] uint32_t pd_alloc();  // kNoHandle if none left
    [[nodiscard]] int pd_dealloc(uint32_t pd);  // EBUSY while a region, AH or QP uses it
    // A region of `pd` with IBV_ACCESS_* flags: its key serves as lkey and rkey (random, ids.hpp);
    // 0 on failure (remote write without local write is refused, as verbs does). Remote
    // requests address it from iova (ibv_reg_mr_iova; the address itself by default); a region
    // with another iova serves remote requests only, a local SGE naming it is refused.
    [[nodiscard]] uint32_t mr_reg(uint32_t pd, void* addr, size_t len, uint32_t access);
    [[nodiscard]] uint32_t mr_reg(uint32_t pd, void* addr, size_t len, uint32_t access, uint64_t iova);
    [[nodiscard]] int mr_dereg(uint32_t key);  // also destroys a root key
    // ibv_rereg_mr: the region of `key` becomes the given one (its key stays); all or nothing.
    // EINVAL: no such region, a root key, a dead PD, an empty or wrapping range, remote write or
    // atomic without local write; EBUSY: a root key's entry points into it (its range would dangle).
    [[nodiscard]] int mr_rereg(uint32_t key, uint32_t pd, void* addr, size_t len, uint32_t access, uint64_t iova);
    // The equivalent of mlx5's indirect mkey, for SDR over verbs (emu/verbs/SEMANTICS.md, "SDR's
    // root keys"): a remote-write key of `pd` over nslots zero-based slots of slot_bytes, each
    // the NULL key (writes discarded, a WRITE-with-immediate still completes its receive WQE)
    // until set to a range of a region of the same PD. 0 on failure.
    [[nodiscard]] uint32_t root_key_create(uint32_t pd, uint32_t nslots, uint64_t slot_bytes);
    // Point slot at [addr, addr + len) of region mr_key (len <= slot_bytes, inside the region,
    // remote write allowed); EINVAL otherwise. root_key_null: back to the NULL key.
    [[nodiscard]] int root_key_set(uint32_t key, uint32_t slot, uint32_t mr_key, uint64_t addr, uint64_t len);
    [[nodiscard]] int root_key_null(uint32_t key, uint32_t slot);
    // An address handle: the destination GID resolved once to MAC and IP (resolve_gid).
    [[nodiscard]] uint32_t ah_create(uint32_t pd, const verbs::Gid& gid);
    [[nodiscard]] int ah_destroy(uint32_t ah);
    // A completion queue of `depth` entries. Overflow: the completion is lost and the CQ is in
    // error from then on (IBV_EVENT_CQ_ERR): cq_poll returns -1 (cq_overflowed).
    [[nodiscard]] uint32_t cq_create(uint32_t depth);
    [[nodiscard]] int cq_destroy(uint32_t cq);  // EBUSY while a QP uses it
    // ibv_resize_cq: `depth` entries from now on, the completions held kept in order. EINVAL:
    // no such CQ, depth out of 1..2^20, fewer than it holds plus the signaled sends posted on
    // its QPs and not yet complete, or a CQ in error (overrun).
    [[nodiscard]] int cq_resize(uint32_t cq, uint32_t depth);
    // Removes the completions of QP number qpn from cq, keeping the others in order; how many
    // went. For a QP moved to RESET, whose old completions would otherwise greet its new life
    // (mlx4/mlx5 clean their CQs so at RESET and destroy).
    uint32_t cq_clean(uint32_t cq, uint32_t qpn);
    [[nodiscard]] int cq_poll(uint32_t cq, verbs::Wc* wc, int n);  // completions taken, -1: CQ in error
    bool cq_overflowed(uint32_t cq) const;
    // srq: a shared receive queue the QP takes its receives from (kNoHandle: its own receive
    // queue of rq_depth; with an SRQ rq_depth is ignored and post_recv is EINVAL).
    [[nodiscard]] uint32_t qp_create(verbs::QpType type, uint32_t pd, uint32_t send_cq, uint32_t recv_cq,
                             uint32_t sq_depth, uint32_t rq_depth, uint32_t srq = kNoHandle);
    [[nodiscard]] int qp_destroy(uint32_t qp);
    uint32_t qpn(uint32_t qp) const;
    // ibv_modify_qp: RESET->INIT->RTR->RTS, *->ERR (flushes both queues), *->RESET; the
    // attributes each transition needs (emu/nic/VERBS.md), EINVAL otherwise.
    [[nodiscard]] int qp_modify(uint32_t qp, const verbs::QpAttr& attr, uint32_t mask);
    verbs::QpState qp_state(uint32_t qp) const;
    // Packet spraying (ids.hpp sprayed_udp_src_port): each packet from another UDP source port
    // (the provider's SDR_VERBS_SPRAY). Receivers check no verbs port, so only the sender
    // changes. RC sees the reordering of diverse paths as loss (go-back-N). EINVAL: no such QP.
    [[nodiscard]] int qp_set_spray(uint32_t qp, bool on);
    [[nodiscard]] int post_send(uint32_t qp, const verbs::SendWr& wr);  // ENOMEM: send queue full
    [[nodiscard]] int post_recv(uint32_t qp, const verbs::RecvWr& wr);  // ENOMEM: receive queue full
    const verbs::QpCountersVerbs* qp_counters(uint32_t qp) const;
    // Every verbs QP's counters summed since the engine started, destroyed QPs' included: what
    // a device-wide report (the provider's SDR_VERBS_STATS_AT_EXIT) shows after the QPs are gone.
    verbs::QpCountersVerbs qp_counters_total() const;
    // Shared receive queues (srq.cpp): receive WQEs of `pd` that any QP attached to
    // the SRQ consumes, one per message, bound to that QP at the message's first packet. The
    // limit, when armed (non-zero), raises SrqLimitReached once when a QP takes a WQE and fewer
    // than `limit` stay posted, then disarms (reads 0) until armed again (IBTA 10.2.9.4).
    [[nodiscard]] uint32_t srq_create(uint32_t pd, uint32_t depth, uint32_t limit);  // kNoHandle on failure
    [[nodiscard]] int srq_destroy(uint32_t srq);                      // EBUSY while a QP uses it
    [[nodiscard]] int srq_arm(uint32_t srq, uint32_t limit);          // EINVAL above the depth
    uint32_t srq_limit(uint32_t srq) const;             // 0: disarmed
    uint32_t srq_posted(uint32_t srq) const;            // WQEs waiting in it
    [[nodiscard]] int post_srq_recv(uint32_t srq, const verbs::RecvWr& wr);  // ENOMEM: full
    uint64_t cq_errors() const { return verbs_cq_errors_; }
    // Multicast (mcast.cpp; IBTA vol. 1 10.5, RoCEv2 over IPv4: MGID ::ffff:G, G in
    // 224.0.0.0/4). A UD QP joins and leaves a group as ibv_attach_mcast/ibv_detach_mcast do:
    // EINVAL for a QP that is not a live UD QP or a GID that is not an IPv4 multicast group,
    // 0 for a QP already attached (the kernel's uverbs answers so), EINVAL to detach one that
    // is not; ENOMEM past a limit below (the device attributes max_mcast_grp,
    // max_mcast_qp_attach, max_total_mcast_qp_attach). A QP attached to a group is EBUSY to
    // destroy. The NIC's first QP in a group and its last one out tell the executor
    // (NicExecutor::mcast_membership).
    static constexpr uint32_t kMaxMcastGroups = 1024;        // groups with a member on this NIC
    static constexpr uint32_t kMaxMcastQpAttach = 64;        // QPs of this NIC per group
    static constexpr uint32_t kMaxTotalMcastQpAttach = 4096; // attachments over all groups
    [[nodiscard]] int mcast_attach(uint32_t qp, const verbs::Gid& mgid);
    [[nodiscard]] int mcast_detach(uint32_t qp, const verbs::Gid& mgid);
    // The QPs of this NIC attached to group_ip (host order), in attach order; nullptr if none.
    const std::vector<uint32_t>* mcast_qps(uint32_t group_ip) const;
    // IPv4-mapped GID -> the peer's MAC and IP, through the executor's resolve_mac.
    bool resolve_gid(const verbs::Gid& gid, NicAddress* out) const;

    // QP1 (gsi.hpp, src/verbs/gsi.cpp): one management agent (the CM) takes the datagrams to
    // QPN 1 and sends MADs from it; without one, they are `unknown_qp` drops as before.
    // gsi_attach(nullptr) detaches (what was queued still leaves). gsi_send queues one MAD (at
    // most 256 bytes) to QP dest_qpn at dst, ahead of the verbs QPs' packets; false: more than
    // kGsiQueueDepth wait, or too long. gsi_arm_timer: GsiAgent::gsi_timer at deadline_ns
    // (one timer: re-arming replaces). All under the executor's lock.
    static constexpr uint32_t kGsiQueueDepth = 256;
    static constexpr uint32_t kGsiMadBytes = 256;
    static constexpr uint32_t kGsiTimerId = kMaxVerbsQps;  // beside the QP handles' timer ids
    void gsi_attach(GsiAgent* agent) { gsi_ = agent; }
    [[nodiscard]] bool gsi_send(const NicAddress& dst, uint32_t dest_qpn, const uint8_t* mad, uint32_t len);
    void gsi_arm_timer(uint64_t deadline_ns);
    uint64_t now_ns() const;
    const NicAddress& address() const { return addr_; }

    // Other NIC models on this port (port_share.hpp): set by an executor whose port several
    // processes open, before any QP exists; nullptr (the default): this model is alone. QPNs
    // are then claimed from it, and the CM agent asks it who listens.
    void set_port_share(PortShare* share) { share_ = share; }
    PortShare* port_share() const { return share_; }
    // `qpn` names a live verbs QP of this model; is_verbs_qpn: of any model's verbs QPs.
    bool owns_qpn(uint32_t qpn) const;
    static bool is_verbs_qpn(uint32_t qpn)
    {
        return (qpn & NicIds::kCtrlQpnBit) && (NicIds::qpn_index(qpn) & kVerbsQpnBit) && qpn != wire::kMcastQpn;
    }

    // NicEngine: what the NIC hands this engine. hd: the decoded headers: the RETH's DMA length
    // (a WRITE FIRST's is the message's, a READ request's the READ's; m.dma_len is the
    // payload's), the AETH, the AckReq bit.
    void receive(const PacketMeta& m, const uint8_t* payload, const NicAddress& src, const uint8_t* ip_header,
                 const wire::Headers& hd) override;
    [[nodiscard]] bool tx_next(TxPacket* out) override;
    void tx_done(const TxPacket& p) override;
    void timer(uint32_t id) override;
    void dcqcn_reset() override;
    // A QP's current DCQCN rate (Gbit/s) at the executor's now (the line rate while DCQCN is
    // off); 0: no such QP.
    double qp_dcqcn_rate_gbps(uint32_t qp);

private:
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
        // Indirect (a root key, root_key_create): slot_bytes != 0, addr/len unused. A
        // write at zero-based va lands in entry va / slot_bytes, offset va % slot_bytes.
        uint64_t slot_bytes = 0;
        std::vector<VerbsRootEntry> entries;
    };
    struct VerbsAh {
        bool live = false;
        uint32_t pd = 0;
        NicAddress dst;
        bool mcast = false;  // dst is a multicast group: its packets carry QPN 0xFFFFFF
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
        uint32_t total = 0;  // bytes of the message (sum of its SGEs; an atomic: 8)
        uint32_t psn = 0;     // RC: the PSN of its first packet (a READ: of its first response)
        uint32_t rd_done = 0; // RC READ: response bytes landed
        bool sent = false;    // RC: its first packet went out (psn is valid)
        // RC atomic: the AtomicETH's Swap (or Add) and Compare data, host order; the request's
        // TxPacket points here (encode_padded), and the WQE stays until its ATOMIC ACK.
        uint64_t atomic_eth[2] = {};
    };
    // RC responder output: an ACK/NAK (one packet), a READ's responses (one per MTU), or an
    // ATOMIC ACK (one packet: its AtomicAckETH points at orig, encode_padded).
    struct RcResp {
        enum class Kind : uint8_t { Ack, Read, Atomic } kind = Kind::Ack;
        uint32_t psn = 0, aeth = 0;       // ACK/NAK, ATOMIC ACK; READ: the PSN of its first response
        uint32_t key = 0, len = 0, off = 0;  // READ: rkey, length, bytes sent
        uint64_t va = 0;
        uint64_t orig = 0;  // ATOMIC ACK: the value before the atomic
        bool dup = false;   // READ, ATOMIC ACK: the answer to a duplicate request
    };
    // An atomic the RC responder executed: its PSN and the original value it answered.
    struct AtomicResult {
        bool valid = false;
        uint32_t psn = 0;
        uint64_t orig = 0;
    };
    struct VerbsQp {
        VerbsQp(uint32_t sq_depth, uint32_t rq_depth) : sq(sq_depth), rq(rq_depth) {}
        bool live = true;
        verbs::QpType type = verbs::QpType::Uc;
        verbs::QpState state = verbs::QpState::Reset;
        uint32_t qpn = 0, pd = 0, send_cq = 0, recv_cq = 0;
        uint32_t access = 0, qkey = 0, pmtu = 4096;
        uint32_t sq_psn = 0, epsn = 0, dest_qpn = 0;
        bool spray = false;
        uint32_t spray_n = 0;  // packets sprayed: the next one's port
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
        // rd_queued: READs and ATOMIC ACKs queued, rd_dups: those of them answering duplicates
        uint32_t resp_head = 0, resp_n = 0, rd_queued = 0, rd_dups = 0;
        std::vector<AtomicResult> atomic_cache;  // kRcAtomicCache entries (RC QPs only), a ring
        uint32_t atomic_next = 0;                // the ring's next entry
        uint32_t mcast_groups = 0;  // UD: groups it is attached to
        // DCQCN (verbs/dcqcn.cpp): the sender's rate and the time its next data packet may
        // leave; the receiver's CNP limit.
        DcqcnRp rp;
        DcqcnNp np;
        uint64_t next_send_ns = 0;
    };
    VerbsMr* verbs_mr(uint32_t key)
    {
        uint32_t i = NicIds::lkey_index(key);
        if (i >= vmrs_.size() || !vmrs_[i].live || vmrs_[i].key != key) return nullptr;
        return &vmrs_[i];
    }
    // Where a WRITE of write_len bytes at va through key lands, for QP q: *dst is byte 0 of the
    // write in host memory, nullptr for a root key's NULL entry (discard) or a write of zero
    // bytes (no key checked). Drop reason, or RxDrop::Count when the write is allowed.
    RxDrop verbs_write_target(const VerbsQp& q, uint32_t key, uint64_t va, uint64_t write_len, uint8_t** dst);
    VerbsQp* vqp(uint32_t h) const { return h < vqps_.size() ? vqps_[h].get() : nullptr; }
    // The UDP source port of q's next packet to QP dest_qpn: the pair's (ids.hpp), or sprayed.
    static uint16_t tx_port(VerbsQp& q, uint32_t dest_qpn)
    {
        const uint16_t port = udp_src_port(q.qpn, dest_qpn);
        return q.spray ? sprayed_udp_src_port(port, q.spray_n++) : port;
    }
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
    bool next_packet(TxPacket* out);  // tx_next without the NIC's flag
    // The bytes [off, off + len) of a send WQE's gather list: in place, or in verbs_gather_.
    const uint8_t* verbs_payload(const verbs::SendWr& w, uint32_t off, uint32_t len);
    static uint8_t verbs_data_opcode(verbs::WrOpcode op, bool first, bool last, bool rc);
    void uc_receive(VerbsQp& q, const PacketMeta& m, const uint8_t* payload, const NicAddress& src,
                    uint32_t reth_len);
    // src: the frame's source, nullptr for a multicast group's copy (no CNP for those).
    void ud_receive(VerbsQp& q, const PacketMeta& m, const uint8_t* payload, const uint8_t* ip_header,
                    const NicAddress* src);
    // A frame to QPN 0xFFFFFF: one copy to each QP attached to its destination group.
    void mcast_receive(const PacketMeta& m, const uint8_t* payload, const uint8_t* ip_header);
    struct McastGroup {
        uint32_t ip = 0;
        std::vector<uint32_t> qps;  // QP handles, in attach order
    };
    McastGroup* mcast_group(uint32_t ip);
    void verbs_drop(RxDrop d, VerbsQp* q);
    // ---- QP1 (verbs/gsi.cpp) ----
    struct GsiOut {
        NicAddress dst;
        uint32_t dest_qpn = 0, len = 0;
        std::array<uint8_t, kGsiMadBytes> mad{};
    };
    void gsi_receive(const PacketMeta& m, const uint8_t* payload, const NicAddress& src, const wire::Headers& hd);
    bool gsi_tx_next(TxPacket* out);
    // ---- DCQCN (verbs/dcqcn.cpp; the rules: dcqcn.hpp) ----
    // NP: a CE-marked packet for q from its sender, QP sender_qpn at `from`.
    [[gnu::cold, gnu::noinline]] void dcqcn_notify(VerbsQp& q, uint32_t sender_qpn, const NicAddress& from);
    void dcqcn_cnp(VerbsQp& q, const NicAddress& src);  // RP: a CNP for q arrived
    bool dcqcn_may_send(const VerbsQp& q);              // false: paced, wake-up armed
    void dcqcn_sent(VerbsQp& q, TxPacket& p);           // ECT(0) on data, the rate's next slot
    // ---- RC (rc_requester.cpp, rc_responder.cpp, rc_read.cpp) ----
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
    void rc_request(VerbsQp& q, uint32_t h, const PacketMeta& m, const uint8_t* payload, const wire::Headers& hd);
    void rc_queue_ack(VerbsQp& q, uint32_t h, uint32_t psn, uint32_t syndrome);
    void rc_responder_error(VerbsQp& q, uint32_t h, uint32_t psn, uint32_t nak_code);
    bool rc_resp_next(VerbsQp& q, uint32_t h, TxPacket* out);
    void rc_read_request(VerbsQp& q, uint32_t h, const PacketMeta& m, const wire::Headers& hd, bool duplicate);
    void rc_read_response(VerbsQp& q, uint32_t h, const PacketMeta& m, const uint8_t* payload, uint32_t aeth);
    // Atomics (rc_atomic.cpp): the responder's COMPARE SWAP / FETCH ADD (a duplicate answered
    // from the result cache), the requester's ATOMIC ACK.
    void rc_atomic_request(VerbsQp& q, uint32_t h, const PacketMeta& m, const wire::Headers& hd, bool duplicate);
    void rc_atomic_ack(VerbsQp& q, uint32_t h, const PacketMeta& m, const wire::Headers& hd);
    // Queue a READ's responses or an ATOMIC ACK, within max_dest_rd_atomic and the queue's depth:
    // nullptr if there is no room (the caller NAKs a new request, drops a duplicate).
    RcResp* rc_queue_rd_atomic(VerbsQp& q, bool duplicate);

    // The NIC core's state this engine shares (nic_core.hpp).
    Nic& nic_;  // what the executor's calls name
    NicCore& core_;
    const NicAddress& addr_;
    NicExecutor* const exec_;
    NicIds& ids_;
    PortCounters& port_;
    // The verbs device.
    std::vector<VerbsPd> vpds_;
    std::vector<VerbsMr> vmrs_;
    std::vector<VerbsAh> vahs_;
    std::vector<std::unique_ptr<VerbsCq>> vcqs_;
    std::vector<std::unique_ptr<VerbsSrq>> vsrqs_;
    std::vector<std::unique_ptr<VerbsQp>> vqps_;
    // Verbs QPs with packets to send, served in turn: a ring of handles, each at most once (its
    // queued flag), so as many entries as QP entries suffice.
    FifoRing<uint32_t> verbs_active_{16};  // verbs QP handles with send work, in turn
    std::array<uint8_t, 4096> verbs_gather_{};  // a packet spanning SGEs, until it is encoded
    uint64_t verbs_cq_errors_ = 0;
    verbs::QpCountersVerbs retired_;  // the counters of QPs whose entry a newer QP took
    std::vector<McastGroup> mcast_;  // groups with a member on this NIC (few: a linear scan)
    uint32_t mcast_attached_ = 0;    // attachments over all groups
    GsiAgent* gsi_ = nullptr;
    PortShare* share_ = nullptr;
    std::deque<GsiOut> gsi_out_;                    // MADs waiting for the port
    std::array<uint8_t, kGsiMadBytes> gsi_tx_{};    // the one handed out, until the next tx_next
    uint32_t gsi_psn_ = 0;
};

}  // namespace sdr::emu
