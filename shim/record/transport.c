/*
 * Transport: the link from one process image to the recorder.
 *
 * Events never travel over the socket: they are written to per-thread rings in shared memory
 * (buffer.c) that the recorder drains. The socket (AF_UNIX SOCK_SEQPACKET, path in
 * ALLOCLENS_SOCKET) carries the few control messages and the ring file descriptors (SCM_RIGHTS),
 * and its hang-up tells each side that the other is gone. Nothing here may call malloc or stdio:
 * it runs inside malloc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "got.h"
#include "internal.h"

AL_HIDDEN struct al_proc al_proc = {.sock = -1};

static struct sockaddr_un recorder_addr;
static int recorder_addr_ok;
static int atfork_registered;
/* Built in place: hello messages can be long (command lines), and hooks run on small stacks. */
static unsigned char hello_buf[AL_MAX_MESSAGE];

/* --------------------------------------------------------------------------------- helpers */

AL_HIDDEN const char *al_socket_path(void)
{
    return recorder_addr_ok ? recorder_addr.sun_path : NULL;
}

AL_HIDDEN uint32_t al_gettid(void)
{
    return (uint32_t)syscall(SYS_gettid);
}

AL_HIDDEN uint64_t al_clock_ns(int clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

AL_HIDDEN void al_write_stderr(const char *a, const char *b)
{
    char line[512];
    size_t n = 0;
    const char *parts[3] = {"alloclens: ", a, b};
    for (int i = 0; i < 3; i++)
        for (const char *s = parts[i]; s && *s && n < sizeof line - 1; s++)
            line[n++] = *s;
    line[n++] = '\n';
    ssize_t ignored = write(2, line, n);
    (void)ignored;
}

static void fmt_u64(char *out, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = 0;
}

/* Reads a small /proc file into buf (NUL-terminated); returns the byte count or -1. */
static ssize_t read_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    while (n < cap - 1) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    return (ssize_t)n;
}

/* Field 22 of /proc/self/stat (start time in clock ticks): unchanged by exec, so the recorder can
 * tell a new image of the same process from a new process that reuses a pid. */
static uint64_t proc_start_ticks(void)
{
    char buf[1024];
    if (read_file("/proc/self/stat", buf, sizeof buf) <= 0)
        return 0;
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    int field = 2; /* the ')' ends field 2 */
    for (p++; *p; p++) {
        if (*p == ' ' && ++field == 22) {
            uint64_t v = 0;
            for (p++; *p >= '0' && *p <= '9'; p++)
                v = v * 10 + (uint64_t)(*p - '0');
            return v;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------- messages */

AL_HIDDEN int al_send(const void *msg, size_t len, int fd)
{
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&control, 0, sizeof control);
        mh.msg_control = control.buf;
        mh.msg_controllen = sizeof control.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    for (;;) {
        ssize_t r = sendmsg(al_proc.sock, &mh, MSG_NOSIGNAL);
        if (r == (ssize_t)len)
            return 0;
        if (r < 0 && errno == EINTR)
            continue;
        al_disable("lost the connection to the recorder");
        return -1;
    }
}

AL_HIDDEN void al_send_end(uint32_t reason)
{
    if (atomic_load(&al_proc.state) != AL_ACTIVE || syscall(SYS_getpid) != al_proc.pid)
        return; /* not ours: e.g. a vfork child sharing our memory */
    struct {
        struct al_msg_hdr h;
        struct al_end e;
    } m = {{AL_MSG_END, sizeof m}, {reason, 0}};
    al_send(&m, sizeof m, -1);
}

AL_HIDDEN int al_recorder_gone(void)
{
    /* The attach shim's recorder shuts its sending side to ask for the detach (attach.c) and
     * drains the rings until the image ends: only a closed connection means it is gone. */
    struct pollfd p = {.fd = al_proc.sock, .events = AL_ATTACHED ? 0 : POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    return (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLIN)) != 0;
}

AL_HIDDEN void al_disable(const char *why)
{
    uint16_t expected = AL_ACTIVE;
    if (!atomic_compare_exchange_strong(&al_proc.state, &expected, AL_OFF))
        return;
    /* The recorder too, so that the trace says why it ends there (when the link is what failed,
     * this send fails quietly: the state is already OFF). */
    struct {
        struct al_msg_hdr h;
        char why[200];
    } stopped = {{AL_MSG_STOPPED, 0}, {0}};
    size_t len = 0;
    for (const char *s = why; *s && len < sizeof stopped.why; s++)
        stopped.why[len++] = *s;
    stopped.h.len = (uint32_t)(sizeof stopped.h + len);
    al_send(&stopped, stopped.h.len, -1);
    char pid[24];
    fmt_u64(pid, (uint64_t)al_proc.pid);
    char msg[256];
    size_t n = 0;
    for (const char *s = why; *s && n < 200; s++)
        msg[n++] = *s;
    const char *mid = "; tracing stopped in pid ";
    for (const char *s = mid; *s; s++)
        msg[n++] = *s;
    msg[n] = 0;
    al_write_stderr(msg, pid);
}

/* ------------------------------------------------------------------------- seq order */

/* Ownership changes per image before the counter is shared for good: a main thread and one
 * worker taking turns costs a few; threads that keep alternating would cost a system call each. */
#define AL_CLAIMS 8

static int membarrier(int cmd)
{
    return (int)syscall(SYS_membarrier, cmd, 0, 0);
}

AL_HIDDEN void al_order_init(void)
{
    /* A fork child is a new address space and registers again. */
    int ok = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
    al_proc.claims_left = ok ? AL_CLAIMS : 0;
    atomic_store(&al_proc.owner, ok ? NULL : AL_OWNER_SHARED);
}

AL_HIDDEN uint64_t al_next_seq_slow(struct al_ring *r)
{
    for (;;) {
        struct al_ring *owner = atomic_load(&al_proc.owner);
        if (owner == r || owner == AL_OWNER_SHARED)
            return al_next_seq(r);
        if (owner == AL_OWNER_SWITCHING) {
            sched_yield();
            continue;
        }
        if (!atomic_compare_exchange_strong(&al_proc.owner, &owner, AL_OWNER_SWITCHING))
            continue;
        /* This thread holds the switch: `claims_left` is ours to change. */
        struct al_ring *next = al_proc.claims_left > 0 ? r : AL_OWNER_SHARED;
        if (al_proc.claims_left > 0)
            al_proc.claims_left--;
        if (owner != NULL) {
            /* The expedited barrier was registered when the image started; the global one
             * (slower, no registration) is the fallback should it be refused. */
            if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
                membarrier(MEMBARRIER_CMD_GLOBAL);
            while (atomic_load_explicit(&owner->busy, memory_order_acquire))
                sched_yield();
        }
        atomic_store(&al_proc.owner, next);
    }
}

/* ------------------------------------------------------------------------- image lifecycle */

static void atfork_prepare(void)
{
    /* Hooks pass through while fork runs (other libraries' atfork handlers may allocate), and
     * no thread may hold the ring list lock across fork. */
    al_tls.busy++;
    al_rings_lock();
}

static void atfork_parent(void)
{
    al_rings_unlock();
    al_tls.busy--;
}

static void atfork_child(void)
{
    /* The child shares the parent's rings and process page (MAP_SHARED): writing to them would
     * corrupt the parent's stream. Forget them and announce a new image. */
    al_rings_unlock();
    al_rings_forget();
    if (al_proc.counter)
        munmap((void *)al_proc.counter, AL_PAGE_BYTES);
    al_proc.counter = NULL;
    al_proc.lost = NULL;
    atomic_store(&al_proc.owner, NULL); /* the parent's rings are gone; al_order_init reopens */
    if (al_proc.sock >= 0)
        close(al_proc.sock);
    al_proc.sock = -1;
    int was = atomic_load(&al_proc.state);
    atomic_store(&al_proc.state, AL_UNINIT);
    al_tls.ring = NULL;
    al_tls.tid = 0;
    al_tls.in_hook = 0; /* a fork from a signal handler: the interrupted call is not the child's */
    al_tls.def_writing = 0;
    al_tls.def_head = al_tls.def_tail = 0;
    if (AL_ATTACHED) {
        /* A child forked after the attach is not followed (no thread in it watches for the
         * detach): it runs on with its GOT as it was. */
        got_after_fork();
        got_restore();
        atomic_store(&al_proc.state, AL_OFF);
    } else if (was == AL_ACTIVE)
        al_proc_init();
    else
        atomic_store(&al_proc.state, was == AL_UNINIT ? AL_UNINIT : AL_OFF);
    al_tls.busy--;
}

AL_HIDDEN int al_set_socket_path(const char *path)
{
    if (strlen(path) >= sizeof recorder_addr.sun_path)
        return -1;
    recorder_addr.sun_family = AF_UNIX;
    strcpy(recorder_addr.sun_path, path);
    recorder_addr_ok = 1;
    return 0;
}

static int connect_recorder(void)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    for (;;) {
        if (connect(s, (struct sockaddr *)&recorder_addr, sizeof recorder_addr) == 0)
            return s;
        if (errno != EINTR)
            break;
    }
    close(s);
    return -1;
}

static int send_hello(int page_fd, uint64_t mono, uint64_t real)
{
    struct al_msg_hdr *h = (struct al_msg_hdr *)hello_buf;
    struct al_hello *hello = (struct al_hello *)(h + 1);
    hello->version = AL_PROTOCOL_VERSION;
    hello->pid = (uint32_t)al_proc.pid;
    hello->ppid = (uint32_t)getppid();
    hello->ring_records = AL_RING_RECORDS;
    hello->proc_start_ticks = proc_start_ticks();
    hello->mono_ns = mono;
    hello->real_ns = real;
    char *cmd = (char *)(hello + 1);
    size_t room = sizeof hello_buf - (size_t)(cmd - (char *)hello_buf);
    ssize_t n = read_file("/proc/self/cmdline", cmd, room);
    if (n < 0)
        n = 0;
    h->type = AL_MSG_HELLO;
    h->len = (uint32_t)((size_t)(cmd - (char *)hello_buf) + (size_t)n);
    return al_send(hello_buf, h->len, page_fd);
}

AL_HIDDEN void al_proc_init(void)
{
    extern char **environ;
    if (!recorder_addr_ok) {
        if (environ == NULL)
            return; /* too early in process start-up: try again at the next call */
        const char *path = getenv(AL_ENV_SOCKET);
        if (path == NULL || al_set_socket_path(path) != 0) {
            if (path)
                al_write_stderr(AL_ENV_SOCKET, " is too long; not tracing");
            atomic_store(&al_proc.state, AL_OFF);
            return;
        }
    }
    uint16_t expected = AL_UNINIT;
    if (!atomic_compare_exchange_strong(&al_proc.state, &expected, AL_INITIALIZING))
        return;
    al_tls.busy++;
    al_proc.pid = (pid_t)syscall(SYS_getpid);
    uint64_t mono = al_clock_ns(CLOCK_MONOTONIC);
    uint64_t real = al_clock_ns(CLOCK_REALTIME);
    int page_fd = -1;
    void *page = MAP_FAILED;
    al_proc.sock = connect_recorder();
    if (al_proc.sock < 0) {
        al_write_stderr("cannot connect to the recorder at ", recorder_addr.sun_path);
        goto off;
    }
    page_fd = memfd_create("alloclens-page", MFD_CLOEXEC);
    if (page_fd < 0 || ftruncate(page_fd, AL_PAGE_BYTES) != 0)
        goto fail;
    page = mmap(NULL, AL_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, page_fd, 0);
    if (page == MAP_FAILED)
        goto fail;
    al_proc.counter = (_Atomic uint64_t *)((char *)page + AL_PAGE_COUNTER_OFFSET);
    atomic_store(al_proc.counter, 0);
    al_proc.lost = (_Atomic uint64_t *)((char *)page + AL_PAGE_LOST_OFFSET);
    al_order_init();
    al_rings_init();
    if (!atfork_registered) {
        /* Registered once per image: the registration survives fork. */
        atfork_registered = 1;
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    }
    if (atomic_load(&al_proc.stacks_on))
        al_stacks_fork_child();
    else if (!AL_ATTACHED) /* the attach entry set stacks up from its arguments */
        al_stacks_setup();
    atomic_store(&al_proc.state, AL_ACTIVE); /* al_send reports failures through al_disable */
    if (send_hello(page_fd, mono, real) != 0)
        goto off_quiet;
    if (atomic_load(&al_proc.stacks_on)) {
        struct {
            struct al_msg_hdr h;
            struct al_stacks_msg s;
        } m = {{AL_MSG_STACKS, sizeof m},
               {(uint32_t)al_stacks.depth, al_stacks.frees ? AL_STACKS_FREES : 0}};
        if (al_send(&m, sizeof m, al_stacks.fd) != 0)
            goto off_quiet;
    }
    close(page_fd);
    al_tls.busy--;
    return;
fail:
    al_write_stderr("cannot set up shared memory for the recorder", "");
off:
    atomic_store(&al_proc.state, AL_OFF);
off_quiet:
    if (page_fd >= 0)
        close(page_fd);
    al_tls.busy--;
}

__attribute__((constructor)) static void al_constructor(void)
{
    al_bootstrap();
    /* The attach shim starts when record --pid calls its entry (attach.c). */
    if (!AL_ATTACHED && atomic_load(&al_proc.state) == AL_UNINIT)
        al_proc_init();
}

__attribute__((destructor)) static void al_destructor(void)
{
    al_send_end(AL_END_EXIT);
}

/* ------------------------------------------------------------------------------ markers */

/* Marks a phase. Programs call it without linking against alloclens:
 *     void alloclens_mark(const char *) __attribute__((weak));
 *     if (alloclens_mark) alloclens_mark("import manifests");
 */
AL_EXPORT void alloclens_mark(const char *label)
{
    if (label == NULL || atomic_load(&al_proc.state) != AL_ACTIVE)
        return;
    struct {
        struct al_msg_hdr h;
        struct al_mark m;
        char label[AL_MAX_LABEL];
    } msg;
    size_t n = strnlen(label, AL_MAX_LABEL);
    memcpy(msg.label, label, n);
    msg.h.type = AL_MSG_MARK;
    msg.h.len = (uint32_t)(sizeof msg.h + sizeof msg.m + n);
    msg.m.tid = al_gettid();
    msg.m.reserved = 0;
    msg.m.seq = atomic_load(al_proc.counter);
    msg.m.mono_ns = al_clock_ns(CLOCK_MONOTONIC);
    al_send(&msg, msg.h.len, -1);
}
