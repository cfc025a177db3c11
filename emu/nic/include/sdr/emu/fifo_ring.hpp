// A first-in first-out ring of trivially copyable items whose capacity doubles when it is full,
// keeping the order: the NIC's shared send queue, its verbs QPs with send work, and a link's
// packets in flight. Storage is taken uninitialised, as every slot is written before it is read.
// A sweep builds fresh fabrics per sample, and zeroing rings sized for a 25 ms path (150 k
// packets in flight at 400 Gbit/s) was a quarter of a ring Allreduce's time (perf).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>

namespace sdr::emu {

template <class T>
class FifoRing {
    static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

public:
    explicit FifoRing(uint32_t capacity = 1024) : buf_(allocate(capacity)), mask_(capacity - 1) {}
    size_t size() const { return count_; }
    bool empty() const { return count_ == 0; }
    T& front() { return buf_[head_]; }
    const T& front() const { return buf_[head_]; }
    // The k-th item from the front (k < size()).
    const T& at(size_t k) const { return buf_[(head_ + k) & mask_]; }
    // A slot at the back for the caller to fill; valid until the next push_slot.
    T& push_slot()
    {
        if (count_ == mask_ + 1) grow();
        return buf_[(head_ + count_++) & mask_];
    }
    // Room for n items at the back, to fill through the returned view and then add with
    // commit(k) (the first k of them): a burst without the ring's state reloaded per item.
    struct Back {
        T* buf;
        size_t mask, first;
        T& operator[](size_t k) const { return buf[(first + k) & mask]; }
    };
    Back reserve(size_t n)
    {
        while (count_ + n > mask_ + 1) grow();
        return Back{buf_.get(), mask_, size_t{head_} + count_};
    }
    void commit(size_t n) { count_ += n; }
    // Capacity for at least n items: pushes up to n items never allocate or copy the ring again
    // (a send queue sized when its QPs are created, as a driver allocates a QP's send queue at
    // ibv_create_qp). Its pages stay untouched until used, so what is never used costs no memory.
    void presize(size_t n)
    {
        size_t cap = size_t{mask_} + 1;
        if (n <= cap) return;
        while (cap < n) cap *= 2;
        regrow(cap);
    }
    void pop()
    {
        head_ = (head_ + 1) & mask_;
        count_--;
    }

private:
    // On cache-line boundaries: a link's 64-byte packets then take one line each, not two.
    static constexpr std::align_val_t kAlign{alignof(T) > 64 ? alignof(T) : 64};
    struct Free {
        void operator()(T* p) const { ::operator delete[](p, kAlign); }
    };
    using Buffer = std::unique_ptr<T[], Free>;
    // T is an implicit-lifetime type: the allocation itself creates its objects (C++20).
    static Buffer allocate(size_t n) { return Buffer(static_cast<T*>(::operator new[](n * sizeof(T), kAlign))); }
    [[gnu::noinline, gnu::cold]] void grow() { regrow(2 * (size_t{mask_} + 1)); }
    // The items, in order from slot 0, into a buffer of cap (> size()) slots.
    void regrow(size_t cap)
    {
        if (cap > kMaxCapacity) throw std::length_error("FifoRing: more than 2^31 items");
        const size_t old_cap = size_t{mask_} + 1, first = std::min<size_t>(count_, old_cap - head_);
        Buffer bigger = allocate(cap);
        std::memcpy(bigger.get(), buf_.get() + head_, first * sizeof(T));  // from head_ to the end, then from 0
        std::memcpy(bigger.get() + first, buf_.get(), (count_ - first) * sizeof(T));
        buf_ = std::move(bigger);
        mask_ = static_cast<uint32_t>(cap - 1);
        head_ = 0;
    }

    // 32-bit positions: the ring is 24 bytes, so its owner's other per-packet fields share its
    // cache line (a link, the NIC's send queue).
    static constexpr uint32_t kMaxCapacity = 1u << 31;
    Buffer buf_;
    uint32_t mask_, head_ = 0, count_ = 0;
};

}  // namespace sdr::emu
