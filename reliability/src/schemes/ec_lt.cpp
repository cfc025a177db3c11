// ec-lt:k,m — a fountain (rateless) code: the LT code of lt_code.hpp (Luby, "LT codes", FOCS
// 2002) over each submessage's k data chunks. The data chunks go out as themselves with m repair
// symbols; after the fallback timeout the receiver asks for more repair symbols for the
// submessages it cannot peel yet, m more each round (2m, 3m, 4m in all), every 1.25 RTT until
// its bitmap shows them decoded; once the 4m reserved in the parity message are spent, it names
// the missing data chunks (SR repair), within the same max_rounds and global timeout as EC.
#include "estimates.hpp"

#include <sdr/reliability/lt_code.hpp>

namespace sdr::rel {

namespace {
constexpr uint32_t kRounds = 4;  // parity slots per submessage = kRounds · m

bool valid(uint32_t k, uint32_t m, std::string* err)
{
    if (k >= 1 && k <= 255 && m >= 1 && kRounds * m <= 255) return true;
    *err = "ec-lt needs 1 <= k <= 255 and 1 <= m <= 63 (4m repair symbols reserved per submessage)";
    return false;
}

uint32_t slots(const Code& c) { return kRounds * c.m; }

bool decodable(const Code& c, const SubmessageView& v)
{
    bool present[512];
    for (uint32_t j = 0; j < c.k; j++) present[j] = j >= v.n || v.data(j);  // past the end: known zeros
    for (uint32_t i = 0; i < v.parity_slots; i++) present[c.k + i] = v.parity(i);
    // Called on every bitmap update of a submessage: the degree table of k is kept per thread.
    thread_local std::unique_ptr<LtCode> lt;
    if (!lt || lt->k() != c.k) lt = std::make_unique<LtCode>(c.k);
    return lt->decodable(v.index, present, v.parity_slots);
}

class LtCoder final : public Coder {
public:
    LtCoder(uint32_t k, uint32_t slots) : lt_(k), slots_(slots) {}
    void encode(uint32_t sub, const uint8_t* const* data, uint8_t* const* parity, uint32_t from, uint32_t count,
                size_t len) override
    {
        lt_.encode(sub, data, parity, from, count, len);
    }
    bool decode(uint32_t sub, const bool* present, uint8_t* const* frag, size_t len) override
    {
        return lt_.decode(sub, present, slots_, frag, len);
    }

private:
    LtCode lt_;
    uint32_t slots_;
};

std::unique_ptr<Coder> coder(const Code& c) { return std::make_unique<LtCoder>(c.k, slots(c)); }

// The degree distribution's parameters, so both ends draw the same graph: c and delta in
// thousandths, u16 each.
std::vector<uint8_t> cts_params(const Code&)
{
    const uint16_t c = static_cast<uint16_t>(LtCode::kC * 1000), d = static_cast<uint16_t>(LtCode::kDelta * 1000);
    return {static_cast<uint8_t>(c), static_cast<uint8_t>(c >> 8), static_cast<uint8_t>(d), static_cast<uint8_t>(d >> 8)};
}

uint32_t repair_request(const Code& c, uint32_t round)
{
    return round + 2 <= kRounds ? (round + 2) * c.m : 0;
}
}  // namespace

const SchemeOps kEcLtOps{
    .id = Scheme::EcLt,
    .takes_params = true,
    .repair = Repair::Code,
    .valid = valid,
    .parity_slots = slots,
    .parity_first = m_parity,
    .decodable = decodable,
    .coder = coder,
    .estimate = nullptr,  // no model: auto never picks it
    .mean = nullptr,
    .cts_params = cts_params,
    .repair_request = repair_request,
};

}  // namespace sdr::rel
