#include "bw.hpp"

#include <sdr_mr.h>

#include <algorithm>
#include <cstdio>
#include <deque>

namespace sdr::write_bw {

namespace {

class BwSender final : public Role {
public:
    BwSender(Side& s, Peer& peer, const RunParams& rp) : s_(s), peer_(peer), rp_(rp)
    {
        src_.resize(rp.size);
        for (size_t i = 0; i < src_.size(); i++) src_[i] = pattern(i);
        if (!(mr_ = sdr_mr_reg(s.ctx, src_.data(), src_.size(), SDR_ACCESS_REMOTE_WRITE))) die_sdr("sdr_mr_reg");
        sdr_mr_lkey_get(mr_, &lkey_);
    }
    ~BwSender() override { sdr_mr_dereg(mr_); }

    // The receiver may see the data land, and send its result, before our last local
    // completions: a result is kept whenever it comes.
    void on_message(const std::vector<uint8_t>& m) override
    {
        Credit c;
        if (take(m, &c)) credit_ = c.posted;
        have_result_ = take(m, &r_) || have_result_;
    }
    bool step() override
    {
        bool progressed = false;
        while (next_send_ < credit_ && inflight_.size() < s_.slots) {
            sdr_send_wr sw{SDR_WR_WRITE, 0, static_cast<uint32_t>(rp_.size), lkey_, reinterpret_cast<uint64_t>(src_.data()), 0};
            sdr_send_handle* h;
            int rc = sdr_send_post(s_.qp, &sw, &h);
            if (rc == SDR_RETRY) break;
            if (rc != SDR_SUCCESS) die_sdr("sdr_send_post");
            if (next_send_ == rp_.warmup) t_start_ = s_.now_s();
            inflight_.push_back(h);
            next_send_++;
            progressed = true;
        }
        while (!inflight_.empty()) {
            int done = 0;
            if (sdr_send_poll(inflight_.front(), &done, nullptr) == SDR_ERROR) die_sdr("sdr_send_poll");
            if (!done) break;
            inflight_.pop_front();
            if (++completed_ == total()) t_end_ = s_.now_s();
            progressed = true;
        }
        if (completed_ > reported_ && (s_.now_s() - last_report_ > 0.001 || completed_ == total())) {
            SentUpTo su;
            su.sent = reported_ = completed_;
            if (completed_ == total()) su.frames = counter(nic_counters(s_.ctx), "kernel.tx_frames");
            last_report_ = s_.now_s();
            peer_.send(su);
        }
        return progressed;
    }
    bool done() const override { return completed_ == total() && have_result_; }

    void report(tools::Json* j) const override
    {
        (*j)["tx_gbps"] = tools::json_real(rp_.size * 8.0 * rp_.iters / secs() / 1e9);
        (*j)["tx_mpps"] = tools::json_real(packets() / secs() / 1e6);
        (*j)["msgs_per_s"] = tools::json_real(rp_.iters / secs());
        (*j)["goodput_gbps"] = tools::json_real(goodput_gbps());
        (*j)["chunk_loss_pct"] = tools::json_real(lost_pct());
        (*j)["seconds"] = secs();
    }
    std::string text() const override
    {
        char b[256];
        std::snprintf(b, sizeof b, " %12llu %10u %12.2f %10.3f %12.0f %16.2f %11.4f%%", (unsigned long long)rp_.size,
                      rp_.iters, rp_.size * 8.0 * rp_.iters / secs() / 1e9, packets() / secs() / 1e6, rp_.iters / secs(),
                      goodput_gbps(), lost_pct());
        return b;
    }
    double goodput_gbps() const override { return r_.seconds > 0 ? r_.bytes_received * 8.0 / r_.seconds / 1e9 : 0.0; }

private:
    uint32_t total() const { return rp_.warmup + rp_.iters; }
    double secs() const { return t_end_ - t_start_; }
    double packets() const { return double((rp_.size + rp_.mtu - 1) / rp_.mtu) * rp_.iters; }
    double lost_pct() const { return 100.0 * double(r_.chunks_expected - r_.chunks_received) / double(r_.chunks_expected); }

    Side& s_;
    Peer& peer_;
    RunParams rp_;
    std::vector<uint8_t> src_;
    sdr_mr* mr_ = nullptr;
    uint32_t lkey_ = 0;
    uint32_t credit_ = 0, next_send_ = 0, completed_ = 0, reported_ = 0;
    std::deque<sdr_send_handle*> inflight_;
    double t_start_ = 0, t_end_ = 0, last_report_ = -1;
    Result r_{};
    bool have_result_ = false;
};

class BwReceiver final : public Role {
public:
    BwReceiver(const Options& o, Side& s, Peer& peer, const RunParams& rp) : o_(o), s_(s), peer_(peer), rp_(rp)
    {
        buf_.resize(size_t{s.slots} * rp.size);
        if (!(mr_ = sdr_mr_reg(s.ctx, buf_.data(), buf_.size(), SDR_ACCESS_REMOTE_WRITE))) die_sdr("sdr_mr_reg");
        sdr_mr_lkey_get(mr_, &lkey_);
        nchunks_ = (rp.size + rp.chunk - 1) / rp.chunk;
        // A message the sender has sent whole is complete when its bitmap is, or when nothing
        // more can arrive: 20 ms (plus twice the added delay, or --settle-ms) after it was reported sent.
        settle_ = o.settle_ms >= 0 ? o.settle_ms / 1e3 : 0.02 + 2 * o.delay_ms / 1e3;
        post();
    }
    ~BwReceiver() override { sdr_mr_dereg(mr_); }

    void on_message(const std::vector<uint8_t>& m) override
    {
        SentUpTo su;
        if (!take(m, &su)) return;
        sender_sent_ = su.sent;
        sender_frames_ = su.frames;
        sent_seen_at_ = s_.now_s();
    }
    bool step() override
    {
        if (done_ == total()) return account();
        if (posted_.size() < s_.slots) post();
        if (posted_.empty()) return false;  // every slot free, the next one still quiet
        sdr_recv_handle* h = posted_.front();
        uint8_t* bm;
        size_t nb;
        if (sdr_recv_bitmap_get(h, &bm, &nb) != SDR_SUCCESS) die_sdr("sdr_recv_bitmap_get");
        uint64_t set = 0;
        for (size_t i = 0; i < nb; i++) set += __builtin_popcount(__atomic_load_n(&bm[i], __ATOMIC_ACQUIRE));
        if (done_ >= rp_.warmup && set && !first_arrival_) first_arrival_ = s_.now_s();
        const bool over = set == nchunks_ || (sender_sent_ > done_ && s_.now_s() - sent_seen_at_ > settle_);
        if (!over) return false;
        const uint64_t last_chunk_short = nchunks_ * rp_.chunk - rp_.size;  // the last chunk is shorter by this
        if (done_ >= rp_.warmup) {
            chunks_received_ += set;
            bytes_received_ += set * rp_.chunk -
                               ((__atomic_load_n(&bm[(nchunks_ - 1) / 8], __ATOMIC_ACQUIRE) >> ((nchunks_ - 1) % 8) & 1)
                                    ? last_chunk_short
                                    : 0);
        }
        if (o_.verify) {
            bits_.resize(nb);
            for (size_t i = 0; i < nb; i++) bits_[i] = __atomic_load_n(&bm[i], __ATOMIC_ACQUIRE);
        }
        sdr_recv_complete(h);
        if (o_.verify) corrupt_ += verify(buf_.data() + size_t{done_ % s_.slots} * rp_.size);
        posted_.pop_front();
        done_++;
        last_done_ = s_.now_s();
        post();
        return true;
    }
    bool done() const override { return result_sent_; }

    void report(tools::Json* j) const override
    {
        (*j)["goodput_gbps"] = tools::json_real(goodput_gbps());
        (*j)["chunks_expected"] = r_.chunks_expected;
        (*j)["chunks_received"] = r_.chunks_received;
        (*j)["corrupt_chunks"] = o_.verify ? tools::Json(corrupt_) : tools::Json(nullptr);
        (*j)["seconds"] = r_.seconds;
    }
    std::string text() const override
    {
        char b[256];
        std::snprintf(b, sizeof b, "received %llu of %llu chunks (%.4f %% lost) in %.3f s: goodput %.2f Gbit/s",
                      (unsigned long long)r_.chunks_received, (unsigned long long)r_.chunks_expected,
                      100.0 * double(r_.chunks_expected - r_.chunks_received) / double(r_.chunks_expected), r_.seconds,
                      goodput_gbps());
        return b + (o_.verify ? "\nverified every complete chunk: " + std::to_string(corrupt_) + " corrupt" : std::string());
    }
    double goodput_gbps() const override { return r_.seconds > 0 ? r_.bytes_received * 8.0 / r_.seconds / 1e9 : 0.0; }

private:
    uint32_t total() const { return rp_.warmup + rp_.iters; }

    // Posts what the slots allow and sends the new credit. A slot's (slot, generation) pair may
    // still be quiet (SDR_RETRY: the maximum packet lifetime after its last receive, sdr_ext.h):
    // a later step tries again.
    void post()
    {
        const uint32_t before = next_post_;
        while (next_post_ < total() && posted_.size() < s_.slots) {
            sdr_recv_wr rw{static_cast<uint32_t>(rp_.size), lkey_,
                           reinterpret_cast<uint64_t>(buf_.data() + size_t{next_post_ % s_.slots} * rp_.size)};
            sdr_recv_handle* h;
            int rc = sdr_recv_post(s_.qp, &rw, &h);
            if (rc == SDR_RETRY) break;
            if (rc != SDR_SUCCESS) die_sdr("sdr_recv_post");
            posted_.push_back(h);
            next_post_++;
        }
        if (next_post_ == before) return;
        Credit c;
        c.posted = next_post_;
        peer_.send(c);
    }

    // Corrupt chunks among the complete ones (bits_, the bitmap read before sdr_recv_complete);
    // the slot is zeroed after, so the next message in it cannot pass on stale bytes. Called
    // after sdr_recv_complete: from then on the NIC writes nothing into the buffer, also not a
    // straggler of an incomplete chunk, which the memset would race with.
    uint64_t verify(uint8_t* msg) const
    {
        uint64_t bad = 0;
        for (uint64_t c = 0; c * rp_.chunk < rp_.size; c++) {
            if (!(bits_[c / 8] >> (c % 8) & 1)) continue;
            size_t end = std::min<size_t>(rp_.size, (c + 1) * size_t{rp_.chunk});
            for (size_t i = c * size_t{rp_.chunk}; i < end; i++)
                if (msg[i] != pattern(i)) {
                    bad++;
                    break;
                }
        }
        std::memset(msg, 0, rp_.size);
        return bad;
    }

    // Before reporting, every frame the sender's kernel took has reached our NIC or been
    // counted as a kernel drop: a slow receiver may give up on messages (the settle time) while
    // their frames still wait in its ring, and a report read then would miss them. The
    // sender's last progress report carries its frame count. The wait lasts while the count
    // still moves (the NIC draining its ring); once nothing has moved for 200 ms (or the
    // timeout passed), a frame lost where no counter sees it shows as a shortfall in the
    // report, not as a hang.
    bool account()
    {
        if (sender_sent_ < total()) return false;
        const double now = s_.now_s();
        if (!accounting_since_) accounting_since_ = moved_at_ = now;
        const auto all = nic_counters(s_.ctx);
        const uint64_t seen = counter(all, "port.rx_frames") + counter(all, "kernel.rx_dropped");
        if (seen != last_seen_) last_seen_ = seen, moved_at_ = now;
        if (seen < sender_frames_ && now - accounting_since_ < o_.timeout_ms / 1e3 && now - moved_at_ <= 0.2) return false;
        r_.messages = rp_.iters;
        r_.chunks_expected = nchunks_ * rp_.iters;
        r_.chunks_received = chunks_received_;
        r_.bytes_received = bytes_received_;
        // Nothing measured arrived: no interval (first_arrival_ is still 0 on the clock's scale).
        r_.seconds = first_arrival_ > 0 ? last_done_ - first_arrival_ : 0.0;
        r_.corrupt = static_cast<uint32_t>(corrupt_);
        peer_.send(r_);
        result_sent_ = true;
        return true;
    }

    const Options& o_;
    Side& s_;
    Peer& peer_;
    RunParams rp_;
    std::vector<uint8_t> buf_, bits_;
    sdr_mr* mr_ = nullptr;
    uint32_t lkey_ = 0;
    uint64_t nchunks_ = 0;
    double settle_ = 0;
    std::deque<sdr_recv_handle*> posted_;
    uint32_t next_post_ = 0, done_ = 0, sender_sent_ = 0;
    uint64_t sender_frames_ = 0, last_seen_ = 0;
    double sent_seen_at_ = 0, first_arrival_ = 0, last_done_ = 0, accounting_since_ = 0, moved_at_ = 0;
    uint64_t chunks_received_ = 0, bytes_received_ = 0, corrupt_ = 0;
    Result r_{};
    bool result_sent_ = false;
};

}  // namespace

std::unique_ptr<Role> bw_sender(const Options&, Side& s, Peer& peer, const RunParams& rp)
{
    return std::make_unique<BwSender>(s, peer, rp);
}
std::unique_ptr<Role> bw_receiver(const Options& o, Side& s, Peer& peer, const RunParams& rp)
{
    return std::make_unique<BwReceiver>(o, s, peer, rp);
}

}  // namespace sdr::write_bw
