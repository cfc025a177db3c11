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
        min_ = r;
        return;
    }
    rttvar_ = 0.75 * rttvar_ + 0.25 * std::fabs(srtt_ - r);
    srtt_ = 0.875 * srtt_ + 0.125 * r;
    min_ = std::min(min_, r);
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
    rate_ = *std::max_element(window_, window_ + kWindow);
    mark_ns_ = now;
    mark_bytes_ = total_;
}

}  // namespace sdr::rel
