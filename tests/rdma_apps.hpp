// The one fixture of the real RDMA software on SDR's verbs device (rdma_apps_test: the librdmacm
// tools, perftest, qperf and libfabric in rdma_apps_cm.cpp; UCX in rdma_apps_ucx.cpp; Open MPI
// and MPICH in rdma_apps_mpi.cpp; rdma-core's pyverbs tests in rdma_apps_pyverbs.cpp). Its testbed is
// made once for every test: four namespaces on a bridge (tools/sdr-netns --hosts 4), and in
// each a device sdr0 per port kind, raw: and xdp: on the namespace's interface, each kind's in a
// state directory of its own. A test takes the kind of its parameter; its programs run through
// `sdr-rdma exec`, so they see the device as a kernel one and get the interception library.
// Host 1 (10.77.0.2) serves, host 0 (10.77.0.1) is the client.
#pragma once

#include "child_util.hpp"
#include "netns_util.hpp"

#include <gtest/gtest.h>

#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace sdr::test {

inline bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

inline uint64_t mono_ms()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1'000'000;
}

inline std::string slurp(const std::string& path)
{
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// Waits (bounded) until the file holds `what`.
inline bool wait_for(const std::string& path, const std::string& what, uint64_t ms = 30'000)
{
    for (uint64_t deadline = mono_ms() + ms; mono_ms() < deadline;) {
        if (contains(slurp(path), what)) return true;
        usleep(10'000);  // polling a file for a condition, not waiting out a race
    }
    return false;
}

class RdmaApps : public ::testing::TestWithParam<const char*> {
public:  // the helpers, for the helpers of each program's tests too
    static constexpr int kHosts = 4;

    static void SetUpTestSuite()
    {
        if (!netns_unavailable().empty()) return;
        char tmpl[] = "/tmp/sdr-rdma-apps-XXXXXX";
        if (!mkdtemp(tmpl)) return;
        dir_ = tmpl;
        bed_ = new Testbed("rap", 4200, false, kHosts);
        for (const char* kind : {"raw", "xdp"})
            for (int h = 0; bed_->ok() && h < kHosts; h++) {
                Result add = run("ip netns exec " + bed_->ns(h) + " env SDR_RDMA_DIR=" + state(kind, h) + " " +
                                 SDR_RDMA + " link add sdr0 netdev " + bed_->ns(h) + " " + kind);
                if (add.status != 0) setup_error_ += add.out;
            }
    }
    static void TearDownTestSuite()
    {
        for (const char* kind : {"raw", "xdp"})
            for (int h = 0; bed_ && bed_->ok() && h < kHosts; h++)
                run("SDR_RDMA_DIR=" + state(kind, h) + " " + SDR_RDMA + " link del sdr0");
        delete bed_;
        bed_ = nullptr;
        if (!dir_.empty()) run("rm -rf " + dir_);
        dir_.clear();
    }
    void SetUp() override
    {
        if (std::string why = netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
        if (access(SDR_RDMA_PRELOAD, R_OK) != 0) GTEST_SKIP() << "the interception library is not built";
        ASSERT_FALSE(dir_.empty()) << "mkdtemp";
        ASSERT_TRUE(bed_->ok()) << "tools/sdr-netns could not build the testbed";  // as root: a failure
        ASSERT_EQ(setup_error_, "") << "sdr-rdma link add";
    }

    bool xdp() const { return std::string(GetParam()) == "xdp"; }
    static std::string ns(int h) { return bed_->ns(h); }
    static std::string ip(int h) { return Testbed::ip(h); }
    // Host h's state directory for port kind `kind` (its device sdr0).
    static std::string state(const std::string& kind, int h) { return dir_ + "/" + kind + "/" + bed_->ns(h); }
    std::string state(int h) const { return state(GetParam(), h); }
    // A file of this test's own (a later test or port kind never reads an earlier one's).
    std::string log(const std::string& name) const { return dir_ + "/" + name + "-" + GetParam() + ".log"; }
    // A command in namespace h, without the device (a launcher, a probe).
    static std::string at(int h, const std::string& cmd) { return "ip netns exec " + bed_->ns(h) + " " + cmd; }
    // A program on host h's device: `sdr-rdma exec`, and the CM's trace on stderr.
    std::string in(int h, const std::string& cmd) const
    {
        return at(h, "env SDR_RDMA_DIR=" + state(h) + " SDR_RDMA_PROVIDER=" + SDR_VERBS_PROVIDER +
                         " SDR_RDMA_CM_TRACE=1 " + SDR_RDMA + " exec -- " + cmd);
    }
    // A server on host 1 writing to log(name), started and ready: its output shows `ready`
    // (by default: its CM trace says it listens).
    std::unique_ptr<Child> server(const std::string& name, const std::string& cmd,
                                  const std::string& ready = ": LISTEN id ")
    {
        auto c = std::make_unique<Child>(in(1, "timeout 120 " + cmd) + " > " + log(name) + " 2>&1");
        EXPECT_TRUE(wait_for(log(name), ready)) << name << " never got ready:\n" << slurp(log(name));
        return c;
    }
    // Server on host 1, client on host 0; both must exit 0. Returns {server output, client output}.
    std::pair<std::string, std::string> pair(const std::string& name, const std::string& server_cmd,
                                             const std::string& client_cmd)
    {
        auto s = server(name, server_cmd);
        Result c = run(in(0, "timeout 120 " + client_cmd));
        int status = -1;
        s->finish(&status);
        const std::string so = slurp(log(name));
        EXPECT_EQ(c.status, 0) << client_cmd << ":\n" << c.out;
        EXPECT_EQ(status, 0) << server_cmd << ":\n" << so;
        return {so, c.out};
    }
    // Whether TCP port `port` listens on host h, waiting for it (bounded).
    static bool listening(int h, unsigned port)
    {
        char want[16];
        std::snprintf(want, sizeof want, ":%04X ", port);
        for (uint64_t deadline = mono_ms() + 20'000; mono_ms() < deadline;) {
            std::istringstream lines(run(at(h, "cat /proc/net/tcp")).out);
            for (std::string line; std::getline(lines, line);)
                if (line.find(want) != std::string::npos && line.find(" 0A ") != std::string::npos) return true;
            usleep(10'000);
        }
        return false;
    }

private:
    static inline Testbed* bed_ = nullptr;
    static inline std::string dir_;
    static inline std::string setup_error_;  // what `sdr-rdma link add` said
};

}  // namespace sdr::test
