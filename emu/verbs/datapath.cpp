// The data path that verbs.h's inline functions call through the context's ops: post_send,
// post_recv and poll_cq, onto the NIC model's send and receive queues and CQ rings.
//
// Threads: verbs lets several threads post to one QP or poll one CQ, and the model's rings
// have one producer and one consumer each. Posting takes the engine's lock (the model's
// doorbell, and a post on a QP in ERR that flushes, run under it); so does a poll that has
// completions to take. A poll of an empty CQ takes only the CQ's own lock and reads one
// counter, so a busy-polling program does not contend for the NIC thread's lock; it sleeps
// until a completion instead of spinning (poll_cq).
#include "engine.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sdr::verbs {
namespace {

Qp* to_qp(ibv_qp* qp) { return reinterpret_cast<Qp*>(qp); }

// The longest an empty poll waits for a completion (poll_cq).
constexpr uint64_t kEmptyPollWaitNs = 200'000;

int post_one(Engine& eng, Qp& q, const ibv_send_wr& wr)
{
    mv::SendWr w;
    switch (wr.opcode) {
    case IBV_WR_SEND: w.opcode = mv::WrOpcode::Send; break;
    case IBV_WR_SEND_WITH_IMM: w.opcode = mv::WrOpcode::SendWithImm; break;
    case IBV_WR_RDMA_WRITE: w.opcode = mv::WrOpcode::RdmaWrite; break;
    case IBV_WR_RDMA_WRITE_WITH_IMM: w.opcode = mv::WrOpcode::RdmaWriteWithImm; break;
    case IBV_WR_RDMA_READ: w.opcode = mv::WrOpcode::RdmaRead; break;
    case IBV_WR_ATOMIC_CMP_AND_SWP: w.opcode = mv::WrOpcode::AtomicCmpAndSwp; break;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: w.opcode = mv::WrOpcode::AtomicFetchAndAdd; break;
    default: return EINVAL;  // invalidate, TSO, bind, atomic write: not offered
    }
    const bool send = w.opcode == mv::WrOpcode::Send || w.opcode == mv::WrOpcode::SendWithImm;
    const bool rd_atomic = mv::is_rd_atomic(w.opcode);
    // READ and the atomics are RC only; their SGEs are written by the response (the model
    // checks their lkeys for local write when it lands), so they cannot be inline.
    if ((q.type == mv::QpType::Ud && !send) ||
        (rd_atomic && (q.type != mv::QpType::Rc || (wr.send_flags & IBV_SEND_INLINE))) || wr.num_sge < 0 ||
        static_cast<uint32_t>(wr.num_sge) > q.cap.max_send_sge)
        return EINVAL;
    if (q.posted - q.retired >= q.cap.max_send_wr) return ENOMEM;  // the send queue is full
    const uint32_t slot = static_cast<uint32_t>(q.posted % q.cap.max_send_wr);
    if (wr.send_flags & IBV_SEND_INLINE) {
        // The bytes are copied now (the program may reuse its buffer at once) into this WQE's
        // slot, which the NIC reads when the packet leaves; no lkey is needed.
        uint64_t total = 0;
        for (int i = 0; i < wr.num_sge; i++) total += wr.sg_list[i].length;
        if (total > Limits::kMaxInline) return EINVAL;
        uint8_t* dst = q.inline_buf.data() + size_t{slot} * Limits::kMaxInline;
        for (int i = 0, off = 0; i < wr.num_sge; off += static_cast<int>(wr.sg_list[i].length), i++)
            std::memcpy(dst + off, reinterpret_cast<const void*>(wr.sg_list[i].addr), wr.sg_list[i].length);
        w.num_sge = total ? 1 : 0;
        w.sg[0] = mv::Sge{reinterpret_cast<uintptr_t>(dst), static_cast<uint32_t>(total), q.inline_key};
    } else {
        w.num_sge = static_cast<uint32_t>(wr.num_sge);
        for (int i = 0; i < wr.num_sge; i++)
            w.sg[i] = mv::Sge{wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey};
    }
    w.signaled = q.sq_sig_all || (wr.send_flags & IBV_SEND_SIGNALED);
    w.solicited = (wr.send_flags & IBV_SEND_SOLICITED) != 0;  // SE on its last packet
    w.fence = (wr.send_flags & IBV_SEND_FENCE) != 0;          // RC: after the READs and atomics before it
    if (w.opcode == mv::WrOpcode::SendWithImm || w.opcode == mv::WrOpcode::RdmaWriteWithImm)
        w.imm = ntohl(wr.imm_data);  // verbs hands it in network order, the model takes host order
    if (mv::is_atomic(w.opcode)) {
        w.remote_addr = wr.wr.atomic.remote_addr;
        w.rkey = wr.wr.atomic.rkey;
        w.compare_add = wr.wr.atomic.compare_add;
        w.swap = wr.wr.atomic.swap;
    } else if (!send) {
        w.remote_addr = wr.wr.rdma.remote_addr;
        w.rkey = wr.wr.rdma.rkey;
    }
    if (q.type == mv::QpType::Ud) {
        if (!wr.wr.ud.ah) return EINVAL;
        w.ah = reinterpret_cast<const Ah*>(wr.wr.ud.ah)->h;
        w.remote_qpn = wr.wr.ud.remote_qpn;
        w.remote_qkey = wr.wr.ud.remote_qkey;
    }
    w.wr_id = q.posted;  // the sequence number; the program's wr_id waits in its slot
    q.wr_ids[slot] = wr.wr_id;
    if (int err = eng.verbs().post_send(q.h, w)) return err;
    q.posted++;
    return 0;
}

constexpr uint8_t kRoceV2Ipv4PacketType = 0x8 | 0x2;

// One model completion as verbs shows it. A send completion names its WQE by sequence number:
// the program's wr_id comes back from the slot, and the slots up to it are free again.
void to_wc(Engine& eng, const mv::Wc& in, ibv_wc* out)
{
    *out = ibv_wc{};
    out->wr_id = in.wr_id;
    out->status = static_cast<ibv_wc_status>(in.status);  // the model numbers them as verbs does
    out->opcode = static_cast<ibv_wc_opcode>(in.opcode);
    out->byte_len = in.byte_len;
    out->qp_num = in.qp_num;
    out->src_qp = in.src_qp;
    if (in.with_imm) {
        out->wc_flags |= IBV_WC_WITH_IMM;
        out->imm_data = htonl(in.imm);
    }
    if (in.grh) {
        out->wc_flags |= IBV_WC_GRH;
        // RoCE has no service level on the wire; a UD receive's sl carries the packet type, as
        // ConnectX reports it (its CQE's RoCE type: bit 3 a UDP header, RoCE v2; bits 2:0 the
        // L3 header, 2 IPv4). UCX 1.13 reads it to find the destination address in the GRH
        // slot and drops the datagram when it says otherwise (RoCE v2 annex A17.4.5.1: a UD
        // completion flags whether the frame was IPv4 or IPv6).
        out->sl = kRoceV2Ipv4PacketType;
    }
    if (!(out->opcode & IBV_WC_RECV)) {  // a send completion
        if (Qp* q = eng.qp_by_num(in.qp_num)) {
            out->wr_id = q->wr_ids[in.wr_id % q->cap.max_send_wr];
            q->retired = std::max(q->retired, in.wr_id + 1);
        }
    }
}

}  // namespace

int post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr)
{
    Qp* q = to_qp(ibqp);
    Engine& eng = *q->engine;
    std::lock_guard lock(eng.lock());
    for (; wr; wr = wr->next) {
        if (int err = post_one(eng, *q, *wr)) {
            *bad_wr = wr;
            return err;
        }
    }
    return 0;
}

int post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr)
{
    Qp* q = to_qp(ibqp);
    Engine& eng = *q->engine;
    std::lock_guard lock(eng.lock());
    for (; wr; wr = wr->next) {
        int err = EINVAL;
        if (wr->num_sge >= 0 && static_cast<uint32_t>(wr->num_sge) <= q->cap.max_recv_sge) {
            mv::RecvWr r;
            r.wr_id = wr->wr_id;
            r.num_sge = static_cast<uint32_t>(wr->num_sge);
            for (int i = 0; i < wr->num_sge; i++)
                r.sg[i] = mv::Sge{wr->sg_list[i].addr, wr->sg_list[i].length, wr->sg_list[i].lkey};
            err = eng.verbs().post_recv(q->h, r);  // ENOMEM: the receive queue is full
        }
        if (err) {
            *bad_wr = wr;
            return err;
        }
    }
    return 0;
}

int poll_cq(ibv_cq* ibcq, int n, ibv_wc* wc)
{
    Cq* cq = reinterpret_cast<Cq*>(ibcq);
    if (n <= 0) return 0;
    Engine& eng = *cq->engine;
    std::lock_guard g(cq->mu);
    const uint32_t seen = eng.completion_seq();
    if (cq->produced.load(std::memory_order_acquire) == cq->consumed) {
        // Nothing yet. The NIC that would produce it is a thread of this process, and a program
        // spinning here holds a core that NIC threads need (ib_write_bw's client shared its core
        // with the receiving NIC). So the poll sleeps until this device completes anything, at
        // most kEmptyPollWaitNs: a program that polls several CQs in turn is delayed by no more.
        eng.wait_completion(seen, kEmptyPollWaitNs);
        if (cq->produced.load(std::memory_order_acquire) == cq->consumed) return 0;
    }
    std::lock_guard lock(eng.lock());
    int total = 0;
    while (total < n) {
        mv::Wc batch[32];
        const int want = std::min(n - total, 32);
        const int k = eng.verbs().cq_poll(cq->h, batch, want);
        if (k < 0) {  // the CQ overran: in error from now on (after what it held)
            if (total) break;
            return -1;
        }
        for (int i = 0; i < k; i++) to_wc(eng, batch[i], &wc[total + i]);
        total += k;
        if (k < want) break;  // drained
    }
    cq->consumed += static_cast<uint64_t>(total);
    return total;
}

}  // namespace sdr::verbs
