// Replays one fuzz target's corpus (tests/fuzz/corpus/<target>: the seeds and every input a
// finding came from) through the target's own harness, without libFuzzer, in the ordinary
// build: a broken invariant aborts the test as it aborts a fuzz run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

TEST(FuzzReplay, SDR_FUZZ_TARGET)
{
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(SDR_SOURCE_DIR) / "tests/fuzz/corpus" / SDR_FUZZ_TARGET_NAME;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    ASSERT_FALSE(files.empty()) << dir;
    for (const fs::path& f : files) {
        SCOPED_TRACE(f.filename().string());
        std::ifstream in(f, std::ios::binary);
        std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        EXPECT_EQ(LLVMFuzzerTestOneInput(bytes.data(), bytes.size()), 0);
    }
}
