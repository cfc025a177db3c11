// PortShare (port_share.hpp) among the processes of one network namespace that opened NIC
// models on the same interface. A claim is an abstract UNIX socket bound to a name made of the
// interface's index and what is claimed: a second bind of the name fails (EADDRINUSE), a connect
// to it finds the holder, and the kernel unbinds it when its holder closes it or dies, so a
// crashed process leaves no stale claim. Abstract names live in the network namespace, as the
// interface index does (unix(7)). One descriptor per claim: a QP, a listener, the answerer.
#pragma once

#include <sdr/emu/port_share.hpp>
#include <sdr/emu/posix_owners.hpp>

#include <cstdint>
#include <map>
#include <string>

namespace sdr::emu {

class ProcessShare final : public PortShare {
public:
    explicit ProcessShare(unsigned ifindex) : ifindex_(ifindex) {}

    bool claim_qpn(uint32_t qpn) override { return claim(Kind::Qpn, qpn) == 0; }
    void release_qpn(uint32_t qpn) override { held_.erase(key(Kind::Qpn, qpn)); }
    int claim_service(uint64_t service_id) override { return claim(Kind::Service, service_id); }
    void release_service(uint64_t service_id) override { held_.erase(key(Kind::Service, service_id)); }
    bool listened_elsewhere(uint64_t service_id) override;
    bool answers_for_port() override;

private:
    enum class Kind : uint8_t { Qpn, Service, Answerer };
    static std::pair<Kind, uint64_t> key(Kind k, uint64_t v) { return {k, v}; }
    std::string name(Kind k, uint64_t v) const;
    int claim(Kind k, uint64_t v);  // 0, EADDRINUSE, or another errno (claimed nothing)

    unsigned ifindex_;
    std::map<std::pair<Kind, uint64_t>, Fd> held_;
};

}  // namespace sdr::emu
