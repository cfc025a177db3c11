#include "side.hpp"

#include "common/counters.hpp"

#include <sdr/host/inspect.hpp>
#include <sdr/reliability/scheme.hpp>
#include <sdr_ext.h>
#include <sdr_sim.h>
#include <sdr_stats.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace sdr::write_bw {

void die(const std::string& what)
{
    std::fprintf(stderr, "sdr_write_bw: %s\n", what.c_str());
    std::exit(1);
}
void die_sdr(const std::string& what) { die(what + ": " + sdr_last_error()); }
void die_rel(const std::string& what) { die(what + ": " + sdr_rel_last_error()); }

bool pow2(uint64_t v) { return v && !(v & (v - 1)); }
uint32_t log2_ceil(uint64_t v) { return v <= 1 ? 0 : 64 - static_cast<uint32_t>(__builtin_clzll(v - 1)); }

namespace {

class OobPeer final : public Peer {
public:
    explicit OobPeer(sdr_oob* oob) : oob_(oob) {}
    void send(const void* p, size_t n) override
    {
        if (sdr_oob_send(oob_, p, n) != SDR_SUCCESS) die_sdr("bootstrap connection");
    }
    bool poll(std::vector<uint8_t>* m, int timeout_ms) override
    {
        m->resize(65536);  // the largest message: a QP-info blob (a few hundred bytes)
        size_t len = 0;
        int rc = sdr_oob_recv(oob_, m->data(), m->size(), &len, timeout_ms);
        if (rc == SDR_RETRY) return false;
        if (rc != SDR_SUCCESS) die_sdr("bootstrap connection");
        m->resize(len);
        return true;
    }

private:
    sdr_oob* oob_;
};

// One direction each: what one end sends, the other polls. Nothing blocks: both ends run in one
// thread, so a message that is not there now cannot come while waiting.
class LocalPeer final : public Peer {
public:
    LocalPeer(std::shared_ptr<std::deque<std::vector<uint8_t>>> in, std::shared_ptr<std::deque<std::vector<uint8_t>>> out)
        : in_(std::move(in)), out_(std::move(out))
    {
    }
    void send(const void* p, size_t n) override
    {
        out_->emplace_back(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    }
    bool poll(std::vector<uint8_t>* m, int) override
    {
        if (in_->empty()) return false;
        *m = std::move(in_->front());
        in_->pop_front();
        return true;
    }

private:
    std::shared_ptr<std::deque<std::vector<uint8_t>>> in_, out_;
};

}  // namespace

std::unique_ptr<Peer> oob_peer(sdr_oob* oob) { return std::make_unique<OobPeer>(oob); }

std::pair<std::unique_ptr<Peer>, std::unique_ptr<Peer>> local_peers()
{
    auto a = std::make_shared<std::deque<std::vector<uint8_t>>>(), b = std::make_shared<std::deque<std::vector<uint8_t>>>();
    return {std::make_unique<LocalPeer>(a, b), std::make_unique<LocalPeer>(b, a)};
}

namespace {

// The parity SDR message of one message of the run's scheme: parity chunks per submessage of
// k data chunks, as the scheme's registry entry says (auto: its largest candidate, 4m).
uint64_t parity_bytes(const RunParams& rp)
{
    rel::Config cfg;
    std::string err;
    if (!rp.scheme[0] || !rel::parse_scheme(rp.scheme, &cfg, &err)) return 0;
    uint32_t per_sub = 0;
    if (cfg.scheme == rel::Scheme::Auto)
        per_sub = 4 * cfg.m;
    else if (const rel::SchemeOps& ops = rel::ops(rel::fixed_code(cfg)); ops.coded())
        per_sub = ops.parity_slots(rel::fixed_code(cfg));
    const uint64_t chunks = (rp.size + rp.chunk - 1) / rp.chunk;
    return (chunks + cfg.k - 1) / cfg.k * per_sub * rp.chunk;
}

}  // namespace

Side::Side(const Options& o, const std::string& dev, const RunParams& rp) : device(dev)
{
    if (!pow2(rp.mtu) || !pow2(rp.chunk) || rp.chunk < rp.mtu) die("--mtu and --chunk must be powers of two with chunk >= MTU");
    sdr_dev_attr da{rp.channels, 1};
    if (!(ctx = sdr_context_create(device.c_str(), &da))) die_sdr("sdr_context_create(" + device + ")");
    // The reliability layer sends two SDR messages per message (data and parity): twice the
    // slots, each as large as the longer of the two.
    const uint32_t per_msg = rp.scheme[0] ? 2 : 1;
    slots = 1u << log2_ceil(uint64_t{rp.in_flight} * per_msg);
    uint32_t slot_log = log2_ceil(std::max({rp.size, uint64_t{rp.chunk}, parity_bytes(rp)}));
    // Ping-pong reuses a slot only after its (slot, generation) pair's quiet time, the maximum
    // packet lifetime (5 ms on raw:/xdp:): a ring of up to 1024 slots (64 MiB at most) lets
    // short round trips run without waiting for one.
    if (rp.mode == Mode::Latency) slots = std::max(slots, 1u << std::min(10u, 26 - std::min(26u, slot_log)));
    attr = sdr_qp_attr{log2_ceil(rp.chunk), slot_log + log2_ceil(slots), log2_ceil(slots),
                       static_cast<sdr_mtu>(log2_ceil(rp.mtu) - 6), 1, 1,
                       static_cast<uint32_t>(std::llround(o.rate_limit_gbps * 1000))};
    // The transport: SDR_USE_UC_QP's (RC by default, as the published SDK), except that the
    // reliability layer recovers lost packets itself and takes UC QPs only.
    sdr_qp_attr_ext ext;
    sdr_qp_attr_ext_init(&ext);
    if (rp.scheme[0]) ext.transport = SDR_TRANSPORT_UC;
    if (!(qp = sdr_qp_create_ext(ctx, &attr, &ext))) die_sdr("sdr_qp_create");
}

void Side::connect(Peer& peer, int timeout_ms)
{
    size_t n;
    sdr_qp_info_size_get(qp, &n);
    std::vector<uint8_t> mine(n), theirs;
    sdr_qp_info_get(qp, mine.data());
    peer.send(mine.data(), n);
    if (!peer.poll(&theirs, timeout_ms) || theirs.size() != n) die("exchanging QP info: no QP info from the other side");
    if (sdr_qp_connect(qp, theirs.data()) != SDR_SUCCESS) die_sdr("sdr_qp_connect");
}

void Side::connect(Side& other)
{
    size_t n;
    sdr_qp_info_size_get(qp, &n);
    std::vector<uint8_t> mine(n), theirs(n);
    sdr_qp_info_get(qp, mine.data());
    sdr_qp_info_get(other.qp, theirs.data());
    if (sdr_qp_connect(qp, theirs.data()) != SDR_SUCCESS || sdr_qp_connect(other.qp, mine.data()) != SDR_SUCCESS)
        die_sdr("sdr_qp_connect");
}

void Side::open_endpoint(const RunParams& rp, double rtt_ms, double bw_gbps)
{
    sdr_rel_attr a;
    sdr_rel_attr_default(&a);
    if (sdr_rel_attr_parse_scheme(&a, rp.scheme) != SDR_SUCCESS) die_rel(std::string("--scheme ") + rp.scheme);
    a.rtt_ms = rtt_ms;
    a.bw_gbps = bw_gbps;
    if (!(ep = sdr_rel_endpoint_create(ctx, qp, &attr, &a))) die_rel("sdr_rel_endpoint_create");
}

double Side::now_s() const { return sdr_now_ns(ctx) / 1e9; }

void Side::wait(double dt) const { sdr_sim_wait(ctx, sdr_now_ns(ctx) + static_cast<uint64_t>(dt * 1e9)); }

std::string Side::port_mode() const
{
    const auto* rt = sdr::host::rt_of(ctx);
    if (rt) return rt->port_info().mode;
    return device.rfind("verbs:", 0) == 0 ? "rdma-core" : "simulator";
}

Side::~Side()
{
    if (ep) sdr_rel_endpoint_destroy(ep);
    if (qp) sdr_qp_destroy(qp);
    if (ctx) sdr_context_destroy(ctx);
}

std::vector<std::pair<std::string, uint64_t>> nic_counters(sdr_context* ctx)
{
    size_t n = 0;
    if (sdr_context_stats_get(ctx, nullptr, 0, &n) != SDR_SUCCESS) die_sdr("sdr_context_stats_get");
    std::vector<sdr_stat> st(n);
    if (sdr_context_stats_get(ctx, st.data(), st.size(), &n) != SDR_SUCCESS) die_sdr("sdr_context_stats_get");
    std::vector<std::pair<std::string, uint64_t>> out;
    for (size_t i = 0; i < std::min(n, st.size()); i++) out.emplace_back(st[i].name, st[i].value);
    return out;
}

uint64_t counter(const std::vector<std::pair<std::string, uint64_t>>& all, const std::string& name)
{
    for (const auto& [k, v] : all)
        if (k == name) return v;
    return 0;
}

// Frames, CQEs, bytes placed, control datagrams, the kernel's drops, and every frame the NIC
// dropped, by reason (hostile frames show up here), then every non-zero counter as sdr-stat
// prints it. A device that keeps no counters says so instead.
std::string nic_report(sdr_context* ctx)
{
    const auto all = nic_counters(ctx);
    if (all.empty()) return "NIC: " + tools::counters_unavailable(sdr::host::device_name(ctx));
    auto get = [&](const std::string& name) { return counter(all, name); };
    auto n = [](uint64_t v) { return std::to_string(v); };
    const std::string drop_prefix = "port.rx_drop.";
    std::string drops, counters, kernel;
    for (const auto& [k, v] : all) {
        if (!v) continue;
        counters += "\n  " + k + " " + n(v);
        if (k.rfind(drop_prefix, 0) == 0) drops += std::string(drops.empty() ? "" : ", ") + k.substr(drop_prefix.size()) + " " + n(v);
        if (k.rfind("kernel.", 0) == 0 && k.find("drop") == std::string::npos &&
            (k.find("full") != std::string::npos || k.find("empty") != std::string::npos || k.find("invalid") != std::string::npos ||
             k.find("oversize") != std::string::npos || k.find("freezes") != std::string::npos))
            kernel += std::string(kernel.empty() ? "" : ", ") + k.substr(7) + " " + n(v);
    }
    return "NIC: " + n(get("port.rx_frames")) + " frames received, " + n(get("port.rx_cqes")) + " CQEs, " +
           n(get("port.rx_placed_bytes")) + " B placed, " + n(get("port.rx_ctrl")) + " control datagrams, " +
           n(get("kernel.rx_dropped")) + " dropped by the kernel" + (kernel.empty() ? "" : " (" + kernel + ")") + "; " +
           n(get("port.rx_drops_total")) + " dropped by the NIC" + (drops.empty() ? "" : " (" + drops + ")") +
           "\ncounters (sdr-stat names):" + counters;
}

// The members rx_frames .. rx_drops_total, the object rx_drops (every drop reason, zeros
// included) and the object counters (every counter). A device that keeps no counters gets
// counters null and none of the others: zeros would claim the NIC saw nothing.
void nic_report(sdr_context* ctx, tools::Json* j)
{
    const auto all = nic_counters(ctx);
    if (all.empty()) {
        (*j)["counters"] = nullptr;
        return;
    }
    const std::string drop_prefix = "port.rx_drop.";
    tools::Json drops = tools::Json::object(), counters = tools::Json::object();
    for (const auto& [k, v] : all) {
        counters[k] = v;
        if (k.rfind(drop_prefix, 0) == 0) drops[k.substr(drop_prefix.size())] = v;
    }
    (*j)["rx_frames"] = counter(all, "port.rx_frames");
    (*j)["rx_cqes"] = counter(all, "port.rx_cqes");
    (*j)["rx_placed_bytes"] = counter(all, "port.rx_placed_bytes");
    (*j)["rx_ctrl"] = counter(all, "port.rx_ctrl");
    (*j)["rx_kernel_drops"] = counter(all, "kernel.rx_dropped");
    (*j)["rx_drops_total"] = counter(all, "port.rx_drops_total");
    (*j)["rx_drops"] = std::move(drops);
    (*j)["counters"] = std::move(counters);
}

}  // namespace sdr::write_bw
