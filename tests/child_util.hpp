// Test and benchmark helper: run a shell command as a child process and collect its output
// (stdout and stderr) and exit code; read a number field of a one-line JSON object it printed.
#pragma once

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace sdr::test {

class Child {
public:
    explicit Child(const std::string& cmd) : p_(popen((cmd + " 2>&1").c_str(), "r")) {}
    ~Child()
    {
        if (p_) finish();
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    // Its whole output, once it ended; *status = its exit code (or -1).
    std::string finish(int* status = nullptr)
    {
        std::string out;
        char buf[4096];
        for (size_t n; p_ && (n = fread(buf, 1, sizeof buf, p_)) > 0;) out.append(buf, n);
        int st = p_ ? pclose(p_) : -1;
        p_ = nullptr;
        if (status) *status = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        return out;
    }

private:
    FILE* p_;
};

// A shell command run to its end: its output (stdout and stderr) and exit code (-1 if none).
struct Result {
    std::string out;
    int status = -1;
};

inline Result run(const std::string& cmd)
{
    Child c(cmd);
    Result r;
    r.out = c.finish(&r.status);
    return r;
}

// A number field of a one-line JSON object; NaN if it is absent.
inline double json_number(const std::string& json, const std::string& key)
{
    size_t at = json.find("\"" + key + "\":");
    return at == std::string::npos ? std::nan("") : std::strtod(json.c_str() + at + key.size() + 3, nullptr);
}

// The one-line JSON object a program printed for `role` ({"role":"ROLE",...}); empty if none.
inline std::string json_of(const std::string& out, const std::string& role)
{
    size_t at = out.find("{\"role\":\"" + role + "\"");
    return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

}  // namespace sdr::test
