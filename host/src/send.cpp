// Sends: one-shot and streaming messages, handed to the firmware as send work requests.
#include "internal.hpp"

using sdr::host::set_error;

namespace {

uint32_t all_frags(const sdr_qp* qp) { return (1u << fw_imm_num_frags(qp->imm)) - 1u; }

// Fragments of the user immediate carried by packets [first, first + n).
uint32_t frags_of(const sdr_qp* qp, uint64_t first, uint64_t n)
{
    uint32_t nf = fw_imm_num_frags(qp->imm);
    if (n >= nf) return all_frags(qp);
    uint32_t m = 0;
    for (uint64_t p = first; p < first + n; p++) m |= 1u << fw_imm_frag_index(qp->imm, static_cast<uint32_t>(p));
    return m;
}

uint32_t ring_free(const sdr_qp* qp)
{
    uint32_t done = static_cast<uint32_t>(__atomic_load_n(&qp->tx_window[0], __ATOMIC_ACQUIRE));
    return sdr::host::kSendRingSize - (qp->wr_head - done);
}

// Hand one request to the device (ring entry in NIC memory, head, doorbell); false + error if
// the device did not take it.
[[nodiscard]] bool post_wr(sdr_qp* qp, const sdr_send_handle& h, uint64_t local_addr, uint32_t lkey, uint32_t length,
                           uint32_t first_packet, uint32_t pad_frags)
{
    const uint32_t at = qp->wr_head & (sdr::host::kSendRingSize - 1);
    fw_send_wr wr{};
    wr.local_addr = local_addr;
    wr.lkey = lkey;
    wr.length = length;
    wr.first_packet = first_packet;
    wr.msg_id = h.msg_id;
    wr.generation = h.generation;
    wr.slot = h.slot;
    wr.user_imm = h.opcode == SDR_WR_WRITE_WITH_IMM ? h.user_imm : 0;
    wr.pad_frags = pad_frags;
    if (!qp->ctx->dev->send_post(qp->tx, qp->ring + at, wr, qp->wr_head + 1, qp->index)) return false;
    qp->wr_bytes[at] = length;
    qp->bytes_in_flight += length;
    qp->wr_head++;
    return true;
}

int send_failed(sdr_qp* qp, const char* fn)
{
    return sdr::host::device_error(*qp->ctx->dev, std::string(fn) + ": the device did not take the send request");
}

// Checks shared by every call that puts data on the wire.
int check_data(sdr_qp* qp, const char* fn, uint64_t local_addr, uint32_t lkey, uint32_t length,
               uint64_t remote_offset)
{
    uint64_t slot_bytes = 1ull << qp->remote.slot_log;
    uint64_t chunk = 1ull << qp->chunk_log;
    if (remote_offset >= (slot_bytes >> qp->chunk_log) && !(remote_offset == 0 && length == 0))
        return set_error(std::string(fn) + ": remote_offset " + std::to_string(remote_offset) +
                         " (in chunks) is beyond the remote slot of " + std::to_string(slot_bytes >> qp->chunk_log) + " chunks");
    if (remote_offset * chunk + length > slot_bytes)
        return set_error(std::string(fn) + ": remote_offset * chunk + length exceeds the remote slot size " +
                         std::to_string(slot_bytes));
    if (length && !qp->ctx->dev->mr_covers(lkey, local_addr, length))
        return set_error(std::string(fn) + ": [local_addr, local_addr + length) is not inside the memory region of lkey");
    return SDR_SUCCESS;
}

// The firmware's error word: the ring position of the first request that failed, if one did.
bool failed_at(const sdr_qp* qp, uint32_t* position)
{
    const uint64_t v = __atomic_load_n(&qp->tx_window[1], __ATOMIC_ACQUIRE);
    *position = static_cast<uint32_t>(v);
    return v & FW_TX_FAILED;
}

int check_qp(sdr_qp* qp, const char* fn)
{
    if (!qp->tx) return set_error(std::string(fn) + ": the QP was created with send_enable = 0");
    if (!qp->connected) return set_error(std::string(fn) + ": the QP is not connected");
    if (uint32_t at; failed_at(qp, &at))
        return set_error(std::string(fn) + ": the QP is in the error state: send request " + std::to_string(at) +
                         " failed (sdr_send_poll said so); destroy the QP and connect a new one");
    return SDR_SUCCESS;
}

// Claim the next message of the QP (order-based matching); RETRY if its slot is still busy.
int start_message(sdr_qp* qp, enum sdr_wr_opcode opcode, uint32_t imm, bool streaming, sdr_send_handle** out)
{
    auto place = sdr::host::place_of(qp->sends_posted, qp->remote.log_slots, qp->generations, qp->imm);
    sdr_send_handle& h = qp->sends[place.slot];
    if (h.active) return SDR_RETRY;  // S messages outstanding: poll earlier sends first
    h = sdr_send_handle{};
    h.qp = qp;
    h.active = true;
    h.streaming = streaming;
    h.opcode = opcode;
    h.user_imm = imm;
    h.slot = place.slot;
    h.msg_id = place.msg_id;
    h.generation = place.generation;
    qp->sends_posted++;
    *out = &h;
    return SDR_SUCCESS;
}

bool opcode_ok(const enum sdr_wr_opcode& op)
{
    int v = sdr::host::raw_enum(op);
    return v == SDR_WR_WRITE || v == SDR_WR_WRITE_WITH_IMM;
}

// Release the bytes of requests the firmware has fully injected.
void retire(sdr_qp* qp)
{
    uint32_t done = static_cast<uint32_t>(__atomic_load_n(&qp->tx_window[0], __ATOMIC_ACQUIRE));
    for (; qp->wr_retired != done; qp->wr_retired++)
        qp->bytes_in_flight -= qp->wr_bytes[qp->wr_retired & (sdr::host::kSendRingSize - 1)];
}

bool in_flight_ok(sdr_qp* qp, uint64_t more)
{
    retire(qp);
    return qp->bytes_in_flight + more <= (1ull << qp->attr.max_in_flight_log_bytes);
}

// Zero-length packets for the fragments no data packet carried (messages of < 8 packets).
[[nodiscard]] bool end_message(sdr_qp* qp, sdr_send_handle& h)
{
    uint32_t pad = h.opcode == SDR_WR_WRITE_WITH_IMM ? all_frags(qp) & ~h.frags_carried : 0;
    if (pad && !post_wr(qp, h, 0, 0, 0, 0, pad)) return false;
    h.ended = true;
    h.last_wr = qp->wr_head;
    return true;
}

}  // namespace

extern "C" {

int sdr_send_post(sdr_qp* qp, sdr_send_wr* wr, sdr_send_handle** handle)
{
    if (!qp || !wr || !handle) return set_error("sdr_send_post: qp, wr or handle is NULL");
    if (int rc = check_qp(qp, "sdr_send_post")) return rc;
    if (!opcode_ok(wr->opcode)) return set_error("sdr_send_post: opcode is not an sdr_wr_opcode value");
    if (int rc = check_data(qp, "sdr_send_post", wr->local_addr, wr->lkey, wr->length, wr->remote_offset)) return rc;
    if (!in_flight_ok(qp, wr->length)) {
        if (wr->length > (1ull << qp->attr.max_in_flight_log_bytes))
            return set_error("sdr_send_post: length exceeds 2^max_in_flight_log_bytes");
        return SDR_RETRY;
    }
    if (ring_free(qp) < 2) return SDR_RETRY;
    sdr_send_handle* h;
    if (start_message(qp, wr->opcode, wr->imm_value, false, &h) != SDR_SUCCESS) return SDR_RETRY;
    uint32_t first = static_cast<uint32_t>(wr->remote_offset << (qp->chunk_log - qp->mtu_log));
    uint64_t npk = (uint64_t{wr->length} + (1ull << qp->mtu_log) - 1) >> qp->mtu_log;
    const uint32_t head = qp->wr_head;
    if ((wr->length && !post_wr(qp, *h, wr->local_addr, wr->lkey, wr->length, first, 0)) ||
        (h->frags_carried = frags_of(qp, first, npk), !end_message(qp, *h))) {
        if (qp->wr_head == head) {  // nothing reached the device: the message was never started
            h->active = false;
            qp->sends_posted--;
        }
        return send_failed(qp, "sdr_send_post");
    }
    *handle = h;
    return SDR_SUCCESS;
}

int sdr_streaming_send_start(sdr_qp* qp, sdr_send_start_wr* wr, sdr_send_handle** handle)
{
    if (!qp || !wr || !handle) return set_error("sdr_streaming_send_start: qp, wr or handle is NULL");
    if (int rc = check_qp(qp, "sdr_streaming_send_start")) return rc;
    if (!opcode_ok(wr->opcode)) return set_error("sdr_streaming_send_start: opcode is not an sdr_wr_opcode value");
    return start_message(qp, wr->opcode, wr->imm_value, true, handle);
}

int sdr_streaming_send_continue(sdr_send_handle* h, sdr_send_continue_wr* wr)
{
    if (!h || !wr) return set_error("sdr_streaming_send_continue: handle or wr is NULL");
    if (!h->active || !h->streaming || h->ended)
        return set_error("sdr_streaming_send_continue: handle is not an open streaming send");
    sdr_qp* qp = h->qp;
    if (int rc = check_data(qp, "sdr_streaming_send_continue", wr->local_addr, wr->lkey, wr->length, wr->remote_offset))
        return rc;
    if (wr->length == 0) return SDR_SUCCESS;
    // Extension: RETRY (rather than failing) when the send ring or the in-flight budget is full.
    if (!in_flight_ok(qp, wr->length) || ring_free(qp) < 2) return SDR_RETRY;
    uint32_t first = static_cast<uint32_t>(wr->remote_offset << (qp->chunk_log - qp->mtu_log));
    uint64_t npk = (uint64_t{wr->length} + (1ull << qp->mtu_log) - 1) >> qp->mtu_log;
    if (!post_wr(qp, *h, wr->local_addr, wr->lkey, wr->length, first, 0))
        return send_failed(qp, "sdr_streaming_send_continue");
    h->frags_carried |= frags_of(qp, first, npk);
    return SDR_SUCCESS;
}

int sdr_streaming_send_end(sdr_send_handle* h)
{
    if (!h) return set_error("sdr_streaming_send_end: handle is NULL");
    if (!h->active || !h->streaming || h->ended)
        return set_error("sdr_streaming_send_end: handle is not an open streaming send");
    if (ring_free(h->qp) < 1) return SDR_RETRY;
    if (!end_message(h->qp, *h)) return send_failed(h->qp, "sdr_streaming_send_end");
    return SDR_SUCCESS;
}

int sdr_qp_send_progress(sdr_qp* qp, uint32_t* posted, uint32_t* injected)
{
    if (!qp || !posted || !injected) return set_error("sdr_qp_send_progress: qp, posted or injected is NULL");
    if (int rc = check_qp(qp, "sdr_qp_send_progress")) return rc;
    // A read: unlike sdr_send_poll it does not progress the device (on the simulator that would
    // run events inside the caller's own step).
    *posted = qp->wr_head;
    *injected = static_cast<uint32_t>(__atomic_load_n(&qp->tx_window[0], __ATOMIC_ACQUIRE));
    return SDR_SUCCESS;
}

int sdr_send_poll(sdr_send_handle* h, int* completed, sdr_send_status* status)
{
    if (!completed) return set_error("sdr_send_poll: completed_flag is NULL");
    if (!h || !h->active) return set_error("sdr_send_poll: handle is NULL or already completed");
    sdr_qp* qp = h->qp;
    for (int attempt = 0; attempt < 2; attempt++) {
        uint32_t done = static_cast<uint32_t>(__atomic_load_n(&qp->tx_window[0], __ATOMIC_ACQUIRE));
        // ring positions wrap at 2^32: compare by signed distance
        if (h->ended && static_cast<int32_t>(done - h->last_wr) >= 0) {
            retire(qp);
            h->active = false;
            *completed = 1;
            // Word 1 is written before word 0 passes the failed request: read after it, it is
            // current. The handle failed if its last request is at or after the first failed.
            uint32_t at;
            const bool failed = failed_at(qp, &at) && static_cast<int32_t>(h->last_wr - at) > 0;
            if (status) status->flags = failed ? SDR_SEND_STATUS_FAILED : 0;
            if (failed)
                return set_error("sdr_send_poll: the send was not delivered: a packet of it completed in error "
                                 "(RC retries exhausted, or the peer refused it; the NIC counters say which); the "
                                 "QP is in the error state");
            return SDR_SUCCESS;
        }
        if (attempt == 0) qp->ctx->dev->progress();
    }
    *completed = 0;
    return SDR_RETRY;
}

}  // extern "C"
