// The out-of-band TCP bootstrap (sdr_oob.h) on loopback: framing of any size, the handshake,
// timeouts that return on time, and a clear error for every way the peer can be absent or wrong.
#include <sdr.h>
#include <sdr_oob.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <vector>

namespace {

// A TCP port nobody listens on right now (the kernel's pick, released again).
uint16_t free_port()
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    getsockname(s, reinterpret_cast<sockaddr*>(&sa), &len);
    close(s);
    return ntohs(sa.sin_port);
}

struct Pair {
    sdr_oob* server = nullptr;
    sdr_oob* client = nullptr;
    explicit Pair(uint16_t port)
    {
        auto srv = std::async(std::launch::async, [port] { return sdr_oob_listen("127.0.0.1", port, 5000); });
        client = sdr_oob_connect("127.0.0.1", port, 5000);
        server = srv.get();
    }
    ~Pair()
    {
        sdr_oob_close(server);
        sdr_oob_close(client);
    }
};

int64_t ms_since(std::chrono::steady_clock::time_point t)
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST(Oob, MessagesOfEverySizeArriveWholeAndInOrder)
{
    Pair p(free_port());
    ASSERT_TRUE(p.server && p.client) << sdr_last_error();
    std::vector<size_t> sizes = {0, 1, 3, 4, 5, 1000, 65536, 65537, SDR_OOB_MAX_MESSAGE};
    // The server sends while the client receives, so even the 1 MiB message (larger than the
    // socket buffers) needs no help from the receiver's timing.
    auto sender = std::async(std::launch::async, [&] {
        for (size_t n : sizes) {
            std::vector<uint8_t> m(n);
            for (size_t i = 0; i < n; i++) m[i] = static_cast<uint8_t>(i * 7 + n);
            if (sdr_oob_send(p.server, m.data(), n) != SDR_SUCCESS) return false;
        }
        return true;
    });
    std::vector<uint8_t> buf(SDR_OOB_MAX_MESSAGE);
    for (size_t n : sizes) {
        size_t got = 99;
        ASSERT_EQ(sdr_oob_recv(p.client, buf.data(), buf.size(), &got, 5000), SDR_SUCCESS) << sdr_last_error();
        ASSERT_EQ(got, n);
        for (size_t i = 0; i < n; i++) ASSERT_EQ(buf[i], static_cast<uint8_t>(i * 7 + n)) << "size " << n << " byte " << i;
    }
    EXPECT_TRUE(sender.get()) << sdr_last_error();
}

TEST(Oob, ExchangeSwapsBlobs)
{
    Pair p(free_port());
    ASSERT_TRUE(p.server && p.client) << sdr_last_error();
    const std::string a = "server-blob", b = "client-blob-longer";
    auto srv = std::async(std::launch::async, [&] {
        char got[64];
        size_t n = 0;
        int rc = sdr_oob_exchange(p.server, a.data(), a.size(), got, sizeof got, &n, 5000);
        return rc == SDR_SUCCESS ? std::string(got, n) : std::string("error: ") + sdr_last_error();
    });
    char got[64];
    size_t n = 0;
    ASSERT_EQ(sdr_oob_exchange(p.client, b.data(), b.size(), got, sizeof got, &n, 5000), SDR_SUCCESS) << sdr_last_error();
    EXPECT_EQ(std::string(got, n), a);
    EXPECT_EQ(srv.get(), b);
}

TEST(Oob, SmallBufferKeepsTheMessage)
{
    Pair p(free_port());
    ASSERT_TRUE(p.server && p.client) << sdr_last_error();
    ASSERT_EQ(sdr_oob_send(p.server, "0123456789", 10), SDR_SUCCESS);
    char small[4], big[16];
    size_t n = 0;
    EXPECT_EQ(sdr_oob_recv(p.client, small, sizeof small, &n, 5000), SDR_ERROR);
    EXPECT_NE(std::string(sdr_last_error()).find("does not fit"), std::string::npos) << sdr_last_error();
    ASSERT_EQ(sdr_oob_recv(p.client, big, sizeof big, &n, 5000), SDR_SUCCESS);
    EXPECT_EQ(std::string(big, n), "0123456789");
}

TEST(Oob, RecvTimesOutWithRetryOnTime)
{
    Pair p(free_port());
    ASSERT_TRUE(p.server && p.client) << sdr_last_error();
    char buf[8];
    size_t n = 0;
    EXPECT_EQ(sdr_oob_recv(p.client, buf, sizeof buf, &n, 0), SDR_RETRY);
    auto t = std::chrono::steady_clock::now();
    EXPECT_EQ(sdr_oob_recv(p.client, buf, sizeof buf, &n, 100), SDR_RETRY);
    EXPECT_GE(ms_since(t), 99);
    // An exchange whose peer stays silent is an error, not a retry.
    EXPECT_EQ(sdr_oob_exchange(p.client, "x", 1, buf, sizeof buf, &n, 50), SDR_ERROR);
    EXPECT_NE(std::string(sdr_last_error()).find("sent nothing within 50 ms"), std::string::npos) << sdr_last_error();
}

TEST(Oob, ClosedPeerIsAnError)
{
    Pair p(free_port());
    ASSERT_TRUE(p.server && p.client) << sdr_last_error();
    sdr_oob_close(p.server);
    p.server = nullptr;
    char buf[8];
    size_t n = 0;
    EXPECT_EQ(sdr_oob_recv(p.client, buf, sizeof buf, &n, 5000), SDR_ERROR);
    EXPECT_NE(std::string(sdr_last_error()).find("closed the bootstrap connection"), std::string::npos)
        << sdr_last_error();
}

TEST(Oob, AbsentServerFailsClearlyAfterTheTimeout)
{
    uint16_t port = free_port();
    auto t = std::chrono::steady_clock::now();
    EXPECT_EQ(sdr_oob_connect("127.0.0.1", port, 200), nullptr);
    int64_t took = ms_since(t);
    EXPECT_GE(took, 150);
    EXPECT_LT(took, 3000);
    std::string e = sdr_last_error();
    EXPECT_NE(e.find("refused"), std::string::npos) << e;
    EXPECT_NE(e.find("start `sdr_write_bw"), std::string::npos) << e;
    EXPECT_EQ(sdr_oob_connect("no-such-host.invalid", port, 200), nullptr);
    EXPECT_NE(std::string(sdr_last_error()).find("no-such-host.invalid"), std::string::npos) << sdr_last_error();
    EXPECT_EQ(sdr_oob_listen("127.0.0.1", port, 50), nullptr);
    EXPECT_NE(std::string(sdr_last_error()).find("no client connected within 50 ms"), std::string::npos)
        << sdr_last_error();
}

TEST(Oob, ClientMayStartBeforeTheServer)
{
    uint16_t port = free_port();
    auto cli = std::async(std::launch::async, [port] { return sdr_oob_connect("127.0.0.1", port, 5000); });
    // The client is refused until the server below is up; it keeps trying.
    sdr_oob* s = sdr_oob_listen(nullptr, port, 5000);  // every address, dual-stack
    sdr_oob* c = cli.get();
    EXPECT_TRUE(s && c) << sdr_last_error();
    sdr_oob_close(s);
    sdr_oob_close(c);
}

TEST(Oob, ForeignPeerFailsTheHandshake)
{
    uint16_t port = free_port();
    auto srv = std::async(std::launch::async, [port] {
        sdr_oob* o = sdr_oob_listen("127.0.0.1", port, 5000);
        std::string e = o ? "" : sdr_last_error();
        sdr_oob_close(o);
        return e;
    });
    // A plain TCP client (say, a browser pointed at the wrong port), retried until it is in.
    int s = -1;
    for (auto t = std::chrono::steady_clock::now(); ms_since(t) < 5000;) {
        s = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) break;
        close(s);
        s = -1;
    }
    ASSERT_GE(s, 0);
    ASSERT_EQ(send(s, "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL), 18);
    std::string e = srv.get();
    close(s);
    EXPECT_NE(e.find("not an SDR bootstrap endpoint"), std::string::npos) << e;
}

TEST(Oob, BadArgumentsAreRefused)
{
    EXPECT_EQ(sdr_oob_connect(nullptr, 1, 10), nullptr);
    EXPECT_NE(std::string(sdr_last_error()).find("no server address"), std::string::npos);
    EXPECT_EQ(sdr_oob_send(nullptr, "x", 1), SDR_ERROR);
    size_t n;
    EXPECT_EQ(sdr_oob_recv(nullptr, nullptr, 0, &n, 0), SDR_ERROR);
    EXPECT_EQ(sdr_oob_fd(nullptr), -1);
    sdr_oob_close(nullptr);
    Pair p(free_port());
    ASSERT_TRUE(p.server && p.client) << sdr_last_error();
    std::vector<uint8_t> big(SDR_OOB_MAX_MESSAGE + 1);
    EXPECT_EQ(sdr_oob_send(p.client, big.data(), big.size()), SDR_ERROR);
    EXPECT_NE(std::string(sdr_last_error()).find("exceeds SDR_OOB_MAX_MESSAGE"), std::string::npos);
}
