// libsdr's objects behind the opaque C handles.
#pragma once

#include <sdr.h>
#include <sdr/host/device.hpp>
#include <sdr_ext.h>
#include <sdr_mr.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

struct sdr_context {
    std::unique_ptr<sdr::host::Device> dev;
    uint32_t log_max_qps = 0;
    std::vector<sdr_qp*> qps;  // index = firmware QP index (part of every transport QP tag)
    uint32_t live_mrs = 0;
};

struct sdr_mr {
    sdr_context* ctx;
    uint32_t lkey;
};

struct sdr_recv_handle {
    sdr_qp* qp = nullptr;
    bool active = false;
    uint32_t slot = 0, generation = 0, msg_id = 0;
    uint32_t max_length = 0, nchunks = 0;
    uint64_t address = 0;
    uint32_t lkey = 0;
};

struct sdr_send_handle {
    sdr_qp* qp = nullptr;
    bool active = false;
    bool streaming = false;
    bool ended = false;
    enum sdr_wr_opcode opcode = SDR_WR_WRITE;
    uint32_t slot = 0, generation = 0, msg_id = 0, user_imm = 0;
    uint32_t frags_carried = 0;  // user-immediate fragments some packet already carries
    uint32_t last_wr = 0;        // send-ring position after this message's last request
};

struct QpInfo {  // the out-of-band blob, serialised little-endian by qp_info.cpp
    uint8_t mtu_log = 0, chunk_log = 0, slot_log = 0, log_slots = 0;
    uint8_t generations = 0, channels = 0, recv_enable = 0;
    uint8_t rc = 0;     // the transport QPs are RC (else UC)
    uint8_t spray = 0;  // they spray packets over UDP source ports (sdr_ext.h); a bit beside rc's
    fw_imm_layout imm{};
    sdr::host::PeerAddress addr;
    uint32_t rkey[FW_MAX_GENERATIONS] = {};
    uint32_t qpn[FW_MAX_GENERATIONS][FW_MAX_CHANNELS] = {};
    uint32_t ctrl_qpn = 0, ctrl_qkey = 0;  // the control QP (sdr_ctrl.h)
    uint64_t path_lifetime_ns = 0;         // the sender's bound on its frames' time to the peer
};
size_t qp_info_size();
void qp_info_write(const QpInfo& info, uint8_t* out);
// false + err if the blob is not one of ours
[[nodiscard]] bool qp_info_read(const uint8_t* in, QpInfo* info, std::string* err);

struct sdr_qp {
    sdr_context* ctx = nullptr;
    uint32_t index = 0;
    sdr_qp_attr attr{};
    fw_imm_layout imm{};
    uint32_t mtu_log = 0, chunk_log = 0, slot_log = 0, log_slots = 0, channels = 0;
    uint32_t generations = 0;                             // G (sdr_ext.h)
    bool rc = true;                                       // RC transport QPs, else UC (sdr_ext.h)
    bool spray = false;                                   // packet spraying (sdr_ext.h)
    uint32_t tq[FW_MAX_GENERATIONS][FW_MAX_CHANNELS] = {};  // transport QP handles
    uint32_t qpn[FW_MAX_GENERATIONS][FW_MAX_CHANNELS] = {};
    uint32_t root_rkey[FW_MAX_GENERATIONS] = {};
    uint32_t ctrl = 0, ctrl_qpn = 0, ctrl_qkey = 0;  // control QP handle, number, Q_Key

    // receive side
    fw_rx_qp* rx = nullptr;  // NIC memory: reached only through the device's operations
    void* rx_mem = nullptr;
    std::vector<uint64_t> rx_window;  // host memory the firmware writes: S x (bitmap + imm)
    uint32_t bitmap_words = 0;        // per slot: chunk-bitmap words, then the immediate word
    uint32_t slot_window_words = 0;
    std::vector<sdr_recv_handle> recvs;
    uint64_t recvs_posted = 0;
    // Maximum packet lifetime L: the quiet time of a (slot, generation) pair after the receive
    // that used it was completed. `lifetime_from_path`: L follows the devices' bound.
    uint64_t lifetime_ns = 0;
    bool lifetime_from_path = true;
    std::vector<uint64_t> quiet_until;  // per pair (slot * G + generation): device clock, ns
    // RC: how long after its first send the NIC may still resend a packet (every retry's
    // timeout), set at connect. A receive completed with chunks missing waits this much more.
    uint64_t rc_resend_horizon_ns = 0;

    // send side
    bool connected = false;
    QpInfo remote;
    fw_tx_qp* tx = nullptr;     // NIC memory: reached only through the device's operations
    fw_send_wr* ring = nullptr;  // NIC memory
    // Host words the firmware writes: [0] requests fully injected, [1] FW_TX_FAILED and the
    // ring position of the first request that failed (0: none).
    uint64_t tx_window[2] = {};
    std::vector<sdr_send_handle> sends;
    uint64_t sends_posted = 0;
    uint32_t wr_head = 0;
    // Bytes posted to the ring and not yet injected: each request's length is remembered until
    // the firmware retires it (wr_retired catches up with tx_window).
    uint64_t bytes_in_flight = 0;
    uint32_t wr_retired = 0;
    std::vector<uint32_t> wr_bytes;
};

namespace sdr::host {

// An enum field as the caller stored it. C callers may store any integer in an enum field;
// reading it as the enum type would be undefined behaviour for out-of-range values, so
// validation reads the raw bits.
template <class E>
inline int raw_enum(const E& e)
{
    static_assert(sizeof(E) == sizeof(int));
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

// Thread-local last error; set_error returns SDR_ERROR so call sites read `return set_error(..)`.
// Nothing clears it: a call that succeeds leaves the last failure's text, as errno (sdr.h).
int set_error(const std::string& msg);
// set_error(msg), followed by the device's reason when it gave one (an unfilled operation
// names itself and its backend).
int device_error(Device& dev, const std::string& msg);
// The reason for an SDR_RETRY, readable through sdr_last_error(); returns SDR_RETRY.
int set_retry(const std::string& msg);

inline constexpr uint32_t kSendRingSize = 4096;

// Extended attributes as a QP uses them (qp_ext.cpp).
struct ExtValues {
    uint32_t generations = 0;
    uint64_t lifetime_ns = 0;
    bool lifetime_from_path = true;
    bool rc = true;
    bool spray = false;
};
// Validates ext (NULL: defaults) and fills out; false + err names the bad field or variable.
[[nodiscard]] bool resolve_ext(const sdr_qp_attr_ext* ext, const Device& dev, ExtValues* out, std::string* err);

// Receive slot count S of a QP's receive side and the sender's view of the peer's.
inline uint32_t slots_of(uint32_t log_slots) { return 1u << log_slots; }

// Message n of a QP: its slot, 10-bit (or msg_bits) id and generation of G (see firmware/fw.h).
struct MessagePlace {
    uint32_t slot, msg_id, generation;
};
inline MessagePlace place_of(uint64_t n, uint32_t log_slots, uint32_t generations, const fw_imm_layout& imm)
{
    return MessagePlace{static_cast<uint32_t>(n & ((1ull << log_slots) - 1)),
                        static_cast<uint32_t>(n & ((1ull << imm.msg_bits) - 1)),
                        static_cast<uint32_t>((n >> log_slots) % generations)};
}

}  // namespace sdr::host
