/*
 * The 32-bit immediate every SDR packet carries:
 *   [ message id | packet offset | fragment of the user immediate ]   (most significant first)
 * Default split 10 + 18 + 4: 1024 messages in flight per QP, 2^18 packets per message
 * (1 GiB at 4 KiB MTU), 8 fragments of 4 bits rebuild the 32-bit user immediate.
 * The split is a QP parameter (e.g. 8 + 22 + 2); frag_bits must divide 32.
 */
#ifndef SDR_FIRMWARE_IMM_H
#define SDR_FIRMWARE_IMM_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct fw_imm_layout {
    uint8_t msg_bits;
    uint8_t offset_bits;
    uint8_t frag_bits;
};

#define FW_IMM_DEFAULT_LAYOUT ((struct fw_imm_layout){10, 18, 4})

struct fw_imm {
    uint32_t msg_id;
    uint32_t packet_offset;
    uint32_t frag; /* the user-immediate fragment this packet carries */
};

/* true when the three fields add up to 32 bits, frag_bits divides 32 and the packet offset
 * field can name every fragment index (the padding packets of short messages) */
bool fw_imm_layout_valid(struct fw_imm_layout l);

/* Number of fragments that rebuild the user immediate (8 for 4-bit fragments). frag_bits of a
 * valid layout is a power of two: a shift, not a division, on every packet. */
static inline uint32_t fw_imm_num_frags(struct fw_imm_layout l) { return 32u >> __builtin_ctz(l.frag_bits); }

/* Packet p carries fragment (p mod num_frags): bits [j*frag_bits, (j+1)*frag_bits) of the
 * user immediate. */
static inline uint32_t fw_imm_frag_index(struct fw_imm_layout l, uint32_t packet_offset)
{
    return packet_offset & (fw_imm_num_frags(l) - 1u);
}
static inline uint32_t fw_imm_user_frag(struct fw_imm_layout l, uint32_t user_imm, uint32_t j)
{
    return (user_imm >> (j * l.frag_bits)) & ((1u << l.frag_bits) - 1u);
}

static inline uint32_t fw_imm_encode(struct fw_imm_layout l, uint32_t msg_id,
                                     uint32_t packet_offset, uint32_t frag)
{
    return (msg_id << (l.offset_bits + l.frag_bits)) | (packet_offset << l.frag_bits) | frag;
}

static inline struct fw_imm fw_imm_decode(struct fw_imm_layout l, uint32_t imm)
{
    struct fw_imm r;
    r.frag = imm & ((1u << l.frag_bits) - 1u);
    r.packet_offset = (imm >> l.frag_bits) & ((1u << l.offset_bits) - 1u);
    r.msg_id = (uint32_t)((uint64_t)imm >> (l.offset_bits + l.frag_bits)) &
               (uint32_t)((1ull << l.msg_bits) - 1u);
    return r;
}

#ifdef __cplusplus
}
#endif

#endif /* SDR_FIRMWARE_IMM_H */
