// The world fuzz_verbs_rx throws frames at, and make_seeds captures real frames from: two NICs of
// the NIC model, A (the peer) and B (under test), with seeded ids (so QPNs and keys are the same
// in both programs), on an executor of this harness's own: a clock the input moves, timers in a
// list, packets pulled by hand (pump). No simulator runs: nothing happens that the input did not
// ask for, and a world costs microseconds to build, so every input gets a fresh one.
//
// On each NIC: one PD, a send CQ and a receive CQ, an SRQ, and four QPs connected to their twins
// on the other NIC: rc0 (RC, own receive queue), rc1 (RC on the SRQ), uc (UC), ud (UD). MTU 1 KiB;
// B's send PSNs start just below the 24-bit wrap.
//
// B's region (16 pages of 4 KiB, a position-dependent pattern):
// The two remote regions are registered at IOVA kIova + their offset (ibv_reg_mr_iova).
//   pages 1-3   kRw: local write, remote write, remote read, remote atomic (WRITEs and atomics
//               land, READs are served)
//   pages 5-6   kRo: remote read only (READs are served; nothing may write it)
//   pages 8-11  kLocal: local write only: receive buffers (pages 8-10), B's READ destination (page
//               11, first half) and B's send sources (page 11, second half: nothing may write it)
//   pages 0, 4, 7, 12-15: in no region (poisoned under ASan: no access at all)
// Posted on each: rc0 two receives of 2 KiB (page 8), uc one of two 1 KiB SGEs and ud two of 1 KiB
// (page 9), the SRQ two of 2 KiB (page 10). B's queued requests (sent when the input pumps): rc0 a 1500-byte SEND, a
// WRITE of 1000 and a READ of 2048 into page 11; rc1 a SEND of 100; uc a SEND of 1500; ud a SEND.
#pragma once

#include <sdr/emu/nic.hpp>
#include <sdr/emu/verbs_engine.hpp>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace sdr::fuzz {

class VerbsExecutor final : public emu::NicExecutor {
public:
    struct Timer {
        emu::Nic* nic;
        uint32_t worker, id;
        uint64_t deadline;
    };
    uint64_t now = 1'000'000'000;
    std::vector<Timer> timers;
    std::vector<std::pair<uint32_t, std::array<uint8_t, 6>>> hosts;  // IP -> MAC

    uint64_t now_ns() override { return now; }
    void tx_ready(emu::Nic&) override {}
    void arm_timer(emu::Nic& nic, uint32_t worker, uint32_t id, uint64_t deadline_ns) override
    {
        timers.push_back({&nic, worker, id, deadline_ns});
    }
    bool resolve_mac(uint32_t ip, std::array<uint8_t, 6>* mac) override
    {
        for (const auto& [i, m] : hosts)
            if (i == ip) return *mac = m, true;
        return false;
    }
    // Let `ns` pass and fire every timer due by then (a timer may arm another: fired on a later call).
    void advance(uint64_t ns)
    {
        now += ns;
        std::vector<Timer> due, later;
        for (const Timer& t : timers) (t.deadline <= now ? due : later).push_back(t);
        timers = std::move(later);
        for (const Timer& t : due) t.nic->timer_fired(t.worker, t.id);
    }
};

class VerbsWorld {
public:
    static constexpr size_t kPage = 4096, kPages = 16;
    static constexpr uint32_t kMtu = 1024, kUdQkey = 0x11223344;
    static constexpr uint32_t kSqPsnB = 0xFFFFF0, kSqPsnA = 0x000100;  // each side's first send PSN
    enum Qp { kRc0, kRc1, kUc, kUd, kQps };

    struct Side {
        emu::Nic* nic = nullptr;
        uint32_t pd = 0, scq = 0, rcq = 0, srq = 0;
        std::array<uint32_t, kQps> qp{};
        uint8_t* mem = nullptr;  // its region's bytes
        uint32_t rw = 0, ro = 0, local = 0;  // keys
        emu::VerbsEngine& v() const { return nic->verbs(); }
        uint32_t qpn(int q) const { return v().qpn(qp[q]); }
        uint64_t addr(size_t page, size_t off = 0) const { return reinterpret_cast<uint64_t>(mem + page * kPage + off); }
    };

    VerbsWorld()
    {
        const std::array<uint8_t, 6> mac_a{0x02, 0, 0, 0, 0, 0xA}, mac_b{0x02, 0, 0, 0, 0, 0xB};
        const uint32_t ip_a = 0x0A4D0001, ip_b = 0x0A4D0002;
        exec_.hosts = {{ip_a, mac_a}, {ip_b, mac_b}};
        nic_a_ = std::make_unique<emu::Nic>(0, emu::NicAddress{mac_a, ip_a}, 1, true, &exec_, 11);
        nic_b_ = std::make_unique<emu::Nic>(1, emu::NicAddress{mac_b, ip_b}, 1, true, &exec_, 22);
        a_ = make_side(*nic_a_, memory(0));
        b_ = make_side(*nic_b_, memory(1));
        connect(a_, b_, kSqPsnA, kSqPsnB);
        connect(b_, a_, kSqPsnB, kSqPsnA);
        post_receives(a_);
        post_receives(b_);
    }

    VerbsExecutor& exec() { return exec_; }
    // Where remote requests address page `page` of a side's region: the same in every process
    // (the regions are registered with an IOVA), so captured frames replay.
    static constexpr uint64_t kIova = 0x7E5D00000000;
    static uint64_t iova(size_t page, size_t off = 0) { return kIova + page * kPage + off; }
    Side& a() { return a_; }
    Side& b() { return b_; }
    // Pages in no region: no frame may touch them.
    static constexpr bool no_region(size_t page) { return page == 0 || page == 4 || page == 7 || page >= 12; }
    static uint8_t pattern(size_t i) { return static_cast<uint8_t>((i * 131) ^ (i >> 8) ^ 0x5A); }
    // Side s's region, filled with the pattern: one allocation per process, refilled for each
    // world (a fuzz target builds a world per input; pages in no region are never written).
    static uint8_t* memory(int side)
    {
        static const std::vector<uint8_t> image = [] {
            std::vector<uint8_t> v(kPages * kPage);
            for (size_t i = 0; i < v.size(); i++) v[i] = pattern(i);
            return v;
        }();
        static uint8_t* const mem[2] = {static_cast<uint8_t*>(std::aligned_alloc(kPage, kPages * kPage)),
                                        static_cast<uint8_t*>(std::aligned_alloc(kPage, kPages * kPage))};
        for (size_t p = 0; p < kPages; p++)
            if (!no_region(p)) std::memcpy(mem[side] + p * kPage, image.data() + p * kPage, kPage);
        return mem[side];
    }

    // The requests each side queues (B's for fuzz_verbs_rx, A's to capture frames towards B).
    void queue_requests(Side& s, const Side& peer)
    {
        const uint64_t src = s.addr(11, 2048);
        post(s, kRc0, send_wr(1, emu::verbs::WrOpcode::Send, src, 1500, s.local));
        emu::verbs::SendWr w = send_wr(2, emu::verbs::WrOpcode::RdmaWrite, src, 1000, s.local);
        w.remote_addr = iova(1, 100);
        w.rkey = peer.rw;
        post(s, kRc0, w);
        emu::verbs::SendWr r = send_wr(3, emu::verbs::WrOpcode::RdmaRead, s.addr(11), 1024, s.local);
        r.remote_addr = iova(5);
        r.rkey = peer.ro;
        post(s, kRc0, r);
        emu::verbs::SendWr faa = send_wr(7, emu::verbs::WrOpcode::AtomicFetchAndAdd, s.addr(11, 1024), 8, s.local);
        faa.remote_addr = iova(2, 8);
        faa.rkey = peer.rw;
        faa.compare_add = 5;
        post(s, kRc0, faa);
        emu::verbs::SendWr cas = send_wr(8, emu::verbs::WrOpcode::AtomicCmpAndSwp, s.addr(11, 1032), 8, s.local);
        cas.remote_addr = iova(2, 16);
        cas.rkey = peer.rw;
        cas.compare_add = 0;
        cas.swap = 0x1122334455667788;
        post(s, kRc0, cas);
        emu::verbs::SendWr i = send_wr(4, emu::verbs::WrOpcode::SendWithImm, src, 100, s.local);
        i.imm = 0xC0FFEE;
        post(s, kRc1, i);
        post(s, kUc, send_wr(5, emu::verbs::WrOpcode::Send, src, 1500, s.local));
        emu::verbs::SendWr u = send_wr(6, emu::verbs::WrOpcode::Send, src, 64, s.local);
        u.ah = s.v().ah_create(s.pd, emu::verbs::gid_from_ipv4(peer.nic->address().ip));
        u.remote_qpn = peer.qpn(kUd);
        u.remote_qkey = kUdQkey;
        need(u.ah != emu::Nic::kNoHandle, "ah_create");
        post(s, kUd, u);
    }

    // Up to n packets s sends now, each encoded into a frame; the packets themselves in *packets
    // (their payload pointers: what the NIC read), for the harness to check.
    std::vector<std::vector<uint8_t>> pump(Side& s, size_t n, std::vector<emu::TxPacket>* packets = nullptr)
    {
        std::vector<std::vector<uint8_t>> frames;
        emu::TxPacket p;
        static uint8_t scratch[8192];
        for (size_t i = 0; i < n && s.nic->tx_next(&p); i++) {
            const size_t len = s.nic->tx_encode(p, scratch, sizeof scratch);
            s.nic->tx_done(p);
            if (packets) packets->push_back(p);
            if (len) frames.emplace_back(scratch, scratch + len);
        }
        return frames;
    }

private:
    static void need(bool ok, const char* what)
    {
        if (!ok) throw std::runtime_error(std::string("VerbsWorld: ") + what);
    }

    Side make_side(emu::Nic& nic, uint8_t* mem)
    {
        using namespace emu::verbs;
        Side s;
        s.nic = &nic;
        s.mem = mem;
        emu::VerbsEngine& v = nic.verbs();
        s.pd = v.pd_alloc();
        s.scq = v.cq_create(64);
        s.rcq = v.cq_create(64);
        s.srq = v.srq_create(s.pd, 8, 0);
        s.rw = v.mr_reg(s.pd, mem + 1 * kPage, 3 * kPage,
                        emu::verbs::kLocalWrite | emu::verbs::kRemoteWrite | emu::verbs::kRemoteRead |
                            emu::verbs::kRemoteAtomic,
                        iova(1));
        s.ro = v.mr_reg(s.pd, mem + 5 * kPage, 2 * kPage, emu::verbs::kRemoteRead, iova(5));
        s.local = v.mr_reg(s.pd, mem + 8 * kPage, 4 * kPage, emu::verbs::kLocalWrite);
        need(s.pd != emu::Nic::kNoHandle && s.srq != emu::Nic::kNoHandle && s.rw && s.ro && s.local, "objects");
        const QpType types[kQps] = {QpType::Rc, QpType::Rc, QpType::Uc, QpType::Ud};
        for (int q = 0; q < kQps; q++) {
            s.qp[q] = v.qp_create(types[q], s.pd, s.scq, s.rcq, 16, 16, q == kRc1 ? s.srq : emu::Nic::kNoHandle);
            need(s.qp[q] != emu::Nic::kNoHandle, "qp_create");
        }
        return s;
    }

    static void connect(Side& s, const Side& peer, uint32_t sq_psn, uint32_t rq_psn)
    {
        using emu::verbs::QpAttr;
        for (int q = 0; q < kQps; q++) {
            QpAttr a;
            a.state = emu::verbs::QpState::Init;
            a.access = emu::verbs::kLocalWrite | emu::verbs::kRemoteWrite | emu::verbs::kRemoteRead |
                       emu::verbs::kRemoteAtomic;
            a.qkey = kUdQkey;
            const bool ud = q == kUd, rc = q == kRc0 || q == kRc1;
            need(s.v().qp_modify(s.qp[q], a, QpAttr::kState | (ud ? QpAttr::kQkey : QpAttr::kAccess)) == 0, "INIT");
            a.state = emu::verbs::QpState::Rtr;
            a.path_mtu = kMtu;
            a.dest_qpn = peer.qpn(q);
            a.rq_psn = rq_psn;
            a.remote_gid = emu::verbs::gid_from_ipv4(peer.nic->address().ip);
            a.max_dest_rd_atomic = 4;
            uint32_t rtr = QpAttr::kState | (ud ? 0u : QpAttr::kPathMtu | QpAttr::kDestQpn | QpAttr::kRqPsn | QpAttr::kAv);
            if (rc) rtr |= QpAttr::kMaxDestRdAtomic | QpAttr::kMinRnrTimer;
            need(s.v().qp_modify(s.qp[q], a, rtr) == 0, "RTR");
            a.state = emu::verbs::QpState::Rts;
            a.sq_psn = sq_psn;
            a.timeout = 10;
            a.retry_cnt = 2;
            a.rnr_retry = 2;
            a.max_rd_atomic = 4;
            uint32_t rts = QpAttr::kState | QpAttr::kSqPsn;
            if (rc) rts |= QpAttr::kTimeout | QpAttr::kRetryCnt | QpAttr::kRnrRetry | QpAttr::kMaxRdAtomic;
            need(s.v().qp_modify(s.qp[q], a, rts) == 0, "RTS");
        }
    }

    static emu::verbs::RecvWr recv_wr(uint64_t id, std::initializer_list<emu::verbs::Sge> sges)
    {
        emu::verbs::RecvWr r;
        r.wr_id = id;
        for (const auto& g : sges) r.sg[r.num_sge++] = g;
        return r;
    }
    static emu::verbs::SendWr send_wr(uint64_t id, emu::verbs::WrOpcode op, uint64_t addr, uint32_t len, uint32_t lkey)
    {
        emu::verbs::SendWr w;
        w.wr_id = id;
        w.opcode = op;
        w.num_sge = 1;
        w.sg[0] = {addr, len, lkey};
        return w;
    }
    static void post(Side& s, int q, const emu::verbs::SendWr& w) { need(s.v().post_send(s.qp[q], w) == 0, "post_send"); }

    static void post_receives(Side& s)
    {
        const uint32_t k = s.local;
        for (uint32_t i = 0; i < 2; i++)
            need(s.v().post_recv(s.qp[kRc0], recv_wr(10 + i, {{s.addr(8, i * 2048), 2048, k}})) == 0, "rc0 recv");
        need(s.v().post_recv(s.qp[kUc], recv_wr(20, {{s.addr(9, 0), 1024, k}, {s.addr(9, 1024), 1024, k}})) == 0,
             "uc recv");
        for (uint32_t i = 0; i < 2; i++)
            need(s.v().post_recv(s.qp[kUd], recv_wr(30 + i, {{s.addr(9, 2048 + i * 1024), 1024, k}})) == 0, "ud recv");
        for (uint32_t i = 0; i < 2; i++)
            need(s.v().post_srq_recv(s.srq, recv_wr(40 + i, {{s.addr(10, i * 2048), 2048, k}})) == 0, "srq recv");
    }

    VerbsExecutor exec_;
    std::unique_ptr<emu::Nic> nic_a_, nic_b_;
    Side a_, b_;
};

}  // namespace sdr::fuzz
