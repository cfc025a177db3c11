// rdma_cm's addresses (commands.hpp): BIND_IP and BIND, RESOLVE_IP and RESOLVE_ADDR (the route's
// device and the peer's MAC, in the background), RESOLVE_ROUTE, LISTEN, and the QUERY_ROUTE and
// QUERY replies, as the kernel's cma gives them for a RoCE device.
#include "commands.hpp"

#include <arpa/inet.h>
#include <infiniband/ib.h>
#include <rdma/ib_user_sa.h>

#include <cerrno>
#include <new>
#include <system_error>
#include <thread>

namespace sdr::verbs::ucma {
namespace {

constexpr uint8_t kPacketLifeTime = 16;       // the kernel's CMA_IBOE_PACKET_LIFETIME for RoCE paths
constexpr uint32_t kInvalidIbdevIndex = ~0u;  // librdmacm then matches the device by node GUID alone
constexpr int kMaxBacklog = 1024;             // the kernel's default max_backlog

// Whether ip is an address of any interface here (one without an SDR device: ENODEV).
bool is_local(uint32_t ip) { return route_source(ip) == ip; }

// Whether the ID has its route (RESOLVE_ROUTE, or a connection's).
bool routed(const Id& id)
{
    return id.state == State::RouteResolved || id.state == State::Connect || id.state == State::Established ||
           id.state == State::Disconnect;
}

// The RoCE path record of a resolved route (the kernel's cma_resolve_iboe_route).
ib_user_path_rec path_record(const Id& id)
{
    ib_user_path_rec r{};
    fill_gid(r.dgid, sin_addr(id.dst));
    fill_gid(r.sgid, sin_addr(id.src));
    r.flow_label = htonl(id.path.flow_label);
    r.reversible = 1;
    r.mtu = mtu_enum(port_mtu_bytes(*id.dev));
    r.pkey = htons(cm::kDefaultPkey);
    r.hop_limit = id.path.hop_limit;
    r.traffic_class = id.tos;
    r.numb_path = 1;
    r.mtu_selector = 2;  // exactly
    r.rate_selector = 2;
    r.rate = 2;          // 2.5 Gb/s: the IBTA code of one lane; rdma_cm users take it as a hint
    r.packet_life_time_selector = 2;
    r.packet_life_time = kPacketLifeTime;
    return r;
}

// The end of an address resolution: ADDR_RESOLVED, or ADDR_ERROR with -errno (the ID stays
// bound, as the kernel's goes back to ADDR_BOUND).
void resolved(Id& id, int status)
{
    Event ev;
    ev.resp.uid = id.uid;
    ev.resp.id = id.handle;
    ev.resp.event = status ? cm_event::kAddrError : cm_event::kAddrResolved;
    ev.resp.status = static_cast<uint32_t>(status);
    id.state = status ? State::AddrBound : State::AddrResolved;
    post_event(id, ev);
}

// The peer's MAC, as ibv_create_ah would find it (the provider's neighbour resolution, which may
// wait for ARP up to 3 s), on a thread of its own as the kernel's resolution runs in the
// background: the write() returns at once. The thread holds the device, and finds the ID again
// by its handle (destroyed meanwhile: nobody to tell).
void resolve_neighbour_async(Id& id, uint32_t dip)
{
    Device* dev = id.dev;
    const uint32_t handle = id.handle;
    dev->refs++;
    id.state = State::AddrQuery;
    auto work = [dev, handle, dip] {
        ibv_gid g;
        std::memcpy(g.raw, gid_of(dip).data(), sizeof g.raw);
        const int err = dev->engine->resolve(g);
        std::lock_guard l(mu());
        device_put(dev);
        Id* id = find_id(handle);
        if (id && id->state == State::AddrQuery) resolved(*id, -err);
    };
    try {
        std::thread(work).detach();
    } catch (const std::system_error&) {
        id.state = State::AddrBound;  // no thread to spare: ENOMEM, as the kernel's allocation fails
        dev->refs--;
        throw;
    }
}

}  // namespace

int do_bind(Id& id, sockaddr_storage addr)
{
    if (id.state != State::Idle) return -EINVAL;
    Device* dev = nullptr;
    if (addr.ss_family == AF_INET6 && !is_any(addr))  // the devices have IPv4 GIDs only
        return is_local_ipv6(reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr) ? -ENODEV : -EADDRNOTAVAIL;
    if (addr.ss_family == AF_INET && !is_any(addr)) {
        dev = device_with_ip(sin_addr(addr));
        if (!dev) return is_local(sin_addr(addr)) ? -ENODEV : -EADDRNOTAVAIL;
        if (int err = device_get(dev)) return -err;
    }
    if (int err = bind_port(id, &addr)) {
        device_put(dev);
        return -err;
    }
    id.dev = dev;
    id.state = State::AddrBound;
    return 0;
}

ibv_mtu mtu_enum(uint32_t bytes)
{
    ibv_mtu m = IBV_MTU_256;
    for (uint32_t b = 512, e = IBV_MTU_512; e <= IBV_MTU_4096 && b <= bytes; b *= 2, ++e) m = static_cast<ibv_mtu>(e);
    return m;
}

uint32_t port_mtu_bytes(const Device& d)
{
    const ibv_mtu m = ibv_mtu_for(d.engine ? d.engine->netdev_mtu() : d.port.netdev_mtu);
    return m ? 128u << m : 256;
}

void fill_gid(uint8_t out[16], uint32_t ip)
{
    const emu::verbs::Gid g = gid_of(ip);
    std::memcpy(out, g.data(), 16);
}

int query_route(const Channel& ch, const void* p, size_t in, size_t out)
{
    const auto cmd = body<rdma_ucm_query>(p, in);
    if (out < sizeof(rdma_ucm_query_route_resp)) return -ENOSPC;
    Id* id;
    if (int err = lookup(ch, cmd.id, &id)) return err;
    rdma_ucm_query_route_resp r{};
    std::memcpy(&r.src_addr, &id->src, std::min(addr_size(id->src), sizeof r.src_addr));
    std::memcpy(&r.dst_addr, &id->dst, std::min(addr_size(id->dst), sizeof r.dst_addr));
    r.ibdev_index = kInvalidIbdevIndex;
    if (id->dev) {
        r.node_guid = htobe64(id->dev->port.node_guid);
        r.port_num = 1;
        if (routed(*id)) {
            r.num_paths = 1;
            r.ib_route[0] = path_record(*id);
        } else {
            fill_gid(r.ib_route[0].dgid, sin_addr(id->dst));
            fill_gid(r.ib_route[0].sgid, sin_addr(id->src));
            r.ib_route[0].pkey = htons(cm::kDefaultPkey);
        }
    }
    reply(cmd.response, r);
    return 0;
}

// QUERY: RDMA_USER_CM_QUERY_ADDR, _PATH, _GID (librdmacm asks them with AF_IB support only).
int query(const Channel& ch, const void* p, size_t in, size_t out)
{
    const auto cmd = body<rdma_ucm_query>(p, in);
    Id* id;
    if (int err = lookup(ch, cmd.id, &id)) return err;
    switch (cmd.option) {
    case RDMA_USER_CM_QUERY_ADDR:
    case RDMA_USER_CM_QUERY_GID: {
        if (out < sizeof(rdma_ucm_query_addr_resp)) return -ENOSPC;
        rdma_ucm_query_addr_resp r{};
        r.ibdev_index = kInvalidIbdevIndex;
        if (id->dev) {
            r.node_guid = htobe64(id->dev->port.node_guid);
            r.port_num = 1;
            r.pkey = htons(cm::kDefaultPkey);
        }
        if (cmd.option == RDMA_USER_CM_QUERY_ADDR) {
            r.src_size = static_cast<uint16_t>(addr_size(id->src));
            r.dst_size = static_cast<uint16_t>(addr_size(id->dst));
            std::memcpy(&r.src_addr, &id->src, r.src_size);
            std::memcpy(&r.dst_addr, &id->dst, r.dst_size);
        } else {  // the GIDs as AF_IB addresses, service ID = port space << 16 | port
            for (int side = 0; side < 2; side++) {
                const sockaddr_storage& a = side ? id->dst : id->src;
                sockaddr_ib ib{};
                ib.sib_family = AF_IB;
                ib.sib_pkey = htons(cm::kDefaultPkey);
                fill_gid(ib.sib_addr.sib_raw, sin_addr(a));
                ib.sib_sid = htobe64(cm::service_id(static_cast<cm::PortSpace>(id->ps), sin_port(a)));
                std::memcpy(side ? static_cast<void*>(&r.dst_addr) : static_cast<void*>(&r.src_addr), &ib, sizeof ib);
            }
            r.src_size = r.dst_size = sizeof(sockaddr_ib);
        }
        reply(cmd.response, r);
        return 0;
    }
    case RDMA_USER_CM_QUERY_PATH: {
        if (out < sizeof(rdma_ucm_query_path_resp)) return -ENOSPC;
        rdma_ucm_query_path_resp r{};
        auto* base = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(cmd.response));
        if (id->dev && routed(*id) && out >= sizeof r + sizeof(ib_path_rec_data)) {
            // The packed SA path record (IBTA vol. 1 15.2.5.16) is not kept: the fields the
            // kernel fills from our route, in the record's wire layout.
            ib_path_rec_data d{};
            d.flags = IB_PATH_GMP | IB_PATH_PRIMARY | IB_PATH_BIDIRECTIONAL;
            const ib_user_path_rec u = path_record(*id);
            auto* rec = reinterpret_cast<uint8_t*>(d.path_rec);
            std::memcpy(rec + 8, u.dgid, 16);
            std::memcpy(rec + 24, u.sgid, 16);
            const uint32_t fl_hop = htonl((id->path.flow_label << 8) | u.hop_limit);
            std::memcpy(rec + 44, &fl_hop, 4);
            rec[48] = u.traffic_class;
            rec[49] = 0x80 | 1;  // reversible, one path
            std::memcpy(rec + 50, &u.pkey, 2);
            rec[54] = static_cast<uint8_t>(0x80 | u.mtu);
            rec[55] = static_cast<uint8_t>(0x80 | u.rate);
            rec[56] = static_cast<uint8_t>(0x80 | u.packet_life_time);
            r.num_paths = 1;
            std::memcpy(base + sizeof r, &d, sizeof d);
        }
        std::memcpy(base, &r, sizeof r);
        return 0;
    }
    default: return -ENOSYS;
    }
}

int resolve(Channel& ch, uint32_t handle, const sockaddr_storage* src, const sockaddr_storage& dst)
{
    Id* id;
    if (int err = lookup(ch, handle, &id)) return err;
    if (dst.ss_family != AF_INET) return -EAFNOSUPPORT;  // RoCEv2 over IPv4 only
    if (id->state == State::Idle) {
        sockaddr_storage any{};
        any.ss_family = AF_INET;
        if (int err = do_bind(*id, src && src->ss_family ? *src : any)) return err;
    } else if (id->state != State::AddrBound) {
        return -EINVAL;
    }
    id->dst = dst;
    const uint32_t dip = sin_addr(dst);
    if (!id->dev) {  // bound to the wildcard: the device the route leaves through
        const int64_t s = route_source(dip);
        Device* dev = s < 0 ? nullptr : device_with_ip(static_cast<uint32_t>(s));
        int status = 0;
        if (s < 0) status = static_cast<int>(s);
        else if (!dev) status = -ENODEV;
        else if (int err = device_get(dev)) status = -err;
        if (status) {
            resolved(*id, status);
            return 0;
        }
        id->dev = dev;
        auto& sin = reinterpret_cast<sockaddr_in&>(id->src);
        sin.sin_family = AF_INET;
        sin.sin_addr.s_addr = htonl(static_cast<uint32_t>(s));
    }
    try {
        resolve_neighbour_async(*id, dip);
    } catch (const std::system_error&) {
        return -ENOMEM;
    }
    return 0;
}

// The route of a resolved address: RoCE has no path query, the route is the address's.
int resolve_route(Id& id)
{
    if (id.state != State::AddrResolved) return -EINVAL;
    id.path = cm::Path{};
    id.path.local_ip = sin_addr(id.src);
    id.path.remote_ip = sin_addr(id.dst);
    id.path.local_gid = gid_of(id.path.local_ip);
    id.path.remote_gid = gid_of(id.path.remote_ip);
    id.path.local_port = sin_port(id.src);
    id.path.remote_port = sin_port(id.dst);
    id.path.traffic_class = id.tos;
    id.state = State::RouteResolved;
    Event ev;
    ev.resp.uid = id.uid;
    ev.resp.id = id.handle;
    ev.resp.event = cm_event::kRouteResolved;
    post_event(id, ev);
    return 0;
}

int listen(Id& id, int backlog)
{
    id.backlog = backlog > 0 && backlog < kMaxBacklog ? backlog : kMaxBacklog;
    if (id.state == State::Listen) return 0;  // a new backlog only
    if (id.state == State::Idle) {
        sockaddr_storage any{};
        any.ss_family = AF_INET;
        if (int err = do_bind(id, any)) return err;
    }
    if (id.state != State::AddrBound) return -EINVAL;
    std::vector<Device*> on = id.dev ? std::vector<Device*>{id.dev} : devices();
    const uint64_t sid = cm::service_id(static_cast<cm::PortSpace>(id.ps), sin_port(id.src));
    for (Device* d : on) {
        // A wildcard listens on the devices whose interface is in this namespace with an address.
        if (!id.dev && !device_ip(*d)) continue;
        if (device_get(d)) {
            if (id.dev) return -ENODEV;
            continue;  // a wildcard listens on the devices whose port opens here
        }
        int err;
        cm::CmId c;
        {
            std::lock_guard g(d->engine->lock());
            c = d->agent->create_id();
            err = c == cm::kNoId ? ENOMEM : d->agent->listen(c, sid);
            if (err && c != cm::kNoId) (void)d->agent->destroy_id(c);
        }
        if (err) {
            device_put(d);
            return -err;  // the IDs listening so far go with DESTROY_ID
        }
        id.listens.emplace_back(d, c);
    }
    id.state = State::Listen;
    return 0;
}

}  // namespace sdr::verbs::ucma
