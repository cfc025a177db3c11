/* libsdr_rdma_preload.so: what the kernel's RDMA character devices would answer, for programs
   using SDR's verbs device (LD_PRELOAD; `sdr-rdma exec` sets it). Two things only:

   - CREATE_COMP_CHANNEL written to a uverbs node that is the null device (the node sdr-rdma
     makes): libibverbs takes channel->fd from the kernel's answer, which the null device never
     gives. The library answers with the read end of a pipe; the provider's CQ events go into
     its write end (sdr_rdma_comp_channel_writer).
   - /dev/infiniband/rdma_cm: open() gives a channel of the provider's rdma_cm server (an
     eventfd, readable while events wait), and write() on it is a command the server answers
     (sdr/verbs/sdr_ucma.h).

   Every other call goes straight to the next definition (libc): a descriptor is looked at only
   if this library marked it at open(), so shells, `ip` and mpirun with the library preloaded
   behave as without it. No libibverbs, no C++ runtime: the provider is loaded only when a
   program opens the rdma_cm device with RDMAV_DRIVERS naming it. */
#ifdef _FORTIFY_SOURCE
#undef _FORTIFY_SOURCE  /* this file defines open() itself */
#endif
#define _GNU_SOURCE
#include <sdr/verbs/sdr_ucma.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <rdma/ib_user_verbs.h>

#define EXPORT __attribute__((visibility("default")))

/* What a descriptor is to this library. Descriptors at or above kMaxFds are never marked: an
   rdma_cm open or a completion channel that would get one fails with EMFILE. */
enum { kNone = 0, kUverbs = 1, kCompChannel = 2, kRdmaCm = 3 };
#define kMaxFds 65536
static _Atomic unsigned char g_kind[kMaxFds];
static _Atomic int g_writer[kMaxFds]; /* kCompChannel: write end of its pipe */

static unsigned kind_of(int fd) { return fd >= 0 && fd < kMaxFds ? atomic_load(&g_kind[fd]) : kNone; }
static void mark(int fd, unsigned kind) { atomic_store(&g_kind[fd], (unsigned char)kind); }

/* The next definitions, looked up on first use (dlsym does not open files or write). */
#define NEXT(ret, name, params)                                        \
    static ret(*next_##name(void)) params                              \
    {                                                                  \
        static ret(*_Atomic fn) params;                                \
        ret(*f) params = atomic_load(&fn);                             \
        if (!f) {                                                      \
            f = (ret(*) params)dlsym(RTLD_NEXT, #name);                \
            atomic_store(&fn, f);                                      \
        }                                                              \
        return f;                                                      \
    }
NEXT(int, open, (const char *, int, ...))
NEXT(int, open64, (const char *, int, ...))
NEXT(int, openat, (int, const char *, int, ...))
NEXT(int, openat64, (int, const char *, int, ...))
NEXT(int, __open_2, (const char *, int))
NEXT(int, __open64_2, (const char *, int))
NEXT(int, __openat_2, (int, const char *, int))
NEXT(int, __openat64_2, (int, const char *, int))
NEXT(ssize_t, write, (int, const void *, size_t))
NEXT(int, close, (int))
NEXT(int, fstat, (int, struct stat *))
NEXT(int, fstat64, (int, struct stat64 *))

/* ---- the provider's rdma_cm server ---- */

static pthread_mutex_t g_ops_mu = PTHREAD_MUTEX_INITIALIZER;
static const struct sdr_ucma_ops *g_ops;
static int g_ops_looked;

/* The provider RDMAV_DRIVERS names (libibverbs: entries split at ':' or ';', a path gets
   "-rdmav34.so" appended), loaded as libibverbs loads it (the same file gives the same handle),
   and its table; NULL if the variable names no SDR provider or the table does not match. */
static const struct sdr_ucma_ops *ucma_ops(void)
{
    pthread_mutex_lock(&g_ops_mu);
    if (!g_ops_looked) {
        g_ops_looked = 1;
        const char *list = getenv("RDMAV_DRIVERS");
        while (list && *list && !g_ops) {
            size_t n = strcspn(list, ":;");
            char path[4096];
            if (n > 0 && n < sizeof path - 16) {
                memcpy(path, list, n);
                path[n] = 0;
                const char *base = strrchr(path, '/');
                if (base && !strncmp(base + 1, "libsdr_verbs", 12)) {
                    strcat(path, "-rdmav34.so");
                    void *h = dlopen(path, RTLD_NOW);
                    const struct sdr_ucma_ops *ops = h ? (const struct sdr_ucma_ops *)dlsym(h, "sdr_ucma_ops") : NULL;
                    if (ops && ops->abi == SDR_UCMA_ABI) g_ops = ops;
                    else if (h) fprintf(stderr, "sdr_rdma_preload: %s has no rdma_cm server of ABI %d\n", path, SDR_UCMA_ABI);
                }
            }
            list += n;
            if (*list) list++;
        }
    }
    const struct sdr_ucma_ops *ops = g_ops;
    pthread_mutex_unlock(&g_ops_mu);
    return ops;
}

/* open() of the rdma_cm device with the provider present: a channel of its server. Returns -2
   for every other path (the caller opens it). */
static int open_rdma_cm(const char *path, int flags)
{
    if (!path || strcmp(path, SDR_UCMA_DEVICE_PATH) != 0) return -2;
    const struct sdr_ucma_ops *ops = ucma_ops();
    if (!ops) return -2;
    int fd = ops->channel_open(flags);
    if (fd < 0) {
        errno = -fd;
        return -1;
    }
    if (fd >= kMaxFds) {
        ops->channel_close(fd);
        next_close()(fd);
        errno = EMFILE;
        return -1;
    }
    mark(fd, kRdmaCm);
    return fd;
}

/* After an open() of a uverbs node: mark it if it is the null device (1:3), SDR's node. A
   kernel's real uverbs node (another major) stays unmarked and answers for itself. */
static int opened(const char *path, int fd)
{
    static const char kUverbsPrefix[] = "/dev/infiniband/uverbs";
    if (fd < 0 || fd >= kMaxFds || strncmp(path, kUverbsPrefix, sizeof kUverbsPrefix - 1) != 0) return fd;
    struct stat st;
    if (next_fstat()(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) mark(fd, kUverbs);
    return fd;
}

static int needs_mode(int flags) { return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE; }

#define OPEN_BODY(call_next)                   \
    mode_t mode = 0;                           \
    if (needs_mode(flags)) {                   \
        va_list ap;                            \
        va_start(ap, flags);                   \
        mode = va_arg(ap, mode_t);             \
        va_end(ap);                            \
    }                                          \
    int fd = open_rdma_cm(path, flags);        \
    if (fd != -2) return fd;                   \
    return opened(path, call_next);

EXPORT int open(const char *path, int flags, ...) { OPEN_BODY(next_open()(path, flags, mode)) }
EXPORT int open64(const char *path, int flags, ...) { OPEN_BODY(next_open64()(path, flags, mode)) }
EXPORT int openat(int dirfd, const char *path, int flags, ...) { OPEN_BODY(next_openat()(dirfd, path, flags, mode)) }
EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    OPEN_BODY(next_openat64()(dirfd, path, flags, mode))
}

/* _FORTIFY_SOURCE's checked opens (no mode: O_CREAT is refused before them). */
EXPORT int __open_2(const char *path, int flags)
{
    int fd = open_rdma_cm(path, flags);
    return fd != -2 ? fd : opened(path, next___open_2()(path, flags));
}
EXPORT int __open64_2(const char *path, int flags)
{
    int fd = open_rdma_cm(path, flags);
    return fd != -2 ? fd : opened(path, next___open64_2()(path, flags));
}
EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
    int fd = open_rdma_cm(path, flags);
    return fd != -2 ? fd : opened(path, next___openat_2()(dirfd, path, flags));
}
EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
    int fd = open_rdma_cm(path, flags);
    return fd != -2 ? fd : opened(path, next___openat64_2()(dirfd, path, flags));
}

/* ---- completion channels ---- */

/* IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL on SDR's uverbs node: a pipe; its read end goes to
   the response as the kernel's fd would, its write end waits for the provider. Returns -2 for
   any other command (the null device swallows it, as without the library). */
static ssize_t create_comp_channel(int fd, const void *buf, size_t len)
{
    struct ib_uverbs_cmd_hdr hdr;
    struct ib_uverbs_create_comp_channel cmd;
    if (len < sizeof hdr + sizeof cmd) return -2;
    memcpy(&hdr, buf, sizeof hdr);
    if (hdr.command != IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL) return -2;
    /* A stale mark (the descriptor was replaced behind close(), by dup2 say) is not ours. */
    struct stat st;
    if (next_fstat()(fd, &st) != 0 || !S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3)) {
        mark(fd, kNone);
        return -2;
    }
    memcpy(&cmd, (const char *)buf + sizeof hdr, sizeof cmd);
    if (hdr.out_words * 4u < sizeof(struct ib_uverbs_create_comp_channel_resp) || !cmd.response) {
        errno = ENOSPC;
        return -1;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return -1;
    if (p[0] >= kMaxFds) {
        next_close()(p[0]);
        next_close()(p[1]);
        errno = EMFILE;
        return -1;
    }
    atomic_store(&g_writer[p[0]], p[1]);
    mark(p[0], kCompChannel);
    struct ib_uverbs_create_comp_channel_resp resp = {.fd = (uint32_t)p[0]};
    memcpy((void *)(uintptr_t)cmd.response, &resp, sizeof resp);
    return (ssize_t)len;
}

EXPORT int sdr_rdma_comp_channel_writer(int fd)
{
    if (kind_of(fd) != kCompChannel) return -1;
    return fcntl(atomic_load(&g_writer[fd]), F_DUPFD_CLOEXEC, 0);
}

/* ---- the interposed calls on marked descriptors ---- */

EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
    switch (kind_of(fd)) {
    case kUverbs: {
        ssize_t r = create_comp_channel(fd, buf, len);
        if (r != -2) return r;
        break;
    }
    case kRdmaCm: {
        ssize_t r = g_ops->channel_write(fd, buf, len);
        if (r == -EBADF) { /* replaced behind close(): an ordinary file now */
            mark(fd, kNone);
            break;
        }
        if (r < 0) {
            errno = (int)-r;
            return -1;
        }
        return r;
    }
    default: break;
    }
    return next_write()(fd, buf, len);
}

EXPORT int close(int fd)
{
    switch (kind_of(fd)) {
    case kRdmaCm:
        mark(fd, kNone);
        g_ops->channel_close(fd);
        break;
    case kCompChannel:
        mark(fd, kNone);
        next_close()(atomic_exchange(&g_writer[fd], -1));
        break;
    case kUverbs: mark(fd, kNone); break;
    default: break;
    }
    return next_close()(fd);
}

/* librdmacm checks that the device it opened is a character device (util/open_cdev.c). */
EXPORT int fstat(int fd, struct stat *st)
{
    int r = next_fstat()(fd, st);
    if (r == 0 && kind_of(fd) == kRdmaCm) st->st_mode = S_IFCHR | 0666;
    return r;
}

EXPORT int fstat64(int fd, struct stat64 *st)
{
    int r = next_fstat64()(fd, st);
    if (r == 0 && kind_of(fd) == kRdmaCm) st->st_mode = S_IFCHR | 0666;
    return r;
}
