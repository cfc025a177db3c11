// QP1 (gsi.hpp): datagrams to QPN 1 go to the attached management agent; its MADs leave as UD
// SEND Only packets from QPN 1 with the GSI Q_Key, ahead of the verbs QPs' packets (they are
// few, and a connection waits on each). The engine checks only what the wire decides (a UD
// SEND Only opcode, a payload); the Q_Key, the length and the MAD itself are the agent's.

#include <sdr/emu/psn.hpp>
#include <sdr/emu/verbs_engine.hpp>

#include <cstring>

namespace sdr::emu {

void VerbsEngine::gsi_receive(const PacketMeta& m, const uint8_t* payload, const NicAddress& src,
                              const wire::Headers& hd)
{
    if (!gsi_ || !payload) return verbs_drop(RxDrop::UnknownQp, nullptr);
    if (m.opcode != wire::kOpUdSendOnly) return verbs_drop(RxDrop::WrongOpcode, nullptr);
    GsiDatagram d;
    d.mad = payload;
    d.len = m.dma_len;
    d.src = src;
    d.src_qp = m.src_qp;
    d.qkey = m.qkey;
    d.pkey = hd.pkey;
    gsi_->gsi_receive(d);
    core_.note_host_event();  // a host polling for CM events may look now
}

bool VerbsEngine::gsi_send(const NicAddress& dst, uint32_t dest_qpn, const uint8_t* mad, uint32_t len)
{
    if (gsi_out_.size() >= kGsiQueueDepth || len > kGsiMadBytes) return false;
    GsiOut& o = gsi_out_.emplace_back();
    o.dst = dst;
    o.dest_qpn = dest_qpn & 0xFFFFFF;
    o.len = len;
    std::memcpy(o.mad.data(), mad, len);
    core_.engine_tx_ = true;
    exec_->tx_ready(nic_);
    return true;
}

// The head MAD, copied out of the queue into gsi_tx_ (valid until the next tx_next: every
// executor encodes a packet before it asks for another). Not ECN-capable: control traffic.
bool VerbsEngine::gsi_tx_next(TxPacket* out)
{
    const GsiOut& o = gsi_out_.front();
    std::memcpy(gsi_tx_.data(), o.mad.data(), o.len);
    *out = TxPacket{};
    out->kind = TxPacket::Kind::Verbs;
    out->qp = kNoHandle;  // no verbs QP: tx_done counts the frame and nothing else
    PacketMeta& m = out->meta;
    m.opcode = wire::kOpUdSendOnly;
    m.dest_qp = o.dest_qpn;
    m.src_qp = wire::kGsiQpn;
    m.qkey = wire::kGsiQkey;
    m.psn = gsi_psn_;
    gsi_psn_ = psn::next(gsi_psn_);
    m.dma_len = o.len;
    m.udp_src_port = udp_src_port(wire::kGsiQpn, o.dest_qpn);
    out->remote_ip = o.dst.ip;
    out->remote_mac = o.dst.mac;
    out->payload = gsi_tx_.data();
    out->signaled = true;
    gsi_out_.pop_front();
    return true;
}

void VerbsEngine::gsi_arm_timer(uint64_t deadline_ns)
{
    exec_->arm_timer(nic_, kVerbsTimerWorker, kGsiTimerId, deadline_ns);
}

uint64_t VerbsEngine::now_ns() const { return exec_->now_ns(); }

}  // namespace sdr::emu
