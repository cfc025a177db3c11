// MPI on the verbs device (emu/verbs), unmodified: Debian's Open MPI 4.1 (pml ucx) and MPICH 4
// (ch4:ucx) run tests/mpi_check.c, an Allreduce and an 8 MiB Sendrecv around the ring compared
// byte for byte, with 2 and 4 ranks, one per network namespace (tools/sdr-netns --hosts 4: four
// hosts on a bridge), over UCX's rc_verbs (UD as UCP's wireup transport) on raw: and xdp: ports;
// and 4 ranks two per namespace, where the ranks of a host share its raw: device; Open MPI's two
// ranks also at 1 % loss both ways (SDR_RT_LOSS).
// Each namespace's device is sdr0, in a state directory of its own; the launcher starts each
// rank's daemon through an rsh agent that enters the rank's namespace and `sdr-rdma exec`, so
// the ranks see the device as a kernel one and get the interception library.
#include "child_util.hpp"
#include "netns_util.hpp"
#include "verbs_stats_util.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

namespace {

using sdr::test::Child;

using sdr::test::Result;
using sdr::test::run;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

uint64_t mono_ms()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1'000'000;
}

constexpr unsigned kHosts = 4;
constexpr const char* kUcx = "UCX_TLS=self,rc_verbs,ud_verbs:aux UCX_NET_DEVICES=sdr0:1";

class Mpi : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override
    {
        if (std::string why = sdr::test::netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
        const std::string provider = SDR_VERBS_PROVIDER;
        if (access((provider.substr(0, provider.rfind('/')) + "/libsdr_rdma_preload.so").c_str(), R_OK) != 0)
            GTEST_SKIP() << "the interception library is not built";
        char tmpl[] = "/tmp/sdr-mpi-test-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        bed_ = std::make_unique<sdr::test::Testbed>("mpi", 4200, false, kHosts);
        ASSERT_TRUE(bed_->ok()) << "tools/sdr-netns could not build the testbed";  // as root: a failure
        for (unsigned h = 0; h < kHosts; h++) {
            Result add = run("ip netns exec " + bed_->ns(static_cast<int>(h)) + " env SDR_RDMA_DIR=" + dir_ + "/" +
                             bed_->ns(static_cast<int>(h)) + " " + SDR_RDMA + " link add sdr0 netdev " +
                             bed_->ns(static_cast<int>(h)) + " " + GetParam());
            ASSERT_EQ(add.status, 0) << add.out;
        }
        // The rsh agent both launchers use: [ssh options] HOST COMMAND..., HOST a namespace. Each
        // host gets a TMPDIR of its own: the namespaces share /tmp and one hostname, so Open MPI's
        // daemons would make the same session directory (/tmp/ompi.HOSTNAME.UID/jf.N/...) and
        // write its hwloc topology file at once (mkdir "File exists", a segfault in hwloc).
        agent_ = dir_ + "/agent";
        std::ofstream a(agent_);
        a << "#!/bin/sh\nwhile [ \"${1#-}\" != \"$1\" ]; do shift; done\nhost=$1; shift\n"
          << "mkdir -p " << dir_ << "/\"$host.tmp\"\n"
          << "exec ip netns exec \"$host\" env SDR_RDMA_DIR=" << dir_ << "/\"$host\" TMPDIR=" << dir_
          << "/\"$host.tmp\" SDR_RDMA_PROVIDER=" << provider << " " << SDR_RDMA << " exec -- sh -c \"$*\"\n";
        a.close();
        ASSERT_EQ(chmod(agent_.c_str(), 0755), 0);
    }
    void TearDown() override
    {
        if (dir_.empty()) return;
        for (unsigned h = 0; bed_ && h < kHosts; h++)
            run("SDR_RDMA_DIR=" + dir_ + "/" + bed_->ns(static_cast<int>(h)) + " " + SDR_RDMA + " link del sdr0");
        run("rm -rf " + dir_);
    }
    // The first ranks / per_host namespaces, each with `suffix` (Open MPI's slot count).
    std::string hosts(unsigned ranks, const std::string& suffix, unsigned per_host = 1) const
    {
        std::string h;
        for (unsigned r = 0; r < ranks / per_host; r++) h += (r ? "," : "") + bed_->ns(static_cast<int>(r)) + suffix;
        return h;
    }
    // The job's output; it must say every rank agreed.
    void expect_exact(const Result& r, unsigned ranks) const
    {
        EXPECT_EQ(r.status, 0) << r.out;
        EXPECT_TRUE(contains(r.out, "mpi_check: " + std::to_string(ranks) +
                                        " ranks: allreduce of 4096 elements and sendrecv of 8388608 bytes exact"))
            << r.out;
        std::printf("over %s: %s", GetParam(), r.out.c_str());
    }
    // per_host ranks in each namespace share its device (raw: only, emu/verbs/README.md).
    // `loss`: every rank's NIC drops that share of its frames (SDR_RT_LOSS) and reports its
    // counters (SDR_STATS_FILE, one file per rank) into stats_.
    void open_mpi(unsigned ranks, unsigned per_host = 1, const char* loss = nullptr)
    {
        if (run("command -v mpirun.openmpi").status != 0) GTEST_SKIP() << "Open MPI (openmpi-bin) is not installed";
        const std::string lossy =
            loss ? std::string("-x SDR_RT_LOSS=") + loss + " -x SDR_STATS_FILE=" + dir_ + "/stats.%p " : "";
        // All namespaces share one hostname: direct routing and the OOB subnet keep the daemons apart.
        const std::string cmd = "ip netns exec " + bed_->ns(0) + " env OMPI_ALLOW_RUN_AS_ROOT=1 " +
                                "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 180 mpirun.openmpi -np " +
                                std::to_string(ranks) + " --host " + hosts(ranks, ":" + std::to_string(per_host), per_host) +
                                " --mca plm_rsh_agent " +
                                agent_ + " --mca routed direct --mca oob_tcp_if_include 10.77.0.0/24 --mca pml ucx " +
                                "--mca pml_ucx_devices any --mca btl ^vader,tcp,openib,uct -x UCX_TLS=self,rc_verbs," +
                                "ud_verbs:aux -x UCX_NET_DEVICES=sdr0:1 " + lossy + SDR_MPI_CHECK_OMPI;
        const uint64_t t0 = mono_ms();
        expect_exact(run(cmd), ranks);
        std::printf("%u ranks%s%s over %s: %.1f s\n", ranks, loss ? " at SDR_RT_LOSS=" : "", loss ? loss : "",
                    GetParam(), (mono_ms() - t0) / 1000.0);
        if (loss) stats_ = run("cat " + dir_ + "/stats.*").out;
    }
    void mpich(unsigned ranks)
    {
        if (run("command -v mpiexec.mpich").status != 0) GTEST_SKIP() << "MPICH (mpich) is not installed";
        // Hydra's proxies call back to the launcher's address on the testbed's interface.
        const std::string cmd = "ip netns exec " + bed_->ns(0) + " timeout 180 mpiexec.mpich -launcher ssh " +
                                "-launcher-exec " + agent_ + " -iface " + bed_->ns(0) + " -hosts " + hosts(ranks, "") +
                                " -n " + std::to_string(ranks) + " -ppn 1 env " + kUcx + " " + SDR_MPI_CHECK_MPICH;
        expect_exact(run(cmd), ranks);
    }

    std::unique_ptr<sdr::test::Testbed> bed_;
    std::string dir_, agent_;
    std::string stats_;  // the ranks' counters of a lossy run
};

TEST_P(Mpi, OpenMpiTwoRanks) { open_mpi(2); }
TEST_P(Mpi, OpenMpiFourRanks) { open_mpi(4); }
// Two ranks per namespace: the ranks of one host reach each other through their shared device.
TEST_P(Mpi, OpenMpiTwoRanksPerHost)
{
    if (std::string(GetParam()) == "xdp") GTEST_SKIP() << "an xdp: device takes one process";
    open_mpi(4, 2);
}
// At 1 % loss both ways: RC over UCX's rc_verbs recovers every drop, so the Allreduce and the
// 8 MiB Sendrecv (UCX's rendezvous, zero copy) are still exact; the ranks' counters show the
// link dropped frames and RC sent packets again.
TEST_P(Mpi, OpenMpiTwoRanksAtOnePercentLoss)
{
    open_mpi(2, 1, "0.01");
    if (IsSkipped()) return;
    const std::string& stats = stats_;
    const uint64_t dropped = sdr::test::verbs_counter(stats, "shaper.dropped");
    const uint64_t resent = sdr::test::verbs_counter(stats, "verbs.retransmits");
    EXPECT_GT(dropped, 0u) << stats;
    EXPECT_GT(resent, 0u) << stats;
    std::printf("over %s: %llu frames dropped, %llu packets resent, %llu NAKs, %llu timeouts\n", GetParam(),
                static_cast<unsigned long long>(dropped), static_cast<unsigned long long>(resent),
                static_cast<unsigned long long>(sdr::test::verbs_counter(stats, "verbs.rx_naks")),
                static_cast<unsigned long long>(sdr::test::verbs_counter(stats, "verbs.timeouts")));
}
TEST_P(Mpi, MpichTwoRanks) { mpich(2); }
TEST_P(Mpi, MpichFourRanks) { mpich(4); }

INSTANTIATE_TEST_SUITE_P(Port, Mpi, ::testing::Values("raw", "xdp"), [](const auto& i) { return std::string(i.param); });

}  // namespace
