// Multicast on the simulated fabric: the membership table (group -> member NICs) the NICs'
// verbs engines keep current through NicExecutor::mcast_membership, and the full mesh's
// replication: the sending port puts one copy on the link to each member NIC but its own
// (a NIC does not hear its own multicast, as a switch never sends a frame back out of the
// port it came in by). Each copy is its own frame buffer, so each link may drop, delay,
// duplicate or capture it on its own.

#include <sdr/emu/fabric.hpp>

#include <algorithm>
#include <cstring>

namespace sdr::emu {

void SimFabric::mcast_membership(Nic& nic, uint32_t group_ip, bool member)
{
    std::vector<uint32_t>& m = mcast_[group_ip];
    auto it = std::lower_bound(m.begin(), m.end(), nic.index());
    const bool present = it != m.end() && *it == nic.index();
    if (member && !present) m.insert(it, nic.index());
    if (!member && present) m.erase(it);
    if (m.empty()) mcast_.erase(group_ip);
    if (net_) net_->mcast_changed(group_ip);
}

const std::vector<uint32_t>* SimFabric::mcast_members(uint32_t group_ip) const
{
    auto it = mcast_.find(group_ip);
    return it == mcast_.end() ? nullptr : &it->second;
}

void SimFabric::mcast_send(Nic& src, SimTime leaves, const TxPacket& p, uint8_t* frame, uint32_t len)
{
    const std::vector<uint32_t>* members = mcast_members(p.remote_ip);
    if (!members) return frame_free(frame);  // nobody listens: the frame leaves the port and goes nowhere
    for (uint32_t dst : *members) {
        SimLink* l = dst == src.index() ? nullptr : link(src.index(), dst);
        if (!l) continue;
        uint8_t* copy = frame_alloc();
        std::memcpy(copy, frame, len);
        l->send(leaves, p.meta, copy, len);
    }
    frame_free(frame);
}

}  // namespace sdr::emu
