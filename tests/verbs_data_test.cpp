// The verbs device's data path (emu/verbs) in two network namespaces joined by a veth, over
// raw: (AF_PACKET) and xdp: (AF_XDP): our own -libverbs program (tests/verbs_loop.c) connects
// two QPs of one device to each other and moves UC, UD and RC messages (RC READ too)
// byte-exact, and sees an RC WRITE to a bad rkey fail with REM_ACCESS_ERR; Debian's unmodified
// ibv_rc_pingpong, ibv_uc_pingpong and ibv_ud_pingpong (ibverbs-utils) run between the
// namespaces, with the GID index (-g 0), polling and with completion events (-e), and print
// their summary; so do Debian's unmodified perftest ib_send_bw (-c UD, UC, RC), ib_write_bw
// (-c UC, RC), ib_read_bw and ib_atomic_bw (FETCH_AND_ADD, CMP_AND_SWAP). Under 1 % packet loss
// on both sides (SDR_RT_LOSS), tests/verbs_lossy.c moves 4 MiB of RC WRITE and 1 MiB of RC SEND
// byte-exact between the namespaces, its UC SENDs arrive whole or not at all, and 1000 RC FETCH
// ADDs each return the sum before them (none executed twice). tests/verbs_srq.c shares one SRQ
// between an RC and a UD QP of one device, byte-exact, and reads the SRQ limit, last-WQE-reached
// and CQ overrun events with ibv_get_async_event, and arms a CQ for solicited events only;
// tests/verbs_ex.c posts RC (atomics too) and UD work through ibv_wr_* and polls with
// ibv_start_poll;
// tests/verbs_compat.c checks the queries, access flags, GID indices, ibv_rereg_mr and
// ibv_resize_cq real RDMA software relies on. ib_write_bw also runs from GID index 3 (-x 3, as
// on a kernel RoCE device), and -x 1 fails with a message naming the indices to use.
#include "child_util.hpp"
#include "netns_util.hpp"

#include <gtest/gtest.h>

#include <time.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>

namespace {

using sdr::test::Child;

using sdr::test::Result;
using sdr::test::run;

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

uint64_t mono_ms()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1'000'000;
}

class VerbsData : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override
    {
        if (std::string why = sdr::test::netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
        if (run("command -v ibv_uc_pingpong").status != 0)
            GTEST_SKIP() << "ibverbs-utils (ibv_uc_pingpong, ibv_ud_pingpong) is not installed";
        char tmpl[] = "/tmp/sdr-verbs-data-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        bed_ = std::make_unique<sdr::test::Testbed>("vrd");
        ASSERT_TRUE(bed_->ok()) << "tools/sdr-netns could not build the testbed";  // as root: a failure
        const std::string kind = GetParam();
        for (int side = 0; side < 2; side++) {
            Result add = run(in(side, std::string(SDR_RDMA) + " link add " + dev(side) + " netdev " + bed_->ns(side) +
                                          " " + kind));
            ASSERT_EQ(add.status, 0) << add.out;
        }
    }
    void TearDown() override
    {
        if (dir_.empty()) return;
        for (int side = 0; side < 2; side++) run("SDR_RDMA_DIR=" + dir_ + " " + SDR_RDMA + " link del " + dev(side));
        run("rm -rf " + dir_);
    }
    static std::string dev(int side) { return side == 0 ? "sdrd0" : "sdrd1"; }
    // A command inside namespace `side` with the device's state directory and the provider.
    std::string in(int side, const std::string& cmd) const
    {
        return "ip netns exec " + bed_->ns(side) + " env SDR_RDMA_DIR=" + dir_ + " SYSFS_PATH=" + dir_ +
               " RDMAV_DRIVERS=" + SDR_VERBS_PROVIDER + " " + cmd;
    }
    // Waits (bounded) until a TCP socket listens on `port` in namespace `side`: the pingpong
    // server is ready for its client.
    bool listening(int side, unsigned port) const
    {
        char want[16];
        std::snprintf(want, sizeof want, ":%04X ", port);
        for (uint64_t deadline = mono_ms() + 20'000; mono_ms() < deadline;) {
            Result r = run("ip netns exec " + bed_->ns(side) + " cat /proc/net/tcp");
            std::istringstream lines(r.out);
            for (std::string line; std::getline(lines, line);)
                if (contains(line, want) && contains(line, " 0A "))  // state LISTEN
                    return true;
        }
        return false;
    }
    // One pingpong run: server in b, client in a towards b's address; both must print their
    // summary for `iters` iterations.
    void pingpong(const std::string& prog, const std::string& args, unsigned port, unsigned iters)
    {
        const std::string common = " -g 0 -n " + std::to_string(iters) + " -p " + std::to_string(port) + " " + args;
        Child server(in(1, "timeout 60 " + prog + " -d " + dev(1) + common));
        ASSERT_TRUE(listening(1, port)) << prog << " server did not start listening";
        Result client = run(in(0, "timeout 60 " + prog + " -d " + dev(0) + common + " " + sdr::test::Testbed::ip(1)));
        int server_status = -1;
        const std::string server_out = server.finish(&server_status);
        const std::regex summary(std::to_string(iters) + " iters in [0-9.]+ seconds = [0-9.]+ usec/iter\n");
        EXPECT_EQ(client.status, 0) << client.out;
        EXPECT_EQ(server_status, 0) << server_out;
        EXPECT_TRUE(std::regex_search(client.out, summary)) << "client:\n" << client.out;
        EXPECT_TRUE(std::regex_search(server_out, summary)) << "server:\n" << server_out;
        std::printf("%s %s over %s:\n%s", prog.c_str(), args.c_str(), GetParam(), client.out.c_str());
    }

    // One perftest run (Debian's perftest 4.5) of 2 seconds (-D 2: a UC SEND that finds no
    // receive posted is lost, as the verbs spec says, so a count of messages could wait
    // forever): server in b, client in a; each prints its result line: messages of `bytes`
    // (perftest's default, 64 KiB; UD: one MTU), some moved, and the average bandwidth and
    // message rate those messages make over the time perftest measured (the 2 seconds, and a
    // little more on a loaded machine: its clock is not the test's business).
    void perftest(const std::string& prog, const std::string& args, unsigned port, unsigned bytes = 65536,
                  unsigned gid_index = 0)
    {
        if (run("command -v " + prog).status != 0) GTEST_SKIP() << "perftest (" << prog << ") is not installed";
        const std::string common = " -x " + std::to_string(gid_index) + " -D 2 -p " + std::to_string(port) + " " + args;
        Child server(in(1, "timeout 60 " + prog + " -d " + dev(1) + common));
        ASSERT_TRUE(listening(1, port)) << prog << " server did not start listening";
        Result client = run(in(0, "timeout 60 " + prog + " -d " + dev(0) + common + " " + sdr::test::Testbed::ip(1)));
        int server_status = -1;
        const std::string server_out = server.finish(&server_status);
        // " #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]"
        const std::regex result("\\n\\s*([0-9]+)\\s+([0-9]+)\\s+[0-9.]+\\s+([0-9.]+)\\s+([0-9.]+)");
        EXPECT_EQ(client.status, 0) << client.out;
        EXPECT_EQ(server_status, 0) << server_out;
        for (const std::string* out : {static_cast<const std::string*>(&client.out), &server_out}) {
            std::smatch m;
            ASSERT_TRUE(std::regex_search(*out, m, result)) << *out;
            EXPECT_EQ(std::stoul(m[1].str()), bytes) << *out;
            const double iters = std::stod(m[2].str());
            EXPECT_GT(iters, 0) << *out;
            // perftest's MB is 2^20 bytes; it prints 2 decimals of MB/s and 6 of Mpps. Both
            // averages are one rate, and the messages at that rate fill the 2 seconds asked
            // for (at most twice that: the alarm that ends the run may come late).
            const double mb_s = std::stod(m[3].str()), mpps = std::stod(m[4].str());
            ASSERT_GT(mpps, 0) << *out;
            EXPECT_NEAR(mb_s, mpps * 1e6 * bytes / 1048576, 0.01 * mb_s + 0.01) << *out;
            const double seconds = iters / (mpps * 1e6);
            EXPECT_GE(seconds, 2 * 0.99) << *out;
            EXPECT_LE(seconds, 4) << *out;
            if (out == &client.out)
                std::printf("%s %s over %s: %s\n", prog.c_str(), args.c_str(), GetParam(), m[0].str().c_str() + 1);
        }
    }

    // tests/verbs_lossy.c: server in b, client in a, both with SDR_RT_LOSS=0.01 (fixed seeds);
    // the server prints `want` once it checked what arrived.
    void lossy(const std::string& mode, unsigned port, const std::string& want)
    {
        const std::string args = " " + mode + " " + std::to_string(port);
        Child server(in(1, "SDR_RT_LOSS=0.01 SDR_RT_SEED=11 timeout 120 " + std::string(SDR_VERBS_LOSSY) + " " +
                               dev(1) + args));
        ASSERT_TRUE(listening(1, port)) << "verbs_lossy server did not start listening";
        Result client = run(in(0, "SDR_RT_LOSS=0.01 SDR_RT_SEED=12 timeout 120 " + std::string(SDR_VERBS_LOSSY) + " " +
                                      dev(0) + args + " " + sdr::test::Testbed::ip(1)));
        int server_status = -1;
        const std::string server_out = server.finish(&server_status);
        EXPECT_EQ(client.status, 0) << client.out;
        EXPECT_EQ(server_status, 0) << server_out;
        EXPECT_TRUE(contains(server_out, want)) << want << "\n" << server_out;
        std::printf("verbs_lossy %s over %s:\n%s", mode.c_str(), GetParam(), server_out.c_str());
    }

    std::unique_ptr<sdr::test::Testbed> bed_;
    std::string dir_;
};

TEST_P(VerbsData, LoopbackUcUdRcByteExact)
{
    Result r = run(in(0, std::string("timeout 60 ") + SDR_VERBS_LOOP + " " + dev(0)));
    EXPECT_EQ(r.status, 0) << r.out;
    for (const char* line : {"uc_send bytes=307200 packets=75 imm=0xc0ffee01 event=1 ok\n",
                             "uc_write_imm bytes=393216 offset=65536 imm=0xab ok\n", "uc_inline bytes=100 ok\n",
                             "uc_unsignaled posted=3 completions=1 ok\n", "ud_send bytes=1000 grh=40 src_qp_ok=1 ok\n",
                             "rc_send bytes=307200 imm=0xc0ffee02 ok\n", "rc_write bytes=393216 offset=65536 ok\n",
                             "rc_write_imm bytes=393216 imm=0xcd ok\n", "rc_read bytes=204805 packets=",
                             "rc_bad_rkey status=REM_ACCESS_ERR qp=ERR flushed=2 ok\n", "rc_no_peer status=RETRY_EXC_ERR qp=ERR ok\n",
                             "refusals uc_read=EINVAL no_route=EHOSTUNREACH ok\n", "verbs_loop: ok\n"})
        EXPECT_TRUE(contains(r.out, line)) << line << "\n" << r.out;
}

TEST_P(VerbsData, LoopbackSrqAndAsyncEvents)
{
    Result r = run(in(0, std::string("timeout 60 ") + SDR_VERBS_SRQ + " " + dev(0)));
    EXPECT_EQ(r.status, 0) << r.out;
    for (const char* line : {"srq rc_bytes=50000 ud_bytes=", "srq limit event=SRQ_LIMIT_REACHED once ok\n",
                             "srq err event=QP_LAST_WQE_REACHED ok\n",
                             "solicited_only unsolicited_events=0 solicited_events=1 ok\n",
                             "cq overrun event=CQ_ERR ok\n", "verbs_srq: ok\n"})
        EXPECT_TRUE(contains(r.out, line)) << line << "\n" << r.out;
}

TEST_P(VerbsData, LoopbackExtendedVerbsByteExact)
{
    Result r = run(in(0, std::string("timeout 60 ") + SDR_VERBS_EX + " " + dev(0)));
    EXPECT_EQ(r.status, 0) << r.out;
    for (const char* line : {"ex rc write=100000 write_imm=30000 send_inline=200 send_imm=50000 read=70000 ok\n",
                             "ex rc fetch_add=1000 cmp_swp=1005 word=77 ok\n", "ex ud send_imm bytes=", "verbs_ex: ok\n"})
        EXPECT_TRUE(contains(r.out, line)) << line << "\n" << r.out;
}

TEST_P(VerbsData, LoopbackCompatQueriesReregResize)
{
    Result r = run(in(0, std::string("timeout 60 ") + SDR_VERBS_COMPAT + " " + dev(0)));
    EXPECT_EQ(r.status, 0) << r.out;
    for (const char* line : {"query vendor_id=0xffffff phys_port_cnt_ex=1 comp_vectors=cpus gids=0,3 empty=1,2 ok\n",
                             "access remote_atomic=ok without_local_write=EINVAL relaxed=ok mw_bind=EOPNOTSUPP ok\n",
                             "gid_index 3=ok 1=EINVAL ok\n",
                             "create_flags none=ok block_self_mcast_lb=ok scatter_fcs=EOPNOTSUPP ok\n",
                             "rereg translation moved_write=ok refused_unchanged=ok pd=ok keys_kept=1 ok\n",
                             "resize_cq below_held=EINVAL kept=6 grown_held=26 ok\n",
                             "resize_cq owed_sends=10 below=EINVAL exact=ok ok\n",
                             "rereg access remote_write_removed=REM_ACCESS_ERR ok\n", "reset cleaned_cqs=ok ok\n",
                             "verbs_compat: ok\n"})
        EXPECT_TRUE(contains(r.out, line)) << line << "\n" << r.out;
    // The refused GID index names the ones to use.
    EXPECT_TRUE(contains(r.out, "GID index 1 is empty")) << r.out;
    EXPECT_TRUE(contains(r.out, "use GID index 0 or 3")) << r.out;
}

TEST_P(VerbsData, RcPingpong) { pingpong("ibv_rc_pingpong", "", 18615, 500); }
TEST_P(VerbsData, RcPingpongEvents) { pingpong("ibv_rc_pingpong", "-e", 18616, 200); }
TEST_P(VerbsData, UcPingpong) { pingpong("ibv_uc_pingpong", "", 18611, 500); }
TEST_P(VerbsData, UcPingpongEvents) { pingpong("ibv_uc_pingpong", "-e", 18612, 200); }
TEST_P(VerbsData, UdPingpong) { pingpong("ibv_ud_pingpong", "", 18613, 500); }
TEST_P(VerbsData, UdPingpongEvents) { pingpong("ibv_ud_pingpong", "-e", 18614, 200); }

TEST_P(VerbsData, PerftestSendBwUd) { perftest("ib_send_bw", "-c UD", 18621, 4096); }
TEST_P(VerbsData, PerftestSendBwUc) { perftest("ib_send_bw", "-c UC", 18622); }
TEST_P(VerbsData, PerftestWriteBwUc) { perftest("ib_write_bw", "-c UC", 18623); }
TEST_P(VerbsData, PerftestSendBwRc) { perftest("ib_send_bw", "-c RC", 18624); }
TEST_P(VerbsData, PerftestWriteBwRc) { perftest("ib_write_bw", "-c RC", 18625); }
TEST_P(VerbsData, PerftestReadBw) { perftest("ib_read_bw", "", 18626); }
TEST_P(VerbsData, PerftestAtomicBwFetchAdd) { perftest("ib_atomic_bw", "-A FETCH_AND_ADD", 18627, 8); }
TEST_P(VerbsData, PerftestAtomicBwCmpSwap) { perftest("ib_atomic_bw", "-A CMP_AND_SWAP", 18628, 8); }
// RoCE v2 from GID index 3, where a kernel RoCE device has its IPv4 GID (rxe, ConnectX users).
TEST_P(VerbsData, PerftestWriteBwGidIndex3) { perftest("ib_write_bw", "-c RC", 18629, 65536, 3); }

// Index 1 is empty here (a kernel device's IPv6 link-local GID): the client's modify_qp fails
// and says which indices to use.
TEST_P(VerbsData, PerftestGidIndex1Refused)
{
    if (run("command -v ib_write_bw").status != 0) GTEST_SKIP() << "perftest is not installed";
    const std::string common = " -x 1 -D 2 -p 18630";
    Child server(in(1, "timeout 30 ib_write_bw -d " + dev(1) + common));
    ASSERT_TRUE(listening(1, 18630)) << "ib_write_bw server did not start listening";
    Result client = run(in(0, "timeout 30 ib_write_bw -d " + dev(0) + common + " " + sdr::test::Testbed::ip(1)));
    int server_status = -1;
    server.finish(&server_status);
    EXPECT_NE(client.status, 0) << client.out;
    EXPECT_NE(server_status, 0);
    EXPECT_TRUE(contains(client.out, "GID index 1 is empty")) << client.out;
    EXPECT_TRUE(contains(client.out, "use GID index 0 or 3")) << client.out;
}

// Our own program across the namespaces with 1 % i.i.d. loss on every frame either side sends
// (data, ACKs, NAKs): RC recovers every byte; UC loses whole messages and delivers the rest intact.
TEST_P(VerbsData, RcUnderLossByteExact) { lossy("rc", 18631, "lossy rc write_bytes=4194304 send_bytes=1048576 ok\n"); }
TEST_P(VerbsData, UcUnderLossWholeMessages) { lossy("uc", 18632, "lossy uc messages=64 whole="); }
// RC atomics under the same loss: a retry after a lost ATOMIC ACK is answered from the
// responder's result cache, so every FETCH ADD returns the sum of those before it.
TEST_P(VerbsData, AtomicsUnderLossExecuteOnce)
{
    lossy("atomic", 18633, "lossy atomic fetch_adds=1000 sum=500500 cmp_swaps=2 ok\n");
}

INSTANTIATE_TEST_SUITE_P(Port, VerbsData, ::testing::Values("raw", "xdp"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
