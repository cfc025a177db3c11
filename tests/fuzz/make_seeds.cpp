// Writes the seed corpora of the fuzz targets from what the code itself writes: frames the
// emulated NIC puts on the wire (captured by the simulator's pcap tap), QP-info blobs from
// sdr_qp_info_get, control messages from the engines, the bootstrap's bytes from sdr_oob_send,
// and firmware event programs that replay a real transfer.
//   make_seeds DIR      (DIR = tests/fuzz/corpus; one subdirectory per target)
// Rerun it when a format changes (keys, QPNs, the blob, a control message), then commit.
#include "fuzz_input.hpp"
#include "nic_world.hpp"
#include "verbs_world.hpp"

#include <sdr/emu/cm_mad.hpp>
#include <sdr/firmware/fw.h>
#include <sdr/host/oob_fd.hpp>
#include <sdr/reliability/ctrl_msg.hpp>
#include <sdr_oob.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;
using sdr::fuzz::put_le;

namespace {

fs::path g_dir;

void write(const std::string& target, const std::string& name, const Bytes& b)
{
    fs::create_directories(g_dir / target);
    std::ofstream f(g_dir / target / name, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!f) throw std::runtime_error("cannot write " + (g_dir / target / name).string());
}

void need(bool ok, const std::string& what)
{
    if (!ok) throw std::runtime_error(what + ": " + sdr_last_error());
}

// ---- nic_rx: real frames from NIC 0 to NIC 1 of the same world ---------------------------------

std::vector<Bytes> read_pcap(const std::string& path)
{
    std::ifstream f(path, std::ios::binary);
    Bytes all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<Bytes> frames;
    for (size_t p = 24; p + 16 <= all.size();) {
        uint32_t cap = all[p + 8] | all[p + 9] << 8 | all[p + 10] << 16 | uint32_t{all[p + 11]} << 24;
        p += 16;
        if (p + cap > all.size()) break;
        frames.emplace_back(all.begin() + static_cast<long>(p), all.begin() + static_cast<long>(p + cap));
        p += cap;
    }
    return frames;
}

Bytes frames_input(uint8_t flags, const std::vector<Bytes>& frames)
{
    Bytes in{flags};
    for (const Bytes& f : frames) {
        put_le(in, f.size(), 2);
        in.insert(in.end(), f.begin(), f.end());
    }
    return in;
}

void nic_rx()
{
    const std::string pcap = (fs::temp_directory_path() / "sdr_make_seeds.pcap").string();
    {
        sdr::fuzz::NicWorld nw(pcap);
        sdr::SimWorld& w = nw.world();
        Bytes src(4096);
        for (size_t i = 0; i < src.size(); i++) src[i] = static_cast<uint8_t>(i * 7 + 3);
        uint32_t lkey = w.lkey(0, src.data(), src.size());
        // messages 0..4 as the receiver posted them: 4096, 3000, 100 (with immediate), 4096, 4096
        const uint32_t len[5] = {4096, 3000, 100, 4096, 4096};
        for (uint32_t n = 0; n < 5; n++) {
            sdr_send_wr wr{n == 2 || n == 4 ? SDR_WR_WRITE_WITH_IMM : SDR_WR_WRITE, 0xA5A50000u + n, len[n], lkey,
                           reinterpret_cast<uint64_t>(src.data()), 0};
            sdr_send_handle* h = nullptr;
            need(sdr_send_post(w.qp(0), &wr, &h) == SDR_SUCCESS, "sdr_send_post");
            w.run_until_idle();
            int done = 0;
            need(sdr_send_poll(h, &done, nullptr) == SDR_SUCCESS && done, "sdr_send_poll");
        }
        const char hello[] = "clear to send?";
        need(sdr_ctrl_send(w.qp(0), hello, sizeof hello) == SDR_SUCCESS, "sdr_ctrl_send");
        w.run_until_idle();
    }
    std::vector<Bytes> frames = read_pcap(pcap);
    fs::remove(pcap);
    // frames in capture order: message 0 (4 packets), 1 (3), 2 (1 + 7 padding), 3 (4), 4 (4 + 4
    // padding), the datagram
    const size_t per[6] = {4, 3, 8, 4, 8, 1};
    size_t at = 0;
    for (int m = 0; m < 6; m++) {
        if (at + per[m] > frames.size()) throw std::runtime_error("nic_rx: fewer frames captured than sent");
        std::vector<Bytes> msg(frames.begin() + static_cast<long>(at), frames.begin() + static_cast<long>(at + per[m]));
        at += per[m];
        write("nic_rx", m < 5 ? "message" + std::to_string(m) : "ctrl-datagram", frames_input(0, msg));
    }
    // one data frame with the lengths and checksums repaired (mutations then survive them),
    // with its QPN and rkey taken as indices too, and with its source made the peer's
    write("nic_rx", "repaired-frame", frames_input(0x07, {frames[4]}));
    write("nic_rx", "symbolic-frame", frames_input(0x1F, {frames[4]}));
    write("nic_rx", "peer-frame", frames_input(0x3F, {frames[4]}));
    write("nic_rx", "peer-datagram", frames_input(0x3F, {frames.back()}));
}

// ---- verbs_rx: real frames between the two NICs of verbs_world.hpp ----------------------------

// One action of fuzz_verbs_rx's input each: a frame, B sending up to n packets, ms milliseconds.
void add_frame(Bytes& in, const Bytes& f)
{
    in.push_back(0);
    put_le(in, f.size(), 2);
    in.insert(in.end(), f.begin(), f.end());
}
void add_pump(Bytes& in, size_t n) { in.push_back(static_cast<uint8_t>(2 + 4 * (n - 1))); }
void add_time(Bytes& in, size_t ms) { in.push_back(static_cast<uint8_t>(3 + 4 * (ms - 1))); }

void verbs_rx()
{
    using W = sdr::fuzz::VerbsWorld;
    {  // A's requests to B: RC SEND, WRITE, READ request, SEND with immediate on the SRQ; UC; UD
        W w;
        w.queue_requests(w.a(), w.b());
        Bytes in{0};
        for (const Bytes& f : w.pump(w.a(), 64)) add_frame(in, f);
        add_pump(in, 16);  // B's ACKs and READ responses
        write("verbs_rx", "requests-to-b", in);
        Bytes repaired{0x7F};  // every repair: the frames' own values are kept
        repaired.insert(repaired.end(), in.begin() + 1, in.end());
        write("verbs_rx", "requests-to-b-repaired", repaired);
    }
    {  // B sends its requests; A's answers come back: ACKs and the READ's responses
        W w;
        w.queue_requests(w.b(), w.a());
        Bytes in{0};
        add_pump(in, 32);
        for (const Bytes& f : w.pump(w.b(), 32)) w.a().nic->rx_frame(f.data(), f.size());
        for (const Bytes& f : w.pump(w.a(), 64)) add_frame(in, f);
        write("verbs_rx", "answers-to-b", in);
    }
    {  // B's requests go unanswered: its timers send them again, then give up
        Bytes in{0};
        add_pump(in, 32);
        for (int i = 0; i < 6; i++) {
            add_time(in, 40);
            add_pump(in, 32);
        }
        write("verbs_rx", "b-times-out", in);
    }
}

// ---- firmware: programs replaying a transfer (fuzz_firmware.cpp's operations) -------------

struct Program {
    Bytes b;
    void op(std::initializer_list<int> v)
    {
        for (int x : v) b.push_back(static_cast<uint8_t>(x));
    }
};

// Geometry bytes: mtu, chunk, slot (log2 increments), log2 slots, channels - 1, layout, rate.
Program geometry(int mtu_log, int log_ppc, int slot_chunks_log, int log_slots, int channels, int rate)
{
    Program p;
    p.op({mtu_log - 6, log_ppc, slot_chunks_log, log_slots, channels - 1, 0, rate});
    return p;
}

// Receive posted (op 6, whole slot), message sent with immediate (op 8), the NIC sends it
// (op 10), then one CQE per packet as the receiver sees them (op 0), fragments included.
Bytes transfer(int mtu_log, int log_ppc, int slot_chunks_log, int channels, int rate, uint32_t user_imm)
{
    Program p = geometry(mtu_log, log_ppc, slot_chunks_log, 1, channels, rate);
    p.op({6, 0, 1});
    p.op({8, 1, 0, 1});
    for (int i = 0; i < 4; i++) p.b.push_back(static_cast<uint8_t>(user_imm >> (8 * i)));
    uint32_t npackets = 1u << (log_ppc + slot_chunks_log);
    for (uint32_t k = 0; k < (npackets + 63) / 64 + 1; k++) {
        if (rate & 1) p.op({5});  // paced: the timer
        p.op({10, 63});
    }
    for (uint32_t pk = 0; pk < npackets; pk++) {
        uint32_t frag = (user_imm >> (4 * (pk % 8))) & 15;
        p.op({0, 0, 0, 0, static_cast<int>(pk & 0xFF), static_cast<int>(pk >> 8), static_cast<int>(frag), 0, 0, 0});
    }
    return p.b;
}

void firmware()
{
    write("firmware", "transfer-1k-mtu-2-packet-chunks", transfer(10, 1, 1, 2, 0, 0xDEADBEEF));
    write("firmware", "transfer-counted-chunks", transfer(6, 7, 1, 3, 0, 0x01234567));
    write("firmware", "transfer-paced", transfer(12, 0, 2, 1, 3, 0x89ABCDEF));
    write("firmware", "transfer-sq-full", transfer(6, 6, 2, 1, 0, 0x0F0F0F0F));
    // short message: 1 data packet and 7 zero-length padding packets carry the immediate
    Program p = geometry(12, 0, 0, 0, 1, 0);
    p.op({6, 0, 0, 0x00, 0x04, 0, 0});                          // a receive of 1024 bytes
    p.op({8, 0, 0x10, 0, 0, 1, 0x78, 0x56, 0x34, 0x12});      // 16 x 64 bytes, immediate 0x12345678
    p.op({10, 8});
    p.op({0, 0, 0, 0, 0, 0, 8, 0, 0, 0});                     // the data packet, fragment 0
    for (int j = 1; j < 8; j++) p.op({0, 0, 0, 4, j, 0, (0x12345678 >> (4 * j)) & 15, 0, 0, 0});
    write("firmware", "short-message-immediate", p.b);
}

// ---- ctrl_msg: a lossless run per scheme, and real control messages injected ---------------

void ctrl_msg()
{
    using namespace sdr::rel;
    const char* names[5] = {"sr", "sr-nack", "ec-xor", "ec-mds", "auto"};
    for (int s = 0; s < 5; s++) {
        Bytes b{static_cast<uint8_t>(s), 3, 20, 60};
        for (int i = 0; i < 40; i++) {
            b.push_back(1);          // a datagram to the receiver
            b.push_back(0x15);       // one to the sender (operation 1, bit 4)
            b.push_back(4);          // chunks arrive
            b.push_back(16);
            b.push_back(7);          // 0.3 ms pass
            put_le(b, 300, 2);
        }
        write("ctrl_msg", std::string("lossless-") + names[s], b);
    }
    // Messages as the engines write them, addressed to this connection's engines (incarnations
    // 0x5E1D sender, 0x2EC5 receiver, see fuzz_ctrl_msg.cpp), injected into an SR run.
    auto inject = [](Bytes& b, const CtrlMsg& m) {
        Bytes d = encode(m);
        b.push_back(0);
        put_le(b, d.size(), 2);
        b.insert(b.end(), d.begin(), d.end());
    };
    CtrlMsg cts;
    cts.type = CtrlType::Cts;
    cts.seq = 1;
    cts.length = 20000;
    cts.from = 0x2EC5;
    CtrlMsg ack = cts;
    ack.type = CtrlType::Ack;
    ack.base = 2;
    ack.nbits = 3;
    ack.bits = {5};
    ack.newest = 3;
    CtrlMsg nack = ack;
    nack.type = CtrlType::Nack;
    nack.base = 0;
    nack.nbits = 5;
    nack.bits = {0x1B};
    CtrlMsg req;
    req.type = CtrlType::Req;
    req.seq = 0;
    req.length = 3;
    req.from = 0x5E1D;
    req.to = 0x2EC5;
    CtrlMsg abort = req;
    abort.type = CtrlType::Abort;
    abort.seq = 2;
    const std::map<std::string, CtrlMsg> msgs{{"cts", cts}, {"ack", ack}, {"nack", nack}, {"req", req},
                                              {"abort", abort}};
    for (const auto& [name, m] : msgs) {
        Bytes b{0, 3, 20, 60, 1, 0x15, 4, 16};
        inject(b, m);
        for (int i = 0; i < 10; i++) b.insert(b.end(), {1, 0x15, 4, 16, 7, 0x2C, 0x01});
        write("ctrl_msg", "inject-" + name, b);
    }
}

// ---- qp_info: blobs of real QPs -------------------------------------------------------------

void qp_info()
{
    sdr::emu::FabricParams fp;
    fp.link.rtt_ms = 0.01;
    sdr::emu::SimFabric::install(std::make_unique<sdr::emu::SimFabric>(fp));
    sdr_dev_attr da{2, 4};
    sdr_context* ctx[2] = {sdr_context_create("sim:0", &da), sdr_context_create("sim:1", &da)};
    need(ctx[0] && ctx[1], "sdr_context_create");
    // the fuzz target's own QP first (so the peer's QPNs are those of its world), then peers
    sdr_qp_attr mine{12, 20, 4, SDR_MTU_4096, 1, 1, 0};
    sdr_qp* a = sdr_qp_create(ctx[0], &mine);
    const std::map<std::string, sdr_qp_attr> peers{
        {"peer-same-geometry", mine},
        {"peer-1MiB-slots", sdr_qp_attr{12, 24, 4, SDR_MTU_4096, 1, 1, 0}},
        {"peer-1024-slots", sdr_qp_attr{12, 30, 10, SDR_MTU_4096, 1, 1, 0}},
        {"peer-receive-disabled", sdr_qp_attr{12, 20, 4, SDR_MTU_4096, 1, 0, 0}},
        {"peer-mtu-1024", sdr_qp_attr{12, 20, 4, SDR_MTU_1024, 1, 1, 0}},
    };
    std::vector<sdr_qp*> qps{a};
    for (const auto& [name, attr] : peers) {
        sdr_qp_attr at = attr;
        sdr_qp* q = sdr_qp_create(ctx[1], &at);
        need(q, "sdr_qp_create " + name);
        size_t n = 0;
        sdr_qp_info_size_get(q, &n);
        Bytes blob(n);
        need(sdr_qp_info_get(q, blob.data()) == SDR_SUCCESS, "sdr_qp_info_get");
        write("qp_info", name, blob);
        qps.push_back(q);
    }
    for (sdr_qp* q : qps) sdr_qp_destroy(q);
    for (sdr_context* c : ctx) sdr_context_destroy(c);
    sdr::emu::SimFabric::install(nullptr);
}

// ---- oob: the bytes sdr_oob writes ------------------------------------------------------------

void oob()
{
    int sv[2];
    need(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    // the peer's handshake must be there before ours completes
    const uint8_t hello[8] = {'S', 'D', 'R', 'B', 1, 0, 0, 0};
    need(send(sv[1], hello, 8, 0) == 8, "send");
    sdr_oob* o = sdr::host::oob_adopt(sv[0], "make_seeds", 1000);
    need(o, "oob_adopt");
    std::vector<Bytes> msgs{{}, {'a', 'b', 'c'}, Bytes(100, 0x42), Bytes(5000, 0x17)};
    for (const Bytes& m : msgs) need(sdr_oob_send(o, m.data(), m.size()) == SDR_SUCCESS, "sdr_oob_send");
    sdr_oob_close(o);
    Bytes stream;
    uint8_t buf[65536];
    for (ssize_t n; (n = recv(sv[1], buf, sizeof buf, 0)) > 0;) stream.insert(stream.end(), buf, buf + n);
    close(sv[1]);
    // cap byte 4 (100 bytes): the 5000-byte message is refused first, then taken
    Bytes all{4};
    all.insert(all.end(), stream.begin(), stream.begin() + static_cast<long>(std::min<size_t>(stream.size(), 4096)));
    write("oob", "messages-0-3-100-cut", all);
    Bytes whole{4};
    whole.insert(whole.end(), stream.begin(), stream.end());
    write("oob", "messages-0-3-100-5000", whole);
    Bytes small{5};
    small.insert(small.end(), stream.begin(), stream.begin() + 8 + 4 + 0 + 4 + 3 + 4 + 100);
    write("oob", "messages-0-3-100", small);
    Bytes handshake{0};
    handshake.insert(handshake.end(), stream.begin(), stream.begin() + 8);
    write("oob", "handshake-only", handshake);
}

}  // namespace

// ---- cm_mad: one MAD of each CM message, as the agent writes them --------------------------

void cm_mad()
{
    using namespace sdr::emu::cm;
    auto put = [](const std::string& name, const CmMessage& msg) {
        CmMad m;
        m.hdr.tid = 0x0000123400000001ull;
        m.msg = msg;
        Bytes b(kMadBytes);
        encode_mad(m, b.data());
        write("cm_mad", name, b);
    };
    ReqMsg req;
    req.local_comm_id = 0x8FAF7001;
    req.service_id = 0x0000000001061D2Full;
    req.local_qpn = 0x84F000;
    req.responder_resources = req.initiator_depth = 4;
    req.remote_cm_response_timeout = req.local_cm_response_timeout = 17;
    req.flow_control = true;
    req.starting_psn = 0xABCD;
    req.retry_count = req.rnr_retry_count = 7;
    req.pkey = 0xFFFF;
    req.path_mtu = 3;
    req.max_cm_retries = 3;
    req.primary.local_lid = req.primary.remote_lid = 0xFFFF;
    req.primary.local_gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 1};
    req.primary.remote_gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 2};
    req.primary.hop_limit = 64;
    req.primary.local_ack_timeout = 14;
    encode_ip_cm_header(IpCmHeader{0, 4, 50000, ip_cm_addr_v4(0x0A000001), ip_cm_addr_v4(0x0A000002)},
                        req.private_data.data());
    put("req", req);
    put("mra", MraMsg{0x1002, 0x8FAF7001, 0, 18, {}});
    RejMsg rej;
    rej.remote_comm_id = 0x8FAF7001;
    rej.reason = 8;
    put("rej-invalid-service-id", rej);
    RepMsg rep;
    rep.local_comm_id = 0x1002;
    rep.remote_comm_id = 0x8FAF7001;
    rep.local_qpn = 0x85A001;
    rep.starting_psn = 0xBEEF;
    rep.responder_resources = rep.initiator_depth = 4;
    rep.flow_control = true;
    rep.rnr_retry_count = 7;
    put("rep", rep);
    put("rtu", RtuMsg{0x8FAF7001, 0x1002, {}});
    put("dreq", DreqMsg{0x8FAF7001, 0x1002, 0x85A001, {}});
    put("drep", DrepMsg{0x1002, 0x8FAF7001, {}});
    SidrReqMsg sreq;
    sreq.request_id = 0x8FAF7002;
    sreq.pkey = 0xFFFF;
    sreq.service_id = 0x0000000001110FA0ull;
    encode_ip_cm_header(IpCmHeader{0, 4, 40000, ip_cm_addr_v4(0x0A000001), ip_cm_addr_v4(0x0A000002)},
                        sreq.private_data.data());
    put("sidr-req", sreq);
    SidrRepMsg srep;
    srep.request_id = 0x8FAF7002;
    srep.qpn = 0x85A002;
    srep.service_id = 0x0000000001110FA0ull;
    srep.qkey = 0x01234567;
    put("sidr-rep", srep);
}

// ---- cm_agent: programs of consumer calls, time and MADs (fuzz_cm_agent.cpp's operations) -----

void cm_agent()
{
    const Bytes run = {7, 10, 0};  // 1 ms passes
    auto cat = [](std::initializer_list<Bytes> parts) {
        Bytes b;
        for (const Bytes& p : parts) b.insert(b.end(), p.begin(), p.end());
        return b;
    };
    // a connects to b's TCP service with 5 bytes of private data, QPN 0x1234, MTU 1024
    const Bytes connect = {0x00, 1, 5, 0x34, 0x12, 0, 0, 2};
    const Bytes answer_b = {0x82}, answer_a = {0x02};
    // disconnect: on a, its one ID; on b, each of its three IDs in turn (listeners refuse)
    const Bytes disc_a = {0x04, 0}, disc_b = {0x84, 0, 0x84, 1, 0x84, 2};
    write("cm_agent", "connect-accept-disconnect",
          cat({connect, run, answer_b, run, answer_a, run, disc_a, run, disc_b, {7, 0x20, 0x4E}}));
    write("cm_agent", "consumer-reject", cat({connect, run, {0x83, 28, 0}, run}));
    write("cm_agent", "sidr", cat({{0x01, 1, 10, 0x77, 0, 0, 0, 0}, run, answer_b, run}));
    write("cm_agent", "no-listener", cat({{0x00, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 0, 0, 3}, run}));
    // a connects; the REQ's retries run into b, which never answers: MRA for each, then time
    write("cm_agent", "slow-consumer", cat({connect, {7, 0x20, 0x4E}, {7, 0x20, 0x4E}, answer_b, run, answer_a, run}));
    // hostile MADs into b, one of each message, comm IDs of live IDs, a few bytes changed
    // (op, kind, flags 1: live IDs and the listened services; then each kind's own fields; then
    // one byte changed: at 60, 0xA5)
    const Bytes change = {1, 60, 0xA5};
    const std::vector<Bytes> fields = {
        {3, 1, 3, 17},      // REQ: MTU code, transport UC, Max CM Retries, response timeout
        {0, 18},            // MRA of a REQ, service timeout
        {0, 28, 0},         // REJ of a REQ, consumer reject
        {0x45, 0x23, 1, 0}, // REP: QPN
        {},                 // RTU
        {0x45, 0x23, 1, 0}, // DREQ: remote QPN
        {},                 // DREP
        {},                 // SIDR_REQ
        {0, 0x99, 0, 1, 0}, // SIDR_REP: status, QPN
    };
    Bytes hostile = cat({connect, run});
    for (uint8_t kind = 0; kind < 9; kind++)
        hostile = cat({hostile, {0x88, kind, 1, 0, 0}, fields[kind], change, run});
    write("cm_agent", "hostile-mads", hostile);
}

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::cerr << "usage: make_seeds DIR   (tests/fuzz/corpus)\n";
        return 2;
    }
    g_dir = argv[1];
    try {
        nic_rx();
        firmware();
        ctrl_msg();
        qp_info();
        oob();
        verbs_rx();
        cm_mad();
        cm_agent();
    } catch (const std::exception& e) {
        std::cerr << "make_seeds: " << e.what() << "\n";
        return 1;
    }
    std::cout << "seeds written to " << g_dir << "\n";
    return 0;
}
