#include <sdr/reliability/path_meter.hpp>

#include <algorithm>
#include <cmath>

namespace sdr::rel {

void RttMeter::sample(double r)
{
    if (!(r > 0)) return;
    if (samples_++ == 0) {
        srtt_ = r;
        rttvar_ = r / 2;
        return;
    }
    rttvar_ = 0.75 * rttvar_ + 0.25 * std::fabs(srtt_ - r);
    srtt_ = 0.875 * srtt_ + 0.125 * r;
}

void RttMeter::bound(double r)
{
    if (!(r > 0)) return;
    min_ = bounds_++ ? std::min(min_, r) : r;
}

void RateMeter::delivered(uint64_t now, uint64_t bytes, uint64_t span_ns)
{
    total_ += bytes;
    if (!marked_) {  // what came with the first observation took an unknown time: not counted
        mark_ns_ = now;
        mark_bytes_ = total_;
        marked_ = true;
        return;
    }
    if (now - mark_ns_ < std::max<uint64_t>(span_ns, 1)) return;
    window_[next_] = double(total_ - mark_bytes_) / double(now - mark_ns_);
    next_ = (next_ + 1) % kWindow;
    samples_++;
    const int n = static_cast<int>(std::min<uint64_t>(samples_, kWindow));
    double sorted[kWindow];
    std::copy(window_, window_ + n, sorted);  // the first n slots are filled before any is reused
    std::nth_element(sorted, sorted + n / 2, sorted + n);
    rate_ = sorted[n / 2];
    mark_ns_ = now;
    mark_bytes_ = total_;
}

}  // namespace sdr::rel
