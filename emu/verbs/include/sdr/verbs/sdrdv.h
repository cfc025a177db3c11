/*
 * sdrdv: the direct-verbs extension of SDR's rdma-core provider (libsdr_verbs), the equivalent
 * of mlx5's indirect mkey (mlx5dv_create_mkey + mlx5dv_wr_mr_list) for SDR's root keys.
 *
 * A root key is a remote-write key of a PD over nslots zero-based slots of slot_bytes: a WRITE
 * (or WRITE-with-immediate) at remote address va lands in slot va / slot_bytes at offset
 * va % slot_bytes. Every slot starts as the NULL key: the payload is discarded, and a
 * WRITE-with-immediate still consumes its receive WQE and completes (so the receiver's firmware
 * sees the CQE and drops it). sdrdv_root_key_set re-points a slot at a range of a region of the
 * same PD (registered with IBV_ACCESS_REMOTE_WRITE); sdrdv_root_key_null returns it to NULL.
 * A write never spans two slots. Changes take effect for the next packet the device handles.
 *
 * The functions live in the provider, which libibverbs loads with dlopen(RTLD_LOCAL): a program
 * finds them with sdrdv_lookup below (dl_iterate_phdr for the loaded provider, then dlopen with
 * RTLD_NOLOAD and dlsym), after ibv_get_device_list loaded it. Each returns errno values (0 on
 * success; EINVAL for arguments, ENOMEM when the key table is full, EOPNOTSUPP for an object of
 * another provider).
 */
#ifndef SDR_VERBS_SDRDV_H
#define SDR_VERBS_SDRDV_H

#include <infiniband/verbs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sdrdv_root_key {
    uint32_t rkey; /* what the sender puts in its RETH */
};

/* 1 if ctx is a context of this provider (only then do the calls below accept its objects). */
int sdrdv_is_supported(struct ibv_context *ctx);
struct sdrdv_root_key *sdrdv_root_key_create(struct ibv_pd *pd, uint32_t nslots, uint64_t slot_bytes);
int sdrdv_root_key_set(struct sdrdv_root_key *key, uint32_t slot, struct ibv_mr *mr, uint64_t addr,
                       uint64_t len);
int sdrdv_root_key_null(struct sdrdv_root_key *key, uint32_t slot);
int sdrdv_root_key_destroy(struct sdrdv_root_key *key);

/* The functions above, resolved in the loaded provider. */
struct sdrdv_ops {
    int (*is_supported)(struct ibv_context *);
    struct sdrdv_root_key *(*root_key_create)(struct ibv_pd *, uint32_t, uint64_t);
    int (*root_key_set)(struct sdrdv_root_key *, uint32_t, struct ibv_mr *, uint64_t, uint64_t);
    int (*root_key_null)(struct sdrdv_root_key *, uint32_t);
    int (*root_key_destroy)(struct sdrdv_root_key *);
};

/* Name prefix of the provider's shared object, as libibverbs loads it. */
#define SDRDV_PROVIDER_PREFIX "libsdr_verbs-rdmav"

#ifdef __cplusplus
}
#endif

#endif /* SDR_VERBS_SDRDV_H */
