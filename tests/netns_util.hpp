// Test helper: the two-namespace veth testbed of tools/sdr-netns, and entering a namespace on
// the calling thread (sockets keep the namespace they were opened in, so one process can own a
// port on each side). Tests that need it skip with netns_unavailable()'s reason (not root, no
// iproute2); where it is available (as root), a testbed that does not come up fails them.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace sdr::test {

// Empty if namespaces can be made here, else why not.
inline std::string netns_unavailable()
{
    if (geteuid() != 0) return "needs root to create network namespaces (run as root, as .ci/run does)";
    if (access("/proc/self/ns/net", R_OK) != 0) return "no /proc/self/ns/net";
    if (std::system("ip -V >/dev/null 2>&1") != 0) return "iproute2 ('ip') is not installed";
    return "";
}

// tools/sdr-netns up/down with a prefix of its own; down on destruction. bridge: a third
// host on a Linux bridge with the two (sdr-netns --bridge); hosts > 2: that many on the bridge,
// all learning (sdr-netns --hosts). The prefix gets this process's
// id (3 base-36 digits), so two suites run at once (two build trees, or ctest -j in each)
// never tear down each other's namespaces; names stay within sdr-netns' 12 characters.
class Testbed {
public:
    explicit Testbed(const std::string& prefix, unsigned mtu = 4200, bool bridge = false, unsigned hosts = 2)
        : prefix_(prefix + pid_tag())
    {
        std::string cmd = std::string(SDR_SOURCE_DIR) + "/tools/sdr-netns up --prefix " + prefix_ +
                          " --mtu " + std::to_string(mtu) + (bridge ? " --bridge" : "") +
                          (hosts > 2 ? " --hosts " + std::to_string(hosts) : "") + " >/dev/null 2>&1";
        ok_ = std::system(cmd.c_str()) == 0;
    }
    ~Testbed()
    {
        std::string cmd = std::string(SDR_SOURCE_DIR) + "/tools/sdr-netns down --prefix " + prefix_ + " >/dev/null 2>&1";
        if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "netns_util: could not remove testbed %s\n", prefix_.c_str());
    }
    Testbed(const Testbed&) = delete;
    Testbed& operator=(const Testbed&) = delete;
    bool ok() const { return ok_; }
    // Side 0 = PREFIX-a (10.77.0.1), side 1 = PREFIX-b (10.77.0.2), side 2 = PREFIX-c
    // (10.77.0.3, bridge only), and on (hosts); the interface has the namespace's name.
    std::string ns(int side) const { return prefix_ + "-" + static_cast<char>('a' + side); }
    static std::string ip(int side) { return "10.77.0." + std::to_string(side + 1); }

private:
    static std::string pid_tag()
    {
        const char* digits = "0123456789abcdefghijklmnopqrstuvwxyz";
        std::string t;
        for (unsigned v = static_cast<unsigned>(getpid()) % (36 * 36 * 36), i = 0; i < 3; i++, v /= 36) t += digits[v % 36];
        return t;
    }
    std::string prefix_;
    bool ok_ = false;
};

// Moves the calling thread into a named namespace until destruction (then back).
class InNetns {
public:
    explicit InNetns(const std::string& ns)
    {
        home_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        int fd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
        ok_ = home_ >= 0 && fd >= 0 && setns(fd, CLONE_NEWNET) == 0;
        if (fd >= 0) close(fd);
    }
    ~InNetns()
    {
        if (home_ >= 0) {
            if (setns(home_, CLONE_NEWNET) != 0) std::perror("netns_util: setns back");
            close(home_);
        }
    }
    InNetns(const InNetns&) = delete;
    InNetns& operator=(const InNetns&) = delete;
    bool ok() const { return ok_; }

private:
    int home_ = -1;
    bool ok_ = false;
};

}  // namespace sdr::test
