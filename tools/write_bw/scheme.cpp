#include "scheme.hpp"

#include "experiment/stats.hpp"

#include <sdr_mr.h>

#include <algorithm>
#include <cstdio>
#include <deque>

namespace sdr::write_bw {

namespace {

// The endpoint's path estimate (sdr_rel_path_get) at the end of the run: what its timers went by.
sdr_rel_path path_of(const Side& s)
{
    sdr_rel_path p{};
    if (sdr_rel_path_get(s.ep, &p) != SDR_SUCCESS) die_rel("sdr_rel_path_get");
    return p;
}

tools::Json path_json(const sdr_rel_path& p)
{
    return tools::Json{{"srtt_ms", tools::json_real(p.rtt_ms)},
                       {"rttvar_ms", tools::json_real(p.rttvar_ms)},
                       {"min_rtt_ms", tools::json_real(p.min_rtt_ms)},
                       {"rto_ms", tools::json_real(p.rto_ms)},
                       {"delivery_gbps", tools::json_real(p.bw_gbps)},
                       {"drop", tools::json_real(p.drop)},
                       {"drop_samples", p.samples},
                       {"rtt_samples", p.rtt_samples},
                       {"rate_samples", p.rate_samples}};
}

// One line; a count of 0 says the value is still the first estimate.
std::string path_text(const sdr_rel_path& p)
{
    char b[256];
    std::snprintf(b, sizeof b, "path: SRTT %.3f ms (RTTVAR %.3f, RTO %.3f ms; %llu samples), delivery %.3f Gbit/s "
                  "(%llu samples), drop %.2e (%llu chunks)", p.rtt_ms, p.rttvar_ms, p.rto_ms,
                  (unsigned long long)p.rtt_samples, p.bw_gbps, (unsigned long long)p.rate_samples, p.drop,
                  (unsigned long long)p.samples);
    return b;
}

class RelSender final : public Role {
public:
    RelSender(Side& s, Peer&, const RunParams& rp) : s_(s), rp_(rp)
    {
        src_.resize(rp.size);
        for (size_t i = 0; i < src_.size(); i++) src_[i] = pattern(i);
        if (!(mr_ = sdr_mr_reg(s.ctx, src_.data(), src_.size(), SDR_ACCESS_REMOTE_WRITE))) die_sdr("sdr_mr_reg");
        sdr_mr_lkey_get(mr_, &lkey_);
    }
    ~RelSender() override { sdr_mr_dereg(mr_); }

    void on_message(const std::vector<uint8_t>& m) override { have_result_ = take(m, &r_) || have_result_; }
    bool step() override
    {
        bool moved = false;
        while (next_ < total() && ids_.size() < rp_.in_flight) {
            uint64_t id;
            if (next_ == rp_.warmup) t_start_ = s_.now_s();
            if (sdr_rel_send(s_.ep, src_.data(), rp_.size, lkey_, &id) != SDR_SUCCESS) die_rel("sdr_rel_send");
            ids_.push_back(id);
            next_++;
            moved = true;
        }
        sdr_rel_stats st;
        while (!ids_.empty()) {
            int rc = sdr_rel_send_poll(s_.ep, ids_.front(), &st);
            if (rc == SDR_RETRY) break;
            if (rc != SDR_SUCCESS) die_rel("sdr_rel_send_poll");
            ids_.pop_front();
            if (completed_++ >= rp_.warmup) {
                failed_ += !st.ok;
                retransmitted_ += st.retransmitted_chunks;
                if (st.ok) msg_ms_.push_back((st.done_ns - st.post_ns) / 1e6);
                if (!st.ok && error_.empty()) error_ = st.error;
            }
            if (completed_ == total()) {
                t_end_ = s_.now_s();
                msg_ms_summary_ = exp::summarize(msg_ms_);
                path_ = path_of(s_);
            }
            moved = true;
        }
        return moved;
    }
    bool done() const override { return completed_ == total() && have_result_; }

    void report(tools::Json* j) const override
    {
        (*j)["scheme"] = rp_.scheme;
        (*j)["tx_gbps"] = tools::json_real(rp_.size * 8.0 * rp_.iters / secs() / 1e9);
        (*j)["msgs_per_s"] = tools::json_real(rp_.iters / secs());
        (*j)["goodput_gbps"] = tools::json_real(goodput_gbps());
        (*j)["delivered_bytes"] = r_.bytes_received;
        (*j)["messages_delivered"] = r_.messages;
        (*j)["messages_failed"] = r_.failed;
        (*j)["acked_failed"] = failed_;
        (*j)["retransmitted_chunks"] = retransmitted_;
        (*j)["msg_ms_mean"] = tools::json_real(msg_ms_summary_.mean);
        (*j)["msg_ms_p99"] = tools::json_real(msg_ms_summary_.p99);
        if (!error_.empty()) (*j)["error"] = error_;
        (*j)["seconds"] = secs();
        (*j)["path"] = path_json(path_);
    }
    std::string text() const override
    {
        char b[320];
        std::snprintf(b, sizeof b, " %12llu %10u %-14s %12.2f %16.2f %10u %10u %14llu %12.3f %12.3f",
                      (unsigned long long)rp_.size, rp_.iters, rp_.scheme, rp_.size * 8.0 * rp_.iters / secs() / 1e9,
                      goodput_gbps(), r_.messages, r_.failed, (unsigned long long)retransmitted_, msg_ms_summary_.mean,
                      msg_ms_summary_.p99);
        return b + ("\n" + path_text(path_)) + (error_.empty() ? std::string() : "\nfirst failure: " + error_);
    }
    // Delivered bytes over the time from the first measured send to the last acknowledgement.
    double goodput_gbps() const override { return r_.bytes_received * 8.0 / secs() / 1e9; }

private:
    uint32_t total() const { return rp_.warmup + rp_.iters; }
    double secs() const { return t_end_ - t_start_; }

    Side& s_;
    RunParams rp_;
    std::vector<uint8_t> src_;
    sdr_mr* mr_ = nullptr;
    uint32_t lkey_ = 0;
    std::deque<uint64_t> ids_;
    uint32_t next_ = 0, completed_ = 0, failed_ = 0;
    uint64_t retransmitted_ = 0;
    std::vector<double> msg_ms_;  // each measured message's completion time (acknowledged ones)
    exp::Summary msg_ms_summary_;
    sdr_rel_path path_{};
    std::string error_;
    double t_start_ = 0, t_end_ = 0;
    Result r_{};
    bool have_result_ = false;
};

class RelReceiver final : public Role {
public:
    RelReceiver(const Options& o, Side& s, Peer& peer, const RunParams& rp) : o_(o), s_(s), peer_(peer), rp_(rp)
    {
        buf_.resize(size_t{rp.in_flight} * rp.size);
        if (!(mr_ = sdr_mr_reg(s.ctx, buf_.data(), buf_.size(), SDR_ACCESS_REMOTE_WRITE))) die_sdr("sdr_mr_reg");
        sdr_mr_lkey_get(mr_, &lkey_);
    }
    ~RelReceiver() override { sdr_mr_dereg(mr_); }

    void on_message(const std::vector<uint8_t>&) override {}
    bool step() override
    {
        bool moved = false;
        while (next_ < total() && ids_.size() < rp_.in_flight) {
            uint64_t id;
            if (sdr_rel_recv(s_.ep, slot(next_), rp_.size, lkey_, &id) != SDR_SUCCESS) die_rel("sdr_rel_recv");
            if (next_ == rp_.warmup && !rp_.warmup) t_start_ = s_.now_s();
            ids_.push_back(id);
            next_++;
            moved = true;
        }
        sdr_rel_stats st;
        while (!ids_.empty()) {
            int rc = sdr_rel_recv_poll(s_.ep, ids_.front(), &st);
            if (rc == SDR_RETRY) break;
            if (rc != SDR_SUCCESS) die_rel("sdr_rel_recv_poll");
            ids_.pop_front();
            uint8_t* msg = slot(done_);
            if (done_++ >= rp_.warmup) {
                if (st.ok) {
                    r_.messages++;
                    r_.bytes_received += st.bytes;
                    decoded_ += st.decoded_chunks;
                    fallbacks_ += st.fallbacks;
                    if (o_.verify)
                        for (size_t i = 0; i < rp_.size; i++)
                            if (msg[i] != pattern(i)) {
                                r_.corrupt++;
                                break;
                            }
                } else
                    r_.failed++;
            }
            if (done_ == rp_.warmup) t_start_ = s_.now_s();
            // Zeroed before the slot takes another message: a message that came through must have
            // brought its own bytes.
            if (o_.verify) std::memset(msg, 0, rp_.size);
            moved = true;
        }
        if (done_ == total() && !result_sent_) {
            r_.seconds = s_.now_s() - t_start_;
            path_ = path_of(s_);
            peer_.send(r_);
            result_sent_ = true;
        }
        return moved;
    }
    bool done() const override { return result_sent_; }

    void report(tools::Json* j) const override
    {
        (*j)["scheme"] = rp_.scheme;
        (*j)["goodput_gbps"] = tools::json_real(goodput_gbps());
        (*j)["delivered_bytes"] = r_.bytes_received;
        (*j)["messages_delivered"] = r_.messages;
        (*j)["messages_failed"] = r_.failed;
        (*j)["decoded_chunks"] = decoded_;
        (*j)["fallbacks"] = fallbacks_;
        (*j)["corrupt_messages"] = o_.verify ? tools::Json(r_.corrupt) : tools::Json(nullptr);
        (*j)["seconds"] = r_.seconds;
        (*j)["path"] = path_json(path_);
    }
    std::string text() const override
    {
        char b[256];
        std::snprintf(b, sizeof b, "%s: delivered %u of %u messages (%llu B) in %.3f s: goodput %.2f Gbit/s; %llu chunks "
                      "decoded, %llu fallbacks", rp_.scheme, r_.messages, rp_.iters,
                      (unsigned long long)r_.bytes_received, r_.seconds, goodput_gbps(), (unsigned long long)decoded_,
                      (unsigned long long)fallbacks_);
        return b + ("\n" + path_text(path_)) +
               (o_.verify ? "\nverified every delivered message: " + std::to_string(r_.corrupt) + " corrupt" : std::string());
    }
    // Delivered bytes from the last warm-up delivery to the last delivery.
    double goodput_gbps() const override { return r_.bytes_received * 8.0 / r_.seconds / 1e9; }

private:
    uint32_t total() const { return rp_.warmup + rp_.iters; }
    uint8_t* slot(uint32_t n) { return buf_.data() + size_t{n % rp_.in_flight} * rp_.size; }

    const Options& o_;
    Side& s_;
    Peer& peer_;
    RunParams rp_;
    std::vector<uint8_t> buf_;
    sdr_mr* mr_ = nullptr;
    uint32_t lkey_ = 0;
    std::deque<uint64_t> ids_;
    uint32_t next_ = 0, done_ = 0;
    uint64_t decoded_ = 0, fallbacks_ = 0;
    sdr_rel_path path_{};
    double t_start_ = 0;
    Result r_{};
    bool result_sent_ = false;
};

}  // namespace

std::unique_ptr<Role> rel_sender(const Options&, Side& s, Peer& peer, const RunParams& rp)
{
    return std::make_unique<RelSender>(s, peer, rp);
}
std::unique_ptr<Role> rel_receiver(const Options& o, Side& s, Peer& peer, const RunParams& rp)
{
    return std::make_unique<RelReceiver>(o, s, peer, rp);
}

}  // namespace sdr::write_bw
