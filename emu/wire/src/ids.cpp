#include <sdr/emu/ids.hpp>

#include <sys/random.h>

#include <cerrno>
#include <random>

namespace sdr::emu {

NicIds::NicIds(std::optional<uint64_t> seed)
{
    if (seed) rng_.emplace(*seed);
}

uint64_t NicIds::next()
{
    if (rng_) return rng_->next();
    uint64_t v = 0;
    ssize_t n;
    while ((n = getrandom(&v, sizeof v, 0)) != static_cast<ssize_t>(sizeof v))
        if (n >= 0 || errno != EINTR) {
            // No getrandom (a kernel older than 3.17): the C++ library's non-deterministic
            // source, which reads the same kernel pool through /dev/urandom.
            std::random_device rd;
            return (uint64_t{rd()} << 32) ^ rd();
        }
    return v;
}

uint32_t NicIds::draw(uint32_t index, uint32_t index_bits, uint32_t tag_bits, uint32_t high, uint32_t previous)
{
    for (;;) {
        uint32_t tag = static_cast<uint32_t>(next() >> (64 - tag_bits));
        uint32_t id = high | (tag << index_bits) | index;
        if (tag && id != previous) return id;
    }
}

uint32_t NicIds::data_qpn(uint32_t index, uint32_t previous)
{
    return draw(index, kQpnIndexBits, 23 - kQpnIndexBits, 0, previous);
}

uint32_t NicIds::ctrl_qpn(uint32_t index, uint32_t previous)
{
    for (;;)
        if (uint32_t q = draw(index, kQpnIndexBits, 23 - kQpnIndexBits, kCtrlQpnBit, previous); q != 0xFFFFFF) return q;
}

uint32_t NicIds::root_key(uint32_t index, uint32_t previous)
{
    return draw(index, kRootKeyIndexBits, 32 - kRootKeyIndexBits, 0, previous);
}

uint32_t NicIds::lkey(uint32_t index, uint32_t previous)
{
    return draw(index, kLkeyIndexBits, 32 - kLkeyIndexBits, 0, previous);
}

uint32_t NicIds::qkey() { return static_cast<uint32_t>(next() >> 33); }

}  // namespace sdr::emu
