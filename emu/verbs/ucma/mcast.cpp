// rdma_cm's multicast (commands.hpp): JOIN_IP_MCAST, JOIN_MCAST and LEAVE_MCAST for UD IDs.
#include "commands.hpp"

#include <sys/eventfd.h>

#include <cerrno>
#include <new>

namespace sdr::verbs::ucma {

// JOIN_IP_MCAST, JOIN_MCAST: a UD ID on a device joins an IPv4 group. RoCE has no SA to ask: the
// join is granted at once (MULTICAST_JOIN with the MGID ::ffff:G, QPN 0xFFFFFF and the port
// space's Q_Key), and librdmacm attaches the ID's QP to the MGID (ibv_attach_mcast).
int join(Id& id, uint64_t uid, const sockaddr_storage& addr, uint16_t flags, uint64_t response)
{
    if (addr.ss_family != AF_INET) return -EAFNOSUPPORT;
    const uint32_t group = sin_addr(addr);
    if ((group >> 28) != 0xE || flags >= RDMA_MC_JOIN_FLAG_RESERVED || id.qp_type != IBV_QPT_UD) return -EINVAL;
    if (id.state != State::AddrBound && id.state != State::AddrResolved) return -EINVAL;
    if (!id.dev) return -ENODEV;  // bound to the wildcard: no device to join on
    for (const Mcast& m : id.mcasts)
        if (m.group == group) return -EADDRINUSE;
    static uint32_t next_mcast = 0;
    Mcast m;
    m.handle = ++next_mcast;
    m.uid = uid;
    m.group = group;
    try {
        id.mcasts.push_back(m);
    } catch (const std::bad_alloc&) {
        return -ENOMEM;
    }
    reply(response, rdma_ucm_create_id_resp{m.handle});
    Event ev;
    ev.resp.uid = m.uid;
    ev.resp.id = m.handle;
    ev.resp.event = cm_event::kMulticastJoin;
    ev.mcast = m.handle;
    rdma_ucm_ud_param& ud = ev.resp.param.ud;
    ud.qp_num = 0xFFFFFF;
    ud.qkey = kUdpQkey;
    fill_gid(ud.ah_attr.grh.dgid, group);
    ud.ah_attr.grh.hop_limit = cm::Path{}.hop_limit;
    ud.ah_attr.grh.traffic_class = id.tos;
    ud.ah_attr.is_global = 1;
    ud.ah_attr.port_num = 1;
    post_event(id, ev);
    return 0;
}

// LEAVE_MCAST: the group goes with its queued events; replies its events_reported.
int leave(const Channel& ch, const rdma_ucm_destroy_id& cmd, size_t out)
{
    if (out < sizeof(rdma_ucm_destroy_id_resp)) return -ENOSPC;
    for (auto& [h, id] : ids()) {
        for (auto m = id->mcasts.begin(); m != id->mcasts.end(); ++m) {
            if (m->handle != cmd.id) continue;
            if (id->channel != ch.fd) return -EINVAL;
            rdma_ucm_destroy_id_resp r{m->events_reported};
            if (auto c = channels().find(id->channel); c != channels().end()) {
                const bool had = !c->second.events.empty();
                std::erase_if(c->second.events, [&](const Event& e) { return e.mcast == cmd.id; });
                eventfd_t v;
                if (had && c->second.events.empty()) (void)eventfd_read(c->second.fd, &v);
            }
            id->mcasts.erase(m);
            reply(cmd.response, r);
            return 0;
        }
    }
    return -ENOENT;
}

}  // namespace sdr::verbs::ucma
