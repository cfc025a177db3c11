#include <sdr/emu/queue_log.hpp>

namespace sdr::emu {

bool QueueLog::open(const std::string& path, SimTime interval_ps, std::string* err)
{
    f_ = std::fopen(path.c_str(), "w");
    if (!f_) {
        if (err) *err = "queue log " + path + ": cannot be written";
        return false;
    }
    path_ = path;
    interval_ps_ = interval_ps;
    std::fputs("t_us,port,bytes\n", f_);
    return true;
}

uint32_t QueueLog::add_port(std::string name)
{
    ports_.push_back(Port{std::move(name), 0, 0});
    return static_cast<uint32_t>(ports_.size() - 1);
}

void QueueLog::write(uint32_t id, SimTime now, uint64_t bytes)
{
    std::fprintf(f_, "%.6f,%s,%llu\n", static_cast<double>(now) / 1e6, ports_[id].name.c_str(),
                 static_cast<unsigned long long>(bytes));
}

// The script plots one line per port, from the CSV beside it.
QueueLog::~QueueLog()
{
    if (!f_) return;
    std::fclose(f_);
    std::FILE* gp = std::fopen((path_ + ".gp").c_str(), "w");
    if (!gp) return;
    const std::string svg = path_.substr(0, path_.rfind('.') == std::string::npos ? path_.size() : path_.rfind('.')) + ".svg";
    std::fprintf(gp,
                 "# gnuplot %s.gp: the queue lengths in %s, one line per switch port\n"
                 "set terminal svg size 900,500 dynamic\nset output '%s'\nset datafile separator ','\n"
                 "set xlabel 'time (us)'\nset ylabel 'queued (KB)'\nset key outside right\nset grid\n",
                 path_.c_str(), path_.c_str(), svg.c_str());
    std::fputs("plot ", gp);
    for (size_t i = 0; i < ports_.size(); i++)
        std::fprintf(gp, "%s'%s' using 1:(strcol(2) eq '%s' ? $3 / 1000 : 1/0) with steps title '%s'",
                     i ? ", \\\n     " : "", path_.c_str(), ports_[i].name.c_str(), ports_[i].name.c_str());
    std::fputs("\n", gp);
    std::fclose(gp);
}

}  // namespace sdr::emu
