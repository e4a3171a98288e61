/* liballoclens_ksm: makes a process's anonymous private writable memory KSM-mergeable on kernels
 * without prctl(PR_SET_MEMORY_MERGE) (before Linux 6.4): `alloclens run --ksm --ksm-mechanism
 * madvise` preloads it into the measured command (docs/ksm.md).
 *
 * A thread rescans /proc/self/maps at an interval and calls madvise(MADV_MERGEABLE) on every
 * anonymous private writable mapping (the heap, the allocators' mmap'ed arenas and chunks, thread
 * stacks), so memory mapped later is covered at the next scan. The GaudiMP study did the same from a
 * malloc hook; a thread covers every allocator, including glibc's, whose mmap/brk calls cannot be
 * interposed.
 *
 * It must never harm the program:
 * - the scanning loop never allocates (a static buffer, raw read/madvise/nanosleep), takes no lock
 *   the program could hold, and ignores every error (a mapping gone meanwhile: ENOMEM/EINVAL);
 * - the thread blocks every signal, so the program's handlers run on its own threads as before;
 * - fork: only the forking thread exists in the child, so a child handler starts a fresh thread
 *   (mergeable flags are inherited by fork); exec: LD_PRELOAD is inherited, the new image loads the
 *   library again; exit: the detached thread ends with the process (nothing to flush);
 * - it exports no symbol, so it interposes nothing.
 * KSM itself is transparent: a merged page is copied again on the first write. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* Milliseconds between scans; ALLOCLENS_KSM_SCAN_MS overrides (1..60000). */
#define DEFAULT_SCAN_MS 100

static unsigned scan_ms = DEFAULT_SCAN_MS;

/* Only the scanning thread uses these (one per process). */
static char maps_buf[64 * 1024];

/* Ranges marked and still mapped at the last scan, so an unchanged mapping is not madvised again
 * at every scan (madvise(MADV_MERGEABLE) takes the mmap lock for writing). A range that disappears
 * from a scan is forgotten, so a new mapping at the same place is marked; and the table is emptied
 * every FORGET_EVERY scans, for one unmapped and mapped again between two scans. A full table only
 * means more madvise calls. */
#define MARKED_MAX 4096
#define FORGET_EVERY 50
static struct {
    uintptr_t start, end;
    int seen;
} marked[MARKED_MAX];
static unsigned marked_count;

static int already_marked(uintptr_t start, uintptr_t end)
{
    for (unsigned i = 0; i < marked_count; i++)
        if (marked[i].start == start && marked[i].end == end) {
            marked[i].seen = 1;
            return 1;
        }
    return 0;
}

static void remember(uintptr_t start, uintptr_t end)
{
    if (marked_count < MARKED_MAX) {
        marked[marked_count].start = start;
        marked[marked_count].end = end;
        marked[marked_count].seen = 1;
        marked_count++;
    }
}

/* Keeps the ranges seen by the scan that just ended, and clears their marks for the next one. */
static void forget_unseen(void)
{
    unsigned kept = 0;
    for (unsigned i = 0; i < marked_count; i++)
        if (marked[i].seen) {
            marked[kept] = marked[i];
            marked[kept].seen = 0;
            kept++;
        }
    marked_count = kept;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Parses a hexadecimal number at *p, leaving *p after it. */
static uintptr_t parse_hex(const char **p, const char *end)
{
    uintptr_t v = 0;
    int d;
    while (*p < end && (d = hex_value(**p)) >= 0) {
        v = v * 16 + (uintptr_t)d;
        (*p)++;
    }
    return v;
}

/* One line of /proc/self/maps: "start-end perms offset dev inode   [path]". Marks it when it is
 * anonymous (inode 0, no path; or the [heap]), private and writable. */
static void consider(const char *line, const char *end)
{
    const char *p = line;
    uintptr_t start = parse_hex(&p, end);
    if (p >= end || *p != '-')
        return;
    p++;
    uintptr_t stop = parse_hex(&p, end);
    if (end - p < 5 || *p != ' ')
        return;
    const char *perms = p + 1;
    if (perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p')
        return;
    /* offset, dev, inode */
    p = perms + 4;
    for (int field = 0; field < 3; field++) {
        while (p < end && *p == ' ')
            p++;
        if (field == 2) {
            if (p >= end || *p != '0' || (p + 1 < end && p[1] != ' ' && p[1] != '\n'))
                return; /* a file's mapping */
        }
        while (p < end && *p != ' ' && *p != '\n')
            p++;
    }
    while (p < end && *p == ' ')
        p++;
    const char *path = p;
    size_t path_len = 0;
    while (p + path_len < end && p[path_len] != '\n')
        path_len++;
    /* Anonymous, or the brk heap; not the main stack ([stack]), [vvar] and the like. */
    if (path_len != 0 && !(path_len == 6 && memcmp(path, "[heap]", 6) == 0))
        return;
    if (stop <= start || already_marked(start, stop))
        return;
    if (madvise((void *)start, stop - start, MADV_MERGEABLE) == 0)
        remember(start, stop);
}

static void scan_once(void)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        /* No /proc: keep what is known rather than forget it. */
        for (unsigned i = 0; i < marked_count; i++)
            marked[i].seen = 1;
        return;
    }
    size_t held = 0; /* bytes of an incomplete line kept at the start of maps_buf */
    for (;;) {
        ssize_t n = read(fd, maps_buf + held, sizeof maps_buf - held);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        size_t len = held + (size_t)n;
        const char *line = maps_buf;
        const char *end = maps_buf + len;
        const char *nl;
        while ((nl = memchr(line, '\n', (size_t)(end - line))) != NULL) {
            consider(line, nl + 1);
            line = nl + 1;
        }
        held = (size_t)(end - line);
        if (held == sizeof maps_buf)
            held = 0; /* a line longer than the buffer: drop it */
        memmove(maps_buf, line, held);
    }
    close(fd);
}

static void *scanner(void *arg)
{
    (void)arg;
    struct timespec pause = {scan_ms / 1000, (long)(scan_ms % 1000) * 1000000L};
    for (unsigned scans = 0;; scans++) {
        if (scans % FORGET_EVERY == 0)
            marked_count = 0;
        scan_once();
        forget_unseen();
        struct timespec left = pause;
        while (nanosleep(&left, &left) != 0 && errno == EINTR) {
        }
    }
    return NULL;
}

/* Starts the scanning thread with every signal blocked (set before pthread_create, so there is no
 * window where it could take one of the program's signals). Failure leaves the program as it was. */
static void start_scanner(void)
{
    sigset_t all, old;
    sigfillset(&all);
    int saved_errno = errno;
    if (pthread_sigmask(SIG_SETMASK, &all, &old) != 0) {
        errno = saved_errno;
        return;
    }
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        pthread_t thread;
        pthread_create(&thread, &attr, scanner, NULL);
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved_errno;
}

/* In a forked child only the forking thread exists: start a fresh scanner there. */
static void after_fork_in_child(void)
{
    start_scanner();
}

__attribute__((constructor)) static void ksm_merge_init(void)
{
    const char *ms = getenv("ALLOCLENS_KSM_SCAN_MS");
    if (ms != NULL) {
        char *end;
        long v = strtol(ms, &end, 10);
        if (end != ms && *end == '\0' && v >= 1 && v <= 60000)
            scan_ms = (unsigned)v;
    }
    pthread_atfork(NULL, NULL, after_fork_in_child);
    start_scanner();
}
