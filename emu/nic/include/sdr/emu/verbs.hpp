// The verbs objects of the emulated NIC as a provider drives them: work requests, completions,
// QP attributes, and the single-producer/single-consumer ring that carries each of them between
// a host thread and the NIC's polling thread. Numbering follows libibverbs (ibv_wc_status,
// ibv_wc_opcode, ibv_wr_opcode, IBV_ACCESS_*), so a provider passes values through unchanged.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

namespace sdr::emu::verbs {

// IBV_ACCESS_* bits this model checks (others are accepted and ignored).
enum Access : uint32_t { kLocalWrite = 1, kRemoteWrite = 2, kRemoteRead = 4, kRemoteAtomic = 8 };

enum class QpType : uint8_t { Uc, Ud, Rc };
enum class QpState : uint8_t { Reset, Init, Rtr, Rts, Err };

enum class WcStatus : uint8_t {  // ibv_wc_status
    Success = 0, LocLenErr = 1, LocQpOpErr = 2, LocProtErr = 4, WrFlushErr = 5, RemInvReqErr = 9,
    RemAccessErr = 10, RemOpErr = 11, RetryExcErr = 12, RnrRetryExcErr = 13,
};
enum class WcOpcode : uint8_t {  // ibv_wc_opcode
    Send = 0, RdmaWrite = 1, RdmaRead = 2, CompSwap = 3, FetchAdd = 4, Recv = 128, RecvRdmaWithImm = 129,
};
// ibv_wr_opcode; RDMA READ and the atomics: RC only.
enum class WrOpcode : uint8_t {
    RdmaWrite = 0, RdmaWriteWithImm = 1, Send = 2, SendWithImm = 3, RdmaRead = 4, AtomicCmpAndSwp = 5,
    AtomicFetchAndAdd = 6,
};
// The requests that take responder resources (max_rd_atomic / max_dest_rd_atomic): READ and
// the atomics.
constexpr bool is_rd_atomic(WrOpcode op) { return op >= WrOpcode::RdmaRead; }
constexpr bool is_atomic(WrOpcode op) { return op >= WrOpcode::AtomicCmpAndSwp; }
// The completion opcode of a send WQE (also of its error and flush completions).
constexpr WcOpcode send_wc_opcode(WrOpcode op)
{
    switch (op) {
    case WrOpcode::RdmaRead: return WcOpcode::RdmaRead;
    case WrOpcode::AtomicCmpAndSwp: return WcOpcode::CompSwap;
    case WrOpcode::AtomicFetchAndAdd: return WcOpcode::FetchAdd;
    case WrOpcode::Send:
    case WrOpcode::SendWithImm: return WcOpcode::Send;
    default: return WcOpcode::RdmaWrite;
    }
}

// The asynchronous events the model raises (ibv_event_type numbering): a CQ overrun, an RC
// responder's fatal errors, an SRQ below its limit, an SRQ-attached QP that reached ERR.
enum class AsyncEvent : uint8_t {
    CqErr = 0, QpFatal = 1, QpReqErr = 2, QpAccessErr = 3, SrqLimitReached = 15, QpLastWqeReached = 16,
};

using Gid = std::array<uint8_t, 16>;
// ::ffff:a.b.c.d, the RoCEv2 GID of an IPv4 address (host order in, network order in the GID).
Gid gid_from_ipv4(uint32_t ip);
// The IPv4 address of an IPv4-mapped GID; false for any other GID.
[[nodiscard]] bool ipv4_from_gid(const Gid& gid, uint32_t* ip);

// Scatter/gather entries per work request: UCX reserves 5 in its send WQEs (UCX_IB_TX_MIN_SGE)
// and uses up to 8 (its UCT_IB_MAX_IOV).
inline constexpr uint32_t kMaxSge = 8;
inline constexpr uint32_t kGrhBytes = 40;

struct Sge {
    uint64_t addr = 0;
    uint32_t length = 0, lkey = 0;
};

struct SendWr {
    uint64_t wr_id = 0;
    WrOpcode opcode = WrOpcode::Send;
    bool signaled = true;
    bool solicited = false;  // IBV_SEND_SOLICITED: the BTH's SE bit on the message's last packet
    // IBV_SEND_FENCE (RC): not begun before every READ and atomic posted before it completed
    // (IBTA 10.8.3.3); UC and UD have none to wait for.
    bool fence = false;
    uint32_t imm = 0;  // host order; the wire carries it big-endian
    uint32_t num_sge = 0;
    std::array<Sge, kMaxSge> sg{};
    uint64_t remote_addr = 0;  // RDMA WRITE and READ, atomics (8-byte aligned)
    uint32_t rkey = 0;
    // Atomics (ibv_send_wr.wr.atomic): COMPARE SWAP writes swap where the 8 bytes equal
    // compare_add; FETCH ADD adds compare_add. Both return the original 8 bytes into the SGEs.
    uint64_t compare_add = 0, swap = 0;
    uint32_t ah = 0, remote_qpn = 0, remote_qkey = 0;  // UD: address handle, destination QP, Q_Key
};

struct RecvWr {
    uint64_t wr_id = 0;
    uint32_t num_sge = 0;
    std::array<Sge, kMaxSge> sg{};
};

struct Wc {
    uint64_t wr_id = 0;
    WcStatus status = WcStatus::Success;
    WcOpcode opcode = WcOpcode::Send;
    bool with_imm = false, grh = false;  // IBV_WC_WITH_IMM, IBV_WC_GRH
    uint32_t byte_len = 0, imm = 0;
    uint32_t qp_num = 0, src_qp = 0;  // src_qp: UD only
    bool solicited = false;  // a receive whose message's last packet carried SE
};

// ibv_modify_qp's attributes this model uses; `mask` says which are set (QpAttr::k*). The
// values of the RC attributes are libibverbs' (timeout and min_rnr_timer are the IBTA's 5-bit
// encodings, rnr_retry 7 means infinite), so a provider passes them through.
struct QpAttr {
    enum Mask : uint32_t {
        kState = 1, kAccess = 2, kQkey = 4, kPathMtu = 8, kRqPsn = 16, kSqPsn = 32, kDestQpn = 64, kAv = 128,
        kTimeout = 256, kRetryCnt = 512, kRnrRetry = 1024, kMinRnrTimer = 2048, kMaxRdAtomic = 4096,
        kMaxDestRdAtomic = 8192,
    };
    QpState state = QpState::Reset;
    uint32_t access = 0, qkey = 0;
    uint32_t path_mtu = 1024;  // bytes: 256, 512, 1024, 2048 or 4096
    uint32_t rq_psn = 0, sq_psn = 0, dest_qpn = 0;
    Gid remote_gid{};  // the address vector: the peer's RoCEv2 GID
    // RC (IBV_QP_TIMEOUT ... IBV_QP_MAX_DEST_RD_ATOMIC)
    uint8_t timeout = 14;        // local ACK timeout 4.096 us * 2^timeout; 0: none (IBTA: infinite)
    uint8_t retry_cnt = 7;       // retransmissions after a timeout or a sequence-error NAK (0..7)
    uint8_t rnr_retry = 7;       // retries after an RNR NAK (0..6; 7: infinite)
    uint8_t min_rnr_timer = 12;  // the responder's RNR NAK timer code (IBTA table: 12 = 0.64 ms)
    uint8_t max_rd_atomic = 1, max_dest_rd_atomic = 1;  // READs outstanding as requester / responder (<= 16)
};

struct QpCountersVerbs {
    uint64_t rx_packets = 0, rx_drops = 0, rx_messages = 0, rx_aborted = 0;  // aborted: PSN gap mid-message
    uint64_t tx_packets = 0, tx_messages = 0;
    // RC: ACKs and NAKs sent and received, RNR NAKs among the NAKs, retransmission timeouts,
    // packets sent again (go-back-N), READ response packets sent
    uint64_t tx_acks = 0, tx_naks = 0, rx_acks = 0, rx_naks = 0, tx_rnr_naks = 0, rx_rnr_naks = 0;
    uint64_t timeouts = 0, retransmits = 0, tx_read_responses = 0;
    // RC responder: atomics executed, and duplicate atomics answered from the result cache
    // (executed once, answered again)
    uint64_t atomics = 0, atomic_replays = 0;
    // Adds o's counts (every field above: a new field belongs here too).
    void add(const QpCountersVerbs& o)
    {
        rx_packets += o.rx_packets; rx_drops += o.rx_drops; rx_messages += o.rx_messages; rx_aborted += o.rx_aborted;
        tx_packets += o.tx_packets; tx_messages += o.tx_messages;
        tx_acks += o.tx_acks; tx_naks += o.tx_naks; rx_acks += o.rx_acks; rx_naks += o.rx_naks;
        tx_rnr_naks += o.tx_rnr_naks; rx_rnr_naks += o.rx_rnr_naks;
        timeouts += o.timeouts; retransmits += o.retransmits; tx_read_responses += o.tx_read_responses;
        atomics += o.atomics; atomic_replays += o.atomic_replays;
    }
};

// A bounded single-producer/single-consumer ring: one thread pushes (head), one consumes (tail).
// The consumer may also look at any entry between tail and head (the send queue's requester
// walks a cursor of its own ahead of the tail and retires entries later). Capacity is a power
// of two; an entry is reused only after the consumer advanced past it.
template <class T>
class SpscRing {
public:
    explicit SpscRing(uint32_t depth)
    {
        uint32_t cap = 1;
        while (cap < depth) cap *= 2;
        buf_.resize(cap);
        mask_ = cap - 1;
        depth_ = depth;
    }
    uint32_t depth() const { return depth_; }
    // Producer: false if depth entries are queued.
    [[nodiscard]] bool push(const T& v)
    {
        uint64_t h = head_.load(std::memory_order_relaxed);
        if (h - tail_.load(std::memory_order_acquire) >= depth_) return false;
        buf_[h & mask_] = v;
        head_.store(h + 1, std::memory_order_release);
        return true;
    }
    // Consumer side.
    uint64_t head() const { return head_.load(std::memory_order_acquire); }
    uint64_t tail() const { return tail_.load(std::memory_order_relaxed); }
    bool empty() const { return head() == tail(); }
    T& at(uint64_t i) { return buf_[i & mask_]; }
    const T& at(uint64_t i) const { return buf_[i & mask_]; }
    T& front() { return at(tail()); }
    void pop() { tail_.store(tail() + 1, std::memory_order_release); }
    // Both sides stopped (QP reset): forget every entry.
    void clear() { tail_.store(head_.load(std::memory_order_relaxed), std::memory_order_relaxed); }

private:
    std::vector<T> buf_;
    uint32_t mask_ = 0, depth_ = 0;
    alignas(64) std::atomic<uint64_t> head_{0};
    alignas(64) std::atomic<uint64_t> tail_{0};
};

}  // namespace sdr::emu::verbs
