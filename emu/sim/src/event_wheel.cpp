#include <sdr/emu/event_wheel.hpp>

namespace sdr::emu {

namespace {
constexpr uint64_t bit(size_t i) { return uint64_t{1} << i; }
}  // namespace

EventWheel::EventWheel() : head_(kBuckets, kNil), used_(kWords, 0), summary_((kWords + 63) / 64, 0) {}

void EventWheel::push(uint64_t t, uint64_t seq, SimTarget* target, uint64_t arg)
{
    uint32_t n = free_;
    if (n != kNil) {
        free_ = nodes_[n].next;
    } else {
        n = static_cast<uint32_t>(nodes_.size());
        nodes_.emplace_back();
    }
    Node& node = nodes_[n];
    node.e = SimEvent{t, seq, target, arg};
    node.next = kNil;
    size_++;
    const size_t b = bucket(t);
    // A bucket holds a time or two: find e's group, or where a new one goes.
    uint32_t* link = &head_[b];
    while (*link != kNil && nodes_[*link].e.t < t) link = &nodes_[*link].next_group;
    if (*link != kNil && nodes_[*link].e.t == t) {
        Node& first = nodes_[*link];
        nodes_[first.last].next = n;
        first.last = n;
    } else {
        node.next_group = *link;
        node.last = n;
        *link = n;
    }
    used_[b / 64] |= bit(b % 64);
    summary_[b / 4096] |= bit(b / 64 % 64);
    if (front_ == kNil || t < nodes_[front_].e.t) front_ = n;  // equal: seq is higher
}

SimEvent EventWheel::pop()
{
    const uint32_t n = front_;  // the first node of its bucket's first group
    Node& node = nodes_[n];
    const SimEvent e = node.e;
    const size_t b = bucket(e.t);
    if (node.next != kNil) {  // the group's next event leads it now
        Node& second = nodes_[node.next];
        second.next_group = node.next_group;
        second.last = node.last;
        head_[b] = node.next;
    } else {
        head_[b] = node.next_group;
    }
    node.next = free_;
    free_ = n;
    size_--;
    if (head_[b] == kNil) {
        used_[b / 64] &= ~bit(b % 64);
        if (!used_[b / 64]) summary_[b / 4096] &= ~bit(b / 64 % 64);
    }
    // Every remaining event is due at or after e, so within one turn from e's bucket on.
    front_ = first_from(b);
    return e;
}

uint32_t EventWheel::first_from(size_t b) const
{
    const size_t w = b / 64;
    if (const uint64_t m = used_[w] & (~uint64_t{0} << (b % 64))) return head_[w * 64 + __builtin_ctzll(m)];
    // The words after w, a summary word at a time; the last round comes back to w's own
    // summary word from its start, for the buckets below b (the end of the turn).
    size_t i = (w + 1) % kWords;
    for (size_t k = 0; k <= summary_.size(); k++) {
        if (const uint64_t s = summary_[i / 64] & (~uint64_t{0} << (i % 64))) {
            const size_t word = i / 64 * 64 + __builtin_ctzll(s);
            return head_[word * 64 + __builtin_ctzll(used_[word])];
        }
        i = (i / 64 + 1) * 64 % kWords;
    }
    return kNil;
}

}  // namespace sdr::emu
