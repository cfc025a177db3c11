// sdr_rel.h: the C face of Endpoint.
#include <sdr/reliability/endpoint.hpp>
#include <sdr/reliability/scheme.hpp>
#include <sdr_rel.h>

#include <cstdio>
#include <cstring>

using namespace sdr::rel;

// Both enums take the registry's ids from sdr_rel_schemes.def; auto's is written in each.
static_assert(static_cast<int>(Scheme::Auto) == SDR_REL_AUTO);

struct sdr_rel_endpoint {
    std::unique_ptr<Endpoint> ep;
};

namespace {
thread_local std::string g_err;
int fail(std::string m)
{
    g_err = std::move(m);
    return SDR_ERROR;
}
Config to_config(const sdr_rel_attr& a)
{
    Config c;
    int s;
    std::memcpy(&s, &a.scheme, sizeof s);  // C callers may store any integer
    c.scheme = static_cast<Scheme>(s >= 1 && s <= 255 && find_scheme(static_cast<uint8_t>(s)) ? s : 0);
    c.k = a.k;
    c.m = a.m;
    c.rtt_ms = a.rtt_ms;
    c.bw_gbps = a.bw_gbps;
    c.alpha = a.alpha;
    c.max_rounds = a.max_rounds;
    c.timeout_ms = a.timeout_ms;
    c.drop_hint = a.drop_hint;
    return c;
}
void to_c(const MessageStats& m, sdr_rel_stats* out)
{
    *out = sdr_rel_stats{};
    out->ok = m.ok ? 1 : 0;
    std::snprintf(out->error, sizeof out->error, "%s", m.error.c_str());
    out->bytes = m.bytes;
    out->post_ns = m.post_ns;
    out->done_ns = m.done_ns;
    out->chunks = m.chunks;
    out->retransmitted_chunks = m.retransmitted_chunks;
    out->decoded_chunks = m.decoded_chunks;
    out->fallbacks = m.fallbacks;
    out->rounds = m.rounds;
    out->scheme = static_cast<sdr_rel_scheme>(m.code.scheme);
    out->k = m.code.k;
    out->m = m.code.m;
}
int relay(int rc)
{
    if (rc == SDR_ERROR) g_err = last_error();
    return rc;
}
}  // namespace

extern "C" {

void sdr_rel_attr_default(sdr_rel_attr* a)
{
    if (!a) return;
    Config c;
    *a = sdr_rel_attr{};
    a->scheme = SDR_REL_SR;
    a->k = c.k;
    a->m = c.m;
    a->rtt_ms = c.rtt_ms;
    a->bw_gbps = c.bw_gbps;
    a->alpha = c.alpha;
    a->max_rounds = c.max_rounds;
    a->timeout_ms = c.timeout_ms;
    a->drop_hint = c.drop_hint;
}

int sdr_rel_attr_parse_scheme(sdr_rel_attr* a, const char* text)
{
    if (!a || !text) return fail("sdr_rel_attr_parse_scheme: attr or text is NULL");
    Config c = to_config(*a);
    c.scheme = Scheme::Sr;
    std::string err;
    if (!parse_scheme(text, &c, &err)) return fail("sdr_rel_attr_parse_scheme: " + err);
    a->scheme = static_cast<sdr_rel_scheme>(c.scheme);
    a->k = c.k;
    a->m = c.m;
    return SDR_SUCCESS;
}

sdr_rel_endpoint* sdr_rel_endpoint_create(sdr_context* ctx, sdr_qp* qp, const sdr_qp_attr* qa, const sdr_rel_attr* a)
{
    if (!qa || !a) return fail("sdr_rel_endpoint_create: qp_attr or attr is NULL"), nullptr;
    std::string err;
    auto ep = Endpoint::create(ctx, qp, *qa, to_config(*a), &err);
    if (!ep) return fail("sdr_rel_endpoint_create: " + err), nullptr;
    return new sdr_rel_endpoint{std::move(ep)};
}

int sdr_rel_endpoint_destroy(sdr_rel_endpoint* ep)
{
    if (!ep) return fail("sdr_rel_endpoint_destroy: endpoint is NULL");
    delete ep;
    return SDR_SUCCESS;
}

int sdr_rel_send(sdr_rel_endpoint* ep, const void* buf, uint64_t len, uint32_t lkey, uint64_t* id)
{
    if (!ep) return fail("sdr_rel_send: endpoint is NULL");
    return relay(ep->ep->send(buf, len, lkey, id));
}

int sdr_rel_recv(sdr_rel_endpoint* ep, void* buf, uint64_t len, uint32_t lkey, uint64_t* id)
{
    if (!ep) return fail("sdr_rel_recv: endpoint is NULL");
    return relay(ep->ep->recv(buf, len, lkey, id));
}

int sdr_rel_send_poll(sdr_rel_endpoint* ep, uint64_t id, sdr_rel_stats* st)
{
    if (!ep || !st) return fail("sdr_rel_send_poll: endpoint or stats is NULL");
    MessageStats m;
    int rc = relay(ep->ep->send_result(id, &m));
    if (rc == SDR_SUCCESS) to_c(m, st);
    return rc;
}

int sdr_rel_recv_poll(sdr_rel_endpoint* ep, uint64_t id, sdr_rel_stats* st)
{
    if (!ep || !st) return fail("sdr_rel_recv_poll: endpoint or stats is NULL");
    MessageStats m;
    int rc = relay(ep->ep->recv_result(id, &m));
    if (rc == SDR_SUCCESS) to_c(m, st);
    return rc;
}

int sdr_rel_progress(sdr_rel_endpoint* ep, uint64_t* next)
{
    if (!ep) return fail("sdr_rel_progress: endpoint is NULL");
    uint64_t t = ep->ep->progress();
    if (next) *next = t;
    return SDR_SUCCESS;
}

int sdr_rel_path_get(sdr_rel_endpoint* ep, sdr_rel_path* path)
{
    if (!ep || !path) return fail("sdr_rel_path_get: endpoint or path is NULL");
    PathEstimate e = ep->ep->path_estimate();
    PathState s = ep->ep->path_state();
    *path = sdr_rel_path{e.rtt_ms, e.bw_gbps, e.drop, ep->ep->drop_samples(), s.rttvar_ms, s.rto_ms, s.rtt_samples,
                         s.rate_samples, s.min_rtt_ms};
    return SDR_SUCCESS;
}

const char* sdr_rel_last_error(void) { return g_err.c_str(); }

}  // extern "C"
