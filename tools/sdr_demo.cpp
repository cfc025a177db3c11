// sdr_demo: one message over a simulated lossy long-haul link, delivered reliably once per
// scheme (Selective Repeat, then Erasure Coding), written against the C API as an application
// would. Verifies every delivered byte and prints each completion time beside the lossless
// ideal (injection + one RTT); the pcap holds the data frames and the CTS/ACK/NACK datagrams.
#include "common/options.hpp"

#include <sdr.h>
#include <sdr_ext.h>
#include <sdr/emu/fabric.hpp>
#include <sdr/reliability/scheme.hpp>
#include <sdr_mr.h>
#include <sdr_rel.h>
#include <sdr_sim.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
    uint64_t size = 64ull << 20;
    double bw_gbps = 100, rtt_ms = 25, loss = 1e-4;
    uint32_t mtu = 4096, chunk = 65536, channels = 8;
    uint64_t seed = 1;
    double alpha = 2;
    std::vector<std::string> schemes;  // empty: sr and ec-mds:32,8
    std::string pcap = "sdr_demo.pcap";
    uint32_t snaplen = 128;
    std::string drop_log;  // empty: none
    std::string topology;  // empty: one point-to-point link
};

bool pow2(uint64_t v) { return v && !(v & (v - 1)); }
uint32_t log2u(uint64_t v) { return static_cast<uint32_t>(63 - __builtin_clzll(v)); }

[[noreturn]] void bad(const char* what)
{
    std::fprintf(stderr, "sdr_demo: %s (see --help)\n", what);
    std::exit(2);
}

Options parse(int argc, char** argv)
{
    using namespace sdr::tools;
    Options o;
    sdr::tools::ToolApp app("sdr_demo",
                            "Delivers one message reliably from sim:0 to sim:1 over a simulated link, once per scheme.");
    app.footer("A --pcap FILE ending in .pcapng also records every dropped frame, flagged and with its cause.\n"
               "BYTES take K/M/G (also KiB/MiB/GiB) suffixes, binary: 64K = 65536. A bad option exits 2.");
    add_size(app, "--size", &o.size, 1, (1ull << 32) - 1, "message size, 1 .. 4 GiB - 1")->default_str("64M");
    add_real(app, "--bw-gbps", &o.bw_gbps, 0, 1e6, "link bandwidth, Gbit/s", true)->default_str("100");
    add_real(app, "--rtt-ms", &o.rtt_ms, 0, 1e6, "round-trip time, ms")->default_str("25");
    add_real(app, "--loss", &o.loss, 0, 1, "per-packet loss probability")->default_str("1e-4");
    add_size(app, "--mtu", &o.mtu, 64, 4096, "payload per packet, a power of two in 64..4096")->default_str("4096");
    add_size(app, "--chunk", &o.chunk, 64, 1u << 31, "chunk size, a power of two >= MTU")->default_str("64K");
    add_count(app, "--channels", &o.channels, 1, 16, "channels (DPA workers), 1..16")->default_str("8");
    add_count(app, "--seed", &o.seed, 0, UINT64_MAX, "the link's random seed")->default_str("1");
    app.add_option("--scheme", o.schemes, sdr::rel::scheme_list() + " or auto; repeat for several (sr and ec-mds:32,8)")
        ->type_name("S")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    add_real(app, "--alpha", &o.alpha, 0, 1e6, "RTO = RTT * (1 + alpha)")->default_str("2");
    app.add_option("--pcap", o.pcap, "capture file ('' for none)")->type_name("FILE")->default_str("sdr_demo.pcap");
    add_count(app, "--snaplen", &o.snaplen, 0, UINT32_MAX, "bytes kept of each data frame (0: whole frames)")
        ->default_str("128");
    app.add_option("--topology", o.topology,
                   "a datacenter network instead of the one link: JSON file, JSON text or type:key=value,... "
                   "(two_datacenters: its long haul takes --bw-gbps, --rtt-ms and --loss)")
        ->type_name("SPEC");
    app.add_option("--drop-log", o.drop_log,
                   "every frame the link dropped, one tab-separated line each (what a classic pcap after the link "
                   "cannot show)")
        ->type_name("FILE");
    parse_or_exit(app, argc, argv, 2);
    if (!pow2(o.mtu)) bad("--mtu: must be a power of two in 64..4096");
    if (!pow2(o.chunk) || o.chunk < o.mtu) bad("--chunk: must be a power of two >= MTU");
    if (o.schemes.empty()) o.schemes = {"sr", "ec-mds:32,8"};
    return o;
}

[[noreturn]] void die(const char* what)
{
    std::fprintf(stderr, "sdr_demo: %s: %s\n", what, sdr_last_error());
    std::exit(1);
}

[[noreturn]] void die_rel(const char* what)
{
    std::fprintf(stderr, "sdr_demo: %s: %s\n", what, sdr_rel_last_error());
    std::exit(1);
}

// Bytes a message puts on the wire at line rate: payload plus, per packet, headers, ICRC,
// preamble, inter-frame gap and FCS (102 B).
double wire_bytes(uint64_t bytes, uint32_t mtu) { return bytes + (bytes + mtu - 1) / mtu * 102.0; }

// Lossless ideal of a reliable message: everything injected, the last packet crosses (RTT/2)
// and the ACK comes back (RTT/2). The receive is posted ahead, so the clear-to-send is already
// at the sender. A coded scheme adds the parity it sends with every submessage but the last (its
// data completes the message before its own parity is on the wire), as its registry entry says.
double ideal_ms(const Options& o, const sdr_rel_attr& ra)
{
    double bytes = wire_bytes(o.size, o.mtu);
    const sdr::rel::Code code{static_cast<sdr::rel::Scheme>(ra.scheme), ra.k, ra.m};
    if (const sdr::rel::SchemeOps& ops = sdr::rel::ops(code); ops.coded()) {
        uint64_t chunks = (o.size + o.chunk - 1) / o.chunk, subs = (chunks + ra.k - 1) / ra.k;
        bytes += wire_bytes(uint64_t{o.chunk} * ops.parity_first(code), o.mtu) * static_cast<double>(subs - 1);
    }
    return bytes * 8 / (o.bw_gbps * 1e6) + o.rtt_ms;
}

// Runs both endpoints until stop() holds or the clock reaches `until`, sleeping in virtual time
// between their deadlines (what a real application does blocking on a completion channel).
template <class Stop>
void drive(sdr_context* ctx, sdr_rel_endpoint* tx, sdr_rel_endpoint* rx, uint64_t until, Stop stop)
{
    for (;;) {
        uint64_t dt, dr;
        if (sdr_rel_progress(tx, &dt) != SDR_SUCCESS || sdr_rel_progress(rx, &dr) != SDR_SUCCESS)
            die_rel("sdr_rel_progress");
        if (stop()) return;
        uint64_t now = sdr_now_ns(ctx), t = std::min({dt, dr, until});
        if (now >= until) return;
        if (t == UINT64_MAX && !sdr_sim_pending(ctx)) die("stalled: no deadline and nothing in flight");
        if (sdr_sim_wait(ctx, std::max(t, now + 1)) != SDR_SUCCESS) die("sdr_sim_wait");
    }
}

// The link's drops, one line each, stamped with the time the frame would have arrived (it left
// at t and had RTT/2 to go): the capture's clock, so a tool can merge both (tools/README.md).
void write_drop_log(const std::string& path, const sdr::emu::SimFabric& fabric, double rtt_ms)
{
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "sdr_demo: --drop-log %s: %s\n", path.c_str(), std::strerror(errno));
        std::exit(1);
    }
    std::fprintf(f, "arrival_ns\tsrc_nic\tdst_nic\topcode\tdest_qp\trkey\timm\n");
    const uint64_t half_rtt_ps = static_cast<uint64_t>(std::llround(rtt_ms * 1e9 / 2.0));
    for (const auto& d : fabric.drop_log())
        std::fprintf(f, "%llu\t%u\t%u\t0x%02x\t0x%06x\t0x%08x\t0x%08x\n",
                     (unsigned long long)((d.t + half_rtt_ps) / 1000), d.src_nic, d.dst_nic, d.meta.opcode,
                     d.meta.dest_qp, d.meta.rkey, d.meta.imm);
    std::fclose(f);
}

struct Run {
    sdr_rel_stats tx{}, rx{};
    bool exact = false;
};

Run deliver(const Options& o, const sdr_rel_attr& ra, sdr_context* sctx, sdr_context* rctx, sdr_qp* sqp,
            sdr_qp* rqp, const sdr_qp_attr& qa, const std::vector<uint8_t>& src, std::vector<uint8_t>& dst,
            uint32_t sk, uint32_t rk)
{
    sdr_rel_endpoint* tx = sdr_rel_endpoint_create(sctx, sqp, &qa, &ra);
    sdr_rel_endpoint* rx = sdr_rel_endpoint_create(rctx, rqp, &qa, &ra);
    if (!tx || !rx) die_rel("sdr_rel_endpoint_create");
    std::fill(dst.begin(), dst.end(), 0);
    uint64_t rid, sid;
    if (sdr_rel_recv(rx, dst.data(), o.size, rk, &rid) != SDR_SUCCESS) die_rel("sdr_rel_recv");
    // The receive is posted one RTT ahead, as applications post buffers before data is due: its
    // clear-to-send is at the sender when the send starts.
    drive(sctx, tx, rx, sdr_now_ns(sctx) + static_cast<uint64_t>(o.rtt_ms * 1e6), [] { return false; });
    if (sdr_rel_send(tx, src.data(), o.size, sk, &sid) != SDR_SUCCESS) die_rel("sdr_rel_send");
    Run r;
    bool tx_done = false, rx_done = false;
    drive(sctx, tx, rx, UINT64_MAX, [&] {
        tx_done = tx_done || sdr_rel_send_poll(tx, sid, &r.tx) == SDR_SUCCESS;
        rx_done = rx_done || sdr_rel_recv_poll(rx, rid, &r.rx) == SDR_SUCCESS;
        return tx_done && rx_done;
    });
    r.exact = r.rx.ok && std::memcmp(src.data(), dst.data(), o.size) == 0;
    sdr_rel_endpoint_destroy(tx);
    sdr_rel_endpoint_destroy(rx);
    return r;
}

}  // namespace

int main(int argc, char** argv)
{
    Options o = parse(argc, argv);
    std::vector<sdr_rel_attr> attrs;
    for (const auto& name : o.schemes) {
        sdr_rel_attr ra;
        sdr_rel_attr_default(&ra);
        if (sdr_rel_attr_parse_scheme(&ra, name.c_str()) != SDR_SUCCESS) {
            std::fprintf(stderr, "sdr_demo: --scheme %s: %s\n", name.c_str(), sdr_rel_last_error());
            return 2;
        }
        ra.rtt_ms = o.rtt_ms;
        ra.bw_gbps = o.bw_gbps;
        ra.alpha = o.alpha;
        attrs.push_back(ra);
    }

    sdr::emu::FabricParams fp;
    fp.link.bandwidth_gbps = o.bw_gbps;
    fp.link.rtt_ms = o.rtt_ms;
    fp.link.impairment.loss = o.loss;
    fp.seed = o.seed;
    fp.pcap_path = o.pcap;
    fp.pcap_snaplen = o.snaplen;
    fp.drop_log = !o.drop_log.empty();
    if (!o.topology.empty()) {
        sdr::emu::Topology t;
        std::string err;
        if (!sdr::emu::Topology::parse(o.topology, fp.link, &t, &err)) {
            std::fprintf(stderr, "sdr_demo: --topology: %s\n", err.c_str());
            return 2;
        }
        fp.topology = std::move(t);
    }
    sdr::emu::SimFabric::install(std::make_unique<sdr::emu::SimFabric>(fp));

    // From here on: the SDR C API, as an application writes it.
    sdr_dev_attr da{o.channels, 1};
    sdr_context* sctx = sdr_context_create("sim:0", &da);
    sdr_context* rctx = sdr_context_create("sim:1", &da);
    if (!sctx || !rctx) die("sdr_context_create");
    // In flight: the message and its EC parity (at most m/k more) fit twice over; two SDR
    // messages (data, parity) per reliable message.
    uint32_t size_log = log2u(o.size) + (pow2(o.size) ? 0 : 1);
    if (size_log < log2u(o.chunk)) size_log = log2u(o.chunk);
    sdr_qp_attr qa{log2u(o.chunk), size_log + 2, 2, static_cast<sdr_mtu>(log2u(o.mtu) - 6), 1, 1, 0};
    sdr_qp_attr_ext uc;  // SR and EC recover lost packets themselves: UC transport QPs
    sdr_qp_attr_ext_init(&uc);
    uc.transport = SDR_TRANSPORT_UC;
    sdr_qp* sqp = sdr_qp_create_ext(sctx, &qa, &uc);
    sdr_qp* rqp = sdr_qp_create_ext(rctx, &qa, &uc);
    if (!sqp || !rqp) die("sdr_qp_create");
    size_t isz;
    sdr_qp_info_size_get(sqp, &isz);
    std::vector<uint8_t> si(isz), ri(isz);
    sdr_qp_info_get(sqp, si.data());
    sdr_qp_info_get(rqp, ri.data());
    if (sdr_qp_connect(sqp, ri.data()) || sdr_qp_connect(rqp, si.data())) die("sdr_qp_connect");

    std::vector<uint8_t> src(o.size), dst(o.size, 0);
    uint64_t x = o.seed | 1;
    for (auto& b : src) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; b = static_cast<uint8_t>(x); }
    sdr_mr* smr = sdr_mr_reg(sctx, src.data(), src.size(), SDR_ACCESS_REMOTE_WRITE);
    sdr_mr* rmr = sdr_mr_reg(rctx, dst.data(), dst.size(), SDR_ACCESS_REMOTE_WRITE);
    if (!smr || !rmr) die("sdr_mr_reg");
    uint32_t sk, rk;
    sdr_mr_lkey_get(smr, &sk);
    sdr_mr_lkey_get(rmr, &rk);

    std::printf("sdr_demo: %.2f MiB from sim:0 to sim:1 | %.0f Gbit/s, RTT %.1f ms, packet loss %g | MTU %u, "
                "chunk %u, %u channels, RTO = %.0f x RTT, seed %llu\n",
                o.size / 1048576.0, o.bw_gbps, o.rtt_ms, o.loss, o.mtu, o.chunk, o.channels, 1 + o.alpha,
                (unsigned long long)o.seed);
    std::printf("completion = send post to final ACK; lossless = injection at line rate + RTT\n");
    std::printf("%-14s %12s %12s %8s %14s %8s %9s  %s\n", "scheme", "completion", "lossless", "ratio",
                "retransmitted", "decoded", "fallbacks", "data");
    std::vector<double> times;
    bool all_exact = true;
    for (size_t i = 0; i < attrs.size(); i++) {
        Run r = deliver(o, attrs[i], sctx, rctx, sqp, rqp, qa, src, dst, sk, rk);
        all_exact = all_exact && r.exact && r.tx.ok;
        if (!r.tx.ok || !r.rx.ok) {
            std::printf("%-14s failed: %s\n", o.schemes[i].c_str(), r.tx.ok ? r.rx.error : r.tx.error);
            times.push_back(NAN);
            continue;
        }
        // Completion = send post to the sender's final ACK (the message is then delivered
        // and acknowledged); the ratio is against this scheme's lossless ideal.
        double ms = (r.tx.done_ns - r.tx.post_ns) / 1e6, ideal = ideal_ms(o, attrs[i]);
        times.push_back(ms);
        std::printf("%-14s %9.3f ms %9.3f ms %7.2fx %7u chunks %8u %9u  %s\n", o.schemes[i].c_str(), ms, ideal,
                    ms / ideal, r.tx.retransmitted_chunks, r.rx.decoded_chunks, r.rx.fallbacks,
                    r.exact ? "delivered byte-exact" : "DIFFERS from what was sent");
    }
    if (times.size() >= 2 && times[0] > 0 && times[1] > 0)
        std::printf("%s completes %.2fx %s than %s\n", o.schemes[1].c_str(),
                    times[0] > times[1] ? times[0] / times[1] : times[1] / times[0],
                    times[0] > times[1] ? "sooner" : "later", o.schemes[0].c_str());

    auto* fabric = sdr::emu::SimFabric::process(nullptr);
    const sdr::emu::Nic& sn = *fabric->find_nic(0);
    const sdr::emu::Nic& rn = *fabric->find_nic(1);
    if (sdr::emu::SimNetwork* net = fabric->network()) {
        const sdr::emu::NetworkTotals n = net->totals();
        std::printf("network %s: %llu packets delivered, %llu switch hops; %llu dropped by links, %llu by full queues, "
                    "%llu ECN-marked",
                    net->topology().name.c_str(), (unsigned long long)fabric->packets_delivered(),
                    (unsigned long long)net->hops(), (unsigned long long)n.link_dropped,
                    (unsigned long long)n.queue_dropped, (unsigned long long)n.marked);
    } else {
        std::printf("link: %llu packets delivered, %llu dropped (data and control, both directions)",
                    (unsigned long long)fabric->packets_delivered(),
                    (unsigned long long)(fabric->link(0, 1)->dropped() + fabric->link(1, 0)->dropped()));
    }
    if (!o.pcap.empty()) std::printf("; pcap: %s (tshark -r %s)", o.pcap.c_str(), o.pcap.c_str());
    std::printf("\n");
    // What the NICs and the receiver's firmware counted (per port; summed over DPA workers).
    std::printf("receiver NIC: %llu frames (%llu control), %llu CQEs, %llu frame drops; firmware: %llu chunk bits "
                "written, %llu stale CQEs, %llu duplicates; sender NIC: %llu control datagrams received\n",
                (unsigned long long)rn.counters().rx_frames, (unsigned long long)rn.counters().rx_ctrl,
                (unsigned long long)rn.counters().rx_cqes, (unsigned long long)rn.counters().rx_drops_total(),
                (unsigned long long)rn.fw_counter(FW_CNT_CHUNK_COMPLETE), (unsigned long long)rn.fw_counter(FW_CNT_RX_STALE),
                (unsigned long long)rn.fw_counter(FW_CNT_RX_DUPLICATE), (unsigned long long)sn.counters().rx_ctrl);

    if (!o.drop_log.empty()) write_drop_log(o.drop_log, *fabric, o.rtt_ms);

    sdr_mr_dereg(smr);
    sdr_mr_dereg(rmr);
    sdr_qp_destroy(sqp);
    sdr_qp_destroy(rqp);
    sdr_context_destroy(sctx);
    sdr_context_destroy(rctx);
    return all_exact ? 0 : 1;
}
