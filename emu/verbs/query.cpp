// ibv_query_device(_ex) and ibv_query_port: the device's attributes from the record sdr-rdma
// wrote and from the interface as the calling process's network namespace sees it.
#include "provider.hpp"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace sdr::verbs {
namespace {

bool read_line(const std::string& path, std::string* out)
{
    std::ifstream f(path);
    if (!f || !std::getline(f, *out)) return false;
    return true;
}

// sysfs node_guid text "xxxx:xxxx:xxxx:xxxx".
bool parse_guid(const std::string& s, uint64_t* out)
{
    unsigned a, b, c, d;
    if (std::sscanf(s.c_str(), "%4x:%4x:%4x:%4x", &a, &b, &c, &d) != 4) return false;
    *out = (uint64_t{a} << 48) | (uint64_t{b} << 32) | (uint64_t{c} << 16) | d;
    return true;
}

// MTU, flags and speed of the interface in this network namespace.
void read_netdev(PortInfo* p)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", p->netdev.c_str());
    if (ioctl(fd, SIOCGIFMTU, &ifr) == 0) {
        p->netdev_mtu = static_cast<uint32_t>(ifr.ifr_mtu);
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0)
            p->up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
    }
    close(fd);
    std::string speed;
    if (p->up && read_line("/sys/class/net/" + p->netdev + "/speed", &speed)) {
        long v = std::strtol(speed.c_str(), nullptr, 10);
        if (v > 0) p->speed_mbps = static_cast<uint32_t>(v);
    }
}

// ibv_port_attr.active_speed of one lane no faster than the interface (IBTA speed codes).
void lane_speed(uint32_t mbps, ibv_port_attr* a)
{
    struct Speed {
        uint32_t mbps;
        uint8_t code;
    };
    static constexpr Speed kSpeeds[] = {{100000, 128}, {50000, 64}, {25000, 32}, {14000, 16},
                                        {10000, 4},    {5000, 2},   {2500, 1}};
    a->active_width = 1;  // 1X
    a->active_speed = 1;  // SDR: the interface does not say, or is slower than one lane
    for (const Speed& s : kSpeeds)
        if (mbps >= s.mbps) {
            a->active_speed = s.code;
            break;
        }
}

// ports/1/gids/N and gid_attrs/types/N as sdr-rdma writes them: usable entries are RoCE v2
// with an IPv4-mapped GID ("0000:0000:0000:0000:0000:ffff:xxxx:xxxx"); empty ones are zero.
void read_gid_table(const std::string& dir, std::vector<bool>* usable)
{
    usable->clear();
    for (unsigned i = 0; i < 256; i++) {
        std::string gid, type;
        if (!read_line(dir + "/ports/1/gids/" + std::to_string(i), &gid)) break;
        usable->push_back(gid.rfind("0000:0000:0000:0000:0000:ffff:", 0) == 0 &&
                          read_line(dir + "/ports/1/gid_attrs/types/" + std::to_string(i), &type) && type == "RoCE v2");
    }
}

}  // namespace

int check_sgid_index(const PortInfo& port, unsigned sgid_index)
{
    if (sgid_index < port.gid_usable.size() && port.gid_usable[sgid_index]) return 0;
    std::string use;
    for (size_t i = 0; i < port.gid_usable.size(); i++)
        if (port.gid_usable[i]) use += (use.empty() ? "" : " or ") + std::to_string(i);
    // A kernel RoCE device has IPv6 (link-local) GIDs at 0 and 1 and IPv4-mapped ones at 2
    // (RoCE v1) and 3 (RoCE v2); this device has RoCE v2 over IPv4 only (SEMANTICS.md, "GIDs").
    std::fprintf(stderr,
                 "sdr verbs %s: GID index %u is %s; this device has RoCE v2 over IPv4 only: use GID index %s "
                 "(perftest -x, pingpong -g)\n",
                 port.ibdev.c_str(), sgid_index,
                 sgid_index < port.gid_usable.size() ? "empty (no IPv6 or RoCE v1 GIDs)" : "beyond the GID table",
                 use.empty() ? "(none: run sdr-rdma link add again)" : use.c_str());
    return EINVAL;
}

bool read_port_info(const char* ibdev_path, PortInfo* out)
{
    const std::string dir = ibdev_path;
    std::string guid, mtu;
    const size_t slash = dir.find_last_of('/');
    out->ibdev = slash == std::string::npos ? dir : dir.substr(slash + 1);
    if (!read_line(dir + "/sdr/netdev", &out->netdev) || !read_line(dir + "/sdr/port", &out->kind) ||
        !read_line(dir + "/node_guid", &guid) || !parse_guid(guid, &out->node_guid)) {
        errno = ENODEV;
        return false;
    }
    // The MTU add saw, for a process where the interface is not visible.
    if (read_line(dir + "/sdr/mtu", &mtu)) out->netdev_mtu = static_cast<uint32_t>(std::strtoul(mtu.c_str(), nullptr, 10));
    read_gid_table(dir, &out->gid_usable);
    read_netdev(out);
    return true;
}

ibv_mtu ibv_mtu_for(uint32_t netdev_mtu)
{
    // A RoCEv2 packet inside the IP MTU: IPv4 20 + UDP 8 + BTH 12 + the largest extended
    // headers of a packet we send (RETH 16 + ImmDt 4) + ICRC 4 = 64 bytes around the payload.
    constexpr uint32_t kRoceOverhead = 20 + 8 + 12 + 16 + 4 + 4;
    if (netdev_mtu < 256 + kRoceOverhead) return static_cast<ibv_mtu>(0);
    const uint32_t room = netdev_mtu - kRoceOverhead;
    ibv_mtu m = IBV_MTU_256;
    for (uint32_t bytes = 512, e = IBV_MTU_512; e <= IBV_MTU_4096 && bytes <= room; bytes *= 2, ++e)
        m = static_cast<ibv_mtu>(e);
    return m;
}

int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                    size_t attr_size)
{
    if (input && input->comp_mask) return EINVAL;
    if (attr_size < sizeof(ibv_device_attr)) return EINVAL;
    const PortInfo& port = to_context(context)->state->port;
    ibv_device_attr_ex a{};
    ibv_device_attr& d = a.orig_attr;
    std::snprintf(d.fw_ver, sizeof(d.fw_ver), "sdr-emu 0.1");
    d.node_guid = htobe64(port.node_guid);
    d.sys_image_guid = d.node_guid;
    d.max_mr_size = Limits::kMaxMrSize;
    d.page_size_cap = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    // No IEEE OUI of its own: 0xFFFFFF, the value soft-RoCE (rxe) reports, a software RoCE
    // device; pyverbs' device tests require a nonzero vendor_id, and MLNX/EFA ids would turn on
    // vendor-specific paths in UCX, perftest and the tests.
    d.vendor_id = 0xFFFFFF;
    d.vendor_part_id = 0;
    d.hw_ver = 0;
    d.max_qp = static_cast<int>(Limits::kMaxQp);
    d.max_qp_wr = static_cast<int>(Limits::kMaxQpWr);
    d.max_sge = static_cast<int>(Limits::kMaxSge);
    d.max_sge_rd = static_cast<int>(Limits::kMaxSge);
    d.max_cq = static_cast<int>(Limits::kMaxCq);
    d.max_cqe = static_cast<int>(Limits::kMaxCqe);
    d.max_mr = static_cast<int>(Limits::kMaxMr);
    d.max_pd = static_cast<int>(Limits::kMaxPd);
    d.max_qp_rd_atom = static_cast<int>(Limits::kMaxRdAtom);
    d.max_qp_init_rd_atom = static_cast<int>(Limits::kMaxRdAtom);
    d.max_res_rd_atom = static_cast<int>(Limits::kMaxRdAtom * Limits::kMaxQp);
    // READs and atomics count in the fields above. Atomics are atomic among this NIC's; they
    // also hold against a host CPU's atomic instructions (emu/nic/VERBS.md), but HCA is what
    // is promised, as ConnectX does.
    d.atomic_cap = IBV_ATOMIC_HCA;
    d.max_srq = static_cast<int>(Limits::kMaxSrq);
    d.max_srq_wr = static_cast<int>(Limits::kMaxSrqWr);
    d.max_srq_sge = static_cast<int>(Limits::kMaxSge);
    // SRQs: the model's table and depth; no IBV_DEVICE_SRQ_RESIZE (ibv_modify_srq cannot resize).
    d.max_mcast_grp = static_cast<int>(Limits::kMaxMcastGrp);
    d.max_mcast_qp_attach = static_cast<int>(Limits::kMaxMcastQpAttach);
    d.max_total_mcast_qp_attach = static_cast<int>(Limits::kMaxTotalMcastQpAttach);
    d.max_pkeys = 1;
    d.phys_port_cnt = 1;
    a.phys_port_cnt_ex = 1;
    std::memcpy(attr, &a, std::min(attr_size, sizeof(a)));
    if (attr_size > sizeof(a)) std::memset(reinterpret_cast<char*>(attr) + sizeof(a), 0, attr_size - sizeof(a));
    return 0;
}

int query_port(ibv_context* context, uint8_t port_num, ibv_port_attr* attr)
{
    if (port_num != 1) return EINVAL;
    PortInfo port = to_context(context)->state->port;
    read_netdev(&port);  // the interface now: it may have gone down or changed its MTU
    *attr = ibv_port_attr{};
    attr->state = port.up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
    attr->phys_state = port.up ? 5 : 3;  // LinkUp : Disabled
    attr->max_mtu = ibv_mtu_for(port.netdev_mtu);
    attr->active_mtu = attr->max_mtu;
    attr->gid_tbl_len = static_cast<int>(port.gid_usable.size());
    attr->pkey_tbl_len = 1;
    attr->max_msg_sz = 1u << 31;
    attr->max_vl_num = 1;
    attr->link_layer = IBV_LINK_LAYER_ETHERNET;
    lane_speed(port.speed_mbps, attr);
    return 0;
}

}  // namespace sdr::verbs
