// What every fuzz target shares: a reader that turns the fuzzer's bytes into choices (past the
// end it reads zeros, so every input is a complete program) and a check that stops the run
// with a message libFuzzer reports as a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace sdr::fuzz {

class Reader {
public:
    Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}
    bool empty() const { return n_ == 0; }
    size_t left() const { return n_; }
    uint8_t u8()
    {
        if (!n_) return 0;
        n_--;
        return *p_++;
    }
    uint16_t u16() { return static_cast<uint16_t>(u8() | u8() << 8); }
    uint32_t u32() { return u16() | static_cast<uint32_t>(u16()) << 16; }
    uint64_t u64() { return u32() | static_cast<uint64_t>(u32()) << 32; }
    // Up to n bytes in place (fewer at the end of the input).
    const uint8_t* bytes(size_t n, size_t* got)
    {
        *got = n < n_ ? n : n_;
        const uint8_t* b = p_;
        p_ += *got;
        n_ -= *got;
        return b;
    }

private:
    const uint8_t* p_;
    size_t n_;
};

// Little-endian helpers for building inputs (seed writers, regression tests).
template <class V>
inline void put_le(V& out, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace sdr::fuzz

// An invariant of the code under test failed: say which, then abort (libFuzzer saves the input).
#define SDR_FUZZ_CHECK(cond, ...)                                                   \
    do {                                                                            \
        if (!(cond)) {                                                              \
            std::fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, #cond); \
            std::fprintf(stderr, __VA_ARGS__);                                      \
            std::fprintf(stderr, "\n");                                             \
            std::abort();                                                           \
        }                                                                           \
    } while (0)
