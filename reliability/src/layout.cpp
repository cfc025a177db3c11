#include "engine_util.hpp"

#include <sdr/reliability/scheme.hpp>

namespace sdr::rel {

Layout Layout::of(const Code& c, const Geometry& g, uint64_t bytes)
{
    Layout l;
    l.bytes = bytes;
    l.chunks = static_cast<uint32_t>((bytes + g.chunk_bytes - 1) / g.chunk_bytes);
    if (const SchemeOps& o = ops(c); o.coded()) {
        l.k = c.k;
        l.slots = o.parity_slots(c);
        l.first_parity = o.parity_first(c);
        l.submessages = (l.chunks + c.k - 1) / c.k;
        l.parity = l.submessages * l.slots;
    }
    return l;
}

double wire_ns_per_byte(const Config& c, const Geometry& g)
{
    return 8.0 / c.bw_gbps * (g.mtu + kPacketOverheadBytes) / g.mtu;
}

uint64_t message_timeout_ns(const Config& c, uint64_t rto_ns, double ns_per_byte, uint64_t bytes)
{
    if (c.timeout_ms > 0) return static_cast<uint64_t>(c.timeout_ms * 1e6);
    return 10ull * (c.max_rounds + 2) * rto_ns + static_cast<uint64_t>(2 * ns_per_byte * double(bytes));
}

}  // namespace sdr::rel
