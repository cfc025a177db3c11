/* The interface between the interception library (libsdr_rdma_preload.so, LD_PRELOAD) and the
   provider (libsdr_verbs-rdmav34.so): the provider serves the rdma_cm device in user space and
   exports `sdr_ucma_ops`; the library finds it with dlopen of the provider's file (RDMAV_DRIVERS
   names it) and dlsym. The library exports `sdr_rdma_comp_channel_writer`, which the provider
   finds with dlsym(RTLD_DEFAULT) when a completion channel gets its first CQ. Plain C: the
   library has no C++ runtime and no libibverbs. */
#ifndef SDR_VERBS_SDR_UCMA_H
#define SDR_VERBS_SDR_UCMA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The path librdmacm opens (util/open_cdev.c: RDMA_CDEV_DIR "/rdma_cm"). */
#define SDR_UCMA_DEVICE_PATH "/dev/infiniband/rdma_cm"
/* Bumped whenever sdr_ucma_ops changes shape: a library and a provider that disagree leave the
   device alone (open() then fails as it would without the library). */
#define SDR_UCMA_ABI 1

struct sdr_ucma_ops {
    uint32_t abi; /* SDR_UCMA_ABI */
    /* A new event channel, as open(2) of the device: an eventfd that polls readable while the
       channel holds events. flags: the open flags (O_CLOEXEC, O_NONBLOCK are kept). The fd, or
       -errno. */
    int (*channel_open)(int flags);
    /* One write(2) of a command (struct rdma_ucm_cmd_hdr + its body) on channel fd, served as
       the kernel's rdma_ucm does: len, or -errno. -EBADF: fd is not (any more) a channel of the
       provider (the caller then passes the write on). */
    ssize_t (*channel_write)(int fd, const void *buf, size_t len);
    /* Before close(2) of fd: the channel's IDs are destroyed as closing the kernel's file does
       (a connected one sends its DREQ). */
    void (*channel_close)(int fd);
};

/* Exported by the provider (default visibility, provider.map). */
extern const struct sdr_ucma_ops sdr_ucma_ops;

/* Exported by the interception library: a new descriptor (close-on-exec) of the write end of
   the pipe behind completion channel fd `fd` (the read end ibv_create_comp_channel returned),
   or -1 if fd is not such a channel. */
typedef int (*sdr_rdma_comp_channel_writer_fn)(int fd);
#define SDR_RDMA_COMP_CHANNEL_WRITER "sdr_rdma_comp_channel_writer"

#ifdef __cplusplus
}
#endif

#endif
