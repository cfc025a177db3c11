// The XDP program of the AF_XDP port (xdp_program.hpp): a tiny assembler and the program.
#include <sdr/emu/wire.hpp>
#include <sdr/emu/xdp_program.hpp>

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <netinet/in.h>

#include <cstddef>
#include <cstring>

namespace sdr::emu {

namespace {

// One method per instruction form, and "goto pass" jumps resolved when the common XDP_PASS exit
// is placed. Loads from packet memory read bytes as the host sees them, so constants are
// compared in network byte order (htons/htonl of the value).
class BpfAsm {
public:
    enum Reg : uint8_t { R0, R1, R2, R3, R4, R5 };  // r0 result, r1 = ctx on entry, r1..r5 call arguments
    enum Size : uint8_t { B = BPF_B, H = BPF_H, W = BPF_W };

    // dst = *(sz*)(base + off)
    void load(Size sz, Reg dst, Reg base, int16_t off) { emit(BPF_LDX | sz | BPF_MEM, dst, base, off, 0); }
    void mov(Reg dst, Reg src) { emit(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0); }
    void mov(Reg dst, int32_t imm) { emit(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm); }
    void add(Reg dst, int32_t imm) { emit(BPF_ALU64 | BPF_ADD | BPF_K, dst, 0, 0, imm); }
    void and_(Reg dst, int32_t imm) { emit(BPF_ALU64 | BPF_AND | BPF_K, dst, 0, 0, imm); }
    // if (a > b) goto pass, unsigned
    void pass_if_above(Reg a, Reg b) { to_pass(BPF_JMP | BPF_JGT | BPF_X, a, b, 0); }
    // if (a == imm) skip the next n instructions (low 32 bits)
    void skip_if32(Reg a, int32_t imm, int16_t n) { emit(BPF_JMP32 | BPF_JEQ | BPF_K, a, 0, n, imm); }
    // if (a != imm) goto pass: 64-bit compare, and on the low 32 bits (an address with its top
    // bit set would be sign-extended in the 64-bit form)
    void pass_unless(Reg a, int32_t imm) { to_pass(BPF_JMP | BPF_JNE | BPF_K, a, 0, imm); }
    void pass_unless32(Reg a, int32_t imm) { to_pass(BPF_JMP32 | BPF_JNE | BPF_K, a, 0, imm); }
    // dst = the map (a 64-bit immediate: two instructions)
    void load_map(Reg dst, int map_fd)
    {
        emit(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_FD, 0, map_fd);
        emit(0, 0, 0, 0, 0);
    }
    void call(int32_t helper) { emit(BPF_JMP | BPF_CALL, 0, 0, 0, helper); }
    void exit() { emit(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }
    // pass: return XDP_PASS. Resolves every earlier "goto pass".
    void pass_label()
    {
        for (size_t i : pending_) code_[i].off = static_cast<int16_t>(code_.size() - i - 1);
        pending_.clear();
        mov(R0, XDP_PASS);
        exit();
    }
    const std::vector<bpf_insn>& code() const { return code_; }

private:
    void emit(uint8_t op, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
    {
        bpf_insn i{};
        i.code = op;
        i.dst_reg = dst & 0xf;
        i.src_reg = src & 0xf;
        i.off = off;
        i.imm = imm;
        code_.push_back(i);
    }
    void to_pass(uint8_t op, uint8_t dst, uint8_t src, int32_t imm)
    {
        pending_.push_back(code_.size());
        emit(op, dst, src, 0, imm);
    }
    std::vector<bpf_insn> code_;
    std::vector<size_t> pending_;
};

}  // namespace

// Offsets are those of an untagged Ethernet frame.
std::vector<bpf_insn> roce_redirect_program(uint32_t ip, int xskmap_fd)
{
    using A = BpfAsm;
    A a;
    // r2 = frame start, r3 = end of its (first) buffer
    a.load(A::W, A::R2, A::R1, offsetof(xdp_md, data));
    a.load(A::W, A::R3, A::R1, offsetof(xdp_md, data_end));
    // Ethernet + IPv4 + UDP headers (42 B) inside the buffer: the verifier needs this bound
    a.mov(A::R4, A::R2), a.add(A::R4, 42), a.pass_if_above(A::R4, A::R3);
    a.load(A::H, A::R5, A::R2, 12), a.pass_unless(A::R5, htons(0x0800));  // EtherType IPv4
    a.load(A::B, A::R5, A::R2, 14), a.pass_unless(A::R5, 0x45);           // version 4, header 20 B
    a.load(A::H, A::R5, A::R2, 20), a.and_(A::R5, htons(0x3fff)), a.pass_unless(A::R5, 0);  // not a fragment
    a.load(A::B, A::R5, A::R2, 23), a.pass_unless(A::R5, IPPROTO_UDP);    // protocol UDP
    // to our address, or else to a multicast group (224.0.0.0/4: the first octet's top nibble
    // 0xE; the NIC model keeps the groups it joined and counts the rest, mcast_no_member)
    a.load(A::W, A::R5, A::R2, 30), a.skip_if32(A::R5, static_cast<int32_t>(htonl(ip)), 3);
    a.load(A::B, A::R5, A::R2, 30), a.and_(A::R5, 0xF0), a.pass_unless(A::R5, 0xE0);
    a.load(A::H, A::R5, A::R2, 36), a.pass_unless(A::R5, htons(wire::kRoceUdpPort));          // to port 4791
    // return bpf_redirect_map(xskmap, rx_queue_index, XDP_PASS): the last argument is the
    // action when no socket sits at that key
    a.load(A::W, A::R2, A::R1, offsetof(xdp_md, rx_queue_index));
    a.load_map(A::R1, xskmap_fd);
    a.mov(A::R3, XDP_PASS);
    a.call(BPF_FUNC_redirect_map), a.exit();
    a.pass_label();
    return a.code();
}

int load_xdp_program(const std::vector<bpf_insn>& code, bool frags, int* e, std::string* verifier)
{
    bpf_prog_load_opts o{};
    o.sz = sizeof o;
    o.expected_attach_type = BPF_XDP;
    o.prog_flags = frags ? BPF_F_XDP_HAS_FRAGS : 0;  // "xdp.frags": may see multi-buffer frames
    int fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "sdr_xsk", "Dual BSD/GPL", code.data(), code.size(), &o);
    if (fd >= 0) return fd;
    *e = -fd;
    // Load again with the verifier's log: only on failure, as the log costs the kernel time.
    std::string log(1 << 16, '\0');
    o.log_buf = log.data();
    o.log_size = static_cast<uint32_t>(log.size());
    o.log_level = 1;
    int again = bpf_prog_load(BPF_PROG_TYPE_XDP, "sdr_xsk", "Dual BSD/GPL", code.data(), code.size(), &o);
    if (again >= 0) return again;  // a transient failure
    log.resize(std::strlen(log.c_str()));
    while (!log.empty() && log.back() == '\n') log.pop_back();
    *verifier = log.size() > 400 ? "..." + log.substr(log.size() - 400) : log;
    return -1;
}

}  // namespace sdr::emu
