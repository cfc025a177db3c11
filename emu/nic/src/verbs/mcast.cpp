// Multicast for UD QPs (IBTA vol. 1 10.5; RoCEv2 over IPv4: the MGID ::ffff:G of a group G in
// 224.0.0.0/4). The NIC keeps, per group, the QPs attached to it; a frame to QPN 0xFFFFFF is
// a copy for each of them, taken by the UD responder's rules (ud.cpp) QP by QP: its own Q_Key
// check, its own receive WQE, the same 40-byte GRH. The fabric (a switch, a bridge, the
// simulator's mesh) decides which NICs get a copy; the executor learns of the NIC's joins and
// leaves (NicExecutor::mcast_membership) to tell it.

#include <sdr/emu/verbs_engine.hpp>

#include <algorithm>
#include <cerrno>

namespace sdr::emu {

namespace {

// The group of an IPv4 multicast MGID, or false.
bool mcast_group_of(const verbs::Gid& mgid, uint32_t* ip)
{
    return verbs::ipv4_from_gid(mgid, ip) && wire::is_ipv4_multicast(*ip);
}

}  // namespace

VerbsEngine::McastGroup* VerbsEngine::mcast_group(uint32_t ip)
{
    for (McastGroup& g : mcast_)
        if (g.ip == ip) return &g;
    return nullptr;
}

const std::vector<uint32_t>* VerbsEngine::mcast_qps(uint32_t group_ip) const
{
    for (const McastGroup& g : mcast_)
        if (g.ip == group_ip) return &g.qps;
    return nullptr;
}

int VerbsEngine::mcast_attach(uint32_t qp, const verbs::Gid& mgid)
{
    VerbsQp* q = vqp(qp);
    uint32_t ip;
    if (!q || !q->live || q->type != verbs::QpType::Ud || !mcast_group_of(mgid, &ip)) return EINVAL;
    McastGroup* g = mcast_group(ip);
    if (g && std::find(g->qps.begin(), g->qps.end(), qp) != g->qps.end()) return 0;
    if (mcast_attached_ >= kMaxTotalMcastQpAttach) return ENOMEM;
    if (!g && mcast_.size() >= kMaxMcastGroups) return ENOMEM;
    if (g && g->qps.size() >= kMaxMcastQpAttach) return ENOMEM;
    const bool first = !g;
    if (first) g = &mcast_.emplace_back(McastGroup{ip, {}});
    g->qps.push_back(qp);
    q->mcast_groups++;
    mcast_attached_++;
    if (first) exec_->mcast_membership(nic_, ip, true);
    return 0;
}

int VerbsEngine::mcast_detach(uint32_t qp, const verbs::Gid& mgid)
{
    VerbsQp* q = vqp(qp);
    uint32_t ip;
    if (!q || !q->live || !mcast_group_of(mgid, &ip)) return EINVAL;
    McastGroup* g = mcast_group(ip);
    if (!g) return EINVAL;
    auto it = std::find(g->qps.begin(), g->qps.end(), qp);
    if (it == g->qps.end()) return EINVAL;
    g->qps.erase(it);
    q->mcast_groups--;
    mcast_attached_--;
    if (g->qps.empty()) {
        mcast_.erase(mcast_.begin() + (g - mcast_.data()));
        exec_->mcast_membership(nic_, ip, false);
    }
    return 0;
}

void VerbsEngine::mcast_receive(const PacketMeta& m, const uint8_t* payload, const uint8_t* ip_header)
{
    // The group is the IPv4 destination (bytes 16..19 of the header, network order).
    const uint32_t ip = uint32_t(ip_header[16]) << 24 | uint32_t(ip_header[17]) << 16 |
                        uint32_t(ip_header[18]) << 8 | ip_header[19];
    // QPN 0xFFFFFF names no QP: only a multicast UD SEND may carry it (IBTA 10.5.2).
    if (!payload || !wire::is_ipv4_multicast(ip)) return verbs_drop(RxDrop::UnknownQp, nullptr);
    if ((m.opcode >> 5) != 3) return verbs_drop(RxDrop::WrongOpcode, nullptr);
    const McastGroup* g = mcast_group(ip);
    if (!g) return verbs_drop(RxDrop::McastNoMember, nullptr);
    // Attach and detach run under the executor's lock, as this does: the list holds still.
    for (size_t i = 0; i < g->qps.size(); i++) {
        VerbsQp& q = *vqps_[g->qps[i]];
        if (q.state != verbs::QpState::Rtr && q.state != verbs::QpState::Rts) {
            verbs_drop(RxDrop::QpNotReady, &q);
            continue;
        }
        ud_receive(q, m, payload, ip_header, nullptr);
    }
}

}  // namespace sdr::emu
