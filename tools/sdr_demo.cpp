// sdr_demo: one SDR message over a simulated long-haul link, written against the C API as an
// application would. Shows the receive chunk bitmap filling, reports the chunks that are
// missing (no reliability layer yet: lost packets leave holes), verifies every chunk marked
// complete byte for byte, and writes a pcap of the frames that crossed the link.
#include <sdr.h>
#include <sdr/emu/fabric.hpp>
#include <sdr_mr.h>
#include <sdr_sim.h>
#include <unistd.h>

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
    std::string pcap = "sdr_demo.pcap";
    uint32_t snaplen = 128;
};

void usage(FILE* f)
{
    std::fprintf(f,
                 "usage: sdr_demo [--size BYTES] [--bw-gbps G] [--rtt-ms R] [--loss P] [--mtu 64..4096]\n"
                 "                [--chunk BYTES] [--channels 1..16] [--seed N] [--pcap FILE|''] [--snaplen BYTES]\n"
                 "Moves one message from sim:0 to sim:1 over a simulated link (defaults: 64 MiB, 100 Gbit/s,\n"
                 "25 ms RTT, 1e-4 packet loss, MTU 4096, 64 KiB chunks, 8 channels, pcap sdr_demo.pcap with\n"
                 "128-byte snaplen; --snaplen 0 keeps whole frames).\n");
}

uint64_t parse_size(const char* s)
{
    char* end;
    double v = std::strtod(s, &end);
    std::string suf = end;
    double mul = suf == "" ? 1 : suf == "K" || suf == "KiB" ? 1024.0 : suf == "M" || suf == "MiB" ? 1048576.0
                                  : suf == "G" || suf == "GiB" ? 1073741824.0 : -1;
    if (end == s || mul < 0 || v < 0) {
        std::fprintf(stderr, "sdr_demo: bad size '%s' (e.g. 65536, 64M, 1G)\n", s);
        std::exit(2);
    }
    return static_cast<uint64_t>(v * mul);
}

double parse_num(const char* opt, const char* s)
{
    char* end;
    double v = std::strtod(s, &end);
    if (end == s || *end) {
        std::fprintf(stderr, "sdr_demo: %s expects a number, got '%s'\n", opt, s);
        std::exit(2);
    }
    return v;
}

bool pow2(uint64_t v) { return v && !(v & (v - 1)); }
uint32_t log2u(uint64_t v) { return static_cast<uint32_t>(63 - __builtin_clzll(v)); }

Options parse(int argc, char** argv)
{
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            usage(stdout);
            std::exit(0);
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "sdr_demo: %s needs a value\n", a.c_str());
            usage(stderr);
            std::exit(2);
        }
        const char* v = argv[++i];
        if (a == "--size") o.size = parse_size(v);
        else if (a == "--bw-gbps") o.bw_gbps = parse_num("--bw-gbps", v);
        else if (a == "--rtt-ms") o.rtt_ms = parse_num("--rtt-ms", v);
        else if (a == "--loss") o.loss = parse_num("--loss", v);
        else if (a == "--mtu") o.mtu = static_cast<uint32_t>(parse_num("--mtu", v));
        else if (a == "--chunk") o.chunk = static_cast<uint32_t>(parse_size(v));
        else if (a == "--channels") o.channels = static_cast<uint32_t>(parse_num("--channels", v));
        else if (a == "--seed") o.seed = static_cast<uint64_t>(parse_num("--seed", v));
        else if (a == "--pcap") o.pcap = v;
        else if (a == "--snaplen") o.snaplen = static_cast<uint32_t>(parse_num("--snaplen", v));
        else {
            std::fprintf(stderr, "sdr_demo: unknown option %s\n", a.c_str());
            usage(stderr);
            std::exit(2);
        }
    }
    if (!pow2(o.mtu) || o.mtu < 64 || o.mtu > 4096) { std::fprintf(stderr, "sdr_demo: --mtu must be a power of two in 64..4096\n"); std::exit(2); }
    if (!pow2(o.chunk) || o.chunk < o.mtu) { std::fprintf(stderr, "sdr_demo: --chunk must be a power of two >= MTU\n"); std::exit(2); }
    if (o.size == 0 || o.size > (1ull << 32) - 1) { std::fprintf(stderr, "sdr_demo: --size must be 1 byte .. 4 GiB-1\n"); std::exit(2); }
    if (o.bw_gbps <= 0 || o.rtt_ms < 0 || o.loss < 0 || o.loss > 1) { std::fprintf(stderr, "sdr_demo: bandwidth > 0, RTT >= 0, loss in [0,1]\n"); std::exit(2); }
    return o;
}

[[noreturn]] void die(const char* what)
{
    std::fprintf(stderr, "sdr_demo: %s: %s\n", what, sdr_last_error());
    std::exit(1);
}

void print_missing(const uint8_t* bm, uint64_t nchunks)
{
    uint64_t missing = 0;
    std::string ranges;
    for (uint64_t c = 0; c < nchunks;) {
        if (bm[c / 8] >> (c % 8) & 1) { c++; continue; }
        uint64_t s = c;
        while (c < nchunks && !(bm[c / 8] >> (c % 8) & 1)) c++;
        missing += c - s;
        if (ranges.size() < 400) ranges += (ranges.empty() ? "" : ", ") + (c - s == 1 ? std::to_string(s) : std::to_string(s) + "-" + std::to_string(c - 1));
    }
    if (!missing) std::printf("missing chunks: none\n");
    else std::printf("missing chunks: %llu of %llu (%s%s)\n", (unsigned long long)missing, (unsigned long long)nchunks,
                     ranges.c_str(), ranges.size() >= 400 ? ", ..." : "");
}

}  // namespace

int main(int argc, char** argv)
{
    Options o = parse(argc, argv);
    sdr::emu::FabricParams fp;
    fp.link.bandwidth_gbps = o.bw_gbps;
    fp.link.rtt_ms = o.rtt_ms;
    fp.link.impairment.loss = o.loss;
    fp.seed = o.seed;
    fp.pcap_path = o.pcap;
    fp.pcap_snaplen = o.snaplen;
    fp.drop_log = true;
    sdr::emu::SimFabric::install(std::make_unique<sdr::emu::SimFabric>(fp));

    // From here on: the SDR C API, as an application writes it.
    sdr_dev_attr da{o.channels, 1};
    sdr_context* sctx = sdr_context_create("sim:0", &da);
    sdr_context* rctx = sdr_context_create("sim:1", &da);
    if (!sctx || !rctx) die("sdr_context_create");
    uint32_t size_log = log2u(o.size) + (pow2(o.size) ? 0 : 1);
    if (size_log < log2u(o.chunk)) size_log = log2u(o.chunk);
    sdr_qp_attr qa{log2u(o.chunk), size_log + 1, 1, static_cast<sdr_mtu>(log2u(o.mtu) - 6), 1, 1, 0};
    sdr_qp* sqp = sdr_qp_create(sctx, &qa);
    sdr_qp* rqp = sdr_qp_create(rctx, &qa);
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

    std::printf("sdr_demo: %.2f MiB from sim:0 to sim:1 | %.0f Gbit/s, RTT %.1f ms, loss %g | MTU %u, chunk %u, %u channels, seed %llu\n",
                o.size / 1048576.0, o.bw_gbps, o.rtt_ms, o.loss, o.mtu, o.chunk, o.channels, (unsigned long long)o.seed);
    sdr_recv_wr rw{static_cast<uint32_t>(o.size), rk, reinterpret_cast<uint64_t>(dst.data())};
    sdr_recv_handle* rh;
    if (sdr_recv_post(rqp, &rw, &rh) != SDR_SUCCESS) die("sdr_recv_post");
    // (A real application sends a clear-to-send here; both ends live in this process.)
    sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(o.size), sk, reinterpret_cast<uint64_t>(src.data()), 0};
    sdr_send_handle* sh;
    if (sdr_send_post(sqp, &sw, &sh) != SDR_SUCCESS) die("sdr_send_post");

    uint64_t nchunks = (o.size + o.chunk - 1) / o.chunk;
    // Line-rate injection counts every packet's headers, ICRC, preamble, gap and FCS (102 B).
    uint64_t npackets = (o.size + o.mtu - 1) / o.mtu;
    double inject_ms = (o.size + npackets * 102.0) * 8.0 / (o.bw_gbps * 1e6);
    // Sample the bitmap 200 times over the expected transfer (times below are known to one
    // sample), draw the progress bar 20 times.
    uint64_t step_ns = static_cast<uint64_t>(std::max(0.005, (inject_ms + o.rtt_ms / 2) / 200) * 1e6);
    uint64_t draw_every_ns = step_ns * 10, next_draw_ns = 0;
    bool tty = isatty(STDOUT_FILENO);
    int done = 0;
    uint64_t injected_ns = 0, last_bit_ns = 0, prev_set = 0;
    uint8_t* bm = nullptr;
    size_t nb = 0;
    // Advance virtual time step by step; the polling calls below advance it too (as they do
    // for any application), so the display reads the clock after them.
    for (;;) {
        sdr_sim_advance_to(rctx, sdr_now_ns(rctx) + step_ns);
        if (!done && sdr_send_poll(sh, &done, nullptr) == SDR_ERROR) die("sdr_send_poll");
        if (done && !injected_ns) injected_ns = sdr_now_ns(sctx);
        sdr_recv_bitmap_get(rh, &bm, &nb);
        uint64_t t = sdr_now_ns(rctx);
        uint64_t set = 0;
        for (size_t i = 0; i < nb; i++) set += __builtin_popcount(bm[i]);
        if (set != prev_set) last_bit_ns = t;
        prev_set = set;
        bool finished = done && !sdr_sim_pending(rctx);
        if (t < next_draw_ns && !finished) continue;
        next_draw_ns = t + draw_every_ns;
        int w = 40, fill = static_cast<int>(w * set / nchunks);
        std::printf("%s[%.*s%*s] %6llu/%llu chunks  t=%8.3f ms%s", tty ? "\r" : "", fill,
                    "########################################", w - fill, "", (unsigned long long)set,
                    (unsigned long long)nchunks, t / 1e6, tty ? "" : "\n");
        std::fflush(stdout);
        if (finished) break;
    }
    if (tty) std::printf("\n");
    // times are known to one sample step
    std::printf("send injected by %.3f ms (line rate: %.3f ms); last chunk bit by %.3f ms (lossless ideal: %.3f ms)\n",
                injected_ns / 1e6, inject_ms, last_bit_ns / 1e6, inject_ms + o.rtt_ms / 2);
    print_missing(bm, nchunks);

    uint64_t verified = 0, corrupt = 0;
    for (uint64_t c = 0; c < nchunks; c++) {
        if (!(bm[c / 8] >> (c % 8) & 1)) continue;
        uint64_t off = c * o.chunk, len = std::min<uint64_t>(o.chunk, o.size - off);
        if (std::memcmp(src.data() + off, dst.data() + off, len)) corrupt++;
        else verified++;
    }
    auto* fabric = sdr::emu::SimFabric::process(nullptr);
    std::printf("verified %llu complete chunks byte for byte, %llu corrupt\n", (unsigned long long)verified,
                (unsigned long long)corrupt);
    std::printf("link: %llu packets delivered, %llu dropped", (unsigned long long)fabric->packets_delivered(),
                (unsigned long long)fabric->drop_log().size());
    if (!o.pcap.empty()) std::printf("; pcap: %s (tshark -r %s)", o.pcap.c_str(), o.pcap.c_str());
    std::printf("\n");
    // What the receiving NIC and its firmware counted (per port; summed over DPA workers).
    const sdr::emu::Nic& rn = *fabric->find_nic(1);
    uint64_t window_writes = 0;
    for (uint32_t i = 0; i < rn.num_workers(); i++) window_writes += rn.worker(i).window_writes;
    std::printf("receiver NIC: %llu frames, %llu CQEs, %llu frame drops; firmware: %llu chunk bits written "
                "(%llu host-window writes), %llu stale CQEs, %llu duplicates\n",
                (unsigned long long)rn.counters().rx_frames, (unsigned long long)rn.counters().rx_cqes,
                (unsigned long long)rn.counters().rx_drops_total(),
                (unsigned long long)rn.fw_counter(FW_CNT_CHUNK_COMPLETE), (unsigned long long)window_writes,
                (unsigned long long)rn.fw_counter(FW_CNT_RX_STALE), (unsigned long long)rn.fw_counter(FW_CNT_RX_DUPLICATE));

    sdr_recv_complete(rh);
    sdr_mr_dereg(smr);
    sdr_mr_dereg(rmr);
    sdr_qp_destroy(sqp);
    sdr_qp_destroy(rqp);
    sdr_context_destroy(sctx);
    sdr_context_destroy(rctx);
    return corrupt ? 1 : 0;
}
