// MPI on the verbs device (emu/verbs), unmodified: Debian's Open MPI 4.1 (pml ucx) and MPICH 4
// (ch4:ucx) run tests/mpi_check.c, an Allreduce and an 8 MiB Sendrecv around the ring compared
// byte for byte, with 2 and 4 ranks, one per namespace of the fixture (rdma_apps.hpp: four hosts
// on a bridge), over UCX's rc_verbs (UD as UCP's wireup transport) on raw: and xdp: ports; and 4
// ranks two per namespace, where the ranks of a host share its raw: device; Open MPI's two ranks
// also at 1 % loss both ways (SDR_RT_LOSS). The launcher starts each rank's daemon through an rsh
// agent that enters the rank's namespace and `sdr-rdma exec`, so the ranks see the device as a
// kernel one and get the interception library.
#include "rdma_apps.hpp"
#include "verbs_stats_util.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace sdr::test {
namespace {

constexpr const char* kUcx = "UCX_TLS=self,rc_verbs,ud_verbs:aux UCX_NET_DEVICES=sdr0:1";

// The rsh agent both launchers use for test t's port kind: [ssh options] HOST COMMAND..., HOST a
// namespace, entered with its device (`sdr-rdma exec`). Each host gets a TMPDIR of its own: the
// namespaces share /tmp and one hostname, so Open MPI's daemons would make the same session
// directory (/tmp/ompi.HOSTNAME.UID/jf.N/...) and write its hwloc topology file at once (mkdir
// "File exists", a segfault in hwloc).
std::string agent(const RdmaApps& t)
{
    const std::string state0 = t.state(0), states = state0.substr(0, state0.rfind('/'));
    const std::string path = t.log("mpi_agent");
    std::ofstream a(path);
    a << "#!/bin/sh\nwhile [ \"${1#-}\" != \"$1\" ]; do shift; done\nhost=$1; shift\n"
      << "mkdir -p " << states << "/\"$host.tmp\"\n"
      << "exec ip netns exec \"$host\" env SDR_RDMA_DIR=" << states << "/\"$host\" TMPDIR=" << states
      << "/\"$host.tmp\" SDR_RDMA_PROVIDER=" << SDR_VERBS_PROVIDER << " " << SDR_RDMA << " exec -- sh -c \"$*\"\n";
    a.close();
    EXPECT_EQ(chmod(path.c_str(), 0755), 0);
    return path;
}

// The first ranks / per_host namespaces, each with `suffix` (Open MPI's slot count).
std::string hosts(unsigned ranks, const std::string& suffix, unsigned per_host = 1)
{
    std::string h;
    for (unsigned r = 0; r < ranks / per_host; r++) h += (r ? "," : "") + RdmaApps::ns(static_cast<int>(r)) + suffix;
    return h;
}

// The job's output; it must say every rank agreed.
void expect_exact(const RdmaApps& t, const Result& r, unsigned ranks)
{
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "mpi_check: " + std::to_string(ranks) +
                                    " ranks: allreduce of 4096 elements and sendrecv of 8388608 bytes exact"))
        << r.out;
    std::printf("over %s: %s", t.GetParam(), r.out.c_str());
}

// Open MPI, per_host ranks in each namespace, sharing its device (raw: only,
// emu/verbs/README.md). `loss`: every rank's NIC drops that share of its frames (SDR_RT_LOSS)
// and reports its counters (SDR_VERBS_STATS_FILE, one file per rank), whose text it returns.
std::string open_mpi(const RdmaApps& t, unsigned ranks, unsigned per_host = 1, const char* loss = nullptr)
{
    const std::string stats = t.log("mpi_stats");
    const std::string lossy =
        loss ? std::string("-x SDR_RT_LOSS=") + loss + " -x SDR_VERBS_STATS_FILE=" + stats + ".%p " : "";
    // All namespaces share one hostname: direct routing and the OOB subnet keep the daemons apart.
    const std::string cmd = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 180 "
                            "mpirun.openmpi -np " +
                            std::to_string(ranks) + " --host " + hosts(ranks, ":" + std::to_string(per_host), per_host) +
                            " --mca plm_rsh_agent " + agent(t) +
                            " --mca routed direct --mca oob_tcp_if_include 10.77.0.0/24 --mca pml ucx " +
                            "--mca pml_ucx_devices any --mca btl ^vader,tcp,openib,uct -x UCX_TLS=self,rc_verbs," +
                            "ud_verbs:aux -x UCX_NET_DEVICES=sdr0:1 " + lossy + SDR_MPI_CHECK_OMPI;
    const uint64_t t0 = mono_ms();
    expect_exact(t, run(RdmaApps::at(0, cmd)), ranks);
    std::printf("%u ranks%s%s over %s: %.1f s\n", ranks, loss ? " at SDR_RT_LOSS=" : "", loss ? loss : "",
                t.GetParam(), (mono_ms() - t0) / 1000.0);
    return loss ? run("cat " + stats + ".*").out : std::string();
}

void mpich(const RdmaApps& t, unsigned ranks)
{
    // Hydra's proxies call back to the launcher's address on the testbed's interface.
    const std::string cmd = "timeout 180 mpiexec.mpich -launcher ssh -launcher-exec " + agent(t) + " -iface " +
                            RdmaApps::ns(0) + " -hosts " + hosts(ranks, "") + " -n " + std::to_string(ranks) +
                            " -ppn 1 env " + kUcx + " " + SDR_MPI_CHECK_MPICH;
    expect_exact(t, run(RdmaApps::at(0, cmd)), ranks);
}

// Each test skips where its MPI is not installed.
#define SDR_NEEDS(prog, package) \
    if (run("command -v " prog).status != 0) GTEST_SKIP() << package " (" prog ") is not installed"
#define SDR_NEEDS_OPEN_MPI SDR_NEEDS("mpirun.openmpi", "Open MPI (openmpi-bin)")
#define SDR_NEEDS_MPICH SDR_NEEDS("mpiexec.mpich", "MPICH (mpich)")

TEST_P(RdmaApps, OpenMpiTwoRanks)
{
    SDR_NEEDS_OPEN_MPI;
    open_mpi(*this, 2);
}
TEST_P(RdmaApps, OpenMpiFourRanks)
{
    SDR_NEEDS_OPEN_MPI;
    open_mpi(*this, 4);
}
// Two ranks per namespace: the ranks of one host reach each other through their shared device.
TEST_P(RdmaApps, OpenMpiTwoRanksPerHost)
{
    SDR_NEEDS_OPEN_MPI;
    if (xdp()) GTEST_SKIP() << "an xdp: device takes one process";
    open_mpi(*this, 4, 2);
}
// At 1 % loss both ways: RC over UCX's rc_verbs recovers every drop, so the Allreduce and the
// 8 MiB Sendrecv (UCX's rendezvous, zero copy) are still exact; the ranks' counters show the
// link dropped frames and RC sent packets again.
TEST_P(RdmaApps, OpenMpiTwoRanksAtOnePercentLoss)
{
    SDR_NEEDS_OPEN_MPI;
    expect_loss_recovered(open_mpi(*this, 2, 1, "0.01"), std::string("Open MPI at 1 % loss over ") + GetParam());
}
TEST_P(RdmaApps, MpichTwoRanks)
{
    SDR_NEEDS_MPICH;
    mpich(*this, 2);
}
TEST_P(RdmaApps, MpichFourRanks)
{
    SDR_NEEDS_MPICH;
    mpich(*this, 4);
}

}  // namespace
}  // namespace sdr::test
