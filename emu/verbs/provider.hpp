// The objects of the sdr verbs provider: a device (one per ibv_device libibverbs lists), a
// context (one per ibv_open_device), and the PD, MR, CQ, AH and QP wrappers whose verbs structs
// libibverbs hands back to us. Each wrapper starts with (or ends with, for the context) the
// struct libibverbs knows, so a verbs pointer steps back to its wrapper. Every wrapper names
// its object in the NIC model (a handle or key of the engine's Nic): the model is the one
// source of truth for keys, bounds, access and state.
#pragma once

#include "rdma_core_private.hpp"

#include <sdr/emu/ids.hpp>
#include <sdr/emu/nic.hpp>
#include <sdr/emu/verbs_engine.hpp>

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace sdr::verbs {

namespace mv = sdr::emu::verbs;  // the NIC model's verbs types
class Engine;

// Limits the device reports (ibv_query_device) and enforces: the NIC model's.
struct Limits {
    static constexpr uint32_t kMaxMr = 1u << emu::NicIds::kLkeyIndexBits;  // key index bits
    static constexpr uint32_t kMaxPd = emu::Nic::kMaxVerbsQps;             // verbs_pd_alloc's table
    static constexpr uint32_t kMaxQp = emu::Nic::kMaxVerbsQps;
    static constexpr uint32_t kMaxCq = 1u << 16;    // counted by the engine (the model has no bound)
    static constexpr uint32_t kMaxCqe = 1u << 20;   // verbs_cq_create
    static constexpr uint32_t kMaxQpWr = 16384;     // verbs_qp_create's queue depths
    static constexpr uint32_t kMaxSrq = emu::Nic::kMaxVerbsQps;  // verbs_srq_create's table
    static constexpr uint32_t kMaxSrqWr = 16384;    // and its depth
    static constexpr uint32_t kMaxSge = mv::kMaxSge;
    // RC READs outstanding per QP, as requester (max_qp_init_rd_atom) and as responder
    // (max_qp_rd_atom): the model's bound. Atomics: none.
    static constexpr uint32_t kMaxRdAtom = emu::VerbsEngine::kRcMaxRdAtomic;
    // IBV_SEND_INLINE: bytes copied at post into a per-QP buffer (one slot per send WQE).
    static constexpr uint32_t kMaxInline = 256;
    static constexpr uint64_t kMaxMrSize = 1ull << 40;
    // Multicast: the engine's bounds (a NIC's groups, QPs per group, attachments in all).
    static constexpr uint32_t kMaxMcastGrp = emu::VerbsEngine::kMaxMcastGroups;
    static constexpr uint32_t kMaxMcastQpAttach = emu::VerbsEngine::kMaxMcastQpAttach;
    static constexpr uint32_t kMaxTotalMcastQpAttach = emu::VerbsEngine::kMaxTotalMcastQpAttach;
};

// What sdr-rdma recorded for the device (its sysfs directory, sdr/ files) and what the
// interface shows now in the namespace of the process.
struct PortInfo {
    std::string ibdev;   // device name
    std::string netdev;  // interface name
    std::string kind;    // "raw" (AF_PACKET) or "xdp" (AF_XDP)
    uint64_t node_guid = 0;  // host order, EUI-64 of the MAC
    uint32_t netdev_mtu = 0;
    bool up = false;       // interface present, up and running here
    uint32_t speed_mbps = 0;  // 0 when the interface does not say
    // The GID table sdr-rdma wrote (ports/1/gids/N): per index, whether it holds our RoCE v2
    // IPv4-mapped GID (a usable sgid_index) or is empty.
    std::vector<bool> gid_usable;
};

struct Device {
    verbs_device vdev;  // first: libibverbs steps back from the ibv_device
};

// A completion channel's pipe: libibverbs reads 8-byte events (the CQ pointer) from its read
// end, channel->fd; the provider keeps the write end.
struct ChannelPipe {
    const ibv_comp_channel* channel;
    int read_fd;
    ino_t read_ino;
    int write_fd;
};

struct ContextState {
    PortInfo port;
    std::mutex mu;
    std::vector<ChannelPipe> channels;  // closed with the context
    // The write end of the asynchronous event pipe (non-blocking; its read end is
    // context.async_fd): every object of the context writes its events here (async.cpp).
    int async_write_fd = -1;
    Engine* engine = nullptr;           // started by the first PD or CQ, released at close
};

struct Context {
    ContextState* state;
    verbs_context vctx;  // ends the wrapper, as verbs_init_and_alloc_context expects any offset
};

struct Pd {
    ibv_pd pd;
    Engine* engine;
    uint32_t h;  // model PD
};

struct Mr {
    verbs_mr vmr;  // lkey == rkey: the model's key
    uint64_t iova;  // where remote requests address it (ibv_reg_mr_iova; ibv_rereg_mr keeps it)
};

struct Cq {
    verbs_cq vcq;
    Engine* engine;
    uint32_t h;    // model CQ
    int event_fd;  // write end of the channel's pipe (non-blocking), -1 without a channel
    std::atomic<int> armed{0};  // ibv_req_notify_cq: 0 none, 1 next completion, 2 solicited only
    // Completions the model produced (the engine's listener, under the engine's lock) and the
    // pollers took (under mu): equal means nothing to poll, without the engine's lock.
    std::atomic<uint64_t> produced{0};
    uint64_t consumed = 0;
    std::mutex mu;  // pollers: the model's CQ ring has one consumer
    // Read off the channel by ibv_get_cq_event (its cq_event op): what destroy waits to see acked.
    std::atomic<uint64_t> events_read{0};
    int async_fd = -1;  // the context's async write end (not owned)
    std::atomic<uint64_t> async_read{0};  // IBV_EVENT_CQ_ERR read by ibv_get_async_event
    ibv_wc cur{};  // ibv_start_poll/ibv_next_poll: the completion the read_* ops return (cq_ex.cpp)
};

struct Srq {
    ibv_srq srq;
    Engine* engine;
    uint32_t h;  // model SRQ
    uint32_t max_wr, max_sge;
    int async_fd = -1;  // the context's async write end (not owned)
    std::atomic<uint64_t> async_read{0};  // its events read by ibv_get_async_event
};

struct Ah {
    ibv_ah ah;
    uint32_t h;  // model AH
};

// The work requests ibv_wr_* builds between ibv_wr_start and ibv_wr_complete (qp_ex.cpp):
// posted together by wr_complete through post_send, dropped by wr_abort.
struct PendingWr {
    ibv_send_wr wr;
    ibv_sge sg[mv::kMaxSge];
    std::vector<uint8_t> inline_data;  // wr_set_inline_data(_list) copies here at the call
};

struct Qp {
    // verbs_qp's layout (rdma-core's driver.h): ibv_qp_to_qp_ex checks comp_mask for
    // VERBS_QP_EX and returns qp_ex, which a QP made by ibv_create_qp_ex with send ops has.
    union {
        ibv_qp qp;
        ibv_qp_ex qp_ex;
    };
    uint32_t comp_mask = 0;
    void* xrcd = nullptr;
    Engine* engine;
    uint32_t h;  // model QP
    mv::QpType type;
    bool sq_sig_all = false;
    ibv_qp_cap cap{};
    // Everything below is under the engine's lock (post_send, poll_cq, modify_qp).
    // Send WQEs carry their post sequence number as the model's wr_id; the application's wr_id
    // waits here, by sequence modulo the depth, until its completion is polled. A slot (and its
    // inline bytes) is reused only once a completion of it or a later WQE was polled, as on a
    // hardware send queue; posted - retired is the queue's occupancy.
    std::vector<uint64_t> wr_ids;
    uint64_t posted = 0, retired = 0;
    std::vector<uint8_t> inline_buf;  // cap.max_send_wr slots of kMaxInline bytes
    uint32_t inline_key = 0;          // its model region (local read only)
    ibv_qp_attr attr{};               // what modify_qp set, for query_qp
    int async_fd = -1;                // the context's async write end (not owned)
    std::atomic<uint64_t> async_read{0};  // its events read by ibv_get_async_event
    // ibv_wr_*: the batch being built (wr_count of wrs are in use) and its first error.
    std::vector<PendingWr> wrs;
    size_t wr_count = 0;
    int wr_err = 0;
};

Context* to_context(ibv_context* c);
Device* to_device(ibv_device* d);
// The context's engine, started on first use; nullptr with errno set if it cannot start.
Engine* context_engine(ibv_context* c);

// Reads the device's sdr/ record and the interface; false with errno set when the record is
// unreadable.
bool read_port_info(const char* ibdev_path, PortInfo* out);
// 0 if a GRH's sgid_index names a usable entry of the device's GID table; else EINVAL, and
// stderr says which indices to use.
int check_sgid_index(const PortInfo& port, unsigned sgid_index);
// The largest IBV_MTU whose payload and RoCEv2 headers fit the interface MTU (0 if none).
ibv_mtu ibv_mtu_for(uint32_t netdev_mtu);

// The ops of verbs_context_ops the provider fills (query.cpp, resources.cpp, qp.cpp, datapath.cpp).
int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size);
int query_port(ibv_context* context, uint8_t port_num, ibv_port_attr* attr);
ibv_pd* alloc_pd(ibv_context* context);
int dealloc_pd(ibv_pd* pd);
ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t hca_va, int access);
int dereg_mr(verbs_mr* vmr);
int rereg_mr(verbs_mr* vmr, int flags, ibv_pd* pd, void* addr, size_t length, int access);
int resize_cq(ibv_cq* cq, int cqe);
ibv_cq* create_cq(ibv_context* context, int cqe, ibv_comp_channel* channel, int comp_vector);
int destroy_cq(ibv_cq* cq);
int req_notify_cq(ibv_cq* cq, int solicited_only);
void cq_event(ibv_cq* cq);
void async_event(ibv_context* context, ibv_async_event* event);
ibv_ah* create_ah(ibv_pd* pd, ibv_ah_attr* attr);
int destroy_ah(ibv_ah* ah);
ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr);
int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask);
int query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr);
int destroy_qp(ibv_qp* qp);
int attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid);  // RoCE: lid is unused
int detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid);
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr);  // qp_ex.cpp
ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr);  // cq_ex.cpp
ibv_srq* create_srq(ibv_pd* pd, ibv_srq_init_attr* attr);
int modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask);
int query_srq(ibv_srq* srq, ibv_srq_attr* attr);
int destroy_srq(ibv_srq* srq);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
// The asynchronous event pipe (async.cpp): made at open (context.async_fd is its read end);
// write_async_event writes one kernel-format record (element: the object's verbs pointer),
// never blocking; wait_async_acks waits until every event of an object the program read was
// acknowledged (ibv_ack_async_event), as a kernel provider's destroy does.
int open_async_pipe(ContextState* st, int* read_fd);
void write_async_event(int fd, const void* element, uint32_t event_type);
void wait_async_acks(pthread_mutex_t* mu, pthread_cond_t* cond, const uint32_t* completed, uint64_t read);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc);

// Whether libibverbs' device d is one of this provider's (sdrdv.cpp checks the objects it is given).
bool is_provider_device(const ibv_device* d);

}  // namespace sdr::verbs
