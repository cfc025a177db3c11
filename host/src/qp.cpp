// SDR QPs: G generations x C channels of transport QPs, a root key per generation, and the
// firmware's receive and send state in NIC memory.
#include <algorithm>
#include <cstring>

#include "internal.hpp"

#include <sdr/emu/wire.hpp>

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

// Give back to the device what the QP holds (a handle that failed to be created is kInvalid,
// a root key 0), then the QP itself: sdr_qp_destroy, and sdr_qp_create's failure paths.
void release(sdr_qp* qp)
{
    sdr::host::Device& dev = *qp->ctx->dev;
    for (uint32_t g = 0; g < qp->generations; g++) {
        for (uint32_t c = 0; c < qp->channels; c++)
            if (qp->tq[g][c] != sdr::host::Device::kInvalid) dev.qp_destroy(qp->tq[g][c]);
        if (qp->root_rkey[g]) dev.root_key_destroy(qp->root_rkey[g]);
    }
    if (qp->ctrl != sdr::host::Device::kInvalid) dev.ctrl_qp_destroy(qp->ctrl);
    dev.nic_free(qp->rx);
    dev.nic_free(qp->rx_mem);
    dev.nic_free(qp->tx);
    dev.nic_free(qp->ring);
    delete qp;
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
    // fit would lose every one of them.
    const uint32_t cap = ctx->dev->max_frame_bytes();
    auto frame = [](int mtu) { return sdr::emu::wire::frame_bytes_write_imm(size_t{64} << mtu); };
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
    sdr::host::Device& dev = *ctx->dev;
    uint32_t nslots = 1u << qp->log_slots;

    for (uint32_t g = 0; g < qp->generations; g++) {
        if (attr->recv_enable) qp->root_rkey[g] = dev.root_key_create(nslots, 1ull << qp->slot_log);
        for (uint32_t c = 0; c < qp->channels; c++) {
            qp->tq[g][c] = dev.qp_create(fw_qp_tag(index, g, c), c, &qp->qpn[g][c]);
            if (attr->recv_enable) dev.qp_bind_root_key(qp->tq[g][c], qp->root_rkey[g]);
        }
    }
    qp->ctrl = dev.ctrl_qp_create(&qp->ctrl_qpn, &qp->ctrl_qkey);
    bool created = qp->ctrl != sdr::host::Device::kInvalid;
    for (uint32_t g = 0; g < qp->generations; g++) {
        if (attr->recv_enable && !qp->root_rkey[g]) created = false;
        for (uint32_t c = 0; c < qp->channels; c++) created &= qp->tq[g][c] != sdr::host::Device::kInvalid;
    }
    if (!created) {
        release(qp);
        return set_error("sdr_qp_create: the device has no transport QP, control QP or root key left for " +
                         n2s(qp->generations) + " generations x " + n2s(qp->channels) + " channels"),
               nullptr;
    }
    fw_qp fq{nullptr, nullptr};
    if (attr->recv_enable) {
        uint32_t max_packets = 1u << (qp->slot_log - qp->mtu_log);
        uint32_t log_ppc = qp->chunk_log - qp->mtu_log;
        uint64_t mem = fw_rx_qp_mem_bytes(nslots, max_packets, log_ppc);
        qp->rx = static_cast<fw_rx_qp*>(dev.nic_alloc(sizeof(fw_rx_qp)));
        qp->rx_mem = dev.nic_alloc(mem);
        if (!qp->rx || !qp->rx_mem) {
            release(qp);
            return set_error("sdr_qp_create: out of NIC memory for " + n2s(mem) + " bytes of slot state"), nullptr;
        }
        uint32_t nchunks_max = 1u << (qp->slot_log - qp->chunk_log);
        uint64_t words_per_slot = (nchunks_max + 63) / 64 + 1;
        qp->rx_window.assign(nslots * words_per_slot, 0);
        hal_window win{reinterpret_cast<uint64_t>(qp->rx_window.data()), qp->rx_window.size()};
        fw_rx_qp_init(qp->rx, qp->rx_mem, imm, nslots, max_packets, log_ppc, qp->mtu_log, qp->generations, win);
        qp->recvs.resize(nslots);
        qp->quiet_until.assign(size_t{nslots} * qp->generations, 0);
        fq.rx = qp->rx;
    }
    if (attr->send_enable) {
        qp->tx = static_cast<fw_tx_qp*>(dev.nic_alloc(sizeof(fw_tx_qp)));
        qp->ring = static_cast<fw_send_wr*>(dev.nic_alloc(sizeof(fw_send_wr) * sdr::host::kSendRingSize));
        qp->tx->imm = imm;
        qp->tx->mtu_log = qp->mtu_log;
        qp->tx->num_channels = qp->channels;
        qp->tx->index = index;
        qp->tx->rate_mbps = attr->rate_limit;
        qp->tx->ring = qp->ring;
        qp->tx->ring_mask = sdr::host::kSendRingSize - 1;
        qp->tx->window = hal_window{reinterpret_cast<uint64_t>(&qp->tx_window), 1};
        qp->wr_bytes.assign(sdr::host::kSendRingSize, 0);
        qp->tx->num_generations = qp->generations;
        for (uint32_t g = 0; g < qp->generations; g++)
            for (uint32_t c = 0; c < qp->channels; c++) qp->tx->channel_qp[g][c] = qp->tq[g][c];
        fq.tx = qp->tx;
    }
    {
        sdr::host::NicGuard g(dev);
        dev.firmware()->qps[index] = fq;
    }
    if (ctx->qps.size() <= index) ctx->qps.resize(index + 1, nullptr);
    ctx->qps[index] = qp;
    return qp;
}

int sdr_qp_destroy(sdr_qp* qp)
{
    if (!qp) return set_error("sdr_qp_destroy: qp is NULL");
    sdr::host::Device& dev = *qp->ctx->dev;
    {
        sdr::host::NicGuard g(dev);
        dev.drain_handlers();  // a worker thread may still run a receive CQE of this QP
        dev.firmware()->qps[qp->index] = fw_qp{nullptr, nullptr};
    }
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
    sdr::host::Device& dev = *qp->ctx->dev;
    for (uint32_t g = 0; g < qp->generations; g++)
        for (uint32_t c = 0; c < qp->channels; c++)
            if (!dev.qp_connect(qp->tq[g][c], r.addr, r.qpn[g][c]))
                return set_error("sdr_qp_connect: the device refused to connect a transport QP");
    if (!dev.ctrl_qp_connect(qp->ctrl, r.addr, r.ctrl_qpn))
        return set_error("sdr_qp_connect: the device refused to connect the control QP");
    if (qp->tx) {
        qp->tx->slot_bytes = 1ull << r.slot_log;
        for (uint32_t g = 0; g < qp->generations; g++) qp->tx->rkey[g] = r.rkey[g];
        qp->sends.resize(1u << r.log_slots);
    }
    // Our receives wait for the frames the peer sends: its bound counts too.
    if (qp->lifetime_from_path) qp->lifetime_ns = std::max(qp->lifetime_ns, r.path_lifetime_ns);
    qp->remote = r;
    qp->connected = true;
    return SDR_SUCCESS;
}

}  // extern "C"
