/* The toolchain check's self-test (check.sh --self-test): a "handler" that copies with libc's
 * memcpy, which a DPA has not. The check must name it. */
#include <stddef.h>

void *memcpy(void *dst, const void *src, size_t n);

void fw_self_test_copy(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
