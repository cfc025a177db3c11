// What the rdma_cm commands share (ucma.hpp): reading a command's body and writing its reply as
// the kernel copies them, finding the ID a command names, and the handlers commands.cpp
// dispatches to: addressing.cpp (bind, resolve, route, listen, queries), connection.cpp
// (connect, accept, reject, disconnect, QP attributes), mcast.cpp (joins).
#pragma once

#include "ucma.hpp"

#include <algorithm>
#include <cstring>

namespace sdr::verbs::ucma {

// A command's body: what the program wrote (in bytes), zero beyond, as the kernel copies it.
template <typename T>
T body(const void* p, size_t in)
{
    T t{};
    std::memcpy(&t, p, std::min(in, sizeof t));
    return t;
}

template <typename T>
void reply(uint64_t response, const T& r)
{
    std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(response)), &r, sizeof r);
}

// The ID named by a command on channel ch: ENOENT if none, EINVAL if another channel's.
int lookup(const Channel& ch, uint32_t handle, Id** out);
// A sockaddr a command carries (sockaddr_in6-sized or a storage) as an AF_INET or AF_INET6
// storage; EAFNOSUPPORT for AF_IB and anything else.
int take_addr(const void* p, size_t size, sockaddr_storage* out);
size_t addr_size(const sockaddr_storage& s);

// addressing.cpp. Each returns 0 or -errno.
int do_bind(Id& id, sockaddr_storage addr);
int resolve(Channel& ch, uint32_t handle, const sockaddr_storage* src, const sockaddr_storage& dst);
int resolve_route(Id& id);
int listen(Id& id, int backlog);
int query_route(const Channel& ch, const void* p, size_t in, size_t out);
int query(const Channel& ch, const void* p, size_t in, size_t out);
ibv_mtu mtu_enum(uint32_t bytes);          // the largest IBV_MTU of at most `bytes`
uint32_t port_mtu_bytes(const Device& d);  // the path MTU the device's interface carries
void fill_gid(uint8_t out[16], uint32_t ip);

// connection.cpp
int connect(Id& id, const rdma_ucm_connect& cmd);
int accept(Id& id, const rdma_ucm_accept& cmd);
int reject(Id& id, const rdma_ucm_reject& cmd);
int disconnect(Id& id);
int init_qp_attr(const Channel& ch, const void* p, size_t in, size_t out);

// mcast.cpp
int join(Id& id, uint64_t uid, const sockaddr_storage& addr, uint16_t flags, uint64_t response);
int leave(const Channel& ch, const rdma_ucm_destroy_id& cmd, size_t out);

}  // namespace sdr::verbs::ucma
