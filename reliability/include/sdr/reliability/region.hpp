// Zeroed memory for EC parity, mapped anonymously: the kernel supplies pages only when they are
// first touched, so a payload-free run's parity "buffer" of hundreds of MiB costs neither time
// (no zero-fill) nor resident memory; with payload the coder touches what it uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace sdr::rel {

class Region {
public:
    Region() = default;
    ~Region() { unmap(); }
    Region(Region&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    Region& operator=(Region&& o) noexcept
    {
        if (this != &o) {
            unmap();
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
        }
        return *this;
    }
    Region(const Region&) = delete;
    Region& operator=(const Region&) = delete;

    // Maps `bytes` zeroed bytes in place of what was held; false if the kernel refuses.
    [[nodiscard]] bool map(uint64_t bytes);
    uint8_t* data() const { return data_; }
    uint64_t size() const { return size_; }

private:
    void unmap();
    uint8_t* data_ = nullptr;
    uint64_t size_ = 0;
};

}  // namespace sdr::rel
