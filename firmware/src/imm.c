#include <sdr/firmware/fw.h>
#include <sdr/firmware/imm.h>

bool fw_imm_layout_valid(struct fw_imm_layout l)
{
    if (l.msg_bits == 0 || l.offset_bits == 0 || l.frag_bits == 0) return false;
    if (l.msg_bits + l.offset_bits + l.frag_bits != 32) return false;
    /* fragments must tile the 32-bit user immediate, and their count be a power of two */
    if (l.frag_bits != 1 && l.frag_bits != 2 && l.frag_bits != 4 && l.frag_bits != 8 && l.frag_bits != 16)
        return false;
    /* A short message's padding packet for fragment j travels at packet offset j, so every
     * fragment index must fit the offset field (else it spills into the message id). */
    return (1ull << l.offset_bits) >= fw_imm_num_frags(l);
}

const char *const fw_counter_names[FW_CNT__COUNT] = {
    "rx_cqe",        "rx_stale",       "rx_bad_offset", "rx_duplicate",
    "rx_cqe_error",  "chunk_complete", "imm_complete",  "tx_packets",
    "tx_sq_full",    "tx_wr_done",     "tx_cqe_error",  "unknown_qp",
    "tx_paced",
};
