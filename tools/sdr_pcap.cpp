// sdr-pcap: what a capture (classic pcap or pcapng, from the simulator or the real-time
// emulator) says about SDR's messages. `sdr-pcap summary FILE [--json]`: for each reliable
// message of each connection the packets sent, lost and retransmitted, the holes at each ACK,
// the NACKs, the first and last frame times and the completion (capture/pcap_summary.hpp).
#include "capture/pcap_summary.hpp"
#include "common/options.hpp"

#include <cstdio>
#include <string>

int main(int argc, char** argv)
{
    using namespace sdr::tools;
    SummaryOptions o;
    std::string file;
    bool json = false;
    sdr::tools::ToolApp app("sdr-pcap", "What a capture (pcap or pcapng) says about SDR's reliable messages.");
    app.require_subcommand(1);
    CLI::App* summary = app.add_subcommand(
        "summary",
        "Per reliable message of each connection in FILE: packets sent, lost (the link's drop flag in a pcapng; in a\n"
        "classic pcap inferred from repeats), retransmitted, chunk repeats, the holes of each ACK, NACKs, first and\n"
        "last frame times, completion.");
    summary->add_option("FILE", file, "the capture (pcap or pcapng)")->required();
    summary->add_flag("--json", json, "one JSON object instead of the text");
    // The QP's geometry, as the Wireshark dissector's preferences.
    add_size(*summary, "--chunk", &o.chunk_bytes, 1, 1u << 31, "the QP's chunk size")->default_str("64K");
    add_size(*summary, "--mtu", &o.mtu_bytes, 1, 1u << 31, "the QP's MTU")->default_str("4096");
    add_count(*summary, "--msg-bits", &o.msg_bits, 1, 31, "immediate bits of the message id")->default_str("10");
    add_count(*summary, "--offset-bits", &o.offset_bits, 1, 31, "immediate bits of the packet offset")->default_str("18");
    add_count(*summary, "--frag-bits", &o.frag_bits, 1, 31, "immediate bits of the user-immediate fragment")
        ->default_str("4");
    parse_or_exit(app, argc, argv, 2);
    Summary s;
    std::string err;
    if (!summarize(file, o, &s, &err)) {
        std::fprintf(stderr, "sdr-pcap: %s\n", err.c_str());
        return 1;
    }
    if (json) print_json(s, stdout);
    else print_text(s, stdout);
    return 0;
}
