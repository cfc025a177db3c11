#include <sdr/emu/neighbour.hpp>
#include <sdr/emu/rt_nic.hpp>
#include <sdr/emu/capture_notes.hpp>
#include <sdr/emu/verbs_engine.hpp>
#include <sdr/emu/wire.hpp>

#include <sdr/emu/env_parse.hpp>

#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

namespace sdr::emu {

namespace {

// After the last piece of work the thread keeps spinning this long before it sleeps: packets
// come in trains, and a sleep costs tens of microseconds to wake from.
constexpr uint64_t kSpinAfterWorkNs = 200'000;
// The capture reaches its file at least this often, so tshark can follow a live run and a
// killed process leaves a readable pcap.
constexpr uint64_t kPcapFlushNs = 100'000'000;
// Deadlines closer than this are spun for, not slept for (a sleep overshoots by the timer slack and the scheduler).
constexpr uint64_t kSpinBeforeDeadlineNs = 100'000;
constexpr uint64_t kMaxSleepNs = 10'000'000;
constexpr uint32_t kTxBudget = 256;  // packets per round, so receiving is never starved
// Frames go to the kernel in batches this small: it copies each frame out of its buffer, and
// 32 frames (about 130 KB) are still in L2 when it does; after 256 they were not (perf on
// AF_XDP: the kernel's copy out of the frames took 40 % longer).
constexpr uint32_t kTxFlushEvery = 32;
// The kernel's receive-drop counters reach the port's counters this often (a system call each
// time), and before every sleep: drops show while the run lasts, not only when someone asks.
constexpr uint64_t kKernelStatsEveryNs = 10'000'000;

uint64_t mono_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

// What a capture stamps a frame with: the wall clock, as tcpdump does, so captures taken in two
// namespaces or on two hosts line up with each other and with logs; the NIC itself keeps the
// monotonic clock. One vDSO read per captured frame, none without a capture: deriving the stamp
// from a per-batch offset to the monotonic clock would still read a clock per frame.
uint64_t wall_ns()
{
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

bool RtParams::from_env(RtParams* out, std::string* err)
{
    RtParams p = *out;
    double v;
    if (!impairment_from_env("SDR_RT_", &p.shaper.impairment, err)) return false;
    if (!u64_from_env("SDR_RT_SEED", &p.shaper.impairment.seed, err)) return false;
    if (const char* s = std::getenv("SDR_RT_DELAY_MS")) {
        if (!parse_double("SDR_RT_DELAY_MS", s, 0, 10'000, &v, err)) return false;
        p.shaper.delay_ns = static_cast<uint64_t>(v * 1e6);
    }
    if (const char* s = std::getenv("SDR_RT_RATE_GBPS")) {
        if (!parse_double("SDR_RT_RATE_GBPS", s, 0, 1e4, &v, err)) return false;
        p.shaper.rate_gbps = v;
    }
    if (const char* s = std::getenv("SDR_RT_CORE")) {
        if (!parse_double("SDR_RT_CORE", s, -1, 4095, &v, err)) return false;
        p.core = static_cast<int>(v);
    }
    if (const char* s = std::getenv("SDR_RT_WORKER_THREADS")) {
        if (!parse_double("SDR_RT_WORKER_THREADS", s, 0, 64, &v, err)) return false;
        p.worker_threads = static_cast<uint32_t>(v);
    }
    if (const char* s = std::getenv("SDR_RT_WORKER_CORES")) {  // "2,3,..."
        p.worker_cores.clear();
        for (const char* c = s; *c;) {
            char* end;
            long core = std::strtol(c, &end, 10);
            if (end == c || core < 0 || (*end && *end != ',')) {
                if (err) *err = std::string("SDR_RT_WORKER_CORES='") + s + "': expected CPU numbers like 2,3";
                return false;
            }
            p.worker_cores.push_back(static_cast<int>(core));
            c = *end ? end + 1 : end;
        }
    }
    if (const char* s = std::getenv("SDR_RT_BUSY_POLL")) p.busy_poll = std::string(s) == "1";
    if (const char* s = std::getenv("SDR_RT_PCAP")) p.pcap_path = s;
    uint64_t snap = p.pcap_snaplen;
    if (!u64_from_env("SDR_RT_SNAPLEN", &snap, err)) return false;
    p.pcap_snaplen = static_cast<uint32_t>(snap);
    if (const char* s = std::getenv("SDR_RT_RX_RING_FRAMES")) {
        if (!parse_double("SDR_RT_RX_RING_FRAMES", s, 64, 65536, &v, err)) return false;
        p.port.rx_ring_frames = static_cast<uint32_t>(v);
    }
    if (const char* s = std::getenv("SDR_RT_RAW_RING")) {
        const std::string r = s;
        if (r != "blocks" && r != "frames") {
            if (err) *err = "SDR_RT_RAW_RING must be blocks or frames";
            return false;
        }
        p.port.frame_ring = r == "frames";
    }
    if (const char* s = std::getenv("SDR_RT_XDP_MODE")) {
        std::string m = s;
        if (m != "auto" && m != "native" && m != "generic") {
            if (err) *err = "SDR_RT_XDP_MODE must be auto, native or generic";
            return false;
        }
        p.port.xdp_mode = m;
    }
    *out = p;
    return true;
}

RtNic::RtNic(const RtParams& p, std::unique_ptr<Port> port) : p_(p), port_(std::move(port)), shaper_(p.shaper) {}

std::unique_ptr<RtNic> RtNic::open(const std::string& kind, const std::string& ifname, uint32_t num_workers,
                                   const RtParams& p, std::string* err)
{
    auto port = open_port(kind, ifname, p.port, err);
    if (!port) return nullptr;
    std::unique_ptr<RtNic> r(new RtNic(p, std::move(port)));
    if (!p.pcap_path.empty() && !r->pcap_.open(p.pcap_path, err)) return nullptr;
    r->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->wake_fd_ < 0) {
        *err = std::string("eventfd: ") + std::strerror(errno);
        return nullptr;
    }
    // No seed: the NIC draws its QPNs and keys from getrandom() (ids.hpp).
    r->nic_ = std::make_unique<Nic>(0, r->port_->info().addr, num_workers, true, r.get(), std::nullopt);
    r->nic_->set_tx_prefetch(true);
    r->nic_->set_cqe_dispatch(p.worker_threads != 0);
    if (p.worker_threads)
        r->workers_ = std::make_unique<RtWorkers>(*r->nic_, std::min(p.worker_threads, num_workers), p.worker_cores,
                                                  [raw = r.get()] { raw->notify_host(); });
    r->thread_ = std::thread([raw = r.get()] { raw->run(); });
    return r;
}

RtNic::~RtNic()
{
    stop_ = true;
    kick();
    if (thread_.joinable()) thread_.join();
    workers_.reset();  // before the NIC they run handlers on
    nic_.reset();
    if (wake_fd_ >= 0) close(wake_fd_);
}

uint64_t RtNic::now_ns() { return mono_ns(); }

void RtNic::kick()
{
    uint64_t one = 1;
    if (wake_fd_ >= 0 && write(wake_fd_, &one, sizeof one) < 0) {}  // a full counter is awake enough
}

void RtNic::tx_ready(Nic&)
{
    // From the polling thread the next round sees it anyway; from the host, wake the thread.
    if (std::this_thread::get_id() != thread_.get_id()) kick();
}

void RtNic::arm_timer(Nic&, uint32_t worker, uint32_t id, uint64_t deadline_ns)
{
    uint64_t key = (uint64_t{worker} << 32) | id;
    timer_deadline_[key] = deadline_ns;  // re-arming replaces; the old queue entry goes stale
    timer_queue_.emplace(deadline_ns, key);
    if (std::this_thread::get_id() != thread_.get_id()) kick();
}

bool RtNic::dispatch_rx_cqe(Nic&, uint32_t worker, const hal_cqe& cqe)
{
    if (!workers_) return false;
    workers_->post(worker, cqe);
    return true;
}

bool RtNic::resolve_mac(uint32_t ip, std::array<uint8_t, 6>* mac)
{
    const PortInfo& pi = port_->info();
    return resolve_neighbour(pi.ifname, pi.addr, ip, kResolveTimeoutNs, mac) == 0;
}

void RtNic::mcast_membership(Nic&, uint32_t group_ip, bool member)
{
    if (port_->mcast_filter(wire::ipv4_multicast_mac(group_ip), member)) c_.mcast_filter_errors++;
}

void RtNic::verbs_cq_event(Nic&, uint32_t cq, bool solicited)
{
    if (cq_listener_) cq_listener_(cq, solicited);
}

// Notifying under host_mu_ closes the gap between a waiter's check and its sleep.
void RtNic::notify_host()
{
    std::lock_guard<std::mutex> g(host_mu_);
    host_cv_.notify_all();
}

void RtNic::wait_event(uint64_t deadline_ns)
{
    std::unique_lock<std::mutex> lk(host_mu_);
    const uint64_t before = nic_->host_events();
    while (nic_->host_events() == before) {
        uint64_t now = mono_ns();
        if (now >= deadline_ns) return;
        // steady_clock is CLOCK_MONOTONIC on Linux; wake at least every 100 ms regardless.
        uint64_t until = std::min(deadline_ns, now + 100'000'000);
        host_cv_.wait_until(lk, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(until)));
    }
}

PortStats RtNic::port_stats()
{
    std::lock_guard<std::mutex> g(mu_);
    port_->read_kernel_stats();
    return port_->stats();
}

ShaperCounters RtNic::shaper_counters()
{
    std::lock_guard<std::mutex> g(mu_);
    return shaper_.counters();
}

bool RtNic::share_port(std::string* err)
{
    if (share_) return true;
    if (!port_->can_tx_local()) {
        *err = port_->info().kind + ":" + port_->info().ifname +
               ": an xdp: port takes one process (its queue binds one AF_XDP socket); raw: takes several";
        return false;
    }
    share_ = std::make_unique<ProcessShare>(if_nametoindex(port_->info().ifname.c_str()));
    nic_->verbs().set_port_share(share_.get());
    return true;
}

RtCounters RtNic::counters()
{
    std::lock_guard<std::mutex> g(mu_);
    return c_;
}

void RtNic::run()
{
    if (p_.core >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(p_.core, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort: logged by the tools
    }
    uint64_t last_work = mono_ns();
    while (!stop_.load(std::memory_order_relaxed)) {
        uint64_t now = mono_ns(), next;
        bool did, changed, sleep;
        {
            std::lock_guard<std::mutex> g(mu_);
            did = poll_once(now);
            uint64_t ev = nic_->host_events();
            changed = ev != host_events_seen_;
            host_events_seen_ = ev;
            next = next_deadline();
            if (did) last_work = now;
            sleep = !did && !p_.busy_poll && now - last_work >= kSpinAfterWorkNs;
            if (sleep || now - kernel_stats_read_ns_ >= kKernelStatsEveryNs) {
                port_->read_kernel_stats();
                kernel_stats_read_ns_ = now;
            }
            if (pcap_dirty_ && (sleep || now - pcap_flushed_ns_ >= kPcapFlushNs)) {
                pcap_.flush();
                pcap_dirty_ = false;
                pcap_flushed_ns_ = now;
            }
        }
        if (changed) notify_host();
        if (sleep) idle(next);
    }
}

bool RtNic::poll_once(uint64_t now)
{
    c_.polls++;
    bool did = receive();
    did |= fire_timers(now);
    did |= transmit(now);
    return did;
}

bool RtNic::receive()
{
    // A frame is stamped when the port took it: the kernel's stamp, else (AF_XDP) ours, read
    // before the NIC works on it.
    if (pcap_.pcapng())  // the frame is recorded after the NIC saw it, with the drop it counted
        return port_->rx_burst(p_.port.rx_batch, [&](const uint8_t* f, size_t len, uint64_t kernel_ns) {
            const uint64_t at = kernel_ns ? kernel_ns : wall_ns();
            capture_note::RxDropWatch watch(nic_->counters().rx_drops);
            nic_->rx_frame(f, len);
            std::string note;
            watch.append_reason(&note);
            capture_ng(at, f, len, false, pcapng::kFlagInbound, note);
        }) > 0;
    return port_->rx_burst(p_.port.rx_batch, [&](const uint8_t* f, size_t len, uint64_t kernel_ns) {
        capture(kernel_ns, f, len);
        nic_->rx_frame(f, len);
    }) > 0;
}

bool RtNic::fire_timers(uint64_t now)
{
    bool did = false;
    while (!timer_queue_.empty() && timer_queue_.begin()->first <= now) {
        auto [deadline, key] = *timer_queue_.begin();
        timer_queue_.erase(timer_queue_.begin());
        auto it = timer_deadline_.find(key);
        if (it == timer_deadline_.end() || it->second != deadline) continue;  // re-armed since
        timer_deadline_.erase(it);
        nic_->timer_fired(static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key));
        did = true;
    }
    return did;
}

bool RtNic::transmit(uint64_t now)
{
    bool did = false;
    const size_t cap = port_->info().max_frame;
    // What the shaper did to a frame: its capture_note bits, recorded only in a pcapng.
    // Stamped as it is handed to the port (0: now).
    auto tx_capture = [&](const uint8_t* f, size_t len, uint8_t note_bits) {
        if (!pcap_.pcapng()) return capture(0, f, len);
        std::string note;
        capture_note::append_link(&note, note_bits);
        capture_ng(0, f, len, true, pcapng::kFlagOutbound, note);
    };
    // A multicast frame on a shared port goes by tx_local: the group's members in the other
    // processes get it from the tap, the link once.
    auto to_group_here = [&](const uint8_t* f) { return share_ && (f[0] & 1); };
    auto to_port = [&](const uint8_t* f, size_t len, uint8_t note_bits) {
        if (to_group_here(f)) {
            tx_capture(f, len, note_bits);
            (void)port_->tx_local(f, len);  // a refusal is the kernel's drop (tx_errors)
            return true;
        }
        uint8_t* b = port_->tx_alloc();
        if (!b) return false;
        std::memcpy(b, f, len);
        tx_capture(b, len, note_bits);
        port_->tx_commit(len);
        return true;
    };
    for (uint32_t i = 0; i < kTxBudget && nic_->tx_pending(); i++) {
        uint8_t* buf = port_->tx_alloc();  // the frame is encoded straight into the port's buffer
        if (!buf) break;
        TxPacket pk;
        if (!nic_->tx_next(&pk)) break;
        did = true;
        size_t len = pk.local_error ? 0 : nic_->tx_encode(pk, buf, cap);
        if (!pk.local_error && !len) c_.tx_too_big++;  // larger than the port's frames: lost
        if (len && std::memcmp(buf, port_->info().addr.mac.data(), 6) == 0) {
            // To ourselves (two QPs of this NIC): the kernel would not hand the frame back, so
            // it goes straight to our receive path once it has "left" (tx_done first, as on
            // the wire), uncommitted: the next tx_alloc reuses the buffer. No impairment: it
            // never crosses the link. On a shared port, QP1's frames also go to the other
            // processes, and a frame for a verbs QP of theirs only to them.
            bool ours = true;
            if (share_) {
                constexpr size_t kBth = wire::kEthBytes + wire::kIpv4Bytes + wire::kUdpBytes;
                const uint32_t qpn =
                    len > kBth + 8 ? uint32_t{buf[kBth + 5]} << 16 | buf[kBth + 6] << 8 | buf[kBth + 7] : 0;
                const bool gsi = qpn == wire::kGsiQpn;
                ours = gsi || !VerbsEngine::is_verbs_qpn(qpn) || nic_->verbs().owns_qpn(qpn);
                if (gsi || !ours) (void)port_->tx_local(buf, len);  // counted by the port
            }
            tx_capture(buf, len, 0);  // recorded once, as it left
            nic_->tx_done(pk);
            if (!ours) continue;
            c_.looped++;
            nic_->rx_frame(buf, len);
            continue;
        }
        if (len) {
            Shaper::Verdict v = shaper_.decide();
            if (v.ce && wire::mark_ce(buf, len)) shaper_.count_ce_mark();
            if (v.copies && v.direct) {
                // A committed buffer belongs to the port: keep the duplicate's bytes first.
                if (v.copies == 2) dup_.assign(buf, buf + len);
                tx_capture(buf, len, v.copies == 2 ? capture_note::kBitDuplicated : 0);
                if (to_group_here(buf)) (void)port_->tx_local(buf, len);  // the buffer stays ours
                else port_->tx_commit(len);
                if (v.copies == 2) to_port(dup_.data(), len, capture_note::kBitCopy);
            } else if (v.copies) {
                shaper_.hold(now, buf, len, v);
            } else if (pcap_.pcapng()) {  // dropped: recorded where it would have left
                capture_ng(0, buf, len, true, pcapng::kFlagOutbound | pcapng::kFlagLinkDrop,
                           v.burst ? capture_note::kBurstDrop : capture_note::kLossDrop);
            }
        }
        nic_->tx_done(pk);  // local completion: the frame is handed to the port
        if (i % kTxFlushEvery == kTxFlushEvery - 1) port_->tx_flush();
    }
    if (!shaper_.empty()) {
        size_t before = shaper_.counters().held_frames;
        shaper_.release(now, to_port);
        did |= shaper_.counters().held_frames != before;
    }
    port_->tx_flush();
    return did;
}

uint64_t RtNic::next_deadline() const
{
    uint64_t t = shaper_.next_ns();
    if (!timer_queue_.empty()) t = std::min(t, timer_queue_.begin()->first);
    return t;
}

// Control datagrams (UD SEND) stay whole; data frames are cut at the snaplen.
uint32_t RtNic::capture_len(const uint8_t* f, size_t len) const
{
    constexpr size_t kBthOpcode = wire::kEthBytes + wire::kIpv4Bytes + wire::kUdpBytes;
    bool ctrl = len > kBthOpcode && (f[kBthOpcode] == wire::kOpUdSendOnly || f[kBthOpcode] == wire::kOpUdSendOnlyImm);
    return (!ctrl && p_.pcap_snaplen && p_.pcap_snaplen < len) ? p_.pcap_snaplen : static_cast<uint32_t>(len);
}

void RtNic::capture(uint64_t at_ns, const uint8_t* f, size_t len)
{
    if (!pcap_.is_open()) return;
    pcap_.write_ns(at_ns ? at_ns : wall_ns(), f, capture_len(f, len), static_cast<uint32_t>(len), pcapng::FrameNote{});
    pcap_dirty_ = true;
}

void RtNic::capture_ng(uint64_t at_ns, const uint8_t* f, size_t len, bool tx, uint32_t flags, const std::string& note)
{
    uint32_t& id = tx ? pcap_tx_iface_ : pcap_rx_iface_;
    if (!id) id = pcap_.interface(port_->info().ifname + (tx ? ".tx" : ".rx")) + 1;
    pcap_.write_ns(at_ns ? at_ns : wall_ns(), f, capture_len(f, len), static_cast<uint32_t>(len),
                   pcapng::FrameNote{id - 1, flags, note});
    pcap_dirty_ = true;
}

// Sleep until a frame arrives, the host kicks, or the next deadline is near.
void RtNic::idle(uint64_t until_ns)
{
    uint64_t now = mono_ns();
    if (until_ns <= now + kSpinBeforeDeadlineNs) return;
    uint64_t sleep_ns = std::min(until_ns - now - kSpinBeforeDeadlineNs, kMaxSleepNs);
    // Frames the kernel has not taken yet (a full socket buffer): wake when it can take more.
    const short port_events = static_cast<short>(POLLIN | (port_->tx_backlog() ? POLLOUT : 0));
    pollfd fds[2] = {{port_->fd(), port_events, 0}, {wake_fd_, POLLIN, 0}};
    timespec ts{static_cast<time_t>(sleep_ns / 1'000'000'000), static_cast<long>(sleep_ns % 1'000'000'000)};
    {
        std::lock_guard<std::mutex> g(mu_);
        c_.idle_sleeps++;
        if (nic_->tx_pending()) return;  // the host posted while we decided to sleep
    }
    if (ppoll(fds, 2, &ts, nullptr) > 0 && (fds[1].revents & POLLIN)) {
        uint64_t n;
        if (read(wake_fd_, &n, sizeof n) < 0) {}  // drained; EAGAIN is fine
    }
}

}  // namespace sdr::emu
