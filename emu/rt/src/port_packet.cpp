// AF_PACKET port: a TPACKET_V3 receive ring (blocks of frames handed over in one go), or V2 (a
// slot per frame, ours as soon as it is filled: PortOptions::frame_ring), and batched transmit
// with sendmmsg, on one interface; frames for the other processes on the interface through its
// packet taps (tx_local). A classic BPF filter admits only RoCEv2
// (IPv4/UDP to port 4791 and our address), and a silent UDP socket on 4791 keeps the kernel's
// own stack from answering every RoCE frame with ICMP port-unreachable.
#include <sdr/emu/port.hpp>
#include <sdr/emu/posix_owners.hpp>
#include <sdr/emu/wire.hpp>

#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

namespace sdr::emu {

namespace {

std::string errno_text(const std::string& what)
{
    int e = errno;
    std::string s = what + ": " + std::strerror(e);
    if (e == EPERM || e == EACCES) s += " (needs root: CAP_NET_RAW)";
    return s;
}

// Accept IPv4, not a fragment, UDP, destination port 4791, destination address `ip` or a
// multicast group (224.0.0.0/4: the NIC model keeps the groups it joined and counts the rest,
// mcast_no_member). Frames leaving the interface pass it too: the main socket bypasses the
// taps, so those are tx_local's (Port::tx_local). Jump offsets count from the next instruction;
// every "no" lands on the final drop.
std::vector<sock_filter> roce_filter(uint32_t ip)
{
    return {
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),                      // EtherType
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP, 0, 12),
        BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 23),                      // IP protocol
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 10),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 30),                      // IP destination
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ip, 2, 0),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xF0000000),             // else a multicast group
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xE0000000, 0, 6),
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 20),                      // fragment offset
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x1FFF, 4, 0),
        BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 14),                     // X = IP header length
        BPF_STMT(BPF_LD | BPF_H | BPF_IND, 16),                      // UDP destination port
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, wire::kRoceUdpPort, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0x40000),                          // accept (whole frame)
        BPF_STMT(BPF_RET | BPF_K, 0),                                // drop
    };
}

class PacketPort final : public Port {
public:
    bool open(const std::string& ifname, const PortOptions& opt, std::string* err)
    {
        info_.kind = "raw";
        if (!interface_info(ifname, &info_, err)) return false;
        info_.max_frame = info_.mtu + 14;
        ifindex_ = if_nametoindex(ifname.c_str());
        // Protocol 0: the socket receives nothing until bind, so no frame slips in before the
        // filter is attached.
        fd_ = Fd(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        const int fd = fd_.get();
        if (fd < 0) return *err = errno_text("raw:" + ifname + ": socket(AF_PACKET)"), false;
        auto filter = roce_filter(info_.addr.ip);
        sock_fprog prog{static_cast<unsigned short>(filter.size()), filter.data()};
        frame_ring_ = opt.frame_ring;
        int one = 1, version = frame_ring_ ? TPACKET_V2 : TPACKET_V3;
        if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) ||
            setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one) ||
            setsockopt(fd, SOL_PACKET, PACKET_VERSION, &version, sizeof version))
            return *err = errno_text("raw:" + ifname + ": setsockopt"), false;
        // Blocks of 256 KiB, enough for rx_ring_frames frames of the largest size: each takes
        // its header, the MAC offset's padding and the frame, aligned (the kernel puts the
        // network header at TPACKET_ALIGN(header + 16), the MAC header 14 bytes before it).
        // Block ring (TPACKET_V3): frames packed, a block handed over when full or after the
        // 1 ms timeout (the latency of a lone frame); a block loses its descriptor and the tail
        // no frame fits in (60 frames of 4214 B). Frame ring (TPACKET_V2): one slot per frame,
        // ours as soon as the kernel fills it (61 slots of 4288 B per block).
        tpacket_req3 req{};
        req.tp_block_size = 1u << 18;
        uint32_t per_block;
        if (frame_ring_) {
            req.tp_frame_size = TPACKET_ALIGN(TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - 14 + info_.max_frame);
            per_block = req.tp_block_size / req.tp_frame_size;
        } else {
            req.tp_frame_size = 1u << 11;  // TPACKET_V3 packs frames; this only sizes the ring
            const uint32_t per_frame = TPACKET_ALIGN(TPACKET_ALIGN(TPACKET3_HDRLEN + 16) - 14 + info_.max_frame);
            per_block = (req.tp_block_size - TPACKET_ALIGN(sizeof(tpacket_block_desc))) / per_frame;
            req.tp_retire_blk_tov = 1;
        }
        req.tp_block_nr = std::max(8u, (std::max(opt.rx_ring_frames, 64u) + per_block - 1) / per_block);
        req.tp_frame_nr = req.tp_block_nr * (req.tp_block_size / req.tp_frame_size);
        // TPACKET_V2 takes the request's first four fields (tpacket_req).
        if (setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, frame_ring_ ? sizeof(tpacket_req) : sizeof req))
            return *err = errno_text("raw:" + ifname + ": PACKET_RX_RING"), false;
        const size_t ring_bytes = size_t{req.tp_block_size} * req.tp_block_nr;
        ring_ = Mapping(mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), ring_bytes);
        if (!ring_.ok()) return *err = errno_text("raw:" + ifname + ": mmap of the RX ring"), false;
        block_size_ = req.tp_block_size;
        blocks_ = req.tp_block_nr;
        slot_size_ = req.tp_frame_size;
        per_block_ = per_block;
        slots_ = req.tp_frame_nr;
        sockaddr_ll sll{};
        sll.sll_family = AF_PACKET;
        sll.sll_protocol = htons(ETH_P_ALL);
        sll.sll_ifindex = static_cast<int>(ifindex_);
        if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll))
            return *err = errno_text("raw:" + ifname + ": bind"), false;
        if (!open_sink(err)) return false;
        // tx_local's socket: it goes through the interface's queueing, where the taps are (the
        // main socket bypasses both).
        local_fd_ = Fd(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (local_fd_.get() < 0)
            return *err = errno_text("raw:" + ifname + ": socket(AF_PACKET) for local frames"), false;
        tx_buf_.resize(size_t{kTxBatch} * info_.max_frame);
        info_.mode = std::string("AF_PACKET ") + (frame_ring_ ? "TPACKET_V2" : "TPACKET_V3") + " RX ring " +
                     std::to_string(ring_bytes >> 20) + " MiB (" + std::to_string(size_t{per_block} * blocks_) +
                     " frames), sendmmsg TX";
        return true;
    }

    const PortInfo& info() const override { return info_; }
    int fd() const override { return fd_.get(); }

    uint8_t* tx_alloc() override
    {
        if (tx_n_ == kTxBatch) {
            tx_flush();
            if (tx_n_ == kTxBatch) {
                stats_.tx_full++;
                return nullptr;
            }
        }
        return tx_buf_.data() + size_t{tx_n_} * info_.max_frame;
    }
    void tx_commit(size_t len) override { tx_len_[tx_n_++] = static_cast<uint32_t>(len); }
    // The socket's memberships end with it: nothing to undo at close.
    int mcast_filter(const std::array<uint8_t, 6>& mac, bool join) override
    {
        packet_mreq mr{};
        mr.mr_ifindex = static_cast<int>(ifindex_);
        mr.mr_type = PACKET_MR_MULTICAST;
        mr.mr_alen = static_cast<unsigned short>(mac.size());
        std::memcpy(mr.mr_address, mac.data(), mac.size());
        return setsockopt(fd_.get(), SOL_PACKET, join ? PACKET_ADD_MEMBERSHIP : PACKET_DROP_MEMBERSHIP, &mr, sizeof mr)
                   ? errno
                   : 0;
    }
    bool tx_backlog() const override { return tx_n_ != 0; }

    bool can_tx_local() const override { return true; }
    bool tx_local(const uint8_t* frame, size_t len) override
    {
        if (len < wire::kIcrcBytes) return false;
        sockaddr_ll to{};
        to.sll_family = AF_PACKET;
        to.sll_ifindex = static_cast<int>(ifindex_);
        to.sll_halen = 6;
        std::memcpy(to.sll_addr, frame, 6);
        if (sendto(local_fd_.get(), frame, len, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to), sizeof to) !=
            static_cast<ssize_t>(len)) {
            stats_.tx_errors++;
            return false;
        }
        own_local_[own_next_++ % kOwnLocal] = OwnCopy{static_cast<uint32_t>(len), icrc_of(frame, len)};
        stats_.tx_local++;
        return true;
    }

    void tx_flush() override
    {
        if (!tx_n_) return;
        mmsghdr msg[kTxBatch];
        iovec iov[kTxBatch];
        for (uint32_t i = 0; i < tx_n_; i++) {
            iov[i] = {tx_buf_.data() + size_t{i} * info_.max_frame, tx_len_[i]};
            msg[i] = {};
            msg[i].msg_hdr.msg_iov = &iov[i];
            msg[i].msg_hdr.msg_iovlen = 1;
        }
        int sent = sendmmsg(fd_.get(), msg, tx_n_, MSG_DONTWAIT);
        if (sent <= 0) {
            // The queue is full (EAGAIN/ENOBUFS): keep the frames for the next flush. Anything
            // else (EMSGSIZE, a down link) would never succeed: count the head as gone.
            if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR) return;
            sent = 1;
            stats_.tx_errors++;
        }
        for (int i = 0; i < sent; i++) {
            stats_.tx_frames++;
            stats_.tx_bytes += tx_len_[i];
        }
        uint32_t left = tx_n_ - static_cast<uint32_t>(sent);
        std::memmove(tx_buf_.data(), tx_buf_.data() + size_t(sent) * info_.max_frame, size_t{left} * info_.max_frame);
        std::memmove(tx_len_, tx_len_ + sent, left * sizeof tx_len_[0]);
        tx_n_ = left;
    }

    // PACKET_STATISTICS resets the kernel's counters on every read, so only this reader may
    // call it, and it adds what it reads.
    void read_kernel_stats() override
    {
        tpacket_stats_v3 st{};  // a frame ring's kernel fills the first two fields (tpacket_stats)
        socklen_t len = sizeof st;
        if (getsockopt(fd_.get(), SOL_PACKET, PACKET_STATISTICS, &st, &len) != 0) return;
        stats_.rx_kernel_ring_full += st.tp_drops;
        stats_.rx_kernel_ring_freezes += st.tp_freeze_q_cnt;
        stats_.rx_dropped_kernel = stats_.rx_kernel_ring_full;
    }

    PortStats stats() const override { return stats_; }

protected:
    size_t rx_burst_impl(size_t max, FrameSink sink, void* ctx) override
    {
        return frame_ring_ ? rx_frames(max, sink, ctx) : rx_blocks(max, sink, ctx);
    }

private:
    // One frame of the ring at `hdr` (its tpacket header of type H, then the sockaddr_ll): to
    // the sink, unless it is our own tx_local copy. tpacket_rcv stamps every frame it puts in
    // the ring from CLOCK_REALTIME (the skb's software stamp or the time it copies the frame),
    // in ns with TPACKET_V2 and V3. True if the sink had it.
    template <class H>
    bool deliver(const uint8_t* hdr, FrameSink sink, void* ctx)
    {
        const auto* h = reinterpret_cast<const H*>(hdr);
        const auto* sll = reinterpret_cast<const sockaddr_ll*>(hdr + TPACKET_ALIGN(sizeof(H)));
        if (sll->sll_pkttype == PACKET_OUTGOING && own_copy(hdr + h->tp_mac, h->tp_snaplen)) {
            stats_.rx_own_local++;
            return false;
        }
        sink(ctx, hdr + h->tp_mac, h->tp_snaplen, uint64_t{h->tp_sec} * 1'000'000'000u + h->tp_nsec);
        stats_.rx_frames++;
        stats_.rx_bytes += h->tp_snaplen;
        return true;
    }
    size_t rx_frames(size_t max, FrameSink sink, void* ctx)
    {
        size_t n = 0;
        while (n < max) {
            uint8_t* slot =
                ring_.bytes() + size_t{slot_ / per_block_} * block_size_ + size_t{slot_ % per_block_} * slot_size_;
            auto* h = reinterpret_cast<tpacket2_hdr*>(slot);
            if (!(__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER)) break;
            n += deliver<tpacket2_hdr>(slot, sink, ctx);
            __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
            slot_ = slot_ + 1 == slots_ ? 0 : slot_ + 1;
        }
        return n;
    }
    size_t rx_blocks(size_t max, FrameSink sink, void* ctx)
    {
        size_t n = 0;
        while (n < max) {
            auto* bd = reinterpret_cast<tpacket_block_desc*>(ring_.bytes() + size_t{block_} * block_size_);
            if (!(__atomic_load_n(&bd->hdr.bh1.block_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER)) break;
            if (pkt_ == 0) hdr_ = reinterpret_cast<uint8_t*>(bd) + bd->hdr.bh1.offset_to_first_pkt;
            while (pkt_ < bd->hdr.bh1.num_pkts && n < max) {
                n += deliver<tpacket3_hdr>(hdr_, sink, ctx);
                pkt_++;
                hdr_ += reinterpret_cast<tpacket3_hdr*>(hdr_)->tp_next_offset;
            }
            if (pkt_ < bd->hdr.bh1.num_pkts) break;  // budget spent inside the block
            __atomic_store_n(&bd->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
            block_ = (block_ + 1) % blocks_;
            pkt_ = 0;
        }
        return n;
    }

    // The kernel stack sees RoCE frames too; a bound UDP socket that is never read takes them
    // silently (dropped once its small buffer is full) instead of port-unreachable replies.
    bool open_sink(std::string* err)
    {
        sink_ = Fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        const int fd = sink_.get();
        int small = 1, one = 1;
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(wire::kRoceUdpPort);
        a.sin_addr.s_addr = htonl(info_.addr.ip);
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) ||
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
            bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a))
            return *err = errno_text("raw:" + info_.ifname + ": UDP socket on port 4791 (another RoCE user here?)"), false;
        return true;
    }

    static uint32_t icrc_of(const uint8_t* f, size_t len)
    {
        uint32_t v;
        std::memcpy(&v, f + len - wire::kIcrcBytes, sizeof v);
        return v;
    }
    // One of the frames we sent by tx_local, back from the tap: it and the older ones leave
    // the list (the tap hands our frames back in the order we sent them; one the queue dropped
    // never comes). Length and ICRC (a CRC over the frame's invariant bytes) tell it apart.
    bool own_copy(const uint8_t* f, size_t len)
    {
        if (len < wire::kIcrcBytes) return false;
        const OwnCopy c{static_cast<uint32_t>(len), icrc_of(f, len)};
        if (own_next_ - own_seen_ > kOwnLocal) own_seen_ = own_next_ - kOwnLocal;  // overwritten
        for (uint32_t i = own_seen_; i != own_next_; i++) {
            if (own_local_[i % kOwnLocal] == c) {
                own_seen_ = i + 1;
                return true;
            }
        }
        return false;
    }

    static constexpr uint32_t kTxBatch = 64;
    struct OwnCopy {
        uint32_t len = 0, icrc = 0;
        bool operator==(const OwnCopy&) const = default;
    };
    static constexpr uint32_t kOwnLocal = 64;  // frames sent by tx_local whose copy may still come
    std::array<OwnCopy, kOwnLocal> own_local_{};
    uint32_t own_next_ = 0, own_seen_ = 0;
    Fd local_fd_;
    PortInfo info_;
    unsigned ifindex_ = 0;
    // Released in reverse: the UDP sink, the ring's mapping, then the socket it maps.
    Fd fd_;
    Mapping ring_;
    Fd sink_;
    bool frame_ring_ = false;
    uint32_t block_size_ = 0, blocks_ = 0;
    uint32_t slot_size_ = 0, per_block_ = 0, slots_ = 0, slot_ = 0;  // frame ring
    uint32_t block_ = 0, pkt_ = 0;                                   // block ring
    uint8_t* hdr_ = nullptr;
    std::vector<uint8_t> tx_buf_;
    uint32_t tx_len_[kTxBatch] = {};
    uint32_t tx_n_ = 0;
    PortStats stats_;
};

}  // namespace

std::unique_ptr<Port> open_packet_port(const std::string& ifname, const PortOptions& opt, std::string* err)
{
    auto p = std::make_unique<PacketPort>();
    if (!p->open(ifname, opt, err)) return nullptr;
    return p;
}

}  // namespace sdr::emu
