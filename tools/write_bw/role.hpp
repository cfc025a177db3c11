// One job of one side in a run (send, receive, echo, ...), written as steps so that a process
// can run several at once (-b) and -d sim can run both sides' in one thread: `run` drives them.
#pragma once

#include "side.hpp"

#include <memory>
#include <string>
#include <vector>

namespace sdr::write_bw {

class Role {
public:
    virtual ~Role() = default;
    // A control message from the other side (each role takes the types it knows).
    virtual void on_message(const std::vector<uint8_t>& m) = 0;
    // Does what can be done now without waiting; true if anything moved.
    virtual bool step() = 0;
    virtual bool done() const = 0;
    // The role's numbers: JSON members, and a text report (table row and lines).
    virtual void report(tools::Json* j) const = 0;
    virtual std::string text() const = 0;
    // Its goodput in Gbit/s (what -b sums).
    virtual double goodput_gbps() const = 0;
};

// A side and the roles it plays in this run.
struct Party {
    Side* side;
    Peer* peer;
    std::vector<std::unique_ptr<Role>> roles;
};

// Drives every party's roles until all are done, sleeping on the device between events; then
// each party says Done and reads the other side's messages up to its Done.
void run(std::vector<Party*> parties, int timeout_ms);

}  // namespace sdr::write_bw
