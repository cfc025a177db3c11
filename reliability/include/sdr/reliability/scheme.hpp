// A reliability scheme as one struct of operations, in the style of ngtcp2's congestion
// controllers (ngtcp2_cc): the engines and the binding hold a message's Code and call through
// its SchemeOps; none of them branches on which scheme it is. One file per scheme in
// reliability/src/schemes/, one line per scheme in the registry (sdr_rel_schemes.def).
#pragma once

#include <sdr/reliability/config.hpp>
#include <sdr/reliability/model.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sdr::rel {

struct SchemeEstimate;  // policy.hpp

// How a scheme recovers what the network lost.
enum class Repair : uint8_t {
    Timer,      // per-chunk retransmission timer (RTO) only
    NameHoles,  // the receiver names holes behind later arrivals; the RTO stays as the backup
    Code,       // k data + parity chunks per submessage; after the fallback timeout the receiver
                // asks for more (repair_request) and at last names the data chunks still missing
};

// Encode and rebuild hooks of a coded scheme: one submessage of k data chunks, len bytes each.
class Coder {
public:
    virtual ~Coder() = default;
    // Parity chunks [from, from + count) of submessage `sub` into parity[0..count).
    virtual void encode(uint32_t sub, const uint8_t* const* data, uint8_t* const* parity, uint32_t from,
                        uint32_t count, size_t len) = 0;
    // present: k + parity_slots flags (data, then parity); frag the chunks in the same order.
    // Rebuilds every missing data chunk of submessage `sub` in place; false if it cannot.
    [[nodiscard]] virtual bool decode(uint32_t sub, const bool* present, uint8_t* const* frag, size_t len) = 0;
};

// What the receiver holds of one submessage (the engines' bit-per-chunk words).
struct SubmessageView {
    uint32_t k = 0, n = 0;                // code's k; data chunks in this submessage (the last may be short)
    uint32_t data_held = 0, parity_held = 0;
    const uint64_t* have = nullptr;       // data chunk bits of the message
    uint32_t first = 0;                   // the submessage's first data chunk
    const uint64_t* parity_have = nullptr;
    uint32_t first_parity = 0;            // its first parity chunk in the parity message
    uint32_t parity_slots = 0;            // parity chunks per submessage in the layout
    uint32_t index = 0;                   // submessage number
    bool data(uint32_t j) const { return (have[(first + j) >> 6] >> ((first + j) & 63)) & 1; }
    bool parity(uint32_t i) const
    {
        return (parity_have[(first_parity + i) >> 6] >> ((first_parity + i) & 63)) & 1;
    }
};

// How a model's mean relates to what the protocol does (sdr_sweep's model_kind).
enum class ModelFit : uint8_t {
    Exact,       // the protocol's mean, where the model's assumptions hold
    LowerBound,  // the protocol takes at least this long
    Approx,      // an approximation
};
struct ModelMean {
    double s;  // seconds
    ModelFit fit;
};

struct SchemeOps {
    Scheme id;              // its line of the registry: wire id and name
    bool takes_params;      // written name:k,m
    Repair repair;
    // k, m acceptable (schemes that take parameters); false + err otherwise.
    bool (*valid)(uint32_t k, uint32_t m, std::string* err);
    // Parity chunks each submessage reserves in the parity message; 0: the scheme sends data only.
    uint32_t (*parity_slots)(const Code& c);
    // Parity chunks the sender injects with each submessage (before any repair request).
    uint32_t (*parity_first)(const Code& c);
    // Receiver: can the missing data chunks of this submessage be rebuilt from what is held?
    bool (*decodable)(const Code& c, const SubmessageView& v);
    // Binding: the coder of a code (encode after a submessage's data is queued, rebuild on Decode).
    std::unique_ptr<Coder> (*coder)(const Code& c);
    // auto: the model's candidates of this scheme (mean and p99.9); nullptr: auto never picks it.
    void (*estimate)(const model::Params& p, const Config& cfg, std::vector<SchemeEstimate>* out);
    // The model's mean completion of one message on the path p describes (model_params: packet
    // memory; k, m and beta from cfg; rto_rtts is the hook's), with the timers cfg gives the
    // engines: what sdr_sweep sets beside the simulated mean. nullptr: no model.
    ModelMean (*mean)(model::Params p, const Config& cfg);
    // Scheme-specific bytes of the clear-to-send's parameter area (ctrl_msg.hpp); nullptr: none.
    std::vector<uint8_t> (*cts_params)(const Code& c);
    // Receiver: after repair round r (0-based) of a submessage, how many parity chunks to ask
    // the sender to have sent in all; 0: ask for the missing data chunks instead (SR repair).
    uint32_t (*repair_request)(const Code& c, uint32_t round);

    const char* name() const { return scheme_name(id); }  // "sr", "ec-mds"
    bool coded() const { return parity_slots != nullptr; }
};

// The registry: every scheme in the order auto evaluates them (fixed schemes only; auto is the
// receiver's choice among those that declare an estimate).
std::span<const SchemeOps* const> registered_schemes();
// The ops of a scheme id; auto's are a placeholder (data only until the receiver's CTS names a code).
const SchemeOps& ops(Scheme s);
inline const SchemeOps& ops(const Code& c) { return ops(c.scheme); }
// nullptr if no scheme has this name / wire id.
const SchemeOps* find_scheme(std::string_view name);
const SchemeOps* find_scheme(uint8_t wire_id);
// "sr, sr-nack, ec-xor:k,m, ...": the registered schemes as a command line writes them.
std::string scheme_list();

// The schemes, one file each (src/schemes/<c>.cpp defines k<Cxx>Ops), and auto's placeholder.
#define SDR_REL_SCHEME(id, name, c, cxx) extern const SchemeOps k##cxx##Ops;
#include <sdr_rel_schemes.def>
#undef SDR_REL_SCHEME
extern const SchemeOps kAutoOps;

}  // namespace sdr::rel
