// The NIC's transport QPs (UC, or RC: nic_sdr_rc.cpp): creation with a random QPN, connection to one remote QP (the
// peer whose frames alone are accepted), the root key a QP's WRITEs address, counters.

#include <sdr/emu/nic.hpp>
#include <sdr/emu/psn.hpp>

namespace sdr::emu {

uint32_t Nic::qp_create(uint32_t tag, uint32_t channel, bool rc)
{
    // A dead QP's entry is reused once no WQE of it waits in the send queue or the port
    // (tx_done still reads the entry for those).
    size_t h = 0;
    while (h < qps_.size() && (qps_[h].live || qps_[h].sq_used || qps_[h].in_port)) h++;
    if (h >> NicIds::kQpnIndexBits) return kNoHandle;
    if (h == qps_.size()) {
        qps_.emplace_back();
        // The send queue holds what the QPs may have queued: sized here, so posting never
        // grows it.
        sq_ring_.presize(size_t{kSqDepth} * qps_.size());
    }
    TransportQp q;
    q.set_live(true);
    q.rx.qpn = ids_.data_qpn(static_cast<uint32_t>(h), qps_[h].rx.qpn);
    q.tag = q.rx.tag = tag;
    q.rx.channel = channel % num_workers();
    q.rc = q.rx.rc = rc;
    if (rc) q.sent.resize(kSqDepth);
    q.rp.reset(dcqcn_, exec_->now_ns());
    qps_[h] = std::move(q);
    return static_cast<uint32_t>(h);
}

void Nic::qp_destroy(uint32_t handle)
{
    if (handle >= qps_.size() || !qps_[handle].live) return;
    TransportQp& q = qps_[handle];
    q.set_live(false);
    // RC: the WQEs sent and not acknowledged will never be; only those still queued keep the
    // entry until they pass the port.
    if (q.rc) q.sq_used -= psn::diff(q.psn, q.una);
}

bool Nic::qp_set_spray(uint32_t handle, bool on)
{
    if (handle >= qps_.size() || !qps_[handle].live) return false;
    TransportQp& q = qps_[handle];
    q.spray = on;
    if (q.rx.peer_port != kNoPeer) {  // connected: accept what the peer sends from now on
        q.rx.peer_port = on ? kSprayPeerPort : q.conn_port;
        q.rx.port_mask = on ? kSprayPortMask : 0;
    }
    return true;
}

bool Nic::qp_connect(uint32_t handle, const NicAddress& remote, uint32_t remote_qpn, uint64_t rc_timeout_ns)
{
    if (handle >= qps_.size() || !qps_[handle].live) return false;
    TransportQp& q = qps_[handle];
    q.remote_ip = q.rx.remote_ip = remote.ip;
    q.remote_mac = q.rx.remote_mac = remote.mac;
    q.remote_qpn = remote_qpn & 0xFFFFFF;
    q.conn_port = udp_src_port(q.rx.qpn, q.remote_qpn);
    q.rx.peer_port = q.spray ? kSprayPeerPort : q.conn_port;
    q.rx.port_mask = q.spray ? kSprayPortMask : 0;
    // Both ends start their PSNs at 0 (the QP-info blob carries no PSN), as the UC QPs do.
    q.rc_timeout_ns = rc_timeout_ns ? rc_timeout_ns : kSdrRcDefaultTimeoutNs;
    q.retry_left = kSdrRcRetries;
    return true;
}

void Nic::qp_bind_root_key(uint32_t handle, uint32_t rkey)
{
    if (handle < qps_.size()) qps_[handle].rx.rkey = rkey;
}

std::optional<QpCounters> Nic::qp_counters(uint32_t handle) const
{
    if (handle >= qps_.size()) return std::nullopt;
    return qps_[handle].counters();
}

}  // namespace sdr::emu
