// The queue-length time series of chosen switch ports: a CSV of "t_us,port,bytes" rows, at most
// one per port per interval (each the queue's bytes when it changed), and beside it a gnuplot
// script that draws it (gnuplot FILE.gp writes FILE.svg). What a capture cannot show at a
// glance: how full a queue ran, and when.
#pragma once

#include <sdr/emu/simulator.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace sdr::emu {

class QueueLog {
public:
    // false + err if the file cannot be written.
    [[nodiscard]] bool open(const std::string& path, SimTime interval_ps, std::string* err);
    ~QueueLog();
    // A port to log; its id for sample().
    uint32_t add_port(std::string name);
    void sample(uint32_t id, SimTime now, uint64_t bytes)
    {
        Port& p = ports_[id];
        if (bytes == p.bytes) return;
        p.bytes = bytes;
        if (now < p.next) return;
        p.next = now + interval_ps_;
        write(id, now, bytes);
    }

private:
    struct Port {
        std::string name;
        uint64_t bytes = 0;
        SimTime next = 0;
    };
    void write(uint32_t id, SimTime now, uint64_t bytes);
    std::string path_;
    std::FILE* f_ = nullptr;
    SimTime interval_ps_ = 0;
    std::vector<Port> ports_;
};

}  // namespace sdr::emu
