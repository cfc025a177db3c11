// sdr-pcap: what a capture (classic pcap or pcapng, from the simulator or the real-time
// emulator) says about SDR's messages. `sdr-pcap summary FILE [--json]`: for each reliable
// message of each connection the packets sent, lost and retransmitted, the holes at each ACK,
// the NACKs, the first and last frame times and the completion (capture/pcap_summary.hpp).
#include "capture/pcap_summary.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

void usage(FILE* f)
{
    std::fprintf(f,
                 "usage: sdr-pcap summary FILE [--json] [--chunk BYTES] [--mtu BYTES] [--msg-bits N]\n"
                 "                [--offset-bits N] [--frag-bits N]\n"
                 "Per reliable message of each connection in FILE (pcap or pcapng): packets sent, lost\n"
                 "(the link's drop flag in a pcapng; in a classic pcap inferred from repeats), retransmitted,\n"
                 "chunk repeats, the holes of each ACK, NACKs, first and last frame times, completion.\n"
                 "--chunk and --mtu (default 65536, 4096) and the immediate split (default 10, 18, 4) are the\n"
                 "QP's, as for the Wireshark dissector's preferences.\n");
}

uint32_t number(const char* opt, const char* v)
{
    char* end;
    unsigned long n = std::strtoul(v, &end, 0);
    if (end == v || *end || n == 0 || n > (1ul << 31)) {
        std::fprintf(stderr, "sdr-pcap: %s expects a positive number, got '%s'\n", opt, v);
        std::exit(2);
    }
    return static_cast<uint32_t>(n);
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
        usage(stdout);
        return 0;
    }
    if (argc < 3 || std::string(argv[1]) != "summary") {
        usage(stderr);
        return 2;
    }
    sdr::tools::SummaryOptions o;
    std::string file;
    bool json = false;
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--json") {
            json = true;
            continue;
        }
        if (a.rfind("--", 0) != 0) {
            if (!file.empty()) {
                std::fprintf(stderr, "sdr-pcap: one FILE only\n");
                return 2;
            }
            file = a;
            continue;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "sdr-pcap: %s needs a value\n", a.c_str());
            return 2;
        }
        const char* v = argv[++i];
        if (a == "--chunk") o.chunk_bytes = number("--chunk", v);
        else if (a == "--mtu") o.mtu_bytes = number("--mtu", v);
        else if (a == "--msg-bits") o.msg_bits = number("--msg-bits", v);
        else if (a == "--offset-bits") o.offset_bits = number("--offset-bits", v);
        else if (a == "--frag-bits") o.frag_bits = number("--frag-bits", v);
        else {
            std::fprintf(stderr, "sdr-pcap: unknown option %s\n", a.c_str());
            return 2;
        }
    }
    if (file.empty()) {
        usage(stderr);
        return 2;
    }
    sdr::tools::Summary s;
    std::string err;
    if (!sdr::tools::summarize(file, o, &s, &err)) {
        std::fprintf(stderr, "sdr-pcap: %s\n", err.c_str());
        return 1;
    }
    if (json) sdr::tools::print_json(s, stdout);
    else sdr::tools::print_text(s, stdout);
    return 0;
}
