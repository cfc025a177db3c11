#include <sdr/reliability/region.hpp>

#include <sys/mman.h>

namespace sdr::rel {

bool Region::map(uint64_t bytes)
{
    unmap();
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    data_ = static_cast<uint8_t*>(p);
    size_ = bytes;
    return true;
}

void Region::unmap()
{
    if (data_) munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
}

}  // namespace sdr::rel
