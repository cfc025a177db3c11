// main() of the suites that run as one ctest test (sdr_suite, tests/CMakeLists.txt). GoogleTest
// exits 0 when a test skipped, so ctest would show the whole suite as Passed: here a run with a
// skipped test and no failure exits 77, which the suite's SKIP_RETURN_CODE makes ctest report as
// Skipped. A failure still exits 1, whatever else skipped.
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv)
{
    ::testing::InitGoogleTest(&argc, argv);
    const int status = RUN_ALL_TESTS();
    const int skipped = ::testing::UnitTest::GetInstance()->skipped_test_count();
    if (status == 0 && skipped > 0) {
        std::fprintf(stderr, "%d test(s) skipped (listed above): the suite reports Skipped\n", skipped);
        return 77;
    }
    return status;
}
