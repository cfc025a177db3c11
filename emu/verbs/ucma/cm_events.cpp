// The CM agents' events as rdma_cm events (ucma.hpp). An agent calls its handler under its NIC's
// lock, where the server lock may not be taken (a command holds it while calling the agent):
// the handler only queues the event in an inbox and wakes the CM event thread, which delivers
// it under the server lock, as the kernel's cma_ib_handler and ucma_event_handler would.
#include "commands.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace sdr::verbs::ucma {
namespace {

struct Inbox {
    std::mutex mu;  // taken by nothing that holds it while taking another lock
    std::deque<std::pair<Device*, cm::Event>> events;
    int kick = -1;  // eventfd: the thread's wake-up
};

Inbox& inbox()
{
    static auto* b = new Inbox;  // never destroyed: the thread may run through exit
    return *b;
}

Id* id_of(Device* d, cm::CmId c)
{
    for (auto& [h, id] : ids())
        if (id->dev == d && id->cm == c) return id.get();
    return nullptr;
}

Id* listener_of(Device* d, cm::CmId c)
{
    for (auto& [h, id] : ids())
        for (auto& [ld, lc] : id->listens)
            if (ld == d && lc == c) return id.get();
    return nullptr;
}

void copy_private(uint8_t* dst, uint8_t* len, const cm::Event& e)
{
    const size_t n = std::min<size_t>(e.private_data_len, RDMA_MAX_PRIVATE_DATA);
    std::memcpy(dst, e.private_data.data(), n);
    *len = static_cast<uint8_t>(n);
}

void conn_param(rdma_ucm_conn_param* p, const cm::ConnParams& peer, const cm::Event& e)
{
    p->qp_num = peer.qpn;
    p->responder_resources = peer.responder_resources;
    p->initiator_depth = peer.initiator_depth;
    p->flow_control = peer.flow_control;
    p->retry_count = peer.retry_count;
    p->rnr_retry_count = peer.rnr_retry_count;
    p->srq = peer.srq;
    copy_private(p->private_data, &p->private_data_len, e);
}

// The address vector towards the peer of a UD exchange, as verbs takes it (a GRH from GID 0).
void ud_param(rdma_ucm_ud_param* p, const Id& id, uint32_t qpn, uint32_t qkey, const cm::Event& e)
{
    p->qp_num = qpn;
    p->qkey = qkey;
    std::memcpy(p->ah_attr.grh.dgid, id.path.remote_gid.data(), 16);
    p->ah_attr.grh.hop_limit = id.path.hop_limit;
    p->ah_attr.grh.traffic_class = id.path.traffic_class;
    p->ah_attr.grh.flow_label = id.path.flow_label;
    p->ah_attr.is_global = 1;
    p->ah_attr.port_num = 1;
    copy_private(p->private_data, &p->private_data_len, e);
}

Event event_for(const Id& id, uint32_t type, int status = 0)
{
    Event ev;
    ev.resp.uid = id.uid;
    ev.resp.id = id.handle;
    ev.resp.event = type;
    ev.resp.status = static_cast<uint32_t>(status);
    return ev;
}

// A REQ or SIDR_REQ to a listener: a new ID, and CONNECT_REQUEST on the listener's channel.
void request(Device* d, const cm::Event& e)
{
    Id* l = listener_of(d, e.listen_id);
    const bool ud = e.type == cm::EventType::SidrRequest;
    auto refuse = [&] {
        std::lock_guard g(d->engine->lock());
        (void)(ud ? d->agent->sidr_reply(e.id, 0, 0, cm::SidrStatus::Rejected, nullptr, 0)
                  : d->agent->reject(e.id, cm::kRejConsumer, nullptr, 0));
        (void)d->agent->destroy_id(e.id);
    };
    // The kernel refuses a request over the backlog (ucma_event_handler), of the wrong kind, or
    // from IPv4 to an IPv6 listener that takes IPv6 only (AFONLY).
    const bool v6_only = l && l->src.ss_family == AF_INET6 && l->afonly;
    if (!l || l->backlog <= 0 || ud != (l->qp_type == IBV_QPT_UD) || e.peer_ip_version != 4 || v6_only)
        return refuse();
    auto n = std::unique_ptr<Id>(new (std::nothrow) Id);
    if (!n || device_get(d)) return refuse();
    n->handle = new_handle();
    n->channel = l->channel;
    n->ps = l->ps;
    n->qp_type = l->qp_type;
    n->state = State::Connect;
    n->dev = d;
    n->cm = e.id;
    n->listener = l->handle;
    n->tos = l->tos;
    n->ack_timeout = l->ack_timeout;
    n->path = e.path;
    n->peer = e.peer;
    n->local.starting_psn = random_psn();  // INIT_QP_ATTR's RTS comes before ACCEPT
    n->local.qp_type = e.peer.qp_type;
    n->local.path_mtu = std::min(e.peer.path_mtu, port_mtu_bytes(*d));  // what both ports carry
    auto& src = reinterpret_cast<sockaddr_in&>(n->src);
    src.sin_family = AF_INET;
    src.sin_addr.s_addr = htonl(e.path.local_ip);
    src.sin_port = htons(e.path.local_port);
    auto& dst = reinterpret_cast<sockaddr_in&>(n->dst);
    dst.sin_family = AF_INET;
    dst.sin_addr.s_addr = htonl(e.path.remote_ip);
    dst.sin_port = htons(e.path.remote_port);
    Event ev = event_for(*l, cm_event::kConnectRequest);
    ev.resp.id = n->handle;
    ev.request = n->handle;
    if (ud) ud_param(&ev.resp.param.ud, *n, 0, 0, e);
    else conn_param(&ev.resp.param.conn, e.peer, e);
    try {
        ids()[n->handle] = std::move(n);
    } catch (const std::bad_alloc&) {
        device_put(d);
        return refuse();
    }
    l->backlog--;
    post_event(*l, ev);
}

void deliver(Device* d, const cm::Event& e)
{
    if (e.type == cm::EventType::Request || e.type == cm::EventType::SidrRequest) return request(d, e);
    Id* id = id_of(d, e.id);
    // The kernel drops the events of a request's ID until the program accepted it (uid 0).
    if (!id || (!id->active && id->uid == 0)) return;
    switch (e.type) {
    case cm::EventType::RepReceived: {
        id->peer = e.peer;
        Event ev = event_for(*id, cm_event::kConnectResponse);
        conn_param(&ev.resp.param.conn, e.peer, e);
        return post_event(*id, ev);
    }
    case cm::EventType::Established: {
        if (id->active) return;  // the RTU we sent: librdmacm reported ESTABLISHED at the response
        id->state = State::Established;
        Event ev = event_for(*id, cm_event::kEstablished);
        conn_param(&ev.resp.param.conn, id->peer, e);
        return post_event(*id, ev);
    }
    case cm::EventType::Rejected: {
        id->state = State::Disconnect;
        Event ev = event_for(*id, cm_event::kRejected, e.reject_reason);
        conn_param(&ev.resp.param.conn, cm::ConnParams{}, e);
        return post_event(*id, ev);
    }
    case cm::EventType::Unreachable:
        id->state = State::Disconnect;
        return post_event(*id, event_for(*id, cm_event::kUnreachable, -ETIMEDOUT));
    case cm::EventType::Disconnected: {
        id->state = State::Disconnect;
        Event ev = event_for(*id, cm_event::kDisconnected);
        copy_private(ev.resp.param.conn.private_data, &ev.resp.param.conn.private_data_len, e);
        return post_event(*id, ev);
    }
    case cm::EventType::TimewaitExit: return post_event(*id, event_for(*id, cm_event::kTimewaitExit));
    case cm::EventType::SidrReply: {
        // The kernel's cma_sidr_rep_handler: a refusal is UNREACHABLE with the SIDR status, a
        // Q_Key other than the port space's UNREACHABLE with EINVAL.
        if (e.sidr_status != cm::SidrStatus::Valid)
            return post_event(*id, event_for(*id, cm_event::kUnreachable, static_cast<int>(e.sidr_status)));
        if (id->ps == RDMA_PS_UDP && e.sidr_qkey != kUdpQkey)
            return post_event(*id, event_for(*id, cm_event::kUnreachable, -EINVAL));
        id->state = State::Established;
        Event ev = event_for(*id, cm_event::kEstablished);
        ud_param(&ev.resp.param.ud, *id, e.sidr_qpn, e.sidr_qkey, e);
        return post_event(*id, ev);
    }
    default: return;
    }
}

[[noreturn]] void run()
{
    Inbox& b = inbox();
    for (;;) {
        pollfd p{b.kick, POLLIN, 0};
        if (poll(&p, 1, -1) <= 0) continue;
        uint64_t v;
        ssize_t n = read(b.kick, &v, sizeof v);
        (void)n;
        std::deque<std::pair<Device*, cm::Event>> batch;
        {
            std::lock_guard g(b.mu);
            batch.swap(b.events);
        }
        std::lock_guard g(mu());
        for (const auto& [d, e] : batch)
            if (d->agent) deliver(d, e);  // a device whose last ID went meanwhile takes nothing
    }
}

void start_thread()
{
    static std::once_flag once;
    std::call_once(once, [] {
        inbox().kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        std::thread(run).detach();
    });
}

}  // namespace

cm::EventHandler event_handler(Device* d)
{
    start_thread();
    return [d](const cm::Event& e) {
        Inbox& b = inbox();
        {
            std::lock_guard g(b.mu);
            b.events.emplace_back(d, e);
        }
        const uint64_t one = 1;
        ssize_t n = write(b.kick, &one, sizeof one);
        (void)n;
    };
}

}  // namespace sdr::verbs::ucma
