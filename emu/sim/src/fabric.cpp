#include <sdr/emu/fabric.hpp>
#include <sdr/emu/capture_notes.hpp>
#include <sdr/emu/wire.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace sdr::emu {

// ---- the send port of one NIC -------------------------------------------------------------

class SimFabric::Port final : public SimTarget {
public:
    // arg of fire(): a PFC pause or resume from the first switch (Egress::kPause/kResume)
    Port(SimFabric& f, Nic& nic, double gbps) : f_(f), nic_(nic), ps_per_byte_fp_(ps_per_byte(gbps)) {}
    void kick()
    {
        if (busy_) return;
        busy_ = true;
        f_.sim_.at(f_.sim_.now(), this);
    }
    // Packets leave back to back at exact wire times, but one event serves a batch: it
    // completes the packets that finished by now and starts those that begin within
    // kTxBatchPs. Local send completions are therefore seen up to kTxBatchPs late; what
    // crosses the link, and when, is exact.
    void fire(SimTime now, uint64_t arg) override
    {
        if (arg != Egress::kWireFree) [[unlikely]] return pause(arg == Egress::kPause);
        nic_.tx_prefetch_wqes(n_ ? n_ : 1);  // about as many as the last batch took, loading during tx_done
        nic_.tx_done(batch_, n_);
        n_ = 0;
        if (wire_free_ < now) {
            wire_free_ = now;
            wire_frac_ = 0;
        }
        // Two passes: first take the batch from the send engine and time it on the wire, then
        // hand it to the links. The NIC writes each packet field by field; a link reading it
        // right away with wider loads waits for those stores to retire (store-to-load
        // forwarding fails); perf put a fifth of the payload-free simulator's samples on such waits.
        // The wire's clock lives in locals here: as members, each packet's update was stored and
        // loaded back across the opaque tx_next call, a chain through memory per packet.
        SimTime wire_free = now, busy_until = wire_free_;
        uint64_t frac = wire_frac_;
        uint32_t n = 0;
        while (n < max_batch_ && wire_free < now + kTxBatchPs && !paused_ && nic_.tx_next(&batch_[n])) {
            const TxPacket& p = batch_[n];
            leaves_[n] = wire_free;
            frame_[n] = nullptr;
            if (!p.local_error) {
                const uint32_t len = frame_bytes(p);
                frame_len_[n] = len;
                uint64_t t = frac + (len + kWireOverheadBytes) * ps_per_byte_fp_;
                if ((t >> kFracBits) < tx_spacing_ps_) t = tx_spacing_ps_ << kFracBits;  // DPA TX thread
                busy_until += t >> kFracBits;
                frac = t & ((1u << kFracBits) - 1);
                wire_free = leaves_[n] = busy_until;
                // A verbs packet's bytes may lie in its engine's gather buffer, valid only until
                // the engine's next packet (VERBS.md, "Requester"): its frame is made now.
                if (p.kind == TxPacket::Kind::Verbs) [[unlikely]] {
                    frame_[n] = f_.frame_alloc();
                    frame_len_[n] = static_cast<uint32_t>(nic_.tx_encode(p, frame_[n], kFrameCap));
                }
            }
            n++;
        }
        n_ = n;
        wire_free_ = busy_until;
        wire_frac_ = frac;
        if (n_ == 0) {
            busy_ = false;
            return;
        }
        for (uint32_t i = 0; i < n_; i++) {
            const TxPacket& p = batch_[i];
            if (p.local_error) continue;
            SimLink* link = nullptr;
            uint8_t* frame = frame_[i];
            uint32_t frame_len = frame_len_[i];
            if (!net_ && !(link = route(p.remote_ip))) {
                if (wire::is_ipv4_multicast(p.remote_ip) && frame) [[unlikely]]
                    f_.mcast_send(nic_, leaves_[i], p, frame, frame_len);
                else if (frame)
                    f_.frame_free(frame);
                continue;
            }
            if (!frame && (p.kind != TxPacket::Kind::Sdr || nic_.payload())) {  // control frames always carry their bytes
                frame = f_.frame_alloc();
                frame_len = static_cast<uint32_t>(nic_.tx_encode(p, frame, kFrameCap));
            }
            if (net_) net_->inject(nic_.index(), leaves_[i], p.meta, p.remote_ip, frame, frame_len, control_class(p));
            else link->send(leaves_[i], p.meta, frame, frame_len);
        }
        f_.sim_.at(wire_free, this);
    }

private:
    static uint64_t ps_per_byte(double gbps) { return static_cast<uint64_t>(std::llround(8000.0 / gbps * (1 << kFracBits))); }
    // Switches queue control datagrams, ACKs, NAKs and CNPs ahead of data, never marked: every
    // kind but SDR's and verbs' data, and of verbs' packets the RC acknowledgements and QP1's
    // management datagrams (the CM's, emu/cm).
    static uint8_t control_class(const TxPacket& p)
    {
        return (p.kind != TxPacket::Kind::Sdr && p.kind != TxPacket::Kind::Verbs) || p.meta.opcode == wire::kOpRcAck ||
               (p.kind == TxPacket::Kind::Verbs && p.meta.src_qp == wire::kGsiQpn);
    }
    // PFC from the first switch: a paused port stops taking packets from the send engine.
    void pause(bool on)
    {
        paused_ = on;
        if (!on) kick();
    }
    static uint32_t frame_bytes(const TxPacket& p)
    {
        return static_cast<uint32_t>(p.kind == TxPacket::Kind::Sdr ? wire::frame_bytes_write_imm(p.meta.dma_len)
                                                                  : Nic::other_frame_bytes(p));
    }
    // The link towards the NIC with this IP (cached: one lookup per destination).
    SimLink* route(uint32_t ip)
    {
        if (ip == last_ip_ && last_link_) return last_link_;
        Nic* dst = f_.nic_by_ip(ip);
        last_ip_ = ip;
        last_link_ = dst ? f_.link(nic_.index(), dst->index()) : nullptr;
        return last_link_;
    }
    static constexpr SimTime kTxBatchPs = 1'000'000;  // 1 us
    static constexpr uint32_t kMaxBatch = 64;
    // The scalars first, on two cache lines, then the batch (with many NICs each line an event
    // touches is a cache miss).
    SimFabric& f_;
    Nic& nic_;
    const uint32_t max_batch_ = f_.params_.per_packet_events ? 1 : kMaxBatch;
    bool busy_ = false;
    bool paused_ = false;
    uint32_t n_ = 0;
    // Wire time: whole picoseconds plus a 16-bit fraction, so no float per packet and no drift
    // (declared after f_: initialised from it).
    static constexpr int kFracBits = 16;
    const uint64_t ps_per_byte_fp_;
    SimTime wire_free_ = 0;
    uint64_t wire_frac_ = 0;
    // Cost model: the sender's TX thread posts one WQE per tx_wqe_ns (0: the wire alone).
    const SimTime tx_spacing_ps_ = f_.dpa_ ? f_.dpa_->tx_spacing_ps() : 0;
    uint32_t last_ip_ = 0;
    SimLink* last_link_ = nullptr;
    SimNetwork* const net_ = f_.net_.get();
    alignas(64) TxPacket batch_[kMaxBatch];
    SimTime leaves_[kMaxBatch];      // when each packet of the batch has left the wire
    uint32_t frame_len_[kMaxBatch];  // and its frame's bytes
    uint8_t* frame_[kMaxBatch];      // a verbs packet's frame, encoded as it was taken
};

// ---- firmware timers ----------------------------------------------------------------------

class SimFabric::Timers final : public SimTarget {
public:
    explicit Timers(SimFabric& f) : f_(f) {}
    static uint64_t key(uint32_t nic, uint32_t worker, uint32_t id)
    {
        return (uint64_t{nic} << 48) | (uint64_t{worker & 0xFFFF} << 32) | id;
    }
    void arm(uint32_t nic, uint32_t worker, uint32_t id, uint64_t deadline_ns)
    {
        uint64_t k = key(nic, worker, id);
        // A deadline already past fires now (hal_timer_arm: at or after it), once.
        const SimTime t = std::max<SimTime>(deadline_ns * kPsPerNs, f_.sim_.now());
        deadline_[k] = t;  // re-arming replaces the earlier deadline
        f_.sim_.at(t, this, k);
    }
    void fire(SimTime now, uint64_t k) override
    {
        auto it = deadline_.find(k);
        if (it == deadline_.end() || it->second != now) return;  // re-armed since
        deadline_.erase(it);
        if (Nic* n = f_.find_nic(static_cast<uint32_t>(k >> 48)))
            n->timer_fired(static_cast<uint32_t>((k >> 32) & 0xFFFF), static_cast<uint32_t>(k));
    }

private:
    SimFabric& f_;
    std::map<uint64_t, uint64_t> deadline_;
};

// ---- injected frames ----------------------------------------------------------------------

class SimFabric::Injector final : public SimTarget {
public:
    explicit Injector(SimFabric& f) : f_(f) {}
    void add(Injected in, SimTime at)
    {
        pending_[next_] = std::move(in);
        f_.sim_.at(at, this, next_++);
    }
    void fire(SimTime, uint64_t arg) override
    {
        auto it = pending_.find(arg);
        if (it == pending_.end()) return;
        if (Nic* n = f_.find_nic(it->second.dst)) {
            const auto& fr = it->second.frame;
            if (!f_.pcap_.pcapng()) {
                n->rx_frame(fr.data(), fr.size());
            } else {  // an injected frame is recorded with what the NIC did with it
                f_.flush_drops(f_.sim_.now());
                capture_note::RxDropWatch watch(n->counters().rx_drops);
                n->rx_frame(fr.data(), fr.size());
                std::string note = capture_note::kInjected;
                watch.append_reason(&note);
                const uint32_t len = static_cast<uint32_t>(fr.size());
                f_.pcap_.write(f_.sim_.now(), fr.data(), len, len,
                               pcapng::FrameNote{f_.rx_interface(it->second.dst), pcapng::kFlagInbound, note});
            }
        }
        pending_.erase(it);
    }

private:
    SimFabric& f_;
    std::map<uint64_t, Injected> pending_;
    uint64_t next_ = 0;
};

// ---- links --------------------------------------------------------------------------------

SimLink::SimLink(SimFabric& fabric, Nic& dst, uint32_t src_index, const LinkParams& p,
                 uint64_t seed)
    : fabric_(fabric), dst_(dst), prop_ps_(static_cast<SimTime>(std::llround(p.rtt_ms * 1e9 / 2.0))),
      max_run_ahead_(fabric.params_.per_packet_events ? 1 : kMaxRunAhead), src_index_(src_index),
      src_addr_(SimFabric::address_of(src_index)), imp_([&] {
          ImpairmentParams ip = p.impairment;
          ip.seed = seed;
          return ip;
      }())
{
    plain_ = imp_.none();
}

void SimLink::push_late(const InFlight& f)
{
    late_.push_back(f);
    std::push_heap(late_.begin(), late_.end(), later);
    fabric_.sim_.at(f.arrival, this, 1);
}

void SimLink::send(SimTime leaves, const PacketMeta& m, uint8_t* frame, uint32_t frame_len)
{
    if (plain_) return push_fifo(leaves + prop_ps_, m, frame, frame_len, 0);
    send_impaired(leaves, m, frame, frame_len);
}

void SimLink::send_impaired(SimTime leaves, const PacketMeta& m, uint8_t* frame, uint32_t frame_len)
{
    ImpairmentVerdict v = imp_.decide();
    if (v.drop) {
        dropped_++;
        dropped_burst_ += v.burst;
        if (fabric_.params_.drop_log)
            fabric_.drops_.push_back(DropRecord{leaves, src_index_, dst_.index(), m});
        if (fabric_.pcap_.pcapng())
            fabric_.capture_drop(leaves + prop_ps_, src_index_, dst_.index(), m, frame, frame_len,
                                 v.burst ? capture_note::kBurstDrop : capture_note::kLossDrop);
        if (frame) fabric_.frame_free(frame);
        return;
    }
    PacketMeta marked;
    const PacketMeta* mp = &m;
    if (v.ce) [[unlikely]] {  // a congested switch's mark: ECT becomes CE, in the frame or the meta
        if (frame ? wire::mark_ce(frame, frame_len) : m.ecn != wire::kEcnNotEct) {
            marked = m;
            marked.ecn = wire::kEcnCe;
            mp = &marked;
            ce_marked_++;
        }
    }
    InFlight f{leaves + prop_ps_ + v.extra_delay_ps, *mp, frame, frame_len, 0};
    if (v.extra_delay_ps) f.note |= capture_note::kBitDelayed;
    if (v.duplicate) {
        InFlight d = f;
        d.arrival += kPsPerNs;
        d.note |= capture_note::kBitCopy;
        f.note |= capture_note::kBitDuplicated;
        if (frame) {
            d.frame = fabric_.frame_alloc();
            std::memcpy(d.frame, frame, frame_len);
        }
        duplicated_++;
        push_late(d);
    }
    if (v.extra_delay_ps) {
        reordered_++;
        push_late(f);
        return;
    }
    push_fifo(f.arrival, *mp, frame, frame_len, f.note);
}

// Written in place: an InFlight built on the stack and then copied was read back with wider
// loads than its stores, which waits for the stores to retire (store-to-load forwarding
// fails); perf put half of send's samples on that wait.
void SimLink::push_fifo(SimTime arrival, const PacketMeta& m, uint8_t* frame, uint32_t frame_len, uint8_t note)
{
    InFlight& f = fifo_.push_slot();
    f.arrival = arrival;
    f.meta = m;
    f.frame = frame;
    f.frame_len = frame_len;
    f.note = note;
    if (fifo_.size() == 1) fabric_.sim_.at(arrival, this, 0);
}

void SimLink::fire(SimTime now, uint64_t arg)
{
    if (arg == 0) {
        // Deliver the head, then keep going while the next arrival precedes every other pending
        // event (bounded, so a polling step stays short) and the host has seen nothing new: a
        // host waiting for an event must wake at it, not at the end of the run (ACKs arriving
        // 0.4 ms apart were all seen at the last one's time).
        const uint64_t seen = dst_.host_events();
        for (int n = 0; !fifo_.empty() && n < max_run_ahead_ && dst_.host_events() == seen; n++) {
            if (fifo_.front().arrival > now && !fabric_.sim_.run_ahead_to(fifo_.front().arrival)) break;
            now = fabric_.sim_.now();
            // Delivered in place: only the port pushes onto a link, never a receiving NIC.
            deliver(fifo_.front());
            fifo_.pop();
        }
        if (!fifo_.empty()) fabric_.sim_.at(fifo_.front().arrival, this, 0);
    } else {
        while (!late_.empty() && late_.front().arrival <= now) {
            std::pop_heap(late_.begin(), late_.end(), later);
            InFlight f = late_.back();
            late_.pop_back();
            deliver(f);
        }
    }
}

void SimLink::deliver(const InFlight& f)
{
    delivered_++;
    if (fabric_.tap_) [[unlikely]] {  // one byte tested: the per-packet path without a tap stays as it was
        tap_deliver(f);
        return;
    }
    if (f.frame) {
        dst_.rx_frame(f.frame, f.frame_len);
        fabric_.frame_free(f.frame);
    } else {
        dst_.rx_packet(f.meta, nullptr, src_addr_);
    }
}

void SimLink::tap_deliver(const InFlight& f)
{
    fabric_.tap_rx(dst_, src_index_, f.arrival, f.meta, f.frame, f.frame_len, f.note);
}

void SimFabric::tap_rx(Nic& dst, uint32_t src, SimTime arrival, const PacketMeta& m, uint8_t* frame,
                       uint32_t frame_len, uint8_t link_note)
{
    uint8_t hdr[128];
    const uint8_t* bytes;
    uint32_t orig;
    size_t cap = capture_bytes(m, src, dst.index(), frame, frame_len, &bytes, hdr, &orig);
    if (!pcap_.pcapng()) {
        pcap_.write(arrival, bytes, static_cast<uint32_t>(cap), orig);
        if (frame) dst.rx_frame(frame, frame_len);
        else dst.rx_packet(m, nullptr, address_of(src));
    } else {
        // Written after the NIC saw the frame, with the drop it counted if any.
        flush_drops(arrival);
        capture_note::RxDropWatch watch(dst.counters().rx_drops);
        if (frame) dst.rx_frame(frame, frame_len);
        else dst.rx_packet(m, nullptr, address_of(src));
        std::string note;
        capture_note::append_link(&note, link_note);
        watch.append_reason(&note);
        pcap_.write(arrival, bytes, static_cast<uint32_t>(cap), orig,
                    pcapng::FrameNote{rx_interface(dst.index()), pcapng::kFlagInbound, note});
    }
    if (frame) frame_free(frame);
}

void SimFabric::deliver_to_nic(uint32_t dst, uint32_t src, SimTime arrival, const PacketMeta& m, uint8_t* frame,
                               uint32_t frame_len, uint8_t note)
{
    Nic* n = find_nic(dst);
    if (!n) {  // a host without a NIC yet: as a frame to an unplugged port
        if (frame) frame_free(frame);
        return;
    }
    if (tap_) [[unlikely]] return tap_rx(*n, src, arrival, m, frame, frame_len, note);
    if (frame) {
        n->rx_frame(frame, frame_len);
        frame_free(frame);
    } else {
        n->rx_packet(m, nullptr, address_of(src));
    }
}

// A switch port's record waits with the drops: windows run switches ahead of the clock the tap
// follows (network_sweep.cpp), so the record is written once the tap reaches its time.
void SimFabric::tap_switch(uint32_t iface, SimTime t, const FabricPacket& p, bool marked, const char* drop)
{
    uint8_t hdr[128];
    const uint8_t* bytes;
    PendingDrop r{t, pending_seq_++, p.dst, drop ? drop : marked ? capture_note::kCeMarked : "", 0, {}, iface + 1,
                  pcapng::kFlagOutbound | (drop ? pcapng::kFlagLinkDrop : 0)};
    size_t cap = capture_bytes(p.meta, p.src, p.dst, p.frame, p.frame_len, &bytes, hdr, &r.origlen);
    r.bytes.assign(bytes, bytes + cap);
    pending_drops_.push_back(std::move(r));
    std::push_heap(pending_drops_.begin(), pending_drops_.end(), pending_later);
}

void SimFabric::network_drop(SimTime t, uint32_t src, uint32_t dst, const PacketMeta& m, uint8_t* frame,
                             uint32_t frame_len, const char* cause)
{
    if (params_.drop_log) drops_.push_back(DropRecord{t, src, dst, m});
    if (pcap_.pcapng() && dst < host_limit()) capture_drop(t, src, dst, m, frame, frame_len, cause);
    if (frame) frame_free(frame);
}

// ---- the pcapng tap -----------------------------------------------------------------------

size_t SimFabric::capture_bytes(const PacketMeta& m, uint32_t src, uint32_t dst, const uint8_t* frame,
                                uint32_t frame_len, const uint8_t** bytes, uint8_t* hdr, uint32_t* origlen) const
{
    if (frame) {
        // UD datagrams (control and verbs) stay whole: they are small, a control datagram's
        // content is the protocol, and tshark calls a cut UD SEND malformed.
        bool ctrl = wire::has_deth(m.opcode);
        uint32_t snap = ctrl ? 0 : params_.pcap_snaplen;
        *bytes = frame;
        *origlen = frame_len;
        return snap && snap < frame_len ? snap : frame_len;
    }
    // payload-free: a truncated capture of the headers
    const Nic* d = nics_.size() > dst ? nics_[dst].get() : nullptr;
    wire::Headers h = roce_headers(m, address_of(src), d ? d->address() : address_of(dst));
    *bytes = hdr;
    *origlen = static_cast<uint32_t>(wire::frame_bytes_write_imm(m.dma_len));
    return wire::encode_headers(h, m.dma_len, hdr, 128);
}

void SimFabric::capture_drop(SimTime t, uint32_t src, uint32_t dst, const PacketMeta& m, const uint8_t* frame,
                             uint32_t frame_len, const char* cause)
{
    uint8_t hdr[128];
    const uint8_t* bytes;
    PendingDrop p{t, pending_seq_++, dst, cause, 0, {}, 0, pcapng::kFlagInbound | pcapng::kFlagLinkDrop};
    size_t cap = capture_bytes(m, src, dst, frame, frame_len, &bytes, hdr, &p.origlen);
    p.bytes.assign(bytes, bytes + cap);
    pending_drops_.push_back(std::move(p));
    std::push_heap(pending_drops_.begin(), pending_drops_.end(), pending_later);
}

void SimFabric::flush_drops(SimTime upto)
{
    while (!pending_drops_.empty() && pending_drops_.front().t <= upto) {
        std::pop_heap(pending_drops_.begin(), pending_drops_.end(), pending_later);
        PendingDrop& p = pending_drops_.back();
        pcap_.write(p.t, p.bytes.data(), static_cast<uint32_t>(p.bytes.size()), p.origlen,
                    pcapng::FrameNote{p.iface ? p.iface - 1 : rx_interface(p.dst), p.flags, p.cause});
        pending_drops_.pop_back();
    }
}

uint32_t SimFabric::rx_interface(uint32_t nic)
{
    if (nic >= rx_ifaces_.size()) rx_ifaces_.resize(nic + 1, 0);
    if (!rx_ifaces_[nic]) rx_ifaces_[nic] = pcap_.interface("nic" + std::to_string(nic) + ".rx") + 1;
    return rx_ifaces_[nic] - 1;
}

// ---- the fabric ---------------------------------------------------------------------------

SimFabric::SimFabric(const FabricParams& p)
    : params_(p), timers_(std::make_unique<Timers>(*this)),
      injector_(std::make_unique<Injector>(*this)),
      dpa_(p.dpa.enabled ? std::make_unique<DpaModel>(sim_, p.dpa) : nullptr)
{
    if (!params_.pcap_path.empty()) tap_ = pcap_.open(params_.pcap_path, nullptr);
    if (params_.topology) net_ = std::make_unique<SimNetwork>(*this, *params_.topology);
}

SimFabric::~SimFabric()
{
    flush_drops(UINT64_MAX);  // drops that would have arrived after the run ended
    // Links may still hold frames; their buffers belong to frame_blocks_ and go with them.
    net_.reset();
    links_.clear();
    ports_.clear();
    nics_.clear();
}

Nic& SimFabric::nic(uint32_t index, uint32_t num_workers)
{
    if (index >= nics_.size()) {
        nics_.resize(index + 1);
        ports_.resize(index + 1);
    }
    if (!nics_[index]) {
        nics_[index] = std::make_unique<Nic>(index, address_of(index), num_workers, params_.payload, this,
                                             id_seed(index));
        ports_[index] = std::make_unique<Port>(*this, *nics_[index], net_ ? net_->host_gbps(index) : params_.link.bandwidth_gbps);
        if (net_) {
            net_->attach_host_port(index, ports_[index].get());
            // DCQCN on every NIC of a network whose switches mark (Topology::dcqcn turns it off).
            if (net_->topology().sw.ecn && net_->topology().dcqcn) {
                DcqcnParams d = DcqcnParams::for_line_rate(net_->host_gbps(index));
                d.enabled = true;
                nics_[index]->set_dcqcn(d);
            }
        }
        if (dpa_) nics_[index]->set_cqe_dispatch(true);
        nics_[index]->count_host_events_in(&host_events_);
    }
    return *nics_[index];
}

Nic* SimFabric::find_nic(uint32_t index) { return index < nics_.size() ? nics_[index].get() : nullptr; }

Nic* SimFabric::nic_by_ip(uint32_t ip)
{
    if ((ip >> 24) != 10 || (ip & 0xFFFFFF) == 0) return nullptr;
    return find_nic((ip & 0xFFFFFF) - 1);
}

SimTime SimFabric::max_transit_ps() const
{
    if (net_) return net_->max_transit_ps();
    auto extra = [](const ImpairmentParams& i) {
        return (i.reorder > 0 ? i.reorder_max_ps : 0) + (i.duplicate > 0 ? kPsPerNs : 0);
    };
    SimTime worst = extra(params_.link.impairment);
    for (const auto& [pair, imp] : params_.directed) worst = std::max(worst, extra(imp));
    return static_cast<SimTime>(std::llround(params_.link.rtt_ms * 1e9 / 2.0)) + worst;
}

SimLink* SimFabric::link(uint32_t src, uint32_t dst)
{
    uint64_t k = (uint64_t{src} << 32) | dst;
    auto it = links_.find(k);
    if (it != links_.end()) return it->second.get();
    Nic* d = find_nic(dst);
    if (!d) return nullptr;
    LinkParams lp = params_.link;
    if (auto d_imp = params_.directed.find({src, dst}); d_imp != params_.directed.end()) lp.impairment = d_imp->second;
    auto l = std::make_unique<SimLink>(*this, *d, src, lp, link_seed(k));
    SimLink* raw = l.get();
    links_.emplace(k, std::move(l));
    return raw;
}

// Each direction gets its own stream, derived from the fabric seed and the pair.
uint64_t SimFabric::link_seed(uint64_t pair) const { return params_.seed * 0x9E3779B97F4A7C15ull ^ (pair * 0xD1B54A32D192ED03ull); }

// A NIC's QPNs and keys: from the fabric seed too, so a run is replayable, but from a stream of
// their own (a different odd multiplier than the links'), so they never shift a loss pattern.
uint64_t SimFabric::id_seed(uint32_t nic) const
{
    return (params_.seed + 0x632BE59BD9B4E019ull) * 0xA0761D6478BD642Full ^ (uint64_t{nic} * 0xE7037ED1A0B428DBull);
}

void SimFabric::reseed(uint64_t seed)
{
    params_.seed = seed;
    for (auto& [pair, l] : links_) l->reseed(link_seed(pair));
    if (net_) net_->reseed();
}

uint64_t SimFabric::packets_delivered() const
{
    uint64_t n = 0;
    for (const auto& [k, l] : links_) n += l->delivered();
    return n + (net_ ? net_->delivered() : 0);
}

void SimFabric::inject_frame(uint32_t dst_nic, std::vector<uint8_t> frame, SimTime at)
{
    injector_->add(Injected{dst_nic, std::move(frame)}, at);
}

void SimFabric::tx_ready(Nic& nic) { ports_[nic.index()]->kick(); }

bool SimFabric::dispatch_rx_cqe(Nic& nic, uint32_t worker, const hal_cqe& cqe)
{
    dpa_->offer(nic, worker, cqe);  // only NICs of a fabric with the cost model dispatch
    return true;
}

// Every NIC of the fabric is one hop away: its MAC is known from its IP.
bool SimFabric::resolve_mac(uint32_t ip, std::array<uint8_t, 6>* mac)
{
    Nic* n = nic_by_ip(ip);
    if (!n) return false;
    *mac = n->address().mac;
    return true;
}

void SimFabric::arm_timer(Nic& nic, uint32_t worker, uint32_t id, uint64_t deadline_ns)
{
    timers_->arm(nic.index(), worker, id, deadline_ns);
}

uint8_t* SimFabric::frame_alloc()
{
    if (free_frames_.empty()) {
        constexpr size_t kBlock = 256;
        frame_blocks_.push_back(std::make_unique_for_overwrite<uint8_t[]>(kBlock * kFrameCap));  // encode writes it
        for (size_t i = 0; i < kBlock; i++) free_frames_.push_back(frame_blocks_.back().get() + i * kFrameCap);
    }
    uint8_t* f = free_frames_.back();
    free_frames_.pop_back();
    return f;
}

void SimFabric::frame_free(uint8_t* f) { free_frames_.push_back(f); }

// ---- the process-wide fabric --------------------------------------------------------------

static std::unique_ptr<SimFabric>& process_slot()
{
    static std::unique_ptr<SimFabric> fabric;
    return fabric;
}

SimFabric* SimFabric::process(std::string* err)
{
    auto& f = process_slot();
    if (!f) {
        FabricParams p;
        if (!FabricParams::from_env(&p, err)) return nullptr;
        f = std::make_unique<SimFabric>(p);
    }
    return f.get();
}

void SimFabric::install(std::unique_ptr<SimFabric> fabric) { process_slot() = std::move(fabric); }

}  // namespace sdr::emu
