// A packet port: where the real-time emulator's frames meet a kernel packet path (AF_XDP or
// AF_PACKET on one network interface). Single-threaded: one polling thread owns a port.
// Frames are whole Ethernet frames without FCS. A port never interprets them beyond what its
// kernel-side filter needs (AF_XDP: RoCEv2 to our address only); the NIC model checks the rest.
#pragma once

#include <sdr/emu/nic.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

namespace sdr::emu {

struct PortOptions {
    uint32_t queue = 0;          // NIC RX/TX queue the port binds (AF_XDP) or 0
    uint32_t ring_frames = 4096; // frames per TX ring (AF_XDP: a power of two)
    // Frames of the largest size the receive ring holds (AF_XDP: rounded up to a power of two
    // of UMEM frames). It absorbs the receiver's stalls: 16384 frames are 36 ms at the 450 k
    // frames/s a sender reaches on veth, which a receiver sharing a loaded 2-core machine
    // needed (4096 frames lost up to 11 k frames per 1000 MiB). Memory: 68 MiB of ring
    // (AF_PACKET) or 128 MiB of UMEM (AF_XDP multi-buffer) at MTU 4200.
    uint32_t rx_ring_frames = 16384;
    // AF_XDP: "auto" (native, then generic), "native" or "generic" attach mode of the XDP
    // program; zero-copy is tried first where the driver offers it, else copy mode.
    std::string xdp_mode = "auto";
    uint32_t rx_batch = 64;      // frames taken from the kernel per rx_burst
    // AF_PACKET: a receive ring of one slot per frame (TPACKET_V2), each frame ours the moment
    // the kernel fills it, instead of blocks (TPACKET_V3), handed over when full or after 1 ms:
    // 33 us instead of 0.5-1 ms per RC round trip, and 20-25 % fewer bulk frames per second
    // (bench/README.md). The verbs device, whose programs wait on round trips, sets it; SDR's
    // raw: devices stream and keep the blocks. SDR_RT_RAW_RING=frames|blocks chooses for either.
    bool frame_ring = false;
};

struct PortInfo {
    std::string kind;            // "xdp" or "raw"
    std::string ifname;
    NicAddress addr;             // the interface's MAC and first IPv4 address
    uint32_t mtu = 0;            // the interface's L3 MTU
    uint32_t max_frame = 0;      // largest Ethernet frame (no FCS) this port can carry
    std::string mode;            // how it runs, for logs: e.g. "AF_XDP native copy, multi-buffer"
};

// What a port counted. The kernel's receive drops are read from the socket by the polling
// thread (Port::read_kernel_stats, every few milliseconds and on every snapshot), one counter
// per cause, so a drop shows up while the run lasts, whether or not anybody asks.
struct PortStats {
    uint64_t rx_frames = 0, rx_bytes = 0, tx_frames = 0, tx_bytes = 0;
    // AF_PACKET (PACKET_STATISTICS): frames the kernel could not put into the RX ring (full).
    uint64_t rx_kernel_ring_full = 0;
    // AF_PACKET's block ring: times the ring froze (every block in our hands; tp_freeze_q_cnt). Not frames.
    uint64_t rx_kernel_ring_freezes = 0;
    // AF_XDP (XDP_STATISTICS): rx_dropped (no buffer, or another reason the kernel had),
    // rx_ring_full (the RX ring had no room) and rx_invalid_descs (frames); and
    // rx_fill_ring_empty_descs (times the kernel found the fill ring empty: not frames, and in
    // copy mode each such miss is also one rx_dropped).
    uint64_t rx_xdp_dropped = 0, rx_xdp_ring_full = 0, rx_xdp_invalid_descs = 0, rx_xdp_fill_ring_empty = 0;
    uint64_t rx_oversize = 0;        // AF_XDP multi-buffer frames larger than we gather (dropped by us)
    uint64_t rx_dropped_kernel = 0;  // frames lost before the NIC model saw them: the sum of the frame counts above
    uint64_t tx_full = 0;            // tx_alloc found the TX ring full
    uint64_t tx_errors = 0;          // frames the kernel refused for good (EMSGSIZE, link down, invalid descriptors)
    uint64_t tx_local = 0;           // frames sent by tx_local (to the other processes on the interface)
    uint64_t rx_own_local = 0;       // tx_local's copies back to us, skipped (AF_PACKET)
};

class Port {
public:
    virtual ~Port() = default;
    virtual const PortInfo& info() const = 0;

    // Receive up to `max` frames without blocking; `on_frame(data, len)` sees each frame, valid
    // only during the call. `on_frame(data, len, kernel_ns)` also gets the wall-clock time
    // (CLOCK_REALTIME, ns) the kernel stamped the frame with when it arrived, or 0 from a port
    // whose kernel path stamps none (AF_XDP). Returns the number of frames delivered.
    template <class F>
    size_t rx_burst(size_t max, F&& on_frame)
    {
        using Fn = std::remove_reference_t<F>;
        return rx_burst_impl(
            max,
            [](void* ctx, const uint8_t* d, size_t n, uint64_t kernel_ns) {
                Fn& f = *static_cast<Fn*>(ctx);
                if constexpr (std::is_invocable_v<Fn&, const uint8_t*, size_t, uint64_t>) f(d, n, kernel_ns);
                else f(d, n);
            },
            &on_frame);
    }

    // Buffer for one outgoing frame of up to info().max_frame bytes, or nullptr while the TX
    // ring is full. tx_commit(len) queues it; tx_flush() hands queued frames to the kernel (one
    // system call per batch). At most one tx_alloc is outstanding: a buffer not committed is
    // abandoned by the next tx_alloc (which may return it again).
    [[nodiscard]] virtual uint8_t* tx_alloc() = 0;
    virtual void tx_commit(size_t len) = 0;
    virtual void tx_flush() = 0;
    // Frames committed that the kernel has not taken yet: a flush met a full socket buffer or
    // the copy-mode budget. Whoever flushes must come back for them (RtNic does not sleep on
    // them: an RC sender that then waits for ACKs stalled until its retransmission timer).
    virtual bool tx_backlog() const = 0;

    // Several processes on one interface, each with its own NIC model (RtNic::share_port): a
    // frame the other processes must see (to our own address for a QP of theirs or QP1, or to
    // a multicast group) leaves through the kernel's packet taps, which hand a copy to every
    // packet socket on the interface, ours included; ours drops its own copy, so each process
    // sees the frame once. It also crosses the link, once (a peer drops one to our MAC).
    // false: this port cannot (AF_XDP: its transmit passes no tap, and a queue takes one
    // socket).
    [[nodiscard]] virtual bool tx_local(const uint8_t* frame, size_t len)
    {
        (void)frame;
        (void)len;
        return false;
    }
    virtual bool can_tx_local() const { return false; }

    // Let the frames to Ethernet multicast address `mac` (a group's: wire::ipv4_multicast_mac)
    // through the interface's address filter (join), or no longer (leave): AF_PACKET
    // PACKET_ADD/DROP_MEMBERSHIP, AF_XDP SIOCADDMULTI/SIOCDELMULTI. 0, or the errno. A bridge
    // or veth passes them anyway; a physical NIC drops them unless told.
    [[nodiscard]] virtual int mcast_filter(const std::array<uint8_t, 6>& mac, bool join) = 0;

    // A descriptor that turns readable when frames wait (for poll()/epoll).
    virtual int fd() const = 0;
    // Adds what the kernel counted since the last call to the port's counters (a system call:
    // the polling thread calls it every few milliseconds, not per frame).
    virtual void read_kernel_stats() = 0;
    // The counters as of the last read_kernel_stats, with no system call.
    virtual PortStats stats() const = 0;

protected:
    using FrameSink = void (*)(void* ctx, const uint8_t* data, size_t len, uint64_t kernel_ns);
    virtual size_t rx_burst_impl(size_t max, FrameSink sink, void* ctx) = 0;
};

// Opens kind "xdp" or "raw" on interface ifname; nullptr and *err (what failed and why, with
// the errno text and a hint such as "needs root" or "frame larger than the page without
// multi-buffer") if it cannot.
[[nodiscard]] std::unique_ptr<Port> open_port(const std::string& kind, const std::string& ifname, const PortOptions& opt,
                                std::string* err);

// The pieces open_port dispatches to (each in its own file).
[[nodiscard]] std::unique_ptr<Port> open_packet_port(const std::string& ifname, const PortOptions& opt, std::string* err);
[[nodiscard]] std::unique_ptr<Port> open_xdp_port(const std::string& ifname, const PortOptions& opt, std::string* err);

// The interface's MAC, first IPv4 address and MTU; false + *err if it has none.
[[nodiscard]] bool interface_info(const std::string& ifname, PortInfo* out, std::string* err);

}  // namespace sdr::emu
