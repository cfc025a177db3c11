/* The rdma_cm device's answers to bad and edge-case commands, written raw to the fd as librdmacm
 * would (<rdma/rdma_user_cm.h>), each with the kernel's errno: a short write, an unknown command
 * and a header claiming more than was written are EINVAL; a reply buffer too small ENOSPC; an
 * unknown ID ENOENT, another channel's ID EINVAL; a bad port space EINVAL; GET_OPTION ENOSYS;
 * RESOLVE_ROUTE before an address EINVAL; a bind to an address no interface has EADDRNOTAVAIL,
 * to a bound port EADDRINUSE; the loopback binds as the wildcard does (no device; its port is
 * every address's). The fd is a character
 * device to fstat, GET_EVENT on an empty O_NONBLOCK channel is EAGAIN, poll() turns readable
 * when an event waits (ADDR_RESOLVED), and an unreachable peer gives ADDR_ERROR. A GET_EVENT
 * blocked while another thread closes its channel sleeps on until a signal (EINTR). Exit 0 after
 * "rdma_cm_abi: ok".
 *
 *   rdma_cm_abi LOCAL_IPV4 PEER_IPV4 NOBODY_IPV4
 */
#define _DEFAULT_SOURCE
#include <rdma/rdma_user_cm.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define VERBS_PROG "rdma_cm_abi"
#include "verbs_check.h"

enum { kAddrResolved = 0, kAddrError = 1 };  /* enum rdma_cm_event_type */

/* One command: header + body; returns write()'s result (errno set on -1). */
static ssize_t cmd(int fd, uint32_t op, const void* body, size_t in, size_t out)
{
    char buf[sizeof(struct rdma_ucm_cmd_hdr) + 512];
    struct rdma_ucm_cmd_hdr h = {.cmd = op, .in = (uint16_t)in, .out = (uint16_t)out};
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, body, in);
    return write(fd, buf, sizeof h + in);
}

#define EXPECT_ERR(call, err, what) \
    do { \
        errno = 0; \
        CHECK((call) == -1 && errno == (err), "%s: expected %s", what, strerror(err)); \
    } while (0)

static uint32_t create_id(int fd, uint16_t ps)
{
    struct rdma_ucm_create_id_resp r = {0};
    struct rdma_ucm_create_id c = {.uid = 0x1234, .response = (uintptr_t)&r, .ps = ps};
    CHECK(cmd(fd, RDMA_USER_CM_CMD_CREATE_ID, &c, sizeof c, sizeof r) > 0, "CREATE_ID");
    return r.id;
}

static ssize_t bind_ip(int fd, uint32_t id, const char* ip, uint16_t port)
{
    struct rdma_ucm_bind_ip b = {.id = id};
    struct sockaddr_in* sin = (struct sockaddr_in*)&b.addr;
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    CHECK(inet_pton(AF_INET, ip, &sin->sin_addr) == 1, "address %s", ip);
    return cmd(fd, RDMA_USER_CM_CMD_BIND_IP, &b, sizeof b, 0);
}

static ssize_t resolve(int fd, uint32_t id, const char* src, const char* dst)
{
    struct rdma_ucm_resolve_ip r = {.id = id, .timeout_ms = 2000};
    struct sockaddr_in* s = (struct sockaddr_in*)&r.src_addr;
    struct sockaddr_in* d = (struct sockaddr_in*)&r.dst_addr;
    s->sin_family = d->sin_family = AF_INET;
    CHECK(inet_pton(AF_INET, src, &s->sin_addr) == 1 && inet_pton(AF_INET, dst, &d->sin_addr) == 1, "addresses");
    return cmd(fd, RDMA_USER_CM_CMD_RESOLVE_IP, &r, sizeof r, 0);
}

static struct rdma_ucm_event_resp get_event(int fd)
{
    struct rdma_ucm_event_resp e;
    memset(&e, 0xff, sizeof e);
    struct rdma_ucm_get_event g = {.response = (uintptr_t)&e};
    CHECK(cmd(fd, RDMA_USER_CM_CMD_GET_EVENT, &g, sizeof g, sizeof e) > 0, "GET_EVENT");
    return e;
}

static void on_signal(int sig) { (void)sig; }

struct waiter {
    int fd;
    atomic_int tid;       /* the waiting thread's, once it runs */
    atomic_bool returned; /* its GET_EVENT returned */
    ssize_t result;
    int err;
};

static void* wait_event(void* arg)
{
    struct waiter* w = arg;
    struct rdma_ucm_event_resp e;
    struct rdma_ucm_get_event g = {.response = (uintptr_t)&e};
    atomic_store(&w->tid, (int)syscall(SYS_gettid));
    w->result = cmd(w->fd, RDMA_USER_CM_CMD_GET_EVENT, &g, sizeof g, sizeof e);
    w->err = errno;
    atomic_store(&w->returned, true);
    return NULL;
}

/* True once the waiter sleeps in a system call (/proc/self/task/TID/syscall: a number, not
 * "running"): write on the kernel's rdma_cm, poll inside SDR's. Polls a condition, bounded. */
static bool wait_blocked(struct waiter* w)
{
    for (int i = 0; i < 5000; i++) {
        const int tid = atomic_load(&w->tid);
        char path[64], buf[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
        FILE* f = tid ? fopen(path, "r") : NULL;
        if (f) {
            const bool got = fgets(buf, sizeof buf, f) != NULL;
            fclose(f);
            const long nr = got ? strtol(buf, NULL, 10) : -1;
            if (got && (nr == SYS_write || nr == SYS_poll || nr == SYS_ppoll)) return true;
        }
        usleep(1000);
    }
    return false;
}

int main(int argc, char** argv)
{
    CHECK(argc == 4, "usage: rdma_cm_abi LOCAL_IPV4 PEER_IPV4 NOBODY_IPV4");
    const int fd = open("/dev/infiniband/rdma_cm", O_RDWR | O_CLOEXEC | O_NONBLOCK);
    CHECK(fd >= 0, "open /dev/infiniband/rdma_cm");
    const int other = open("/dev/infiniband/rdma_cm", O_RDWR | O_CLOEXEC);
    CHECK(other >= 0, "open a second channel");
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && S_ISCHR(st.st_mode), "fstat says a character device");

    /* The header. */
    EXPECT_ERR(write(fd, "ab", 2), EINVAL, "a write shorter than the header");
    EXPECT_ERR(cmd(fd, 999, "", 0, 0), EINVAL, "an unknown command");
    struct rdma_ucm_cmd_hdr h = {.cmd = RDMA_USER_CM_CMD_CREATE_ID, .in = 200, .out = 4};
    EXPECT_ERR(write(fd, &h, sizeof h), EINVAL, "in beyond what was written");
    printf("header short=EINVAL unknown=EINVAL in_too_big=EINVAL ok\n");

    /* IDs. */
    struct rdma_ucm_create_id_resp r;
    struct rdma_ucm_create_id c = {.response = (uintptr_t)&r, .ps = RDMA_PS_TCP};
    EXPECT_ERR(cmd(fd, RDMA_USER_CM_CMD_CREATE_ID, &c, sizeof c, 2), ENOSPC, "CREATE_ID with a 2-byte reply");
    c.ps = 0x4242;
    EXPECT_ERR(cmd(fd, RDMA_USER_CM_CMD_CREATE_ID, &c, sizeof c, sizeof r), EINVAL, "CREATE_ID of a bad port space");
    const uint32_t id = create_id(fd, RDMA_PS_TCP);
    struct rdma_ucm_destroy_id_resp dr;
    struct rdma_ucm_destroy_id d = {.response = (uintptr_t)&dr, .id = 77777};
    EXPECT_ERR(cmd(fd, RDMA_USER_CM_CMD_DESTROY_ID, &d, sizeof d, sizeof dr), ENOENT, "DESTROY_ID of no ID");
    d.id = id;
    EXPECT_ERR(cmd(other, RDMA_USER_CM_CMD_DESTROY_ID, &d, sizeof d, sizeof dr), EINVAL, "another channel's ID");
    struct rdma_ucm_resolve_route rr = {.id = id};
    EXPECT_ERR(cmd(fd, RDMA_USER_CM_CMD_RESOLVE_ROUTE, &rr, sizeof rr, 0), EINVAL, "RESOLVE_ROUTE before an address");
    EXPECT_ERR(cmd(fd, RDMA_USER_CM_CMD_GET_OPTION, "", 0, 0), ENOSYS, "GET_OPTION");
    printf("ids enospc=ENOSPC bad_ps=EINVAL unknown=ENOENT foreign=EINVAL route_first=EINVAL get_option=ENOSYS ok\n");

    /* Binding. */
    EXPECT_ERR(bind_ip(fd, id, "192.0.2.55", 0), EADDRNOTAVAIL, "bind to an address nobody has");
    /* The loopback binds as the wildcard (the kernel's cma_any_addr), and so shares no port. */
    const uint32_t lo = create_id(fd, RDMA_PS_TCP);
    CHECK(bind_ip(fd, lo, "127.0.0.1", 7498) > 0, "bind to the loopback");
    EXPECT_ERR(bind_ip(fd, id, argv[1], 7498), EADDRINUSE, "a device's address on the loopback's port");
    CHECK(bind_ip(fd, id, argv[1], 7499) > 0, "bind to %s:7499", argv[1]);
    const uint32_t id2 = create_id(fd, RDMA_PS_TCP);
    EXPECT_ERR(bind_ip(fd, id2, argv[1], 7499), EADDRINUSE, "a second bind to the port");
    CHECK(bind_ip(fd, id2, argv[1], 7499 + 1) > 0, "the next port is free");
    const uint32_t udp = create_id(fd, RDMA_PS_UDP);
    CHECK(bind_ip(fd, udp, argv[1], 7499) > 0, "another port space has its own ports");
    printf("bind nobody=EADDRNOTAVAIL loopback=wildcard in_use=EADDRINUSE ok\n");

    /* Events. */
    struct rdma_ucm_event_resp e;
    struct rdma_ucm_get_event g = {.response = (uintptr_t)&e};
    EXPECT_ERR(cmd(fd, RDMA_USER_CM_CMD_GET_EVENT, &g, sizeof g, sizeof e), EAGAIN, "GET_EVENT on an empty channel");
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK(poll(&p, 1, 0) == 0, "an empty channel is not readable");
    const uint32_t a = create_id(fd, RDMA_PS_TCP);
    CHECK(resolve(fd, a, argv[1], argv[2]) > 0, "RESOLVE_IP to the peer");
    CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN), "readable with an event");
    e = get_event(fd);
    CHECK(e.event == kAddrResolved && e.status == 0 && e.id == a && e.uid == 0x1234, "ADDR_RESOLVED (event %u status %d)",
          e.event, (int)e.status);
    CHECK(poll(&p, 1, 0) == 0, "empty again");
    const uint32_t b = create_id(fd, RDMA_PS_TCP);
    CHECK(resolve(fd, b, argv[1], argv[3]) > 0, "RESOLVE_IP to nobody");
    CHECK(poll(&p, 1, 10000) == 1, "the answer comes (ARP gives up within 3 s)");
    e = get_event(fd);
    CHECK(e.event == kAddrError && e.id == b && ((int)e.status == -ETIMEDOUT || (int)e.status == -EHOSTUNREACH),
          "ADDR_ERROR (event %u status %d)", e.event, (int)e.status);
    printf("events empty=EAGAIN poll=readable addr_resolved=ok nobody=ADDR_ERROR(%s) ok\n",
           (int)e.status == -ETIMEDOUT ? "ETIMEDOUT" : "EHOSTUNREACH");

    d.id = a;
    CHECK(cmd(fd, RDMA_USER_CM_CMD_DESTROY_ID, &d, sizeof d, sizeof dr) > 0 && dr.events_reported == 1,
          "DESTROY_ID reports the ID's one event (%u)", dr.events_reported);

    /* A GET_EVENT blocked in one thread while another closes the channel sleeps on (the kernel's
     * write holds its file) until a signal: EINTR, never an early EBADF. */
    struct sigaction sa = {.sa_handler = on_signal};  /* no SA_RESTART */
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    struct waiter w = {.fd = other};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, wait_event, &w) == 0, "pthread_create");
    CHECK(wait_blocked(&w), "the waiter blocks in GET_EVENT");
    CHECK(close(other) == 0, "close the waited-on channel");
    CHECK(!atomic_load(&w.returned), "the waiter still sleeps after the close");
    CHECK(pthread_kill(t, SIGUSR1) == 0 && pthread_join(t, NULL) == 0, "signal and join the waiter");
    CHECK(w.result == -1 && w.err == EINTR, "GET_EVENT after close and a signal: %zd, %s", w.result, strerror(w.err));
    printf("close_under_get_event=sleeps signal=EINTR ok\n");
    CHECK(close(fd) == 0, "close");  /* the rest go with the channel */
    printf("rdma_cm_abi: ok\n");
    return 0;
}
