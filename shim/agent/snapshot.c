/*
 * The agent thread: every ALLOCLENS_AGENT_INTERVAL_MS it merges the per-thread counters, reads the
 * allocator's statistics and replaces <ALLOCLENS_AGENT_DIR>/<pid>.snap atomically (write
 * <pid>.snap.tmp, rename). A file <pid>.trim dropped into the directory asks for a trim, whose
 * outcome every later snapshot carries. The last snapshot, marked final, is written at exit.
 *
 * The program must never notice: the thread blocks every signal (the program's handlers run on
 * its own threads), its allocations are not counted (ag_tls.busy), a failed write (directory
 * gone, disk full) is dropped and tried again at the next interval, a fork child starts its
 * own thread and file, and the thread steps aside (ag_thread_pause) for the calls the kernel
 * grants only to a single-threaded process (single_thread.c).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define PATH_BYTES 4096

static char dir[PATH_BYTES];
static uint64_t interval_ns = 1000000000ull;
static int active; /* ALLOCLENS_AGENT_DIR was set */

static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER; /* one writer: thread or exit */
/* The thread waits here between snapshots (CLOCK_MONOTONIC, set in init_wake), so that
 * ag_thread_pause can end it at once. */
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t pause_lock = PTHREAD_MUTEX_INITIALIZER; /* one pause at a time */
static pthread_t thread;
static int running;  /* `thread` runs (joinable) */
static int pausing;  /* ag_thread_pause asked it to end */
static pid_t thread_tid;
static pid_t pid, ppid;
static uint64_t seq;
static int stopped; /* the final snapshot is written */
static char exe[PATH_BYTES];
static struct ag_buf out;
static struct ag_buf trim_lines; /* the last trim's outcome, repeated in every later snapshot */

static uint64_t now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void path_join(char *dst, const char *file_suffix)
{
    size_t n = strlen(dir);
    char num[24];
    int i = sizeof num;
    uint64_t v = (uint64_t)pid;
    num[--i] = 0;
    do {
        num[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    size_t k = strlen(num + i), s = strlen(file_suffix);
    if (n + 1 + k + s + 1 > PATH_BYTES) {
        dst[0] = 0;
        return;
    }
    memcpy(dst, dir, n);
    dst[n] = '/';
    memcpy(dst + n + 1, num + i, k);
    memcpy(dst + n + 1 + k, file_suffix, s + 1);
}

static uint64_t rss_bytes(void)
{
    char b[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    if (n <= 0)
        return 0;
    b[n] = 0;
    char *p = strchr(b, ' ');
    return p ? strtoull(p + 1, NULL, 10) * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* The seq of this pid's file left by the image before an exec, so seqs go on increasing. */
static uint64_t previous_seq(void)
{
    char path[PATH_BYTES], b[512];
    path_join(path, ".snap");
    int fd = path[0] ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    if (n <= 0)
        return 0;
    b[n] = 0;
    char *p = strstr(b, "\nseq=");
    return p ? strtoull(p + 5, NULL, 10) + 1 : 0;
}

static void write_file(void)
{
    char tmp[PATH_BYTES], final_path[PATH_BYTES];
    path_join(tmp, ".snap.tmp");
    path_join(final_path, ".snap");
    if (!tmp[0] || out.failed)
        return;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    size_t done = 0;
    while (done < out.len) {
        ssize_t n = write(fd, out.data + done, out.len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    if (close(fd) != 0 || done < out.len || rename(tmp, final_path) != 0)
        unlink(tmp);
}

/* Runs with snap_lock held. */
static void take(int final)
{
    struct ag_counters c;
    out.len = 0;
    out.failed = 0;
    uint64_t taken = now_ns(CLOCK_REALTIME);
    ag_counters_read(&c);
    ag_buf_str(&out, "alloclens-agent 1\n");
    ag_buf_kv(&out, "", "pid", (uint64_t)pid);
    ag_buf_kv(&out, "", "seq", seq++);
    ag_buf_kv(&out, "", "ppid", (uint64_t)ppid);
    ag_buf_str(&out, "exe=");
    ag_buf_str(&out, exe);
    ag_buf_str(&out, "\nallocator=");
    ag_buf_str(&out, ag_allocator_name());
    ag_buf_put(&out, "\n", 1);
    ag_buf_kv(&out, "", "taken_unix_ns", taken);
    ag_buf_kv(&out, "", "final", (uint64_t)final);
    ag_buf_kv(&out, "", "interval_ms", interval_ns / 1000000);
    ag_buf_kv(&out, "count.", "allocs", c.allocs);
    ag_buf_kv(&out, "count.", "frees", c.frees);
    ag_buf_kv(&out, "count.", "reallocs", c.reallocs);
    ag_buf_kv(&out, "count.", "blocks_in", c.allocs + c.blocks_in);
    ag_buf_kv(&out, "count.", "blocks_out", c.frees + c.blocks_out);
    ag_buf_kv(&out, "count.", "bytes_in", c.bytes_in);
    ag_buf_kv(&out, "count.", "bytes_out", c.bytes_out);
    ag_buf_kv(&out, "count.", "requested", c.requested);
    ag_buf_kv(&out, "", "rss", rss_bytes());
    ag_stats_raw(&out, "raw.");
    if (trim_lines.len)
        ag_buf_put(&out, trim_lines.data, trim_lines.len);
    ag_stats_text(&out);
    ag_buf_str(&out, "end\n"); /* a reader that does not find it has a cut file */
    write_file();
}

static void trim_if_asked(void)
{
    char path[PATH_BYTES];
    path_join(path, ".trim");
    if (!path[0] || unlink(path) != 0)
        return;
    trim_lines.len = 0;
    trim_lines.failed = 0;
    uint64_t at = now_ns(CLOCK_REALTIME);
    uint64_t before = rss_bytes();
    ag_stats_raw(&trim_lines, "trim.before.");
    int done = ag_stats_trim();
    uint64_t after = rss_bytes();
    ag_stats_raw(&trim_lines, "trim.after.");
    ag_buf_kv(&trim_lines, "trim.", "at_unix_ns", at);
    ag_buf_kv(&trim_lines, "trim.", "done", (uint64_t)done);
    ag_buf_kv(&trim_lines, "trim.", "rss_before", before);
    ag_buf_kv(&trim_lines, "trim.", "rss_after", after);
}

static void *agent_main(void *arg)
{
    (void)arg;
    ag_busy_enter(); /* for good: nothing this thread allocates is the program's */
    __atomic_store_n(&thread_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    pthread_mutex_lock(&snap_lock);
    while (!stopped && !pausing) {
        trim_if_asked();
        take(0);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + interval_ns % 1000000000ull;
        until.tv_sec += (time_t)(interval_ns / 1000000000ull + ns / 1000000000ull);
        until.tv_nsec = (long)(ns % 1000000000ull);
        while (!stopped && !pausing &&
               pthread_cond_timedwait(&wake, &snap_lock, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&snap_lock);
    return NULL;
}

static void init_wake(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&wake, &attr);
    pthread_condattr_destroy(&attr);
}

static void start_thread(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits the full mask */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    ag_busy_enter(); /* the thread's stack and TLS are the agent's */
    pausing = 0;
    running = pthread_create(&thread, &attr, agent_main, NULL) == 0;
    ag_busy_leave();
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Ends the agent thread until ag_thread_resume, for the calls the kernel refuses to a process with
 * more than one thread (single_thread.c): it returns once the thread has left the thread group,
 * not merely its function. Returns 1 when a thread was ended (then call ag_thread_resume). */
AG_HIDDEN int ag_thread_pause(void)
{
    /* A vfork child shares our memory but is not `pid`: the thread is its parent's. */
    if (!active || pid != getpid())
        return 0;
    pthread_mutex_lock(&pause_lock);
    pthread_mutex_lock(&snap_lock);
    int was_running = running && !stopped;
    pausing = 1;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&snap_lock);
    if (!was_running) {
        pthread_mutex_lock(&snap_lock);
        pausing = 0;
        pthread_mutex_unlock(&snap_lock);
        pthread_mutex_unlock(&pause_lock);
        return 0;
    }
    ag_busy_enter();
    pthread_join(thread, NULL);
    running = 0;
    /* The kernel counts the thread until it is released, a moment after the join: wait until
     * tgkill no longer finds it (at most 1 s). */
    pid_t tid = __atomic_load_n(&thread_tid, __ATOMIC_ACQUIRE);
    for (int i = 0; tid > 0 && i < 10000; i++) {
        if (syscall(SYS_tgkill, pid, tid, 0) != 0 && errno == ESRCH)
            break;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    ag_busy_leave();
    return 1;
}

/* Starts the thread again after ag_thread_pause returned 1 (unless the process is exiting). */
AG_HIDDEN void ag_thread_resume(void)
{
    pthread_mutex_lock(&snap_lock);
    int again = !stopped;
    pthread_mutex_unlock(&snap_lock);
    if (again)
        start_thread();
    pthread_mutex_unlock(&pause_lock);
}

static void read_exe(void)
{
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    for (char *p = exe; *p; p++)
        if (*p == '\n')
            *p = '?'; /* one line in the file */
}

static void after_fork_child(void)
{
    pthread_mutex_init(&snap_lock, NULL);
    pthread_mutex_init(&pause_lock, NULL);
    init_wake();
    running = 0;
    ag_slots_after_fork();
    if (!active)
        return;
    pid = getpid();
    ppid = getppid();
    seq = 0;
    stopped = 0;
    trim_lines.len = 0;
    start_thread();
}

__attribute__((constructor)) static void agent_init(void)
{
    ag_bootstrap();
    ag_slots_init();
    const char *d = getenv("ALLOCLENS_AGENT_DIR");
    if (!d || !d[0] || strlen(d) >= PATH_BYTES - 64)
        return;
    memcpy(dir, d, strlen(d) + 1);
    const char *ms = getenv("ALLOCLENS_AGENT_INTERVAL_MS");
    if (ms && ms[0]) {
        uint64_t v = strtoull(ms, NULL, 10);
        if (v > 0)
            interval_ns = v * 1000000ull;
    }
    ag_busy_enter();
    ag_stats_init();
    ag_busy_leave();
    init_wake();
    pid = getpid();
    ppid = getppid();
    read_exe();
    seq = previous_seq();
    active = 1;
    pthread_atfork(NULL, NULL, after_fork_child);
    start_thread();
}

/* The final snapshot. `wait`: at exit, wait for a snapshot in progress; from _exit, which a
 * signal handler may call while this thread holds the lock, give up instead. A vfork child shares
 * `pid` with its parent and is not getpid(): it writes nothing. */
static void final_snapshot(int wait)
{
    if (!active)
        return;
    ag_busy_enter();
    if (wait ? pthread_mutex_lock(&snap_lock) == 0 : pthread_mutex_trylock(&snap_lock) == 0) {
        if (!stopped && pid == getpid()) {
            trim_if_asked();
            take(1);
            stopped = 1;
        }
        pthread_mutex_unlock(&snap_lock);
    }
    ag_busy_leave();
}

__attribute__((destructor)) static void agent_fini(void)
{
    final_snapshot(1);
}

/* _exit skips destructors (dash exits with it, and so do many fork children): the final snapshot
 * is written here instead. */
AG_EXPORT void _exit(int status)
{
    final_snapshot(0);
    static void (*real)(int);
    if (!real)
        real = (void (*)(int))dlsym(RTLD_NEXT, "_exit");
    if (real)
        real(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

AG_EXPORT void _Exit(int status)
{
    final_snapshot(0);
    static void (*real)(int);
    if (!real)
        real = (void (*)(int))dlsym(RTLD_NEXT, "_Exit");
    if (real)
        real(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}
