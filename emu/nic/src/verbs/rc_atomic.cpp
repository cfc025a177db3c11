// RC atomics (IBTA vol. 1, 9.4.5 and 9.7.5.1): the responder checks a COMPARE SWAP's or FETCH
// ADD's rkey (remote atomic on the region and the QP, PD, 8 bytes inside the region) and its
// alignment, executes it on the 8 bytes, keeps the original value by PSN and answers an ATOMIC
// ACK with it; a duplicate (the requester's retry after a lost ATOMIC ACK) is answered from that
// result cache and never executed twice. The requester places the original value into the
// WQE's local SGEs and completes the WQE.
//
// Atomicity: the 8 bytes are changed by one locked read-modify-write of the host CPU
// (std::atomic_ref, sequentially consistent), so an atomic of this NIC is atomic against every
// other atomic of this NIC (one engine thread executes them in PSN order per QP) and also
// against a host thread's atomic instructions on the same word; plain host stores or a WRITE
// into the word meanwhile are not ordered with it. The device reports IBV_ATOMIC_HCA, the
// weaker promise. The value is the host's native byte order, as rxe does.

#include <sdr/emu/verbs_engine.hpp>
#include <sdr/emu/psn.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>

namespace sdr::emu {

using verbs::WcOpcode;
using verbs::WcStatus;
using verbs::WrOpcode;

void VerbsEngine::rc_atomic_request(VerbsQp& q, uint32_t h, const PacketMeta& m, const wire::Headers& hd,
                                    bool duplicate)
{
    if (duplicate) {
        // Executed before (an atomic takes one PSN): answer what it answered then. One no
        // longer in the cache, or a PSN that was never an atomic, is dropped.
        const AtomicResult* hit = nullptr;
        for (const AtomicResult& a : q.atomic_cache)
            if (a.valid && a.psn == m.psn) hit = &a;
        if (!hit) return verbs_drop(RxDrop::Duplicate, &q);
        const uint64_t orig = hit->orig;
        RcResp* r = rc_queue_rd_atomic(q, true);
        if (!r) return verbs_drop(RxDrop::Duplicate, &q);  // asked again later
        r->kind = RcResp::Kind::Atomic;
        r->psn = m.psn;
        r->orig = orig;
        q.counters.atomic_replays++;
        q.counters.rx_packets++;
        return verbs_doorbell(h);
    }
    const VerbsMr* mr = verbs_mr(m.rkey);
    RxDrop bad = RxDrop::Count;
    uint8_t* at = nullptr;
    if (!mr) {
        bad = RxDrop::UnknownKey;
    } else if (mr->pd != q.pd || !(mr->access & verbs::kRemoteAtomic) || !(q.access & verbs::kRemoteAtomic)) {
        // (a root key has remote write only: atomics never reach its slots)
        bad = RxDrop::AccessDenied;
    } else if (!(at = mr->remote(m.va, 8))) {
        bad = RxDrop::OutOfBounds;
    }
    if (bad != RxDrop::Count) {
        verbs_drop(bad, &q);
        return rc_responder_error(q, h, m.psn, wire::kNakRemoteAccess);
    }
    // The IBTA's atomics address an aligned 8-byte word: a misaligned VA (or a region whose
    // IOVA does not keep the host address aligned) is an invalid request.
    if ((m.va & 7) || (reinterpret_cast<uintptr_t>(at) & 7)) {
        verbs_drop(RxDrop::InvalidRequest, &q);
        return rc_responder_error(q, h, m.psn, wire::kNakInvalidRequest);
    }
    RcResp* r = rc_queue_rd_atomic(q, false);
    if (!r) {  // more READs and atomics in progress than max_dest_rd_atomic
        verbs_drop(RxDrop::InvalidRequest, &q);
        return rc_responder_error(q, h, m.psn, wire::kNakInvalidRequest);
    }
    std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(at));
    uint64_t orig;
    if (m.opcode == wire::kOpRcCmpSwap) {
        orig = hd.compare;
        word.compare_exchange_strong(orig, hd.swap_add);  // orig: the value found, equal or not
    } else {
        orig = word.fetch_add(hd.swap_add);
    }
    AtomicResult& c = q.atomic_cache[q.atomic_next++ % kRcAtomicCache];
    c = AtomicResult{true, m.psn, orig};
    r->kind = RcResp::Kind::Atomic;
    r->psn = m.psn;
    r->orig = orig;
    q.epsn = psn::next(m.psn);
    q.msn = (q.msn + 1) & psn::kMask;
    q.counters.atomics++;
    q.counters.rx_packets++;
    q.counters.rx_messages++;
    verbs_doorbell(h);
}

// The ATOMIC ACK for the oldest outstanding WQE, an atomic sent with this PSN: the original
// value lands in its local SGEs and it completes (IBV_WC_COMP_SWAP / IBV_WC_FETCH_ADD, 8 bytes).
void VerbsEngine::rc_atomic_ack(VerbsQp& q, uint32_t h, const PacketMeta& m, const wire::Headers& hd)
{
    const uint32_t psn = m.psn;
    if (psn::diff(psn, q.una) >= psn::diff(q.psn_high, q.una)) return verbs_drop(RxDrop::StaleAck, &q);
    // It implicitly acknowledges every request before its PSN.
    if (!rc_retire(q, h, psn - 1)) return verbs_drop(RxDrop::PsnSequence, &q);
    if (q.sq.empty()) return verbs_drop(RxDrop::StaleAck, &q);
    const uint64_t idx = q.sq.tail();
    VerbsSend& e = q.sq.at(idx);
    if (!verbs::is_atomic(e.wr.opcode) || !e.sent || e.psn != psn) return verbs_drop(RxDrop::StaleAck, &q);
    // The local SGEs were checked when the atomic was sent; a region may be gone since.
    uint32_t room;
    if (!verbs_sges_ok(q.pd, e.wr.sg.data(), e.wr.num_sge, verbs::kLocalWrite, &room) || room < 8)
        return rc_fail(q, idx, WcStatus::LocProtErr);
    uint8_t orig[8];
    std::memcpy(orig, &hd.atomic_orig, 8);
    verbs::RecvWr sink;
    sink.num_sge = e.wr.num_sge;
    sink.sg = e.wr.sg;
    verbs_scatter(sink, 0, orig, 8);  // the DMA into the requester's memory
    verbs::Wc wc;
    wc.wr_id = e.wr.wr_id;
    wc.opcode = e.wr.opcode == WrOpcode::AtomicCmpAndSwp ? WcOpcode::CompSwap : WcOpcode::FetchAdd;
    wc.byte_len = 8;
    wc.qp_num = q.qpn;
    const bool signaled = e.wr.signaled;
    q.rd_rewound = 0xFFFFFFFF;
    q.counters.rx_packets++;
    if (idx == q.sq_next) {  // rewound to it and not sent again yet: skip it
        q.sq_next++;
        q.wqe_off = 0;
        q.sq_psn = psn::next(psn);
    } else {
        q.rd_out--;
    }
    q.sq.pop();
    q.counters.tx_messages++;
    if (signaled) verbs_complete(q.send_cq, wc);
    rc_retire(q, h, psn);  // una moves past it; the retry budgets and the timer start again
}

}  // namespace sdr::emu
