// DCQCN on the verbs engine's RC, UC and UD QPs (dcqcn.hpp has the rules; the NIC-wide switch,
// the CNP queue and the pacing wake-up are the NIC core's, nic_dcqcn.cpp). Data packets
// (SEND, WRITE, READ requests and responses, RC's resends too) leave ECT(0) and are paced at
// the QP's rate; RC ACKs and NAKs leave Not-ECT and unpaced, like the CNPs: control traffic
// that a congested flow still needs. A UD QP has one rate whatever its destinations, as a
// ConnectX rate limiter per send queue does. Nothing here runs while DCQCN is off: the send
// path tests dcqcn_on_, the receive path a CE mark or the CNP opcode, first.

#include <sdr/emu/verbs_engine.hpp>

namespace sdr::emu {

void VerbsEngine::dcqcn_reset()
{
    const uint64_t now = exec_->now_ns();
    for (const std::unique_ptr<VerbsQp>& q : vqps_) {
        if (!q || !q->live) continue;
        q->rp.reset(core_.dcqcn_, now);
        q->np = DcqcnNp{};
        q->next_send_ns = 0;
    }
}

double VerbsEngine::qp_dcqcn_rate_gbps(uint32_t qp)
{
    VerbsQp* q = vqp(qp);
    if (!q || !q->live) return 0;
    if (!core_.dcqcn_on_) return core_.dcqcn_.line_gbps;
    return q->rp.rate_gbps(exec_->now_ns());
}

void VerbsEngine::dcqcn_notify(VerbsQp& q, uint32_t sender_qpn, const NicAddress& from)
{
    port_.rx_ce++;
    if (!core_.dcqcn_on_ || !q.np.on_ce(exec_->now_ns(), core_.dcqcn_.cnp_interval_ns)) return;
    // From the port this QP's packets to that QP use (RoCEv2's flow entropy), unsprayed.
    core_.dcqcn_queue_cnp(sender_qpn, from, udp_src_port(q.qpn, sender_qpn));
}

void VerbsEngine::dcqcn_cnp(VerbsQp& q, const NicAddress& src)
{
    // Only from a host this QP sends to: a connected QP's peer (its IP, as its other frames);
    // for UD, an address one of its PD's address handles names (the only places it sends).
    bool peer = src.ip == q.remote.ip;
    if (q.type == verbs::QpType::Ud) {
        peer = false;
        for (const VerbsAh& ah : vahs_) peer |= ah.live && ah.pd == q.pd && !ah.mcast && ah.dst.ip == src.ip;
    }
    if (!peer) return verbs_drop(RxDrop::WrongPeer, &q);
    if (!core_.dcqcn_on_) return verbs_drop(RxDrop::WrongOpcode, &q);
    port_.cnp_received++;
    q.rp.on_cnp(exec_->now_ns());
}

bool VerbsEngine::dcqcn_may_send(const VerbsQp& q)
{
    // An RC QP whose next packet is an ACK or NAK sends it now: not paced (an ATOMIC ACK carries
    // data, as a READ response does: paced).
    if (q.type == verbs::QpType::Rc && q.resp_n && q.resp[q.resp_head].kind == RcResp::Kind::Ack) return true;
    return core_.dcqcn_due(q.next_send_ns, exec_->now_ns());
}

void VerbsEngine::dcqcn_sent(VerbsQp& q, TxPacket& p)
{
    if (p.local_error || p.meta.opcode == wire::kOpRcAck) return;
    p.meta.ecn = wire::kEcnEct0;
    core_.dcqcn_paced(q.rp, &q.next_send_ns, padded_frame_bytes(p), exec_->now_ns());
}

}  // namespace sdr::emu
