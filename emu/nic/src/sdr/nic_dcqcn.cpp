// DCQCN on SDR's transport QPs (dcqcn.hpp has the rules): the notification point's CNPs and
// the reaction point's CNP, ECT(0) and the pace of each data packet; and what both engines share
// (nic_core.hpp): the CNP queue and the pacing wake-up (the verbs engine's side is
// verbs/dcqcn.cpp). Nothing here runs while it is off: the per-packet paths test dcqcn_on_
// (send) or a CE mark (receive) first.

#include "same_mac.hpp"

#include <sdr/emu/nic.hpp>
#include <sdr/emu/wire.hpp>

namespace sdr::emu {

namespace {
const uint8_t kCnpReserved[wire::kCnpReservedBytes] = {};
}  // namespace

void Nic::set_dcqcn(const DcqcnParams& p)
{
    dcqcn_ = p;
    dcqcn_on_ = p.enabled && p.line_gbps > 0;
    if (!dcqcn_on_) cnps_.clear();  // tx_next takes them only while on
    const uint64_t now = exec_->now_ns();
    for (TransportQp& q : qps_) {
        q.rp.reset(dcqcn_, now);
        q.np = DcqcnNp{};
        q.next_send_ns = 0;
    }
    if (engine_) engine_->dcqcn_reset();
}

void NicCore::dcqcn_queue_cnp(uint32_t dest_qp, const NicAddress& to, uint16_t port)
{
    cnps_.push_back(CnpSend{dest_qp, to.ip, to.mac, port});
    exec_->tx_ready(static_cast<Nic&>(*this));
}

bool NicCore::dcqcn_wait(uint64_t next_send_ns)
{
    // One timer for the earliest deadline: a later one would leave the port idle too long.
    if (!dcqcn_wake_ns_ || next_send_ns < dcqcn_wake_ns_) {
        dcqcn_wake_ns_ = next_send_ns;
        exec_->arm_timer(static_cast<Nic&>(*this), kDcqcnTimerWorker, 0, next_send_ns);
    }
    return false;
}

double Nic::qp_dcqcn_rate_gbps(uint32_t handle)
{
    if (handle >= qps_.size() || !qps_[handle].live) return 0;
    TransportQp& q = qps_[handle];
    if (!dcqcn_on_) return dcqcn_.line_gbps;
    return q.rp.rate_gbps(exec_->now_ns());
}

void Nic::dcqcn_notify(TransportQp& q)
{
    port_.rx_ce++;
    if (!dcqcn_on_ || !q.np.on_ce(exec_->now_ns(), dcqcn_.cnp_interval_ns)) return;
    // Back to the sending QP, from this QP's connection port (a spraying peer takes any).
    dcqcn_queue_cnp(q.remote_qpn, NicAddress{q.remote_mac, q.remote_ip}, q.conn_port);
}

void Nic::dcqcn_cnp(const PacketMeta& m, const NicAddress& src)
{
    const uint32_t h = NicIds::qpn_index(m.dest_qp);
    if (h >= qps_.size() || qps_[h].rx.qpn != m.dest_qp || !qps_[h].live) return drop(RxDrop::UnknownQp, nullptr);
    TransportQp& q = qps_[h];
    if ((m.udp_src_port | q.rx.port_mask) != q.rx.peer_port || src.ip != q.remote_ip || !same_mac(src.mac, q.remote_mac))
        return drop(RxDrop::WrongPeer, &q);
    if (!dcqcn_on_) return drop(RxDrop::WrongOpcode, &q);
    port_.cnp_received++;
    q.rp.on_cnp(exec_->now_ns());
}

void Nic::dcqcn_sent(TransportQp& q, PacketMeta& m)
{
    m.ecn = wire::kEcnEct0;
    dcqcn_paced(q.rp, &q.next_send_ns, wire::frame_bytes_write_imm(m.dma_len), exec_->now_ns());
}

bool Nic::cnp_tx_next(TxPacket* out)
{
    const CnpSend c = cnps_.front();
    cnps_.pop_front();
    *out = TxPacket{};
    out->kind = TxPacket::Kind::Cnp;
    PacketMeta& m = out->meta;
    m.opcode = wire::kOpCnp;
    m.dest_qp = c.dest_qp;
    m.dma_len = wire::kCnpReservedBytes;
    m.udp_src_port = c.udp_src_port;
    out->remote_ip = c.remote_ip;
    out->remote_mac = c.remote_mac;
    out->payload = kCnpReserved;
    return true;
}

}  // namespace sdr::emu
