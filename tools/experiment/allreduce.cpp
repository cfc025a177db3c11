#include "allreduce.hpp"

#include <sdr.h>
#include <sdr_ext.h>
#include <sdr/emu/fabric.hpp>
#include <sdr/reliability/endpoint.hpp>
#include <sdr/reliability/scheme.hpp>
#include <sdr_mr.h>
#include <sdr_sim.h>

#include <sys/mman.h>

#include <algorithm>
#include <memory>

namespace sdr::exp {

namespace {

bool pow2(uint64_t v) { return v && !(v & (v - 1)); }

uint32_t log2_ceil(uint64_t v)
{
    uint32_t l = 0;
    while ((uint64_t{1} << l) < v) l++;
    return l;
}

uint64_t total_chunks(const AllreduceParams& p) { return (p.bytes + p.chunk_bytes - 1) / p.chunk_bytes; }

uint32_t rounds(const AllreduceParams& p) { return 2 * p.nodes - 2; }

uint64_t max_segment(const AllreduceParams& p)
{
    uint64_t seg = 0;
    for (uint32_t s = 0; s < p.nodes; s++) seg = std::max(seg, segment_bytes(p, s));
    return seg;
}

// What the ring itself cannot work with; the SDR calls and rel::validate say the rest.
std::string check(const AllreduceParams& p)
{
    if (p.nodes < 2 || p.nodes > 256) return "nodes must be 2..256 (one simulated NIC each), got " + std::to_string(p.nodes);
    if (!pow2(p.mtu) || p.mtu < 64 || p.mtu > 4096) return "mtu must be a power of two in 64..4096";
    if (!pow2(p.chunk_bytes) || p.chunk_bytes < p.mtu || p.chunk_bytes > (1u << 30))
        return "chunk_bytes must be a power of two in mtu..1 GiB";
    if (p.bytes > (1ull << 40)) return "bytes must be at most 1 TiB";
    if (total_chunks(p) < p.nodes)
        return "bytes (" + std::to_string(p.bytes) + ") must hold at least one chunk of " +
               std::to_string(p.chunk_bytes) + " bytes per node, so that every segment is non-empty";
    if (!(p.bw_gbps > 0) || !(p.rtt_ms > 0) || !(p.drop >= 0 && p.drop <= 1) || !(p.compute_us >= 0))
        return "bw_gbps and rtt_ms must be > 0, drop in [0, 1], compute_us >= 0";
    return {};
}

// Chunk size and MTU from the params; a slot holds the largest segment or its parity (the
// parity chunks the scheme reserves per submessage), and every receive of the run (two SDR
// messages each for a coded scheme: data and parity) has its own slot, since all are posted at
// the start.
sdr_qp_attr qp_attr(const AllreduceParams& p)
{
    const uint64_t seg = max_segment(p);
    uint64_t slot = std::max<uint64_t>(seg, p.chunk_bytes);
    const rel::Code code = rel::fixed_code(p.rel);
    if (const rel::SchemeOps& ops = rel::ops(code); ops.coded()) {
        uint64_t subs = (seg + p.chunk_bytes - 1) / p.chunk_bytes / p.rel.k + 1;
        slot = std::max(slot, subs * ops.parity_slots(code) * p.chunk_bytes);
    }
    uint32_t slots_log = log2_ceil(2 * rounds(p));
    return sdr_qp_attr{log2_ceil(p.chunk_bytes), log2_ceil(slot) + slots_log, slots_log,
                       static_cast<sdr_mtu>(log2_ceil(p.mtu) - 6), 1, 1, 0};
}

// N NICs on a fresh fabric. Node i's "out" QP is connected to node i+1's "in" QP: data flows
// out -> in, control (CTS, ACK, NACK) in -> out. The vector is one anonymous mapping that is
// never written (the NICs carry no payload), registered on every NIC: no resident memory even
// at GiB sizes, and every node's vector may alias it.
class Ring {
public:
    ~Ring()
    {
        for (sdr_mr* m : mrs_) sdr_mr_dereg(m);
        for (sdr_qp* q : out_) sdr_qp_destroy(q);
        for (sdr_qp* q : in_) sdr_qp_destroy(q);
        for (sdr_context* c : ctx_) sdr_context_destroy(c);
        emu::SimFabric::install(nullptr);
        if (vec_) munmap(vec_, len_);
    }

    // Empty string, or what failed.
    std::string open(const AllreduceParams& p, const sdr_qp_attr& qa)
    {
        emu::FabricParams fp;
        fp.link.bandwidth_gbps = p.bw_gbps;
        fp.link.rtt_ms = p.rtt_ms;
        fp.link.impairment.loss = p.drop;
        fp.payload = false;
        fp.seed = p.seed;
        auto f = std::make_unique<emu::SimFabric>(fp);
        fabric_ = f.get();
        emu::SimFabric::install(std::move(f));
        len_ = p.bytes;
        vec_ = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (vec_ == MAP_FAILED) {
            vec_ = nullptr;
            return "cannot map " + std::to_string(len_) + " bytes of address space for the vector";
        }
        sdr_dev_attr da{p.channels, 1};  // two QPs per NIC
        sdr_qp_attr a = qa;
        sdr_qp_attr_ext uc;  // SR and EC recover lost packets themselves: UC transport QPs
        sdr_qp_attr_ext_init(&uc);
        uc.transport = SDR_TRANSPORT_UC;
        for (uint32_t i = 0; i < p.nodes; i++) {
            std::string name = "sim:" + std::to_string(i);
            sdr_context* c = sdr_context_create(name.c_str(), &da);
            if (!c) return sdr_last_error();
            ctx_.push_back(c);
            for (auto* qps : {&out_, &in_}) {
                sdr_qp* q = sdr_qp_create_ext(c, &a, &uc);
                if (!q) return sdr_last_error();
                qps->push_back(q);
            }
            sdr_mr* m = sdr_mr_reg(c, vec_, len_, SDR_ACCESS_REMOTE_WRITE);
            if (!m) return sdr_last_error();
            mrs_.push_back(m);
            uint32_t k = 0;
            sdr_mr_lkey_get(m, &k);
            lkey_.push_back(k);
        }
        for (uint32_t i = 0; i < p.nodes; i++)
            if (std::string e = connect(out_[i], in_[(i + 1) % p.nodes]); !e.empty()) return e;
        return {};
    }

    sdr_context* ctx(uint32_t i) const { return ctx_[i]; }
    sdr_qp* out(uint32_t i) const { return out_[i]; }
    sdr_qp* in(uint32_t i) const { return in_[i]; }
    uint32_t lkey(uint32_t i) const { return lkey_[i]; }
    uint8_t* vec() const { return static_cast<uint8_t*>(vec_); }
    uint64_t packets() const { return fabric_->packets_delivered(); }

private:
    static std::string connect(sdr_qp* a, sdr_qp* b)
    {
        size_t n = 0;
        if (sdr_qp_info_size_get(a, &n) != SDR_SUCCESS) return sdr_last_error();
        std::vector<uint8_t> ia(n), ib(n);
        if (sdr_qp_info_get(a, ia.data()) != SDR_SUCCESS || sdr_qp_info_get(b, ib.data()) != SDR_SUCCESS ||
            sdr_qp_connect(a, ib.data()) != SDR_SUCCESS || sdr_qp_connect(b, ia.data()) != SDR_SUCCESS)
            return sdr_last_error();
        return {};
    }

    emu::SimFabric* fabric_ = nullptr;
    void* vec_ = nullptr;
    uint64_t len_ = 0;
    std::vector<sdr_context*> ctx_;
    std::vector<sdr_qp*> out_, in_;
    std::vector<sdr_mr*> mrs_;
    std::vector<uint32_t> lkey_;
};

// One node's progress through the rounds.
struct Node {
    std::unique_ptr<rel::Endpoint> out, in;  // out: sends to the right neighbour; in: receives from the left
    std::vector<uint64_t> recv_id;           // per round, all posted at the start
    std::vector<uint64_t> sending;           // send ids not yet acknowledged
    uint32_t sent = 0, received = 0;         // rounds posted / rounds whose receive completed
    uint64_t send_at = 0;                    // when the send of round `sent` may be posted
};

}  // namespace

uint64_t segment_offset(const AllreduceParams& p, uint32_t s)
{
    return std::min(total_chunks(p) * s / p.nodes * p.chunk_bytes, p.bytes);
}

uint64_t segment_bytes(const AllreduceParams& p, uint32_t s)
{
    uint64_t end = s + 1 == p.nodes ? p.bytes : segment_offset(p, s + 1);
    return end - segment_offset(p, s);
}

AllreduceResult run_allreduce(const AllreduceParams& params)
{
    AllreduceResult res;
    if ((res.error = check(params)).size()) return res;
    AllreduceParams p = params;
    p.rel.compute = false;
    p.rel.rtt_ms = p.rtt_ms;
    p.rel.bw_gbps = p.bw_gbps;
    if (!rel::validate(p.rel, &res.error)) return res;
    const uint32_t N = p.nodes, R = rounds(p);
    const sdr_qp_attr qa = qp_attr(p);
    Ring ring;
    if (std::string e = ring.open(p, qa); !e.empty()) {
        res.error = "setting up the ring (segments of up to " + std::to_string(max_segment(p)) + " bytes): " + e;
        return res;
    }
    // Declared after the ring: the endpoints go first (they complete receives, free parity MRs).
    std::vector<Node> nodes(N);
    for (uint32_t i = 0; i < N; i++) {
        nodes[i].out = rel::Endpoint::create(ring.ctx(i), ring.out(i), qa, p.rel, &res.error);
        nodes[i].in = nodes[i].out ? rel::Endpoint::create(ring.ctx(i), ring.in(i), qa, p.rel, &res.error) : nullptr;
        if (!nodes[i].in) return res;
    }
    auto seg = [&](uint32_t i, uint32_t r) { return (i + N - r % N) % N; };  // what node i sends in round r
    // Every receive is posted at once (matched in order), so each CTS waits at its sender long
    // before the data is due; the first sends go out one RTT after the last post, when every
    // CTS is in. Posting polls the NICs, which moves virtual time on to the next event (a CTS
    // arriving), so the start is taken after it.
    sdr_context* clock = ring.ctx(0);
    for (uint32_t i = 0; i < N; i++) {
        Node& n = nodes[i];
        for (uint32_t r = 0; r < R; r++) {
            uint32_t s = seg((i + N - 1) % N, r);
            uint64_t id = 0;
            if (n.in->recv(ring.vec() + segment_offset(p, s), segment_bytes(p, s), ring.lkey(i), &id) != SDR_SUCCESS) {
                res.error = rel::last_error();
                return res;
            }
            n.recv_id.push_back(id);
        }
    }
    const uint64_t start = sdr_now_ns(clock) + static_cast<uint64_t>(p.rtt_ms * 1e6);
    for (Node& n : nodes) n.send_at = start;
    std::vector<uint64_t> finish(R, 0);  // latest receive completion per round
    uint64_t last = start;               // latest completion of any send (ACK) or receive
    auto where = [&](uint32_t r, uint32_t from) {
        return "round " + std::to_string(r) + ", sim:" + std::to_string(from) + " -> sim:" + std::to_string((from + 1) % N) + ": ";
    };
    // The loop of rel::drive over all 2N endpoints, plus the schedule: take what finished, post
    // the sends that became due, then sleep in virtual time until the earliest deadline.
    bool looked_again = false;
    while (true) {
        uint64_t t = rel::kNever, before = sdr_now_ns(clock);
        for (Node& n : nodes) t = std::min({t, n.out->progress(), n.in->progress()});
        bool posted = false, over = true;
        for (uint32_t i = 0; i < N; i++) {
            Node& n = nodes[i];
            rel::MessageStats st;
            while (n.received < R && n.in->recv_result(n.recv_id[n.received], &st) == SDR_SUCCESS) {
                const uint32_t r = n.received++;
                if (!st.ok) return res.error = where(r, (i + N - 1) % N) + st.error, res;
                res.decoded_chunks += st.decoded_chunks;
                res.fallbacks += st.fallbacks;
                finish[r] = std::max(finish[r], st.done_ns);
                last = std::max(last, st.done_ns);
                // Reduce-scatter rounds (0..N-2) end with a reduction before the next send.
                n.send_at = st.done_ns + (r + 1 < N ? static_cast<uint64_t>(p.compute_us * 1e3) : 0);
            }
            for (size_t j = 0; j < n.sending.size();) {
                if (n.out->send_result(n.sending[j], &st) != SDR_SUCCESS) {
                    j++;
                    continue;
                }
                // An out endpoint sends one message per round, so its message id is the round.
                if (!st.ok) return res.error = where(static_cast<uint32_t>(st.id), i) + st.error, res;
                res.retransmitted_chunks += st.retransmitted_chunks;
                last = std::max(last, st.done_ns);
                n.sending.erase(n.sending.begin() + static_cast<std::ptrdiff_t>(j));
            }
            const uint64_t now = sdr_now_ns(clock);
            if (n.sent < R && n.sent <= n.received) {
                if (now >= n.send_at) {
                    uint32_t s = seg(i, n.sent);
                    uint64_t id = 0;
                    if (n.out->send(ring.vec() + segment_offset(p, s), segment_bytes(p, s), ring.lkey(i), &id) != SDR_SUCCESS)
                        return res.error = where(n.sent, i) + rel::last_error(), res;
                    n.sending.push_back(id);
                    n.sent++;
                    posted = true;
                } else {
                    t = std::min(t, n.send_at);
                }
            }
            over = over && n.received == R && n.sent == R && n.sending.empty();
        }
        if (over) break;
        if (posted) continue;  // the new sends have deadlines of their own
        uint64_t now = sdr_now_ns(clock);
        // A polling call inside progress() may have moved the clock: look once more first.
        if (now != before && !looked_again) {
            looked_again = true;
            continue;
        }
        looked_again = false;
        if (t == rel::kNever && !sdr_sim_pending(clock))
            return res.error = "stalled: no deadline left and nothing in flight before the Allreduce ended", res;
        if (sdr_sim_wait(clock, std::max(t, now + 1)) != SDR_SUCCESS) return res.error = sdr_last_error(), res;
    }
    res.ok = true;
    res.completion_ms = static_cast<double>(last - start) / 1e6;
    for (uint32_t r = 0; r < R; r++)
        res.round_ms.push_back(static_cast<double>(finish[r] - (r ? finish[r - 1] : start)) / 1e6);
    res.packets = ring.packets();
    return res;
}

}  // namespace sdr::exp
