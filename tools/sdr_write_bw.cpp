// sdr_write_bw: perftest-style bandwidth of SDR writes between two emulated NICs, one per
// process (two network namespaces or two hosts). The server (no address given) listens on a
// TCP bootstrap port, takes the run's parameters from the client, exchanges QP-info blobs and
// grants clear-to-send credits as it posts receives; the client streams messages into them.
// Both report: the client what it sent (Gbit/s, packets/s, messages/s), the server what
// arrived (goodput of complete chunks, chunks lost).
#include "common/json.hpp"
#include "common/options.hpp"

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
#include <tuple>
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
    bool all_sizes = false;      // -a
    double rate_limit_gbps = 0;  // pacing of this side's QP (sdr_qp_attr::rate_limit); 0: line rate
};

// What the client tells the server (little-endian on the wire; both ends are this program).
struct RunParams {
    uint32_t magic = 0x53445257;  // "SDRW"
    uint32_t version = 2;         // 2: a connection may carry several runs (-a)
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

Options parse(int argc, char** argv)
{
    using namespace sdr::tools;
    Options o;
    sdr::tools::ToolApp app("sdr_write_bw",
                            "perftest-style bandwidth of SDR writes between two emulated NICs. Without a server address:\n"
                            "the server. The client sets the run's parameters (size .. channels) for both.");
    app.footer("BYTES take K/M/G (also KiB/MiB/GiB) suffixes, binary: 64K = 65536. A bad option exits 1.");
    app.add_option("SERVER_ADDRESS", o.server, "the server to connect to (the client)");
    app.add_option("-d,--device", o.device, "raw:IFNAME (AF_PACKET), xdp:IFNAME (AF_XDP) or verbs:IBDEV (an rdma-core device)")->type_name("NAME")->required();
    add_count(app, "-p,--port", &o.port, 1, 65535, "TCP bootstrap port")->default_str("18515");
    add_size(app, "-s,--size", &o.size, 1, (1ull << 32) - 1, "message size")->default_str("1M");
    app.add_flag("-a,--all", o.all_sizes, "client: every size 2^k from 2 B to 8 MiB, one run each (one table row, one JSON object)");
    add_count(app, "-n,--iters", &o.iters, 1, 1u << 30, "measured messages")->default_str("1000");
    add_count(app, "-w,--warmup", &o.warmup, 0, 1u << 30, "messages before measuring")->default_str("100");
    add_count(app, "-q,--in-flight", &o.in_flight, 1, 1024, "messages in flight")->default_str("8");
    add_size(app, "-m,--mtu", &o.mtu, 256, 4096, "payload per packet, a power of two")->default_str("4096");
    add_size(app, "--chunk", &o.chunk, 256, 1u << 30, "bitmap chunk size, a power of two >= MTU")->default_str("64K");
    add_count(app, "-c,--channels", &o.channels, 1, 16, "channels = emulated DPA workers")->default_str("4");
    add_real(app, "--rate_limit", &o.rate_limit_gbps, 0, 4294,
             "pace this side's QP to G Gbit/s (the QP's rate_limit attribute, as perftest's --rate_limit; 0: line rate)")
        ->type_name("G")
        ->default_str("0");
    // Settings the device reads from its SDR_RT_* environment when it opens.
    static const std::tuple<const char*, const char*, const char*, const char*> env_opts[] = {
        {"--loss", "SDR_RT_LOSS", "P", "i.i.d. loss of what this side sends"},
        {"--burst", "SDR_RT_BURST", "GB,BG[,LB]", "Gilbert-Elliott burst loss of what this side sends"},
        {"--reorder", "SDR_RT_REORDER", "P,US", "delay a share P of frames by US microseconds"},
        {"--dup", "SDR_RT_DUP", "P", "duplicate a share P of frames"},
        {"--delay-ms", "SDR_RT_DELAY_MS", "D", "added one-way delay"},
        {"--rate-gbps", "SDR_RT_RATE_GBPS", "G", "shape what this side sends to G Gbit/s"},
        {"--seed", "SDR_RT_SEED", "N", "the impairments' random seed"},
        {"--pcap", "SDR_RT_PCAP", "FILE", "capture this NIC's frames; FILE.pcapng also records what the impairments dropped"},
        {"--snaplen", "SDR_RT_SNAPLEN", "N", "bytes kept of each data frame (0: whole frames)"},
        {"--core", "SDR_RT_CORE", "N", "pin the NIC's polling thread to core N"},
        {"--workers", "SDR_RT_WORKER_THREADS", "N", "DPA workers on N dedicated threads (0: inline)"},
        {"--worker-cores", "SDR_RT_WORKER_CORES", "LIST", "the workers' cores"},
        {"--xdp-mode", "SDR_RT_XDP_MODE", "auto|native|generic", "how xdp: attaches its program"}};
    for (const auto& [opt, var, type, help] : env_opts)
        app.add_option_function<std::string>(opt, [var = var](const std::string& v) { setenv(var, v.c_str(), 1); }, help)
            ->type_name(type);
    app.add_flag_callback("--busy-poll", [] { setenv("SDR_RT_BUSY_POLL", "1", 1); }, "never sleep the NIC's polling thread");
    add_count(app, "--app-core", &o.app_core, 0, CPU_SETSIZE - 1,
              "pin this program's own threads (and unpinned workers) to core N, keeping them off the polling thread's core");
    add_count(app, "--timeout-ms", &o.timeout_ms, 1, 1u << 30, "bootstrap timeout")->default_str("10000");
    add_count(app, "--settle-ms", &o.settle_ms, 0, 1u << 30,
              "server: how long a message the client reported sent still waits for its packets (20 + 2 x SDR_RT_DELAY_MS)");
    app.add_flag("--json", o.json, "one JSON object instead of the table");
    app.add_flag("--verify", o.verify, "server: check every complete chunk's bytes (costs CPU)");
    parse_or_exit(app, argc, argv, 1);
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
                           static_cast<sdr_mtu>(log2_ceil(rp.mtu) - 6), 1, 1,
                           static_cast<uint32_t>(std::llround(o.rate_limit_gbps * 1000))};
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
// counter as sdr-stat prints it.
std::string nic_report(sdr_context* ctx)
{
    const auto all = nic_counters(ctx);
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

// The same in JSON: the members rx_frames .. rx_drops_total, the object rx_drops (every drop
// reason, zeros included) and the object counters (every counter).
void nic_report(sdr_context* ctx, sdr::tools::Json* j)
{
    const auto all = nic_counters(ctx);
    const std::string drop_prefix = "port.rx_drop.";
    sdr::tools::Json drops = sdr::tools::Json::object(), counters = sdr::tools::Json::object();
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

bool valid(const RunParams& rp) { return rp.magic == RunParams{}.magic && rp.version == RunParams{}.version; }

// One run the client asked for: receives into fresh slots, grants credit, reports.
void serve(const Options& o, sdr_oob* oob, const RunParams& rp)
{
    std::vector<uint8_t> m;
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
    // Nothing measured arrived: no interval (first_arrival is still 0 on the steady clock's scale).
    r.seconds = first_arrival > 0 ? last_done - first_arrival : 0.0;
    if (sdr_oob_send(oob, &r, sizeof r) != SDR_SUCCESS) die_sdr("sending the result");
    double gbps = r.seconds > 0 ? r.bytes_received * 8.0 / r.seconds / 1e9 : 0.0;
    if (o.json) {
        sdr::tools::Json j{{"role", "server"},
                           {"device", o.device},
                           {"size", rp.size},
                           {"iters", rp.iters},
                           {"warmup", rp.warmup},
                           {"goodput_gbps", sdr::tools::json_real(gbps)},
                           {"chunks_expected", r.chunks_expected},
                           {"chunks_received", r.chunks_received},
                           {"corrupt_chunks", o.verify ? sdr::tools::Json(corrupt_chunks) : sdr::tools::Json(nullptr)},
                           {"seconds", r.seconds}};
        nic_report(s.ctx, &j);
        sdr::tools::print_json(j);
    }
    else
        std::printf("received %llu of %llu chunks (%.4f %% lost) in %.3f s: goodput %.2f Gbit/s\n%s\n",
                    (unsigned long long)r.chunks_received, (unsigned long long)r.chunks_expected,
                    100.0 * (r.chunks_expected - r.chunks_received) / r.chunks_expected, r.seconds, gbps,
                    nic_report(s.ctx).c_str());
    if (o.verify && !o.json) std::printf("verified every complete chunk: %llu corrupt\n", (unsigned long long)corrupt_chunks);
    std::fflush(stdout);
    sdr_mr_dereg(mr);
}

// After a result: the client may see its last local completions after we saw the data land and
// still report progress; those reports are read and dropped until the next run's parameters
// arrive (true, -a) or the client hangs up (false), so it never writes into a closed connection.
bool next_run(sdr_oob* oob, RunParams* rp, int timeout_ms)
{
    uint8_t b[256];
    for (size_t len; sdr_oob_recv(oob, b, sizeof b, &len, timeout_ms) == SDR_SUCCESS;)
        if (len == sizeof *rp) {
            std::memcpy(rp, b, sizeof *rp);
            if (!valid(*rp)) die("the client sent run parameters of another version of this program");
            return true;
        }
    return false;
}

int run_server(const Options& o)
{
    sdr_oob* oob = sdr_oob_listen(nullptr, o.port, o.timeout_ms);
    if (!oob) die_sdr("waiting for a client");
    std::vector<uint8_t> m;
    RunParams rp;
    if (!oob_poll(oob, &m, o.timeout_ms) || !take(m, &rp) || !valid(rp))
        die("the client did not send this program's run parameters");
    do serve(o, oob, rp);
    while (next_run(oob, &rp, o.timeout_ms));
    sdr_oob_close(oob);
    return 0;
}

// One run of `size`-byte messages; `first` and `last` of the sizes of -a (both for one size).
void client_run(const Options& o, sdr_oob* oob, uint64_t size, bool first, bool last)
{
    RunParams rp;
    rp.size = size;
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
    if (first) print_header(o, rp, s, "client");
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
    double good = r.seconds > 0 ? r.bytes_received * 8.0 / r.seconds / 1e9 : 0.0;
    double lost = 100.0 * double(r.chunks_expected - r.chunks_received) / double(r.chunks_expected);
    const auto* rt = sdr::host::rt_of(s.ctx);
    if (o.json) {
        sdr::tools::Json j{{"role", "client"},
                           {"device", o.device},
                           {"port_mode", rt ? rt->port_info().mode : o.device.rfind("verbs:", 0) == 0 ? "rdma-core" : "simulator"},
                           {"size", rp.size},
                           {"mtu", rp.mtu},
                           {"chunk", rp.chunk},
                           {"channels", rp.channels},
                           {"in_flight", rp.in_flight},
                           {"iters", rp.iters},
                           {"rate_limit_gbps", o.rate_limit_gbps},
                           {"tx_gbps", sdr::tools::json_real(gbps)},
                           {"tx_mpps", sdr::tools::json_real(mpps)},
                           {"msgs_per_s", sdr::tools::json_real(mps)},
                           {"goodput_gbps", sdr::tools::json_real(good)},
                           {"chunk_loss_pct", sdr::tools::json_real(lost)},
                           {"seconds", secs}};
        nic_report(s.ctx, &j);
        sdr::tools::print_json(j);
    } else {
        if (first)
            std::printf(" %12s %10s %12s %10s %12s %16s %12s\n", "bytes", "iterations", "Gbit/s sent", "Mpps", "msgs/s",
                        "goodput Gbit/s", "chunks lost");
        std::printf(" %12llu %10u %12.2f %10.3f %12.0f %16.2f %11.4f%%\n", (unsigned long long)rp.size, rp.iters, gbps,
                    mpps, mps, good, lost);
        if (last) std::printf("%s\n", nic_report(s.ctx).c_str());
    }
    std::fflush(stdout);
    sdr_mr_dereg(mr);
}

int run_client(const Options& o)
{
    sdr_oob* oob = sdr_oob_connect(o.server.c_str(), o.port, o.timeout_ms);
    if (!oob) die_sdr("connecting to the server");
    // -a: every power of two from 2 B to 8 MiB, as perftest's -a; each size a run of its own
    // (fresh contexts and QPs shaped by it) on the same bootstrap connection.
    std::vector<uint64_t> sizes;
    if (o.all_sizes)
        for (uint64_t b = 2; b <= (8u << 20); b *= 2) sizes.push_back(b);
    else
        sizes.push_back(o.size);
    for (size_t i = 0; i < sizes.size(); i++) client_run(o, oob, sizes[i], i == 0, i + 1 == sizes.size());
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
