// The rdma_cm commands (ucma.hpp): one write() of struct rdma_ucm_cmd_hdr and its body, served
// as the kernel's rdma_ucm serves it (drivers/infiniband/core/ucma.c's table: the same checks,
// errno values and replies copied to the command's `response` pointer) on top of this server's
// IDs, the device table and each NIC's CM agent. What differs is in SEMANTICS.md, "rdma_cm".
#include "ucma.hpp"

#include <arpa/inet.h>
#include <infiniband/ib.h>
#include <rdma/ib_user_sa.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <system_error>
#include <thread>

namespace sdr::verbs::ucma {
namespace {

constexpr uint32_t kUdpQkey = 0x01234567;     // librdmacm's RDMA_UDP_QKEY: every RDMA_PS_UDP ID's
constexpr uint8_t kPacketLifeTime = 16;       // the kernel's CMA_IBOE_PACKET_LIFETIME for RoCE paths
constexpr uint32_t kInvalidIbdevIndex = ~0u;  // librdmacm then matches the device by node GUID alone
constexpr int kMaxBacklog = 1024;             // the kernel's default max_backlog

// A command's body: what the program wrote (in bytes), zero beyond, as the kernel copies it.
template <typename T>
T body(const void* p, size_t in)
{
    T t{};
    std::memcpy(&t, p, std::min(in, sizeof t));
    return t;
}

template <typename T>
void reply(uint64_t response, const T& r)
{
    std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(response)), &r, sizeof r);
}

// The ID named by a command on channel ch: ENOENT if none, EINVAL if another channel's.
int lookup(const Channel& ch, uint32_t handle, Id** out)
{
    Id* id = find_id(handle);
    if (!id) return -ENOENT;
    if (id->channel != ch.fd) return -EINVAL;
    *out = id;
    return 0;
}

// A sockaddr a command carries (sockaddr_in6-sized or a storage) as an AF_INET or AF_INET6
// storage; EAFNOSUPPORT for AF_IB and anything else.
int take_addr(const void* p, size_t size, sockaddr_storage* out)
{
    *out = sockaddr_storage{};
    sa_family_t fam;
    std::memcpy(&fam, p, sizeof fam);
    if (fam == AF_INET && size >= sizeof(sockaddr_in)) {
        std::memcpy(out, p, sizeof(sockaddr_in));
        return 0;
    }
    if (fam == AF_INET6 && size >= sizeof(sockaddr_in6)) {
        std::memcpy(out, p, sizeof(sockaddr_in6));
        return 0;
    }
    return -EAFNOSUPPORT;
}

size_t addr_size(const sockaddr_storage& s)
{
    return s.ss_family == AF_INET ? sizeof(sockaddr_in) : s.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : 0;
}

// Whether ip is an address of any interface here (one without an SDR device: ENODEV).
bool is_local(uint32_t ip) { return route_source(ip) == ip; }

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

cm::ConnParams params_from(const rdma_ucm_conn_param& p, const Id& id, uint32_t mtu)
{
    cm::ConnParams c = id.local;
    c.qpn = p.qp_num & 0xFFFFFF;
    c.qp_type = id.qp_type == IBV_QPT_UC ? emu::verbs::QpType::Uc : emu::verbs::QpType::Rc;
    c.responder_resources = p.responder_resources;
    c.initiator_depth = p.initiator_depth;
    c.retry_count = p.retry_count & 7;
    c.rnr_retry_count = p.rnr_retry_count & 7;
    c.srq = p.srq != 0;
    c.flow_control = p.flow_control != 0;
    c.path_mtu = mtu;
    return c;
}

int connect(Id& id, const rdma_ucm_connect& cmd)
{
    if (!cmd.conn_param.valid) return -EINVAL;
    if (id.state != State::RouteResolved || !id.dev) return -EINVAL;
    const size_t len = std::min<size_t>(cmd.conn_param.private_data_len, sizeof cmd.conn_param.private_data);
    id.local.starting_psn = random_psn();
    id.local = params_from(cmd.conn_param, id, port_mtu_bytes(*id.dev));
    id.path.local_ack_timeout = id.ack_timeout;
    const uint64_t sid = cm::service_id(static_cast<cm::PortSpace>(id.ps), id.path.remote_port);
    Device* d = id.dev;
    std::lock_guard g(d->engine->lock());
    const cm::CmId c = d->agent->create_id();
    if (c == cm::kNoId) return -ENOMEM;
    const int err = id.qp_type == IBV_QPT_UD
                        ? d->agent->sidr_request(c, sid, id.path, cmd.conn_param.private_data, len)
                        : d->agent->connect(c, sid, id.path, id.local, cmd.conn_param.private_data, len);
    if (err) {
        (void)d->agent->destroy_id(c);
        return -err;
    }
    id.cm = c;
    id.active = true;
    id.state = State::Connect;
    return 0;
}

int accept(Id& id, const rdma_ucm_accept& cmd)
{
    if (id.cm == cm::kNoId || id.state != State::Connect) return -EINVAL;
    Device* d = id.dev;
    const size_t len = std::min<size_t>(cmd.conn_param.private_data_len, sizeof cmd.conn_param.private_data);
    std::lock_guard g(d->engine->lock());
    if (id.active) {  // the program moved its QP to RTS after CONNECT_RESPONSE: the RTU
        if (int err = d->agent->accept(id.cm, id.local, nullptr, 0)) return -err;
        id.state = State::Established;
        return 0;
    }
    if (cmd.conn_param.valid) id.local = params_from(cmd.conn_param, id, id.local.path_mtu);
    const int err = id.qp_type == IBV_QPT_UD
                        ? d->agent->sidr_reply(id.cm, id.local.qpn, kUdpQkey, cm::SidrStatus::Valid,
                                               cmd.conn_param.private_data, len)
                        : d->agent->accept(id.cm, id.local, cmd.conn_param.private_data, len);
    if (err) return -err;
    if (cmd.conn_param.valid) id.uid = cmd.uid;  // the ID's events reach the program from here on
    if (id.qp_type == IBV_QPT_UD) id.state = State::Established;
    return 0;
}

int reject(Id& id, const rdma_ucm_reject& cmd)
{
    if (id.cm == cm::kNoId || id.state != State::Connect) return -EINVAL;
    const size_t len = std::min<size_t>(cmd.private_data_len, sizeof cmd.private_data);
    Device* d = id.dev;
    std::lock_guard g(d->engine->lock());
    const int err = id.qp_type == IBV_QPT_UD
                        ? d->agent->sidr_reply(id.cm, 0, 0, cm::SidrStatus::Rejected, cmd.private_data, len)
                        : d->agent->reject(id.cm, cmd.reason ? uint16_t{cmd.reason} : uint16_t{cm::kRejConsumer}, cmd.private_data, len);
    if (!err) id.state = State::Disconnect;
    return -err;
}

int disconnect(Id& id)
{
    if (id.cm == cm::kNoId || id.qp_type == IBV_QPT_UD) return -EINVAL;
    Device* d = id.dev;
    std::lock_guard g(d->engine->lock());
    if (int err = d->agent->disconnect(id.cm)) return -err;
    id.state = State::Disconnect;
    return 0;
}

void fill_ah(ib_uverbs_ah_attr* ah, const Id& id)
{
    std::memcpy(ah->grh.dgid, id.path.remote_gid.data(), 16);
    ah->grh.flow_label = id.path.flow_label;
    ah->grh.sgid_index = 0;
    ah->grh.hop_limit = id.path.hop_limit;
    ah->grh.traffic_class = id.path.traffic_class;
    ah->is_global = 1;
    ah->port_num = 1;
}

// INIT_QP_ATTR: the attributes of the next QP state from the exchanged parameters (the
// kernel's rdma_init_qp_attr and ib_cm_init_qp_attr).
int init_qp_attr(const Channel& ch, const void* p, size_t in, size_t out)
{
    const auto cmd = body<rdma_ucm_init_qp_attr>(p, in);
    if (out < sizeof(ib_uverbs_qp_attr)) return -ENOSPC;
    Id* id;
    if (int err = lookup(ch, cmd.id, &id)) return err;
    if (!id->dev) return -EINVAL;
    ib_uverbs_qp_attr r{};
    r.qp_state = cmd.qp_state;
    const bool ud = id->qp_type == IBV_QPT_UD;
    const bool connected = id->cm != cm::kNoId && !ud;
    const bool have_peer = connected && (!id->active || id->peer.qpn != 0);
    switch (cmd.qp_state) {
    case IBV_QPS_INIT:
        r.qp_attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
        r.port_num = 1;
        if (ud) {
            r.qp_attr_mask |= IBV_QP_QKEY;
            r.qkey = kUdpQkey;
        } else {
            // Before a connection the QP gets no remote access; the CM's INIT grants WRITE, and
            // READ when this side takes READs (the kernel's cm_init_qp_init_attr, less atomics).
            r.qp_attr_mask |= IBV_QP_ACCESS_FLAGS;
            if (connected)
                r.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | ((id->local.responder_resources || !id->active)
                                                                   ? uint32_t{IBV_ACCESS_REMOTE_READ} : 0u);
        }
        break;
    case IBV_QPS_RTR:
        if (ud) {
            r.qp_attr_mask = IBV_QP_STATE;
            break;
        }
        if (!have_peer) return -EINVAL;
        r.qp_attr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        fill_ah(&r.ah_attr, *id);
        r.path_mtu = mtu_enum(std::min(id->local.path_mtu, id->peer.path_mtu));
        r.dest_qp_num = id->peer.qpn;
        r.rq_psn = id->peer.starting_psn;
        if (id->local.qp_type == emu::verbs::QpType::Rc) {
            r.qp_attr_mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
            r.max_dest_rd_atomic = id->active ? id->local.responder_resources : id->peer.initiator_depth;
            r.min_rnr_timer = 0;  // as the kernel's CM sets it
        }
        break;
    case IBV_QPS_RTS:
        if (ud) {
            r.qp_attr_mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
            break;
        }
        if (!have_peer) return -EINVAL;
        r.qp_attr_mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        r.sq_psn = id->local.starting_psn;
        if (id->local.qp_type == emu::verbs::QpType::Rc) {
            r.qp_attr_mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
            r.timeout = id->ack_timeout;
            r.retry_cnt = id->active ? id->local.retry_count : id->peer.retry_count;
            r.rnr_retry = id->peer.rnr_retry_count;  // each side's count comes in the other's REQ or REP
            r.max_rd_atomic = id->active ? id->local.initiator_depth : id->peer.responder_resources;
        }
        break;
    default: return -EINVAL;
    }
    reply(cmd.response, r);
    return 0;
}

int set_option(Id& id, const rdma_ucm_set_option& cmd)
{
    if (cmd.optlen > 4096) return -EINVAL;
    const auto* v = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(cmd.optval));
    int iv = 0;
    if (cmd.optlen == sizeof iv) std::memcpy(&iv, v, sizeof iv);
    if (cmd.level == RDMA_OPTION_ID) {
        switch (cmd.optname) {
        case RDMA_OPTION_ID_TOS:
            if (cmd.optlen != 1) return -EINVAL;
            id.tos = v[0];
            return 0;
        case RDMA_OPTION_ID_REUSEADDR:
            if (cmd.optlen != sizeof iv) return -EINVAL;
            if (id.state != State::Idle && id.state != State::AddrBound) return -EINVAL;
            id.reuseaddr = iv != 0;
            return 0;
        case RDMA_OPTION_ID_AFONLY:
            if (cmd.optlen != sizeof iv) return -EINVAL;
            if (id.state != State::Idle) return -EINVAL;  // set before bind, as the kernel asks
            id.afonly = iv != 0;
            return 0;
        case RDMA_OPTION_ID_ACK_TIMEOUT:
            if (cmd.optlen != 1 || v[0] > 31) return -EINVAL;
            id.ack_timeout = v[0];
            return 0;
        default: return -ENOSYS;
        }
    }
    if (cmd.level == RDMA_OPTION_IB && cmd.optname == RDMA_OPTION_IB_PATH) {
        // A path from ibacm: RoCE's route is the address's, so it resolves as RESOLVE_ROUTE.
        if (cmd.optlen == 0 || cmd.optlen % sizeof(ib_path_rec_data)) return -EINVAL;
        return resolve_route(id);
    }
    return -ENOSYS;
}

int migrate(Channel& ch, const rdma_ucm_migrate_id& cmd)
{
    Id* id = find_id(cmd.id);
    if (!id) return -ENOENT;
    if (id->channel != static_cast<int>(cmd.fd)) return -EINVAL;
    auto from = channels().find(id->channel);
    if (from != channels().end() && &from->second != &ch) {
        // Its queued events move with it, in order.
        const bool had = !from->second.events.empty();
        std::deque<Event> moved;
        for (auto it = from->second.events.begin(); it != from->second.events.end();) {
            if (it->owner == id->handle) {
                moved.push_back(*it);
                it = from->second.events.erase(it);
            } else {
                ++it;
            }
        }
        eventfd_t v;
        if (had && from->second.events.empty()) (void)eventfd_read(from->second.fd, &v);
        id->channel = ch.fd;
        for (Event& e : moved) post_event(*id, e);
    }
    id->channel = ch.fd;
    rdma_ucm_migrate_resp r{};
    r.events_reported = id->events_reported;
    reply(cmd.response, r);
    return 0;
}

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

}  // namespace

uint32_t destroy_id(uint32_t handle)
{
    Id* id = find_id(handle);
    if (!id) return 0;
    const std::vector<uint32_t> requests = drop_events(handle);
    for (auto& [d, c] : id->listens) {
        {
            std::lock_guard g(d->engine->lock());
            (void)d->agent->destroy_id(c);
        }
        device_put(d);
    }
    if (id->cm != cm::kNoId) {
        // The agent answers what the ID owes, as the kernel's cm_destroy_id: a connection its
        // DREQ (or DREP), an unanswered request its REJ, a SIDR_REQ its SIDR_REP.
        std::lock_guard g(id->dev->engine->lock());
        (void)id->dev->agent->destroy_id(id->cm);
    }
    device_put(id->dev);
    const uint32_t reported = id->events_reported;
    ids().erase(handle);
    for (uint32_t r : requests) (void)destroy_id(r);  // requests nobody took (the kernel's ucma_free_ctx)
    return reported;
}

ssize_t serve(Channel& ch, const void* buf, size_t len, std::unique_lock<std::mutex>& lock)
{
    rdma_ucm_cmd_hdr hdr;
    if (len < sizeof hdr) return -EINVAL;
    std::memcpy(&hdr, buf, sizeof hdr);
    if (hdr.in + sizeof hdr > len) return -EINVAL;
    const void* p = static_cast<const uint8_t*>(buf) + sizeof hdr;
    const size_t in = hdr.in, out = hdr.out;
    int ret = 0;
    Id* id = nullptr;
    switch (hdr.cmd) {
    case RDMA_USER_CM_CMD_CREATE_ID: {
        const auto cmd = body<rdma_ucm_create_id>(p, in);
        if (out < sizeof(rdma_ucm_create_id_resp)) return -ENOSPC;
        uint8_t qp_type;
        switch (cmd.ps) {
        case RDMA_PS_TCP: qp_type = IBV_QPT_RC; break;
        case RDMA_PS_UDP:
        case RDMA_PS_IPOIB: qp_type = IBV_QPT_UD; break;
        case RDMA_PS_IB: qp_type = cmd.qp_type; break;
        default: return -EINVAL;
        }
        auto n = std::unique_ptr<Id>(new (std::nothrow) Id);
        if (!n) return -ENOMEM;
        n->handle = new_handle();
        n->uid = cmd.uid;
        n->channel = ch.fd;
        n->ps = cmd.ps;
        n->qp_type = qp_type;
        rdma_ucm_create_id_resp r{n->handle};
        try {
            ids()[n->handle] = std::move(n);
        } catch (const std::bad_alloc&) {
            return -ENOMEM;
        }
        reply(cmd.response, r);
        id = find_id(r.id);
        break;
    }
    case RDMA_USER_CM_CMD_DESTROY_ID: {
        const auto cmd = body<rdma_ucm_destroy_id>(p, in);
        if (out < sizeof(rdma_ucm_destroy_id_resp)) return -ENOSPC;
        if ((ret = lookup(ch, cmd.id, &id))) break;
        rdma_ucm_destroy_id_resp r{destroy_id(cmd.id)};
        reply(cmd.response, r);
        break;
    }
    case RDMA_USER_CM_CMD_BIND_IP: {
        const auto cmd = body<rdma_ucm_bind_ip>(p, in);
        sockaddr_storage a;
        if (!(ret = lookup(ch, cmd.id, &id)) && !(ret = take_addr(&cmd.addr, sizeof cmd.addr, &a))) ret = do_bind(*id, a);
        break;
    }
    case RDMA_USER_CM_CMD_BIND: {
        const auto cmd = body<rdma_ucm_bind>(p, in);
        sockaddr_storage a;
        if (cmd.reserved || !cmd.addr_size || cmd.addr_size > sizeof cmd.addr) return -EINVAL;
        if (!(ret = lookup(ch, cmd.id, &id)) && !(ret = take_addr(&cmd.addr, cmd.addr_size, &a))) ret = do_bind(*id, a);
        break;
    }
    case RDMA_USER_CM_CMD_RESOLVE_IP: {
        const auto cmd = body<rdma_ucm_resolve_ip>(p, in);
        sockaddr_storage s{}, d;
        if (cmd.src_addr.sin6_family && (ret = take_addr(&cmd.src_addr, sizeof cmd.src_addr, &s))) break;
        if ((ret = take_addr(&cmd.dst_addr, sizeof cmd.dst_addr, &d))) break;
        ret = resolve(ch, cmd.id, &s, d);
        id = find_id(cmd.id);
        break;
    }
    case RDMA_USER_CM_CMD_RESOLVE_ADDR: {
        const auto cmd = body<rdma_ucm_resolve_addr>(p, in);
        sockaddr_storage s{}, d;
        if (cmd.reserved || !cmd.dst_size || cmd.dst_size > sizeof cmd.dst_addr || cmd.src_size > sizeof cmd.src_addr)
            return -EINVAL;
        if (cmd.src_size && (ret = take_addr(&cmd.src_addr, cmd.src_size, &s))) break;
        if ((ret = take_addr(&cmd.dst_addr, cmd.dst_size, &d))) break;
        ret = resolve(ch, cmd.id, &s, d);
        id = find_id(cmd.id);
        break;
    }
    case RDMA_USER_CM_CMD_RESOLVE_ROUTE: {
        const auto cmd = body<rdma_ucm_resolve_route>(p, in);
        if (!(ret = lookup(ch, cmd.id, &id))) ret = resolve_route(*id);
        break;
    }
    case RDMA_USER_CM_CMD_QUERY_ROUTE:
        ret = query_route(ch, p, in, out);
        id = find_id(body<rdma_ucm_query>(p, in).id);
        break;
    case RDMA_USER_CM_CMD_QUERY:
        ret = query(ch, p, in, out);
        id = find_id(body<rdma_ucm_query>(p, in).id);
        break;
    case RDMA_USER_CM_CMD_LISTEN: {
        const auto cmd = body<rdma_ucm_listen>(p, in);
        if (!(ret = lookup(ch, cmd.id, &id))) ret = listen(*id, static_cast<int>(cmd.backlog));
        break;
    }
    case RDMA_USER_CM_CMD_CONNECT: {
        const auto cmd = body<rdma_ucm_connect>(p, in);
        if (!(ret = lookup(ch, cmd.id, &id))) ret = connect(*id, cmd);
        break;
    }
    case RDMA_USER_CM_CMD_ACCEPT: {
        const auto cmd = body<rdma_ucm_accept>(p, in);
        if (!(ret = lookup(ch, cmd.id, &id))) ret = accept(*id, cmd);
        break;
    }
    case RDMA_USER_CM_CMD_REJECT: {
        const auto cmd = body<rdma_ucm_reject>(p, in);
        if (!(ret = lookup(ch, cmd.id, &id))) ret = reject(*id, cmd);
        break;
    }
    case RDMA_USER_CM_CMD_DISCONNECT: {
        const auto cmd = body<rdma_ucm_disconnect>(p, in);
        if (!(ret = lookup(ch, cmd.id, &id))) ret = disconnect(*id);
        break;
    }
    case RDMA_USER_CM_CMD_INIT_QP_ATTR:
        ret = init_qp_attr(ch, p, in, out);
        id = find_id(body<rdma_ucm_init_qp_attr>(p, in).id);
        break;
    case RDMA_USER_CM_CMD_GET_EVENT: ret = static_cast<int>(get_event(&ch, body<rdma_ucm_get_event>(p, in), out, lock)); break;
    case RDMA_USER_CM_CMD_SET_OPTION: {
        const auto cmd = body<rdma_ucm_set_option>(p, in);
        if (!(ret = lookup(ch, cmd.id, &id))) ret = set_option(*id, cmd);
        break;
    }
    case RDMA_USER_CM_CMD_NOTIFY: {
        // IBV_EVENT_COMM_EST from the program: the CM agent establishes on the RTU (or its
        // retry), so the notice changes nothing.
        const auto cmd = body<rdma_ucm_notify>(p, in);
        if (!(ret = lookup(ch, cmd.id, &id)) && id->cm == cm::kNoId) ret = -EINVAL;
        break;
    }
    case RDMA_USER_CM_CMD_MIGRATE_ID: {
        const auto cmd = body<rdma_ucm_migrate_id>(p, in);
        if (out < sizeof(rdma_ucm_migrate_resp)) return -ENOSPC;
        ret = migrate(ch, cmd);
        break;
    }
    case RDMA_USER_CM_CMD_JOIN_IP_MCAST: {
        const auto cmd = body<rdma_ucm_join_ip_mcast>(p, in);
        if (out < sizeof(rdma_ucm_create_id_resp)) return -ENOSPC;
        sockaddr_storage a;
        if (!(ret = lookup(ch, cmd.id, &id)) && !(ret = take_addr(&cmd.addr, sizeof cmd.addr, &a)))
            ret = join(*id, cmd.uid, a, RDMA_MC_JOIN_FLAG_FULLMEMBER, cmd.response);
        break;
    }
    case RDMA_USER_CM_CMD_JOIN_MCAST: {
        const auto cmd = body<rdma_ucm_join_mcast>(p, in);
        if (out < sizeof(rdma_ucm_create_id_resp)) return -ENOSPC;
        if (!cmd.addr_size || cmd.addr_size > sizeof cmd.addr) return -EINVAL;
        sockaddr_storage a;
        if (!(ret = lookup(ch, cmd.id, &id)) && !(ret = take_addr(&cmd.addr, cmd.addr_size, &a)))
            ret = join(*id, cmd.uid, a, cmd.join_flags, cmd.response);
        break;
    }
    case RDMA_USER_CM_CMD_LEAVE_MCAST: ret = leave(ch, body<rdma_ucm_destroy_id>(p, in), out); break;
    case RDMA_USER_CM_CMD_GET_OPTION: return -ENOSYS;  // no handler in the kernel either
    default: return -EINVAL;
    }
    const ssize_t r = ret ? ret : static_cast<ssize_t>(len);
    trace_command(hdr.cmd, hdr.cmd == RDMA_USER_CM_CMD_DESTROY_ID ? nullptr : id, r);  // a destroyed ID is gone
    return r;
}

}  // namespace sdr::verbs::ucma
