// The NIC's transport QPs (UC): creation with a random QPN, connection to one remote QP (the
// peer whose frames alone are accepted), the root key a QP's WRITEs address, counters.

#include <sdr/emu/nic.hpp>

namespace sdr::emu {

uint32_t Nic::qp_create(uint32_t tag, uint32_t channel)
{
    // A dead QP's entry is reused once no WQE of it waits in the send queue (tx_done still
    // reads the entry for those).
    size_t h = 0;
    while (h < qps_.size() && (qps_[h].live || qps_[h].sq_used)) h++;
    if (h >> NicIds::kQpnIndexBits) return kNoHandle;
    if (h == qps_.size()) {
        qps_.emplace_back();
        grow_sq_ring();
    }
    TransportQp q;
    q.live = true;
    q.qpn = ids_.data_qpn(static_cast<uint32_t>(h), qps_[h].qpn);
    q.tag = tag;
    q.channel = channel % num_workers();
    qps_[h] = q;
    return static_cast<uint32_t>(h);
}

void Nic::qp_destroy(uint32_t handle)
{
    if (handle < qps_.size()) qps_[handle].live = false;
}

bool Nic::qp_connect(uint32_t handle, const NicAddress& remote, uint32_t remote_qpn)
{
    if (handle >= qps_.size() || !qps_[handle].live) return false;
    TransportQp& q = qps_[handle];
    q.remote_ip = remote.ip;
    q.remote_mac = remote.mac;
    q.remote_qpn = remote_qpn & 0xFFFFFF;
    q.peer_port = udp_src_port(q.remote_qpn);
    return true;
}

void Nic::qp_bind_root_key(uint32_t handle, uint32_t rkey)
{
    if (handle < qps_.size()) qps_[handle].rkey = rkey;
}

const QpCounters* Nic::qp_counters(uint32_t handle) const
{
    return handle < qps_.size() ? &qps_[handle].counters : nullptr;
}

}  // namespace sdr::emu
