// host/verbs: SDR's firmware on host worker threads over rdma-core, as `verbs:` devices of our
// own rdma-core provider (emu/verbs) in two network namespaces joined by a veth. sdr_write_bw
// (server in b, client in a) moves messages verbs: -> verbs: over 8 channels with UC and with
// RC transport QPs, 4 KiB to 64 MiB, and the server checks every chunk's bytes (--verify):
// every chunk arrives and none is corrupt, also with the portable staged root keys. Cross-backend interop: a verbs: client to a raw:
// server (the emulated DPA) and a raw: client to a verbs: server, byte-exact: the same frames
// from two stacks. A verbs: device says its NIC counters are not available.
#include "child_util.hpp"
#include "netns_util.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>

namespace {

using sdr::test::Child;
using sdr::test::json_number;
using sdr::test::json_of;

using sdr::test::Result;
using sdr::test::run;

class HalVerbs : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (std::string why = sdr::test::netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
        char tmpl[] = "/tmp/sdr-hal-verbs-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        bed_ = std::make_unique<sdr::test::Testbed>("hvb");
        ASSERT_TRUE(bed_->ok()) << "tools/sdr-netns could not build the testbed";  // as root: a failure
        for (int side = 0; side < 2; side++) {
            Result add = run(in(side, std::string(SDR_RDMA) + " link add " + dev(side) + " netdev " + bed_->ns(side) + " raw"));
            ASSERT_EQ(add.status, 0) << add.out;
        }
    }
    void TearDown() override
    {
        if (dir_.empty()) return;
        for (int side = 0; side < 2; side++) run("SDR_RDMA_DIR=" + dir_ + " " + SDR_RDMA + " link del " + dev(side));
        run("rm -rf " + dir_);
    }
    static std::string dev(int side) { return side == 0 ? "sdrh0" : "sdrh1"; }
    std::string in(int side, const std::string& cmd, const std::string& env = "") const
    {
        return "ip netns exec " + bed_->ns(side) + " env SDR_RDMA_DIR=" + dir_ + " SYSFS_PATH=" + dir_ +
               " RDMAV_DRIVERS=" + SDR_VERBS_PROVIDER + " " + env + " " + cmd;
    }
    // sdr_write_bw server in b, client in a; server_dev/client_dev: "verbs" or "raw"; json: with
    // --json. Returns both outputs (server, client) after checking both ran.
    std::pair<std::string, std::string> write_bw_outputs(const std::string& server_dev, const std::string& client_dev,
                                                         const std::string& args, const std::string& env, bool json)
    {
        static int runs = 0;
        const std::string port = std::to_string(19300 + (getpid() % 100) * 8 + (runs++ % 8));
        auto device = [&](const std::string& kind, int side) {
            return kind == "verbs" ? "verbs:" + dev(side) : "raw:" + bed_->ns(side);
        };
        const std::string tool = std::string(SDR_WRITE_BW) + (json ? " --json" : "") + " --timeout-ms 20000 -p " + port;
        // A message is over when its bitmap is whole, or --settle-ms after the client sent it: 2 s,
        // not the tool's 20 ms, so a worker thread the shared cores held back loses nothing.
        Child server(in(1, "timeout 120 " + tool + " --verify --settle-ms 2000 -d " + device(server_dev, 1), env));
        Result client = run(in(0, "timeout 120 " + tool + " -d " + device(client_dev, 0) + " " + args + " " +
                                          sdr::test::Testbed::ip(1), env));
        int sst = -1;
        const std::string sout = server.finish(&sst);
        EXPECT_EQ(client.status, 0) << client.out;
        EXPECT_EQ(sst, 0) << sout;
        return {sout, client.out};
    }
    // The same with --json; returns the server's JSON report.
    std::string write_bw(const std::string& server_dev, const std::string& client_dev, const std::string& args,
                         const std::string& env)
    {
        const auto [sout, cout] = write_bw_outputs(server_dev, client_dev, args, env, true);
        const std::string sj = json_of(sout, "server"), cj = json_of(cout, "client");
        EXPECT_FALSE(sj.empty()) << sout;
        std::printf("%s -> %s %s %s\n  %s\n  %s\n", client_dev.c_str(), server_dev.c_str(), args.c_str(), env.c_str(),
                    cj.c_str(), sj.c_str());
        return sj;
    }
    void expect_byte_exact(const std::string& sj)
    {
        if (sj.empty()) return;
        EXPECT_GT(json_number(sj, "chunks_expected"), 0.0) << sj;
        EXPECT_EQ(json_number(sj, "chunks_received"), json_number(sj, "chunks_expected")) << sj;
        EXPECT_EQ(json_number(sj, "corrupt_chunks"), 0.0) << sj;
        // The first measured arrival to the last completion, on the server's own clock: within the
        // run's timeout (a verbs: server that measured nothing once reported the
        // steady clock's reading).
        EXPECT_GT(json_number(sj, "seconds"), 0.0) << sj;
        EXPECT_LT(json_number(sj, "seconds"), 120.0) << sj;
    }

    std::string dir_;
    std::unique_ptr<sdr::test::Testbed> bed_;
};

// A verbs: device keeps no NIC counters (sdr_stats.h lists none): sdr_write_bw says so on both
// sides, in text and as "counters":null in JSON, not zeros under an empty heading; so do the
// SDR_STATS_FILE dumps and sdr-stat reading them.
TEST_F(HalVerbs, VerbsSaysItsCountersAreNotAvailable)
{
    const auto [sout, cout] = write_bw_outputs("verbs", "verbs", "-c 2 -s 4K -n 8 -w 0", "SDR_STATS_FILE=" + dir_ + "/stats.%p",
                                               false);
    for (const std::string& out : {sout, cout}) {
        EXPECT_NE(out.find("\nNIC: counters not available on verbs:\n"), std::string::npos) << out;
        EXPECT_EQ(out.find("counters (sdr-stat names)"), std::string::npos) << out;
    }
    int dumps = 0;
    for (const auto& f : std::filesystem::directory_iterator(dir_)) {
        if (f.path().filename().string().rfind("stats.", 0) != 0) continue;
        dumps++;
        std::stringstream dump;
        dump << std::ifstream(f.path()).rdbuf();
        EXPECT_NE(dump.str().find("\n# counters not available on verbs:\n"), std::string::npos) << dump.str();
        Result stat = run(std::string(SDR_STAT) + " " + f.path().string());
        EXPECT_EQ(stat.status, 0) << stat.out;
        EXPECT_NE(stat.out.find(" (closed) counters not available on verbs:\n"), std::string::npos) << stat.out;
    }
    EXPECT_EQ(dumps, 2) << "one SDR_STATS_FILE per side";
    const std::string sj = write_bw("verbs", "verbs", "-c 2 -s 4K -n 8 -w 0", "");
    EXPECT_NE(sj.find("\"counters\":null"), std::string::npos) << sj;
    EXPECT_EQ(sj.find("\"rx_frames\""), std::string::npos) << sj;
}

// UC and RC (the default) transport QPs: every size byte-exact over 8 channels. UC does not
// recover a frame the receiving kernel's ring dropped, and a receiver slowed down (a sanitizer
// build, a loaded machine) drops at full speed, so the UC runs are paced to 1 Gbit/s.
TEST_F(HalVerbs, VerbsToVerbsByteExactUcAndRc)
{
    for (const char* transport : {"SDR_USE_UC_QP=1", "SDR_USE_UC_QP=0"})
        for (const char* args : {"-s 4K -n 64 -w 4 -q 8", "-s 1M -n 16 -w 2 -q 4", "-s 64M -n 2 -w 0 -q 2"}) {
            std::string a = std::string("-c 8 ") + args;
            if (std::string(transport) == "SDR_USE_UC_QP=1") a += " --rate_limit 1";
            expect_byte_exact(write_bw("verbs", "verbs", a, transport));
        }
}

// The portable root keys (SDR_VERBS_ROOT_KEYS=staging: zero-based staging regions registered
// with ibv_reg_mr_iova, each chunk copied into the receive's buffer before its bit is set), as on
// a device with neither the sdrdv extension nor mlx5's indirect mkeys: byte-exact over RC and UC,
// from a verbs: and from a raw: sender. Without the copy the buffers would stay as the server
// cleared them and every chunk would count as corrupt.
TEST_F(HalVerbs, StagedRootKeysByteExact)
{
    for (const char* transport : {"SDR_USE_UC_QP=0", "SDR_USE_UC_QP=1"})
        for (const char* args : {"-s 4K -n 64 -w 4 -q 8", "-s 1M -n 16 -w 2 -q 4"}) {
            std::string a = std::string("-c 8 ") + args;
            if (std::string(transport) == "SDR_USE_UC_QP=1") a += " --rate_limit 1";
            expect_byte_exact(write_bw("verbs", "verbs", a, std::string("SDR_VERBS_ROOT_KEYS=staging ") + transport));
        }
    expect_byte_exact(write_bw("verbs", "raw", "-c 8 -s 1M -n 16 -w 2 -q 4 --rate_limit 1",
                               "SDR_VERBS_ROOT_KEYS=staging SDR_USE_UC_QP=1"));
}

// The same frames from two stacks: host-core firmware over verbs sends, the emulated DPA (raw:)
// receives, byte-exact.
TEST_F(HalVerbs, VerbsSenderToRawReceiverByteExact)
{
    expect_byte_exact(write_bw("raw", "verbs", "-c 8 -s 1M -n 16 -w 2 -q 4", "SDR_USE_UC_QP=1"));
}

// The emulated DPA sends (its transport QPs start at PSN 0, as the verbs: QPs do), host-core
// firmware over verbs receives, byte-exact.
TEST_F(HalVerbs, RawSenderToVerbsReceiverByteExact)
{
    expect_byte_exact(write_bw("verbs", "raw", "-c 8 -s 1M -n 16 -w 2 -q 4", "SDR_USE_UC_QP=1"));
}

// SR and EC through the reliability layer (sdr_rel.h) between two verbs: devices over UC
// transport QPs (SDR's own), every frame either way lost with probability 1 % (SDR_RT_LOSS in
// both processes: data one way, control the other): each 5 MiB message delivered byte-exact
// (tests/rel_peer_app.c checks every byte). Not over RC: its go-back-N resends whole windows
// behind every loss, and ec-mds gives up (host/verbs/README.md, "Limits").
TEST_F(HalVerbs, ReliableSrAndEcUnderOnePercentLoss)
{
    const std::string schemes = "sr ec-mds:16,4", port = std::to_string(19900 + getpid() % 97);
    const std::string env = "SDR_USE_UC_QP=1 SDR_RT_LOSS=0.01 SDR_RT_SEED=";
    Child server(in(1, "timeout 60 " + std::string(SDR_REL_PEER_APP) + " server verbs:" + dev(1) + " " + port + " " +
                          schemes, env + "11"));
    Result client = run(in(0, "timeout 60 " + std::string(SDR_REL_PEER_APP) + " client verbs:" + dev(0) + " " + port +
                                  " " + sdr::test::Testbed::ip(1) + " " + schemes, env + "12"));
    int sst = -1;
    const std::string sout = server.finish(&sst);
    std::printf("server:\n%sclient:\n%s", sout.c_str(), client.out.c_str());
    EXPECT_EQ(client.status, 0) << client.out;
    EXPECT_EQ(sst, 0) << sout;
    EXPECT_NE(sout.find("sr: delivered byte-exact"), std::string::npos) << sout;
    EXPECT_NE(sout.find("ec-mds:16,4: delivered byte-exact"), std::string::npos) << sout;
}

}  // namespace
