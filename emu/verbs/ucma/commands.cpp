// The rdma_cm commands (ucma.hpp): one write() of struct rdma_ucm_cmd_hdr and its body, served
// as the kernel's rdma_ucm serves it (drivers/infiniband/core/ucma.c's table: the same checks,
// errno values and replies copied to the command's `response` pointer) on top of this server's
// IDs, the device table and each NIC's CM agent. This file dispatches and serves the IDs'
// lifetimes, options and migration; the rest is in the files commands.hpp names. What differs
// from the kernel is in SEMANTICS.md, "rdma_cm".
#include "commands.hpp"

#include <sys/eventfd.h>

#include <cerrno>
#include <new>

namespace sdr::verbs::ucma {

int lookup(const Channel& ch, uint32_t handle, Id** out)
{
    Id* id = find_id(handle);
    if (!id) return -ENOENT;
    if (id->channel != ch.fd) return -EINVAL;
    *out = id;
    return 0;
}

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

namespace {

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
