// rdma-core's own tests (python3-pyverbs: /usr/share/doc/rdma-core/tests, some gzipped) against
// one verbs device in a namespace, through `sdr-rdma exec`: none may fail. test_rdmacm's run
// their passive and active sides as two processes on the one device (emu/verbs/README.md,
// "Several processes on one device"), and must pass by name, as must the ones the provider's
// fixes made pass (device attributes, GID table, rereg_mr, resize_cq).
#include "child_util.hpp"
#include "netns_util.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

using sdr::test::Child;

using sdr::test::Result;
using sdr::test::run;

constexpr const char* kTests = "/usr/share/doc/rdma-core/tests";
constexpr const char* kPython = "/usr/bin/python3";  // the interpreter python3-pyverbs is built for

TEST(Pyverbs, GenericTestsPassOnTheDevice)
{
    if (std::string why = sdr::test::netns_unavailable(); !why.empty()) GTEST_SKIP() << why;
    if (access((std::string(kTests) + "/run_tests.py").c_str(), R_OK) != 0 ||
        run(std::string(kPython) + " -c 'import pyverbs'").status != 0)
        GTEST_SKIP() << "python3-pyverbs (rdma-core's tests in " << kTests << ") is not installed";
    char tmpl[] = "/tmp/sdr-pyverbs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    sdr::test::Testbed bed("pyv");
    ASSERT_TRUE(bed.ok()) << "tools/sdr-netns could not build the testbed";
    ASSERT_EQ(run("cp -r " + std::string(kTests) + " " + dir + "/tests && gunzip -f " + dir + "/tests/*.gz").status, 0);
    const std::string in = "ip netns exec " + bed.ns(0) + " env SDR_RDMA_DIR=" + dir + "/state " + SDR_RDMA;
    Result add = run(in + " link add sdrp0 netdev " + bed.ns(0) + " raw");
    ASSERT_EQ(add.status, 0) << add.out;
    Result r = run("cd " + dir + "/tests && timeout 600 " + in + " exec --dev sdrp0 -- " + kPython +
                   " run_tests.py --dev sdrp0 -v");
    run(in + " link del sdrp0");
    run("rm -rf " + dir);

    std::smatch ran;
    ASSERT_TRUE(std::regex_search(r.out, ran, std::regex("Ran ([0-9]+) tests"))) << r.out;
    EXPECT_GT(std::stoi(ran[1].str()), 200) << r.out;
    // unittest -v: "<test or docstring line> ... ok", and "FAIL: <test>" / "ERROR: <test>".
    std::istringstream lines(r.out);
    std::vector<std::string> passed;
    for (std::string line; std::getline(lines, line);) {
        if (line.size() > 6 && line.compare(line.size() - 6, 6, "... ok") == 0) passed.push_back(line);
        const bool failed = line.rfind("FAIL: ", 0) == 0 || line.rfind("ERROR: ", 0) == 0;
        EXPECT_FALSE(failed) << line;
    }
    for (const char* name : {"Test ibv_query_device_ex()", "Test phys_port_cnt_ex", "Test ibv_query_gid_ex() with an empty index",
                             "Test resize CQ, start with specific value and then increase and decrease",
                             "test_mr_rereg_addr", "test_mr_rereg_access", "Test that cover rereg MR's PD with this flow:",
                             "test_rdmacm_sync_traffic", "test_rdmacm_async_traffic", "test_rdmacm_async_read",
                             "test_rdmacm_async_write", "test_rdmacm_async_reject_traffic", "test_rdmacm_async_udp_traffic",
                             "test_rdmacm_async_multicast_traffic", "test_rdmacm_async_ex_multicast_traffic",
                             "test_rdmacm_async_ex_leave_multicast_traffic", "test_rdmacm_async_traffic_external_qp"}) {
        bool ok = false;
        for (const std::string& line : passed) ok |= line.find(name) != std::string::npos;
        EXPECT_TRUE(ok) << name << " did not pass";
    }
    std::printf("pyverbs: %s tests, %zu passed\n", ran[1].str().c_str(), passed.size());
}

}  // namespace
