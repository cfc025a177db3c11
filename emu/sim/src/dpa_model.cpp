// The DPA and PCIe cost model (dpa_model.hpp): threads as servers with a CQ each, a shared
// server for the aggregate limit, PCIe costs per host-window write.
#include <sdr/emu/dpa_model.hpp>
#include <sdr/emu/nic.hpp>

#include <sdr/emu/env_parse.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace sdr::emu {

bool DpaParams::from_env(DpaParams* out, std::string* err)
{
    DpaParams p = *out;
    if (const char* s = std::getenv("SDR_SIM_DPA")) {
        std::string v = s;
        if (v != "0" && v != "1") {
            if (err) *err = "SDR_SIM_DPA must be 0 (no DPA/PCIe costs) or 1 (the cost model)";
            return false;
        }
        p.enabled = v == "1";
    }
    struct Field {
        const char* name;
        double* v;
        double lo, hi;
    } fields[] = {{"SDR_SIM_DPA_HANDLER_NS", &p.handler_ns, 0, 1e9},
                  {"SDR_SIM_DPA_WINDOW_ADD_NS", &p.window_add_ns, 0, 1e9},
                  {"SDR_SIM_DPA_WINDOW_WRITE_NS", &p.window_write_ns, 0, 1e9},
                  {"SDR_SIM_DPA_REPOST_KEY_NS", &p.repost_key_ns, 0, 1e9},
                  {"SDR_SIM_DPA_REPOST_WORD_NS", &p.repost_word_ns, 0, 1e9},
                  {"SDR_SIM_DPA_TX_WQE_NS", &p.tx_wqe_ns, 0, 1e9},
                  {"SDR_SIM_DPA_SHARED_MPPS", &p.shared_mpps, 1e-3, 1e9}};
    for (const Field& f : fields)
        if (const char* s = std::getenv(f.name))
            if (!parse_double(f.name, s, f.lo, f.hi, f.v, err)) return false;
    uint64_t u = p.threads;
    if (!u64_from_env("SDR_SIM_DPA_THREADS", &u, err)) return false;
    if (u > 4096) {
        if (err) *err = "SDR_SIM_DPA_THREADS must be 0 (one per channel) .. 4096";
        return false;
    }
    p.threads = static_cast<uint32_t>(u);
    u = p.cq_depth;
    if (!u64_from_env("SDR_SIM_DPA_CQ_DEPTH", &u, err)) return false;
    if (u == 0 || u > (1u << 24)) {
        if (err) *err = "SDR_SIM_DPA_CQ_DEPTH must be 1 .. 16777216";
        return false;
    }
    p.cq_depth = static_cast<uint32_t>(u);
    if (const char* s = std::getenv("SDR_SIM_DPA_STEERING")) {
        std::string v = s;
        if (v != "balanced" && v != "channel") {
            if (err) *err = "SDR_SIM_DPA_STEERING must be 'balanced' (default) or 'channel'";
            return false;
        }
        p.by_channel = v == "channel";
    }
    *out = p;
    return true;
}

static SimTime ps(double ns) { return static_cast<SimTime>(std::llround(ns * double(kPsPerNs))); }

DpaModel::NicState& DpaModel::state(Nic& nic)
{
    if (nic.index() >= nics_.size()) nics_.resize(nic.index() + 1);
    NicState& s = nics_[nic.index()];
    if (!s.nic) {
        s.nic = &nic;
        s.threads.resize(p_.threads ? p_.threads : nic.num_workers());
        s.rr.assign(nic.num_workers(), 0);
    }
    return s;
}

// By channel: threads c, c + nch, c + 2 nch, ... below nthreads serve channel c in turn.
uint32_t DpaModel::thread_of(NicState& s, uint32_t channel)
{
    const uint32_t nthreads = static_cast<uint32_t>(s.threads.size());
    const uint32_t nch = static_cast<uint32_t>(s.rr.size());
    if (nthreads <= nch) return channel % nthreads;
    uint32_t mine = (nthreads - channel + nch - 1) / nch;
    uint32_t k = s.rr[channel]++ % mine;
    return channel + k * nch;
}

void DpaModel::wake(NicState& s, uint32_t t, SimTime now)
{
    Thread& th = s.threads[t];
    th.busy = true;
    sim_.at(std::max(now, th.free_at), this, arg(s.nic->index(), t, false));
}

void DpaModel::offer(Nic& nic, uint32_t channel, const hal_cqe& cqe)
{
    NicState& s = state(nic);
    const SimTime now = sim_.now();
    const uint32_t nthreads = static_cast<uint32_t>(s.threads.size());
    if (p_.by_channel) {
        const uint32_t t = thread_of(s, channel);
        Thread& th = s.threads[t];
        if (th.cq.size() >= p_.cq_depth) {
            s.stats.overflows++;
            return nic.cq_overflow();
        }
        th.cq.push_back(Pending{channel, cqe, now});
        if (!th.busy) wake(s, t, now);
        return;
    }
    if (s.cq.size() >= uint64_t{p_.cq_depth} * nthreads) {
        s.stats.overflows++;
        return nic.cq_overflow();
    }
    s.cq.push_back(Pending{channel, cqe, now});
    // The idle thread that is free soonest takes it.
    uint32_t best = nthreads;
    for (uint32_t t = 0; t < nthreads; t++)
        if (!s.threads[t].busy && (best == nthreads || s.threads[t].free_at < s.threads[best].free_at)) best = t;
    if (best < nthreads) wake(s, best, now);
}

void DpaModel::fire(SimTime now, uint64_t a)
{
    const uint32_t n = static_cast<uint32_t>(a >> 33), t = static_cast<uint32_t>((a >> 1) & 0xFFFFFFFFu);
    NicState& s = nics_[n];
    Thread& th = s.threads[t];
    if (!(a & 1)) {
        // Take the next CQE once the shared server admits it; the handler proper runs at the end.
        std::deque<Pending>& q = p_.by_channel ? th.cq : s.cq;
        if (q.empty()) {  // balanced: another thread took it first
            th.busy = false;
            return;
        }
        th.cur = q.front();
        q.pop_front();
        SimTime st = std::max(now, s.shared_free);
        s.shared_free = st + ps(1e3 / p_.shared_mpps);
        sim_.at(st + ps(p_.handler_ns), this, a | 1);
        return;
    }
    const Pending e = th.cur;
    const hal_worker before = s.nic->worker(e.channel);  // snapshots: count this handler's writes
    s.nic->run_rx_cqe(e.channel, e.cqe);
    const hal_worker after = s.nic->worker(e.channel);
    const uint64_t dadd = after.window_adds - before.window_adds;
    const uint64_t dwrite = (after.window_writes - before.window_writes) - dadd;
    // The writes reach the host now; the thread stays busy while PCIe takes them.
    const SimTime end = now + ps(double(dadd) * p_.window_add_ns + double(dwrite) * p_.window_write_ns);
    if (s.stats.handled++ == 0 || e.arrival < s.stats.first_arrival) s.stats.first_arrival = e.arrival;
    s.stats.last_finish = std::max(s.stats.last_finish, end);
    th.free_at = end;
    const std::deque<Pending>& q = p_.by_channel ? th.cq : s.cq;
    if (q.empty()) {
        th.busy = false;
        return;
    }
    sim_.at(end, this, a & ~uint64_t{1});
}

const DpaStats& DpaModel::stats(uint32_t nic) const
{
    static const DpaStats none;
    return nic < nics_.size() ? nics_[nic].stats : none;
}

void DpaModel::reset_stats()
{
    for (auto& s : nics_) s.stats = DpaStats{};
}

}  // namespace sdr::emu
