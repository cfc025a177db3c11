// The `verbs:` backend of libsdr's host seam (host/include/sdr/host/device.hpp): SDR's
// firmware on host worker threads (worker.hpp) over any rdma-core device. Firmware memory is
// host memory, so the firmware-state operations are plain stores and calls; transport QPs are
// UC (or RC) QPs of the device, root keys the device's indirect keys (root_keys.hpp), the
// control QP a UD QP. Loaded by libsdr with dlopen (host/src/device_verbs_loader.cpp) through
// the one function this module exports, sdr_hal_verbs_open.
#include "root_keys.hpp"
#include "worker.hpp"

#include <sdr/host/device.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

namespace sdr::hal_verbs {

namespace {

using host::Device;
using host::PeerAddress;
using host::RxGeometry;

constexpr uint8_t kPort = 1;
constexpr uint32_t kSqDepth = 1024;  // per channel QP
constexpr uint32_t kRqDepth = 2048;  // per channel QP: absorbs a burst between reposts
constexpr uint32_t kCtrlRecvDepth = 256;  // sdr_ctrl.h's ring
constexpr uint32_t kCtrlSendDepth = 64;
constexpr uint32_t kGrhBytes = 40;
constexpr uint64_t kLifetimeMarginNs = 5'000'000;  // queues and scheduling, as on raw:

// Every transport QP starts at PSN 0, as the emulated NIC's (raw:, sim:) do: the QP-info blob
// has no PSN field, and a verbs: receiver must accept a raw: sender's first packet (UC counts a
// PSN behind the expected one as a duplicate and drops it).
constexpr uint32_t kFirstPsn = 0;

uint64_t mono_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

ibv_gid gid_of(uint32_t ip)
{
    ibv_gid g{};
    g.raw[10] = g.raw[11] = 0xFF;
    const uint32_t n = htonl(ip);
    std::memcpy(&g.raw[12], &n, 4);
    return g;
}

bool env_u32(const char* name, uint32_t lo, uint32_t hi, uint32_t* out, std::string* err)
{
    const char* s = std::getenv(name);
    if (!s) return true;
    char* end = nullptr;
    unsigned long v = std::strtoul(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return *err = std::string(name) + "='" + s + "': expected " + std::to_string(lo) + ".." + std::to_string(hi),
               false;
    *out = static_cast<uint32_t>(v);
    return true;
}

struct CtrlQp {
    ibv_qp* qp = nullptr;
    ibv_comp_channel* channel = nullptr;  // wakes a host in wait_event when a datagram arrives
    ibv_cq* cq = nullptr;
    ibv_mr* mr = nullptr;
    ibv_ah* ah = nullptr;
    uint32_t qkey = 0, peer_qpn = 0, slot_bytes = 0;
    std::vector<uint8_t> buf;  // kCtrlRecvDepth receive slots (GRH + datagram), then the send slots
    uint64_t sends = 0, send_done = 0;
    std::vector<std::pair<uint32_t, uint32_t>> ready;  // (receive slot, bytes) in arrival order
    size_t ready_head = 0;
};

class VerbsDevice final : public Device {
public:
    VerbsDevice(const std::string& name, uint32_t channels) : Device("verbs", name), channels_(channels) {}
    ~VerbsDevice() override
    {
        for (auto& [h, c] : ctrls_) destroy_ctrl(c.get());
        ex_.reset();  // threads stop before their QPs and CQs go, and before the firmware's table
        std::free(fw_);
        for (auto& [tag, q] : qps_) ibv_destroy_qp(q->qp);
        keys_.reset();
        for (auto& [k, mr] : mrs_) ibv_dereg_mr(mr);
        if (pd_) ibv_dealloc_pd(pd_);
        if (ctx_) ibv_close_device(ctx_);
    }

    bool open(const std::string& ibdev, std::string* err)
    {
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        if (!list) return *err = std::string("ibv_get_device_list: ") + std::strerror(errno), false;
        std::string names;
        for (int i = 0; i < n && !ctx_; i++) {
            names += std::string(names.empty() ? "" : ", ") + ibv_get_device_name(list[i]);
            if (ibdev == ibv_get_device_name(list[i])) ctx_ = ibv_open_device(list[i]);
        }
        ibv_free_device_list(list);
        if (!ctx_)
            return *err = "no RDMA device '" + ibdev + "' (devices: " + (names.empty() ? "none" : names) + ")", false;
        if (!(pd_ = ibv_alloc_pd(ctx_))) return *err = std::string("ibv_alloc_pd: ") + std::strerror(errno), false;
        if (!query_port(err)) return false;
        fw_ = static_cast<fw_device*>(std::calloc(1, sizeof(fw_device)));
        if (!fw_) return *err = "out of memory for the firmware's QP table", false;
        if (!choose_root_keys(ibdev, err)) return false;
        ExecutorParams p;
        p.workers = 1;
        if (!env_u32("SDR_RT_WORKER_THREADS", 0, 64, &p.workers, err)) return false;
        p.workers = std::max(1u, std::min(p.workers, channels_));
        if (const char* s = std::getenv("SDR_RT_WORKER_CORES"))
            for (const char* c = s; *c;) {
                char* end = nullptr;
                long v = std::strtol(c, &end, 10);
                if (end == c || v < 0) return *err = std::string("SDR_RT_WORKER_CORES='") + s + "': expected CPU numbers like 2,3", false;
                p.cores.push_back(static_cast<int>(v));
                c = *end == ',' ? end + 1 : end;
            }
        if (!env_u32("SDR_SEND_CTX_SWR_BATCH_SIZE", 1, 256, &p.post_batch, err)) return false;
        if (const char* s = std::getenv("SDR_RT_DELAY_MS")) lifetime_ns_ += static_cast<uint64_t>(std::atof(s) * 1e6);
        ex_ = std::make_unique<Executor>(ctx_, fw_, p, err);
        if (!ex_->ok()) return false;
        ex_->set_copier(staging_);
        ex_->start();
        return true;
    }

    PeerAddress address() const override { return addr_; }
    uint32_t num_channels() const override { return channels_; }
    // One packet per WRITE: the SDR MTU must fit the port's path MTU (RoCEv2 headers 78 B).
    uint32_t max_frame_bytes() const override { return mtu_bytes_ + 78; }
    uint64_t max_packet_lifetime_ns() const override { return lifetime_ns_; }

    uint32_t mr_reg(void* addr, size_t len) override
    {
        ibv_mr* mr = ibv_reg_mr(pd_, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        if (!mr) return fail("ibv_reg_mr"), 0;
        mrs_[mr->lkey] = mr;
        return mr->lkey;
    }
    bool mr_dereg(uint32_t lkey) override
    {
        auto it = mrs_.find(lkey);
        if (it == mrs_.end() || ibv_dereg_mr(it->second)) return false;
        mrs_.erase(it);
        return true;
    }
    bool mr_covers(uint32_t lkey, uint64_t addr, uint64_t len) const override
    {
        auto it = mrs_.find(lkey);
        if (it == mrs_.end()) return false;
        const uint64_t base = reinterpret_cast<uint64_t>(it->second->addr);
        return addr >= base && len <= it->second->length && addr - base <= it->second->length - len;
    }

    // Firmware memory is host memory: plain allocations, stores and calls.
    void* nic_alloc(size_t bytes) override
    {
        const size_t n = (bytes + 63) & ~size_t{63};
        void* p = std::aligned_alloc(64, n ? n : 64);
        if (p) std::memset(p, 0, n ? n : 64);
        return p;
    }
    void nic_free(void* p) override { std::free(p); }
    bool nic_write(void* dst, const void* src, size_t len) override
    {
        std::memcpy(dst, src, len);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        return true;
    }
    bool rx_state_init(fw_rx_qp* rx, void* mem, const RxGeometry& g) override
    {
        fw_rx_qp_init(rx, mem, g.imm, g.nslots, g.max_packets, g.log_packets_per_chunk, g.mtu_log, g.generations,
                      g.window);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        return true;
    }
    bool rx_slot_arm(fw_rx_qp* rx, uint32_t slot, uint32_t generation, uint32_t msg_id, uint64_t length,
                     uint64_t* window, size_t window_words) override
    {
        for (size_t i = 0; i < window_words; i++) __atomic_store_n(&window[i], 0, __ATOMIC_RELAXED);
        fw_rx_slot_arm(rx, slot, generation, msg_id, length);  // publishes the tag last (release)
        return true;
    }
    bool rx_slot_disarm(fw_rx_qp* rx, uint32_t slot) override
    {
        fw_rx_slot_disarm(rx, slot);
        return true;
    }
    bool rx_chunk_expand(const fw_rx_qp* rx, uint32_t slot, uint32_t chunk, uint64_t* bits, uint32_t nwords) override
    {
        fw_rx_chunk_expand(rx, slot, chunk, bits, nwords);
        return true;
    }
    bool fw_qp_attach(uint32_t index, const fw_qp& q) override
    {
        if (staging_ && q.rx) staging_->attach(index, q.rx->window.host_addr);
        __atomic_store_n(&fw_->qps[index].rx, q.rx, __ATOMIC_RELEASE);
        __atomic_store_n(&fw_->qps[index].tx, q.tx, __ATOMIC_RELEASE);
        return true;
    }
    void fw_qp_detach(uint32_t index) override
    {
        __atomic_store_n(&fw_->qps[index].rx, nullptr, __ATOMIC_RELEASE);
        __atomic_store_n(&fw_->qps[index].tx, nullptr, __ATOMIC_RELEASE);
        ex_->checkpoint();  // no worker still runs a handler of this QP
    }
    bool send_post(fw_tx_qp* tx, fw_send_wr* entry, const fw_send_wr& wr, uint32_t head, uint32_t qp_index) override
    {
        *entry = wr;
        hal_store_release32(&tx->head, head);
        ex_->doorbell(qp_index);
        return true;
    }

    // Transport QPs: the handle is the QP's tag.
    uint32_t qp_create(uint32_t tag, uint32_t channel, bool rc, uint32_t* qpn) override
    {
        auto q = std::make_unique<ChannelQp>();
        q->tag = tag;
        q->rc = rc;
        q->rx = ex_->rx_worker(channel);
        q->tx = ex_->tx_worker(fw_tag_qp(tag));
        ibv_qp_init_attr ia{};
        ia.send_cq = q->tx->cq;
        ia.recv_cq = q->rx->cq;
        ia.cap.max_send_wr = kSqDepth;
        ia.cap.max_recv_wr = kRqDepth;
        ia.cap.max_send_sge = 1;
        ia.cap.max_recv_sge = 1;
        ia.qp_type = rc ? IBV_QPT_RC : IBV_QPT_UC;
        if (!(q->qp = ibv_create_qp(pd_, &ia))) return fail("ibv_create_qp"), kInvalid;
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = kPort;
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
        if (ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
            fail("ibv_modify_qp(INIT)");
            ibv_destroy_qp(q->qp);
            return kInvalid;
        }
        q->sq_depth = kSqDepth;
        q->rq_depth = kRqDepth;
        q->cookies.assign(q->sq_depth, ChannelQp::kNoCookie);
        q->batch.resize(ex_->params().post_batch);
        q->sges.resize(ex_->params().post_batch);
        std::string why;
        if (!ex_->attach(q.get(), &why)) {
            say(why);
            ibv_destroy_qp(q->qp);
            return kInvalid;
        }
        *qpn = q->qp->qp_num;
        qps_[tag] = std::move(q);
        return tag;
    }
    void qp_destroy(uint32_t handle) override
    {
        auto it = qps_.find(handle);
        if (it == qps_.end()) return;
        ex_->detach(it->second.get());
        ibv_destroy_qp(it->second->qp);
        qps_.erase(it);
    }
    bool qp_connect(uint32_t handle, const PeerAddress& peer, uint32_t remote_qpn, uint64_t rc_timeout_ns) override
    {
        auto it = qps_.find(handle);
        if (it == qps_.end()) return say("no such transport QP"), false;
        ibv_qp* qp = it->second->qp;
        const bool rc = it->second->rc;
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = mtu_;
        a.dest_qp_num = remote_qpn;
        a.rq_psn = kFirstPsn;
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = gid_of(peer.ip);
        a.ah_attr.grh.sgid_index = gid_index_;
        a.ah_attr.grh.hop_limit = 64;
        a.ah_attr.port_num = kPort;
        int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        if (rc) {
            a.max_dest_rd_atomic = 1;
            a.min_rnr_timer = 1;  // 0.01 ms: the workers repost receives continuously
            mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        }
        if (ibv_modify_qp(qp, &a, mask)) return fail("ibv_modify_qp(RTR)"), false;
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = kFirstPsn;
        mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        if (rc) {
            // The IBTA's local ACK timeout is 4.096 us x 2^timeout: the least at or above the
            // host's rc_timeout_ns (at most 2^31 x 4.096 us).
            uint8_t t = 1;
            while (t < 31 && (uint64_t{4096} << t) < rc_timeout_ns) t++;
            a.timeout = t;
            a.retry_cnt = 7;
            a.rnr_retry = 7;
            a.max_rd_atomic = 1;
            mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        }
        if (ibv_modify_qp(qp, &a, mask)) return fail("ibv_modify_qp(RTS)"), false;
        return true;
    }
    // The root key lives in the PD: every QP of the PD resolves it, nothing to bind; staged keys
    // learn which generation of which SDR QP it serves (the transport QP handle is its tag).
    bool qp_bind_root_key(uint32_t handle, uint32_t rkey) override
    {
        if (staging_) staging_->bind(fw_tag_qp(handle), fw_tag_generation(handle), rkey);
        return true;
    }
    uint32_t root_key_create(uint32_t nslots, uint64_t slot_bytes) override
    {
        std::string why;
        uint32_t k = keys_->create(nslots, slot_bytes, &why);
        if (!k) say(why);
        return k;
    }
    void root_key_destroy(uint32_t rkey) override { keys_->destroy(rkey); }
    bool root_key_set(uint32_t rkey, uint32_t slot, uint32_t lkey, uint64_t addr, uint64_t len) override
    {
        auto it = mrs_.find(lkey);
        if (it == mrs_.end()) return say("no region with that key"), false;
        std::string why;
        return keys_->set(rkey, slot, it->second, addr, len, &why) || (say(why), false);
    }
    bool root_key_null(uint32_t rkey, uint32_t slot) override
    {
        std::string why;
        return keys_->null(rkey, slot, &why) || (say(why), false);
    }

    // The control QP: a UD QP with its own CQ, polled by the host's ctrl calls.
    uint32_t ctrl_qp_create(uint32_t* qpn, uint32_t* qkey) override
    {
        auto c = std::make_unique<CtrlQp>();
        c->slot_bytes = mtu_bytes_ + kGrhBytes;
        c->buf.assign(size_t{c->slot_bytes} * (kCtrlRecvDepth + kCtrlSendDepth), 0);
        uint32_t k = 0;
        while (!(k & 0x7FFFFFFF)) k = static_cast<uint32_t>(std::rand()) ^ static_cast<uint32_t>(mono_ns());
        c->qkey = k & 0x7FFFFFFF;  // the high bit marks controlled Q_Keys (IBTA)
        c->channel = ibv_create_comp_channel(ctx_);
        // The channel's fd is valid once a CQ uses it (emu/verbs/README.md): made in that order.
        if (c->channel) c->cq = ibv_create_cq(ctx_, kCtrlRecvDepth + kCtrlSendDepth, nullptr, c->channel, 0);
        c->mr = ibv_reg_mr(pd_, c->buf.data(), c->buf.size(), IBV_ACCESS_LOCAL_WRITE);
        ibv_qp_init_attr ia{};
        ia.send_cq = ia.recv_cq = c->cq;
        ia.cap.max_send_wr = kCtrlSendDepth;
        ia.cap.max_recv_wr = kCtrlRecvDepth;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        ia.qp_type = IBV_QPT_UD;
        if (c->cq && c->mr) c->qp = ibv_create_qp(pd_, &ia);
        bool ok = c->qp != nullptr;
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = kPort;
        a.qkey = c->qkey;
        ok = ok && !ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTR;
        ok = ok && !ibv_modify_qp(c->qp, &a, IBV_QP_STATE);
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = 0;
        ok = ok && !ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
        for (uint32_t i = 0; ok && i < kCtrlRecvDepth; i++) ok = post_ctrl_recv(c.get(), i);
        if (!ok) {
            fail("creating the control QP");
            destroy_ctrl(c.get());
            return kInvalid;
        }
        *qpn = c->qp->qp_num;
        *qkey = c->qkey;
        const uint32_t h = next_ctrl_++;
        ctrls_[h] = std::move(c);
        return h;
    }
    void ctrl_qp_destroy(uint32_t handle) override
    {
        auto it = ctrls_.find(handle);
        if (it == ctrls_.end()) return;
        destroy_ctrl(it->second.get());
        ctrls_.erase(it);
    }
    bool ctrl_qp_connect(uint32_t handle, const PeerAddress& peer, uint32_t remote_qpn) override
    {
        auto it = ctrls_.find(handle);
        if (it == ctrls_.end()) return say("no such control QP"), false;
        CtrlQp* c = it->second.get();
        ibv_ah_attr aa{};
        aa.is_global = 1;
        aa.grh.dgid = gid_of(peer.ip);
        aa.grh.sgid_index = gid_index_;
        aa.grh.hop_limit = 64;
        aa.port_num = kPort;
        ibv_ah* ah = ibv_create_ah(pd_, &aa);
        if (!ah) return fail("ibv_create_ah"), false;
        if (c->ah) ibv_destroy_ah(c->ah);
        c->ah = ah;
        c->peer_qpn = remote_qpn;
        return true;
    }
    bool ctrl_send(uint32_t handle, const PeerAddress&, uint32_t remote_qpn, uint32_t remote_qkey, const void* data,
                   uint32_t len) override
    {
        auto it = ctrls_.find(handle);
        if (it == ctrls_.end()) return say("no such control QP"), false;
        CtrlQp* c = it->second.get();
        if (!c->ah) return say("the control QP is not connected"), false;
        if (len > mtu_bytes_) return say("datagram larger than the path MTU"), false;
        reap_ctrl(c);
        if (c->sends - c->send_done >= kCtrlSendDepth) return false;  // full: SDR_RETRY
        uint8_t* slot = c->buf.data() + size_t{c->slot_bytes} * (kCtrlRecvDepth + c->sends % kCtrlSendDepth);
        std::memcpy(slot, data, len);
        ibv_sge sge{reinterpret_cast<uint64_t>(slot), len, c->mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = c->sends;
        wr.sg_list = &sge;
        wr.num_sge = len ? 1 : 0;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.ud.ah = c->ah;
        wr.wr.ud.remote_qpn = remote_qpn;
        wr.wr.ud.remote_qkey = remote_qkey;
        ibv_send_wr* bad = nullptr;
        if (ibv_post_send(c->qp, &wr, &bad)) return fail("ibv_post_send (control)"), false;
        c->sends++;
        return true;
    }
    int64_t ctrl_recv(uint32_t handle, void* buf, size_t cap) override
    {
        auto it = ctrls_.find(handle);
        if (it == ctrls_.end()) return say("no such control QP"), -2;
        CtrlQp* c = it->second.get();
        reap_ctrl(c);
        if (c->ready_head == c->ready.size()) return 0;
        auto [slot, n] = c->ready[c->ready_head];
        if (n > cap) return -1;
        std::memcpy(buf, c->buf.data() + size_t{c->slot_bytes} * slot + kGrhBytes, n);
        if (++c->ready_head == c->ready.size()) c->ready.clear(), c->ready_head = 0;
        if (!post_ctrl_recv(c, slot)) return fail("ibv_post_recv (control)"), -2;
        return n;
    }
    uint32_t ctrl_max_bytes() const override { return mtu_bytes_; }

    bool progress() override { return true; }  // the workers run on their own
    uint64_t now_ns() override { return mono_ns(); }
    // Sleeps until a window write, a control completion or t_ns: the control CQs are armed
    // first and looked at once more (a datagram that came before the arm is already there).
    bool wait_event(uint64_t t_ns) override
    {
        std::vector<int> fds;
        for (auto& [h, c] : ctrls_) {
            if (ibv_req_notify_cq(c->cq, 0)) return fail("ibv_req_notify_cq (control)"), false;
            const size_t before = c->ready.size();
            reap_ctrl(c.get());
            if (c->ready.size() != before) return true;
            fds.push_back(c->channel->fd);
        }
        ex_->wait_event(t_ns, fds);
        for (auto& [h, c] : ctrls_) {
            pollfd p{c->channel->fd, POLLIN, 0};
            ibv_cq* cq = nullptr;
            void* cq_ctx = nullptr;
            if (poll(&p, 1, 0) == 1 && ibv_get_cq_event(c->channel, &cq, &cq_ctx) == 0) ibv_ack_cq_events(cq, 1);
        }
        return true;
    }
    bool pending() override { return true; }

private:
    bool query_port(std::string* err)
    {
        ibv_port_attr pa{};
        if (ibv_query_port(ctx_, kPort, &pa)) return *err = std::string("ibv_query_port: ") + std::strerror(errno), false;
        mtu_ = pa.active_mtu;
        mtu_bytes_ = 128u << mtu_;
        // RoCE v2 addresses by the IPv4-mapped GID (::ffff:a.b.c.d) of the port.
        for (int i = 0; i < pa.gid_tbl_len; i++) {
            ibv_gid_entry e{};
            if (ibv_query_gid_ex(ctx_, kPort, static_cast<uint32_t>(i), &e, 0)) continue;
            static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
            if (e.gid_type != IBV_GID_TYPE_ROCE_V2 || std::memcmp(e.gid.raw, kMapped, 12) != 0) continue;
            uint32_t n;
            std::memcpy(&n, &e.gid.raw[12], 4);
            addr_.ip = ntohl(n);
            gid_index_ = static_cast<uint8_t>(i);
            mac_of(e.ndev_ifindex);
            return true;
        }
        return *err = "port 1 has no IPv4-mapped RoCE v2 GID (give its interface an IPv4 address)", false;
    }
    // The interface's MAC: the QP-info blob carries it (an emulated raw: peer checks it).
    void mac_of(uint32_t ifindex)
    {
        char name[IF_NAMESIZE] = {};
        if (!ifindex || !if_indextoname(ifindex, name)) {
            // No interface index with the GID (a device found through sysfs): the interface that
            // holds the GID's IPv4 address.
            ifaddrs* all = nullptr;
            if (getifaddrs(&all)) return;
            for (ifaddrs* a = all; a; a = a->ifa_next)
                if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET &&
                    ntohl(reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr) == addr_.ip) {
                    std::memcpy(name, a->ifa_name, std::min<size_t>(std::strlen(a->ifa_name), IF_NAMESIZE - 1));
                    break;
                }
            freeifaddrs(all);
            if (!name[0]) return;
        }
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return;
        ifreq r{};
        std::memcpy(r.ifr_name, name, sizeof r.ifr_name);  // both IF_NAMESIZE, NUL-terminated
        if (ioctl(fd, SIOCGIFHWADDR, &r) == 0) std::memcpy(addr_.mac.data(), r.ifr_hwaddr.sa_data, 6);
        close(fd);
    }
    bool post_ctrl_recv(CtrlQp* c, uint32_t slot)
    {
        ibv_sge sge{reinterpret_cast<uint64_t>(c->buf.data() + size_t{c->slot_bytes} * slot), c->slot_bytes,
                    c->mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = slot;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        return ibv_post_recv(c->qp, &wr, &bad) == 0;
    }
    // Completions of the control QP: sends free their slots, receives from the peer queue up.
    void reap_ctrl(CtrlQp* c)
    {
        ibv_wc wc[16];
        int n;
        while ((n = ibv_poll_cq(c->cq, 16, wc)) > 0)
            for (int i = 0; i < n; i++) {
                if (wc[i].opcode & IBV_WC_RECV) {
                    const uint32_t slot = static_cast<uint32_t>(wc[i].wr_id);
                    if (wc[i].status == IBV_WC_SUCCESS && wc[i].src_qp == c->peer_qpn && wc[i].byte_len >= kGrhBytes)
                        c->ready.emplace_back(slot, wc[i].byte_len - kGrhBytes);
                    else
                        (void)post_ctrl_recv(c, slot);  // not the peer's: dropped
                } else {
                    c->send_done++;
                }
            }
    }
    void destroy_ctrl(CtrlQp* c)
    {
        if (c->qp) ibv_destroy_qp(c->qp);
        if (c->ah) ibv_destroy_ah(c->ah);
        if (c->mr) ibv_dereg_mr(c->mr);
        // A channel that never had a CQ has no fd of its own yet (emu/verbs/README.md): left as is.
        if (c->cq) {
            ibv_destroy_cq(c->cq);
            if (c->channel) ibv_destroy_comp_channel(c->channel);
        }
        *c = CtrlQp{};
    }
    // SDR_VERBS_ROOT_KEYS: auto (default: the first the device offers, in this order), sdrdv,
    // mlx5 or staging (README, "Root and NULL keys").
    bool choose_root_keys(const std::string& ibdev, std::string* err)
    {
        const std::string want = std::getenv("SDR_VERBS_ROOT_KEYS") ? std::getenv("SDR_VERBS_ROOT_KEYS") : "auto";
        if (want != "auto" && want != "sdrdv" && want != "mlx5" && want != "staging")
            return *err = "SDR_VERBS_ROOT_KEYS='" + want + "': expected auto, sdrdv, mlx5 or staging", false;
        auto tried = [&](const char* kind) { return want == "auto" || want == kind; };
        std::string why;
        if (tried("sdrdv")) keys_ = make_sdrdv_root_keys(ctx_, pd_, &why);
#ifdef SDR_HAL_VERBS_MLX5
        if (!keys_ && tried("mlx5")) {
            std::string mlx5_why;
            keys_ = make_mlx5_root_keys(ctx_, pd_, kPort, gid_index_, &mlx5_why);
            if (!keys_) why += (why.empty() ? "mlx5: " : "; mlx5: ") + mlx5_why;
        }
#else
        if (want == "mlx5") why = "the mlx5 indirect-key path is not in this build (no libmlx5 at build time)";
#endif
        if (!keys_ && tried("staging")) {
            std::string staging_why;
            if (auto s = StagingRootKeys::make(pd_, fw_, &staging_why)) {
                staging_ = s.get();
                keys_ = std::move(s);
            } else {
                why += (why.empty() ? "" : "; ") + staging_why;
            }
        }
        if (!keys_) return *err = "device '" + ibdev + "' offers no root key SDR can use (" + why + ")", false;
        return true;
    }
    void fail(const char* what) const { failure(std::string(what) + ": " + std::strerror(errno)); }
    void say(const std::string& why) const { failure(why); }
    void failure(const std::string& s) const { failed(s); }

    uint32_t channels_;
    ibv_context* ctx_ = nullptr;
    ibv_pd* pd_ = nullptr;
    ibv_mtu mtu_ = IBV_MTU_1024;
    uint32_t mtu_bytes_ = 1024;
    uint8_t gid_index_ = 0;
    PeerAddress addr_;
    uint64_t lifetime_ns_ = kLifetimeMarginNs;
    fw_device* fw_ = nullptr;
    std::unique_ptr<RootKeys> keys_;
    StagingRootKeys* staging_ = nullptr;  // keys_, when they are the portable fallback
    std::unique_ptr<Executor> ex_;
    std::map<uint32_t, std::unique_ptr<ChannelQp>> qps_;
    std::map<uint32_t, ibv_mr*> mrs_;
    std::map<uint32_t, std::unique_ptr<CtrlQp>> ctrls_;
    uint32_t next_ctrl_ = 0;
};

}  // namespace
}  // namespace sdr::hal_verbs

// The module's one entry point (host/src/backends.hpp's OpenFn, behind C linkage for dlsym).
extern "C" __attribute__((visibility("default"))) sdr::host::Device* sdr_hal_verbs_open(const std::string* name,
                                                                                        const std::string* ibdev,
                                                                                        uint32_t num_channels,
                                                                                        std::string* err)
{
    auto d = std::make_unique<sdr::hal_verbs::VerbsDevice>(*name, num_channels);
    if (!d->open(*ibdev, err)) return nullptr;
    return d.release();
}
