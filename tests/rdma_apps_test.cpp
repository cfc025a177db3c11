// rdma_apps_test: the real RDMA software on SDR's verbs device, every program's tests in the one
// fixture of rdma_apps.hpp (rdma_apps_cm.cpp, rdma_apps_ucx.cpp, rdma_apps_mpi.cpp,
// rdma_apps_pyverbs.cpp), over both port kinds. Run one kind with --gtest_filter='*/raw'.
#include "rdma_apps.hpp"

namespace sdr::test {

INSTANTIATE_TEST_SUITE_P(Port, RdmaApps, ::testing::Values("raw", "xdp"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace sdr::test
