// sdr_write_bw: perftest-style bandwidth of SDR writes between two emulated NICs, one per
// process (two network namespaces or two hosts). The server (no address given) listens on a
// TCP bootstrap port, takes the run's parameters from the client, exchanges QP-info blobs and
// grants clear-to-send credits as it posts receives; the client streams messages into them.
// Both report: the client what it sent (Gbit/s, packets/s, messages/s), the server what
// arrived (goodput of complete chunks, chunks lost).
#include <sdr.h>
#include <sdr/host/inspect.hpp>
#include <sdr_mr.h>
#include <sdr_oob.h>
#include <sdr_sim.h>
#include <sdr_stats.h>

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Options {
    std::string device, server;
    uint16_t port = 18515;
    uint64_t size = 1 << 20;
    uint32_t iters = 1000, warmup = 100, in_flight = 8, mtu = 4096, chunk = 65536, channels = 4;
    int timeout_ms = 10000;
    int settle_ms = -1;  // -1: 20 ms + twice the added delay
    int app_core = -1;
    bool json = false, verify = false;
};

// What the client tells the server (little-endian on the wire; both ends are this program).
struct RunParams {
    uint32_t magic = 0x53445257;  // "SDRW"
    uint32_t version = 1;
    uint64_t size;
    uint32_t iters, warmup, in_flight, mtu, chunk, channels;
};
struct Credit {
    uint32_t type = 1;  // receives posted so far (cumulative)
    uint32_t posted;
};
struct SentUpTo {
    uint32_t type = 2;  // sends completed so far (cumulative)
    uint32_t sent;
    uint64_t frames = 0;  // with every send completed: the frames the client's kernel took (raw:/xdp:)
};
struct Result {
    uint32_t type = 3;
    uint32_t messages;
    uint64_t chunks_expected, chunks_received;
    uint64_t bytes_received;  // in complete chunks: goodput counts only what the bitmap vouches for
    double seconds;  // first measured arrival to last measured completion
};

[[noreturn]] void die(const std::string& what)
{
    std::fprintf(stderr, "sdr_write_bw: %s\n", what.c_str());
    std::exit(1);
}
[[noreturn]] void die_sdr(const std::string& what) { die(what + ": " + sdr_last_error()); }

void usage(FILE* f)
{
    std::fprintf(f,
                 "usage: sdr_write_bw -d DEVICE [options] [SERVER_ADDRESS]   (without an address: the server)\n"
                 "  -d, --device NAME     raw:IFNAME (AF_PACKET) or xdp:IFNAME (AF_XDP)\n"
                 "  -p, --port N          TCP bootstrap port (18515)\n"
                 "  -s, --size BYTES      message size, K/M suffixes (1M)           [client sets these]\n"
                 "  -n, --iters N         measured messages (1000)\n"
                 "  -w, --warmup N        messages before measuring (100)\n"
                 "  -q, --in-flight N     messages in flight, 1..1024 (8)\n"
                 "  -m, --mtu BYTES       256..4096 (4096)\n"
                 "      --chunk BYTES     bitmap chunk size, >= MTU (64K)\n"
                 "  -c, --channels N      channels = emulated DPA workers, 1..16 (4)\n"
                 "      --loss P, --burst GB,BG[,LB], --reorder P,US, --dup P, --delay-ms D, --rate-gbps G,\n"
                 "      --seed N          impairments of what THIS side sends (SDR_RT_*)\n"
                 "      --pcap FILE, --snaplen N  capture this NIC's frames (data cut at N bytes; 0 whole);\n"
                 "                        FILE.pcapng also records what the impairments dropped\n"
                 "      --core N, --busy-poll     pin / never sleep the NIC's polling thread\n"
                 "      --workers N, --worker-cores LIST  DPA workers on N dedicated threads (0: inline)\n"
                 "      --app-core N      pin this program's own threads (and unpinned workers) to core N,\n"
                 "                        keeping them off the polling thread's core\n"
                 "      --xdp-mode auto|native|generic  how xdp: attaches its program\n"
                 "      --timeout-ms T    bootstrap timeout (10000)\n"
                 "      --settle-ms T     server: how long a message the client reported sent still waits\n"
                 "                        for its packets (20 + 2 x SDR_RT_DELAY_MS)\n"
                 "      --json            one JSON object instead of the table\n"
                 "      --verify          server: check every complete chunk's bytes (costs CPU)\n");
}

uint64_t parse_size(const std::string& opt, const char* s)
{
    char* end;
    double v = std::strtod(s, &end);
    std::string suf = end;
    double mul = suf.empty() ? 1 : (suf == "K" || suf == "KiB") ? 1024.0 : (suf == "M" || suf == "MiB") ? 1048576.0
                                 : (suf == "G" || suf == "GiB") ? 1073741824.0 : -1;
    if (end == s || mul < 0 || !(v >= 0)) die(opt + ": bad size '" + s + "' (e.g. 4096, 64K, 1M)");
    return static_cast<uint64_t>(v * mul);
}

Options parse(int argc, char** argv)
{
    Options o;
    static const std::pair<const char*, const char*> env_opts[] = {
        {"--loss", "SDR_RT_LOSS"},       {"--burst", "SDR_RT_BURST"}, {"--reorder", "SDR_RT_REORDER"},
        {"--dup", "SDR_RT_DUP"},         {"--delay-ms", "SDR_RT_DELAY_MS"}, {"--rate-gbps", "SDR_RT_RATE_GBPS"},
        {"--seed", "SDR_RT_SEED"},       {"--pcap", "SDR_RT_PCAP"},   {"--snaplen", "SDR_RT_SNAPLEN"},
        {"--core", "SDR_RT_CORE"},       {"--workers", "SDR_RT_WORKER_THREADS"},
        {"--worker-cores", "SDR_RT_WORKER_CORES"}, {"--xdp-mode", "SDR_RT_XDP_MODE"}};
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            usage(stdout);
            std::exit(0);
        }
        if (a == "--json") { o.json = true; continue; }
        if (a == "--verify") { o.verify = true; continue; }
        if (a == "--busy-poll") { setenv("SDR_RT_BUSY_POLL", "1", 1); continue; }
        if (a[0] != '-') {
            if (!o.server.empty()) die("more than one server address given");
            o.server = a;
            continue;
        }
        if (i + 1 >= argc) die(a + " needs a value (see --help)");
        const char* v = argv[++i];
        bool env = false;
        for (const auto& [opt, var] : env_opts)
            if (a == opt) {
                setenv(var, v, 1);  // the device reads its SDR_RT_* settings when it opens
                env = true;
            }
        if (env) continue;
        auto num = [&](uint64_t lo, uint64_t hi) {
            uint64_t n = parse_size(a, v);
            if (n < lo || n > hi) die(a + " must lie in " + std::to_string(lo) + ".." + std::to_string(hi));
            return n;
        };
        if (a == "-d" || a == "--device") o.device = v;
        else if (a == "-p" || a == "--port") o.port = static_cast<uint16_t>(num(1, 65535));
        else if (a == "-s" || a == "--size") o.size = num(1, (1ull << 32) - 1);
        else if (a == "-n" || a == "--iters") o.iters = static_cast<uint32_t>(num(1, 1u << 30));
        else if (a == "-w" || a == "--warmup") o.warmup = static_cast<uint32_t>(num(0, 1u << 30));
        else if (a == "-q" || a == "--in-flight") o.in_flight = static_cast<uint32_t>(num(1, 1024));
        else if (a == "-m" || a == "--mtu") o.mtu = static_cast<uint32_t>(num(256, 4096));
        else if (a == "--chunk") o.chunk = static_cast<uint32_t>(num(256, 1u << 30));
        else if (a == "-c" || a == "--channels") o.channels = static_cast<uint32_t>(num(1, 16));
        else if (a == "--timeout-ms") o.timeout_ms = static_cast<int>(num(1, 1u << 30));
        else if (a == "--settle-ms") o.settle_ms = static_cast<int>(num(0, 1u << 30));
        else if (a == "--app-core") o.app_core = static_cast<int>(num(0, CPU_SETSIZE - 1));
        else die("unknown option " + a + " (see --help)");
    }
    if (o.device.empty()) die("-d DEVICE is required (raw:IFNAME or xdp:IFNAME; see --help)");
    return o;
}

bool pow2(uint64_t v) { return v && !(v & (v - 1)); }
uint32_t log2_ceil(uint64_t v) { return v <= 1 ? 0 : 64 - static_cast<uint32_t>(__builtin_clzll(v - 1)); }

double now_s()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The bytes every message carries, so the server can check what it received on its own.
uint8_t pattern(size_t i) { return static_cast<uint8_t>(i * 131 + 7); }

// One context and QP shaped by the run's parameters.
struct Side {
    sdr_context* ctx = nullptr;
    sdr_qp* qp = nullptr;
    sdr_qp_attr attr{};
    uint32_t slots = 0;

    void open(const Options& o, const RunParams& rp)
    {
        if (!pow2(rp.mtu) || !pow2(rp.chunk) || rp.chunk < rp.mtu)
            die("--mtu and --chunk must be powers of two with chunk >= MTU");
        sdr_dev_attr da{rp.channels, 1};
        if (!(ctx = sdr_context_create(o.device.c_str(), &da))) die_sdr("sdr_context_create(" + o.device + ")");
        slots = 1u << log2_ceil(rp.in_flight);
        uint32_t slot_log = std::max(log2_ceil(rp.size), log2_ceil(rp.chunk));
        attr = sdr_qp_attr{log2_ceil(rp.chunk), slot_log + log2_ceil(slots), log2_ceil(slots),
                           static_cast<sdr_mtu>(log2_ceil(rp.mtu) - 6), 1, 1, 0};
        if (!(qp = sdr_qp_create(ctx, &attr))) die_sdr("sdr_qp_create");
    }
    void connect(sdr_oob* oob, int timeout_ms)
    {
        size_t n, got;
        sdr_qp_info_size_get(qp, &n);
        std::vector<uint8_t> mine(n), theirs(n);
        sdr_qp_info_get(qp, mine.data());
        if (sdr_oob_exchange(oob, mine.data(), n, theirs.data(), n, &got, timeout_ms) != SDR_SUCCESS)
            die_sdr("exchanging QP info");
        if (sdr_qp_connect(qp, theirs.data()) != SDR_SUCCESS) die_sdr("sdr_qp_connect");
    }
    ~Side()
    {
        if (qp) sdr_qp_destroy(qp);
        if (ctx) sdr_context_destroy(ctx);
    }
};

template <class T>
bool take(const std::vector<uint8_t>& m, T* out)
{
    if (m.size() != sizeof(T)) return false;
    std::memcpy(out, m.data(), sizeof(T));
    return true;
}

// Non-blocking receive of one bootstrap message (empty optional-like: false if none).
bool oob_poll(sdr_oob* oob, std::vector<uint8_t>* m, int timeout_ms = 0)
{
    m->resize(256);
    size_t len = 0;
    int rc = sdr_oob_recv(oob, m->data(), m->size(), &len, timeout_ms);
    if (rc == SDR_RETRY) return false;
    if (rc != SDR_SUCCESS) die_sdr("bootstrap connection");
    m->resize(len);
    return true;
}

void print_header(const Options& o, const RunParams& rp, Side& s, const char* role)
{
    if (o.json) return;
    const auto* rt = sdr::host::rt_of(s.ctx);
    std::printf("sdr_write_bw %s: %s%s | %llu B messages, MTU %u, chunk %u, %u channels, %u in flight, %u iterations "
                "(+%u warm-up)\n",
                role, o.device.c_str(), rt ? (" (" + rt->port_info().mode + ")").c_str() : "",
                (unsigned long long)rp.size, rp.mtu, rp.chunk, rp.channels, rp.in_flight, rp.iters, rp.warmup);
}

// Every counter of the context's NIC (sdr_stats.h), by name.
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

// Before the server reports, every frame the client's kernel took has reached our NIC or been
// counted as a kernel drop: a slow receiver may give up on messages (the settle time) while
// their frames still wait in its ring, and a report read then would miss them. The client's
// last progress report carries its frame count. The wait lasts while the count still moves
// (the NIC draining its ring); once nothing has moved for 200 ms (or the timeout passed), a
// frame lost where no counter sees it shows as a shortfall in the report, not as a hang.
void await_accounting(sdr_context* ctx, sdr_oob* oob, uint32_t total, uint32_t* sent, uint64_t* frames, int timeout_ms)
{
    std::vector<uint8_t> m;
    SentUpTo su;
    while (*sent < total) {
        if (!oob_poll(oob, &m, timeout_ms)) die("the client stopped reporting its progress");
        if (take(m, &su)) *sent = su.sent, *frames = su.frames;
    }
    const double until = now_s() + timeout_ms / 1e3;
    double moved_at = now_s();
    for (uint64_t last = 0;;) {
        const auto all = nic_counters(ctx);
        const uint64_t seen = counter(all, "port.rx_frames") + counter(all, "kernel.rx_dropped");
        if (seen >= *frames || now_s() > until) return;
        if (seen != last) last = seen, moved_at = now_s();
        if (now_s() - moved_at > 0.2) return;
        sdr_sim_wait(ctx, sdr_now_ns(ctx) + 200'000);
    }
}

// What the NIC counted: frames, CQEs, bytes placed, control datagrams, the kernel's drops, and
// every frame the NIC dropped, by reason (hostile frames show up here), then every non-zero
// counter as sdr-stat prints it. Text, or the members of a JSON object ("counters" holds all).
std::string nic_report(sdr_context* ctx, bool json)
{
    const auto all = nic_counters(ctx);
    auto get = [&](const std::string& name) { return counter(all, name); };
    auto n = [](uint64_t v) { return std::to_string(v); };
    const std::string drop_prefix = "port.rx_drop.";
    std::string drops, counters, kernel;
    for (const auto& [k, v] : all) {
        if (json) counters += std::string(counters.empty() ? "" : ",") + "\"" + k + "\":" + n(v);
        else if (v) counters += "\n  " + k + " " + n(v);
        if (k.rfind(drop_prefix, 0) == 0) {
            const std::string why = k.substr(drop_prefix.size());
            if (json) drops += std::string(drops.empty() ? "" : ",") + "\"" + why + "\":" + n(v);
            else if (v) drops += std::string(drops.empty() ? "" : ", ") + why + " " + n(v);
        }
        if (!json && v && k.rfind("kernel.", 0) == 0 && k.find("drop") == std::string::npos &&
            (k.find("full") != std::string::npos || k.find("empty") != std::string::npos || k.find("invalid") != std::string::npos ||
             k.find("oversize") != std::string::npos || k.find("freezes") != std::string::npos))
            kernel += std::string(kernel.empty() ? "" : ", ") + k.substr(7) + " " + n(v);
    }
    if (json)
        return "\"rx_frames\":" + n(get("port.rx_frames")) + ",\"rx_cqes\":" + n(get("port.rx_cqes")) +
               ",\"rx_placed_bytes\":" + n(get("port.rx_placed_bytes")) + ",\"rx_ctrl\":" + n(get("port.rx_ctrl")) +
               ",\"rx_kernel_drops\":" + n(get("kernel.rx_dropped")) + ",\"rx_drops_total\":" +
               n(get("port.rx_drops_total")) + ",\"rx_drops\":{" + drops + "},\"counters\":{" + counters + "}";
    return "NIC: " + n(get("port.rx_frames")) + " frames received, " + n(get("port.rx_cqes")) + " CQEs, " +
           n(get("port.rx_placed_bytes")) + " B placed, " + n(get("port.rx_ctrl")) + " control datagrams, " +
           n(get("kernel.rx_dropped")) + " dropped by the kernel" + (kernel.empty() ? "" : " (" + kernel + ")") + "; " +
           n(get("port.rx_drops_total")) + " dropped by the NIC" + (drops.empty() ? "" : " (" + drops + ")") +
           "\ncounters (sdr-stat names):" + counters;
}

// Corrupt chunks among the complete ones (`bits`, the bitmap read before sdr_recv_complete) of
// a received message; the slot is zeroed after, so the next message in it cannot pass on stale
// bytes. Called after sdr_recv_complete: from then on the NIC writes nothing into the buffer,
// also not a straggler of an incomplete chunk, which the memset would race with.
uint64_t verify(const std::vector<uint8_t>& bits, uint8_t* msg, const RunParams& rp)
{
    uint64_t bad = 0;
    for (uint64_t c = 0; c * rp.chunk < rp.size; c++) {
        if (!(bits[c / 8] >> (c % 8) & 1)) continue;
        size_t end = std::min<size_t>(rp.size, (c + 1) * size_t{rp.chunk});
        for (size_t i = c * size_t{rp.chunk}; i < end; i++)
            if (msg[i] != pattern(i)) {
                bad++;
                break;
            }
    }
    std::memset(msg, 0, rp.size);
    return bad;
}

int run_server(const Options& o)
{
    sdr_oob* oob = sdr_oob_listen(nullptr, o.port, o.timeout_ms);
    if (!oob) die_sdr("waiting for a client");
    std::vector<uint8_t> m;
    RunParams rp;
    if (!oob_poll(oob, &m, o.timeout_ms) || !take(m, &rp) || rp.magic != RunParams{}.magic || rp.version != 1)
        die("the client did not send this program's run parameters");
    Side s;
    s.open(o, rp);
    s.connect(oob, o.timeout_ms);
    print_header(o, rp, s, "server");
    const uint32_t total = rp.warmup + rp.iters;
    std::vector<uint8_t> buf(size_t{s.slots} * rp.size);
    sdr_mr* mr = sdr_mr_reg(s.ctx, buf.data(), buf.size(), SDR_ACCESS_REMOTE_WRITE);
    if (!mr) die_sdr("sdr_mr_reg");
    uint32_t lkey;
    sdr_mr_lkey_get(mr, &lkey);
    const uint64_t nchunks = (rp.size + rp.chunk - 1) / rp.chunk;
    std::deque<sdr_recv_handle*> posted;
    uint32_t next_post = 0, done = 0, client_sent = 0;
    uint64_t client_frames = 0;
    std::vector<uint8_t> bits;  // the bitmap of the message being verified
    double sent_seen_at = 0, first_arrival = 0, last_done = 0;
    uint64_t chunks_received = 0, bytes_received = 0, corrupt_chunks = 0;
    const uint64_t last_chunk_short = nchunks * rp.chunk - rp.size;  // the last chunk is shorter by this
    // Posts what the slots allow and sends the new credit. A slot's (slot, generation) pair may
    // still be quiet (SDR_RETRY: the maximum packet lifetime after its last receive, sdr_ext.h):
    // the loop below tries again.
    auto post = [&] {
        const uint32_t before = next_post;
        while (next_post < total && posted.size() < s.slots) {
            sdr_recv_wr rw{static_cast<uint32_t>(rp.size), lkey,
                           reinterpret_cast<uint64_t>(buf.data() + size_t{next_post % s.slots} * rp.size)};
            sdr_recv_handle* h;
            int rc = sdr_recv_post(s.qp, &rw, &h);
            if (rc == SDR_RETRY) break;
            if (rc != SDR_SUCCESS) die_sdr("sdr_recv_post");
            posted.push_back(h);
            next_post++;
        }
        if (next_post == before) return;
        Credit c;
        c.posted = next_post;
        if (sdr_oob_send(oob, &c, sizeof c) != SDR_SUCCESS) die_sdr("sending credit");
    };
    post();
    // A message the client has sent whole is complete when its bitmap is, or when nothing more
    // can arrive: 20 ms (plus the added delay, or --settle-ms) after the client said it was sent.
    const char* delay = std::getenv("SDR_RT_DELAY_MS");
    const double settle = o.settle_ms >= 0 ? o.settle_ms / 1e3 : 0.02 + (delay ? 2 * std::atof(delay) / 1e3 : 0);
    while (done < total) {
        SentUpTo su;
        if (oob_poll(oob, &m) && take(m, &su)) {
            client_sent = su.sent;
            client_frames = su.frames;
            sent_seen_at = now_s();
        }
        if (posted.size() < s.slots) post();
        if (posted.empty()) {  // every slot free, the next one still quiet
            sdr_sim_wait(s.ctx, sdr_now_ns(s.ctx) + 200'000);
            continue;
        }
        sdr_recv_handle* h = posted.front();
        uint8_t* bm;
        size_t nb;
        if (sdr_recv_bitmap_get(h, &bm, &nb) != SDR_SUCCESS) die_sdr("sdr_recv_bitmap_get");
        uint64_t set = 0;
        for (size_t i = 0; i < nb; i++) set += __builtin_popcount(__atomic_load_n(&bm[i], __ATOMIC_ACQUIRE));
        if (done >= rp.warmup && set && !first_arrival) first_arrival = now_s();
        bool over = set == nchunks || (client_sent > done && now_s() - sent_seen_at > settle);
        if (!over) {
            sdr_sim_wait(s.ctx, sdr_now_ns(s.ctx) + 200'000);
            continue;
        }
        if (done >= rp.warmup) {
            chunks_received += set;
            bytes_received += set * rp.chunk -
                              ((__atomic_load_n(&bm[(nchunks - 1) / 8], __ATOMIC_ACQUIRE) >> ((nchunks - 1) % 8) & 1)
                                   ? last_chunk_short
                                   : 0);
        }
        if (o.verify) {
            bits.resize(nb);
            for (size_t i = 0; i < nb; i++) bits[i] = __atomic_load_n(&bm[i], __ATOMIC_ACQUIRE);
        }
        sdr_recv_complete(h);
        if (o.verify) corrupt_chunks += verify(bits, buf.data() + size_t{done % s.slots} * rp.size, rp);
        posted.pop_front();
        done++;
        last_done = now_s();
        post();
    }
    await_accounting(s.ctx, oob, total, &client_sent, &client_frames, o.timeout_ms);
    Result r;
    r.messages = rp.iters;
    r.chunks_expected = nchunks * rp.iters;
    r.chunks_received = chunks_received;
    r.bytes_received = bytes_received;
    r.seconds = last_done - first_arrival;
    if (sdr_oob_send(oob, &r, sizeof r) != SDR_SUCCESS) die_sdr("sending the result");
    // The client may see its last local completions after we saw the data land, and still
    // report progress: read until it hangs up, so it never writes into a closed connection.
    uint8_t drain[256];
    for (size_t len; sdr_oob_recv(oob, drain, sizeof drain, &len, o.timeout_ms) == SDR_SUCCESS;) {}
    double gbps = r.bytes_received * 8.0 / r.seconds / 1e9;
    if (o.json)
        std::printf("{\"role\":\"server\",\"device\":\"%s\",\"size\":%llu,\"iters\":%u,\"warmup\":%u,\"goodput_gbps\":%.3f,"
                    "\"chunks_expected\":%llu,\"chunks_received\":%llu,\"corrupt_chunks\":%s,\"seconds\":%.6f,%s}\n",
                    o.device.c_str(), (unsigned long long)rp.size, rp.iters, rp.warmup, gbps,
                    (unsigned long long)r.chunks_expected, (unsigned long long)r.chunks_received,
                    o.verify ? std::to_string(corrupt_chunks).c_str() : "null", r.seconds, nic_report(s.ctx, true).c_str());
    else
        std::printf("received %llu of %llu chunks (%.4f %% lost) in %.3f s: goodput %.2f Gbit/s\n%s\n",
                    (unsigned long long)r.chunks_received, (unsigned long long)r.chunks_expected,
                    100.0 * (r.chunks_expected - r.chunks_received) / r.chunks_expected, r.seconds, gbps,
                    nic_report(s.ctx, false).c_str());
    if (o.verify && !o.json) std::printf("verified every complete chunk: %llu corrupt\n", (unsigned long long)corrupt_chunks);
    sdr_mr_dereg(mr);
    sdr_oob_close(oob);
    return 0;
}

int run_client(const Options& o)
{
    sdr_oob* oob = sdr_oob_connect(o.server.c_str(), o.port, o.timeout_ms);
    if (!oob) die_sdr("connecting to the server");
    RunParams rp;
    rp.size = o.size;
    rp.iters = o.iters;
    rp.warmup = o.warmup;
    rp.in_flight = o.in_flight;
    rp.mtu = o.mtu;
    rp.chunk = o.chunk;
    rp.channels = o.channels;
    if (sdr_oob_send(oob, &rp, sizeof rp) != SDR_SUCCESS) die_sdr("sending the run parameters");
    Side s;
    s.open(o, rp);
    s.connect(oob, o.timeout_ms);
    print_header(o, rp, s, "client");
    std::vector<uint8_t> src(rp.size);
    for (size_t i = 0; i < src.size(); i++) src[i] = pattern(i);
    sdr_mr* mr = sdr_mr_reg(s.ctx, src.data(), src.size(), SDR_ACCESS_REMOTE_WRITE);
    if (!mr) die_sdr("sdr_mr_reg");
    uint32_t lkey;
    sdr_mr_lkey_get(mr, &lkey);
    const uint32_t total = rp.warmup + rp.iters;
    uint32_t credit = 0, next_send = 0, completed = 0, reported = 0;
    std::deque<sdr_send_handle*> inflight;
    double t_start = 0, t_end = 0, last_report = 0;
    std::vector<uint8_t> m;
    // The server may see the data land, and send its result, before our last local completions:
    // a result read in the loop is kept, not dropped as a malformed credit.
    Result r{};
    bool have_result = false;
    while (completed < total) {
        bool progressed = false;
        Credit c;
        if (oob_poll(oob, &m)) {
            if (take(m, &c)) credit = c.posted;
            else have_result = take(m, &r) || have_result;
        }
        while (next_send < credit && inflight.size() < s.slots) {
            sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(rp.size), lkey, reinterpret_cast<uint64_t>(src.data()), 0};
            sdr_send_handle* h;
            int rc = sdr_send_post(s.qp, &sw, &h);
            if (rc == SDR_RETRY) break;
            if (rc != SDR_SUCCESS) die_sdr("sdr_send_post");
            if (next_send == rp.warmup) t_start = now_s();
            inflight.push_back(h);
            next_send++;
            progressed = true;
        }
        while (!inflight.empty()) {
            int done = 0;
            if (sdr_send_poll(inflight.front(), &done, nullptr) == SDR_ERROR) die_sdr("sdr_send_poll");
            if (!done) break;
            inflight.pop_front();
            if (++completed == total) t_end = now_s();
            progressed = true;
        }
        if (completed > reported && (now_s() - last_report > 0.001 || completed == total)) {
            SentUpTo su;
            su.sent = reported = completed;
            if (completed == total) su.frames = counter(nic_counters(s.ctx), "kernel.tx_frames");
            last_report = now_s();
            if (sdr_oob_send(oob, &su, sizeof su) != SDR_SUCCESS) die_sdr("reporting progress");
        }
        // Nothing to do: sleep until the NIC completes something (or credit may have come).
        if (!progressed) sdr_sim_wait(s.ctx, sdr_now_ns(s.ctx) + (inflight.empty() ? 100'000 : 1'000'000));
    }
    while (!have_result) have_result = oob_poll(oob, &m, o.timeout_ms) && take(m, &r);
    double secs = t_end - t_start;
    uint64_t packets = (rp.size + rp.mtu - 1) / rp.mtu * uint64_t{rp.iters};
    double gbps = rp.size * 8.0 * rp.iters / secs / 1e9, mpps = packets / secs / 1e6, mps = rp.iters / secs;
    double good = r.bytes_received * 8.0 / r.seconds / 1e9;
    double lost = 100.0 * double(r.chunks_expected - r.chunks_received) / double(r.chunks_expected);
    const auto* rt = sdr::host::rt_of(s.ctx);
    if (o.json) {
        std::printf("{\"role\":\"client\",\"device\":\"%s\",\"port_mode\":\"%s\",\"size\":%llu,\"mtu\":%u,\"chunk\":%u,"
                    "\"channels\":%u,\"in_flight\":%u,\"iters\":%u,\"tx_gbps\":%.3f,\"tx_mpps\":%.4f,\"msgs_per_s\":%.1f,"
                    "\"goodput_gbps\":%.3f,\"chunk_loss_pct\":%.5f,\"seconds\":%.6f,%s}\n",
                    o.device.c_str(), rt ? rt->port_info().mode.c_str() : "simulator", (unsigned long long)rp.size,
                    rp.mtu, rp.chunk, rp.channels, rp.in_flight, rp.iters, gbps, mpps, mps, good, lost, secs,
                    nic_report(s.ctx, true).c_str());
    } else {
        std::printf(" %12s %10s %12s %10s %12s %16s %12s\n", "bytes", "iterations", "Gbit/s sent", "Mpps", "msgs/s",
                    "goodput Gbit/s", "chunks lost");
        std::printf(" %12llu %10u %12.2f %10.3f %12.0f %16.2f %11.4f%%\n", (unsigned long long)rp.size, rp.iters, gbps,
                    mpps, mps, good, lost);
        std::printf("%s\n", nic_report(s.ctx, false).c_str());
    }
    sdr_mr_dereg(mr);
    sdr_oob_close(oob);
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    Options o = parse(argc, argv);
    // Before the device opens: threads it starts without a core of their own inherit this mask.
    if (o.app_core >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(o.app_core, &set);
        if (sched_setaffinity(0, sizeof set, &set)) die("--app-core " + std::to_string(o.app_core) + ": " + std::strerror(errno));
    }
    return o.server.empty() ? run_server(o) : run_client(o);
}
