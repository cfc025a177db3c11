// The NIC's control QPs: UD SEND datagrams beside each SDR QP, a bounded send queue that goes
// out ahead of data, and a receive ring per QP that the host drains.

#include "same_mac.hpp"

#include <sdr/emu/nic.hpp>

#include <cstring>

namespace sdr::emu {

uint32_t Nic::ctrl_qp_create()
{
    size_t h = 0;
    while (h < ctrl_qps_.size() && ctrl_qps_[h].live) h++;
    if (h >= kVerbsQpnBit) return kNoHandle;  // the upper half of the index space is the verbs QPs'
    if (h == ctrl_qps_.size()) ctrl_qps_.emplace_back();
    // The control send queue (kCtrlSqDepth datagrams of up to 4 KiB) comes with the first
    // control QP: a NIC used only as a verbs device never pays for it.
    if (ctrl_sq_.empty()) {
        ctrl_sq_.resize(kCtrlSqDepth);
        ctrl_data_.reset(new uint8_t[size_t{kCtrlSqDepth} * kCtrlMaxBytes]);  // uninitialised: untouched
    }
    CtrlQp q;
    q.live = true;
    q.qpn = ids_.ctrl_qpn(static_cast<uint32_t>(h), ctrl_qps_[h].qpn);
    q.qkey = ids_.qkey();
    // A ring entry exists once a datagram first lands in it (and keeps its buffer): 4096 entries
    // of 4 KiB zeroed up front would cost every QP 16 MiB and most of its creation time, and
    // even their empty records 112 KiB (a fabric of 1024 hosts: 224 MiB).
    ctrl_qps_[h] = std::move(q);
    return static_cast<uint32_t>(h);
}

void Nic::ctrl_qp_destroy(uint32_t handle)
{
    if (handle >= ctrl_qps_.size()) return;
    uint32_t qpn = ctrl_qps_[handle].qpn;
    ctrl_qps_[handle] = CtrlQp{};
    ctrl_qps_[handle].qpn = qpn;  // the next QP of this entry gets another
}

bool Nic::ctrl_qp_connect(uint32_t handle, const NicAddress& remote, uint32_t remote_qpn)
{
    if (handle >= ctrl_qps_.size() || !ctrl_qps_[handle].live) return false;
    CtrlQp& q = ctrl_qps_[handle];
    q.peer = remote;
    q.peer_qpn = remote_qpn & 0xFFFFFF;
    q.peer_port = udp_src_port(q.qpn, q.peer_qpn);
    return true;
}

bool Nic::ctrl_send(uint32_t handle, const NicAddress& dst, uint32_t dst_qpn, uint32_t dst_qkey,
                    const void* data, uint32_t len)
{
    if (handle >= ctrl_qps_.size() || !ctrl_qps_[handle].live || len > kCtrlMaxBytes) return false;
    if (ctrl_head_ - ctrl_done_ >= kCtrlSqDepth) return false;
    CtrlSend& e = ctrl_sq_[ctrl_head_ % kCtrlSqDepth];
    e.meta = PacketMeta{};
    e.meta.opcode = wire::kOpUdSendOnly;
    e.meta.dest_qp = dst_qpn & 0xFFFFFF;
    e.meta.qkey = dst_qkey;
    e.meta.src_qp = ctrl_qpn(handle);
    e.meta.dma_len = len;
    e.meta.udp_src_port = udp_src_port(ctrl_qpn(handle), e.meta.dest_qp);
    e.handle = handle;
    e.remote_ip = dst.ip;
    e.remote_mac = dst.mac;
    if (len) std::memcpy(ctrl_data(ctrl_head_), data, len);
    ctrl_head_++;
    exec_->tx_ready(*this);
    return true;
}

int64_t Nic::ctrl_recv(uint32_t handle, void* buf, size_t cap)
{
    if (handle >= ctrl_qps_.size() || !ctrl_qps_[handle].live) return 0;
    CtrlQp& q = ctrl_qps_[handle];
    if (q.tail == q.head) return 0;
    uint32_t i = static_cast<uint32_t>(q.tail % kCtrlRingDepth);
    if (q.len[i] > cap) return -1;
    if (q.len[i]) std::memcpy(buf, q.ring[i].data(), q.len[i]);  // an empty entry has no buffer
    q.tail++;
    return q.len[i];
}

// A received control datagram: hostile like every frame, copied into the QP's ring or dropped.
void Nic::ctrl_receive(const PacketMeta& m, const uint8_t* payload, const NicAddress& src)
{
    uint32_t h = NicIds::qpn_index(m.dest_qp);
    if (h >= ctrl_qps_.size() || ctrl_qps_[h].qpn != m.dest_qp || !ctrl_qps_[h].live || !payload)
        return drop(RxDrop::UnknownQp, nullptr);
    CtrlQp& q = ctrl_qps_[h];
    if (m.src_qp != q.peer_qpn || m.udp_src_port != q.peer_port || src.ip != q.peer.ip || !same_mac(src.mac, q.peer.mac))
        return drop(RxDrop::WrongPeer, nullptr);
    if (m.qkey != q.qkey) return drop(RxDrop::BadQkey, nullptr);
    if (m.dma_len > kCtrlMaxBytes) return drop(RxDrop::OutOfBounds, nullptr);
    if (q.head - q.tail >= kCtrlRingDepth) return drop(RxDrop::CtrlRingFull, nullptr);
    uint32_t i = static_cast<uint32_t>(q.head % kCtrlRingDepth);
    if (i == q.ring.size()) {  // the first pass through the ring: entries 0, 1, ... in turn
        q.ring.emplace_back();
        q.len.push_back(0);
    }
    q.ring[i].assign(payload, payload + m.dma_len);
    q.len[i] = m.dma_len;
    q.head++;
    port_.rx_ctrl++;
    note_host_event();
}

}  // namespace sdr::emu
