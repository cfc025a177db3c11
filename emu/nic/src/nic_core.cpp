// The NIC core's shared pieces (nic_core.hpp): counters, and the frame headers both engines
// build.
#include <sdr/emu/nic_core.hpp>

#include <cstring>

namespace sdr::emu {

uint64_t PortCounters::rx_drops_total() const
{
    uint64_t n = 0;
    for (uint64_t d : rx_drops) n += d;
    return n;
}

wire::Headers roce_headers(const PacketMeta& m, const NicAddress& src, const NicAddress& dst)
{
    wire::Headers h;
    h.dst_mac = dst.mac;
    h.src_mac = src.mac;
    h.src_ip = src.ip;
    h.dst_ip = dst.ip;
    h.udp_src_port = m.udp_src_port;
    h.opcode = m.opcode;
    h.dest_qp = m.dest_qp;
    h.psn = m.psn;
    h.va = m.va;
    h.rkey = m.rkey;
    h.dma_len = m.dma_len;
    h.imm = m.imm;
    h.qkey = m.qkey;
    h.src_qp = m.src_qp;
    h.ack_req = m.ack_req;
    h.set_ecn(m.ecn);
    return h;
}

size_t encode_padded(const TxPacket& p, const NicAddress& src, uint8_t* out, size_t cap)
{
    NicAddress dst{p.remote_mac, p.remote_ip};
    wire::Headers h = roce_headers(p.meta, src, dst);
    h.dma_len = p.reth_len;  // WRITE FIRST: the whole message; ONLY: the same as the payload
    if (wire::has_aeth(p.meta.opcode)) h.aeth = p.meta.imm;
    h.ack_req = p.ack_req;
    h.solicited = p.meta.solicited;
    h.pad = true;
    // An atomic's extension header data travel through the payload pointer (a TxPacket has no
    // room for them): a request's Swap/Add and Compare data, an ATOMIC ACK's original value.
    if (wire::is_atomic_request(p.meta.opcode)) {
        std::memcpy(&h.swap_add, p.payload, 8);
        std::memcpy(&h.compare, p.payload + 8, 8);
        return wire::encode(h, nullptr, 0, out, cap);
    }
    if (p.meta.opcode == wire::kOpRcAtomicAck) {
        std::memcpy(&h.atomic_orig, p.payload, 8);
        return wire::encode(h, nullptr, 0, out, cap);
    }
    return wire::encode(h, p.payload, p.meta.dma_len, out, cap);
}

}  // namespace sdr::emu
