// DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015): the
// congestion control RoCEv2 NICs run. A switch marks CE on ECT packets of a congested queue;
// the receiving NIC (the notification point, NP) answers a marked packet of a QP with a CNP to
// the sending QP, at most one per QP per CNP interval; the sending NIC (the reaction point,
// RP) cuts that QP's rate on each CNP and raises it again by timer and byte counter.
//
// The RP's timers run lazily: the state is brought up to `now` whenever the send engine asks
// for the QP's rate, so an idle QP costs no timer events.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace sdr::emu {

// Defaults: the paper's (g, the alpha timer, the byte counter, F, the CNP interval) and, where
// the paper leaves them to the deployment, those of the HPCC artifact's DCQCN runs (HPCC,
// SIGCOMM 2019, simulation/run.py "dcqcn": rate-increase timer 300 us, R_AI 5 Mbit/s and R_HAI
// 50 Mbit/s per 25 Gbit/s of line rate, minimum rate 1 Gbit/s). for_line_rate scales R_AI and
// R_HAI to a line rate.
struct DcqcnParams {
    bool enabled = false;
    double line_gbps = 100.0;               // Rc's start and ceiling
    double g = 1.0 / 256;                   // alpha's gain
    uint64_t alpha_timer_ns = 55'000;       // alpha decays by (1 - g) when no CNP came for this long
    uint64_t increase_timer_ns = 300'000;   // a rate-increase event per this much time
    uint64_t byte_counter = 10'000'000;     // ... and per this many bytes sent (B)
    uint32_t fast_recovery = 5;             // F: increase events that halve the way back to Rt
    double rai_gbps = 0.020;                // additive increase of Rt (5 Mbit/s x 100/25)
    double rhai_gbps = 0.200;               // hyper increase of Rt (50 Mbit/s x 100/25)
    double min_gbps = 1.0;                  // Rc never falls below
    uint64_t cnp_interval_ns = 50'000;      // NP: at most one CNP per QP per interval

    static DcqcnParams for_line_rate(double gbps)
    {
        DcqcnParams p;
        p.line_gbps = gbps;
        p.rai_gbps = 0.005 * gbps / 25;
        p.rhai_gbps = 0.050 * gbps / 25;
        return p;
    }
};

// One QP's reaction point: current rate Rc, target rate Rt, alpha, the increase stages; and
// the pacing gap Rc gives a packet.
class DcqcnRp {
public:
    DcqcnRp() = default;
    explicit DcqcnRp(const DcqcnParams& p, uint64_t now_ns) { reset(p, now_ns); }

    // Line rate, alpha 1 (the paper's start: the first CNP halves the rate).
    void reset(const DcqcnParams& p, uint64_t now_ns)
    {
        p_ = &p;
        set_rc(p.line_gbps);
        rt_ = p.line_gbps;
        alpha_ = 1.0;
        restart(now_ns);
    }

    // A CNP for this QP: cut, remember where we were, raise alpha, start the stages over.
    void on_cnp(uint64_t now_ns)
    {
        advance(now_ns);
        rt_ = rc_;
        set_rc(std::max(p_->min_gbps, rc_ * (1 - alpha_ / 2)));
        alpha_ = (1 - p_->g) * alpha_ + p_->g;
        cnps_++;
        restart(now_ns);
    }

    // Bytes on the wire of a packet this QP sent: the byte counter's stage.
    void on_sent(uint64_t now_ns, uint64_t bytes)
    {
        advance(now_ns);
        count(bytes);
    }

    // A packet of `bytes` on the wire leaves at now: the time until the next may leave, bytes
    // x 8 / Rc rounded up to a nanosecond (Rc at now), then on_sent's byte count. Per packet,
    // so the gap is kept for the last size and recomputed only when the size or Rc changes
    // (the same double arithmetic on the same inputs: the same result); while no timer is due,
    // the size is the last one and the byte counter has no event, a packet costs a few
    // compares and a subtraction, and reads nothing beyond this object's first cache line.
    uint64_t pace(uint64_t now_ns, uint64_t bytes)
    {
        if (now_ns < next_alpha_ns_ && now_ns < next_increase_ns_ && bytes == gap_bytes_ &&
            bytes_left_ > static_cast<int64_t>(bytes)) [[likely]] {
            bytes_left_ -= static_cast<int64_t>(bytes);
            return gap_ns_;
        }
        return pace_fully(now_ns, bytes);
    }

    // Rc at now (Gbit/s): the timers' events up to now applied first.
    double rate_gbps(uint64_t now_ns)
    {
        advance(now_ns);
        return rc_;
    }
    double target_gbps() const { return rt_; }
    double alpha() const { return alpha_; }
    uint64_t cnps() const { return cnps_; }

private:
    [[gnu::noinline]] uint64_t pace_fully(uint64_t now_ns, uint64_t bytes)
    {
        advance(now_ns);
        if (bytes != gap_bytes_) {
            gap_ns_ = static_cast<uint64_t>(std::ceil(bytes * 8 / rc_));  // Gbit/s: bits per ns
            gap_bytes_ = bytes;
        }
        const uint64_t gap = gap_ns_;
        count(bytes);
        return gap;
    }
    void set_rc(double gbps)
    {
        rc_ = gbps;
        gap_bytes_ = kNoGap;  // pace computes the gap at this rate anew
    }
    void restart(uint64_t now_ns)
    {
        timer_stage_ = bc_ = 0;
        bytes_left_ = static_cast<int64_t>(p_->byte_counter);
        next_alpha_ns_ = now_ns + p_->alpha_timer_ns;
        next_increase_ns_ = now_ns + p_->increase_timer_ns;
    }
    // The byte counter counts down to its next event: a packet reads no parameter. The events
    // and the timers are out of line, so what a packet runs stays small where it is inlined.
    void count(uint64_t bytes)
    {
        bytes_left_ -= static_cast<int64_t>(bytes);
        if (bytes_left_ <= 0) [[unlikely]] byte_counter_events();
    }
    [[gnu::noinline]] void byte_counter_events()
    {
        while (bytes_left_ <= 0) {
            bytes_left_ += static_cast<int64_t>(p_->byte_counter);
            bc_++;
            increase();
        }
    }
    void advance(uint64_t now_ns)
    {
        if (now_ns >= next_alpha_ns_ || now_ns >= next_increase_ns_) [[unlikely]] timers(now_ns);
    }
    [[gnu::noinline]] void timers(uint64_t now_ns)
    {
        if (now_ns >= next_alpha_ns_) {  // every alpha period without a CNP: one decay
            const uint64_t k = (now_ns - next_alpha_ns_) / p_->alpha_timer_ns + 1;
            alpha_ *= std::pow(1 - p_->g, static_cast<double>(k));
            next_alpha_ns_ += k * p_->alpha_timer_ns;
        }
        while (now_ns >= next_increase_ns_) {
            if (rc_ >= p_->line_gbps) {  // recovered: skip the periods up to now
                next_increase_ns_ += ((now_ns - next_increase_ns_) / p_->increase_timer_ns + 1) * p_->increase_timer_ns;
                break;
            }
            next_increase_ns_ += p_->increase_timer_ns;
            timer_stage_++;
            increase();
        }
    }
    // One rate-increase event (the paper's Figure 7): fast recovery while both stages are
    // below F, hyper increase once both passed it, additive otherwise.
    void increase()
    {
        const uint32_t f = p_->fast_recovery;
        if (std::max(timer_stage_, bc_) < f) {
            // Rt stays: Rc climbs half the way back to where it was cut
        } else if (std::min(timer_stage_, bc_) > f) {
            rt_ += (std::min(timer_stage_, bc_) - f) * p_->rhai_gbps;
        } else {
            rt_ += p_->rai_gbps;
        }
        rt_ = std::min(rt_, p_->line_gbps);
        double rc = (rt_ + rc_) / 2;
        if (p_->line_gbps - rc < 1e-9 * p_->line_gbps) rc = p_->line_gbps;  // home: the timers rest
        set_rc(rc);
    }

    // What every packet reads or writes (advance, pace): with the QP's next send time they
    // fill one cache line, and no parameter is read until a timer or the byte counter is due.
    double rc_ = 0;
    uint64_t gap_ns_ = 0;
    int64_t bytes_left_ = 0;  // until the byte counter's next event
    uint64_t next_alpha_ns_ = 0, next_increase_ns_ = 0;
    static constexpr uint64_t kNoGap = ~uint64_t{0};  // a packet size none has
    uint64_t gap_bytes_ = kNoGap;  // the packet size gap_ns_ is for
    uint32_t timer_stage_ = 0, bc_ = 0;
    const DcqcnParams* p_ = nullptr;
    double rt_ = 0, alpha_ = 1;
    uint64_t cnps_ = 0;
};

// The notification point's limit: a CNP for a QP at most once per interval.
class DcqcnNp {
public:
    // A CE-marked packet of this QP arrived at now: true if a CNP goes out for it.
    bool on_ce(uint64_t now_ns, uint64_t interval_ns)
    {
        if (sent_ && now_ns - last_ns_ < interval_ns) return false;
        sent_ = true;
        last_ns_ = now_ns;
        return true;
    }

private:
    bool sent_ = false;
    uint64_t last_ns_ = 0;
};

}  // namespace sdr::emu
