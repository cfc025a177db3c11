// SDR_VERBS_STATS_AT_EXIT=1 and SDR_VERBS_STATS_FILE=PATH on a verbs device (README.md, "The engine in the
// process"): the NIC's counters on stderr, or in PATH in the format sdr-stat reads, when its
// engine stops (the last context and rdma_cm user of the device in the process let go) or when
// the process exits with it running (librdmacm and MPI jobs often never close their devices).
// An unmodified program has no other way to show what its NIC lost and sent again. Counters
// that are the same as libsdr's (sdr_stats.h) have its names (kernel.*, shaper.*, port.*);
// verbs.* are the device's QPs summed, destroyed ones included.
#include "engine.hpp"

#include <sdr/emu/rx_drop.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace sdr::verbs {
namespace {

std::string g_file_text;  // every report of this process so far, for SDR_VERBS_STATS_FILE (under g_mu)

// Replaced whole (write, then rename): a reader never sees half of it. Best effort: a report
// never fails the program.
void write_file(const std::string& path)
{
    const std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) return;
    std::fprintf(f, "# sdr-stats pid=%d\n", static_cast<int>(getpid()));
    std::fputs(g_file_text.c_str(), f);
    if (std::fclose(f) == 0) std::rename(tmp.c_str(), path.c_str());
}

}  // namespace

void Engine::stats_from_env()
{
    stats_pid_ = getpid();
    const char* v = std::getenv("SDR_VERBS_STATS_AT_EXIT");
    stats_at_exit_ = v && std::string(v) == "1";
    const char* p = std::getenv("SDR_VERBS_STATS_FILE");
    stats_file_ = p ? p : "";
    for (size_t at; (at = stats_file_.find("%p")) != std::string::npos;)
        stats_file_.replace(at, 2, std::to_string(getpid()));
}

void Engine::report_stats(bool stopping)
{
    // A child forked from this process has the engine's memory but not its threads (whose NIC
    // lock a fork may have copied held): it reports nothing.
    if ((!stats_at_exit_ && stats_file_.empty()) || getpid() != stats_pid_) return;
    const std::string s = stats_text();
    if (stats_at_exit_) {
        std::fputs(s.c_str(), stderr);
        std::fflush(stderr);
    }
    if (!stats_file_.empty()) {
        // sdr-stat marks a device whose counters will not change any more.
        g_file_text += stopping ? s.substr(0, s.find('\n') + 1) + "# closed\n" + s.substr(s.find('\n') + 1) : s;
        write_file(stats_file_);
    }
}

std::string Engine::stats_text()
{
    std::string s = "# sdr-stats device=" + ibdev_ + "\n";
    auto add = [&s](const std::string& name, uint64_t v) { s += name + " " + std::to_string(v) + "\n"; };
    // Each takes the NIC lock itself; port_stats reads the kernel's counters first.
    const emu::PortStats k = rt_->port_stats();
    const emu::ShaperCounters sh = rt_->shaper_counters();
    add("kernel.rx_frames", k.rx_frames);
    add("kernel.tx_frames", k.tx_frames);
    add("kernel.rx_dropped", k.rx_dropped_kernel);
    add("kernel.tx_local", k.tx_local);          // to the other processes on the device
    add("kernel.rx_own_local", k.rx_own_local);  // those frames' copies back to us, skipped
    add("shaper.dropped", sh.dropped);
    add("shaper.dropped_burst", sh.dropped_burst);
    add("shaper.duplicated", sh.duplicated);
    add("shaper.delayed", sh.delayed);
    emu::PortCounters c;
    mv::QpCountersVerbs q;
    uint64_t cq_errors;
    {
        std::lock_guard g(lock());
        c = nic().counters();
        q = verbs_->qp_counters_total();
        cq_errors = verbs_->cq_errors();
    }
    add("port.rx_frames", c.rx_frames);
    add("port.tx_frames", c.tx_frames);
    add("port.rx_drops_total", c.rx_drops_total());
    for (size_t d = 0; d < static_cast<size_t>(emu::RxDrop::Count); d++)
        add(std::string("port.rx_drop.") + emu::to_string(static_cast<emu::RxDrop>(d)), c.rx_drops[d]);
    add("verbs.tx_packets", q.tx_packets);
    add("verbs.rx_packets", q.rx_packets);
    add("verbs.tx_messages", q.tx_messages);
    add("verbs.rx_messages", q.rx_messages);
    add("verbs.rx_drops", q.rx_drops);
    add("verbs.rx_aborted", q.rx_aborted);
    add("verbs.tx_acks", q.tx_acks);
    add("verbs.rx_acks", q.rx_acks);
    add("verbs.tx_naks", q.tx_naks);
    add("verbs.rx_naks", q.rx_naks);
    add("verbs.tx_rnr_naks", q.tx_rnr_naks);
    add("verbs.rx_rnr_naks", q.rx_rnr_naks);
    add("verbs.timeouts", q.timeouts);
    add("verbs.retransmits", q.retransmits);
    add("verbs.tx_read_responses", q.tx_read_responses);
    add("verbs.atomics", q.atomics);
    add("verbs.atomic_replays", q.atomic_replays);
    add("verbs.cq_errors", cq_errors);
    return s;
}

}  // namespace sdr::verbs
