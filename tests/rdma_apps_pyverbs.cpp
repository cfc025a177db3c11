// rdma-core's own tests (python3-pyverbs: /usr/share/doc/rdma-core/tests, some gzipped) against
// one verbs device in a namespace, through `sdr-rdma exec`: none may fail. test_rdmacm's run
// their passive and active sides as two processes on the one device (emu/verbs/README.md,
// "Several processes on one device"), and must pass by name, as must the ones the provider's
// fixes made pass (device attributes, GID table, rereg_mr, resize_cq).
#include "rdma_apps.hpp"

#include <unistd.h>

#include <cstdio>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace sdr::test {
namespace {

constexpr const char* kTests = "/usr/share/doc/rdma-core/tests";
constexpr const char* kPython = "/usr/bin/python3";  // the interpreter python3-pyverbs is built for

TEST_P(RdmaApps, PyverbsGenericTestsPass)
{
    if (access((std::string(kTests) + "/run_tests.py").c_str(), R_OK) != 0 ||
        run(std::string(kPython) + " -c 'import pyverbs'").status != 0)
        GTEST_SKIP() << "python3-pyverbs (rdma-core's tests in " << kTests << ") is not installed";
    if (xdp()) GTEST_SKIP() << "test_rdmacm runs two processes on the one device, and an xdp: port takes one";
    const std::string dir = log("pyverbs");
    ASSERT_EQ(run("mkdir -p " + dir + " && cp -r " + kTests + " " + dir + "/tests && gunzip -f " + dir + "/tests/*.gz")
                  .status,
              0);
    // Without the CM's trace, which would split unittest's "NAME ... ok" lines.
    Result r = run("cd " + dir + "/tests && " +
                   in(0, "env SDR_RDMA_CM_TRACE=0 timeout 600 " + std::string(kPython) + " run_tests.py --dev sdr0 -v"));
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
}  // namespace sdr::test
