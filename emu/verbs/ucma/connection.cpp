// rdma_cm's connections (commands.hpp): CONNECT (a REQ, or a SIDR_REQ for UD), ACCEPT (REP,
// SIDR_REP, or the active side's RTU), REJECT, DISCONNECT through the device's CM agent, and
// INIT_QP_ATTR's QP attributes from what the two sides exchanged.
#include "commands.hpp"

#include <cerrno>

namespace sdr::verbs::ucma {
namespace {

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

}  // namespace

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
            // READ and atomics when this side takes them (the kernel's cm_init_qp_init_attr).
            r.qp_attr_mask |= IBV_QP_ACCESS_FLAGS;
            if (connected)
                r.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
                                    ((id->local.responder_resources || !id->active)
                                         ? uint32_t{IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC}
                                         : 0u);
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

}  // namespace sdr::verbs::ucma
