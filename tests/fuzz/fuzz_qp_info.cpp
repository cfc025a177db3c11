// Fuzz target: the QP-info blob reader behind sdr_qp_connect (host/src/qp_info.cpp), through
// the public API on a simulated context.
//
// The input, cut or zero-padded to sdr_qp_info_size_get bytes, is the remote QP's blob handed
// to sdr_qp_connect on a fresh QP (2 channels, MTU 4 KiB, 4 KiB chunks, 16 slots of 64 KiB);
// "sim:1" holds a second QP whose real blob is the seed. Invariants:
//  - a refused blob returns SDR_ERROR with a message of sdr_qp_connect's, and leaves the QP unconnected (a send
//    is then refused: "the QP is not connected");
//  - an accepted blob describes a QP that sdr_qp_create could have made (chunk size within
//    [MTU, 2^30], slot at least a chunk and at most 2^32 bytes, slot packets within the
//    packet-offset bits, slots within the message-id bits, 2^40 bytes in flight at most);
//  - once connected, sends to the first and the last chunk of the remote slot, with and without
//    immediate, are accepted, the virtual time runs until idle, and a second sdr_qp_connect is
//    refused. Over UC every send completes locally. Over RC a send completes when the peer
//    acknowledges it: the real peer (the blob is sim:1's own) does; a blob naming another
//    address, QPN or key reaches nobody, and its first send then fails with SDR_ERROR, the
//    FAILED status and a message, and every later send is refused (the QP is in error).
// After an accepted blob the whole world is rebuilt, so every input meets the same QP.
#include "fuzz_input.hpp"

#include <sdr.h>
#include <sdr/emu/fabric.hpp>
#include <sdr_mr.h>
#include <sdr_sim.h>

#include <cstring>
#include <memory>
#include <vector>

namespace {

struct World {
    sdr_context* ctx[2] = {};
    sdr_qp* qp[2] = {};
    sdr_mr* mr = nullptr;
    std::vector<uint8_t> buf = std::vector<uint8_t>(8192, 0x5A);
    size_t info_size = 0;
    std::vector<uint8_t> peer_blob;  // sim:1's QP as it is

    World()
    {
        sdr::emu::FabricParams fp;
        fp.link.rtt_ms = 0.01;
        sdr::emu::SimFabric::install(std::make_unique<sdr::emu::SimFabric>(fp));
        sdr_dev_attr da{2, 4};
        sdr_qp_attr qa{12, 20, 4, SDR_MTU_4096, 1, 1, 0};
        const char* names[2] = {"sim:0", "sim:1"};
        for (int i = 0; i < 2; i++) {
            ctx[i] = sdr_context_create(names[i], &da);
            SDR_FUZZ_CHECK(ctx[i], "sdr_context_create: %s", sdr_last_error());
            qp[i] = sdr_qp_create(ctx[i], &qa);
            SDR_FUZZ_CHECK(qp[i], "sdr_qp_create: %s", sdr_last_error());
        }
        mr = sdr_mr_reg(ctx[0], buf.data(), buf.size(), SDR_ACCESS_REMOTE_WRITE);
        SDR_FUZZ_CHECK(mr, "sdr_mr_reg: %s", sdr_last_error());
        sdr_qp_info_size_get(qp[0], &info_size);
        peer_blob.resize(info_size);
        SDR_FUZZ_CHECK(sdr_qp_info_get(qp[1], peer_blob.data()) == SDR_SUCCESS, "sdr_qp_info_get: %s", sdr_last_error());
    }
    ~World()
    {
        sdr_mr_dereg(mr);
        for (int i = 0; i < 2; i++) {
            sdr_qp_destroy(qp[i]);
            sdr_context_destroy(ctx[i]);
        }
        sdr::emu::SimFabric::install(nullptr);
    }
};

// The blob's fields at the offsets host/README.md documents (magic, version, then one byte
// each: log2 MTU, chunk, slot, slot count; G; channels; receive flag; transport; immediate
// layout).
constexpr size_t kMtu = 8, kChunk = 9, kSlot = 10, kSlots = 11, kRc = 15, kMsgBits = 16, kOffsetBits = 17;

// The accepted geometry.
void check_geometry(const std::vector<uint8_t>& b)
{
    uint32_t mtu = b[kMtu], chunk = b[kChunk], slot = b[kSlot], slots = b[kSlots];
    uint32_t msg_bits = b[kMsgBits], offset_bits = b[kOffsetBits];
    SDR_FUZZ_CHECK(mtu >= 6 && mtu <= 12, "accepted MTU 2^%u", mtu);
    SDR_FUZZ_CHECK(chunk >= mtu && chunk <= 30, "accepted chunk 2^%u (MTU 2^%u)", chunk, mtu);
    SDR_FUZZ_CHECK(slot >= chunk && slot <= 32, "accepted slot 2^%u (chunk 2^%u)", slot, chunk);
    SDR_FUZZ_CHECK(slot - mtu <= offset_bits, "accepted slot of 2^%u packets, %u packet-offset bits", slot - mtu,
                   offset_bits);
    SDR_FUZZ_CHECK(slots <= msg_bits, "accepted 2^%u slots, %u message-id bits", slots, msg_bits);
    SDR_FUZZ_CHECK(slot + slots <= 40, "accepted 2^%u bytes in flight", slot + slots);
}

// Sends to the remote slot's first and last chunk (the invariants above).
void exercise(World& w, const std::vector<uint8_t>& b)
{
    uint32_t lkey = 0;
    sdr_mr_lkey_get(w.mr, &lkey);
    const bool rc_to_nobody = b[kRc] && b != w.peer_blob;
    bool failed = false;  // an RC send failed: the QP is in the error state
    uint32_t chunk = b[kChunk], slot = b[kSlot];
    uint64_t last = (uint64_t{1} << (slot - chunk)) - 1;
    struct Send {
        sdr_wr_opcode op;
        uint32_t len;
        uint64_t offset;
    } sends[3] = {{SDR_WR_WRITE, 4096, 0}, {SDR_WR_WRITE_WITH_IMM, 100, last}, {SDR_WR_WRITE_WITH_IMM, 0, 0}};
    for (const Send& s : sends) {
        sdr_send_wr wr{s.op, 0xC0FFEE, s.len, lkey, reinterpret_cast<uint64_t>(w.buf.data()), s.offset};
        sdr_send_handle* h = nullptr;
        int rc = sdr_send_post(w.qp[0], &wr, &h);
        if (failed) {
            SDR_FUZZ_CHECK(rc == SDR_ERROR && std::strstr(sdr_last_error(), "error state"),
                           "send of %u bytes after a failed one: %d %s", s.len, rc, sdr_last_error());
            continue;
        }
        SDR_FUZZ_CHECK(rc == SDR_SUCCESS, "send of %u bytes at chunk %llu: %d %s", s.len,
                       (unsigned long long)s.offset, rc, sdr_last_error());
        SDR_FUZZ_CHECK(sdr_sim_run_until_idle(w.ctx[0]) == SDR_SUCCESS, "run_until_idle: %s", sdr_last_error());
        int done = 0;
        sdr_send_status st{};
        rc = sdr_send_poll(h, &done, &st);
        if (rc_to_nobody && rc == SDR_ERROR) {
            SDR_FUZZ_CHECK(done && (st.flags & SDR_SEND_STATUS_FAILED) && std::strstr(sdr_last_error(), "not delivered"),
                           "failed RC send of %u bytes: done %d, flags %#x, %s", s.len, done, st.flags, sdr_last_error());
            failed = true;
            continue;
        }
        SDR_FUZZ_CHECK(rc == SDR_SUCCESS && done, "send of %u bytes at chunk %llu did not complete: %d %s", s.len,
                       (unsigned long long)s.offset, rc, sdr_last_error());
    }
    std::vector<uint8_t> again(b);
    SDR_FUZZ_CHECK(sdr_qp_connect(w.qp[0], again.data()) == SDR_ERROR, "a connected QP connected again");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    static World* w = new World;  // rebuilt only after an accepted blob
    std::vector<uint8_t> blob(w->info_size, 0);
    std::memcpy(blob.data(), data, std::min(size, blob.size()));
    int rc = sdr_qp_connect(w->qp[0], blob.data());
    if (rc == SDR_ERROR) {
        // Its own message: sdr_last_error() outlives successes, so an older one would still be there.
        SDR_FUZZ_CHECK(std::strncmp(sdr_last_error(), "sdr_qp_connect: ", 16) == 0, "SDR_ERROR without a message: %s",
                       sdr_last_error());
        // Unconnected: a send is refused as such (and nothing was posted to run).
        uint32_t lkey = 0;
        sdr_mr_lkey_get(w->mr, &lkey);
        sdr_send_wr wr{SDR_WR_WRITE, 0, 64, lkey, reinterpret_cast<uint64_t>(w->buf.data()), 0};
        sdr_send_handle* h = nullptr;
        rc = sdr_send_post(w->qp[0], &wr, &h);
        SDR_FUZZ_CHECK(rc == SDR_ERROR && std::strstr(sdr_last_error(), "the QP is not connected"),
                       "a refused blob left the QP connected: a send returned %d (%s)", rc, sdr_last_error());
        return 0;
    }
    SDR_FUZZ_CHECK(rc == SDR_SUCCESS, "sdr_qp_connect returned %d", rc);
    check_geometry(blob);
    exercise(*w, blob);
    delete w;
    w = new World;
    return 0;
}
