// The objects of the sdr verbs provider: a device (one per ibv_device libibverbs lists), a
// context (one per ibv_open_device), and the PD, MR and CQ wrappers whose verbs structs
// libibverbs hands back to us. Each wrapper starts with (or ends with, for the context) the
// struct libibverbs knows, so a verbs pointer steps back to its wrapper.
#pragma once

#include "rdma_core_private.hpp"

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace sdr::verbs {

// Limits the device reports (ibv_query_device) and enforces. They are the emulated NIC's: 16
// index bits per memory key as its lkeys (ids.hpp), 2^13 QPs as its QPN index.
struct Limits {
    static constexpr uint32_t kMaxMr = 1u << 16;
    static constexpr uint32_t kMaxPd = 1u << 16;
    static constexpr uint32_t kMaxCq = 1u << 16;
    static constexpr uint32_t kMaxCqe = 1u << 16;
    static constexpr uint32_t kMaxQp = 1u << 13;
    static constexpr uint32_t kMaxQpWr = 512;  // the NIC model's send queue depth
    static constexpr uint32_t kMaxSge = 1;
    static constexpr uint64_t kMaxMrSize = 1ull << 40;
};

// What sdr-rdma recorded for the device (its sysfs directory, sdr/ files) and what the
// interface shows now in the namespace of the process.
struct PortInfo {
    std::string netdev;  // interface name
    std::string kind;    // "raw" (AF_PACKET) or "xdp" (AF_XDP)
    uint64_t node_guid = 0;  // host order, EUI-64 of the MAC
    uint32_t netdev_mtu = 0;
    bool up = false;       // interface present, up and running here
    uint32_t speed_mbps = 0;  // 0 when the interface does not say
};

// A registered region: its bounds and rights, for the data path of the next slice.
struct MrEntry {
    uint32_t key = 0;  // lkey == rkey
    uint64_t addr = 0;
    uint64_t length = 0;
    uint64_t iova = 0;
    int access = 0;
    const void* pd = nullptr;
    bool live = false;
};

// One table per device: keys are unique per device, whichever context registered them.
class MrTable {
public:
    // A key for a new region, or 0 when all kMaxMr entries are live.
    uint32_t add(const MrEntry& e);
    bool remove(uint32_t key);
    size_t live() const;

private:
    mutable std::mutex mu_;
    std::vector<MrEntry> entries_;
    std::vector<uint32_t> free_;
};

struct Device {
    verbs_device vdev;  // first: libibverbs steps back from the ibv_device
    MrTable* mrs;
    std::atomic<uint32_t>* next_pd_id;
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
};

struct Context {
    ContextState* state;
    verbs_context vctx;  // ends the wrapper, as verbs_init_and_alloc_context expects any offset
};

struct Pd {
    ibv_pd pd;
    uint32_t id;
    std::atomic<uint32_t> mrs;  // regions registered on it: dealloc is EBUSY until they go
};

struct Mr {
    verbs_mr vmr;
};

struct Cq {
    verbs_cq vcq;
    int event_fd;  // write end of the channel's pipe, -1 without a channel
    std::atomic<int> armed;  // ibv_req_notify_cq: 0 none, 1 next completion, 2 solicited only
};

Context* to_context(ibv_context* c);
Device* to_device(ibv_device* d);

// Reads the device's sdr/ record and the interface; false with errno set when the record is
// unreadable.
bool read_port_info(const char* ibdev_path, PortInfo* out);
// The largest IBV_MTU whose payload and RoCEv2 headers fit the interface MTU (0 if none).
ibv_mtu ibv_mtu_for(uint32_t netdev_mtu);

// The ops of verbs_context_ops this slice fills (query.cpp, resources.cpp).
int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size);
int query_port(ibv_context* context, uint8_t port_num, ibv_port_attr* attr);
ibv_pd* alloc_pd(ibv_context* context);
int dealloc_pd(ibv_pd* pd);
ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t hca_va, int access);
int dereg_mr(verbs_mr* vmr);
ibv_cq* create_cq(ibv_context* context, int cqe, ibv_comp_channel* channel, int comp_vector);
int destroy_cq(ibv_cq* cq);
int req_notify_cq(ibv_cq* cq, int solicited_only);
void cq_event(ibv_cq* cq);
void async_event(ibv_context* context, ibv_async_event* event);

}  // namespace sdr::verbs
