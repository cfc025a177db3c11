// The NIC's receive path: frame decode (hostile bytes), dispatch to the control QPs, the verbs
// QPs (verbs/rx.cpp; QP1's datagrams too) or SDR's UC responder (its RC transport QPs: nic_sdr_rc.cpp), whose
// checks each count a drop and write nothing; then the DMA and the CQE to the channel's DPA
// worker.

#include "same_mac.hpp"

#include <sdr/emu/nic.hpp>
#include <sdr/emu/wire.hpp>

#include <cstring>

namespace sdr::emu {

void Nic::drop(RxDrop d, TransportQp* qp)
{
    port_.rx_drops[static_cast<size_t>(d)]++;
    if (qp) qp->rx.drops++;
}

void Nic::rx_frame(const uint8_t* frame, size_t len)
{
    port_.rx_frames++;
    port_.rx_bytes += len;
    wire::Parsed p;
    wire::Verdict v = wire::decode(frame, len, &p, true);
    switch (v) {
    case wire::Verdict::Ok: break;
    case wire::Verdict::Truncated: return drop(RxDrop::Truncated, nullptr);
    case wire::Verdict::NotIpv4: return drop(RxDrop::NotIpv4, nullptr);
    case wire::Verdict::NotRoce: return drop(RxDrop::NotRoce, nullptr);
    case wire::Verdict::BadIpHeader: return drop(RxDrop::BadIpHeader, nullptr);
    case wire::Verdict::BadLength: return drop(RxDrop::BadLength, nullptr);
    case wire::Verdict::BadOpcode: return drop(RxDrop::BadOpcode, nullptr);
    case wire::Verdict::BadIcrc: return drop(RxDrop::BadIcrc, nullptr);
    }
    PacketMeta m;
    m.va = p.h.va;
    m.dest_qp = p.h.dest_qp;
    m.psn = p.h.psn;
    m.rkey = p.h.rkey;
    m.dma_len = p.payload_len;
    m.imm = p.h.imm;
    m.opcode = p.h.opcode;
    m.udp_src_port = p.h.udp_src_port;
    m.qkey = p.h.qkey;
    m.src_qp = p.h.src_qp;
    m.solicited = p.h.solicited;
    m.ack_req = p.h.ack_req;
    m.ecn = p.h.ecn();
    const NicAddress src{p.h.src_mac, p.h.src_ip};
    // QPN bit 23 clear: SDR's data QPs, straight on. Set: bit 12 names a verbs QP, else a control QP.
    if (m.dest_qp & NicIds::kCtrlQpnBit) {
        if (m.dest_qp & kVerbsQpnBit) {
            if (!engine_) return drop(m.dest_qp == wire::kMcastQpn ? RxDrop::McastNoMember : RxDrop::UnknownQp, nullptr);
            return engine_->receive(m, p.payload, src, frame + wire::kEthBytes, p.h);
        }
        if (wire::has_deth(m.opcode)) return ctrl_receive(m, p.payload, src);
    }
    if (m.dest_qp == wire::kGsiQpn) [[unlikely]] {  // QP1: the verbs engine's management agent (gsi.hpp)
        if (!engine_) return drop(RxDrop::UnknownQp, nullptr);
        return engine_->receive(m, p.payload, src, frame + wire::kEthBytes, p.h);
    }
    if (m.opcode == wire::kOpRcAck) [[unlikely]] return sdr_rc_ack(m, p.h.aeth, src);  // to an RC transport QP
    if (m.opcode == wire::kOpCnp) [[unlikely]] return dcqcn_cnp(m, src);  // DCQCN: slow a sending QP
    respond(m, p.payload, src);  // a UD frame for a data QP is a WrongOpcode drop there
}

// Flattened: the payload-free simulator's every packet comes here, and the calls down to the
// firmware's handler cost more than their bodies.
[[gnu::flatten]] void Nic::rx_packet(const PacketMeta& m, const uint8_t* payload, const NicAddress& src)
{
    port_.rx_frames++;
    port_.rx_bytes += wire::frame_bytes_write_imm(m.dma_len);
    respond(m, payload, src);
}

void Nic::respond(const PacketMeta& m, const uint8_t* payload, const NicAddress& src)
{
    uint32_t h = NicIds::qpn_index(m.dest_qp);
    if (h >= qps_.size() || qps_[h].rx.qpn != m.dest_qp || !qps_[h].rx.live) return drop(RxDrop::UnknownQp, nullptr);
    TransportQp& qp = qps_[h];
    const TransportQp::Rx& r = qp.rx;
    // Only the connected peer's frames, before anything else is looked at (an unconnected QP
    // has a peer port no frame carries).
    if ((m.udp_src_port | r.port_mask) != r.peer_port || src.ip != r.remote_ip || !same_mac(src.mac, r.remote_mac))
        return drop(RxDrop::WrongPeer, &qp);
    if (m.ecn == wire::kEcnCe) [[unlikely]] dcqcn_notify(qp);  // a switch on the way is congested
    if (m.opcode != wire::kOpUcWriteOnlyImm || r.rc) [[unlikely]] {
        if (r.rc && m.opcode == wire::kOpRcWriteOnlyImm) return sdr_rc_receive(qp, h, m, payload);
        return drop(RxDrop::WrongOpcode, &qp);
    }
    place(qp, m, payload);
}

bool Nic::place(TransportQp& qp, const PacketMeta& m, const uint8_t* payload)
{
    RootKey* rk = (m.rkey == qp.rx.rkey && qp.rx.rkey) ? root_key(m.rkey) : nullptr;
    if (!rk) return drop(RxDrop::UnknownKey, &qp), false;
    uint64_t slot, off;
    if (rk->slot_shift) {  // SDR's slots are powers of two: no division per packet
        slot = m.va >> rk->slot_shift;
        off = m.va & (rk->slot_bytes - 1);
    } else {
        slot = m.va / rk->slot_bytes;
        off = m.va % rk->slot_bytes;
    }
    if (slot >= rk->entries.size()) return drop(RxDrop::OutOfBounds, &qp), false;
    const RootEntry& e = rk->entries[slot];
    if (!e.addr) {
        // NULL key: a late packet of a completed message; payload discarded, CQE still raised
        // (the firmware's tag check drops it).
        port_.rx_null_key++;
        qp.rx.null_key++;
    } else if (m.dma_len != 0) {
        if (off > e.len || m.dma_len > e.len - off) return drop(RxDrop::OutOfBounds, &qp), false;
        if (payload) std::memcpy(e.addr + off, payload, m.dma_len);  // the DMA
        port_.rx_placed_bytes += m.dma_len;
    }
    qp.rx.packets++;
    port_.rx_cqes++;
    hal_cqe cqe{};
    cqe.qp_tag = qp.rx.tag;
    cqe.imm = m.imm;
    cqe.byte_len = m.dma_len;
    cqe.opcode = HAL_CQE_RECV_WRITE_IMM;
    cqe.status = HAL_CQE_OK;
    // The channel's DPA worker drains its CQ: at once (the simulator without its cost model),
    // on its own thread (real-time executors with worker cores), or later in virtual time.
    if (!(cqe_dispatch_ && exec_->dispatch_rx_cqe(*this, qp.rx.channel, cqe))) run_rx_cqe(qp.rx.channel, cqe);
    return true;
}

void Nic::run_rx_cqe(uint32_t worker, const hal_cqe& cqe)
{
    hal_worker* w = &rx_workers_[worker];
    counter_add(w->cqe_handler_calls, 1);
    fw_handle_cqe(fw_, w, &cqe);
}

}  // namespace sdr::emu
