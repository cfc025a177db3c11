// Owners of the kernel objects the real-time ports make: a file descriptor and a shared or
// anonymous mapping, released on destruction. Every failure path of a port's open frees what it
// made by simply returning, and a port's destructor is the members' destructors in reverse.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace sdr::emu {

class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    Fd& operator=(Fd&& o) noexcept
    {
        std::swap(fd_, o.fd_);
        return *this;
    }
    ~Fd()
    {
        if (fd_ >= 0) close(fd_);
    }
    int get() const { return fd_; }
    bool ok() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

class Mapping {
public:
    Mapping() = default;
    Mapping(void* p, size_t len) : p_(p), len_(len) {}
    Mapping(Mapping&& o) noexcept : p_(std::exchange(o.p_, MAP_FAILED)), len_(o.len_) {}
    Mapping& operator=(Mapping&& o) noexcept
    {
        std::swap(p_, o.p_);
        std::swap(len_, o.len_);
        return *this;
    }
    ~Mapping()
    {
        if (p_ != MAP_FAILED) munmap(p_, len_);
    }
    bool ok() const { return p_ != MAP_FAILED; }
    uint8_t* bytes() const { return static_cast<uint8_t*>(p_); }
    size_t size() const { return len_; }

private:
    void* p_ = MAP_FAILED;
    size_t len_ = 0;
};

}  // namespace sdr::emu
