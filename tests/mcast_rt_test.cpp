// RoCEv2 multicast in real time: four network namespaces on a Linux bridge with multicast
// snooping off (it floods a group's frames to every port but the sender's), one verbs device
// per namespace over raw: (AF_PACKET) and xdp: (AF_XDP), and tests/verbs_mcast.c through
// unmodified libibverbs. a sends 32 datagrams to 239.1.1.1; b and c are attached and take each
// exactly once, GRH and payload checked; d is attached to 239.1.1.2 only and takes none of
// them (only the end marker sent to its group afterwards).
#include "child_util.hpp"
#include "netns_util.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

namespace {

using sdr::test::Child;

constexpr int kHosts = 4;
constexpr const char* kGroup = "239.1.1.1";
constexpr const char* kOtherGroup = "239.1.1.2";

int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

uint64_t mono_ms()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1'000'000;
}

// PREFIX-br holds the bridge; PREFIX-a..d each a veth into it, 10.78.0.1..4/24. The prefix
// carries the process id, so parallel runs never meet.
class BridgeBed {
public:
    BridgeBed() : p_("mc" + std::to_string(getpid() % 100000))
    {
        down();
        ok_ = sh("ip netns add " + p_ + "-br") == 0 &&
              sh("ip -n " + p_ + "-br link add " + p_ + "br mtu 4200 type bridge mcast_snooping 0") == 0;
        for (int i = 0; ok_ && i < kHosts; i++) {
            const std::string h = ns(i), port = p_ + "p" + std::to_string(i);
            ok_ = sh("ip netns add " + h) == 0 && sh("ip link add " + h + " mtu 4200 type veth peer name " + port + " mtu 4200") == 0 &&
                  sh("ip link set " + h + " netns " + h) == 0 && sh("ip link set " + port + " netns " + p_ + "-br") == 0 &&
                  sh("ip -n " + p_ + "-br link set " + port + " master " + p_ + "br up") == 0 &&
                  sh("ip -n " + h + " addr add " + ip(i) + "/24 dev " + h) == 0 &&
                  sh("ip -n " + h + " link set lo up") == 0 && sh("ip -n " + h + " link set " + h + " up") == 0;
        }
        ok_ = ok_ && sh("ip -n " + p_ + "-br link set " + p_ + "br up") == 0;
    }
    ~BridgeBed() { down(); }
    BridgeBed(const BridgeBed&) = delete;
    BridgeBed& operator=(const BridgeBed&) = delete;
    bool ok() const { return ok_; }
    std::string ns(int i) const { return p_ + "-" + static_cast<char>('a' + i); }
    static std::string ip(int i) { return "10.78.0." + std::to_string(i + 1); }

private:
    void down()
    {
        for (int i = 0; i < kHosts; i++) sh("ip netns del " + ns(i));
        sh("ip netns del " + p_ + "-br");
    }
    std::string p_;
    bool ok_ = false;
};

class McastRt : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override
    {
        if (std::string why = sdr::test::netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
        char tmpl[] = "/tmp/sdr-mcast-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        bed_ = std::make_unique<BridgeBed>();
        ASSERT_TRUE(bed_->ok()) << "could not build the bridge of namespaces";  // as root: a failure
        for (int i = 0; i < kHosts; i++) {
            Child add(in(i, std::string(SDR_RDMA) + " link add " + dev(i) + " netdev " + bed_->ns(i) + " " + GetParam()));
            int status = -1;
            const std::string out = add.finish(&status);
            ASSERT_EQ(status, 0) << out;
        }
    }
    void TearDown() override
    {
        if (dir_.empty()) return;
        for (int i = 0; i < kHosts; i++) sh("SDR_RDMA_DIR=" + dir_ + " " + SDR_RDMA + " link del " + dev(i));
        sh("rm -rf " + dir_);
    }
    static std::string dev(int i) { return "sdrm" + std::to_string(i); }
    std::string in(int i, const std::string& cmd) const
    {
        return "ip netns exec " + bed_->ns(i) + " env SDR_RDMA_DIR=" + dir_ + " SYSFS_PATH=" + dir_ +
               " RDMAV_DRIVERS=" + SDR_VERBS_PROVIDER + " " + cmd;
    }
    // Waits (bounded) until a receiver created its ready file: attached, receives posted.
    static bool appeared(const std::string& path)
    {
        struct stat st;
        for (uint64_t deadline = mono_ms() + 30'000; mono_ms() < deadline;) {
            if (stat(path.c_str(), &st) == 0) return true;
            usleep(10'000);
        }
        return false;
    }
    std::unique_ptr<BridgeBed> bed_;
    std::string dir_;
};

TEST_P(McastRt, MembersTakeEachDatagramOnceNonMemberNone)
{
    const std::string prog = std::string("timeout 60 ") + SDR_VERBS_MCAST;
    std::unique_ptr<Child> recv[kHosts];
    for (int i = 1; i < kHosts; i++) {
        const std::string group = i < 3 ? kGroup : kOtherGroup;
        recv[i] = std::make_unique<Child>(in(i, prog + " " + dev(i) + " recv " + group + " " + dir_ + "/ready" +
                                                    std::to_string(i) + " " + BridgeBed::ip(0)));
    }
    for (int i = 1; i < kHosts; i++) ASSERT_TRUE(appeared(dir_ + "/ready" + std::to_string(i))) << "receiver " << i;
    Child send(in(0, prog + " " + dev(0) + " send " + kGroup + " " + kOtherGroup + " 32"));
    int status = -1;
    const std::string sent = send.finish(&status);
    ASSERT_EQ(status, 0) << sent;
    EXPECT_NE(sent.find("mcast send datagrams=32"), std::string::npos) << sent;
    for (int i = 1; i < kHosts; i++) {
        const std::string out = recv[i]->finish(&status);
        EXPECT_EQ(status, 0) << "receiver " << i << ":\n" << out;
        const std::string want = i < 3 ? "mcast recv datagrams=32\n" : "mcast recv datagrams=0\n";
        EXPECT_NE(out.find(want), std::string::npos) << "receiver " << i << ":\n" << out;
    }
    std::printf("over %s: %s", GetParam(), sent.c_str());
}

INSTANTIATE_TEST_SUITE_P(Port, McastRt, ::testing::Values("raw", "xdp"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
