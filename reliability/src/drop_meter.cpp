#include <sdr/reliability/drop_meter.hpp>

#include <cmath>

namespace sdr::rel {

DropMeter::DropMeter(double hint, uint32_t packets_per_chunk)
    : packets_(packets_per_chunk ? packets_per_chunk : 1), judged_(kPriorChunks),
      lost_(-std::expm1(packets_ * std::log1p(-hint)) * kPriorChunks)
{
}

void DropMeter::add(uint64_t judged, uint64_t lost)
{
    judged_ += static_cast<double>(judged);
    lost_ += static_cast<double>(lost);
    total_judged_ += judged;
    while (judged_ > kWindowChunks) {
        judged_ /= 2;
        lost_ /= 2;
    }
}

double DropMeter::packet_drop() const
{
    double q = lost_ / judged_;
    if (q >= 1) return 1;
    return -std::expm1(std::log1p(-q) / packets_);
}

}  // namespace sdr::rel
