// The emulated NIC as an RDMA device for Debian's unmodified libibverbs (emu/verbs): sdr-rdma
// creates a device on a veth of a throwaway namespace, ibv_devices / ibv_devinfo -v (package
// ibverbs-utils) list it with the interface's attributes, tests/verbs_app.c (linked only
// against -libverbs) opens and drives it, and del removes exactly what add made. Bad input is
// refused with exit status 2.
#include "child_util.hpp"
#include "netns_util.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>

namespace {

namespace fs = std::filesystem;
using sdr::test::Child;

using sdr::test::Result;
using sdr::test::run;

// A state directory of its own, removed at the end (empty once del did its job).
struct StateDir {
    std::string path;
    StateDir()
    {
        char tmpl[] = "/tmp/sdr-verbs-test-XXXXXX";
        path = mkdtemp(tmpl) ? tmpl : "";
    }
    ~StateDir()
    {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string env() const { return "SDR_RDMA_DIR=" + path + " "; }
};

std::string sdr_rdma() { return SDR_RDMA; }

// The node GUID sysfs prints for a MAC: EUI-64, universal/local bit flipped.
std::string eui64(const std::string& mac)
{
    unsigned m[6];
    if (std::sscanf(mac.c_str(), "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6) return "?";
    char s[32];
    std::snprintf(s, sizeof s, "%02x%02x:%02xff:fe%02x:%02x%02x", m[0] ^ 2, m[1], m[2], m[3], m[4], m[5]);
    return s;
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// Bad arguments: exit 2, a message naming the problem, nothing written.
TEST(SdrRdma, RefusesBadInput)
{
    StateDir dir;
    const std::string cmd = dir.env() + sdr_rdma();
    struct Case {
        std::string args, message;
    } cases[] = {
        {"link add 0bad netdev lo", "device name '0bad'"},
        {"link add sdr-x netdev lo", "device name 'sdr-x'"},
        {"link add sdrt0 netdev no-such-if0", "no interface 'no-such-if0' in this network namespace"},
        {"link add sdrt0 netdev lo", "'lo' is not an Ethernet interface"},
        {"link add sdrt0 netdev lo ib", "port kind 'ib'"},
        {"link add sdrt0 lo", "usage: sdr-rdma link add NAME netdev IF"},
        {"link del sdrt0", "no device 'sdrt0'"},
        {"link show sdrt0", "no device 'sdrt0'"},
        {"link frob", "unknown 'link frob'"},
        {"frob", "unknown command 'frob'"},
    };
    for (const Case& c : cases) {
        Result r = run(cmd + " " + c.args);
        EXPECT_EQ(r.status, 2) << c.args << ": " << r.out;
        EXPECT_TRUE(contains(r.out, c.message)) << c.args << ": " << r.out;
    }
    EXPECT_TRUE(fs::is_empty(dir.path)) << "a refused command wrote into " << dir.path;
    Result show = run(cmd + " link show");
    EXPECT_EQ(show.status, 0);
    EXPECT_EQ(show.out, "");
}

class VerbsDevice : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (std::string why = sdr::test::netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
        if (run("command -v ibv_devinfo").status != 0)
            GTEST_SKIP() << "ibverbs-utils (ibv_devices, ibv_devinfo) is not installed";
        bed_ = std::make_unique<sdr::test::Testbed>("vrb");
        ASSERT_TRUE(bed_->ok()) << "tools/sdr-netns could not build the testbed";  // as root: a failure
    }
    // A command inside namespace `side` with the state directory and the two exports.
    std::string in(int side, const std::string& cmd) const
    {
        return "ip netns exec " + bed_->ns(side) + " env " + dir_.env() + "SYSFS_PATH=" + dir_.path +
               " RDMAV_DRIVERS=" + SDR_VERBS_PROVIDER + " " + cmd;
    }
    std::string mac(int side) const
    {
        Result r = run("ip netns exec " + bed_->ns(side) + " cat /sys/class/net/" + bed_->ns(side) + "/address");
        return r.out.substr(0, r.out.find('\n'));
    }

    std::unique_ptr<sdr::test::Testbed> bed_;
    StateDir dir_;
};

TEST_F(VerbsDevice, AddListOpenDelRoundTrip)
{
    const std::string a = bed_->ns(0), b = bed_->ns(1);
    // add: the two exports, the device on uverbsN.
    Result add = run(in(0, sdr_rdma() + " link add sdrt0 netdev " + a + " raw"));
    ASSERT_EQ(add.status, 0) << add.out;
    EXPECT_TRUE(contains(add.out, "export SYSFS_PATH=" + dir_.path + "\n")) << add.out;
    EXPECT_TRUE(contains(add.out, std::string("export RDMAV_DRIVERS=") + SDR_VERBS_PROVIDER + "\n")) << add.out;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(add.out, m, std::regex("sdrt0: (uverbs[0-9]+) on " + a + " \\(raw\\)"))) << add.out;
    const std::string node = "/dev/infiniband/" + m[1].str();
    struct stat sb{};
    ASSERT_EQ(stat(node.c_str(), &sb), 0) << node;
    EXPECT_TRUE(S_ISCHR(sb.st_mode));
    EXPECT_EQ(major(sb.st_rdev), 1u);
    EXPECT_EQ(minor(sb.st_rdev), 3u);
    EXPECT_EQ(sb.st_mode & 0777, 0666u);
    // Idempotent: the same add again changes nothing; another interface for the name is refused.
    Result again = run(in(0, sdr_rdma() + " link add sdrt0 netdev " + a + " raw"));
    EXPECT_EQ(again.status, 0) << again.out;
    EXPECT_TRUE(contains(again.out, "sdrt0: exists on " + a + " (raw)")) << again.out;
    Result other = run(in(0, sdr_rdma() + " link add sdrt0 netdev " + a + " xdp"));
    EXPECT_EQ(other.status, 2) << other.out;
    // A second device, on the other namespace's interface, over AF_XDP.
    Result add_b = run(in(1, sdr_rdma() + " link add sdrt1 netdev " + b + " xdp"));
    ASSERT_EQ(add_b.status, 0) << add_b.out;

    // show, from namespace a: sdrt1's interface is not there.
    Result show = run(in(0, sdr_rdma() + " link show"));
    EXPECT_EQ(show.status, 0);
    EXPECT_TRUE(std::regex_search(show.out, std::regex("sdrt0: uverbs[0-9]+ netdev " + a + " port raw gid ::ffff:10\\.77\\.0\\.1 state ACTIVE\n")))
        << show.out;
    EXPECT_TRUE(std::regex_search(show.out, std::regex("sdrt1: uverbs[0-9]+ netdev " + b + " port xdp gid ::ffff:10\\.77\\.0\\.2 state ABSENT")))
        << show.out;

    // ibv_devices lists both with their GUIDs (16 hex digits).
    const std::string guid_a = eui64(mac(0)), guid_b = eui64(mac(1));
    auto plain = [](std::string g) { return std::regex_replace(g, std::regex(":"), ""); };
    Result devices = run(in(0, "ibv_devices"));
    EXPECT_EQ(devices.status, 0) << devices.out;
    EXPECT_TRUE(std::regex_search(devices.out, std::regex("sdrt0\\s+" + plain(guid_a)))) << devices.out;
    EXPECT_TRUE(std::regex_search(devices.out, std::regex("sdrt1\\s+" + plain(guid_b)))) << devices.out;

    // ibv_devinfo -v: the attributes the interface gives (MTU 4200: 4096 fits with 64 bytes of headers).
    Result info = run(in(0, "ibv_devinfo -v -d sdrt0"));
    ASSERT_EQ(info.status, 0) << info.out;
    for (const std::string& re : std::initializer_list<std::string>{
             "hca_id:\\s+sdrt0\n",
             "node_guid:\\s+" + guid_a + "\n",
             "phys_port_cnt:\\s+1\n",
             "state:\\s+PORT_ACTIVE \\(4\\)\n",
             "active_mtu:\\s+4096 \\(5\\)\n",
             "link_layer:\\s+Ethernet\n",
             "phys_state:\\s+LINK_UP \\(5\\)\n",
             "GID\\[  0\\]:\\s+::ffff:10\\.77\\.0\\.1, RoCE v2\n",
         })
        EXPECT_TRUE(std::regex_search(info.out, std::regex(re))) << re << "\n" << info.out;
    // The interface decides the port: sdrt1 seen from namespace b is up, from a it is down.
    Result info_b = run(in(1, "ibv_devinfo -d sdrt1"));
    EXPECT_TRUE(std::regex_search(info_b.out, std::regex("state:\\s+PORT_ACTIVE \\(4\\)\n"))) << info_b.out;
    Result info_b_from_a = run(in(0, "ibv_devinfo -d sdrt1"));
    EXPECT_TRUE(std::regex_search(info_b_from_a.out, std::regex("state:\\s+PORT_DOWN \\(1\\)\n"))) << info_b_from_a.out;
    // A smaller MTU moves the port's: 1500 - 64 leaves 1024.
    ASSERT_EQ(run("ip -n " + a + " link set dev " + a + " mtu 1500").status, 0);
    Result info_1500 = run(in(0, "ibv_devinfo -d sdrt0"));
    EXPECT_TRUE(std::regex_search(info_1500.out, std::regex("active_mtu:\\s+1024 \\(3\\)\n"))) << info_1500.out;

    // Our own verbs program, linked only against -libverbs.
    Result app = run(in(0, std::string(SDR_VERBS_APP) + " sdrt0"));
    EXPECT_EQ(app.status, 0) << app.out;
    for (const std::string& line : std::initializer_list<std::string>{
             "node_guid=" + guid_a + "\n", "port_state=active link_layer=2 active_mtu=3", "gid0=::ffff:10.77.0.1\n",
             "pkey0=0xffff\n", "channel=blocks\n", "create_qp=EOPNOTSUPP\n", "verbs_app: ok\n"})
        EXPECT_TRUE(contains(app.out, line)) << line << "\n" << app.out;

    // del removes exactly what add made: the device, its uverbs entry and node; with the last
    // device the skeleton. The state directory existed before, so it stays, empty.
    Result del = run(dir_.env() + sdr_rdma() + " link del sdrt0");
    EXPECT_EQ(del.status, 0) << del.out;
    EXPECT_FALSE(fs::exists(node)) << node;
    EXPECT_FALSE(fs::exists(dir_.path + "/class/infiniband/sdrt0"));
    Result devices_after = run(in(0, "ibv_devices"));
    EXPECT_FALSE(contains(devices_after.out, "sdrt0")) << devices_after.out;
    EXPECT_TRUE(contains(devices_after.out, "sdrt1")) << devices_after.out;
    Result del_b = run(dir_.env() + sdr_rdma() + " link del sdrt1");
    EXPECT_EQ(del_b.status, 0) << del_b.out;
    EXPECT_TRUE(fs::is_empty(dir_.path)) << "left behind in " << dir_.path;
    Result show_after = run(dir_.env() + sdr_rdma() + " link show");
    EXPECT_EQ(show_after.out, "");
}

// sdr-rdma exec (as root): the program sees the devices at /sys/class/infiniband as kernel ones
// (device/net/IF, the GID table's types), every other class still there, a node per device,
// SYSFS_PATH=/sys; --dev shows only the one named. As user nobody the same, under nobody's own
// uid. Inside `unshare -Urnm` as nobody, sdr-rdma and a program moving data work with a raw:
// port, and an xdp: port fails with the reason.
TEST_F(VerbsDevice, ExecShowsDevicesAsKernelOnes)
{
    const std::string a = bed_->ns(0);
    ASSERT_EQ(run(in(0, sdr_rdma() + " link add sdrt0 netdev " + a + " raw")).status, 0);
    ASSERT_EQ(run(in(0, sdr_rdma() + " link add sdrt2 netdev " + a + " xdp")).status, 0);
    const std::string look =
        " -- sh -c 'ls /sys/class/infiniband; ls /sys/class/infiniband/sdrt0/device/net; "
        "cat /sys/class/infiniband/sdrt0/ports/1/gid_attrs/types/3; ls /sys/class/net | grep -c " + a +
        "; echo SYSFS_PATH=$SYSFS_PATH; id -u; ibv_devices'";
    const std::string exec = "ip netns exec " + a + " env " + dir_.env() + sdr_rdma() + " exec";
    Result all = run(exec + look);
    EXPECT_EQ(all.status, 0) << all.out;
    for (const std::string& want : {std::string("sdrt0\nsdrt2\n"), a + "\nRoCE v2\n1\nSYSFS_PATH=/sys\n0\n"})
        EXPECT_TRUE(contains(all.out, want)) << want << "\n" << all.out;
    EXPECT_TRUE(contains(all.out, "    sdrt0") && contains(all.out, "    sdrt2")) << all.out;
    Result one = run(exec + " --dev sdrt0" + look);
    EXPECT_EQ(one.status, 0) << one.out;
    EXPECT_TRUE(contains(one.out, "    sdrt0") && !contains(one.out, "sdrt2")) << one.out;
    Result bad = run(exec + " --dev sdrt7 -- true");
    EXPECT_EQ(bad.status, 2) << bad.out;

    // Unprivileged, as user nobody. The build tree may be out of nobody's reach (a CI clone in a
    // private temporary directory), so what nobody runs is copied to a directory anyone can read:
    // sdr-rdma, the provider with the interception library beside it, our test program.
    fs::permissions(dir_.path, fs::perms::others_read | fs::perms::others_exec, fs::perm_options::add);
    if (run("su nobody -s /bin/sh -c 'unshare -Ur true'").status != 0)
        GTEST_SKIP() << "user nobody cannot create a user namespace (kernel.unprivileged_userns_clone?)";
    char tmpl[] = "/tmp/sdr-exec-nobody-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string pub = tmpl;
    const std::string provider = SDR_VERBS_PROVIDER, libdir = provider.substr(0, provider.rfind('/'));
    ASSERT_EQ(run("chmod 755 " + pub + " && cp " + sdr_rdma() + " " + pub + "/sdr-rdma && cp " + provider +
                  "-rdmav34.so " + libdir + "/libsdr_rdma_preload.so " + SDR_VERBS_COMPAT + " " + pub + "/")
                  .status,
              0);
    const std::string user_rdma = "SDR_RDMA_PROVIDER=" + pub + provider.substr(provider.rfind('/')) + " " + pub + "/sdr-rdma";
    const std::string user_compat = pub + "/" + fs::path(SDR_VERBS_COMPAT).filename().string();
    Result nobody = run("ip netns exec " + a + " su nobody -s /bin/sh -c \"" + dir_.env() + user_rdma +
                        " exec --dev sdrt0 -- sh -c 'id -u; ibv_devinfo -d sdrt0'\"");
    EXPECT_EQ(nobody.status, 0) << nobody.out;
    EXPECT_TRUE(contains(nobody.out, "65534\nhca_id:\tsdrt0\n")) << nobody.out;

    const std::string script = pub + "/urnm.sh";
    {
        std::ofstream f(script);
        f << "ip link add v0 type veth peer name v1 && ip addr add 10.9.0.1/24 dev v0 &&\n"
             "ip addr add 10.9.0.2/24 dev v1 && ip link set v0 up && ip link set v1 up || exit 3\n"
             "export SDR_RDMA_DIR=$(mktemp -d)\n"
          << user_rdma << " link add sdru netdev v0 raw >/dev/null || exit 4\n"
          << user_rdma << " link add sdrx netdev v1 xdp >/dev/null || exit 5\n"
          << user_rdma << " exec --dev sdru -- " << user_compat << " sdru | tail -n 1\n"
          << user_rdma << " exec --dev sdrx -- " << user_compat << " sdrx 2>&1 | grep XSKMAP\n"
          << "rm -rf \"$SDR_RDMA_DIR\"\n";
    }
    Result urnm = run("su nobody -s /bin/sh -c 'unshare -Urnm sh " + script + "'");
    EXPECT_EQ(urnm.status, 0) << urnm.out;
    EXPECT_TRUE(contains(urnm.out, "verbs_compat: ok\n")) << urnm.out;
    EXPECT_TRUE(contains(urnm.out, "creating the XSKMAP: Operation not permitted")) << urnm.out;
    for (const char* d : {"sdrt0", "sdrt2"}) run(dir_.env() + sdr_rdma() + " link del " + d);
    run("rm -rf " + pub);
}

}  // namespace
