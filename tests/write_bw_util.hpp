// Test helper: sdr_write_bw as a user runs it across the two-namespace testbed, the server in
// ns(1) and the client in ns(0), started together; each side's exit code, output and one-line
// JSON report.
#pragma once

#include "child_util.hpp"
#include "netns_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace sdr::test {

struct WriteBwRun {
    int server_status = -1, client_status = -1;
    std::string server_out, client_out;  // whole outputs
    std::string sj, cj;                  // the JSON lines ("server", "client"); empty if absent

    // Both exited 0 and printed their report as valid JSON; else which side did not, with its output.
    ::testing::AssertionResult ok() const
    {
        if (client_status != 0 || cj.empty())
            return ::testing::AssertionFailure() << "client exited " << client_status << ":\n" << client_out;
        if (server_status != 0 || sj.empty())
            return ::testing::AssertionFailure() << "server exited " << server_status << ":\n" << server_out;
        if (!nlohmann::json::accept(cj)) return ::testing::AssertionFailure() << "the client's JSON does not parse: " << cj;
        if (!nlohmann::json::accept(sj)) return ::testing::AssertionFailure() << "the server's JSON does not parse: " << sj;
        return ::testing::AssertionSuccess();
    }
};

// device: "raw" or "xdp" (each side's interface is its namespace's); client_prefix goes before
// the tool (e.g. "taskset -c 0 "). The client connects to ns(1)'s address. Both sides use UC
// transport QPs (what these tests count: every frame sent once, chunks lost with them) unless
// the arguments name a --connection.
inline WriteBwRun run_write_bw(const Testbed& tb, const std::string& kind, const std::string& port,
                               const std::string& server_args, const std::string& client_args,
                               const std::string& client_prefix = "")
{
    const std::string tool = SDR_WRITE_BW;
    auto uc = [](const std::string& args) {
        return args.find("--connection") == std::string::npos ? " --connection UC " + args : " " + args;
    };
    Child server("ip netns exec " + tb.ns(1) + " " + tool + " -d " + kind + ":" + tb.ns(1) + " -p " + port + " --json" +
                 uc(server_args));
    Child client("ip netns exec " + tb.ns(0) + " " + client_prefix + tool + " -d " + kind + ":" + tb.ns(0) + " -p " +
                 port + " --json" + uc(client_args) + " " + Testbed::ip(1));
    WriteBwRun r;
    r.client_out = client.finish(&r.client_status);
    r.server_out = server.finish(&r.server_status);
    r.cj = json_of(r.client_out, "client");
    r.sj = json_of(r.server_out, "server");
    return r;
}

}  // namespace sdr::test
