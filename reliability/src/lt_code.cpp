// LT code (Luby, "LT codes", FOCS 2002): robust soliton degrees, XOR repair symbols, peeling.
#include <sdr/reliability/codec.hpp>
#include <sdr/reliability/lt_code.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace sdr::rel {

namespace {
// splitmix64: the graph of (submessage, symbol) must be the same on both ends and cheap to redo.
uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
double unit(uint64_t* s)
{
    *s = mix(*s);
    return double(*s >> 11) * 0x1.0p-53;
}
}  // namespace

// μ(d) = (ρ(d) + τ(d)) / β: ideal soliton ρ(1) = 1/k, ρ(d) = 1/(d(d−1)); spike τ(d) = R/(dk) for
// d < k/R, τ(k/R) = R·ln(R/δ)/k (Luby 2002, definitions 10 and 11).
LtCode::LtCode(uint32_t k, double c, double delta) : k_(k), cdf_(k)
{
    const double R = std::max(1.0, c * std::log(k / delta) * std::sqrt(double(k)));
    const uint32_t spike = std::clamp<uint32_t>(static_cast<uint32_t>(std::floor(k / R)), 1, k);
    double sum = 0;
    for (uint32_t d = 1; d <= k; d++) {
        double rho = d == 1 ? 1.0 / k : 1.0 / (double(d) * (d - 1));
        double tau = d < spike ? R / (double(d) * k) : d == spike ? R * std::log(R / delta) / k : 0;
        sum += rho + std::max(0.0, tau);
        cdf_[d - 1] = sum;
    }
    for (double& v : cdf_) v /= sum;
}

void LtCode::neighbours(uint32_t sub, uint32_t esi, std::vector<uint32_t>* out) const
{
    uint64_t s = (uint64_t{sub} << 32) ^ esi ^ (uint64_t{k_} << 56);
    const double u = unit(&s);
    uint32_t d = static_cast<uint32_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin()) + 1;
    d = std::min(d, k_);
    out->clear();
    // d distinct chunks: Floyd's sampling, then ascending.
    for (uint32_t j = k_ - d; j < k_; j++) {
        uint32_t t = static_cast<uint32_t>(unit(&s) * (j + 1));
        if (t > j) t = j;
        if (std::find(out->begin(), out->end(), t) == out->end()) out->push_back(t);
        else out->push_back(j);
    }
    std::sort(out->begin(), out->end());
}

void LtCode::encode(uint32_t sub, const uint8_t* const* data, uint8_t* const* parity, uint32_t from, uint32_t count,
                    size_t len) const
{
    std::vector<uint32_t> nb;
    std::vector<const uint8_t*> src;
    for (uint32_t i = 0; i < count; i++) {
        neighbours(sub, from + i, &nb);
        src.clear();
        for (uint32_t j : nb) src.push_back(data[j]);
        xor_into(parity[i], src.data(), src.size(), len);
    }
}

bool LtCode::peel(uint32_t sub, const bool* present, uint32_t repair,
                  std::vector<std::pair<uint32_t, uint32_t>>* order) const
{
    std::vector<uint8_t> known(present, present + k_);
    uint32_t missing = static_cast<uint32_t>(std::count(known.begin(), known.end(), 0));
    if (!missing) return true;
    // Per held repair symbol: its neighbours, and how many of them are still unknown.
    std::vector<std::vector<uint32_t>> nb(repair);
    std::vector<uint32_t> unknown(repair, 0);
    std::vector<std::vector<uint32_t>> users(k_);  // repair symbols each chunk is in
    std::vector<uint32_t> ready;
    for (uint32_t i = 0; i < repair; i++) {
        if (!present[k_ + i]) continue;
        neighbours(sub, i, &nb[i]);
        for (uint32_t j : nb[i])
            if (!known[j]) {
                unknown[i]++;
                users[j].push_back(i);
            }
        if (unknown[i] == 1) ready.push_back(i);
    }
    while (!ready.empty() && missing) {
        uint32_t i = ready.back();
        ready.pop_back();
        if (unknown[i] != 1) continue;
        uint32_t c = *std::find_if(nb[i].begin(), nb[i].end(), [&](uint32_t j) { return !known[j]; });
        known[c] = 1;
        missing--;
        if (order) order->emplace_back(c, i);
        for (uint32_t u : users[c])
            if (--unknown[u] == 1) ready.push_back(u);
    }
    return missing == 0;
}

bool LtCode::decodable(uint32_t sub, const bool* present, uint32_t repair) const
{
    return peel(sub, present, repair, nullptr);
}

// Chunk c = repair symbol i XOR its other neighbours, in peeling order (each known by then).
bool LtCode::decode(uint32_t sub, const bool* present, uint32_t repair, uint8_t* const* frag, size_t len) const
{
    std::vector<std::pair<uint32_t, uint32_t>> order;
    if (!peel(sub, present, repair, &order)) return false;
    std::vector<uint32_t> nb;
    std::vector<const uint8_t*> src;
    for (auto [c, i] : order) {
        neighbours(sub, i, &nb);
        src.assign(1, frag[k_ + i]);
        for (uint32_t j : nb)
            if (j != c) src.push_back(frag[j]);
        xor_into(frag[c], src.data(), src.size(), len);
    }
    return true;
}

}  // namespace sdr::rel
