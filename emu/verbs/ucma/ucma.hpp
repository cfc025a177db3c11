// The rdma_cm device served in user space (README.md, "rdma_cm"): what the kernel's rdma_ucm and
// rdma_cm do for librdmacm, inside the process that uses SDR's verbs device. The interception
// library turns open() of /dev/infiniband/rdma_cm into a channel (an eventfd, channel.cpp) and
// each write() on it into a command (commands.cpp); IDs bind to the device whose interface has
// the address (devices.cpp) and connect through that NIC's CM agent (emu/cm), whose events
// become rdma_cm events (cm_events.cpp).
//
// Locks: one server lock (mu()) over channels, IDs, ports and the device table. A command holds
// it, and may take a NIC's lock inside it to call the agent (server, then NIC). The agent's
// handler runs under the NIC's lock and takes neither: it queues the event in an inbox of its
// own and wakes the CM event thread, which takes the server lock to deliver it.
#pragma once

#include "../engine.hpp"

#include <sdr/emu/cm_agent.hpp>

#include <netinet/in.h>
#include <rdma/rdma_user_cm.h>
#include <sys/socket.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace sdr::verbs::ucma {

namespace cm = emu::cm;

// librdmacm's RDMA_UDP_QKEY: the Q_Key of every RDMA_PS_UDP ID, SIDR and multicast.
inline constexpr uint32_t kUdpQkey = 0x01234567;

// One SDR device as rdma_cm uses it: its record, and while IDs use it the engine (a reference of
// the server's own) with its CM agent.
struct Device {
    PortInfo port;
    Engine* engine = nullptr;
    std::unique_ptr<cm::CmAgent> agent;
    int refs = 0;
};

// rdma_cm's ID states (the kernel's enum rdma_cm_state, as far as an ID here goes).
enum class State { Idle, AddrBound, AddrQuery, AddrResolved, RouteResolved, Listen, Connect, Established, Disconnect };

// A multicast group an ID joined (JOIN_IP_MCAST, JOIN_MCAST): its own handle and librdmacm's
// context, and the events of it handed out (LEAVE_MCAST replies them).
struct Mcast {
    uint32_t handle = 0;
    uint64_t uid = 0;
    uint32_t group = 0;  // IPv4, host order
    uint32_t events_reported = 0;
};

struct Id {
    uint32_t handle = 0;
    uint64_t uid = 0;     // librdmacm's context pointer, returned in events
    int channel = -1;     // the channel's fd
    uint16_t ps = 0;      // RDMA_PS_*
    uint8_t qp_type = 0;  // IBV_QPT_RC or IBV_QPT_UD
    State state = State::Idle;
    sockaddr_storage src{}, dst{};  // AF_INET (AF_INET6 only as the wildcard)
    Device* dev = nullptr;          // a reference while set
    bool owns_port = false;         // bound by BIND or RESOLVE (a request's ID is not)
    uint32_t events_reported = 0;
    // Options (SET_OPTION).
    uint8_t tos = 0;
    bool reuseaddr = false, afonly = false;
    uint8_t ack_timeout = 18;  // the QP's timeout code: 4.096 us * 2^18, about 1 s
    // Listening: CONNECT_REQUESTs it may still queue, and its agent IDs (one per device).
    int backlog = 0;
    std::vector<std::pair<Device*, cm::CmId>> listens;
    // Connecting or connected: the agent's ID, both sides' parameters and the path.
    cm::CmId cm = cm::kNoId;
    bool active = false;       // this side sent the REQ (or SIDR_REQ)
    uint32_t listener = 0;     // a request's ID: the listener it came to
    bool handed_out = false;   // a request's ID: librdmacm knows its handle (its event was read)
    cm::ConnParams local, peer;
    cm::Path path;
    std::vector<Mcast> mcasts;
};

// The event numbers of struct rdma_ucm_event_resp (the kernel's enum rdma_cm_event_type, which
// librdmacm's rdma_cma.h repeats; that header cannot share a file with rdma_user_cm.h).
namespace cm_event {
enum : uint32_t {
    kAddrResolved, kAddrError, kRouteResolved, kRouteError, kConnectRequest, kConnectResponse, kConnectError,
    kUnreachable, kRejected, kEstablished, kDisconnected, kDeviceRemoval, kMulticastJoin, kMulticastError,
    kAddrChange, kTimewaitExit,
};
}  // namespace cm_event

// One queued event and the ID it counts for (events_reported; a CONNECT_REQUEST counts for
// its listener and names the new ID in resp.id).
struct Event {
    rdma_ucm_event_resp resp{};
    uint32_t owner = 0;
    uint32_t request = 0;  // CONNECT_REQUEST: the new ID
    uint32_t mcast = 0;    // MULTICAST_JOIN: the group's handle (counts for it too)
};

struct Channel {
    int fd = -1;
    ino_t ino = 0;
    std::deque<Event> events;
};

// The server's state; everything below is under mu().
std::mutex& mu();
std::map<int, Channel>& channels();
std::map<uint32_t, std::unique_ptr<Id>>& ids();
Id* find_id(uint32_t handle);
uint32_t new_handle();  // a free ID number

// channel.cpp: queues an event on the ID's channel (the eventfd turns readable).
void post_event(Id& owner, Event ev);
// GET_EVENT: the oldest event into cmd.response, waiting (without the lock) unless the fd is
// O_NONBLOCK (-EAGAIN then). 0 or -errno.
ssize_t get_event(Channel* ch, const rdma_ucm_get_event& cmd, size_t out, std::unique_lock<std::mutex>& lock);
// Drops the queued events of an ID (destroyed), returning the requests among them.
std::vector<uint32_t> drop_events(uint32_t handle);
// Destroys an ID as DESTROY_ID does: leaves the agent (a connection sends its DREQ first),
// releases its port and device, drops its events. Returns its events_reported.
uint32_t destroy_id(uint32_t handle);

// devices.cpp: the SDR devices libibverbs lists; references on their engines and agents.
// Every device (read once).
std::vector<Device*>& devices();
// The device whose interface has `ip` (host order) in this namespace, or nullptr.
Device* device_with_ip(uint32_t ip);
// The interface address of a device (host order), 0 if it has none.
uint32_t device_ip(const Device& d);
// Takes a reference: starts the engine and its CM agent on first use. errno-style result.
int device_get(Device* d);
void device_put(Device* d);
// Whether an interface here has this IPv6 address (no SDR device can use one: ENODEV).
bool is_local_ipv6(const in6_addr& a);
// The source address the kernel would use towards dst (host order), or an errno (negative).
int64_t route_source(uint32_t dst);

// ports.cpp: the port spaces. bind_port binds src (its port 0: an ephemeral one) for id: the
// port is the ID's own src, and goes with the ID. 0, EADDRINUSE or EADDRNOTAVAIL.
int bind_port(Id& id, sockaddr_storage* src);

// cm_events.cpp: the agent's handler for a device, and the event thread.
cm::EventHandler event_handler(Device* d);

// commands.cpp (with addressing.cpp, connection.cpp, mcast.cpp): one write() on a channel.
ssize_t serve(Channel& ch, const void* buf, size_t len, std::unique_lock<std::mutex>& lock);

// trace.cpp: SDR_RDMA_CM_TRACE=1 prints each command (with its ID after it ran, if any) and
// each event handed out on stderr.
void trace_command(uint32_t cmd, const Id* id, ssize_t ret);
void trace_event(const rdma_ucm_event_resp& resp);

// Helpers shared by the commands and the events.
uint32_t sin_addr(const sockaddr_storage& s);  // host order; 0 for anything but AF_INET
uint16_t sin_port(const sockaddr_storage& s);  // host order
bool is_any(const sockaddr_storage& s);  // the wildcard or the loopback (cma_any_addr)
emu::verbs::Gid gid_of(uint32_t ip);
uint32_t random_psn();

}  // namespace sdr::verbs::ucma
