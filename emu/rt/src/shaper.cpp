#include <sdr/emu/capture_notes.hpp>
#include <sdr/emu/shaper.hpp>

#include <cstring>

namespace sdr::emu {

Shaper::Shaper(const ShaperParams& p)
    : p_(p), imp_(p.impairment), rate_bits_per_ns_(p.rate_gbps > 0 ? p.rate_gbps : 0),
      holds_(p.delay_ns > 0 || p.rate_gbps > 0)
{
}

Shaper::Verdict Shaper::decide()
{
    ImpairmentVerdict iv = imp_.decide();
    Verdict v;
    if (iv.drop) {
        c_.dropped++;
        c_.dropped_burst += iv.burst;
        v.copies = 0;
        v.burst = iv.burst;
        return v;
    }
    if (iv.duplicate) {
        c_.duplicated++;
        v.copies = 2;
    }
    v.ce = iv.ce;
    v.extra_delay_ns = iv.extra_delay_ps / 1000;
    if (v.extra_delay_ns) c_.delayed++;
    v.direct = !holds_ && v.extra_delay_ns == 0;
    return v;
}

void Shaper::hold(uint64_t now_ns, const uint8_t* frame, size_t len, const Verdict& v)
{
    for (uint32_t i = 0; i < v.copies; i++) {
        std::vector<uint8_t> b;
        if (!spare_.empty()) {
            b = std::move(spare_.back());
            spare_.pop_back();
        }
        b.assign(frame, frame + len);
        // A duplicate follows its original by a microsecond, as a switch would repeat it.
        uint8_t note = v.extra_delay_ns ? capture_note::kBitDelayed : 0;
        if (v.copies == 2) note |= i ? capture_note::kBitCopy : capture_note::kBitDuplicated;
        heap_.push_back(Held{now_ns + p_.delay_ns + v.extra_delay_ns + i * 1000, seq_++, std::move(b), note});
        std::push_heap(heap_.begin(), heap_.end(), later);
        c_.held_frames++;
        c_.held_bytes += len;
    }
}

void Shaper::pop()
{
    std::pop_heap(heap_.begin(), heap_.end(), later);
    c_.held_frames--;
    c_.held_bytes -= heap_.back().bytes.size();
    if (spare_.size() < 1024) spare_.push_back(std::move(heap_.back().bytes));
    heap_.pop_back();
}

uint64_t Shaper::next_ns() const
{
    if (heap_.empty()) return UINT64_MAX;
    return std::max(heap_.front().release_ns, wire_free_ns_);
}

}  // namespace sdr::emu
