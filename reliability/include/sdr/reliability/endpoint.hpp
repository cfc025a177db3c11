// The binding of the sans-I/O engines to the SDR C API: one Endpoint per SDR QP, sending and
// receiving reliable messages with the configured scheme. It posts SDR sends and receives,
// reads live bitmaps, encodes and decodes EC chunks, and carries control messages over the
// QP's control channel (sdr_ctrl.h). Applications call progress() in their poll loop; drive()
// runs endpoints on the simulator, sleeping in virtual time between events.
#pragma once

#include <sdr.h>
#include <sdr_mr.h>
#include <sdr/reliability/scheme.hpp>
#include <sdr/reliability/config.hpp>
#include <sdr/reliability/engine.hpp>
#include <sdr/reliability/policy.hpp>
#include <sdr/reliability/region.hpp>

#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace sdr::rel {

class Endpoint {
public:
    // qp must be connected and created with send_enable and recv_enable; attr is what it was
    // created with (chunk size, MTU and slot size come from it). nullptr + err on bad config.
    [[nodiscard]] static std::unique_ptr<Endpoint> create(sdr_context* ctx, sdr_qp* qp, const sdr_qp_attr& attr,
                                            const Config& cfg, std::string* err);
    ~Endpoint();
    Endpoint(const Endpoint&) = delete;
    Endpoint& operator=(const Endpoint&) = delete;

    // Post a reliable send / receive of len bytes in [buf, buf + len) registered as lkey. The
    // n-th send of one side lands in the n-th receive of the other; lengths must match.
    // SDR_SUCCESS + *id, or SDR_ERROR (last_error() says why) and nothing posted.
    [[nodiscard]] int send(const void* buf, uint64_t len, uint32_t lkey, uint64_t* id);
    [[nodiscard]] int recv(void* buf, uint64_t len, uint32_t lkey, uint64_t* id);
    // SDR_SUCCESS and *out once the message is over (out->ok says how), SDR_RETRY while it
    // is in progress, SDR_ERROR for an unknown id. A finished id is forgotten after this.
    [[nodiscard]] int send_result(uint64_t id, MessageStats* out);
    [[nodiscard]] int recv_result(uint64_t id, MessageStats* out);

    // Do everything due now; returns the next deadline (sdr_now_ns clock), kNever if none.
    uint64_t progress();
    // Nothing posted is unfinished.
    bool idle() const;
    const Config& config() const { return cfg_; }
    double srtt_ms() const { return tx_.srtt_ns() / 1e6; }
    // What auto's receiver goes by: the RTT (this endpoint's own sends' SRTT once measured,
    // else the configured one), the configured bandwidth, and the drop rate it has measured.
    PathEstimate path_estimate() const;
    // The measured RTT and delivery rate the timers go by (the configured ones until measured).
    PathState path_state() const;
    // Chunk transmissions the drop estimate rests on (0: it is still the configured hint).
    uint64_t drop_samples() const { return rx_.drops().judged(); }

private:
    struct TxState {
        const uint8_t* buf = nullptr;
        uint64_t len = 0;
        uint32_t lkey = 0;
        sdr_send_handle *data = nullptr, *parity = nullptr;
        bool opened = false, ended = false, data_done = false, parity_done = false;
        Region parity_buf;
        sdr_mr* parity_mr = nullptr;
        std::optional<MessageStats> result;
    };
    struct RxState {
        uint8_t* buf = nullptr;
        uint64_t len = 0;
        uint32_t lkey = 0;
        Code code;
        sdr_recv_handle *data = nullptr, *parity = nullptr;
        uint8_t *data_bits = nullptr, *parity_bits = nullptr;
        bool posted = false;
        Region parity_buf;
        sdr_mr* parity_mr = nullptr;
        std::optional<MessageStats> result;
    };

    Endpoint(sdr_context* ctx, sdr_qp* qp, const Config& cfg, const Geometry& g);
    int check_post(const char* what, const void* buf, uint64_t len, const uint64_t* id, const Code& code) const;
    void execute(Action& a);
    [[nodiscard]] bool try_start(Action& a, std::string* error);
    [[nodiscard]] bool try_data(Action& a);
    [[nodiscard]] bool try_parity(Action& a);
    [[nodiscard]] bool try_close(TxState& t);
    [[nodiscard]] bool try_post(uint64_t seq);
    void rebuild(uint64_t seq, uint32_t sub);
    void deliver(const Action& a);
    void drain_actions(uint64_t now);
    void note_posted(const Action& a);
    void check_injected(uint64_t now);
    sdr_mr* reg(Region& buf, uint64_t bytes, const char* what);
    Coder& coder(const Code& c);
    static constexpr uint32_t kEncoded = 1u << 31;  // Parity action: its chunks are encoded
    uint64_t chunk_len(uint64_t len, uint32_t c) const;

    sdr_context* ctx_;
    sdr_qp* qp_;
    Config cfg_;
    Geometry geo_;
    SendEngine tx_;
    RecvEngine rx_;
    std::map<std::tuple<Scheme, uint32_t, uint32_t>, std::unique_ptr<Coder>> coders_;  // per code met, made on first use
    std::map<uint64_t, TxState> txs_;
    std::map<uint64_t, RxState> rxs_;
    std::vector<uint64_t> active_;  // progress(): the receives whose bitmaps it reads
    std::vector<CtrlMsg> ctrl_in_;  // progress(): the control messages it took
    // Data and parity handed to the QP, oldest first, each with the QP's send-request count
    // once it was posted: sdr_qp_send_progress says when each has left the NIC.
    struct Posted {
        uint32_t wr;
        Action::Kind kind;
        uint64_t seq;
        uint32_t first, count;
    };
    std::deque<Posted> posted_;
    // progress() has nothing to do before quiet_until_ (0: unknown) while the device's host
    // event count is still seen_events_ (sdr_host_events).
    uint64_t seen_events_ = 0, quiet_until_ = 0;
    std::deque<Action> start_q_, data_q_, post_q_, ctrl_q_;
    std::vector<uint64_t> closing_;
    std::vector<uint8_t> zero_, scratch_;
};

// Thread-local text of the last SDR_ERROR returned by this room (sdr_rel_last_error in C).
const char* last_error();

// Run endpoints of one simulated fabric until done() holds: progress each, then sleep in
// virtual time (sdr_sim_wait) until the earliest deadline or host-visible event. false if
// nothing can happen any more (no deadline, no event pending) or virtual time passes
// limit_ns before done().
[[nodiscard]] bool drive(sdr_context* ctx, std::initializer_list<Endpoint*> eps, const std::function<bool()>& done,
           uint64_t limit_ns = kNever);

}  // namespace sdr::rel
