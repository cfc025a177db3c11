// Erasure-code throughput on one core, 64 KiB chunks: GB/s of DATA (k chunks per call) through
// sdr::rel::Codec, each beside the same work done by calling ISA-L directly in the same run:
//   - RS (CodeKind::Mds) encode, (k, m) = (32, 8), (10, 4), (8, 2); baseline ec_encode_data
//     with Cauchy tables prepared once outside the timed loop.
//   - RS decode of the same (k, m) with m data chunks lost (the worst case: every parity chunk
//     is needed); baseline the textbook ISA-L repair per call (survivor matrix, gf_invert_matrix,
//     ec_init_tables of the missing rows, ec_encode_data). Lost chunks are rewritten each
//     iteration.
//   - XOR (CodeKind::Xor) encode, (32, 8); baseline xor_gen over the same groups.
// Then the cores one would need to encode 400 Gbit/s (50 GB/s of data) against the paper's
// figures (4 cores XOR, 8 cores MDS). Buffers are distinct, 64-byte aligned, random-filled with
// a fixed seed; each benchmark checks its output once after timing.
#include <sdr/reliability/codec.hpp>

extern "C" {
#include <isa-l/erasure_code.h>
#include <isa-l/raid.h>
}

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "report.hpp"

namespace {

using sdr::rel::Codec;
using sdr::rel::CodeKind;

constexpr size_t kChunk = 64 * 1024;
constexpr int kKm[3][2] = {{32, 8}, {10, 4}, {8, 2}};

struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
};

// k data chunks then m parity chunks, each its own aligned allocation, plus a copy of the
// data to check repairs against.
struct Chunks {
    int k, m;
    std::vector<std::unique_ptr<uint8_t, FreeDeleter>> mem;
    std::vector<uint8_t*> frag;  // k data pointers, then m parity pointers
    std::vector<uint8_t> orig;   // k * kChunk: the data as generated
    Chunks(int k_, int m_) : k(k_), m(m_)
    {
        std::mt19937_64 rng(0x5eed0000u + static_cast<unsigned>(k * 256 + m));
        for (int i = 0; i < k + m; i++) {
            auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, kChunk));
            if (!p) std::abort();
            mem.emplace_back(p);
            frag.push_back(p);
            for (size_t b = 0; b < kChunk; b += 8) {
                uint64_t v = rng();
                std::memcpy(p + b, &v, 8);
            }
        }
        orig.resize(size_t(k) * kChunk);
        for (int j = 0; j < k; j++) std::memcpy(&orig[size_t(j) * kChunk], frag[j], kChunk);
    }
    uint8_t** data() { return frag.data(); }
    uint8_t** parity() { return frag.data() + k; }
    bool data_intact() const
    {
        for (int j = 0; j < k; j++)
            if (std::memcmp(&orig[size_t(j) * kChunk], frag[j], kChunk) != 0) return false;
        return true;
    }
    void lose_first_data(int n)  // scribble over data chunks 0..n-1
    {
        for (int j = 0; j < n; j++) std::memset(frag[j], 0xA5, kChunk);
    }
};

// ISA-L directly: the Cauchy encode matrix and the parity tables, built once.
struct Direct {
    int k, m;
    std::vector<uint8_t> matrix, tables;
    Direct(int k_, int m_) : k(k_), m(m_), matrix(size_t(k + m) * k), tables(size_t(32) * k * m)
    {
        gf_gen_cauchy1_matrix(matrix.data(), k + m, k);
        ec_init_tables(k, m, &matrix[size_t(k) * k], tables.data());
    }
    void encode(uint8_t** data, uint8_t** parity)
    {
        ec_encode_data(static_cast<int>(kChunk), k, m, tables.data(), data, parity);
    }
};

bool g_check_failed = false;

// After timing: the output is checked once; only a correct run reports a rate.
void finish(benchmark::State& st, int k, bool ok, const char* what)
{
    if (!ok) {
        g_check_failed = true;
        st.SkipWithError(what);
        return;
    }
    double bytes = static_cast<double>(st.iterations()) * k * kChunk;
    st.SetBytesProcessed(static_cast<int64_t>(bytes));
    st.counters["rate"] = benchmark::Counter(bytes, benchmark::Counter::kIsRate);
}

// Parity from a fresh encode by the other path: both implementations must agree byte for byte.
bool parity_matches(Chunks& c, CodeKind kind)
{
    std::vector<std::vector<uint8_t>> ref(c.m, std::vector<uint8_t>(kChunk));
    std::vector<uint8_t*> rp;
    for (auto& r : ref) rp.push_back(r.data());
    if (kind == CodeKind::Mds) {
        Direct d(c.k, c.m);
        d.encode(c.data(), rp.data());
    } else {
        for (int i = 0; i < c.m; i++) {
            std::memset(rp[i], 0, kChunk);
            for (int j = i; j < c.k; j += c.m)
                for (size_t b = 0; b < kChunk; b++) rp[i][b] ^= c.frag[j][b];
        }
    }
    for (int i = 0; i < c.m; i++)
        if (std::memcmp(rp[i], c.parity()[i], kChunk) != 0) return false;
    return true;
}

// ---- RS encode ----

void BM_rs_encode_isal(benchmark::State& st)
{
    int k = static_cast<int>(st.range(0)), m = static_cast<int>(st.range(1));
    Chunks c(k, m);
    Direct d(k, m);
    for (auto _ : st) {
        d.encode(c.data(), c.parity());
        benchmark::DoNotOptimize(c.parity()[0]);
        benchmark::ClobberMemory();
    }
    finish(st, k, parity_matches(c, CodeKind::Mds), "parity differs");
}

void BM_rs_encode_codec(benchmark::State& st)
{
    int k = static_cast<int>(st.range(0)), m = static_cast<int>(st.range(1));
    Chunks c(k, m);
    Codec codec(CodeKind::Mds, static_cast<uint32_t>(k), static_cast<uint32_t>(m));
    for (auto _ : st) {
        codec.encode(c.data(), c.parity(), kChunk);
        benchmark::DoNotOptimize(c.parity()[0]);
        benchmark::ClobberMemory();
    }
    finish(st, k, parity_matches(c, CodeKind::Mds), "parity differs from ISA-L's");
}

// ---- RS decode, data chunks 0..m-1 lost ----

void BM_rs_decode_isal(benchmark::State& st)
{
    int k = static_cast<int>(st.range(0)), m = static_cast<int>(st.range(1));
    Chunks c(k, m);
    Direct d(k, m);
    d.encode(c.data(), c.parity());
    c.lose_first_data(m);
    std::vector<uint8_t> b(size_t(k) * k), inv(size_t(k) * k), rows(size_t(k) * m), tbls(size_t(32) * k * m);
    std::vector<uint8_t*> src(k), out(m);
    for (auto _ : st) {
        int nsrc = 0, nmiss = 0;
        for (int i = m; i < k + m; i++) {  // the k survivors: data m..k-1, then every parity
            std::memcpy(&b[size_t(nsrc) * k], &d.matrix[size_t(i) * k], k);
            src[nsrc++] = c.frag[i];
        }
        if (gf_invert_matrix(b.data(), inv.data(), k) != 0) {
            g_check_failed = true;
            st.SkipWithError("singular survivor matrix");
            return;
        }
        for (int j = 0; j < m; j++) {
            std::memcpy(&rows[size_t(nmiss) * k], &inv[size_t(j) * k], k);
            out[nmiss++] = c.frag[j];
        }
        ec_init_tables(k, nmiss, rows.data(), tbls.data());
        ec_encode_data(static_cast<int>(kChunk), k, nmiss, tbls.data(), src.data(), out.data());
        benchmark::DoNotOptimize(out[0]);
        benchmark::ClobberMemory();
    }
    finish(st, k, c.data_intact(), "repaired data differs");
}

void BM_rs_decode_codec(benchmark::State& st)
{
    int k = static_cast<int>(st.range(0)), m = static_cast<int>(st.range(1));
    Chunks c(k, m);
    Codec codec(CodeKind::Mds, static_cast<uint32_t>(k), static_cast<uint32_t>(m));
    codec.encode(c.data(), c.parity(), kChunk);
    c.lose_first_data(m);
    std::unique_ptr<bool[]> present(new bool[size_t(k + m)]);
    for (int i = 0; i < k + m; i++) present[i] = i >= m;
    for (auto _ : st) {
        if (!codec.decode(present.get(), c.data(), kChunk)) {
            g_check_failed = true;
            st.SkipWithError("decode refused");
            return;
        }
        benchmark::DoNotOptimize(c.frag[0]);
        benchmark::ClobberMemory();
    }
    finish(st, k, c.data_intact(), "repaired data differs");
}

// ---- XOR encode: parity i = XOR of data j, j mod m == i ----

void BM_xor_encode_isal(benchmark::State& st)
{
    int k = static_cast<int>(st.range(0)), m = static_cast<int>(st.range(1));
    Chunks c(k, m);
    std::vector<std::vector<void*>> groups(m);
    for (int i = 0; i < m; i++) {
        for (int j = i; j < k; j += m) groups[i].push_back(c.frag[j]);
        groups[i].push_back(c.parity()[i]);  // xor_gen writes the last vector
    }
    for (auto _ : st) {
        for (auto& g : groups) xor_gen(static_cast<int>(g.size()), static_cast<int>(kChunk), g.data());
        benchmark::DoNotOptimize(c.parity()[0]);
        benchmark::ClobberMemory();
    }
    finish(st, k, parity_matches(c, CodeKind::Xor), "parity differs");
}

void BM_xor_encode_codec(benchmark::State& st)
{
    int k = static_cast<int>(st.range(0)), m = static_cast<int>(st.range(1));
    Chunks c(k, m);
    Codec codec(CodeKind::Xor, static_cast<uint32_t>(k), static_cast<uint32_t>(m));
    for (auto _ : st) {
        codec.encode(c.data(), c.parity(), kChunk);
        benchmark::DoNotOptimize(c.parity()[0]);
        benchmark::ClobberMemory();
    }
    finish(st, k, parity_matches(c, CodeKind::Xor), "parity differs");
}

// Ours and the direct call side by side for each (k, m) (the default run interleaves repetitions
// of all of them at random; see main).
BENCHMARK(BM_rs_encode_isal)->Args({32, 8});
BENCHMARK(BM_rs_encode_codec)->Args({32, 8});
BENCHMARK(BM_rs_encode_isal)->Args({10, 4});
BENCHMARK(BM_rs_encode_codec)->Args({10, 4});
BENCHMARK(BM_rs_encode_isal)->Args({8, 2});
BENCHMARK(BM_rs_encode_codec)->Args({8, 2});
BENCHMARK(BM_rs_decode_isal)->Args({32, 8});
BENCHMARK(BM_rs_decode_codec)->Args({32, 8});
BENCHMARK(BM_rs_decode_isal)->Args({10, 4});
BENCHMARK(BM_rs_decode_codec)->Args({10, 4});
BENCHMARK(BM_rs_decode_isal)->Args({8, 2});
BENCHMARK(BM_rs_decode_codec)->Args({8, 2});
BENCHMARK(BM_xor_encode_isal)->Args({32, 8});
BENCHMARK(BM_xor_encode_codec)->Args({32, 8});

}  // namespace

int main(int argc, char** argv)
{
    // Defaults, before the caller's flags so those still win: the median of 3 repetitions run in
    // random order, since single runs on a shared VM jump by 5-30 % for a second at a time.
    // --smoke keeps one short run of each.
    static char reps[] = "--benchmark_repetitions=3", interleave[] = "--benchmark_enable_random_interleaving=true",
                aggregates[] = "--benchmark_report_aggregates_only=true", min_time[] = "--benchmark_min_time=0.2";
    std::vector<char*> args(argv, argv + argc);
    if (std::none_of(argv, argv + argc, [](const char* a) { return !std::strcmp(a, "--smoke"); }))
        args.insert(args.begin() + 1, {reps, interleave, aggregates, min_time});
    bool json, smoke;
    auto rate = sdr::bench::run(static_cast<int>(args.size()), args.data(), &json, &smoke);
    std::vector<sdr::bench::Result> out;
    auto gbps = [&](const std::string& key) {
        if (rate.count(key + "_median")) return rate[key + "_median"] / 1e9;
        return rate.count(key) ? rate[key] / 1e9 : 0.0;
    };
    // One result per (k, m); the worst ours/direct ratio of each kind gets the 0.9 target
    // (printed as a percentage, 90 %, since the table prints targets as integers).
    auto add = [&](const char* what, const char* bm, int k, int m, double* worst) {
        std::string suffix = "/" + std::to_string(k) + "/" + std::to_string(m);
        sdr::bench::Result r;
        r.name = std::string(what) + " (" + std::to_string(k) + "," + std::to_string(m) + ")";
        r.value = gbps(std::string("BM_") + bm + "_codec" + suffix);
        r.unit = "GB/s";
        r.baseline = gbps(std::string("BM_") + bm + "_isal" + suffix);
        r.baseline_name = "ISA-L direct";
        r.floor = 0.65;  // bench/README.md, "Floors"
        if (r.value > 0 && r.baseline > 0) *worst = std::min(*worst, r.value / r.baseline);
        out.push_back(r);
        return r.value;
    };
    double worst_enc = 1e9, worst_dec = 1e9, worst_xor = 1e9;
    double mds32 = 0;
    for (const auto& km : kKm) {
        double v = add("RS encode", "rs_encode", km[0], km[1], &worst_enc);
        if (km[0] == 32) mds32 = v;
    }
    for (const auto& km : kKm) add("RS decode, m data lost", "rs_decode", km[0], km[1], &worst_dec);
    double xor32 = add("XOR encode", "xor_encode", 32, 8, &worst_xor);

    auto ratio = [&](const char* name, double worst) {
        sdr::bench::Result r;
        r.name = name;
        r.value = worst < 1e9 ? 100 * worst : 0;
        r.unit = "%";
        r.baseline = 0;
        r.target = 90;
        out.push_back(r);
    };
    ratio("RS encode ours/ISA-L, worst (k,m)", worst_enc);
    ratio("RS decode ours/ISA-L, worst (k,m)", worst_dec);
    ratio("XOR encode ours/ISA-L", worst_xor);

    // Cores to encode 400 Gbit/s = 50 GB/s of data at the measured per-core rate.
    auto cores = [&](const char* name, double per_core, double paper) {
        sdr::bench::Result r;
        r.name = name;
        r.value = per_core > 0 ? 50.0 / per_core : 0;
        r.unit = "cores";
        r.baseline = 0;
        r.reference = paper;
        r.reference_name = "paper";
        out.push_back(r);
    };
    cores("cores for 400G, XOR (32,8)", xor32, 4);
    cores("cores for 400G, MDS (32,8)", mds32, 8);

    if (!json)
        std::printf("\nGB/s = 1e9 bytes of data (k chunks of 64 KiB per call) per second on one core. Decode rebuilds m data "
                    "chunks from the k survivors\n(matrix inversion inside the timed loop for both). Paper: 400 Gbit/s "
                    "needs 4 cores (XOR) / 8 cores (MDS) for (32,8).\n");
    int status = sdr::bench::finish(out, json);
    if (g_check_failed) std::fprintf(stderr, "bench_ec: an output check failed (see the errors above)\n");
    return g_check_failed ? 1 : status;
}
