// RC RDMA READ (IBTA vol. 1, 9.4.4 and 9.7.5.1.5): the responder checks a READ request's rkey
// (remote read on the region and the QP, PD, bounds) and queues its responses, one per MTU and
// PSN, read from the region as each leaves; a duplicate request is run again from its own RETH
// and PSN. The requester places each response in order into the WQE's local SGEs; a READ
// completes when its last response lands, and a gap in the responses asks again from the first
// one missing.

#include <sdr/emu/verbs_engine.hpp>
#include <sdr/emu/psn.hpp>

#include <algorithm>

namespace sdr::emu {

using verbs::WcOpcode;
using verbs::WcStatus;
using verbs::WrOpcode;

namespace {


}  // namespace

void VerbsEngine::rc_read_request(VerbsQp& q, uint32_t h, const PacketMeta& m, const wire::Headers& hd, bool duplicate)
{
    const uint32_t len = hd.dma_len;
    const uint32_t npkts = rc_npkts(len, q.pmtu);
    if (duplicate && psn::diff(q.epsn, m.psn) < npkts) {  // claims PSNs never executed: not a real one
        return verbs_drop(RxDrop::Duplicate, &q);
    }
    if (len > (1u << 31)) {
        verbs_drop(RxDrop::InvalidRequest, &q);
        return rc_responder_error(q, h, m.psn, wire::kNakInvalidRequest);
    }
    const VerbsMr* mr = verbs_mr(m.rkey);
    RxDrop bad = RxDrop::Count;
    if (!mr) {
        bad = RxDrop::UnknownKey;
    } else if (mr->pd != q.pd || !(mr->access & verbs::kRemoteRead) || !(q.access & verbs::kRemoteRead)) {
        bad = RxDrop::AccessDenied;
    } else if (!mr->remote(m.va, len)) {
        bad = RxDrop::OutOfBounds;
    }
    if (bad != RxDrop::Count) {
        verbs_drop(bad, &q);
        return rc_responder_error(q, h, m.psn, wire::kNakRemoteAccess);
    }
    // Responder resources: at most max_dest_rd_atomic READs and atomics in progress. A new one
    // past that is an invalid request; a duplicate finds its answer still going out, or is
    // asked for again.
    RcResp* r = rc_queue_rd_atomic(q, duplicate);
    if (!r) {
        if (duplicate) return verbs_drop(RxDrop::Duplicate, &q);
        verbs_drop(RxDrop::InvalidRequest, &q);
        return rc_responder_error(q, h, m.psn, wire::kNakInvalidRequest);
    }
    r->kind = RcResp::Kind::Read;
    r->psn = m.psn;
    r->key = m.rkey;
    r->va = m.va;
    r->len = len;
    q.counters.rx_packets++;
    if (!duplicate) {
        q.epsn = (m.psn + npkts) & psn::kMask;
        q.msn = (q.msn + 1) & psn::kMask;
        q.counters.rx_messages++;
    }
    verbs_doorbell(h);
}

void VerbsEngine::rc_read_response(VerbsQp& q, uint32_t h, const PacketMeta& m, const uint8_t* payload, uint32_t aeth)
{
    (void)aeth;  // an ACK syndrome; its MSN is informational
    const uint32_t psn = m.psn;
    if (psn::diff(psn, q.una) >= psn::diff(q.psn_high, q.una)) return verbs_drop(RxDrop::StaleAck, &q);
    // A response implicitly acknowledges every request before its PSN.
    if (!rc_retire(q, h, psn - 1)) return verbs_drop(RxDrop::PsnSequence, &q);
    if (q.sq.empty()) return verbs_drop(RxDrop::StaleAck, &q);
    const uint64_t idx = q.sq.tail();
    VerbsSend& e = q.sq.at(idx);
    const uint32_t npkts = rc_npkts(e.total, q.pmtu);
    if (e.wr.opcode != WrOpcode::RdmaRead || psn::diff(psn, e.psn) >= npkts) return verbs_drop(RxDrop::StaleAck, &q);
    const uint32_t expected = (e.psn + e.rd_done / q.pmtu) & psn::kMask;
    if (psn != expected) {
        if (psn::behind(psn, expected)) return verbs_drop(RxDrop::Duplicate, &q);
        // Responses were lost: ask again from the first one missing (once per gap; the timer
        // covers a lost request).
        if (q.rd_rewound != expected) {
            q.rd_rewound = expected;
            rc_rewind(q, h, expected);
        }
        return verbs_drop(RxDrop::PsnSequence, &q);
    }
    const uint32_t n = std::min(q.pmtu, e.total - e.rd_done);
    const bool last = e.rd_done + n == e.total;
    const bool says_last = m.opcode == wire::kOpRcReadRespLast || m.opcode == wire::kOpRcReadRespOnly;
    if (m.dma_len != n || says_last != last) return verbs_drop(RxDrop::BadLength, &q);
    // The local SGEs were checked when the READ was sent; a region may be gone since.
    uint32_t room;
    if (!verbs_sges_ok(q.pd, e.wr.sg.data(), e.wr.num_sge, verbs::kLocalWrite, &room) || room < e.total)
        return rc_fail(q, idx, WcStatus::LocProtErr);
    verbs::RecvWr sink;
    sink.num_sge = e.wr.num_sge;
    sink.sg = e.wr.sg;
    verbs_scatter(sink, e.rd_done, payload, n);  // the DMA into the requester's memory
    e.rd_done += n;
    q.rd_rewound = 0xFFFFFFFF;
    q.counters.rx_packets++;
    if (idx == q.sq_next) {  // rewound to this READ and not asked again yet: skip what landed
        q.wqe_off = e.rd_done;
        q.sq_psn = psn::next(psn);
    }
    if (last) {
        verbs::Wc wc;
        wc.wr_id = e.wr.wr_id;
        wc.opcode = WcOpcode::RdmaRead;
        wc.byte_len = e.total;
        wc.qp_num = q.qpn;
        const bool signaled = e.wr.signaled;
        if (idx == q.sq_next) {
            q.sq_next++;
            q.wqe_off = 0;
        } else {
            q.rd_out--;
        }
        q.sq.pop();
        q.counters.tx_messages++;
        if (signaled) verbs_complete(q.send_cq, wc);
    }
    rc_retire(q, h, psn);  // una moves past it; the retry budgets and the timer start again
}

}  // namespace sdr::emu
