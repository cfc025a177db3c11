// sdr_stats.h: every port, kernel, real-time, firmware and QP counter of a context, by name.
#include <sdr_stats.h>

#include <sdr/emu/network.hpp>
#include <sdr/emu/rt_nic.hpp>

#include "emu_ext.hpp"
#include "internal.hpp"
#include "stats.hpp"

#include <cstring>
#include <map>

using sdr::host::set_error;

namespace sdr::host {

std::vector<Stat> collect_stats(sdr_context* ctx)
{
    std::vector<Stat> out;
    auto add = [&](std::string name, uint64_t v) { out.push_back({std::move(name), v}); };
    // Every counter here is the emulated NIC's: a device without the emulator's extension has none.
    EmuControls* e = ctx->dev->emu_controls();
    if (!e) return out;
    if (emu::RtNic* rt = e->rt()) {
        // Each of these takes the NIC lock itself; port_stats reads the kernel's counters first.
        const emu::PortStats k = rt->port_stats();
        const emu::ShaperCounters sh = rt->shaper_counters();
        const emu::RtCounters rc = rt->counters();
        const bool xdp = rt->port_info().kind == "xdp";
        add("kernel.rx_frames", k.rx_frames);
        add("kernel.rx_bytes", k.rx_bytes);
        add("kernel.tx_frames", k.tx_frames);
        add("kernel.tx_bytes", k.tx_bytes);
        add("kernel.rx_dropped", k.rx_dropped_kernel);
        if (xdp) {
            add("kernel.xdp_rx_dropped", k.rx_xdp_dropped);
            add("kernel.xdp_rx_ring_full", k.rx_xdp_ring_full);
            add("kernel.xdp_rx_invalid_descs", k.rx_xdp_invalid_descs);
            add("kernel.xdp_rx_fill_ring_empty", k.rx_xdp_fill_ring_empty);
            add("kernel.rx_oversize", k.rx_oversize);
        } else {
            add("kernel.rx_ring_full", k.rx_kernel_ring_full);
            add("kernel.rx_ring_freezes", k.rx_kernel_ring_freezes);
        }
        add("kernel.tx_ring_full", k.tx_full);
        add("kernel.tx_errors", k.tx_errors);
        add("rt.polls", rc.polls);
        add("rt.idle_sleeps", rc.idle_sleeps);
        add("rt.tx_too_big", rc.tx_too_big);
        add("shaper.dropped", sh.dropped);
        add("shaper.dropped_burst", sh.dropped_burst);
        add("shaper.duplicated", sh.duplicated);
        add("shaper.delayed", sh.delayed);
        add("shaper.ce_marked", sh.ce_marked);
    }
    NicGuard g(*e);
    const emu::Nic& nic = e->nic();
    const emu::PortCounters& c = nic.counters();
    add("port.rx_frames", c.rx_frames);
    add("port.rx_bytes", c.rx_bytes);
    add("port.rx_placed_bytes", c.rx_placed_bytes);
    add("port.rx_null_key", c.rx_null_key);
    add("port.rx_cqes", c.rx_cqes);
    add("port.rx_ctrl", c.rx_ctrl);
    add("port.tx_frames", c.tx_frames);
    add("port.tx_bytes", c.tx_bytes);
    add("port.tx_ctrl", c.tx_ctrl);
    add("port.tx_local_errors", c.tx_local_errors);
    add("port.rx_ce", c.rx_ce);
    add("port.cnp_sent", c.cnp_sent);
    add("port.cnp_received", c.cnp_received);
    add("port.rx_drops_total", c.rx_drops_total());
    for (size_t d = 0; d < static_cast<size_t>(emu::RxDrop::Count); d++)
        add(std::string("port.rx_drop.") + emu::to_string(static_cast<emu::RxDrop>(d)), c.rx_drops[d]);
    for (uint32_t i = 0; i < FW_CNT__COUNT; i++) add(std::string("fw.") + fw_counter_names[i], nic.fw_counter(i));
    std::map<uint32_t, emu::QpCounters> qps;  // SDR QP index -> its transport QPs' sums
    nic.for_each_qp([&](uint32_t tag, const emu::QpCounters& q) {
        emu::QpCounters& s = qps[fw_tag_qp(tag)];
        s.rx_packets += q.rx_packets;
        s.rx_drops += q.rx_drops;
        s.rx_null_key += q.rx_null_key;
        s.tx_packets += q.tx_packets;
        s.tx_bytes += q.tx_bytes;
        s.tx_retransmits += q.tx_retransmits;
    });
    for (const auto& [index, q] : qps) {
        const std::string p = "qp." + std::to_string(index) + ".";
        add(p + "rx_packets", q.rx_packets);
        add(p + "rx_drops", q.rx_drops);
        add(p + "rx_null_key", q.rx_null_key);
        add(p + "tx_packets", q.tx_packets);
        add(p + "tx_bytes", q.tx_bytes);
        add(p + "tx_retransmits", q.tx_retransmits);
    }
    // The simulated network's egress queues that carried anything (every context of the
    // fabric shows them all): switch.NAME.pPORT.counter.
    if (emu::SimNetwork* net = e->network())
        for (size_t s = 0; s < net->switches(); s++)
            for (size_t port = 0; port < net->sw(s).ports(); port++) {
                const emu::QueueCounters& q = net->sw(s).port(port).counters();
                if (!q.enqueued && !q.dropped && !q.pauses_sent) continue;
                const std::string p = "switch." + net->switch_name(s) + ".p" + std::to_string(port) + ".";
                add(p + "enqueued", q.enqueued);
                add(p + "dropped", q.dropped);
                add(p + "marked", q.marked);
                add(p + "peak_bytes", q.peak_bytes);
                add(p + "paused_ns", q.paused_ps / emu::kPsPerNs);
                add(p + "pauses_sent", q.pauses_sent);
            }
    return out;
}

std::string format_stats(sdr_context* ctx)
{
    std::string s = "# sdr-stats device=" + ctx->dev->name() + "\n";
    const std::vector<Stat> all = collect_stats(ctx);
    // A heading with nothing under it would read as a NIC that counted nothing.
    if (all.empty()) s += "# counters not available on " + ctx->dev->backend() + ":\n";
    for (const Stat& st : all) s += st.name + " " + std::to_string(st.value) + "\n";
    return s;
}

}  // namespace sdr::host

extern "C" {

int sdr_context_stats_get(sdr_context* ctx, struct sdr_stat* stats, size_t cap, size_t* count)
{
    if (!ctx) return set_error("sdr_context_stats_get: context is NULL");
    if (!count) return set_error("sdr_context_stats_get: count is NULL");
    if (cap && !stats) return set_error("sdr_context_stats_get: stats is NULL but cap is " + std::to_string(cap));
    std::vector<sdr::host::Stat> all = sdr::host::collect_stats(ctx);
    for (size_t i = 0; i < all.size() && i < cap; i++) {
        std::memset(stats[i].name, 0, sizeof stats[i].name);
        std::strncpy(stats[i].name, all[i].name.c_str(), sizeof stats[i].name - 1);
        stats[i].value = all[i].value;
    }
    *count = all.size();
    return SDR_SUCCESS;
}

int sdr_context_stats_print(sdr_context* ctx, FILE* out)
{
    if (!ctx || !out) return set_error("sdr_context_stats_print: context or stream is NULL");
    std::string s = sdr::host::format_stats(ctx);
    if (std::fwrite(s.data(), 1, s.size(), out) != s.size()) return set_error("sdr_context_stats_print: write failed");
    std::fflush(out);
    return SDR_SUCCESS;
}

}  // extern "C"
