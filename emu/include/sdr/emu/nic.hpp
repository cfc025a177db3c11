// The emulated SmartNIC: memory regions, UC transport QPs, root keys, the UC responder that
// places payload and raises one CQE per packet, the emulated DPA workers that run the
// firmware per CQE, the send engine that turns firmware WQEs into packets, and counters.
// Executor-agnostic: the simulator (or a real-time loop) calls rx_*/tx_* and provides time.
#pragma once

#include <sdr/emu/ids.hpp>
#include <sdr/emu/wire.hpp>
#include <sdr/emu/worker.hpp>
#include <sdr/firmware/fw.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sdr::emu {

class Nic;

// What one RoCEv2 packet says (decoded from a frame, or never encoded: payload-free mode).
struct PacketMeta {
    uint64_t va = 0;
    uint32_t dest_qp = 0, psn = 0, rkey = 0, dma_len = 0, imm = 0;
    uint32_t qkey = 0, src_qp = 0;  // DETH of a control datagram (UD SEND)
    uint16_t udp_src_port = 0;  // flow entropy
    uint8_t opcode = 0;
};

struct NicAddress {
    std::array<uint8_t, 6> mac{};
    uint32_t ip = 0;  // host order
};

// Why a received frame was dropped. Every drop is counted; none writes memory.
enum class RxDrop : uint8_t {
    Truncated, NotIpv4, NotRoce, BadIpHeader, BadLength, BadOpcode, BadIcrc,  // frame checks
    UnknownQp,    // destination QPN not a live transport QP
    WrongPeer,    // not from the connected peer's MAC, IP, UDP source port (and control QPN)
    WrongOpcode,  // not a UC RDMA WRITE-only-with-immediate
    UnknownKey,   // rkey is not the root key bound to that QP
    OutOfBounds,  // slot or offset outside the root key / posted buffer
    BadQkey,      // control datagram whose Q_Key is not the control QP's
    CtrlRingFull, // control datagram arrived while the host had not drained the ring
    CqOverflow,   // its CQE found the DPA thread's CQ full (cost model, dpa_model.hpp)
    Count
};
const char* to_string(RxDrop d);

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
};

// A packet the send engine hands to the port.
struct TxPacket {
    PacketMeta meta;
    uint32_t remote_ip = 0;
    std::array<uint8_t, 6> remote_mac{};
    const uint8_t* payload = nullptr;  // local MR bytes (full-payload mode)
    uint32_t qp = 0;                   // transport QP handle
    uint32_t cookie = 0;
    bool signaled = false;
    bool ctrl = false;                 // a control datagram: qp is the control QP handle
    bool local_error = false;          // lkey/bounds check failed: no packet, error completion
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
    bool reconfigure_workers(uint32_t num_workers);

    // Memory regions: lkey 0 is never valid; 0 when 2^16 regions live.
    uint32_t mr_reg(void* addr, size_t len);
    bool mr_dereg(uint32_t lkey);
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
    void* nic_alloc(size_t bytes);
    void nic_free(void* p);
    uint64_t nic_mem_bytes() const { return nic_mem_bytes_; }
    fw_device* firmware() { return fw_; }

    // Transport QPs (UC): returns a handle (kNoHandle if 8192 live), its QPN is random
    // (ids.hpp). A QP accepts frames only once connected, and then only from the remote QP:
    // its MAC, its IP and the UDP source port its QPN gives (udp_src_port).
    uint32_t qp_create(uint32_t tag, uint32_t channel);
    void qp_destroy(uint32_t handle);
    uint32_t qpn(uint32_t handle) const { return handle < qps_.size() ? qps_[handle].qpn : 0; }
    bool qp_connect(uint32_t handle, const NicAddress& remote, uint32_t remote_qpn);
    void qp_bind_root_key(uint32_t handle, uint32_t rkey);
    uint32_t qp_root_key(uint32_t handle) const { return handle < qps_.size() ? qps_[handle].rkey : 0; }

    // Zero-based indirect root keys: nslots entries of slot_bytes each, all NULL at start; 0
    // when 4096 live.
    uint32_t root_key_create(uint32_t nslots, uint64_t slot_bytes);
    void root_key_destroy(uint32_t rkey);
    bool root_key_set(uint32_t rkey, uint32_t slot, uint32_t lkey, uint64_t addr, uint64_t len);
    void root_key_null(uint32_t rkey, uint32_t slot);

    // Receive path. rx_frame treats bytes as hostile (full decode + ICRC); rx_packet is the
    // responder proper for a packet from `src` (payload == nullptr in payload-free mode).
    void rx_frame(const uint8_t* frame, size_t len);
    void rx_packet(const PacketMeta& m, const uint8_t* payload, const NicAddress& src);

    // Send engine, in post order across all QPs.
    bool tx_pending() const { return sq_count_ != 0 || ctrl_next_ != ctrl_head_; }
    bool tx_next(TxPacket* out);
    void tx_done(const TxPacket& p);  // the packet left the port (or failed locally)
    // Encode the whole frame of p (headers, payload, ICRC); returns bytes, 0 if cap too small.
    size_t tx_encode(const TxPacket& p, uint8_t* out, size_t cap) const;

    // Control QPs: the small datagram channel beside each SDR QP (arXiv 2505.05366, the
    // paper's UD control QP). Datagrams travel as RoCEv2 UD SEND Only frames with a DETH over
    // the same port and link as data, ahead of queued data packets (strict priority), and always
    // with their payload, also in payload-free runs: the host reads them. Received datagrams are
    // copied into a bounded ring per control QP that the host drains.
    static constexpr uint32_t kCtrlQpnBase = NicIds::kCtrlQpnBit;  // control QPNs have bit 23 set
    static constexpr uint32_t kCtrlMaxBytes = 4096;
    static constexpr uint32_t kCtrlRingDepth = 256;  // received, not yet read by the host
    static constexpr uint32_t kCtrlSqDepth = 64;     // queued for the wire, per NIC
    uint32_t ctrl_qp_create();  // handle (kNoHandle if 8192 live), random QPN and Q_Key
    void ctrl_qp_destroy(uint32_t handle);
    uint32_t ctrl_qpn(uint32_t handle) const { return handle < ctrl_qps_.size() ? ctrl_qps_[handle].qpn : 0; }
    uint32_t ctrl_qkey(uint32_t handle) const { return handle < ctrl_qps_.size() ? ctrl_qps_[handle].qkey : 0; }
    // Datagrams are taken only once connected, and then only from the remote control QP: its
    // QPN in the DETH, its MAC, IP and UDP source port.
    bool ctrl_qp_connect(uint32_t handle, const NicAddress& remote, uint32_t remote_qpn);
    // false if the control send queue is full (or len > kCtrlMaxBytes, or no such QP).
    bool ctrl_send(uint32_t handle, const NicAddress& dst, uint32_t dst_qpn, uint32_t dst_qkey,
                   const void* data, uint32_t len);
    // Oldest received datagram: its length (copied into buf), 0 if none, -1 if cap is smaller
    // than the datagram (which stays queued).
    int64_t ctrl_recv(uint32_t handle, void* buf, size_t cap);

    // Events a polling host could notice: host-window writes by the firmware and received
    // control datagrams. A virtual-time waiter stops when this changes. One counter, read per
    // delivered packet by the simulator's run-ahead, written by whichever thread made the event.
    uint64_t host_events() const { return host_events_.load(std::memory_order_acquire); }
    void note_host_event() { host_events_.fetch_add(1, std::memory_order_release); }

    // Host → firmware: a send doorbell for SDR QP qp_index.
    void doorbell(uint32_t qp_index);
    void timer_fired(uint32_t worker, uint32_t id);
    // The firmware's receive handler on DPA worker `worker` (inline, or on the worker's thread:
    // it touches only firmware receive state, with atomics, and that worker's counters).
    void run_rx_cqe(uint32_t worker, const hal_cqe& cqe);
    // A receive CQE the executor could not queue (its DPA thread's CQ was full): counted.
    void cq_overflow() { drop(RxDrop::CqOverflow, nullptr); }

    // HAL entry points (hal_emu.cpp forwards here).
    bool hal_tx_post(hal_worker* w, const hal_tx_wqe& wqe);

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
        uint32_t sq_used = 0;
        bool sq_blocked = false;  // firmware was refused: doorbell when space frees
        QpCounters counters;
    };
    struct SqEntry {
        uint32_t qp;
        hal_tx_wqe wqe;
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

    RootKey* root_key(uint32_t rkey)  // inline: the responder looks one up per packet
    {
        uint32_t i = NicIds::root_key_index(rkey);
        if (i >= root_keys_.size() || !root_keys_[i].live || root_keys_[i].rkey != rkey) return nullptr;
        return &root_keys_[i];
    }
    void ctrl_receive(const PacketMeta& m, const uint8_t* payload, const NicAddress& src);
    void respond(const PacketMeta& m, const uint8_t* payload, const NicAddress& src);  // the UC responder
    void grow_sq_ring();
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
    std::vector<SqEntry> sq_ring_;  // power-of-two capacity
    uint64_t sq_head_ = 0, sq_tail_ = 0;
    uint32_t sq_count_ = 0;
    std::vector<CtrlQp> ctrl_qps_;
    std::vector<CtrlSend> ctrl_sq_;  // kCtrlSqDepth; entries live until tx_done
    uint64_t ctrl_head_ = 0, ctrl_next_ = 0, ctrl_done_ = 0;
    fw_device* fw_ = nullptr;
    uint64_t nic_mem_bytes_ = 0;
    NicIds ids_;
    PortCounters port_;
    std::atomic<uint64_t> host_events_{0};
};

}  // namespace sdr::emu
