// The rdma-core executor's conformance harness (hal/conformance/harness.hpp): host/verbs'
// Executor (worker.hpp: worker threads, their CQs, the hal_* binding of hal_verbs.cpp) with the
// probe firmware in place of SDR's, one per side, over our own rdma-core provider's devices
// (emu/verbs) in two network namespaces joined by a veth (tools/sdr-netns), one RC transport QP
// on each, connected: frames cross the veth as between two hosts. Set up as device_verbs.cpp
// sets up a transport QP, without the rest of the module (root keys, control QPs): the
// receiver's key is a zero-based region, which is what remote_va means.
//
// Needs root (namespaces, the device node): without it the tests skip; as root every set-up
// failure fails them.
#include "harness.hpp"
#include "netns_harness.hpp"
#include "netns_util.hpp"
#include "worker.hpp"

#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

namespace sdr::hal_conformance {
namespace {

using hal_verbs::ChannelQp;
using hal_verbs::Executor;
using hal_verbs::ExecutorParams;

constexpr uint32_t kWorkers = 2;
constexpr uint32_t kRegionBytes = 4096;
constexpr uint32_t kSqDepth = 128;  // small, so that the burst test fills it quickly
constexpr uint32_t kRqDepth = 512;
constexpr uint8_t kPort = 1;

bool sh(const std::string& cmd, std::string* why)
{
    if (std::system((cmd + " >/dev/null 2>&1").c_str()) == 0) return true;
    *why = "failed: " + cmd;
    return false;
}

// libibverbs reads SYSFS_PATH and RDMAV_DRIVERS once per process: one state directory for the
// whole run (each harness adds and removes its own devices in it), removed at exit.
struct StateDir {
    std::string path;
    StateDir()
    {
        char tmpl[] = "/tmp/sdr-hal-conformance-XXXXXX";
        if (mkdtemp(tmpl)) path = tmpl;
        setenv("SYSFS_PATH", path.c_str(), 1);
        setenv("RDMAV_DRIVERS", SDR_VERBS_PROVIDER, 1);
    }
    ~StateDir()
    {
        if (!path.empty()) std::filesystem::remove_all(path);
    }
};

const std::string& state_dir()
{
    static StateDir d;
    return d.path;
}

ibv_gid gid_of(const std::string& ip)
{
    ibv_gid g{};
    g.raw[10] = g.raw[11] = 0xFF;
    in_addr a{};
    inet_pton(AF_INET, ip.c_str(), &a);
    std::memcpy(&g.raw[12], &a.s_addr, 4);  // already network order
    return g;
}

// One side: its device, the executor running the probe, one RC transport QP and one region.
struct End {
    std::string ns, dev;
    bool added = false;
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_mr* mr = nullptr;
    ibv_mtu mtu = IBV_MTU_1024;
    int gid_index = -1;
    void* fw = nullptr;  // the probe's state: the device block the executor hands the handlers
    std::unique_ptr<Executor> ex;
    ChannelQp q;
    bool attached = false;
    std::vector<uint8_t> region = std::vector<uint8_t>(kRegionBytes);

    ~End()
    {
        if (attached) ex->detach(&q);  // no worker holds it once this returns
        if (q.qp) ibv_destroy_qp(q.qp);
        ex.reset();  // threads stop, CQs go
        std::free(fw);
        if (mr) ibv_dereg_mr(mr);
        if (pd) ibv_dealloc_pd(pd);
        if (ctx) ibv_close_device(ctx);
        if (added) (void)std::system(("SDR_RDMA_DIR=" + state_dir() + " " SDR_RDMA " link del " + dev + " >/dev/null 2>&1").c_str());
    }

    // In the side's namespace: the device's engine opens its port there on first use.
    bool open(const std::string& netns, const std::string& name, bool receiver, uint32_t tag, uint32_t channel,
              std::string* why)
    {
        ns = netns;
        dev = name;
        if (!sh("ip netns exec " + ns + " env SDR_RDMA_DIR=" + state_dir() + " " SDR_RDMA " link add " + dev +
                    " netdev " + ns + " raw",
                why))
            return false;
        added = true;
        sdr::test::InNetns in(ns);
        if (!in.ok()) return *why = "cannot enter namespace " + ns, false;
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        for (int i = 0; list && i < n && !ctx; i++)
            if (dev == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
        if (list) ibv_free_device_list(list);
        if (!ctx) return *why = "cannot open RDMA device " + dev + ": " + std::strerror(errno), false;
        if (!(pd = ibv_alloc_pd(ctx))) return *why = std::string("ibv_alloc_pd: ") + std::strerror(errno), false;
        if (!query_port(why)) return false;
        const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
        mr = receiver ? ibv_reg_mr_iova(pd, region.data(), region.size(), 0, access)  // zero-based: remote_va
                      : ibv_reg_mr(pd, region.data(), region.size(), IBV_ACCESS_LOCAL_WRITE);
        if (!mr) return *why = std::string("registering the region: ") + std::strerror(errno), false;
        if (!(fw = std::aligned_alloc(64, sizeof(fw_device)))) return *why = "out of memory", false;
        std::memset(fw, 0, sizeof(fw_device));
        ExecutorParams p;
        p.workers = kWorkers;
        ex = std::make_unique<Executor>(ctx, static_cast<fw_device*>(fw), p, why);
        if (!ex->ok()) return false;
        return create_qp(tag, channel, why);
    }

    bool query_port(std::string* why)
    {
        ibv_port_attr pa{};
        if (ibv_query_port(ctx, kPort, &pa)) return *why = std::string("ibv_query_port: ") + std::strerror(errno), false;
        mtu = pa.active_mtu;
        for (int i = 0; i < pa.gid_tbl_len && gid_index < 0; i++) {
            ibv_gid_entry e{};
            if (ibv_query_gid_ex(ctx, kPort, static_cast<uint32_t>(i), &e, 0) == 0 && e.gid_type == IBV_GID_TYPE_ROCE_V2)
                gid_index = i;
        }
        if (gid_index < 0) return *why = "no RoCE v2 GID on " + dev, false;
        return true;
    }

    bool create_qp(uint32_t tag, uint32_t channel, std::string* why)
    {
        q.tag = tag;
        q.rc = true;  // no frame the veth drops is lost: counts stay exact
        q.rx = ex->rx_worker(channel);
        q.tx = ex->tx_worker(fw_tag_qp(tag));
        ibv_qp_init_attr ia{};
        ia.send_cq = q.tx->cq;
        ia.recv_cq = q.rx->cq;
        ia.cap.max_send_wr = kSqDepth;
        ia.cap.max_recv_wr = kRqDepth;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        ia.qp_type = IBV_QPT_RC;
        if (!(q.qp = ibv_create_qp(pd, &ia))) return *why = std::string("ibv_create_qp: ") + std::strerror(errno), false;
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = kPort;
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
        if (ibv_modify_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
            return *why = std::string("ibv_modify_qp(INIT): ") + std::strerror(errno), false;
        q.sq_depth = kSqDepth;
        q.rq_depth = kRqDepth;
        q.cookies.assign(q.sq_depth, ChannelQp::kNoCookie);
        q.batch.resize(ex->params().post_batch);
        q.sges.resize(ex->params().post_batch);
        if (!ex->attach(&q, why)) return false;
        attached = true;
        return true;
    }

    // RTR then RTS towards the peer's QP, as device_verbs.cpp connects an RC transport QP.
    bool connect(const std::string& peer_ip, uint32_t peer_qpn, std::string* why)
    {
        sdr::test::InNetns in(ns);  // the peer's MAC comes from this namespace's neighbours
        if (!in.ok()) return *why = "cannot enter namespace " + ns, false;
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = mtu;
        a.dest_qp_num = peer_qpn;
        a.rq_psn = 0;
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = gid_of(peer_ip);
        a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index);
        a.ah_attr.grh.hop_limit = 64;
        a.ah_attr.port_num = kPort;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 1;
        if (ibv_modify_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
            return *why = std::string("ibv_modify_qp(RTR): ") + std::strerror(errno), false;
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = 0;
        a.timeout = 14;  // 4.096 us x 2^14: 67 ms
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 1;
        if (ibv_modify_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                        IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
            return *why = std::string("ibv_modify_qp(RTS): ") + std::strerror(errno), false;
        return true;
    }
};

class VerbsHarness final : public Harness {
public:
    bool init(std::string* why)
    {
        if (state_dir().empty()) return *why = "cannot create a state directory in /tmp", false;
        bed_ = std::make_unique<sdr::test::Testbed>("hcf");
        if (!bed_->ok()) return *why = "tools/sdr-netns could not build the two namespaces", false;
        const std::string tag = bed_->ns(0).substr(3, 3);  // the testbed's per-process tag: unique names
        if (!end_[kA].open(bed_->ns(0), "sdrhc" + tag + "a", false, PROBE_TX_TAG, 0, why) ||
            !end_[kB].open(bed_->ns(1), "sdrhc" + tag + "b", true, PROBE_RX_TAG, PROBE_RX_CHANNEL, why))
            return false;
        if (!end_[kA].connect(sdr::test::Testbed::ip(1), end_[kB].q.qp->qp_num, why) ||
            !end_[kB].connect(sdr::test::Testbed::ip(0), end_[kA].q.qp->qp_num, why))
            return false;
        probe_path& path = state(kA)->path;
        path.qp = PROBE_TX_TAG;  // the executor's transport QP handle is its tag
        path.lkey = end_[kA].mr->lkey;
        path.local_addr = reinterpret_cast<uint64_t>(end_[kA].region.data());
        path.rkey = end_[kB].mr->rkey;
        path.local_len = path.remote_len = kRegionBytes;
        path.sq_depth = kSqDepth;
        end_[kA].ex->start();
        end_[kB].ex->start();
        return true;
    }
    probe* state(Side s) override { return static_cast<probe*>(end_[s].fw); }
    uint32_t workers() const override { return kWorkers; }
    uint32_t doorbell_worker(uint32_t qp_index) const override { return qp_index % kWorkers; }  // Executor::tx_worker
    uint32_t concurrent_handlers() const override { return kWorkers; }  // a thread per worker (receives: channel 1's)
    void doorbell(Side s, uint32_t qp_index) override { end_[s].ex->doorbell(qp_index); }
    WorkerCounts counts(Side s, uint32_t worker) override
    {
        const hal_worker* w = end_[s].ex->worker(worker);
        WorkerCounts c;
        c.window_writes = w->window_writes.load();
        c.window_refused = w->window_refused.load();
        for (uint32_t i = 0; i < HAL_MAX_COUNTERS; i++) c.counters[i] = w->counters[i].load();
        return c;
    }
    HostMemory host_memory(size_t nwords) override
    {
        if (nwords > host_.size()) return {};
        return {host_.data(), reinterpret_cast<uint64_t>(host_.data()), host_.size()};
    }
    uint8_t* source() override { return end_[kA].region.data(); }
    const uint8_t* target() override { return end_[kB].region.data(); }

    // The workers run on their own; the test thread looks every 100 us until the deadline.
    bool run_until(const std::function<bool()>& cond, uint64_t timeout_ns) override
    {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout_ns);
        while (!cond()) {
            if (std::chrono::steady_clock::now() >= deadline) return false;
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        return true;
    }
    void run_for(uint64_t ns) override { std::this_thread::sleep_for(std::chrono::nanoseconds(ns)); }

private:
    std::unique_ptr<sdr::test::Testbed> bed_;  // declared first: the namespaces go after the devices
    End end_[2];
    std::vector<uint64_t> host_ = std::vector<uint64_t>(1024);
};

}  // namespace

std::unique_ptr<Harness> make_harness(std::string* why, bool* skip)
{
    return make_netns_harness<VerbsHarness>(why, skip);
}

}  // namespace sdr::hal_conformance
