// drive(): runs endpoints on the simulator, sleeping in virtual time between their deadlines.
#include <sdr/reliability/endpoint.hpp>
#include <sdr_sim.h>

#include <algorithm>

namespace sdr::rel {

bool drive(sdr_context* ctx, std::initializer_list<Endpoint*> eps, const std::function<bool()>& done, uint64_t limit_ns)
{
    bool looked_again = false;
    while (true) {
        uint64_t t = kNever, before = sdr_now_ns(ctx);
        for (Endpoint* e : eps) t = std::min(t, e->progress());
        if (done()) return true;
        uint64_t now = sdr_now_ns(ctx);
        // A polling call moved the clock (the simulator runs inside SDR polls): look once more
        // before sleeping. Once: on a wall clock, time always moves.
        if (now != before && !looked_again) {
            looked_again = true;
            continue;
        }
        looked_again = false;
        if (now >= limit_ns) return false;
        if (t == kNever && !sdr_sim_pending(ctx)) return false;  // nothing can happen any more
        t = std::min(std::max(t, now + 1), limit_ns);
        if (sdr_sim_wait(ctx, t) != SDR_SUCCESS) return false;
    }
}

}  // namespace sdr::rel
