#include "latency.hpp"

#include <sdr_mr.h>
#include <sdr_sim.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>

namespace sdr::write_bw {

namespace {

// What both ends do: a ring of receive slots posted ahead of the messages they take, and the
// sends of one registered source buffer.
class PingPong : public Role {
public:
    PingPong(const Options& o, Side& s, Peer& peer, const RunParams& rp) : o_(o), s_(s), peer_(peer), rp_(rp)
    {
        buf_.resize(size_t{s.slots} * rp.size + rp.size);
        for (size_t i = 0; i < rp.size; i++) buf_[size_t{s.slots} * rp.size + i] = pattern(i);
        if (!(mr_ = sdr_mr_reg(s.ctx, buf_.data(), buf_.size(), SDR_ACCESS_REMOTE_WRITE))) die_sdr("sdr_mr_reg");
        sdr_mr_lkey_get(mr_, &lkey_);
        nchunks_ = (rp.size + rp.chunk - 1) / rp.chunk;
        last_move_ = s.now_s();
    }
    ~PingPong() override { sdr_mr_dereg(mr_); }

protected:
    uint32_t total() const { return rp_.warmup + rp_.iters; }
    // Posts the receive of message `posted_` (false: its slot is still quiet; try again).
    bool post_recv()
    {
        sdr_recv_wr rw{static_cast<uint32_t>(rp_.size), lkey_,
                       reinterpret_cast<uint64_t>(buf_.data() + size_t{posted_ % s_.slots} * rp_.size)};
        sdr_recv_handle* h;
        int rc = sdr_recv_post(s_.qp, &rw, &h);
        if (rc == SDR_RETRY) return false;
        if (rc != SDR_SUCCESS) die_sdr("sdr_recv_post");
        recvs_.push_back(h);
        posted_++;
        return true;
    }
    // Is the oldest posted receive's message all in? Then it is completed.
    bool take_recv()
    {
        uint8_t* bm;
        size_t nb;
        if (sdr_recv_bitmap_get(recvs_.front(), &bm, &nb) != SDR_SUCCESS) die_sdr("sdr_recv_bitmap_get");
        uint64_t set = 0;
        for (size_t i = 0; i < nb; i++) set += __builtin_popcount(__atomic_load_n(&bm[i], __ATOMIC_ACQUIRE));
        if (set < nchunks_) {
            if (s_.now_s() - last_move_ > o_.timeout_ms / 1e3)
                die("--latency: message " + std::to_string(received_) + " did not arrive within --timeout-ms (" +
                    std::to_string(set) + " of " + std::to_string(nchunks_) +
                    " chunks); the latency mode does not repair losses");
            return false;
        }
        sdr_recv_complete(recvs_.front());
        recvs_.pop_front();
        received_++;
        last_move_ = s_.now_s();
        return true;
    }
    bool send()
    {
        sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(rp_.size), lkey_,
                       reinterpret_cast<uint64_t>(buf_.data() + size_t{s_.slots} * rp_.size), 0};
        sdr_send_handle* h;
        int rc = sdr_send_post(s_.qp, &sw, &h);
        if (rc == SDR_RETRY) return false;
        if (rc != SDR_SUCCESS) die_sdr("sdr_send_post");
        sends_.push_back(h);
        sent_++;
        return true;
    }
    bool reap_sends()
    {
        bool any = false;
        while (!sends_.empty()) {
            int done = 0;
            if (sdr_send_poll(sends_.front(), &done, nullptr) == SDR_ERROR) die_sdr("sdr_send_poll");
            if (!done) break;
            sends_.pop_front();
            any = true;
        }
        return any;
    }
    bool sends_done() const { return sent_ == total() && sends_.empty(); }

    const Options& o_;
    Side& s_;
    Peer& peer_;
    RunParams rp_;
    std::vector<uint8_t> buf_;  // s.slots receive slots, then the source of our messages
    sdr_mr* mr_ = nullptr;
    uint32_t lkey_ = 0;
    uint64_t nchunks_ = 0;
    std::deque<sdr_recv_handle*> recvs_;
    std::deque<sdr_send_handle*> sends_;
    uint32_t posted_ = 0, received_ = 0, sent_ = 0;
    double last_move_ = 0;
};

class Pinger final : public PingPong {
public:
    using PingPong::PingPong;

    void on_message(const std::vector<uint8_t>& m) override
    {
        Credit c;
        if (take(m, &c)) ready_ = true;
    }
    bool step() override
    {
        bool moved = reap_sends();
        if (!ready_) return moved;
        if (sent_ == received_ && sent_ < total()) {  // next round: the pong's receive, then the ping
            if (posted_ == sent_ && !post_recv()) return moved;
            if (!send()) return moved;
            t_ping_ = sdr_now_ns(s_.ctx);
            return true;
        }
        if (received_ < sent_ && take_recv()) {
            if (received_ > rp_.warmup) half_rtt_us_.push_back((sdr_now_ns(s_.ctx) - t_ping_) / 2e3);
            if (received_ == total()) stats();
            return true;
        }
        return moved;
    }
    bool done() const override { return received_ == total() && sends_done(); }

    void report(tools::Json* j) const override
    {
        (*j)["t_min_us"] = t_min_;
        (*j)["t_max_us"] = t_max_;
        (*j)["t_typical_us"] = t_typical_;
        (*j)["t_avg_us"] = t_avg_;
        (*j)["t_stdev_us"] = t_stdev_;
        (*j)["t_p99_us"] = p99_;
        (*j)["t_p99_9_us"] = p999_;
        (*j)["round_trips"] = half_rtt_us_.size();
    }
    std::string text() const override
    {
        char b[256];
        std::snprintf(b, sizeof b, " %12llu %10zu %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f",
                      (unsigned long long)rp_.size, half_rtt_us_.size(), t_min_, t_max_, t_typical_, t_avg_, t_stdev_,
                      p99_, p999_);
        return b;
    }
    double goodput_gbps() const override { return 0; }

private:
    void stats()
    {
        std::vector<double> v = half_rtt_us_;
        std::sort(v.begin(), v.end());
        const size_t n = v.size();
        auto rank = [&](double q) { return v[std::min(n - 1, static_cast<size_t>(std::ceil(q * n)) - 1)]; };
        double sum = 0, sq = 0;
        for (double x : v) sum += x;
        t_avg_ = sum / n;
        for (double x : v) sq += (x - t_avg_) * (x - t_avg_);
        t_min_ = v.front();
        t_max_ = v.back();
        t_typical_ = v[n / 2];
        t_stdev_ = std::sqrt(sq / n);
        p99_ = rank(0.99);
        p999_ = rank(0.999);
    }

    bool ready_ = false;
    uint64_t t_ping_ = 0;
    std::vector<double> half_rtt_us_;
    double t_min_ = 0, t_max_ = 0, t_typical_ = 0, t_avg_ = 0, t_stdev_ = 0, p99_ = 0, p999_ = 0;
};

class Ponger final : public PingPong {
public:
    Ponger(const Options& o, Side& s, Peer& peer, const RunParams& rp) : PingPong(o, s, peer, rp) {}

    void on_message(const std::vector<uint8_t>&) override {}
    bool step() override
    {
        bool moved = reap_sends();
        if (!greeted_) {  // the first ping's receive, then tell the pinger
            if (!post_recv()) return moved;
            peer_.send(Credit{1, 1});
            greeted_ = true;
            return true;
        }
        // Each ping: the next one's receive, then the pong.
        if (received_ == sent_ && received_ < total() && take_recv()) moved = true;
        if (received_ > sent_) {
            if (posted_ == received_ && posted_ < total() && !post_recv()) return moved;
            if (send()) moved = true;
        }
        return moved;
    }
    bool done() const override { return received_ == total() && sends_done(); }
    void report(tools::Json* j) const override { (*j)["messages_echoed"] = received_; }
    std::string text() const override { return "echoed " + std::to_string(received_) + " messages"; }
    double goodput_gbps() const override { return 0; }

private:
    bool greeted_ = false;
};

}  // namespace

std::unique_ptr<Role> pinger(const Options& o, Side& s, Peer& peer, const RunParams& rp)
{
    return std::make_unique<Pinger>(o, s, peer, rp);
}
std::unique_ptr<Role> ponger(const Options& o, Side& s, Peer& peer, const RunParams& rp)
{
    return std::make_unique<Ponger>(o, s, peer, rp);
}

}  // namespace sdr::write_bw
