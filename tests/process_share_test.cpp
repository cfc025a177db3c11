// ProcessShare (emu/rt/process_share.hpp): the claims that let processes share one port. Two
// shares in one process stand for two processes (an abstract name conflicts with any holder);
// a forked child shows that a claim dies with its holder. No root: abstract UNIX sockets only.
#include <sdr/emu/process_share.hpp>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace {

using sdr::emu::ProcessShare;

// An interface index no test machine has, so that no real device's claims interfere; one per
// test, so that the tests of one run do not either.
unsigned test_ifindex(unsigned n) { return 0x7F000000u + static_cast<unsigned>(getpid() & 0xFFFF) * 16 + n; }

TEST(ProcessShare, AQpnHasOneOwnerUntilReleased)
{
    ProcessShare a(test_ifindex(1)), b(test_ifindex(1)), other_port(test_ifindex(2));
    EXPECT_TRUE(a.claim_qpn(0x801234));
    EXPECT_FALSE(b.claim_qpn(0x801234));
    EXPECT_TRUE(other_port.claim_qpn(0x801234));  // another interface: its own numbers
    EXPECT_TRUE(b.claim_qpn(0x801235));
    a.release_qpn(0x801234);
    EXPECT_TRUE(b.claim_qpn(0x801234));
}

TEST(ProcessShare, OneListenerPerServiceId)
{
    ProcessShare a(test_ifindex(3)), b(test_ifindex(3));
    const uint64_t sid = 0x0106000000001CDFull;
    EXPECT_FALSE(b.listened_elsewhere(sid));
    EXPECT_EQ(a.claim_service(sid), 0);
    EXPECT_FALSE(a.listened_elsewhere(sid));  // its own
    EXPECT_TRUE(b.listened_elsewhere(sid));
    EXPECT_EQ(b.claim_service(sid), EADDRINUSE);
    a.release_service(sid);
    EXPECT_FALSE(b.listened_elsewhere(sid));
    EXPECT_EQ(b.claim_service(sid), 0);
}

TEST(ProcessShare, OneAnswererAtATime)
{
    ProcessShare b(test_ifindex(4));
    {
        ProcessShare a(test_ifindex(4));
        EXPECT_TRUE(a.answers_for_port());
        EXPECT_TRUE(a.answers_for_port());  // still
        EXPECT_FALSE(b.answers_for_port());
    }
    EXPECT_TRUE(b.answers_for_port());  // the first is gone
}

TEST(ProcessShare, ClaimsDieWithTheirProcess)
{
    const unsigned ifindex = test_ifindex(5);  // the parent's: the child has another pid
    int ready[2], done[2];
    ASSERT_EQ(pipe(ready), 0);
    ASSERT_EQ(pipe(done), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ProcessShare s(ifindex);
        const char ok = s.claim_qpn(0x80AAAA) && s.claim_service(77) == 0 && s.answers_for_port() ? 1 : 0;
        (void)!write(ready[1], &ok, 1);
        char c;
        (void)!read(done[0], &c, 1);
        _exit(0);  // no destructor runs: the kernel releases the names
    }
    char ok = 0;
    ASSERT_EQ(read(ready[0], &ok, 1), 1);
    ASSERT_EQ(ok, 1);
    ProcessShare parent(ifindex);
    EXPECT_FALSE(parent.claim_qpn(0x80AAAA));
    EXPECT_TRUE(parent.listened_elsewhere(77));
    EXPECT_FALSE(parent.answers_for_port());
    ASSERT_EQ(write(done[1], "x", 1), 1);
    int status = -1;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(parent.claim_qpn(0x80AAAA));
    EXPECT_FALSE(parent.listened_elsewhere(77));
    EXPECT_TRUE(parent.answers_for_port());
    for (int fd : {ready[0], ready[1], done[0], done[1]}) close(fd);
}

}  // namespace
