// SDR_RDMA_CM_TRACE=1: one line on stderr per rdma_cm command and per event handed out, so a
// person (or a test waiting for a listener) sees what the server did. Off by default.
#include "ucma.hpp"

#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sdr::verbs::ucma {
namespace {

bool enabled()
{
    static const bool on = [] {
        const char* s = std::getenv("SDR_RDMA_CM_TRACE");
        return s && !std::strcmp(s, "1");
    }();
    return on;
}

const char* command_name(uint32_t c)
{
    static const char* const kNames[] = {"CREATE_ID", "DESTROY_ID", "BIND_IP", "RESOLVE_IP", "RESOLVE_ROUTE",
                                         "QUERY_ROUTE", "CONNECT", "LISTEN", "ACCEPT", "REJECT", "DISCONNECT",
                                         "INIT_QP_ATTR", "GET_EVENT", "GET_OPTION", "SET_OPTION", "NOTIFY",
                                         "JOIN_IP_MCAST", "LEAVE_MCAST", "MIGRATE_ID", "QUERY", "BIND",
                                         "RESOLVE_ADDR", "JOIN_MCAST"};
    return c < sizeof kNames / sizeof *kNames ? kNames[c] : "?";
}

const char* event_name(uint32_t e)
{
    static const char* const kNames[] = {"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR",
                                         "CONNECT_REQUEST", "CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE",
                                         "REJECTED", "ESTABLISHED", "DISCONNECTED", "DEVICE_REMOVAL",
                                         "MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE", "TIMEWAIT_EXIT"};
    return e < sizeof kNames / sizeof *kNames ? kNames[e] : "?";
}

}  // namespace

void trace_command(uint32_t cmd, const Id* id, ssize_t ret)
{
    if (!enabled() || cmd == RDMA_USER_CM_CMD_GET_EVENT) return;
    char addr[INET_ADDRSTRLEN] = "-";
    if (id && id->src.ss_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(id->src).sin_addr, addr, sizeof addr);
    std::fprintf(stderr, "sdr rdma_cm: %s id %u %s:%u: %s\n", command_name(cmd), id ? id->handle : 0, addr,
                 id ? sin_port(id->src) : 0, ret < 0 ? std::strerror(static_cast<int>(-ret)) : "ok");
}

void trace_event(const rdma_ucm_event_resp& r)
{
    if (enabled())
        std::fprintf(stderr, "sdr rdma_cm: event %s id %u status %d\n", event_name(r.event), r.id,
                     static_cast<int>(r.status));
}

}  // namespace sdr::verbs::ucma
