/* SDR memory registration; source-compatible with the published SDR SDK's sdr_mr.h. */
#ifndef SDR_MR_H
#define SDR_MR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sdr_context;
struct sdr_mr;

enum sdr_access_flags { SDR_ACCESS_REMOTE_WRITE = 0 };

struct sdr_mr *sdr_mr_reg(struct sdr_context *sdr_ctx, void *addr, size_t length,
                          enum sdr_access_flags access);
int sdr_mr_dereg(struct sdr_mr *mr);
int sdr_mr_lkey_get(struct sdr_mr *mr, uint32_t *lkey);
int sdr_mr_rkey_get(struct sdr_mr *mr, uint32_t *rkey);

#ifdef __cplusplus
}
#endif

#endif /* SDR_MR_H */
