// Shared receive queues (IBTA vol. 1, 10.2.9): one pool of receive WQEs for every QP attached to
// it. A QP binds a WQE of the pool to its message at the message's first packet and holds it
// until the message completes (the QP's own receive queue keeps the WQE at its head instead),
// so two QPs filling messages at once never share a WQE. The limit event is the IBTA's SRQ
// limit: armed with a count, it fires once when a QP took a WQE and fewer stay posted.

#include <sdr/emu/verbs_engine.hpp>

#include <cerrno>

namespace sdr::emu {

uint32_t VerbsEngine::srq_create(uint32_t pd, uint32_t depth, uint32_t limit)
{
    if (pd >= vpds_.size() || !vpds_[pd].live || depth == 0 || depth > 16384 || limit > depth) return kNoHandle;
    size_t i = 0;
    while (i < vsrqs_.size() && vsrqs_[i]) i++;
    if (i >= kMaxVerbsQps) return kNoHandle;
    if (i == vsrqs_.size()) vsrqs_.emplace_back();
    vsrqs_[i] = std::make_unique<VerbsSrq>(pd, depth, limit);
    vpds_[pd].users++;
    return static_cast<uint32_t>(i);
}

int VerbsEngine::srq_destroy(uint32_t srq)
{
    if (srq >= vsrqs_.size() || !vsrqs_[srq]) return EINVAL;
    if (vsrqs_[srq]->users) return EBUSY;
    vpds_[vsrqs_[srq]->pd].users--;
    vsrqs_[srq].reset();
    return 0;
}

int VerbsEngine::srq_arm(uint32_t srq, uint32_t limit)
{
    if (srq >= vsrqs_.size() || !vsrqs_[srq] || limit > vsrqs_[srq]->ring.depth()) return EINVAL;
    vsrqs_[srq]->limit = limit;
    return 0;
}

uint32_t VerbsEngine::srq_limit(uint32_t srq) const
{
    return srq < vsrqs_.size() && vsrqs_[srq] ? vsrqs_[srq]->limit : 0;
}

uint32_t VerbsEngine::srq_posted(uint32_t srq) const
{
    if (srq >= vsrqs_.size() || !vsrqs_[srq]) return 0;
    const VerbsSrq& s = *vsrqs_[srq];
    return static_cast<uint32_t>(s.ring.head() - s.ring.tail());
}

int VerbsEngine::post_srq_recv(uint32_t srq, const verbs::RecvWr& wr)
{
    if (srq >= vsrqs_.size() || !vsrqs_[srq] || wr.num_sge > verbs::kMaxSge) return EINVAL;
    return vsrqs_[srq]->ring.push(wr) ? 0 : ENOMEM;
}

const verbs::RecvWr* VerbsEngine::verbs_rq_head(VerbsQp& q)
{
    if (q.srq == kNoHandle) return q.rq.empty() ? nullptr : &q.rq.front();
    if (q.srq_bound) return &q.srq_wqe;
    VerbsSrq& s = *vsrqs_[q.srq];
    if (s.ring.empty()) return nullptr;
    q.srq_wqe = s.ring.front();
    s.ring.pop();
    q.srq_bound = true;
    if (s.limit && s.ring.head() - s.ring.tail() < s.limit) {
        s.limit = 0;  // disarmed until the next arm
        exec_->verbs_async_event(verbs::AsyncEvent::SrqLimitReached, q.srq);
    }
    return &q.srq_wqe;
}

void VerbsEngine::verbs_rq_take(VerbsQp& q)
{
    if (q.srq == kNoHandle)
        q.rq.pop();
    else
        q.srq_bound = false;
}

}  // namespace sdr::emu
