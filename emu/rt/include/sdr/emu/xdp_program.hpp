// The XDP program in front of the AF_XDP port (port_xdp.cpp), on its own so that it can be
// loaded and run without an interface or a socket (tests/xdp_program_test.cpp runs it through
// BPF_PROG_TEST_RUN on crafted frames).
//
// What it does: an unfragmented IPv4 frame without IP options, UDP, to destination port 4791
// (RoCEv2) and to the port's own address or to a multicast group (224.0.0.0/4) is redirected into the XSKMAP entry of the queue it
// arrived on; with no socket at that entry, and for every other frame (ARP, ICMP, TCP, other
// UDP, IPv6, VLAN-tagged, fragments, frames shorter than the 42 bytes of Ethernet + IPv4 + UDP
// headers), it returns XDP_PASS, so the kernel's stack keeps the rest of the interface's
// traffic. It never writes the frame and never reads past the 42 bytes; whatever follows the
// UDP header is the NIC model's to judge (wire::decode treats every frame as hostile).
#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sdr::emu {

// The program's instructions for the host-order IPv4 address `ip` and the XSKMAP `xskmap_fd`
// (its fd is embedded in the code, so the map must stay open until the program is loaded).
// Hand-assembled: no clang or object file at build time.
std::vector<bpf_insn> roce_redirect_program(uint32_t ip, int xskmap_fd);

// Loads `code` as an XDP program ("xdp.frags", BPF_F_XDP_HAS_FRAGS, when `frags`: it may then be
// given multi-buffer frames): its fd, or -1 with the errno in *e and, when the verifier refused
// it, the verifier's last words in *verifier.
[[nodiscard]] int load_xdp_program(const std::vector<bpf_insn>& code, bool frags, int* e, std::string* verifier);

}  // namespace sdr::emu
