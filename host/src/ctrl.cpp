// The control channel of an SDR QP: datagrams over the QP's control QP (sdr_ctrl.h).
#include <sdr_ctrl.h>

#include "internal.hpp"

using sdr::host::set_error;

extern "C" {

int sdr_ctrl_max_size_get(sdr_qp* qp, size_t* max_size)
{
    if (!qp || !max_size) return set_error("sdr_ctrl_max_size_get: qp or max_size is NULL");
    *max_size = qp->ctx->dev->ctrl_max_bytes();
    return SDR_SUCCESS;
}

int sdr_ctrl_send(sdr_qp* qp, const void* buf, size_t len)
{
    if (!qp || (!buf && len)) return set_error("sdr_ctrl_send: qp or buf is NULL");
    if (!qp->connected) return set_error("sdr_ctrl_send: the QP is not connected");
    sdr::host::Device& dev = *qp->ctx->dev;
    if (len > dev.ctrl_max_bytes())
        return set_error("sdr_ctrl_send: " + std::to_string(len) + " bytes exceed the control datagram maximum of " +
                         std::to_string(dev.ctrl_max_bytes()));
    if (!dev.ctrl_send(qp->ctrl, qp->remote.addr, qp->remote.ctrl_qpn, qp->remote.ctrl_qkey, buf,
                       static_cast<uint32_t>(len))) {
        // A full send queue is a retry; an operation the backend does not provide is an error.
        if (std::string why = dev.take_failure(); !why.empty()) return set_error("sdr_ctrl_send: " + why);
        return SDR_RETRY;
    }
    return SDR_SUCCESS;
}

int sdr_ctrl_recv(sdr_qp* qp, void* buf, size_t cap, size_t* len)
{
    if (!qp || !len || (!buf && cap)) return set_error("sdr_ctrl_recv: qp, buf or len is NULL");
    sdr::host::Device& dev = *qp->ctx->dev;
    int64_t n = dev.ctrl_recv(qp->ctrl, buf, cap);
    if (n < -1) return sdr::host::device_error(dev, "sdr_ctrl_recv: the device did not read the control QP");
    if (n < 0) return set_error("sdr_ctrl_recv: the waiting datagram is larger than cap (" + std::to_string(cap) + " bytes)");
    if (n == 0) return SDR_RETRY;
    *len = static_cast<size_t>(n);
    return SDR_SUCCESS;
}

}  // extern "C"
