#include "job_pool.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sdr::exp {

namespace {

bool write_all(int fd, const std::string& s)
{
    for (size_t off = 0; off < s.size();) {
        ssize_t n = write(fd, s.data() + off, s.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        off += static_cast<size_t>(n);
    }
    return true;
}

// Worker: read task indices ("<index>\n"), answer with "L <line>", "+<n>" and "D".
[[noreturn]] void worker(int fd, const TaskFn& fn)
{
    std::string in;
    char buf[256];
    for (;;) {
        size_t nl;
        while ((nl = in.find('\n')) == std::string::npos) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) _exit(0);  // the parent closed: no more tasks
            in.append(buf, static_cast<size_t>(n));
        }
        size_t index = std::stoul(in.substr(0, nl));
        in.erase(0, nl + 1);
        auto emit = [&](const std::string& line) { write_all(fd, "L " + line + "\n"); };
        auto tick = [&](uint64_t n) { write_all(fd, "+" + std::to_string(n) + "\n"); };
        fn(index, emit, tick);
        if (!write_all(fd, "D\n")) _exit(1);
    }
}

struct Worker {
    pid_t pid = -1;
    int fd = -1;
    long task = -1;  // task in hand, -1 if idle
    std::string in;
};

}  // namespace

PoolResult run_pool(size_t tasks, unsigned jobs, const TaskFn& fn, const std::function<void(uint64_t)>& on_progress)
{
    PoolResult r;
    r.lines.resize(tasks);
    std::vector<Worker> ws(std::max(1u, std::min<unsigned>(jobs, static_cast<unsigned>(std::max<size_t>(tasks, 1)))));
    for (auto& w : ws) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return {false, std::string("socketpair: ") + strerror(errno), {}};
        w.pid = fork();
        if (w.pid < 0) return {false, std::string("fork: ") + strerror(errno), {}};
        if (w.pid == 0) {
            // Hold no parent end of any worker's socket, or that worker never sees EOF.
            for (auto& o : ws)
                if (o.fd >= 0) close(o.fd);
            close(sv[0]);
            worker(sv[1], fn);
        }
        close(sv[1]);
        w.fd = sv[0];
    }
    size_t next = 0, done = 0;
    uint64_t units = 0;
    auto assign = [&](Worker& w) {
        if (next < tasks && write_all(w.fd, std::to_string(next) + "\n")) w.task = static_cast<long>(next++);
        else w.task = -1;
    };
    for (auto& w : ws) assign(w);
    while (done < tasks && r.ok) {
        std::vector<pollfd> pf;
        for (auto& w : ws) pf.push_back({w.fd, POLLIN, 0});
        if (poll(pf.data(), pf.size(), -1) < 0 && errno != EINTR) break;
        for (size_t i = 0; i < ws.size() && r.ok; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            Worker& w = ws[i];
            char buf[65536];
            ssize_t n = read(w.fd, buf, sizeof buf);
            if (n <= 0) {
                if (w.task >= 0) r = {false, "worker " + std::to_string(w.pid) + " died during task " + std::to_string(w.task), {}};
                continue;
            }
            w.in.append(buf, static_cast<size_t>(n));
            for (size_t nl; (nl = w.in.find('\n')) != std::string::npos;) {
                std::string line = w.in.substr(0, nl);
                w.in.erase(0, nl + 1);
                if (line[0] == '+') {
                    units += std::stoull(line.substr(1));
                    on_progress(units);
                } else if (line[0] == 'L') {
                    r.lines[static_cast<size_t>(w.task)].push_back(line.substr(2));
                } else if (line == "D") {
                    done++;
                    assign(w);
                }
            }
        }
    }
    for (auto& w : ws) close(w.fd);  // EOF: the workers exit
    for (auto& w : ws) {
        int st = 0;
        waitpid(w.pid, &st, 0);
        if (r.ok && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
            r = {false, "worker " + std::to_string(w.pid) + " ended badly (status " + std::to_string(st) + ")", {}};
    }
    return r;
}

}  // namespace sdr::exp
