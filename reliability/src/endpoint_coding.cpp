// Endpoint's coding glue: a coded scheme's parity is encoded into the registered parity buffer
// right before it is injected, and a decodable submessage is rebuilt in the user's buffer. What
// is encoded and decoded is the scheme's (SchemeOps::coder); here are only buffers and bitmaps.
#include <sdr/reliability/endpoint.hpp>
#include <sdr/reliability/scheme.hpp>

#include "engine_util.hpp"

#include <cstring>

namespace sdr::rel {

// The coder of each code met, made on first use through its scheme's ops.
Coder& Endpoint::coder(const Code& c)
{
    auto key = std::tuple{c.scheme, c.k, c.m};
    auto it = coders_.find(key);
    if (it == coders_.end()) it = coders_.emplace(key, ops(c).coder(c)).first;
    return *it->second;
}

bool Endpoint::try_parity(Action& a)
{
    TxState& t = txs_.at(a.seq);
    if (t.ended) return true;
    const Code code = *tx_.code(a.seq);
    const Layout l = Layout::of(code, geo_, t.len);
    const uint32_t k = code.k, C = geo_.chunk_bytes;
    const uint64_t at = uint64_t{a.first} * l.slots + a.from;  // first parity chunk in the parity message
    uint8_t* par = t.parity_buf.data() + at * C;
    const uint32_t count = a.count & ~kEncoded;
    if (cfg_.compute && !(a.count & kEncoded)) {  // encode once, even if posting is retried
        const uint8_t* data[256];
        uint8_t* parity[256];
        uint32_t chunks = static_cast<uint32_t>((t.len + C - 1) / C);
        for (uint32_t j = 0; j < k; j++) {
            uint32_t c = a.first * k + j;
            if (c >= chunks) data[j] = zero_.data();
            else if (chunk_len(t.len, c) < C) {  // the short last chunk, zero-padded
                std::memset(scratch_.data(), 0, C);
                std::memcpy(scratch_.data(), t.buf + uint64_t{c} * C, chunk_len(t.len, c));
                data[j] = scratch_.data();
            } else data[j] = t.buf + uint64_t{c} * C;
        }
        for (uint32_t i = 0; i < count; i++) parity[i] = par + uint64_t{i} * C;
        coder(code).encode(a.first, data, parity, a.from, count, C);
        a.count |= kEncoded;
    }
    sdr_send_continue_wr w{};
    w.length = count * C;
    w.local_addr = reinterpret_cast<uint64_t>(par);
    if (t.parity_mr) sdr_mr_lkey_get(t.parity_mr, &w.lkey);
    w.remote_offset = at;
    if (!cfg_.compute) {  // payload-free runs: the parity packets carry the data buffer's bytes
        w.local_addr = reinterpret_cast<uint64_t>(t.buf);
        w.lkey = t.lkey;
        w.length = static_cast<uint32_t>(std::min<uint64_t>(w.length, t.len));
    }
    return sdr_streaming_send_continue(t.parity, &w) == SDR_SUCCESS;
}

void Endpoint::rebuild(uint64_t seq, uint32_t sub)
{
    if (!cfg_.compute) return;  // accounted by the engine, not computed
    RxState& r = rxs_.at(seq);
    const Layout l = Layout::of(r.code, geo_, r.len);
    const uint32_t k = r.code.k, m = l.slots, C = geo_.chunk_bytes;
    uint32_t chunks = static_cast<uint32_t>((r.len + C - 1) / C);
    bool present[512] = {};
    uint8_t* frag[512] = {};
    int32_t short_chunk = -1;
    for (uint32_t j = 0; j < k; j++) {
        uint32_t c = sub * k + j;
        if (c >= chunks) {
            present[j] = true;
            frag[j] = zero_.data();
            continue;
        }
        present[j] = (__atomic_load_n(&r.data_bits[c >> 3], __ATOMIC_ACQUIRE) >> (c & 7)) & 1;  // NIC-written
        if (chunk_len(r.len, c) < C) {  // decode the short last chunk through a padded copy
            short_chunk = static_cast<int32_t>(j);
            std::memset(scratch_.data(), 0, C);
            if (present[j]) std::memcpy(scratch_.data(), r.buf + uint64_t{c} * C, chunk_len(r.len, c));
            frag[j] = scratch_.data();
        } else {
            frag[j] = r.buf + uint64_t{c} * C;
        }
    }
    for (uint32_t i = 0; i < m; i++) {
        uint32_t p = sub * m + i;  // parity chunk i of the submessage
        present[k + i] = (__atomic_load_n(&r.parity_bits[p >> 3], __ATOMIC_ACQUIRE) >> (p & 7)) & 1;
        frag[k + i] = r.parity_buf.data() + uint64_t{p} * C;
    }
    // The engine asks only for submessages its scheme calls decodable (SchemeOps::decodable); a
    // decode that still fails leaves the missing chunks as they are, unrebuilt.
    if (!coder(r.code).decode(sub, present, frag, C)) return;
    if (short_chunk >= 0 && !present[short_chunk]) {
        uint32_t c = sub * k + static_cast<uint32_t>(short_chunk);
        std::memcpy(r.buf + uint64_t{c} * C, scratch_.data(), chunk_len(r.len, c));
    }
}

}  // namespace sdr::rel
