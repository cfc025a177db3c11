// SDR QPs: G generations x C channels of transport QPs, a root key per generation, and the
// firmware's receive and send state in NIC memory.
#include <algorithm>

#include "internal.hpp"


using sdr::host::set_error;

namespace {

std::string n2s(uint64_t v) { return std::to_string(v); }

// Validate attributes and derive the QP geometry; empty string when fine.
std::string check_attr(const sdr_qp_attr& a, const fw_imm_layout& imm)
{
    int mtu = sdr::host::raw_enum(a.mtu);
    if (mtu < SDR_MTU_64 || mtu > SDR_MTU_4096) return "mtu is not an sdr_mtu value";
    uint32_t mtu_log = 6 + static_cast<uint32_t>(mtu);
    if (!a.send_enable && !a.recv_enable) return "neither send_enable nor recv_enable is set";
    if (a.bitmap_chunk_size_log_bytes < mtu_log || a.bitmap_chunk_size_log_bytes > 30)
        return "bitmap_chunk_size_log_bytes must lie in [log2(MTU)=" + n2s(mtu_log) + ", 30], got " +
               n2s(a.bitmap_chunk_size_log_bytes);
    if (a.max_log_num_msgs > imm.msg_bits)
        return "max_log_num_msgs must be <= " + n2s(imm.msg_bits) + " (message-id bits), got " + n2s(a.max_log_num_msgs);
    if (a.max_in_flight_log_bytes > 40) return "max_in_flight_log_bytes must be <= 40";
    if (a.max_in_flight_log_bytes < a.max_log_num_msgs + a.bitmap_chunk_size_log_bytes)
        return "max_in_flight_log_bytes - max_log_num_msgs (the slot size, log2) must be at least "
               "bitmap_chunk_size_log_bytes";
    uint64_t slot_log = a.max_in_flight_log_bytes - a.max_log_num_msgs;
    if (slot_log - mtu_log > imm.offset_bits)
        return "a slot of 2^" + n2s(slot_log) + " bytes needs more than 2^" + n2s(imm.offset_bits) +
               " packets at this MTU (packet-offset bits): lower max_in_flight_log_bytes or raise max_log_num_msgs";
    if (slot_log > 32) return "slot size (max_in_flight_log_bytes - max_log_num_msgs) must be <= 2^32 bytes";
    return {};
}

// Give back to the device what the QP holds (a handle not created is kInvalid, a root key
// 0, NIC memory nullptr), then the QP itself: sdr_qp_destroy, and sdr_qp_create's failure paths.
void release(sdr_qp* qp)
{
    sdr::host::Device& dev = *qp->ctx->dev;
    for (uint32_t g = 0; g < qp->generations; g++) {
        for (uint32_t c = 0; c < qp->channels; c++)
            if (qp->tq[g][c] != sdr::host::Device::kInvalid) dev.qp_destroy(qp->tq[g][c]);
        if (qp->root_rkey[g]) dev.root_key_destroy(qp->root_rkey[g]);
    }
    if (qp->ctrl != sdr::host::Device::kInvalid) dev.ctrl_qp_destroy(qp->ctrl);
    for (void* p : {static_cast<void*>(qp->rx), qp->rx_mem, static_cast<void*>(qp->tx), static_cast<void*>(qp->ring)})
        if (p) dev.nic_free(p);
    delete qp;
}

// sdr_qp_create's failure: give everything back, say why; NULL.
sdr_qp* fail(sdr_qp* qp, const std::string& msg)
{
    sdr::host::Device& dev = *qp->ctx->dev;
    sdr::host::device_error(dev, "sdr_qp_create: " + msg);
    release(qp);
    return nullptr;
}

// The transport QPs (G x C), their root keys and the control QP; false at the first failure,
// with what was created so far recorded in qp for release().
bool create_transport(sdr_qp* qp, bool recv)
{
    sdr::host::Device& dev = *qp->ctx->dev;
    const uint32_t nslots = 1u << qp->log_slots;
    for (uint32_t g = 0; g < qp->generations; g++) {
        if (recv && !(qp->root_rkey[g] = dev.root_key_create(nslots, 1ull << qp->slot_log))) return false;
        for (uint32_t c = 0; c < qp->channels; c++) {
            qp->tq[g][c] = dev.qp_create(fw_qp_tag(qp->index, g, c), c, qp->rc, &qp->qpn[g][c]);
            if (qp->tq[g][c] == sdr::host::Device::kInvalid) return false;
            if (recv && !dev.qp_bind_root_key(qp->tq[g][c], qp->root_rkey[g])) return false;
        }
    }
    qp->ctrl = dev.ctrl_qp_create(&qp->ctrl_qpn, &qp->ctrl_qkey);
    return qp->ctrl != sdr::host::Device::kInvalid;
}

}  // namespace

extern "C" {

sdr_qp* sdr_qp_create(sdr_context* ctx, sdr_qp_attr* attr) { return sdr_qp_create_ext(ctx, attr, nullptr); }

sdr_qp* sdr_qp_create_ext(sdr_context* ctx, sdr_qp_attr* attr, const sdr_qp_attr_ext* ext)
{
    if (!ctx) return set_error("sdr_qp_create: context is NULL"), nullptr;
    if (!attr) return set_error("sdr_qp_create: qp_attr is NULL"), nullptr;
    fw_imm_layout imm = FW_IMM_DEFAULT_LAYOUT;
    if (std::string e = check_attr(*attr, imm); !e.empty()) return set_error("sdr_qp_create: " + e), nullptr;
    sdr::host::ExtValues xv;
    if (std::string e; !sdr::host::resolve_ext(ext, *ctx->dev, &xv, &e)) return set_error("sdr_qp_create: " + e), nullptr;

    // A device on a real interface carries frames up to its MTU: a QP whose packets cannot
    // fit would lose every one of them. A packet's frame is its payload and the RoCEv2 headers
    // the firmware paces by (Ethernet, IPv4, UDP, BTH, RETH, ImmDt, ICRC: the NIC model
    // asserts the wire codec agrees).
    const uint32_t cap = ctx->dev->max_frame_bytes();
    auto frame = [](int mtu) { return (size_t{64} << mtu) + FW_FRAME_OVERHEAD_BYTES; };
    if (cap && frame(attr->mtu) > cap) {
        int fits = SDR_MTU_4096;
        while (fits >= SDR_MTU_64 && frame(fits) > cap) fits--;
        std::string e = "sdr_qp_create: MTU " + n2s(64u << attr->mtu) + " needs frames of " + n2s(frame(attr->mtu)) +
                        " B, but " + ctx->dev->name() + " carries at most " + n2s(cap) + " B";
        e += fits >= SDR_MTU_64 ? ": use MTU " + n2s(64u << fits) + " or less, or raise the interface's MTU (" +
                                      n2s(frame(attr->mtu) - 14) + " or more)"
                                : "";
        return set_error(e), nullptr;
    }

    uint32_t max_qps = std::min<uint32_t>(1u << ctx->log_max_qps, FW_MAX_QPS);
    uint32_t index = 0;
    while (index < ctx->qps.size() && ctx->qps[index]) index++;
    if (index >= max_qps)
        return set_error("sdr_qp_create: all " + n2s(max_qps) + " QPs of the context (2^log_max_qps) are in use"), nullptr;

    auto* qp = new sdr_qp;
    qp->ctx = ctx;
    qp->index = index;
    qp->attr = *attr;
    qp->imm = imm;
    qp->mtu_log = 6 + static_cast<uint32_t>(attr->mtu);
    qp->chunk_log = attr->bitmap_chunk_size_log_bytes;
    qp->slot_log = static_cast<uint32_t>(attr->max_in_flight_log_bytes - attr->max_log_num_msgs);
    qp->log_slots = attr->max_log_num_msgs;
    qp->channels = ctx->dev->num_channels();
    qp->generations = xv.generations;
    qp->lifetime_ns = xv.lifetime_ns;
    qp->lifetime_from_path = xv.lifetime_from_path;
    qp->rc = xv.rc;
    qp->spray = xv.spray;
    qp->ctrl = sdr::host::Device::kInvalid;
    for (auto& row : qp->tq)
        for (uint32_t& h : row) h = sdr::host::Device::kInvalid;
    sdr::host::Device& dev = *ctx->dev;
    uint32_t nslots = 1u << qp->log_slots;

    if (!create_transport(qp, attr->recv_enable))
        return fail(qp, "the device has no transport QP, control QP or root key left for " + n2s(qp->generations) +
                            " generations x " + n2s(qp->channels) + " channels");
    if (qp->spray)
        for (uint32_t g = 0; g < qp->generations; g++)
            for (uint32_t c = 0; c < qp->channels; c++)
                if (!dev.qp_set_spray(qp->tq[g][c], true))
                    return fail(qp, "sdr_qp_attr_ext.spray = 1 needs a device that sprays (sim:, raw:, xdp:)");
    fw_qp fq{nullptr, nullptr};
    if (attr->recv_enable) {
        uint32_t max_packets = 1u << (qp->slot_log - qp->mtu_log);
        uint32_t log_ppc = qp->chunk_log - qp->mtu_log;
        uint64_t mem = fw_rx_qp_mem_bytes(nslots, max_packets, log_ppc);
        qp->rx = static_cast<fw_rx_qp*>(dev.nic_alloc(sizeof(fw_rx_qp)));
        qp->rx_mem = qp->rx ? dev.nic_alloc(mem) : nullptr;
        if (!qp->rx || !qp->rx_mem) return fail(qp, "out of NIC memory for " + n2s(mem) + " bytes of slot state");
        uint32_t nchunks_max = 1u << (qp->slot_log - qp->chunk_log);
        qp->bitmap_words = (nchunks_max + 63) / 64;  // as fw_rx_qp_init lays the window out
        qp->slot_window_words = qp->bitmap_words + 1;
        qp->rx_window.assign(size_t{nslots} * qp->slot_window_words, 0);
        sdr::host::RxGeometry geo{imm, nslots, max_packets, log_ppc, qp->mtu_log, qp->generations,
                                  hal_window{reinterpret_cast<uint64_t>(qp->rx_window.data()), qp->rx_window.size()}};
        if (!dev.rx_state_init(qp->rx, qp->rx_mem, geo)) return fail(qp, "the device did not set up the receive state");
        qp->recvs.resize(nslots);
        qp->quiet_until.assign(size_t{nslots} * qp->generations, 0);
        fq.rx = qp->rx;
    }
    if (attr->send_enable) {
        qp->tx = static_cast<fw_tx_qp*>(dev.nic_alloc(sizeof(fw_tx_qp)));
        qp->ring = qp->tx ? static_cast<fw_send_wr*>(dev.nic_alloc(sizeof(fw_send_wr) * sdr::host::kSendRingSize))
                          : nullptr;
        if (!qp->tx || !qp->ring)
            return fail(qp, "out of NIC memory for the send state and its ring of " + n2s(sdr::host::kSendRingSize) +
                                " requests");
        // The send state is built here and written to NIC memory in one copy.
        fw_tx_qp tx{};
        tx.imm = imm;
        tx.mtu_log = qp->mtu_log;
        tx.num_channels = qp->channels;
        tx.index = index;
        tx.rate_mbps = attr->rate_limit;
        tx.ring = qp->ring;
        tx.ring_mask = sdr::host::kSendRingSize - 1;
        tx.window = hal_window{reinterpret_cast<uint64_t>(qp->tx_window), 2};
        tx.num_generations = qp->generations;
        for (uint32_t g = 0; g < qp->generations; g++)
            for (uint32_t c = 0; c < qp->channels; c++) tx.channel_qp[g][c] = qp->tq[g][c];
        if (!dev.nic_write(qp->tx, &tx, sizeof tx)) return fail(qp, "the device did not take the send state");
        qp->wr_bytes.assign(sdr::host::kSendRingSize, 0);
        fq.tx = qp->tx;
    }
    if (!dev.fw_qp_attach(index, fq)) return fail(qp, "the device did not attach the QP to its firmware");
    if (ctx->qps.size() <= index) ctx->qps.resize(index + 1, nullptr);
    ctx->qps[index] = qp;
    return qp;
}

int sdr_qp_destroy(sdr_qp* qp)
{
    if (!qp) return set_error("sdr_qp_destroy: qp is NULL");
    qp->ctx->dev->fw_qp_detach(qp->index);
    qp->ctx->qps[qp->index] = nullptr;
    release(qp);
    return SDR_SUCCESS;
}

int sdr_qp_info_size_get(sdr_qp* qp, size_t* info_size)
{
    if (!qp || !info_size) return set_error("sdr_qp_info_size_get: qp or info_size is NULL");
    *info_size = qp_info_size();
    return SDR_SUCCESS;
}

int sdr_qp_info_get(sdr_qp* qp, void* info)
{
    if (!qp || !info) return set_error("sdr_qp_info_get: qp or info is NULL");
    QpInfo in;
    in.mtu_log = static_cast<uint8_t>(qp->mtu_log);
    in.chunk_log = static_cast<uint8_t>(qp->chunk_log);
    in.slot_log = static_cast<uint8_t>(qp->slot_log);
    in.log_slots = static_cast<uint8_t>(qp->log_slots);
    in.generations = static_cast<uint8_t>(qp->generations);
    in.channels = static_cast<uint8_t>(qp->channels);
    in.recv_enable = qp->attr.recv_enable ? 1 : 0;
    in.rc = qp->rc ? 1 : 0;
    in.spray = qp->spray ? 1 : 0;
    in.imm = qp->imm;
    in.addr = qp->ctx->dev->address();
    for (uint32_t g = 0; g < qp->generations; g++) {
        in.rkey[g] = qp->root_rkey[g];
        for (uint32_t c = 0; c < qp->channels; c++) in.qpn[g][c] = qp->qpn[g][c];
    }
    in.ctrl_qpn = qp->ctrl_qpn;
    in.ctrl_qkey = qp->ctrl_qkey;
    in.path_lifetime_ns = std::min<uint64_t>(qp->ctx->dev->max_packet_lifetime_ns(), SDR_MAX_LIFETIME_NS);
    qp_info_write(in, static_cast<uint8_t*>(info));
    return SDR_SUCCESS;
}

int sdr_qp_connect(sdr_qp* qp, void* remote_info)
{
    if (!qp || !remote_info) return set_error("sdr_qp_connect: qp or remote_qp_info is NULL");
    if (qp->connected) return set_error("sdr_qp_connect: the QP is already connected");
    QpInfo r;
    std::string err;
    if (!qp_info_read(static_cast<const uint8_t*>(remote_info), &r, &err)) return set_error("sdr_qp_connect: " + err);
    if (r.mtu_log != qp->mtu_log) return set_error("sdr_qp_connect: MTU differs from the remote QP's");
    if (r.chunk_log != qp->chunk_log) return set_error("sdr_qp_connect: bitmap chunk size differs from the remote QP's");
    if (r.channels != qp->channels)
        return set_error("sdr_qp_connect: channel count differs (local " + n2s(qp->channels) + ", remote " + n2s(r.channels) + ")");
    if (r.imm.msg_bits != qp->imm.msg_bits || r.imm.offset_bits != qp->imm.offset_bits || r.imm.frag_bits != qp->imm.frag_bits)
        return set_error("sdr_qp_connect: immediate layout differs from the remote QP's");
    if (r.generations != qp->generations)
        return set_error("sdr_qp_connect: number of generations differs (local G = " + n2s(qp->generations) +
                         ", remote G = " + n2s(r.generations) +
                         "): create both QPs with the same SDR_QP_NUM_GENERATIONS or num_generations");
    if (qp->attr.send_enable && !r.recv_enable)
        return set_error("sdr_qp_connect: this QP can send but the remote QP has receive disabled");
    if (r.rc != qp->rc)
        return set_error(std::string("sdr_qp_connect: transport differs (local ") + (qp->rc ? "RC" : "UC") +
                         ", remote " + (r.rc ? "RC" : "UC") +
                         "): create both QPs with the same SDR_USE_UC_QP or sdr_qp_attr_ext.transport");
    if (r.spray != qp->spray)
        return set_error(std::string("sdr_qp_connect: packet spraying differs (local ") + (qp->spray ? "on" : "off") +
                         ", remote " + (r.spray ? "on" : "off") + "): create both QPs with the same sdr_qp_attr_ext.spray");
    sdr::host::Device& dev = *qp->ctx->dev;
    // RC's retransmission timeout: twice the round trip the two ends' packet-lifetime bounds
    // allow, at least 1 ms (a software NIC's thread on a shared core stalls for that long).
    const uint64_t rtt_bound = std::min<uint64_t>(dev.max_packet_lifetime_ns(), SDR_MAX_LIFETIME_NS) + r.path_lifetime_ns;
    const uint64_t rc_timeout_ns = std::max<uint64_t>(2 * rtt_bound, 1'000'000);
    // Every backend's RC transport QPs retry 7 times (the IBTA's largest retry_cnt) after the
    // first send, each after rc_timeout_ns.
    constexpr uint64_t kRcSends = 1 + 7;
    if (qp->rc) qp->rc_resend_horizon_ns = kRcSends * rc_timeout_ns;
    for (uint32_t g = 0; g < qp->generations; g++)
        for (uint32_t c = 0; c < qp->channels; c++)
            if (!dev.qp_connect(qp->tq[g][c], r.addr, r.qpn[g][c], rc_timeout_ns))
                return sdr::host::device_error(dev, "sdr_qp_connect: the device refused to connect a transport QP");
    if (!dev.ctrl_qp_connect(qp->ctrl, r.addr, r.ctrl_qpn))
        return sdr::host::device_error(dev, "sdr_qp_connect: the device refused to connect the control QP");
    if (qp->tx) {
        // The peer's slot size and root keys, into the send state in NIC memory.
        const uint64_t slot_bytes = 1ull << r.slot_log;
        if (!dev.nic_write(&qp->tx->slot_bytes, &slot_bytes, sizeof slot_bytes) ||
            !dev.nic_write(&qp->tx->rkey[0], &r.rkey[0], sizeof r.rkey[0] * qp->generations))
            return sdr::host::device_error(dev, "sdr_qp_connect: the device did not take the peer's keys");
        qp->sends.resize(1u << r.log_slots);
    }
    // Our receives wait for the frames the peer sends: its bound counts too.
    if (qp->lifetime_from_path) qp->lifetime_ns = std::max(qp->lifetime_ns, r.path_lifetime_ns);
    qp->remote = r;
    qp->connected = true;
    return SDR_SUCCESS;
}

}  // extern "C"
