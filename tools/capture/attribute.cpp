// sdr-pcap summary: SDR messages to reliable messages by message id (attribute.hpp).
#include "attribute.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace sdr::tools {
namespace {

using Hosts = std::pair<uint32_t, uint32_t>;  // sender, receiver

// The SDR messages between two hosts by message id, each list in the order they started.
class ById {
public:
    explicit ById(const Summary& s) : s_(s), taken_(s.data.size(), false)
    {
        for (size_t i = 0; i < s.data.size(); i++) {
            const DataMessage& d = s.data[i];
            by_id_[{{d.src_ip, d.dst_ip}, d.msg_id}].push_back(i);
        }
    }

    // The first SDR message from h that no seq took and that started at or after t_ns: where
    // a connection's chain begins. -1: none.
    int first_after(Hosts h, uint64_t t_ns) const
    {
        int best = -1;
        for (size_t i = 0; i < s_.data.size(); i++) {
            const DataMessage& d = s_.data[i];
            if (taken_[i] || Hosts{d.src_ip, d.dst_ip} != h || d.first_ns < t_ns) continue;
            if (best < 0 || d.first_ns < s_.data[best].first_ns) best = static_cast<int>(i);
        }
        return best;
    }

    // The first SDR message from h with this id that no seq took and that started at or after
    // t_ns. -1: none in the capture.
    int with_id(Hosts h, uint32_t id, uint64_t t_ns) const
    {
        auto it = by_id_.find({h, id});
        if (it == by_id_.end()) return -1;
        for (size_t i : it->second)
            if (!taken_[i] && s_.data[i].first_ns >= t_ns) return static_cast<int>(i);
        return -1;
    }

    void take(size_t i) { taken_[i] = true; }

private:
    const Summary& s_;
    std::vector<bool> taken_;
    std::map<std::pair<Hosts, uint32_t>, std::vector<size_t>> by_id_;
};

void link(Summary* s, size_t rel, size_t data)
{
    ReliableMessage& r = s->reliable[rel];
    const DataMessage& d = s->data[data];
    s->data[data].rel = static_cast<int>(rel);
    r.data.push_back(data);
    r.first_ns = std::min(r.first_ns, d.first_ns);
    r.last_ns = std::max(r.last_ns, d.last_ns);
}

}  // namespace

void attribute(const SummaryOptions& o, Summary* s)
{
    // Connections (sender, receiver, receiver incarnation), their messages in seq order.
    std::map<std::tuple<uint32_t, uint32_t, uint32_t>, std::vector<size_t>> conns;
    for (size_t j = 0; j < s->reliable.size(); j++) {
        const ReliableMessage& r = s->reliable[j];
        conns[{r.src_ip, r.dst_ip, r.receiver}].push_back(j);
    }
    // A chain starts at its connection's first CTS; connections are served in that order, so
    // an earlier connection's SDR messages are taken before a later one looks for its first.
    std::vector<std::pair<uint64_t, std::vector<size_t>>> chains;
    for (auto& [key, msgs] : conns) {
        std::sort(msgs.begin(), msgs.end(), [&](size_t a, size_t b) { return s->reliable[a].seq < s->reliable[b].seq; });
        auto first = std::find_if(msgs.begin(), msgs.end(), [&](size_t j) { return s->reliable[j].has_cts; });
        if (first != msgs.end()) chains.emplace_back(s->reliable[*first].cts_ns, std::vector<size_t>(first, msgs.end()));
    }
    std::sort(chains.begin(), chains.end());
    const uint32_t id_mask = (1u << o.msg_bits) - 1;
    ById ids(*s);
    for (const auto& [cts_ns, msgs] : chains) {
        const ReliableMessage& head = s->reliable[msgs.front()];
        const Hosts h{head.src_ip, head.dst_ip};
        const int start = ids.first_after(h, cts_ns);
        if (start < 0) continue;
        uint32_t id = s->data[start].msg_id;
        for (size_t i = 0; i < msgs.size(); i++) {
            const ReliableMessage& r = s->reliable[msgs[i]];
            if (!r.has_cts || (i > 0 && r.seq != s->reliable[msgs[i - 1]].seq + 1)) break;
            for (uint32_t k = 0; k < r.streams; k++, id = (id + 1) & id_mask) {
                const int d = ids.with_id(h, id, r.cts_ns);
                if (d < 0) continue;  // none of its frames in the capture (an empty message)
                ids.take(static_cast<size_t>(d));
                link(s, msgs[i], static_cast<size_t>(d));
            }
        }
    }
}

}  // namespace sdr::tools
