// One port, several NIC models. Every process that opens a verbs device runs its own NIC model
// on the device's interface (emu/verbs), and every frame to the interface's address reaches all
// of them (emu/rt: RtNic::share_port). A frame names its QP by number only, and a CM request by
// service ID only, so what the models must agree on goes through here:
//   - the QPNs each one owns (a frame for a QPN another model owns is not ours to answer);
//   - who listens on which service ID (so that a second listener gets EADDRINUSE);
//   - which one model answers a request that nobody listens to (REJ, invalid service ID: one
//     answer, as from one kernel CM).
// The simulator runs one model per port and sets none: everything is its own.
#pragma once

#include <cstdint>

namespace sdr::emu {

class PortShare {
public:
    // Takes `qpn` for this model; false: another model on the port has it (draw again).
    [[nodiscard]] virtual bool claim_qpn(uint32_t qpn) = 0;
    virtual void release_qpn(uint32_t qpn) = 0;
    // 0, or EADDRINUSE: another model listens on service_id.
    [[nodiscard]] virtual int claim_service(uint64_t service_id) = 0;
    virtual void release_service(uint64_t service_id) = 0;
    // Another model on the port listens on service_id.
    virtual bool listened_elsewhere(uint64_t service_id) = 0;
    // This model is the one that answers the requests no model listens to (it becomes it if
    // none is).
    virtual bool answers_for_port() = 0;

protected:
    ~PortShare() = default;
};

}  // namespace sdr::emu
