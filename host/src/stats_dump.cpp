// SDR_STATS_FILE and SDR_STATS_AT_EXIT: a process's counters where sdr-stat (or a person) can
// read them without changing the program. The file holds the newest snapshot of every context
// the process opened (destroyed ones keep their last), replaced whole (write, then rename) so
// a reader never sees half of it. A thread of its own refreshes the real-time contexts, whose
// counters are safe to read under their NIC lock from any thread; a simulated context runs on
// its caller's thread only, so it is written when it is destroyed.
#include <sdr_stats.h>

#include <sdr/emu/rt_nic.hpp>
#include <sdr/host/inspect.hpp>

#include "internal.hpp"
#include "stats.hpp"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <mutex>
#include <string>
#include <thread>

namespace sdr::host {

namespace {

struct Entry {
    sdr_context* ctx;  // nullptr once destroyed
    std::string text;  // the last snapshot
};

struct Dumper {
    std::mutex mu;
    std::condition_variable cv;
    std::list<Entry> entries;
    size_t live_rt = 0;
    std::thread thread;
    bool stop = false;
};

Dumper& dumper()
{
    static Dumper* d = new Dumper;  // never destroyed: contexts may close during exit
    return *d;
}

std::string stats_path()
{
    const char* p = std::getenv("SDR_STATS_FILE");
    if (!p || !*p) return {};
    std::string s = p;
    for (size_t at; (at = s.find("%p")) != std::string::npos;) s.replace(at, 2, std::to_string(getpid()));
    return s;
}

uint64_t interval_ms()
{
    const char* s = std::getenv("SDR_STATS_INTERVAL_MS");
    long v = s ? std::strtol(s, nullptr, 10) : 0;
    return v > 0 ? static_cast<uint64_t>(v) : 1000;
}

// Under d.mu.
void write_file(Dumper& d, const std::string& path)
{
    std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) return;  // best effort: a dump must never fail the program
    std::fprintf(f, "# sdr-stats pid=%d\n", static_cast<int>(getpid()));
    for (const Entry& e : d.entries) std::fputs(e.text.c_str(), f);
    bool ok = std::fclose(f) == 0;
    if (ok) std::rename(tmp.c_str(), path.c_str());
}

void refresh_loop(std::string path)
{
    Dumper& d = dumper();
    const auto every = std::chrono::milliseconds(interval_ms());
    std::unique_lock<std::mutex> lk(d.mu);
    while (!d.stop) {
        d.cv.wait_for(lk, every, [&] { return d.stop; });
        if (d.stop) break;
        for (Entry& e : d.entries)
            if (e.ctx && rt_of(e.ctx)) e.text = format_stats(e.ctx);
        write_file(d, path);
    }
}

}  // namespace

void stats_context_opened(sdr_context* ctx)
{
    std::string path = stats_path();
    if (path.empty()) return;
    Dumper& d = dumper();
    std::lock_guard<std::mutex> g(d.mu);
    d.entries.push_back({ctx, format_stats(ctx)});
    write_file(d, path);
    if (rt_of(ctx) && d.live_rt++ == 0) {
        if (d.thread.joinable()) d.thread.join();
        d.stop = false;
        d.thread = std::thread(refresh_loop, path);
    }
}

void stats_context_closing(sdr_context* ctx)
{
    const char* at_exit = std::getenv("SDR_STATS_AT_EXIT");
    if (at_exit && std::string(at_exit) == "1") sdr_context_stats_print(ctx, stderr);
    std::string path = stats_path();
    if (path.empty()) return;
    Dumper& d = dumper();
    std::thread done;
    {
        std::lock_guard<std::mutex> g(d.mu);
        for (Entry& e : d.entries)
            if (e.ctx == ctx) {
                e.text = format_stats(ctx);
                std::string closed = "# closed\n";
                e.text.insert(e.text.find('\n') + 1, closed);
                e.ctx = nullptr;
            }
        write_file(d, path);
        if (rt_of(ctx) && --d.live_rt == 0) {
            d.stop = true;
            done = std::move(d.thread);
        }
    }
    d.cv.notify_all();
    if (done.joinable()) done.join();
}

}  // namespace sdr::host
