// The verbs requester: a send WQE (a message) is cut into packets of the path MTU, UC SEND and
// RDMA WRITE as FIRST/MIDDLE/LAST/ONLY (+immediate on the last), UD SEND as one ONLY with a
// DETH; one packet per turn of the QP (the NIC's nic_tx.cpp arbitrates with SDR's queue), a
// UC/UD WQE completing when its last packet leaves the port. RC QPs make their packets in
// verbs/rc_requester.cpp and complete at the ACK.

#include <sdr/emu/verbs_engine.hpp>
#include <sdr/emu/psn.hpp>

#include <algorithm>
#include <cstring>

namespace sdr::emu {

using verbs::QpState;
using verbs::QpType;
using verbs::WcOpcode;
using verbs::WcStatus;
using verbs::WrOpcode;

namespace {

uint8_t uc_opcode(WrOpcode op, bool first, bool last)
{
    const bool imm = op == WrOpcode::SendWithImm || op == WrOpcode::RdmaWriteWithImm;
    if (op == WrOpcode::Send || op == WrOpcode::SendWithImm) {
        if (first && last) return imm ? wire::kOpUcSendOnlyImm : wire::kOpUcSendOnly;
        if (first) return wire::kOpUcSendFirst;
        if (last) return imm ? wire::kOpUcSendLastImm : wire::kOpUcSendLast;
        return wire::kOpUcSendMiddle;
    }
    if (first && last) return imm ? wire::kOpUcWriteOnlyImm : wire::kOpUcWriteOnly;
    if (first) return wire::kOpUcWriteFirst;
    if (last) return imm ? wire::kOpUcWriteLastImm : wire::kOpUcWriteLast;
    return wire::kOpUcWriteMiddle;
}

}  // namespace

// RC's SEND and RDMA WRITE opcodes are UC's minus 0x20 (IBTA table 38).
uint8_t VerbsEngine::verbs_data_opcode(WrOpcode op, bool first, bool last, bool rc)
{
    return static_cast<uint8_t>(uc_opcode(op, first, last) - (rc ? 0x20 : 0));
}

const uint8_t* VerbsEngine::verbs_payload(const verbs::SendWr& w, uint32_t off, uint32_t len)
{
    if (!len) return nullptr;
    uint32_t i = 0;
    while (i < w.num_sge && off >= w.sg[i].length) off -= w.sg[i++].length;
    if (off + len <= w.sg[i].length) return reinterpret_cast<const uint8_t*>(w.sg[i].addr) + off;
    uint32_t done = 0;
    for (; done < len; i++, off = 0) {
        uint32_t n = std::min(len - done, w.sg[i].length - off);
        std::memcpy(verbs_gather_.data() + done, reinterpret_cast<const uint8_t*>(w.sg[i].addr) + off, n);
        done += n;
    }
    return verbs_gather_.data();
}

// One packet of the QP at the head of verbs_active_; the QP goes to the back while it has more.
// A packet's bytes are read where they lie (one SGE) or gathered into verbs_gather_, which
// stays valid until the next call: every executor encodes a packet before it asks for another.
bool VerbsEngine::tx_next(TxPacket* out)
{
    const bool sent = gsi_out_.empty() ? next_packet(out) : gsi_tx_next(out);  // QP1's MADs first
    core_.engine_tx_ = !verbs_active_.empty() || !gsi_out_.empty();  // the NIC asks again only while work waits
    return sent;
}

bool VerbsEngine::next_packet(TxPacket* out)
{
    // DCQCN: a QP that must wait for its rate goes to the back and the next one may send; the
    // `paced` ones at the back end the round once only they are left (the wake-up is armed).
    size_t paced = 0;
    while (verbs_active_.size() > paced) {
        const uint32_t h = verbs_active_.front();
        verbs_active_.pop();
        VerbsQp& q = *vqps_[h];
        if (!q.live || !verbs_has_tx(q)) {
            q.queued = false;
            continue;
        }
        if (core_.dcqcn_on_ && !dcqcn_may_send(q)) [[unlikely]] {
            verbs_active_.push_slot() = h;
            paced++;
            continue;
        }
        if (q.type == QpType::Rc) {
            const bool sent = rc_tx_next(q, h, out);
            if (q.live && verbs_has_tx(q))  // (a local error put the QP in ERR: it leaves the ring)
                verbs_active_.push_slot() = h;
            else
                q.queued = false;
            if (sent && core_.dcqcn_on_) [[unlikely]] dcqcn_sent(q, *out);
            if (sent) return true;
            continue;
        }
        VerbsSend& e = q.sq.at(q.sq_next);
        const verbs::SendWr& w = e.wr;
        *out = TxPacket{};
        out->kind = TxPacket::Kind::Verbs;
        out->qp = h;
        out->cookie = static_cast<uint32_t>(q.sq_next);
        out->meta.src_qp = q.qpn;  // DETH for UD; for UC, tx_done's check that the QP is the same
        if (q.wqe_off == 0) {
            // Local protection (lkey, PD, bounds; a UD WQE's address handle still there) is
            // checked once per WQE, before its first packet: a failure sends nothing, completes
            // the WQE in error and the QP goes to ERR.
            uint32_t total;
            if (!verbs_sges_ok(q.pd, w.sg.data(), w.num_sge, 0, &total) ||
                (q.type == QpType::Ud && !vahs_[w.ah].live)) {
                out->local_error = true;
                out->signaled = true;
                q.state = QpState::Err;  // nothing more leaves; tx_done completes and flushes
                q.queued = false;
                return true;
            }
        }
        const uint32_t mtu = q.type == QpType::Ud ? e.total : q.pmtu;
        const uint32_t len = std::min(mtu, e.total - q.wqe_off);
        const bool first = q.wqe_off == 0, last = q.wqe_off + len == e.total;
        PacketMeta& m = out->meta;
        if (q.type == QpType::Ud) {
            const VerbsAh& ah = vahs_[w.ah];
            m.opcode = w.opcode == WrOpcode::SendWithImm ? wire::kOpUdSendOnlyImm : wire::kOpUdSendOnly;
            m.dest_qp = ah.mcast ? wire::kMcastQpn : w.remote_qpn & 0xFFFFFF;  // IBTA 10.5.2: a group's QPN
            // A controlled Q_Key (high bit set) in the WR means: send the QP's own (IBTA).
            m.qkey = (w.remote_qkey & 0x80000000u) ? q.qkey : w.remote_qkey;
            out->remote_ip = ah.dst.ip;
            out->remote_mac = ah.dst.mac;
        } else {
            m.opcode = verbs_data_opcode(w.opcode, first, last, false);
            m.dest_qp = q.dest_qpn;
            if (first && (w.opcode == WrOpcode::RdmaWrite || w.opcode == WrOpcode::RdmaWriteWithImm)) {
                m.va = w.remote_addr;
                m.rkey = w.rkey;
                out->reth_len = e.total;
            }
            out->remote_ip = q.remote.ip;
            out->remote_mac = q.remote.mac;
        }
        m.psn = q.sq_psn;
        q.sq_psn = psn::next(q.sq_psn);
        m.dma_len = len;
        if (wire::has_imm(m.opcode)) m.imm = w.imm;
        m.solicited = last && w.solicited;
        m.udp_src_port = tx_port(q, m.dest_qp);
        out->payload = verbs_payload(w, q.wqe_off, len);
        out->signaled = last;
        if (last) {
            q.sq_next++;
            q.wqe_off = 0;
        } else {
            q.wqe_off += len;
        }
        if (q.sq_next != q.sq.head()) {
            verbs_active_.push_slot() = h;
        } else {
            q.queued = false;
        }
        if (core_.dcqcn_on_) [[unlikely]] dcqcn_sent(q, *out);
        return true;
    }
    return false;
}

void VerbsEngine::tx_done(const TxPacket& p)
{
    VerbsQp* q = vqp(p.qp);
    if (!p.local_error) {
        port_.tx_frames++;
        port_.tx_bytes += padded_frame_bytes(p);
    } else {
        port_.tx_local_errors++;
    }
    // The QP was destroyed (or its entry reused), or flushed since: nothing to complete.
    if (!q || !q->live || q->qpn != p.meta.src_qp) return;
    if (!p.local_error) q->counters.tx_packets++;
    if (q->type == QpType::Rc) {  // RC completes at the ACK; a local error fails its WQE now
        const uint64_t idx = q->sq.tail() + static_cast<uint32_t>(p.cookie - static_cast<uint32_t>(q->sq.tail()));
        if (p.local_error && idx < q->sq.head()) rc_fail(*q, idx, WcStatus::LocProtErr);
        return;
    }
    if (!p.signaled || q->sq.empty() || static_cast<uint32_t>(q->sq.tail()) != p.cookie) return;
    const VerbsSend& e = q->sq.front();
    verbs::Wc wc;
    wc.wr_id = e.wr.wr_id;
    wc.opcode = e.wr.opcode == WrOpcode::Send || e.wr.opcode == WrOpcode::SendWithImm ? WcOpcode::Send
                                                                                    : WcOpcode::RdmaWrite;
    wc.byte_len = e.total;
    wc.qp_num = q->qpn;
    if (p.local_error) {
        wc.status = WcStatus::LocProtErr;
        verbs_complete(q->send_cq, wc);
        q->sq.pop();
        verbs_flush(*q);
        return;
    }
    q->counters.tx_messages++;
    if (e.wr.signaled) verbs_complete(q->send_cq, wc);
    q->sq.pop();
}

}  // namespace sdr::emu
