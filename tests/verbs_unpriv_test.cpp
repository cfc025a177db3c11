// The verbs testbed with no root at all, as CI on a hosted runner has it: tests/verbs_unpriv.sh,
// run as user nobody (as root; as anyone else, as that user), makes two network namespaces on a
// veth in a user namespace of its own, a raw: device in each, and moves data between them with
// unmodified programs through `sdr-rdma exec`: perftest's ib_write_bw (sdr-netns' holder, the
// commands the top-level README gives CI) and librdmacm's rping with validated data (all inside
// `unshare -Urnm`). Skipped where the kernel allows no unprivileged user namespace.
#include "child_util.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>

namespace {

using sdr::test::Result;
using sdr::test::run;

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

size_t count(const std::string& s, const std::regex& re)
{
    return static_cast<size_t>(std::distance(std::sregex_iterator(s.begin(), s.end(), re), std::sregex_iterator()));
}

// A command as the unprivileged user: nobody when we are root, else ourselves.
std::string as_user(const std::string& cmd)
{
    if (geteuid() != 0) return "cd / && " + cmd;
    return "cd / && su nobody -s /bin/sh -c '" + cmd + "'";
}

// Why user namespaces cannot be had here, or empty.
std::string userns_unavailable()
{
    if (run(as_user("unshare -Urnm true")).status == 0) return "";
    std::string why = "the unprivileged user cannot create a user namespace (unshare -Urnm failed";
    std::ifstream clone("/proc/sys/kernel/unprivileged_userns_clone");
    if (int v = -1; clone >> v) why += "; kernel.unprivileged_userns_clone = " + std::to_string(v);
    std::ifstream apparmor("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
    if (int v = -1; apparmor >> v) why += "; kernel.apparmor_restrict_unprivileged_userns = " + std::to_string(v);
    return why + ")";
}

TEST(VerbsUnprivileged, TwoNamespacesTransferAsNobody)
{
    if (run("command -v ib_write_bw && command -v rping && command -v ss && command -v nsenter").status != 0)
        GTEST_SKIP() << "needs perftest (ib_write_bw), rdmacm-utils (rping), iproute2 (ss), util-linux (nsenter)";
    if (std::string why = userns_unavailable(); !why.empty()) GTEST_SKIP() << why;

    // What the user runs, copied where anyone can read it (a CI clone may be private).
    char tmpl[] = "/tmp/sdr-unpriv-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string pub = tmpl, provider = SDR_VERBS_PROVIDER, src = SDR_SOURCE_DIR;
    const std::string libdir = provider.substr(0, provider.rfind('/'));
    ASSERT_EQ(run("chmod 755 " + pub + " && cp " + src + "/tools/sdr-netns " + src + "/tests/verbs_unpriv.sh " +
                  SDR_RDMA + " " + provider + "-rdmav34.so " + libdir + "/libsdr_rdma_preload.so " + pub + "/")
                  .status,
              0);

    const std::string prefix = "unp" + std::to_string(getpid() % 100000);
    Result r = run(as_user("bash " + pub + "/verbs_unpriv.sh " + pub + " " + prefix));
    run("rm -rf " + pub);
    EXPECT_EQ(r.status, 0) << r.out;

    // ib_write_bw: both sides exit 0 and report the 1000 writes of 64 KiB.
    EXPECT_TRUE(contains(r.out, "ib_write_bw: client=0 server=0\n")) << r.out;
    EXPECT_EQ(count(r.out, std::regex("\n 65536 +1000 +[0-9.]+ +[0-9.]+")), 2u) << r.out;
    EXPECT_TRUE(contains(r.out, "Device         : sdrua")) << r.out;
    // rping: ten pings, each one's data checked by both sides (-V), and a clean disconnect.
    EXPECT_TRUE(contains(r.out, "rping: client=0 server=0\n")) << r.out;
    EXPECT_EQ(count(r.out, std::regex("ping data: rdma-ping-[0-9]+: ")), 10u) << r.out;
    EXPECT_TRUE(contains(r.out, "event DISCONNECTED")) << r.out;
    EXPECT_FALSE(contains(r.out, "never ready")) << r.out;
}

}  // namespace
