// The part of rdma-core's private provider ABI that this provider uses, as libibverbs 44.0
// (symbol version IBVERBS_PRIVATE_34) defines it.
//
// Why this file exists: a provider is normally built inside rdma-core's tree against its
// `infiniband/driver.h`, which no distribution ships (Debian's libibverbs-dev carries only the
// public <infiniband/verbs.h>). The layouts and entry points below are declared from the facts
// of rdma-core v44.0's public source (libibverbs/driver.h, libibverbs/dummy_ops.c); every struct
// that libibverbs reads or writes is declared exactly, the rest is left opaque. The library
// checks nothing at load time beyond the registration symbol's name, so a wrong layout here
// would corrupt memory silently: the static_asserts below pin what the public header can check.
// A libibverbs with another IBVERBS_PRIVATE_ number refuses to resolve
// verbs_register_driver_34, so the provider then simply does not load.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

extern "C" {

struct verbs_sysfs_dev;  // opaque: matching goes through the table below, never this struct

// verbs_match_ent.kind
enum : uint8_t { SDR_VERBS_MATCH_SENTINEL = 0, SDR_VERBS_MATCH_MODALIAS = 2 };

struct verbs_match_ent {
    void* driver_data;
    union {
        const char* modalias;
        uint64_t driver_id;
    } u;
    uint16_t vendor;
    uint16_t device;
    uint8_t kind;
};

struct verbs_device;

struct verbs_device_ops {
    const char* name;
    uint32_t match_min_abi_version;
    uint32_t match_max_abi_version;
    const verbs_match_ent* match_table;
    const verbs_device_ops** static_providers;
    bool (*match_device)(verbs_sysfs_dev* sysfs_dev);
    verbs_context* (*alloc_context)(ibv_device* device, int cmd_fd, void* private_data);
    verbs_context* (*import_context)(ibv_device* device, int cmd_fd);
    verbs_device* (*alloc_device)(verbs_sysfs_dev* sysfs_dev);
    void (*uninit_device)(verbs_device* device);
};

// Two pointers: rdma-core's ccan list_node.
struct sdr_list_node {
    sdr_list_node* next;
    sdr_list_node* prev;
};

struct verbs_device {
    ibv_device device;  // must be first
    const verbs_device_ops* ops;
    int refcount;  // a C11 atomic_int in libibverbs; only the library touches it
    sdr_list_node entry;
    verbs_sysfs_dev* sysfs;
    uint64_t core_support;
};

// verbs_qp.comp_mask: the QP has an ibv_qp_ex (ibv_qp_to_qp_ex returns it).
enum : uint32_t { SDR_VERBS_QP_EX = 1u << 1 };

// verbs_mr.mr_type
enum : int { SDR_IBV_MR_TYPE_MR = 0 };

struct verbs_mr {
    ibv_mr ibv_mr;
    int mr_type;  // enum ibv_mr_type
    int access;
};

struct verbs_cq {
    union {
        ibv_cq cq;
        ibv_cq_ex cq_ex;
    };
};

// Every op a provider can supply, in v44.0's (alphabetical) order. Entries this provider leaves
// NULL keep libibverbs' dummy op, which fails with EOPNOTSUPP. Only the entries the provider
// fills carry their prototype; the others are placeholders of the same size (a function
// pointer), named so that the order can be checked against driver.h line by line.
using sdr_unused_op = void (*)(void);
struct verbs_context_ops {
    sdr_unused_op advise_mr, alloc_dm, alloc_mw, alloc_null_mr, alloc_parent_domain;
    ibv_pd* (*alloc_pd)(ibv_context* context);
    sdr_unused_op alloc_td;
    void (*async_event)(ibv_context* context, ibv_async_event* event);
    sdr_unused_op attach_counters_point_flow;
    int (*attach_mcast)(ibv_qp* qp, const ibv_gid* gid, uint16_t lid);
    sdr_unused_op bind_mw, close_xrcd;
    void (*cq_event)(ibv_cq* cq);
    ibv_ah* (*create_ah)(ibv_pd* pd, ibv_ah_attr* attr);
    sdr_unused_op create_counters;
    ibv_cq* (*create_cq)(ibv_context* context, int cqe, ibv_comp_channel* channel, int comp_vector);
    ibv_cq_ex* (*create_cq_ex)(ibv_context* context, ibv_cq_init_attr_ex* init_attr);
    sdr_unused_op create_flow, create_flow_action_esp;
    ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr);
    ibv_qp* (*create_qp_ex)(ibv_context* context, ibv_qp_init_attr_ex* qp_init_attr_ex);
    sdr_unused_op create_rwq_ind_table;
    ibv_srq* (*create_srq)(ibv_pd* pd, ibv_srq_init_attr* srq_init_attr);
    sdr_unused_op create_srq_ex, create_wq, dealloc_mw;
    int (*dealloc_pd)(ibv_pd* pd);
    sdr_unused_op dealloc_td;
    int (*dereg_mr)(verbs_mr* vmr);
    int (*destroy_ah)(ibv_ah* ah);
    sdr_unused_op destroy_counters;
    int (*destroy_cq)(ibv_cq* cq);
    sdr_unused_op destroy_flow, destroy_flow_action;
    int (*destroy_qp)(ibv_qp* qp);
    sdr_unused_op destroy_rwq_ind_table;
    int (*destroy_srq)(ibv_srq* srq);
    sdr_unused_op destroy_wq;
    int (*detach_mcast)(ibv_qp* qp, const ibv_gid* gid, uint16_t lid);
    void (*free_context)(ibv_context* context);
    sdr_unused_op free_dm, get_srq_num, import_dm, import_mr, import_pd, modify_cq,
        modify_flow_action_esp;
    int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask);
    sdr_unused_op modify_qp_rate_limit;
    int (*modify_srq)(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask);
    sdr_unused_op modify_wq, open_qp, open_xrcd;
    int (*poll_cq)(ibv_cq* cq, int num_entries, ibv_wc* wc);
    int (*post_recv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
    int (*post_send)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
    sdr_unused_op post_srq_ops;
    int (*post_srq_recv)(ibv_srq* srq, ibv_recv_wr* recv_wr, ibv_recv_wr** bad_recv_wr);
    int (*query_device_ex)(ibv_context* context, const ibv_query_device_ex_input* input,
                           ibv_device_attr_ex* attr, size_t attr_size);
    sdr_unused_op query_ece;
    int (*query_port)(ibv_context* context, uint8_t port_num, ibv_port_attr* port_attr);
    int (*query_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr);
    sdr_unused_op query_qp_data_in_order, query_rt_values;
    int (*query_srq)(ibv_srq* srq, ibv_srq_attr* srq_attr);
    sdr_unused_op read_counters, reg_dm_mr, reg_dmabuf_mr;
    ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, uint64_t hca_va, int access);
    int (*req_notify_cq)(ibv_cq* cq, int solicited_only);
    int (*rereg_mr)(verbs_mr* vmr, int flags, ibv_pd* pd, void* addr, size_t length, int access);
    int (*resize_cq)(ibv_cq* cq, int cqe);
    sdr_unused_op set_ece, unimport_dm, unimport_mr, unimport_pd;
};

// IBVERBS_PRIVATE_34 entry points of libibverbs.so.1.
void verbs_register_driver_34(const verbs_device_ops* ops);
void* _verbs_init_and_alloc_context(ibv_device* device, int cmd_fd, size_t alloc_size,
                                    verbs_context* context_offset, uint32_t driver_id);
void verbs_uninit_context(verbs_context* context);
void verbs_set_ops(verbs_context* vctx, const verbs_context_ops* ops);

}  // extern "C"

// v44.0 has 76 ops; a placeholder per op keeps the table that size.
static_assert(sizeof(verbs_context_ops) == 76 * sizeof(void*), "verbs_context_ops must have 76 entries");
static_assert(offsetof(verbs_context_ops, alloc_pd) == 5 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, create_ah) == 13 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, create_qp) == 19 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, destroy_ah) == 29 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, destroy_qp) == 34 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, modify_qp) == 47 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, poll_cq) == 53 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, post_send) == 55 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, query_qp) == 61 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, create_cq) == 15 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, dealloc_pd) == 26 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, free_context) == 39 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, query_device_ex) == 58 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, reg_mr) == 68 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, rereg_mr) == 70 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, resize_cq) == 71 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, unimport_pd) == 75 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, create_srq) == 22 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, create_cq_ex) == 16 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, create_qp_ex) == 20 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, destroy_srq) == 36 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, modify_srq) == 49 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, post_srq_recv) == 57 * sizeof(void*));
static_assert(offsetof(verbs_context_ops, query_srq) == 64 * sizeof(void*));
// Checks against the public header: the library steps from an ibv_device to its verbs_device
// (container_of), from an ibv_mr to its verbs_mr, and from an ibv_context to the verbs_context
// that ends with it.
static_assert(offsetof(verbs_device, device) == 0);
static_assert(offsetof(verbs_mr, ibv_mr) == 0);
static_assert(offsetof(verbs_cq, cq) == 0 && offsetof(ibv_cq_ex, context) == 0);
static_assert(offsetof(verbs_context, context) + sizeof(ibv_context) == sizeof(verbs_context),
              "struct verbs_context must end with its ibv_context");
