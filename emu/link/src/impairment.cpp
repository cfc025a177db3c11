#include <sdr/emu/impairment.hpp>

#include <cmath>

namespace sdr::emu {

uint64_t Impairment::threshold(double p)
{
    if (!(p > 0.0)) return 0;
    if (p >= 1.0) return 1ull << 53;
    return static_cast<uint64_t>(std::ceil(p * 0x1p53));
}

Impairment::Impairment(const ImpairmentParams& p)
    : p_(p), rng_(p.seed), t_loss_(threshold(p.loss)), t_good_bad_(threshold(p.ge_p_good_bad)),
      t_bad_good_(threshold(p.ge_p_bad_good)), t_loss_bad_(threshold(p.ge_loss_bad)),
      t_reorder_(threshold(p.reorder)), t_duplicate_(threshold(p.duplicate)),
      t_ce_(threshold(p.ce_mark))
{
    none_ = !t_loss_ && !t_good_bad_ && !t_reorder_ && !t_duplicate_ && !t_ce_;
}

}  // namespace sdr::emu
