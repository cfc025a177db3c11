#include "role.hpp"

#include <sdr_sim.h>

#include <algorithm>
#include <cstdint>

namespace sdr::write_bw {

void run(std::vector<Party*> parties, int timeout_ms)
{
    std::vector<uint8_t> m;
    std::vector<bool> other_done(parties.size());  // its Done may come while we still run
    for (;;) {
        bool progressed = false, all_done = true;
        uint64_t deadline = UINT64_MAX;
        for (size_t i = 0; i < parties.size(); i++) {
            Party* p = parties[i];
            Done d;
            while (p->peer->poll(&m)) {
                progressed = true;
                if (take(m, &d)) other_done[i] = true;
                for (auto& r : p->roles) r->on_message(m);
            }
            if (p->side->ep) {
                uint64_t next;
                if (sdr_rel_progress(p->side->ep, &next) != SDR_SUCCESS) die_rel("sdr_rel_progress");
                deadline = std::min(deadline, next);
            }
            for (auto& r : p->roles)
                if (!r->done()) {
                    progressed = r->step() || progressed;
                    all_done = all_done && r->done();
                }
        }
        if (all_done) break;
        if (progressed) continue;
        // Nothing to do: sleep until the next deadline, an event, or 200 us (a control message
        // from the other process may come any time).
        sdr_context* ctx = parties[0]->side->ctx;
        const uint64_t now = sdr_now_ns(ctx);
        sdr_sim_wait(ctx, std::max(now + 1, std::min(deadline, now + 200'000)));
    }
    for (Party* p : parties) p->peer->send(Done{});
    for (size_t i = 0; i < parties.size(); i++) {
        Done d;
        while (!other_done[i]) {
            if (!parties[i]->peer->poll(&m, timeout_ms)) die("the other side did not end the run");
            other_done[i] = take(m, &d);
        }
    }
}

}  // namespace sdr::write_bw
