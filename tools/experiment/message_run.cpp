#include "message_run.hpp"

#include <sdr/emu/fabric.hpp>
#include <sdr/emu/wire.hpp>
#include <sdr/reliability/endpoint.hpp>
#include <sdr/reliability/policy.hpp>
#include <sdr_sim.h>

#include <sys/mman.h>

#include <stdexcept>

namespace sdr::exp {

namespace {

uint32_t log2_ceil(uint64_t v)
{
    uint32_t l = 0;
    while ((uint64_t{1} << l) < v) l++;
    return l;
}

// Four slots (data and EC parity are separate SDR messages, and the previous sample's may still
// be retiring), each holding the largest message or the parity of one submessage of any code
// (m < 256 chunks: a small message's m parity chunks can outweigh its data), chunk and MTU from
// the link.
sdr_qp_attr qp_attr(const LinkSetup& l)
{
    uint32_t slot_log = std::max(log2_ceil(l.max_bytes), log2_ceil(l.chunk_bytes) + 8);
    return sdr_qp_attr{log2_ceil(l.chunk_bytes), slot_log + 2, 2, static_cast<sdr_mtu>(log2_ceil(l.mtu) - 6), 1, 1, 0};
}

WorldConfig world_config(const LinkSetup& l)
{
    WorldConfig w;
    w.channels = l.channels;
    w.fabric.link.bandwidth_gbps = l.bw_gbps;
    w.fabric.link.rtt_ms = l.rtt_ms;
    w.fabric.link.impairment.loss = l.drop;
    w.fabric.payload = false;
    w.fabric.seed = l.seed;
    w.fabric.per_packet_events = l.per_packet_events;
    w.fabric.drop_log = l.drop_log;
    if (!l.topology.empty()) {
        emu::Topology t;
        std::string err;
        if (!emu::Topology::parse(l.topology, w.fabric.link, &t, &err)) throw std::runtime_error(err);
        w.fabric.topology = std::move(t);
    }
    w.qp = qp_attr(l);
    return w;
}

}  // namespace

double MessageRun::wire_overhead_bytes()
{
    return static_cast<double>(emu::wire::frame_bytes_write_imm(0) + emu::kWireOverheadBytes);
}

MessageRun::MessageRun(const LinkSetup& link) : link_(link), world_(std::make_unique<SimWorld>(world_config(link)))
{
    // Payload-free: the NICs never touch message memory, so untouched anonymous pages stand in
    // for the buffers (no resident memory, even at GiB sizes).
    span_ = link.max_bytes;
    for (void** p : {&src_, &dst_}) {
        *p = mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (*p == MAP_FAILED) throw std::runtime_error("cannot map " + std::to_string(span_) + " bytes");
    }
    lkey_[0] = world_->lkey(0, src_, span_);
    lkey_[1] = world_->lkey(1, dst_, span_);
}

MessageRun::~MessageRun()
{
    world_.reset();  // deregisters before the memory goes
    munmap(src_, span_);
    munmap(dst_, span_);
}

rel::model::Params model_params(const LinkSetup& l, uint64_t bytes, const rel::Config& cfg)
{
    return rel::model_params(rel::PathEstimate{l.rtt_ms, l.bw_gbps, l.drop, MessageRun::wire_overhead_bytes()}, bytes,
                             l.chunk_bytes, l.mtu, cfg);
}

double ec_unwaited_parity_ms(const rel::model::Params& p)
{
    uint64_t M = rel::model::chunks(p), L = (M + p.k - 1) / p.k;
    double paper = static_cast<double>((M * p.m + p.k - 1) / p.k), ours = static_cast<double>((L - 1) * p.m);
    return (paper - ours) * rel::model::t_inj_s(p) * 1e3;
}

double lossless_ms(const rel::Config& c, const LinkSetup& l, uint64_t bytes)
{
    const rel::model::Params p = model_params(l, bytes, c);
    return rel::is_ec(c.scheme) ? rel::model::ideal_ec_s(p) * 1e3 - ec_unwaited_parity_ms(p) : rel::model::ideal_s(p) * 1e3;
}

uint64_t MessageRun::packets() const { return world_->fabric().packets_delivered(); }

Sample MessageRun::run(rel::Config cfg, uint64_t bytes, uint64_t seed)
{
    Sample s;
    if (bytes == 0 || bytes > span_) {
        s.error = "message of " + std::to_string(bytes) + " bytes: outside 1.." + std::to_string(span_);
        return s;
    }
    world_->fabric().reseed(seed);
    cfg.compute = false;
    cfg.rtt_ms = link_.rtt_ms;
    cfg.bw_gbps = link_.bw_gbps;
    const sdr_qp_attr qa = qp_attr(link_);
    std::string err;
    auto tx = rel::Endpoint::create(world_->ctx(0), world_->qp(0), qa, cfg, &err);
    auto rx = tx ? rel::Endpoint::create(world_->ctx(1), world_->qp(1), qa, cfg, &err) : nullptr;
    if (!rx) {
        s.error = err;
        return s;
    }
    uint64_t rid = 0, sid = 0;
    if (rx->recv(dst_, bytes, lkey_[1], &rid) != SDR_SUCCESS) {
        s.error = rel::last_error();
        return s;
    }
    sdr_context* ctx = world_->ctx(0);
    const uint64_t cts_ready = sdr_now_ns(ctx) + static_cast<uint64_t>(link_.rtt_ms * 1e6);
    // Let the CTS reach the sender: done() never holds, so drive() returns false when virtual
    // time reaches cts_ready (or nothing is left to happen); either way the send goes next.
    (void)rel::drive(ctx, {tx.get(), rx.get()}, [] { return false; }, cts_ready);
    if (tx->send(src_, bytes, lkey_[0], &sid) != SDR_SUCCESS) {
        s.error = rel::last_error();
        return s;
    }
    rel::MessageStats ts, rs;
    bool tx_done = false, rx_done = false;
    bool live = rel::drive(ctx, {tx.get(), rx.get()}, [&] {
        tx_done = tx_done || tx->send_result(sid, &ts) == SDR_SUCCESS;
        rx_done = rx_done || rx->recv_result(rid, &rs) == SDR_SUCCESS;
        return tx_done && rx_done;
    });
    if (!live) {
        s.error = "stalled: nothing left to happen before the message ended";
        return s;
    }
    s.ok = ts.ok && rs.ok;
    s.error = !ts.ok ? ts.error : rs.error;
    s.completion_ms = static_cast<double>(ts.done_ns - ts.post_ns) / 1e6;
    s.retransmitted = ts.retransmitted_chunks;
    s.decoded = rs.decoded_chunks;
    s.fallbacks = rs.fallbacks;
    s.code = rs.code;
    return s;
}

}  // namespace sdr::exp
