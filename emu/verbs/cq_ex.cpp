// The extended CQ (ibv_create_cq_ex) and its polling API: ibv_start_poll, ibv_next_poll,
// ibv_end_poll and the ibv_wc_read_* ops for the fields the device has (byte_len, imm_data,
// qp_num, src_qp, wc_flags, slid, sl, dlid_path_bits). Each step takes one completion through
// poll_cq (its locks, its overrun rule) into the CQ's `cur`, which the read ops return; only
// the thread that polls reads them, as verbs requires. Completion timestamps, VLAN, flow tags
// and tag matching are EOPNOTSUPP (libibverbs refuses flags beyond its own set first).
#include "engine.hpp"

#include <cerrno>

namespace sdr::verbs {
namespace {

Cq* from_ex(ibv_cq_ex* x) { return reinterpret_cast<Cq*>(x); }

constexpr uint64_t kSupportedWc = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                                  IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                                  IBV_WC_EX_WITH_DLID_PATH_BITS;

// One completion into cur: 0, ENOENT when there is none, EIO once the CQ overran.
int step(ibv_cq_ex* x)
{
    Cq* cq = from_ex(x);
    const int n = poll_cq(&cq->vcq.cq, 1, &cq->cur);
    if (n == 0) return ENOENT;
    if (n < 0) return EIO;
    x->wr_id = cq->cur.wr_id;
    x->status = cq->cur.status;
    return 0;
}

int start_poll(ibv_cq_ex* x, ibv_poll_cq_attr* attr) { return attr->comp_mask ? EINVAL : step(x); }
int next_poll(ibv_cq_ex* x) { return step(x); }
void end_poll(ibv_cq_ex*) {}  // nothing held between the steps
ibv_wc_opcode read_opcode(ibv_cq_ex* x) { return from_ex(x)->cur.opcode; }
uint32_t read_vendor_err(ibv_cq_ex* x) { return from_ex(x)->cur.vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* x) { return from_ex(x)->cur.byte_len; }
__be32 read_imm_data(ibv_cq_ex* x) { return from_ex(x)->cur.imm_data; }
uint32_t read_qp_num(ibv_cq_ex* x) { return from_ex(x)->cur.qp_num; }
uint32_t read_src_qp(ibv_cq_ex* x) { return from_ex(x)->cur.src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* x) { return from_ex(x)->cur.wc_flags; }
uint32_t read_slid(ibv_cq_ex* x) { return from_ex(x)->cur.slid; }
uint8_t read_sl(ibv_cq_ex* x) { return from_ex(x)->cur.sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* x) { return from_ex(x)->cur.dlid_path_bits; }

}  // namespace

ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr)
{
    if ((attr->wc_flags & ~kSupportedWc) || (attr->comp_mask & ~uint32_t{IBV_CQ_INIT_ATTR_MASK_FLAGS}) ||
        ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && attr->flags)) {
        errno = EOPNOTSUPP;  // timestamps, VLAN, flow tag, tag matching, a PD, creation flags
        return nullptr;
    }
    if (attr->cqe > static_cast<uint32_t>(INT32_MAX)) {
        errno = EINVAL;
        return nullptr;
    }
    ibv_cq* cq = create_cq(context, static_cast<int>(attr->cqe), attr->channel, static_cast<int>(attr->comp_vector));
    if (!cq) return nullptr;
    ibv_cq_ex& x = reinterpret_cast<Cq*>(cq)->vcq.cq_ex;
    x.start_poll = start_poll;
    x.next_poll = next_poll;
    x.end_poll = end_poll;
    x.read_opcode = read_opcode;
    x.read_vendor_err = read_vendor_err;
    // Every field ibv_wc has is there: the reads of the flags not asked for work too.
    x.read_byte_len = read_byte_len;
    x.read_imm_data = read_imm_data;
    x.read_qp_num = read_qp_num;
    x.read_src_qp = read_src_qp;
    x.read_wc_flags = read_wc_flags;
    x.read_slid = read_slid;
    x.read_sl = read_sl;
    x.read_dlid_path_bits = read_dlid_path_bits;
    return &x;  // libibverbs fills context, channel, cq_context, the event counters and their mutex
}

}  // namespace sdr::verbs
