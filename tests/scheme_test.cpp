// The scheme interface: the registry, the LT (fountain) code, and the control message's
// versioned parameter area.
#include <sdr/reliability/ctrl_msg.hpp>
#include <sdr/reliability/lt_code.hpp>
#include <sdr/reliability/scheme.hpp>
#include <sdr_rel.h>

#include <gtest/gtest.h>

#include <random>
#include <set>

using namespace sdr::rel;

TEST(Schemes, RegistryNamesParsesAndRoundTripsIds)
{
    std::vector<std::string> names;
    for (const SchemeOps* s : registered_schemes()) {
        names.push_back(s->name());
        EXPECT_EQ(find_scheme(s->name()), s);
        EXPECT_EQ(find_scheme(static_cast<uint8_t>(s->id)), s);
        EXPECT_EQ(s->coded(), s->repair == Repair::Code) << s->name();
    }
    // These first, in the order auto has always weighed them; newer schemes are appended.
    ASSERT_GE(names.size(), 5u);
    names.resize(5);
    EXPECT_EQ(names, (std::vector<std::string>{"sr", "sr-nack", "ec-xor", "ec-mds", "ec-lt"}));
    EXPECT_EQ(scheme_list().rfind("sr, sr-nack, ec-xor:k,m, ec-mds:k,m, ec-lt:k,m", 0), 0u) << scheme_list();
    Config c;
    std::string err;
    ASSERT_TRUE(parse_scheme("ec-lt:16,4", &c, &err)) << err;
    EXPECT_EQ(c.scheme, Scheme::EcLt);
    EXPECT_EQ(to_string(fixed_code(c)), "ec-lt:16,4");
    EXPECT_FALSE(parse_scheme("ec-lt:16,64", &c, &err));  // 4m repair symbols must fit 255
    EXPECT_FALSE(parse_scheme("fountain", &c, &err));
    EXPECT_NE(err.find("ec-lt[:k,m]"), std::string::npos) << err;
    EXPECT_EQ(find_scheme(uint8_t{0}), nullptr);
    EXPECT_EQ(find_scheme(uint8_t{255}), nullptr);
    EXPECT_EQ(scheme_name(Scheme{255}), nullptr);
    EXPECT_STREQ(to_string(Scheme{255}), "?");
}

// Each line of the registry (sdr_rel_schemes.def) is its file's SchemeOps: the file's id is the
// line's, the name and C enumerator come from the line, names are unique.
TEST(Schemes, EveryRegistryLineIsItsFilesScheme)
{
    struct Line {
        int id;
        const char* name;
        Scheme scheme;
        int c;
        const SchemeOps* ops;
    };
    const Line lines[] = {
#define SDR_REL_SCHEME(id, name, c, cxx) {id, name, Scheme::cxx, SDR_REL_##c, &k##cxx##Ops},
#include <sdr_rel_schemes.def>
#undef SDR_REL_SCHEME
    };
    ASSERT_EQ(std::size(lines), registered_schemes().size());
    std::set<std::string> names{"auto"};
    for (size_t i = 0; i < std::size(lines); i++) {
        const Line& l = lines[i];
        SCOPED_TRACE(l.name);
        EXPECT_EQ(registered_schemes()[i], l.ops);
        EXPECT_EQ(static_cast<int>(l.ops->id), l.id) << "the file's SchemeOps::id names another line";
        EXPECT_EQ(static_cast<int>(l.scheme), l.id);
        EXPECT_EQ(l.c, l.id);
        EXPECT_STREQ(l.ops->name(), l.name);
        EXPECT_TRUE(names.insert(l.name).second) << "a second scheme of this name";
    }
    EXPECT_EQ(static_cast<int>(Scheme::Auto), SDR_REL_AUTO);
    EXPECT_STREQ(kAutoOps.name(), "auto");
}

namespace {
std::vector<std::vector<uint8_t>> chunks(uint32_t n, size_t len, uint32_t seed)
{
    std::mt19937 r(seed);
    std::vector<std::vector<uint8_t>> v(n, std::vector<uint8_t>(len));
    for (auto& c : v)
        for (auto& b : c) b = static_cast<uint8_t>(r());
    return v;
}
}  // namespace

// Robust soliton degrees: every degree in 1..k, the graph the same on both ends.
TEST(LtCode, GraphIsDeterministicAndInRange)
{
    LtCode a(32), b(32);
    std::vector<uint32_t> x, y;
    uint32_t ones = 0;
    for (uint32_t i = 0; i < 1000; i++) {
        a.neighbours(3, i, &x);
        b.neighbours(3, i, &y);
        ASSERT_EQ(x, y);
        ASSERT_GE(x.size(), 1u);
        ASSERT_LE(x.size(), 32u);
        for (size_t j = 1; j < x.size(); j++) ASSERT_LT(x[j - 1], x[j]);  // distinct, ascending
        ASSERT_LT(x.back(), 32u);
        ones += x.size() == 1;
    }
    EXPECT_GT(ones, 0u);
    uint32_t differ = 0;  // another submessage draws another graph
    for (uint32_t i = 0; i < 100; i++) {
        a.neighbours(3, i, &x);
        a.neighbours(4, i, &y);
        differ += x != y;
    }
    EXPECT_GT(differ, 50u);
}

// Any set the peeling decoder accepts is decoded byte-exact; a set it refuses is reported so;
// with all 4m repair symbols, every pattern of up to m lost data chunks in these trials decodes.
TEST(LtCode, DecodesFromAnySufficientSetByteExact)
{
    const uint32_t k = 16, R = 32;
    const size_t len = 4096 + 8;  // not a multiple of 32: the unaligned XOR path too
    LtCode lt(k);
    auto data = chunks(k, len, 1);
    std::vector<std::vector<uint8_t>> rep(R, std::vector<uint8_t>(len));
    std::vector<const uint8_t*> d;
    for (auto& c : data) d.push_back(c.data());
    std::vector<uint8_t*> p;
    for (auto& c : rep) p.push_back(c.data());
    lt.encode(7, d.data(), p.data(), 0, R, len);
    // On demand: symbols 20..23 made alone equal the ones made in one go.
    std::vector<std::vector<uint8_t>> again(4, std::vector<uint8_t>(len));
    std::vector<uint8_t*> pa;
    for (auto& c : again) pa.push_back(c.data());
    lt.encode(7, d.data(), pa.data(), 20, 4, len);
    for (uint32_t i = 0; i < 4; i++) EXPECT_EQ(again[i], rep[20 + i]);

    std::mt19937 r(9);
    uint32_t decoded = 0, refused = 0;
    for (int trial = 0; trial < 300; trial++) {
        bool present[k + R];
        const uint32_t lost = 1 + r() % 6, held_rep = r() % (R + 1);
        for (uint32_t j = 0; j < k; j++) present[j] = true;
        for (uint32_t x = 0; x < lost; x++) present[r() % k] = false;
        for (uint32_t i = 0; i < R; i++) present[k + i] = r() % R < held_rep;
        std::vector<std::vector<uint8_t>> frag(k + R);
        std::vector<uint8_t*> f;
        for (uint32_t j = 0; j < k + R; j++) {
            frag[j] = j < k ? data[j] : rep[j - k];
            if (!present[j]) std::fill(frag[j].begin(), frag[j].end(), 0xEE);
            f.push_back(frag[j].data());
        }
        if (lt.decodable(7, present, R)) {
            ASSERT_TRUE(lt.decode(7, present, R, f.data(), len));
            for (uint32_t j = 0; j < k; j++) ASSERT_EQ(frag[j], data[j]) << "trial " << trial << " chunk " << j;
            decoded++;
        } else {
            EXPECT_FALSE(lt.decode(7, present, R, f.data(), len));
            refused++;
        }
    }
    EXPECT_GT(decoded, 150u);
    EXPECT_GT(refused, 0u);  // with few repair symbols peeling stalls: the receiver then asks for more
    // Every repair symbol held: one lost data chunk always decodes (a degree-1 path exists in 32).
    bool all[k + R];
    std::fill(all, all + k + R, true);
    uint32_t ok = 0;
    for (uint32_t j = 0; j < k; j++) {
        all[j] = false;
        ok += lt.decodable(7, all, R);
        all[j] = true;
    }
    EXPECT_EQ(ok, k);
}

TEST(CtrlMsg, Version1IsUnchangedAndVersion2CarriesParameters)
{
    CtrlMsg m;
    m.type = CtrlType::Cts;
    m.scheme = Scheme::EcMds;
    m.k = 32;
    m.m = 8;
    m.seq = 5;
    m.length = 1 << 20;
    std::vector<uint8_t> v1 = encode(m);
    ASSERT_EQ(v1.size(), kCtrlHeaderBytes);
    EXPECT_EQ(v1[0], 1);
    EXPECT_EQ(v1[6] | v1[7], 0);  // reserved

    m.scheme = Scheme::EcLt;
    m.params = {0x64, 0x00, 0xF4, 0x01};
    m.nbits = 10;
    m.bits = {0xFF, 0x03};
    std::vector<uint8_t> v2 = encode(m);
    ASSERT_EQ(v2.size(), kCtrlHeaderBytes + 4 + 2);
    EXPECT_EQ(v2[0], 2);
    EXPECT_EQ(v2[6], 4);
    EXPECT_EQ(v2[7], 0);
    CtrlMsg d;
    ASSERT_TRUE(decode(v2.data(), v2.size(), &d));
    EXPECT_EQ(d.params, m.params);
    EXPECT_EQ(d.bits, m.bits);
    EXPECT_EQ(d.scheme, Scheme::EcLt);
    EXPECT_EQ(encode(d), v2);
}

TEST(CtrlMsg, BadVersionsAndParameterAreasAreRefused)
{
    CtrlMsg m;
    m.scheme = Scheme::EcLt;
    m.params = {1, 2, 3};
    std::vector<uint8_t> v = encode(m);
    CtrlMsg d;
    ASSERT_TRUE(decode(v.data(), v.size(), &d));
    for (uint8_t version : {0, 3, 255}) {
        auto bad = v;
        bad[0] = version;
        EXPECT_FALSE(decode(bad.data(), bad.size(), &d)) << int(version);
    }
    auto longer = v;  // P says 4, the datagram holds 3
    longer[6] = 4;
    EXPECT_FALSE(decode(longer.data(), longer.size(), &d));
    auto empty = v;  // version 2 with no parameter area
    empty[6] = 0;
    empty.resize(kCtrlHeaderBytes);
    EXPECT_FALSE(decode(empty.data(), empty.size(), &d));
    std::vector<uint8_t> huge(kCtrlHeaderBytes + kCtrlMaxParams + 1, 0);
    std::copy(v.begin(), v.begin() + kCtrlHeaderBytes, huge.begin());
    huge[6] = static_cast<uint8_t>(kCtrlMaxParams + 1);
    EXPECT_FALSE(decode(huge.data(), huge.size(), &d));
    auto v1 = v;  // version 1: bytes 6..7 stay reserved, the 3 bytes are then a wrong length
    v1[0] = 1;
    EXPECT_FALSE(decode(v1.data(), v1.size(), &d));
    auto unknown = v;
    unknown[3] = 255;  // no scheme has wire id 255 (RegistryNamesParsesAndRoundTripsIds)
    EXPECT_FALSE(decode(unknown.data(), unknown.size(), &d));
}
