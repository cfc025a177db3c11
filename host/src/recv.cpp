// Receives: order-based matching into message slots, the live chunk bitmap, immediates.
#include "internal.hpp"

#include <algorithm>

using sdr::host::set_error;

namespace {

uint64_t* slot_words(sdr_qp* qp, uint32_t slot)
{
    return qp->rx_window.data() + static_cast<uint64_t>(slot) * qp->slot_window_words;
}

// Every chunk bit of the receive is set.
bool all_chunks(const sdr_recv_handle* h)
{
    const uint64_t* w = slot_words(h->qp, h->slot);
    for (uint32_t c = 0; c < h->nchunks; c += 64) {
        const uint32_t n = std::min<uint32_t>(64, h->nchunks - c);
        const uint64_t want = n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
        if ((__atomic_load_n(&w[c / 64], __ATOMIC_ACQUIRE) & want) != want) return false;
    }
    return true;
}

bool live(const sdr_recv_handle* h) { return h && h->qp && h->active; }

}  // namespace

extern "C" {

int sdr_recv_post(sdr_qp* qp, sdr_recv_wr* wr, sdr_recv_handle** handle)
{
    if (!qp || !wr || !handle) return set_error("sdr_recv_post: qp, wr or handle is NULL");
    if (!qp->rx) return set_error("sdr_recv_post: the QP was created with recv_enable = 0");
    uint64_t slot_bytes = 1ull << qp->slot_log;
    if (wr->max_length > slot_bytes)
        return set_error("sdr_recv_post: max_length " + std::to_string(wr->max_length) + " exceeds the slot size " +
                         std::to_string(slot_bytes) + " (2^(max_in_flight_log_bytes - max_log_num_msgs))");
    if (wr->max_length && !qp->ctx->dev->mr_covers(wr->lkey, wr->address, wr->max_length))
        return set_error("sdr_recv_post: [address, address + max_length) is not inside the memory region of lkey");
    auto place = sdr::host::place_of(qp->recvs_posted, qp->log_slots, qp->generations, qp->imm);
    sdr_recv_handle& h = qp->recvs[place.slot];
    if (h.active)
        return sdr::host::set_retry("sdr_recv_post: slot " + std::to_string(place.slot) +
                                    " still holds the receive posted " + std::to_string(1u << qp->log_slots) +
                                    " messages earlier: complete it first");
    // TIME_WAIT: the pair stays on the NULL key until no packet of its previous message can
    // still be in flight.
    sdr::host::Device& dev = *qp->ctx->dev;
    const uint64_t until = qp->quiet_until[size_t{place.slot} * qp->generations + place.generation];
    if (until) {
        if (uint64_t now = dev.now_ns(); now < until)
            return sdr::host::set_retry(
                "sdr_recv_post: slot " + std::to_string(place.slot) + ", generation " + std::to_string(place.generation) +
                " is quiet for another " + std::to_string(until - now) + " ns (until " + std::to_string(until) +
                " ns): its previous receive was completed less than the maximum packet lifetime of " +
                std::to_string(qp->lifetime_ns) + " ns ago, and a packet of it may still arrive");
        dev.run_due();  // what arrived before now is placed (on the NULL key) before the re-arm
    }
    if (wr->max_length &&
        !dev.root_key_set(qp->root_rkey[place.generation], place.slot, wr->lkey, wr->address, wr->max_length))
        return sdr::host::device_error(dev, "sdr_recv_post: the device refused the root-key entry");
    if (!dev.rx_slot_arm(qp->rx, place.slot, place.generation, place.msg_id, wr->max_length,
                         slot_words(qp, place.slot), qp->slot_window_words)) {
        const int rc = sdr::host::device_error(dev, "sdr_recv_post: the device did not arm the slot");
        if (wr->max_length) (void)dev.root_key_null(qp->root_rkey[place.generation], place.slot);  // undo
        return rc;
    }
    h = sdr_recv_handle{};
    h.qp = qp;
    h.active = true;
    h.slot = place.slot;
    h.generation = place.generation;
    h.msg_id = place.msg_id;
    h.max_length = wr->max_length;
    h.nchunks = static_cast<uint32_t>((uint64_t{wr->max_length} + (1ull << qp->chunk_log) - 1) >> qp->chunk_log);
    h.address = wr->address;
    h.lkey = wr->lkey;
    qp->recvs_posted++;
    *handle = &h;
    return SDR_SUCCESS;
}

int sdr_recv_imm_get(sdr_recv_handle* h, uint32_t* immediate)
{
    if (!immediate) return set_error("sdr_recv_imm_get: immediate is NULL");
    if (!live(h)) return set_error("sdr_recv_imm_get: handle is NULL or already completed");
    const uint64_t* word = slot_words(h->qp, h->slot) + h->qp->bitmap_words;
    for (int attempt = 0; attempt < 2; attempt++) {
        uint64_t v = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        if (v & FW_IMM_VALID) {
            *immediate = static_cast<uint32_t>(v);
            return SDR_SUCCESS;
        }
        if (attempt == 0) h->qp->ctx->dev->progress();
    }
    return SDR_RETRY;
}

int sdr_recv_bitmap_get(sdr_recv_handle* h, uint8_t** bytes, size_t* nbytes)
{
    if (!bytes || !nbytes) return set_error("sdr_recv_bitmap_get: bitmap_bytes or bitmap_num_bytes is NULL");
    if (!live(h)) return set_error("sdr_recv_bitmap_get: handle is NULL or already completed");
    h->qp->ctx->dev->progress();
    // Little-endian words: chunk i is bit (i % 8) of byte i / 8.
    *bytes = reinterpret_cast<uint8_t*>(slot_words(h->qp, h->slot));
    *nbytes = (h->nchunks + 7) / 8;
    return SDR_SUCCESS;
}

int sdr_recv_bitmap_chunk_expand(sdr_recv_handle* h, uint32_t chunk, uint64_t* bitmap)
{
    if (!bitmap) return set_error("sdr_recv_bitmap_chunk_expand: bitmap is NULL");
    if (!live(h)) return set_error("sdr_recv_bitmap_chunk_expand: handle is NULL or already completed");
    if (chunk >= h->nchunks)
        return set_error("sdr_recv_bitmap_chunk_expand: chunk " + std::to_string(chunk) + " is beyond the receive's " +
                         std::to_string(h->nchunks) + " chunks");
    sdr::host::Device& dev = *h->qp->ctx->dev;
    dev.progress();
    uint32_t ppc = 1u << (h->qp->chunk_log - h->qp->mtu_log);
    if (!dev.rx_chunk_expand(h->qp->rx, h->slot, chunk, bitmap, (ppc + 63) / 64))
        return sdr::host::device_error(dev, "sdr_recv_bitmap_chunk_expand: the device did not read the chunk");
    return SDR_SUCCESS;
}

int sdr_recv_complete(sdr_recv_handle* h)
{
    if (!live(h)) return set_error("sdr_recv_complete: handle is NULL or already completed");
    sdr_qp* qp = h->qp;
    // NULL key first: from here no late packet of this message can touch the buffer, and the
    // pair stays there for the maximum packet lifetime (sdr_recv_post).
    sdr::host::Device& dev = *qp->ctx->dev;
    if (!dev.root_key_null(qp->root_rkey[h->generation], h->slot))
        return sdr::host::device_error(dev, "sdr_recv_complete: the device did not NULL the root-key entry");
    // Over RC on a responder that places a packet once (a resent one is a duplicate), a
    // complete receive has nothing late to wait for: the pair re-arms at once, and a program
    // that reposts into the slot it just completed (the published SDK's benchmark, with one
    // generation) is not held to one message per lifetime. A receive completed with chunks
    // missing may still get them, resent, for as long as the sender's NIC retries.
    // Only RC asks whether every chunk is in: over UC the bitmap is not scanned.
    const bool rc_whole = qp->rc && all_chunks(h);
    uint64_t& until = qp->quiet_until[size_t{h->slot} * qp->generations + h->generation];
    if (rc_whole && dev.rc_places_once())
        until = 0;
    else if (qp->lifetime_ns)
        until = dev.now_ns() + qp->lifetime_ns + (qp->rc && !rc_whole ? qp->rc_resend_horizon_ns : 0);
    if (!dev.rx_slot_disarm(qp->rx, h->slot))
        return sdr::host::device_error(dev, "sdr_recv_complete: the device did not disarm the slot");
    h->active = false;
    return SDR_SUCCESS;
}

}  // extern "C"
