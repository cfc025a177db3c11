// AF_XDP port: one AF_XDP socket on one queue of an interface, fed by an XDP program of our own
// that redirects only what the NIC model wants (unfragmented IPv4/UDP to port 4791 and to the
// interface's address) and passes everything else to the kernel, so ARP, ping and ssh keep
// working on the same interface. Only frames arriving on the bound queue (PortOptions::queue)
// reach the socket: on a multi-queue NIC, steer RoCE there (ethtool -L/-N); veth has one queue.
//
// UMEM: frames of 4096 B. The first part belongs to RX: enough UMEM frames for rx_ring_frames
// frames of the largest size (two each when a frame spans two, multi-buffer), rounded up to a
// power of two, so the port holds as many whole frames as AF_PACKET's ring does. Every RX UMEM
// frame sits in the fill ring, in the kernel, in the RX ring or in our hands for one rx_burst,
// which returns it to the fill ring at once; fill and RX rings have one entry per RX UMEM
// frame, so neither overflows before the other. The rest (ring_frames UMEM frames) is TX, cut into slots of as many adjacent frames as the largest frame needs, so a
// multi-buffer frame is one contiguous buffer for the caller and several descriptors for the
// kernel. Completed TX slots come back through the completion ring.
//
// Frame sizes: the kernel keeps 256 B of headroom in a received UMEM frame, so one descriptor
// carries up to 3840 B (MTU 3826). A larger MTU binds with XDP_USE_SG and loads the program
// with BPF_F_XDP_HAS_FRAGS ("xdp.frags"); received pieces are gathered into one buffer before
// the caller sees them. veth attaches a program without frags natively only up to MTU 3506,
// so "auto" runs MTU 3507..3826 in generic mode.
//
// Setup uses the plain socket options rather than libxdp's xsk_socket__create: binding has to
// be retried (zero-copy, then copy; EBUSY while a previous socket on the queue is still being
// torn down), and libxdp 1.3's create cannot be retried on the same UMEM (its failure path
// leaves rings set up). <xdp/xsk.h> still provides the ring accessors. The program is attached
// through a BPF link, so it disappears with the process even if the process is killed. The
// program itself is xdp_program.cpp; the descriptor and mapping owners are posix_owners.hpp.
#include <sdr/emu/port.hpp>

#if __has_include(<xdp/xsk.h>) && __has_include(<bpf/bpf.h>)

#include <sdr/emu/posix_owners.hpp>
#include <sdr/emu/xdp_program.hpp>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <xdp/xsk.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

// Multi-buffer AF_XDP (Linux 6.6); Debian 12's headers predate it.
#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4)
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif

namespace sdr::emu {

namespace {

constexpr uint32_t kChunk = 4096;                    // one UMEM frame: a page
constexpr uint32_t kKernelHeadroom = 256;            // XDP_PACKET_HEADROOM, kept in front of a received frame
constexpr uint32_t kRxRoom = kChunk - kKernelHeadroom;  // most one RX descriptor carries: 3840 B
constexpr uint32_t kMaxFrameDescs = 16;              // a multi-buffer frame stays well under MAX_SKB_FRAGS (17)
constexpr uint32_t kVethSingleBufferMtu = 3506;      // native XDP on veth without frags (measured: larger MTUs refuse the program)
constexpr size_t kEthHeader = 14;

// ---------------------------------------------------------------------------------------------
// Errors

// "xdp:IF: what: strerror" plus a hint for the errno values a user can act on.
std::string fail_text(const std::string& ifname, const std::string& what, int e, std::string hint = {})
{
    if (hint.empty() && (e == EPERM || e == EACCES)) hint = "needs root (CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW)";
    std::string s = "xdp:" + ifname + ": " + what + ": " + std::strerror(e);
    return hint.empty() ? s : s + " (" + hint + ")";
}

// ---------------------------------------------------------------------------------------------
// The AF_XDP socket: UMEM registration and four mapped rings, not yet bound.

struct XskSocket {
    Fd fd;
    Mapping fill_map, comp_map, rx_map, tx_map;  // unmapped before fd closes (declared after it)
    xsk_ring_prod fill{}, tx{};
    xsk_ring_cons comp{}, rx{};
};

// Points a libxdp ring struct at a mapped ring. Producer rings (fill, TX) count their free
// entries against a consumer shifted by the ring size, as xsk.h expects.
template <class Ring>
void point_ring(Ring* r, uint8_t* map, const xdp_ring_offset& off, uint32_t size, bool we_produce)
{
    r->mask = size - 1;
    r->size = size;
    r->producer = reinterpret_cast<uint32_t*>(map + off.producer);
    r->consumer = reinterpret_cast<uint32_t*>(map + off.consumer);
    r->flags = reinterpret_cast<uint32_t*>(map + off.flags);
    r->ring = map + off.desc;
    r->cached_prod = *r->producer;
    r->cached_cons = *r->consumer + (we_produce ? size : 0);
}

// Makes the socket, registers the UMEM and maps the rings (each `ring` entries). nullptr and
// *what / *e on failure.
// Fill and RX rings have rx_ring entries, completion and TX rings tx_ring.
std::unique_ptr<XskSocket> make_socket(uint8_t* umem, size_t umem_bytes, uint32_t rx_ring, uint32_t tx_ring,
                                       std::string* what, int* e)
{
    auto s = std::make_unique<XskSocket>();
    auto fail = [&](const char* w) {
        *what = w;
        *e = errno;
        return nullptr;
    };
    s->fd = Fd(socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0));
    int fd = s->fd.get();
    if (fd < 0) return fail("socket(AF_XDP)");
    xdp_umem_reg reg{};
    reg.addr = reinterpret_cast<uintptr_t>(umem);
    reg.len = umem_bytes;
    reg.chunk_size = kChunk;
    if (setsockopt(fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof reg)) return fail("registering the UMEM (XDP_UMEM_REG)");
    if (setsockopt(fd, SOL_XDP, XDP_UMEM_FILL_RING, &rx_ring, sizeof rx_ring) ||
        setsockopt(fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &tx_ring, sizeof tx_ring) ||
        setsockopt(fd, SOL_XDP, XDP_RX_RING, &rx_ring, sizeof rx_ring) ||
        setsockopt(fd, SOL_XDP, XDP_TX_RING, &tx_ring, sizeof tx_ring))
        return fail("sizing the rings");
    xdp_mmap_offsets off{};
    socklen_t len = sizeof off;
    if (getsockopt(fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &len)) return fail("XDP_MMAP_OFFSETS");
    auto map = [&](Mapping* m, const xdp_ring_offset& o, uint32_t ring, size_t entry, off_t pgoff) {
        size_t bytes = o.desc + size_t{ring} * entry;
        *m = Mapping(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, pgoff), bytes);
        return m->ok();
    };
    if (!map(&s->fill_map, off.fr, rx_ring, sizeof(uint64_t), XDP_UMEM_PGOFF_FILL_RING) ||
        !map(&s->comp_map, off.cr, tx_ring, sizeof(uint64_t), XDP_UMEM_PGOFF_COMPLETION_RING) ||
        !map(&s->rx_map, off.rx, rx_ring, sizeof(xdp_desc), XDP_PGOFF_RX_RING) ||
        !map(&s->tx_map, off.tx, tx_ring, sizeof(xdp_desc), XDP_PGOFF_TX_RING))
        return fail("mapping the rings");
    point_ring(&s->fill, s->fill_map.bytes(), off.fr, rx_ring, true);
    point_ring(&s->comp, s->comp_map.bytes(), off.cr, tx_ring, false);
    point_ring(&s->rx, s->rx_map.bytes(), off.rx, rx_ring, false);
    point_ring(&s->tx, s->tx_map.bytes(), off.tx, tx_ring, true);
    return s;
}

// ---------------------------------------------------------------------------------------------

class XdpPort final : public Port {
public:
    bool open(const std::string& ifname, const PortOptions& opt, std::string* err);

    const PortInfo& info() const override { return info_; }
    int fd() const override { return s_->fd.get(); }
    uint8_t* tx_alloc() override;
    void tx_commit(size_t len) override;
    void tx_flush() override;
    bool tx_backlog() const override { return unkicked_ != 0; }
    void read_kernel_stats() override;
    PortStats stats() const override;
    int mcast_filter(const std::array<uint8_t, 6>& mac, bool join) override;
    ~XdpPort() override;

protected:
    size_t rx_burst_impl(size_t max, FrameSink sink, void* ctx) override;

private:
    bool check_options(const PortOptions& opt, std::string* err);
    bool plan_frames(std::string* err);
    bool make_program(std::string* err);
    bool attach(std::string* err);
    bool bind_socket(std::string* err);
    int bind_once(uint16_t flags, std::string* what);
    std::string sg_refusal(int e) const;
    void fill_rx_frames();

    size_t take_rx(const xdp_desc& d, FrameSink sink, void* ctx);
    void deliver(FrameSink sink, void* ctx, const uint8_t* data, size_t len);
    void wake_fill_if_needed();
    void kick_tx();
    void reclaim_tx();
    uint64_t slot_addr(uint32_t slot) const { return tx_base_ + uint64_t{slot} * slot_chunks_ * kChunk; }

    PortInfo info_;
    PortOptions opt_;
    std::string ifname_;
    int ifindex_ = 0;
    bool sg_ = false;              // multi-buffer: a frame may span several descriptors
    bool native_ = false;          // program attached in driver mode (else generic)
    uint32_t slot_chunks_ = 1;     // UMEM frames per TX slot
    uint32_t rx_chunks_ = 0;       // UMEM frames for RX = entries of the fill and RX rings
    uint64_t tx_base_ = 0;         // first TX frame's UMEM address
    size_t umem_bytes_ = 0;

    // Released in reverse: program link (detaches), program, map, socket and rings, UMEM.
    Mapping umem_;
    std::unique_ptr<XskSocket> s_;
    Fd map_, prog_, link_;

    std::vector<uint32_t> free_slots_;  // TX slots not in the kernel's hands
    int64_t pending_slot_ = -1;         // handed out by tx_alloc, not yet committed
    uint32_t unkicked_ = 0;             // TX descriptors the kernel has not taken yet
    std::vector<uint8_t> scratch_;      // a multi-buffer frame, gathered
    size_t partial_ = 0;                // bytes of it so far
    bool partial_too_big_ = false;
    uint64_t rx_oversize_ = 0;          // gathered frames that did not fit scratch_ (dropped)
    uint64_t tx_invalid_descs_ = 0;     // the kernel's running total (XDP_STATISTICS)
    PortStats st_;
    // Multicast addresses added to the interface's filter: unlike a packet socket's
    // memberships they outlive the port, so the port removes what is left when it closes.
    std::vector<std::array<uint8_t, 6>> mcast_macs_;
};

namespace {

int interface_mcast(const std::string& ifname, const std::array<uint8_t, 6>& mac, bool add)
{
    Fd s(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (s.get() < 0) return errno;
    ifreq r{};
    std::strncpy(r.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    r.ifr_hwaddr.sa_family = AF_UNSPEC;
    std::memcpy(r.ifr_hwaddr.sa_data, mac.data(), mac.size());
    return ioctl(s.get(), add ? SIOCADDMULTI : SIOCDELMULTI, &r) ? errno : 0;
}

}  // namespace

int XdpPort::mcast_filter(const std::array<uint8_t, 6>& mac, bool join)
{
    auto it = std::find(mcast_macs_.begin(), mcast_macs_.end(), mac);
    if (join == (it != mcast_macs_.end())) return 0;
    if (int e = interface_mcast(ifname_, mac, join)) return e;
    if (join) mcast_macs_.push_back(mac);
    else mcast_macs_.erase(it);
    return 0;
}

XdpPort::~XdpPort()
{
    for (const auto& mac : mcast_macs_) (void)interface_mcast(ifname_, mac, false);  // best effort: the port is going
}

bool XdpPort::check_options(const PortOptions& opt, std::string* err)
{
    uint32_t r = opt.ring_frames;
    if (r < 64 || r > (1u << 16) || (r & (r - 1))) {
        *err = "xdp:" + ifname_ + ": ring_frames " + std::to_string(r) + ": expected a power of two in 64..65536";
        return false;
    }
    if (opt.rx_ring_frames < 64 || opt.rx_ring_frames > (1u << 16)) {
        *err = "xdp:" + ifname_ + ": rx_ring_frames " + std::to_string(opt.rx_ring_frames) + ": expected 64..65536";
        return false;
    }
    if (opt.rx_batch == 0) {
        *err = "xdp:" + ifname_ + ": rx_batch must be at least 1";
        return false;
    }
    if (opt.xdp_mode != "auto" && opt.xdp_mode != "native" && opt.xdp_mode != "generic") {
        *err = "xdp:" + ifname_ + ": xdp mode '" + opt.xdp_mode + "': expected auto, native or generic";
        return false;
    }
    opt_ = opt;
    opt_.rx_batch = std::min(opt.rx_batch, r);
    return true;
}

// One RX descriptor holds kRxRoom bytes. A larger MTU needs multi-buffer (XDP_USE_SG), and TX
// slots of several adjacent UMEM frames.
bool XdpPort::plan_frames(std::string* err)
{
    uint32_t wire = info_.mtu + kEthHeader;
    sg_ = wire > kRxRoom;
    info_.max_frame = std::min(wire, kMaxFrameDescs * kRxRoom);
    slot_chunks_ = (info_.max_frame + kChunk - 1) / kChunk;
    uint32_t rx_per_frame = (info_.max_frame + kRxRoom - 1) / kRxRoom;  // UMEM frames a received frame takes
    rx_chunks_ = std::bit_ceil(opt_.rx_ring_frames * rx_per_frame);
    umem_bytes_ = (size_t{rx_chunks_} + opt_.ring_frames) * kChunk;
    tx_base_ = uint64_t{rx_chunks_} * kChunk;
    if (sg_) scratch_.resize(size_t{kMaxFrameDescs + 2} * kChunk);  // anything the kernel could gather
    void* umem = mmap(nullptr, umem_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);  // page-aligned
    umem_ = Mapping(umem, umem_bytes_);
    if (!umem_.ok()) {
        *err = fail_text(ifname_, "allocating the " + std::to_string(umem_bytes_ >> 20) + " MiB UMEM", errno,
                         "lower SDR_RT_RX_RING_FRAMES");
        return false;
    }
    uint32_t slots = opt_.ring_frames / slot_chunks_;
    free_slots_.reserve(slots);
    for (uint32_t i = slots; i-- > 0;) free_slots_.push_back(i);
    return true;
}

bool XdpPort::make_program(std::string* err)
{
    map_ = Fd(bpf_map_create(BPF_MAP_TYPE_XSKMAP, "sdr_xsks", sizeof(uint32_t), sizeof(int), opt_.queue + 1, nullptr));
    if (map_.get() < 0) {
        *err = fail_text(ifname_, "creating the XSKMAP", -map_.get());
        return false;
    }
    int e = 0;
    std::string verifier;
    prog_ = Fd(load_xdp_program(roce_redirect_program(info_.addr.ip, map_.get()), sg_, &e, &verifier));
    if (prog_.get() < 0) {
        *err = fail_text(ifname_, std::string("loading the XDP program") + (sg_ ? " (xdp.frags)" : ""), e,
                         verifier.empty() ? "" : "verifier: " + verifier);
        return false;
    }
    return true;
}

// Attaches through a BPF link: native first, then generic, as opt.xdp_mode allows.
bool XdpPort::attach(std::string* err)
{
    struct Mode {
        const char* name;
        uint32_t flags;
    };
    std::vector<Mode> modes;
    if (opt_.xdp_mode != "generic") modes.push_back({"native", XDP_FLAGS_DRV_MODE});
    if (opt_.xdp_mode != "native") modes.push_back({"generic", XDP_FLAGS_SKB_MODE});
    std::string tried;
    int last = 0;
    for (const Mode& m : modes) {
        bpf_link_create_opts lo{};
        lo.sz = sizeof lo;
        lo.flags = m.flags;
        int fd = bpf_link_create(prog_.get(), ifindex_, BPF_XDP, &lo);
        if (fd >= 0) {
            link_ = Fd(fd);
            native_ = m.flags == XDP_FLAGS_DRV_MODE;
            return true;
        }
        last = -fd;
        tried += std::string(tried.empty() ? "" : "; ") + m.name + ": " + std::strerror(last);
    }
    std::string hint;
    if (last == EBUSY || last == EEXIST)
        hint = "another XDP program is attached: another xdp: port on this interface (an xdp: port takes one "
               "process; raw: takes several), or one left by a tool (ip link set dev " + ifname_ +
               " xdp off removes that)";
    else if (last == EPERM || last == EACCES)
        hint = "needs root (CAP_NET_ADMIN, CAP_BPF)";
    else if (opt_.xdp_mode == "native" && !sg_ && info_.mtu > kVethSingleBufferMtu)
        hint = "veth runs native XDP without multi-buffer only up to MTU " + std::to_string(kVethSingleBufferMtu) +
               "; use xdp mode auto or generic";
    *err = "xdp:" + ifname_ + ": attaching the XDP program failed (" + tried + ")";
    if (!hint.empty()) *err += " (" + hint + ")";
    return false;
}

// One bind on a fresh socket: 0, or the errno (the socket is dropped again).
int XdpPort::bind_once(uint16_t flags, std::string* what)
{
    int e = 0;
    s_ = make_socket(umem_.bytes(), umem_bytes_, rx_chunks_, opt_.ring_frames, what, &e);
    if (!s_) return e;
    sockaddr_xdp sa{};
    sa.sxdp_family = AF_XDP;
    sa.sxdp_flags = flags;
    sa.sxdp_ifindex = static_cast<uint32_t>(ifindex_);
    sa.sxdp_queue_id = opt_.queue;
    if (bind(s_->fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) return 0;
    e = errno;
    *what = "bind to queue " + std::to_string(opt_.queue);
    s_.reset();
    return e;
}

std::string XdpPort::sg_refusal(int e) const
{
    return "xdp:" + ifname_ + ": MTU " + std::to_string(info_.mtu) + " needs frames of " +
           std::to_string(info_.mtu + kEthHeader) + " B, more than one " + std::to_string(kChunk) +
           " B UMEM frame holds (" + std::to_string(kRxRoom) + " B), and binding with multi-buffer (XDP_USE_SG) failed: " +
           std::strerror(e) + " (multi-buffer AF_XDP needs Linux 6.6; lower the MTU: ip link set dev " + ifname_ +
           " mtu " + std::to_string(kVethSingleBufferMtu) + ", or use raw:" + ifname_ + ")";
}

// Zero-copy where the driver offers it (native mode only), else copy mode. EBUSY right after
// another socket on the queue closed: its teardown is deferred, so retry for about a second.
bool XdpPort::bind_socket(std::string* err)
{
    uint16_t common = XDP_USE_NEED_WAKEUP | (sg_ ? XDP_USE_SG : 0);
    std::vector<uint16_t> tries;
    if (native_) tries.push_back(common | XDP_ZEROCOPY);
    tries.push_back(common | XDP_COPY);
    std::string what;
    int e = 0;
    for (uint16_t flags : tries) {
        for (int attempt = 0; attempt < 20; attempt++) {
            e = bind_once(flags, &what);
            if (e != EBUSY) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (e == 0) return true;
    }
    if (sg_ && (e == EINVAL || e == EOPNOTSUPP))
        *err = sg_refusal(e);
    else if (e == EBUSY)
        *err = fail_text(ifname_, what, e, "another AF_XDP socket holds this queue, still after 1 s of retries");
    else if (e == EINVAL && what.rfind("bind", 0) == 0)
        *err = fail_text(ifname_, what, e, "does the interface have that queue? ethtool -l " + ifname_);
    else if (e == ENOMEM || e == ENOBUFS)
        *err = fail_text(ifname_, what, e, "locked-memory limit: run as root or raise ulimit -l, or lower SDR_RT_RX_RING_FRAMES");
    else if (e == EAFNOSUPPORT)
        *err = fail_text(ifname_, what, e, "kernel without AF_XDP sockets (CONFIG_XDP_SOCKETS)");
    else
        *err = fail_text(ifname_, what, e);
    return false;
}

// Every RX frame starts in the fill ring (it has exactly as many entries).
void XdpPort::fill_rx_frames()
{
    uint32_t idx = 0;
    uint32_t n = xsk_ring_prod__reserve(&s_->fill, rx_chunks_, &idx);
    for (uint32_t i = 0; i < n; i++) *xsk_ring_prod__fill_addr(&s_->fill, idx + i) = uint64_t{i} * kChunk;
    xsk_ring_prod__submit(&s_->fill, n);
}

bool XdpPort::open(const std::string& ifname, const PortOptions& opt, std::string* err)
{
    ifname_ = ifname;
    info_.kind = "xdp";
    if (!interface_info(ifname, &info_, err)) {
        *err = "xdp:" + ifname + ": " + *err;
        return false;
    }
    ifindex_ = static_cast<int>(if_nametoindex(ifname.c_str()));
    if (!check_options(opt, err) || !plan_frames(err) || !make_program(err) || !attach(err) || !bind_socket(err))
        return false;
    fill_rx_frames();
    int fd = s_->fd.get();
    if (int r = bpf_map_update_elem(map_.get(), &opt_.queue, &fd, 0); r != 0) {
        *err = fail_text(ifname, "adding the socket to the XSKMAP", -r);
        return false;
    }
    xdp_options xo{};
    socklen_t len = sizeof xo;
    bool zc = getsockopt(fd, SOL_XDP, XDP_OPTIONS, &xo, &len) == 0 && (xo.flags & XDP_OPTIONS_ZEROCOPY);
    info_.mode = std::string("AF_XDP ") + (native_ ? "native" : "generic") + (zc ? " zero-copy" : " copy") +
                 (sg_ ? ", multi-buffer" : "");
    return true;
}

// ---------------------------------------------------------------------------------------------
// Receive

void XdpPort::deliver(FrameSink sink, void* ctx, const uint8_t* data, size_t len)
{
    sink(ctx, data, len, 0);  // AF_XDP carries no arrival stamp
    st_.rx_frames++;
    st_.rx_bytes += len;
}

// One descriptor: a whole frame goes to the sink straight from the UMEM; the pieces of a
// multi-buffer frame are gathered into scratch_ first. Returns the frames delivered (0 or 1).
size_t XdpPort::take_rx(const xdp_desc& d, FrameSink sink, void* ctx)
{
    const uint8_t* data = umem_.bytes() + d.addr;
    bool more = sg_ && (d.options & XDP_PKT_CONTD);
    if (!more && partial_ == 0) {
        deliver(sink, ctx, data, d.len);
        return 1;
    }
    if (partial_ + d.len <= scratch_.size())
        std::memcpy(scratch_.data() + partial_, data, d.len);
    else
        partial_too_big_ = true;
    partial_ += d.len;
    if (more) return 0;
    size_t len = std::exchange(partial_, 0);
    if (std::exchange(partial_too_big_, false)) {
        rx_oversize_++;
        return 0;
    }
    deliver(sink, ctx, scratch_.data(), len);
    return 1;
}

// Copy mode never sleeps on the fill ring, but a zero-copy driver may: it asks to be woken.
void XdpPort::wake_fill_if_needed()
{
    if (xsk_ring_prod__needs_wakeup(&s_->fill)) recvfrom(s_->fd.get(), nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
}

size_t XdpPort::rx_burst_impl(size_t max, FrameSink sink, void* ctx)
{
    uint32_t want = static_cast<uint32_t>(std::min<size_t>(max, opt_.rx_batch));
    uint32_t idx = 0;
    uint32_t n = want ? xsk_ring_cons__peek(&s_->rx, want, &idx) : 0;
    if (n == 0) {
        wake_fill_if_needed();
        return 0;
    }
    // Every RX frame we hold has a place in the fill ring (it has one entry per RX frame).
    uint32_t fidx = 0;
    uint32_t room = xsk_ring_prod__reserve(&s_->fill, n, &fidx);
    size_t frames = 0;
    for (uint32_t i = 0; i < n; i++) {
        const xdp_desc* d = xsk_ring_cons__rx_desc(&s_->rx, idx + i);
        frames += take_rx(*d, sink, ctx);
        if (room) *xsk_ring_prod__fill_addr(&s_->fill, fidx + i) = d->addr & ~uint64_t{kChunk - 1};
    }
    xsk_ring_cons__release(&s_->rx, n);
    xsk_ring_prod__submit(&s_->fill, room);
    wake_fill_if_needed();
    return frames;
}

// ---------------------------------------------------------------------------------------------
// Transmit

// Completed TX descriptors: a slot is free again when its first frame completes (the kernel
// completes a multi-buffer frame's descriptors together).
void XdpPort::reclaim_tx()
{
    uint32_t idx = 0;
    uint32_t n = xsk_ring_cons__peek(&s_->comp, opt_.ring_frames, &idx);
    uint64_t slot_bytes = uint64_t{slot_chunks_} * kChunk;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t addr = *xsk_ring_cons__comp_addr(&s_->comp, idx + i);
        if (addr < tx_base_ || (addr - tx_base_) % slot_bytes) continue;  // a later piece of a frame
        if (free_slots_.size() < free_slots_.capacity())
            free_slots_.push_back(static_cast<uint32_t>((addr - tx_base_) / slot_bytes));
    }
    xsk_ring_cons__release(&s_->comp, n);
}

uint8_t* XdpPort::tx_alloc()
{
    if (pending_slot_ >= 0) return umem_.bytes() + slot_addr(static_cast<uint32_t>(pending_slot_));
    auto ready = [&] { return !free_slots_.empty() && xsk_prod_nb_free(&s_->tx, slot_chunks_) >= slot_chunks_; };
    if (!ready()) reclaim_tx();
    if (!ready() && unkicked_) {
        kick_tx();
        reclaim_tx();
    }
    if (!ready()) {
        st_.tx_full++;
        return nullptr;
    }
    pending_slot_ = free_slots_.back();
    free_slots_.pop_back();
    return umem_.bytes() + slot_addr(static_cast<uint32_t>(pending_slot_));
}

// Queues the frame as one descriptor, or several (XDP_PKT_CONTD on all but the last) when it
// spans UMEM frames.
void XdpPort::tx_commit(size_t len)
{
    if (pending_slot_ < 0) return;
    uint32_t slot = static_cast<uint32_t>(std::exchange(pending_slot_, -1));
    if (len == 0 || len > info_.max_frame) {
        st_.tx_errors++;
        free_slots_.push_back(slot);
        return;
    }
    uint32_t descs = static_cast<uint32_t>((len + kChunk - 1) / kChunk);
    uint32_t idx = 0;
    xsk_ring_prod__reserve(&s_->tx, descs, &idx);  // room checked by tx_alloc
    size_t left = len;
    for (uint32_t i = 0; i < descs; i++) {
        xdp_desc* d = xsk_ring_prod__tx_desc(&s_->tx, idx + i);
        d->addr = slot_addr(slot) + uint64_t{i} * kChunk;
        d->len = static_cast<uint32_t>(std::min<size_t>(left, kChunk));
        d->options = i + 1 < descs ? XDP_PKT_CONTD : 0;
        left -= d->len;
    }
    xsk_ring_prod__submit(&s_->tx, descs);
    unkicked_ += descs;
    st_.tx_frames++;
    st_.tx_bytes += len;
}

// Copy mode sends only a bounded budget per system call (32 descriptors in Linux 6.x) and says
// EAGAIN while more wait: call again as long as the kernel takes something. What it does not
// take now (device busy, socket buffer full) goes at the next flush.
void XdpPort::kick_tx()
{
    if (!unkicked_) return;
    if (!xsk_ring_prod__needs_wakeup(&s_->tx)) {  // the driver watches the ring itself
        unkicked_ = 0;
        return;
    }
    uint32_t produced = *s_->tx.producer;
    for (uint32_t round = 0; round < opt_.ring_frames / 16 + 4; round++) {
        uint32_t before = __atomic_load_n(s_->tx.consumer, __ATOMIC_ACQUIRE);
        sendto(s_->fd.get(), nullptr, 0, MSG_DONTWAIT, nullptr, 0);
        uint32_t after = __atomic_load_n(s_->tx.consumer, __ATOMIC_ACQUIRE);
        if (after == produced || after == before) break;
    }
    unkicked_ = produced - __atomic_load_n(s_->tx.consumer, __ATOMIC_ACQUIRE);
}

void XdpPort::tx_flush()
{
    kick_tx();
    reclaim_tx();
}

// XDP_STATISTICS are running totals (not reset on read): take them as they are.
void XdpPort::read_kernel_stats()
{
    xdp_statistics xs{};
    socklen_t len = sizeof xs;
    if (getsockopt(s_->fd.get(), SOL_XDP, XDP_STATISTICS, &xs, &len) != 0) return;
    st_.rx_xdp_dropped = xs.rx_dropped;
    st_.rx_xdp_ring_full = xs.rx_ring_full;
    st_.rx_xdp_invalid_descs = xs.rx_invalid_descs;
    st_.rx_xdp_fill_ring_empty = xs.rx_fill_ring_empty_descs;
    tx_invalid_descs_ = xs.tx_invalid_descs;
}

PortStats XdpPort::stats() const
{
    PortStats s = st_;
    s.rx_oversize = rx_oversize_;
    s.rx_dropped_kernel = s.rx_xdp_dropped + s.rx_xdp_ring_full + s.rx_xdp_invalid_descs + rx_oversize_;
    s.tx_errors += tx_invalid_descs_;
    return s;
}

}  // namespace

std::unique_ptr<Port> open_xdp_port(const std::string& ifname, const PortOptions& opt, std::string* err)
{
    auto p = std::make_unique<XdpPort>();
    if (!p->open(ifname, opt, err)) return nullptr;
    return p;
}

}  // namespace sdr::emu

#else  // no libxdp / libbpf headers

namespace sdr::emu {

std::unique_ptr<Port> open_xdp_port(const std::string& ifname, const PortOptions&, std::string* err)
{
    *err = "xdp:" + ifname + ": this build has no AF_XDP support (install libxdp-dev and libbpf-dev, re-run cmake); use raw:" +
           ifname;
    return nullptr;
}

}  // namespace sdr::emu

#endif
