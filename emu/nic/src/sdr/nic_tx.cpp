// The NIC's send engine: WQEs from every QP in post order through one ring, packets handed to
// the port, completions back to the firmware, and the frame encoder's headers. Arbitration of
// the port: control datagrams first (strict priority, they are few and small), then SDR's ring
// and the verbs QPs one packet each in turn while both have work, so neither starves the other
// and a long verbs message never delays SDR by more than one packet per packet of its own;
// among verbs QPs, one packet per QP in turn (verbs/tx.cpp).

#include <sdr/emu/nic.hpp>
#include <sdr/emu/psn.hpp>
#include <sdr/emu/wire.hpp>

#include <cstring>

namespace sdr::emu {

// The simulator's port and the real-time loop keep arrays of these: 80 bytes is a cheap stride.
static_assert(sizeof(TxPacket) == 80, "a TxPacket that grows costs SDR's per-packet path");

// Reads the next packet's payload ahead, as a NIC's DMA engine does, while this one is
// encoded: each payload starts a new page, where the hardware prefetcher loses the stream, and
// the kernel's traffic on the sending core has evicted the message by then. perf on AF_XDP: the
// copy into the frame fell from 5.7-6.5 % of the sending core to 3.9-5.0 %. Only a registered
// range is touched. Real-time NICs only (set_tx_prefetch): in the payload-free simulator the
// lookup and 64 prefetches per packet cost 2-3x its speed for bytes nobody reads.
void Nic::prefetch_payload(const hal_tx_wqe& w) const
{
    if (!w.length || !mr_covers(w.lkey, w.local_addr, w.length)) return;
    const char* a = reinterpret_cast<const char*>(w.local_addr);
    for (uint32_t off = 0; off < w.length; off += 64) __builtin_prefetch(a + off, 0, 3);
}

bool Nic::tx_next(TxPacket* out)
{
    if (ctrl_next_ != ctrl_head_) {  // control datagrams go first
        const CtrlSend& c = ctrl_sq_[ctrl_next_ % kCtrlSqDepth];
        *out = TxPacket{};
        out->kind = TxPacket::Kind::Ctrl;
        out->qp = c.handle;
        out->meta = c.meta;
        out->remote_ip = c.remote_ip;
        out->remote_mac = c.remote_mac;
        out->payload = ctrl_data(ctrl_next_++);
        return true;
    }
    if (dcqcn_on_ && !cnps_.empty()) [[unlikely]]  // DCQCN's notifications: control traffic, next
        return cnp_tx_next(out);
    // RC transport QPs' ACKs, then their packets sent again (older PSNs before new ones).
    if (rc_queued_) [[unlikely]]
        if (sdr_rc_tx_next(out)) return true;
    // Only a NIC with verbs work pays for the turn: SDR alone tests one counter.
    if (engine_tx_ && (sq_ring_.empty() || (verbs_turn_ = !verbs_turn_)))
        if (engine_->tx_next(out)) return true;
    if (sq_ring_.empty()) return false;
    const hal_tx_wqe& w = sq_ring_.front();  // stays put: nothing posts while this runs
    if (dcqcn_on_ && !dcqcn_may_send(qps_[w.qp], exec_->now_ns())) [[unlikely]]  // paced: verbs may still go
        return engine_tx_ && engine_->tx_next(out);
    sq_ring_.pop();
    if (tx_prefetch_ && !sq_ring_.empty()) prefetch_payload(sq_ring_.front());
    TransportQp& q = qps_[w.qp];
    // Every field is written here (no zeroing of the whole packet first): this runs per packet.
    out->qp = w.qp;
    out->cookie = w.cookie;
    out->signaled = w.signaled;
    out->kind = TxPacket::Kind::Sdr;
    out->local_error = !q.live || q.rc_failed || (w.length && !mr_covers(w.lkey, w.local_addr, w.length));
    if (out->local_error) return true;  // local protection error: nothing goes on the wire
    PacketMeta& m = out->meta;
    m.opcode = wire::kOpUcWriteOnlyImm;
    m.ack_req = false;
    m.dest_qp = q.remote_qpn;
    m.psn = q.psn;
    q.psn = psn::next(q.psn);
    m.va = w.remote_va;
    m.rkey = w.rkey;
    m.dma_len = w.length;
    m.imm = w.imm;
    m.qkey = m.src_qp = 0;
    m.udp_src_port = tx_port(q);
    out->remote_ip = q.remote_ip;
    out->remote_mac = q.remote_mac;
    out->payload = reinterpret_cast<const uint8_t*>(w.local_addr);
    if (dcqcn_on_) [[unlikely]] dcqcn_sent(q, m);
    if (q.rc) [[unlikely]] sdr_rc_sent(q, w.qp, w, out);
    return true;
}

void Nic::tx_done(const TxPacket* batch, size_t n)
{
    for (const TxPacket* p = batch; p != batch + n; p++) {
        if (p->kind != TxPacket::Kind::Sdr) [[unlikely]] {
            tx_done_other(*p);
            continue;
        }
        TransportQp& q = qps_[p->qp];
        if (q.rc && !p->local_error) [[unlikely]] {  // an RC WQE completes at its ACK
            q.in_port--;
            port_.tx_frames++;
            port_.tx_bytes += wire::frame_bytes_write_imm(p->meta.dma_len);
            q.tx_packets++;
            q.tx_bytes += p->meta.dma_len;
            continue;
        }
        q.sq_used--;
        if (!q.live) continue;  // destroyed with WQEs queued: its firmware slot may serve another QP now
        if (p->local_error) {
            port_.tx_local_errors++;
        } else {
            port_.tx_frames++;
            port_.tx_bytes += wire::frame_bytes_write_imm(p->meta.dma_len);
            q.tx_packets++;
            q.tx_bytes += p->meta.dma_len;
        }
        if (p->signaled || q.sq_blocked) complete_send(q, p->cookie, p->signaled, p->local_error);  // else it has nothing to do
    }
}

void Nic::tx_done_other(const TxPacket& p)
{
    if (p.kind == TxPacket::Kind::Verbs) return engine_->tx_done(p);
    if (p.kind == TxPacket::Kind::SdrAck || p.kind == TxPacket::Kind::Cnp) {
        port_.tx_frames++;
        port_.tx_bytes += padded_frame_bytes(p);
        port_.cnp_sent += p.kind == TxPacket::Kind::Cnp;
        return;
    }
    ctrl_done_++;
    port_.tx_frames++;
    port_.tx_ctrl++;
    port_.tx_bytes += wire::frame_bytes_ud_send(p.meta.dma_len);
}

// A WQE left (UC) or was acknowledged (RC), or failed: its CQE to the firmware if signalled.
// An unsignalled WQE that failed still completes (as verbs does), but it must not retire a
// request early: only signalled ones count against the request.
void Nic::complete_send(TransportQp& q, uint32_t cookie, bool signaled, bool error)
{
    uint32_t fw_qp = fw_tag_qp(q.tag);
    if (signaled) {
        hal_cqe cqe{};
        cqe.qp_tag = q.tag;
        cqe.wr_cookie = cookie;
        cqe.opcode = HAL_CQE_SEND;
        cqe.status = error ? HAL_CQE_LOCAL_ERROR : HAL_CQE_OK;
        hal_worker* w = tx_worker(fw_qp);
        counter_add(w->cqe_handler_calls, 1);
        fw_handle_cqe(fw_, w, &cqe);
    }
    // Ring the firmware once the send queue has drained to half, not per freed entry: one
    // handler call then posts a batch.
    if (q.sq_blocked && q.sq_used <= kSqDepth / 2) {
        q.sq_blocked = false;
        doorbell(fw_qp);
    }
}

size_t Nic::tx_encode(const TxPacket& p, uint8_t* out, size_t cap) const
{
    if (p.kind == TxPacket::Kind::Verbs || p.kind == TxPacket::Kind::SdrAck || p.kind == TxPacket::Kind::Cnp)
        return encode_padded(p, addr_, out, cap);
    NicAddress dst{p.remote_mac, p.remote_ip};
    return wire::encode(roce_headers(p.meta, addr_, dst), p.payload, p.meta.dma_len, out, cap);
}

}  // namespace sdr::emu
