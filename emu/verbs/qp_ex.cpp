// The extended QP (ibv_create_qp_ex) and its work-request builder (ibv_wr_start, ibv_wr_send,
// ibv_wr_rdma_write(_imm), ibv_wr_send_imm, ibv_wr_rdma_read, ibv_wr_atomic_cmp_swp,
// ibv_wr_atomic_fetch_add, ibv_wr_set_sge(_list),
// ibv_wr_set_inline_data(_list), ibv_wr_set_ud_addr, ibv_wr_complete, ibv_wr_abort). Each
// builder call starts a work request with the qp_ex's wr_id and wr_flags; the setters fill the
// last one; ibv_wr_complete posts the batch through post_send (one engine lock, the same
// checks and send-queue slots as ibv_post_send), ibv_wr_abort drops it. The batch belongs to
// the one thread that builds it, as verbs requires.
#include "engine.hpp"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace sdr::verbs {
namespace {

Qp* from_ex(ibv_qp_ex* x) { return reinterpret_cast<Qp*>(x); }

// The send ops this device has (IBV_QP_EX_WITH_*); READ and the atomics are RC's, UD has only
// the SENDs.
constexpr uint64_t kUcOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
                            IBV_QP_EX_WITH_SEND_WITH_IMM;
constexpr uint64_t kRcOps = kUcOps | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                            IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
constexpr uint64_t kUdOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;

// A new work request at the end of the batch; nullptr (and the batch's error) if it cannot grow.
PendingWr* begin(ibv_qp_ex* x, ibv_wr_opcode op)
{
    Qp* q = from_ex(x);
    if (q->wr_count == q->wrs.size()) {
        try {
            q->wrs.emplace_back();
        } catch (const std::bad_alloc&) {
            if (!q->wr_err) q->wr_err = ENOMEM;
            return nullptr;
        }
    }
    PendingWr& p = q->wrs[q->wr_count++];
    p.wr = ibv_send_wr{};
    p.wr.wr_id = x->wr_id;
    p.wr.send_flags = static_cast<int>(x->wr_flags);
    p.wr.opcode = op;
    p.inline_data.clear();
    return &p;
}

// The work request the setters fill: the last one begun (none: the batch fails with EINVAL).
PendingWr* last(ibv_qp_ex* x)
{
    Qp* q = from_ex(x);
    if (q->wr_count == 0) {
        if (!q->wr_err) q->wr_err = EINVAL;
        return nullptr;
    }
    return &q->wrs[q->wr_count - 1];
}

void fail(ibv_qp_ex* x, int err)
{
    Qp* q = from_ex(x);
    if (!q->wr_err) q->wr_err = err;
}

void wr_start(ibv_qp_ex* x)
{
    Qp* q = from_ex(x);
    q->wr_count = 0;
    q->wr_err = 0;
}

void wr_send(ibv_qp_ex* x) { begin(x, IBV_WR_SEND); }

void wr_send_imm(ibv_qp_ex* x, __be32 imm)
{
    if (PendingWr* p = begin(x, IBV_WR_SEND_WITH_IMM)) p->wr.imm_data = imm;
}

void wr_rdma_write(ibv_qp_ex* x, uint32_t rkey, uint64_t addr)
{
    if (PendingWr* p = begin(x, IBV_WR_RDMA_WRITE)) p->wr.wr.rdma = {addr, rkey};
}

void wr_rdma_write_imm(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, __be32 imm)
{
    if (PendingWr* p = begin(x, IBV_WR_RDMA_WRITE_WITH_IMM)) {
        p->wr.wr.rdma = {addr, rkey};
        p->wr.imm_data = imm;
    }
}

void wr_rdma_read(ibv_qp_ex* x, uint32_t rkey, uint64_t addr)
{
    if (PendingWr* p = begin(x, IBV_WR_RDMA_READ)) p->wr.wr.rdma = {addr, rkey};
}

void wr_atomic_cmp_swp(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap)
{
    if (PendingWr* p = begin(x, IBV_WR_ATOMIC_CMP_AND_SWP)) p->wr.wr.atomic = {addr, compare, swap, rkey};
}

void wr_atomic_fetch_add(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, uint64_t add)
{
    if (PendingWr* p = begin(x, IBV_WR_ATOMIC_FETCH_AND_ADD)) p->wr.wr.atomic = {addr, add, 0, rkey};
}

void wr_set_ud_addr(ibv_qp_ex* x, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey)
{
    if (PendingWr* p = last(x)) p->wr.wr.ud = {ah, remote_qpn, remote_qkey};
}

void wr_set_sge(ibv_qp_ex* x, uint32_t lkey, uint64_t addr, uint32_t length)
{
    if (PendingWr* p = last(x)) {
        p->sg[0] = ibv_sge{addr, length, lkey};
        p->wr.num_sge = 1;
    }
}

void wr_set_sge_list(ibv_qp_ex* x, size_t n, const ibv_sge* list)
{
    PendingWr* p = last(x);
    if (!p) return;
    if (n > mv::kMaxSge) return fail(x, EINVAL);
    std::memcpy(p->sg, list, n * sizeof *list);
    p->wr.num_sge = static_cast<int>(n);
}

// Inline data is the caller's only until the call returns: it is copied now, and posted as one
// IBV_SEND_INLINE SGE (post_send copies it into the send queue's inline slot).
void wr_set_inline_data_list(ibv_qp_ex* x, size_t n, const ibv_data_buf* bufs)
{
    PendingWr* p = last(x);
    if (!p) return;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += bufs[i].length;
    if (total > Limits::kMaxInline) return fail(x, EINVAL);
    try {
        p->inline_data.resize(total);
    } catch (const std::bad_alloc&) {
        return fail(x, ENOMEM);
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (bufs[i].length) std::memcpy(p->inline_data.data() + off, bufs[i].addr, bufs[i].length);
        off += bufs[i].length;
    }
    p->wr.send_flags |= IBV_SEND_INLINE;
    p->wr.num_sge = total ? 1 : 0;
}

void wr_set_inline_data(ibv_qp_ex* x, void* addr, size_t length)
{
    const ibv_data_buf b{addr, length};
    wr_set_inline_data_list(x, 1, &b);
}

int wr_complete(ibv_qp_ex* x)
{
    Qp* q = from_ex(x);
    const size_t n = q->wr_count;
    q->wr_count = 0;
    if (int err = q->wr_err) {
        q->wr_err = 0;
        return err;
    }
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        PendingWr& p = q->wrs[i];
        if (p.wr.send_flags & IBV_SEND_INLINE) {
            p.sg[0] = ibv_sge{reinterpret_cast<uintptr_t>(p.inline_data.data()),
                              static_cast<uint32_t>(p.inline_data.size()), 0};
        }
        p.wr.sg_list = p.sg;
        p.wr.next = i + 1 < n ? &q->wrs[i + 1].wr : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    return post_send(&q->qp, &q->wrs[0].wr, &bad);
}

void wr_abort(ibv_qp_ex* x)
{
    Qp* q = from_ex(x);
    q->wr_count = 0;
    q->wr_err = 0;
}

}  // namespace

// ibv_create_qp_ex: a PD (required) and, with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, the ibv_wr_*
// builder for the send ops this transport has; creation flags none or
// IBV_QP_CREATE_BLOCK_SELF_MCAST_LB (the NIC never hears its own multicast anyway); any other
// attribute (XRC domain, TSO, RSS, ...), flag or op (atomic write, memory windows, invalidate, TSO)
// is EOPNOTSUPP.
ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr)
{
    constexpr uint32_t kSupported = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd || attr->pd->context != context) {
        errno = EINVAL;
        return nullptr;
    }
    const uint32_t flags = (attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) ? attr->create_flags : 0;
    if ((attr->comp_mask & ~kSupported) || (flags & ~IBV_QP_CREATE_BLOCK_SELF_MCAST_LB)) {
        errno = EOPNOTSUPP;
        return nullptr;
    }
    const bool builder = attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if (builder) {
        const uint64_t ops = attr->qp_type == IBV_QPT_RC   ? kRcOps
                             : attr->qp_type == IBV_QPT_UC ? kUcOps
                             : attr->qp_type == IBV_QPT_UD ? kUdOps
                                                           : 0;
        if (attr->send_ops_flags & ~ops) {
            errno = EOPNOTSUPP;
            return nullptr;
        }
    }
    ibv_qp_init_attr a{};
    a.qp_context = attr->qp_context;
    a.send_cq = attr->send_cq;
    a.recv_cq = attr->recv_cq;
    a.srq = attr->srq;
    a.cap = attr->cap;
    a.qp_type = attr->qp_type;
    a.sq_sig_all = attr->sq_sig_all;
    ibv_qp* qp = create_qp(attr->pd, &a);
    if (!qp) return nullptr;
    attr->cap = a.cap;
    if (builder) {
        Qp* q = reinterpret_cast<Qp*>(qp);
        q->comp_mask = SDR_VERBS_QP_EX;
        ibv_qp_ex& x = q->qp_ex;
        // Past the ibv_qp it shares: zero, so that the ops this QP does not have are NULL.
        std::memset(reinterpret_cast<char*>(&x) + sizeof(ibv_qp), 0, sizeof x - sizeof(ibv_qp));
        x.wr_start = wr_start;
        x.wr_complete = wr_complete;
        x.wr_abort = wr_abort;
        x.wr_send = wr_send;
        x.wr_send_imm = wr_send_imm;
        if (attr->qp_type != IBV_QPT_UD) {
            x.wr_rdma_write = wr_rdma_write;
            x.wr_rdma_write_imm = wr_rdma_write_imm;
        }
        if (attr->qp_type == IBV_QPT_RC) {
            x.wr_rdma_read = wr_rdma_read;
            x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
            x.wr_atomic_fetch_add = wr_atomic_fetch_add;
        }
        if (attr->qp_type == IBV_QPT_UD) x.wr_set_ud_addr = wr_set_ud_addr;
        x.wr_set_sge = wr_set_sge;
        x.wr_set_sge_list = wr_set_sge_list;
        x.wr_set_inline_data = wr_set_inline_data;
        x.wr_set_inline_data_list = wr_set_inline_data_list;
    }
    return qp;
}

}  // namespace sdr::verbs
