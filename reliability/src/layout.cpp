#include <sdr/reliability/engine.hpp>

namespace sdr::rel {

Layout Layout::of(const Config& c, const Geometry& g, uint64_t bytes)
{
    Layout l;
    l.bytes = bytes;
    l.chunks = static_cast<uint32_t>((bytes + g.chunk_bytes - 1) / g.chunk_bytes);
    if (is_ec(c.scheme)) {
        l.submessages = (l.chunks + c.k - 1) / c.k;
        l.parity = l.submessages * c.m;
    }
    return l;
}

// Wire time per payload byte: each MTU packet also carries 78 bytes of RoCEv2 headers + ICRC
// and 24 of Ethernet preamble, gap and FCS.
double wire_ns_per_byte(const Config& c, const Geometry& g)
{
    return 8.0 / c.bw_gbps * (g.mtu + 102.0) / g.mtu;
}

uint64_t message_timeout_ns(const Config& c, uint64_t rto_ns, double ns_per_byte, uint64_t bytes)
{
    if (c.timeout_ms > 0) return static_cast<uint64_t>(c.timeout_ms * 1e6);
    return 10ull * (c.max_rounds + 2) * rto_ns + static_cast<uint64_t>(2 * ns_per_byte * double(bytes));
}

}  // namespace sdr::rel
