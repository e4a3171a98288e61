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
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define PATH_BYTES 4096

static char dir[PATH_BYTES];
static uint64_t interval_ns = 1000000000ull;
static int active; /* ALLOCLENS_AGENT_DIR was set, or alloclens attached */
/* Loaded into a running process by alloclens (alloclens_agent_attach), not preloaded: the heap
 * calls are not counted (nothing interposes them), the allocator's statistics are the figures. */
static int attached;
static int attach_setup; /* the agent thread has still to do the attach's set-up */
/* The directory went away (the attached alloclens ended): the thread ends, nothing is written. */
static int orphaned;
static int thread_done; /* agent_main returned: join before starting another */
/* The heap profile an attach asked for (alloclens_agent_attach_profile): applied by the agent
 * thread at its next interval (profile_pending), ended when the attach ends. */
static uint64_t profile_bytes;
static char profile_dir[PATH_BYTES];
static int profile_pending;
static int profiling;

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
    /* thread-self: a process whose main thread called pthread_exit has an empty /proc/self/statm
     * (the zombie leader's); any live thread's answers for the whole address space. */
    int fd = open("/proc/thread-self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
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
    if (fd < 0) {
        /* An attached agent's directory is removed when its alloclens ends: that ends it. */
        if (attached && errno == ENOENT)
            orphaned = 1;
        return;
    }
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
    if (attached)
        ag_buf_kv(&out, "", "attached", 1);
    ag_buf_kv(&out, "", "interval_ms", interval_ns / 1000000);
    ag_buf_kv(&out, "count.", "allocs", c.allocs);
    ag_buf_kv(&out, "count.", "frees", c.frees);
    ag_buf_kv(&out, "count.", "reallocs", c.reallocs);
    ag_buf_kv(&out, "count.", "blocks_in", c.allocs + c.blocks_in);
    ag_buf_kv(&out, "count.", "blocks_out", c.frees + c.blocks_out);
    ag_buf_kv(&out, "count.", "bytes_in", c.bytes_in);
    ag_buf_kv(&out, "count.", "bytes_out", c.bytes_out);
    ag_buf_kv(&out, "count.", "requested", c.requested);
    uint64_t rss = rss_bytes();
    ag_buf_kv(&out, "", "rss", rss);
    ag_stats_raw(&out, "raw.");
    if (trim_lines.len)
        ag_buf_put(&out, trim_lines.data, trim_lines.len);
    ag_stats_text(&out);
    ag_buf_str(&out, "end\n"); /* a reader that does not find it has a cut file */
    write_file();
    ag_prof_tick(&c, rss, final);
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

static void after_fork_child(void);
static void read_exe(void);

/* What an attach leaves to the agent thread, so that the borrowed thread only starts it. */
static void attach_set_up(void)
{
    /* The agent is not in the global scope (dlopened), so RTLD_DEFAULT finds the malloc that
     * serves the program (a preloaded jemalloc before glibc's), whose statistics are read. */
    ag_real_from_default();
    ag_stats_init();
    read_exe();
    pthread_atfork(NULL, NULL, after_fork_child);
}

/* The profile an attach asked for: the one running ends (a later attach replaces it), the new
 * one starts. Runs with snap_lock held. */
static void profile_apply(void)
{
    if (!profile_pending)
        return;
    profile_pending = 0;
    if (profiling)
        ag_attach_profile_stop();
    profiling = profile_bytes > 0 && ag_attach_profile_start(profile_dir, exe, profile_bytes) == 0;
}

static void *agent_main(void *arg)
{
    (void)arg;
    ag_busy_enter(); /* for good: nothing this thread allocates is the program's */
    __atomic_store_n(&thread_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    /* Named, so that an attach never borrows it (crates/attach) and `top -H` says what it is. */
    prctl(PR_SET_NAME, "alloclens-agent", 0, 0, 0);
    pthread_mutex_lock(&snap_lock);
    if (attach_setup) {
        attach_setup = 0;
        attach_set_up();
        seq = previous_seq();
    }
    while (!stopped && !pausing && !orphaned) {
        profile_apply();
        trim_if_asked();
        take(0);
        ag_attach_profile_tick();
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + interval_ns % 1000000000ull;
        until.tv_sec += (time_t)(interval_ns / 1000000000ull + ns / 1000000000ull);
        until.tv_nsec = (long)(ns % 1000000000ull);
        while (!stopped && !pausing && !orphaned &&
               pthread_cond_timedwait(&wake, &snap_lock, &until) != ETIMEDOUT)
            ;
    }
    /* The attach ended (its directory went away): the program's GOT back as it was, the table
     * left as it is. A pause (single_thread.c) keeps the profile running. */
    if (orphaned && profiling) {
        ag_attach_profile_stop();
        profiling = 0;
    }
    thread_done = 1;
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
    thread_done = 0;
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
    /* thread-self, as in rss_bytes: the zombie leader of an exited main thread has no exe. */
    ssize_t n = readlink("/proc/thread-self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        n = readlink("/proc/self/exe", exe, sizeof exe - 1);
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
    ag_prof_after_fork(exe);
    if (profiling)
        ag_attach_profile_after_fork();
    start_thread();
}

__attribute__((constructor)) static void agent_init(void)
{
    ag_slots_init();
    /* Without the directory (dlopened by an attach, or preloaded by hand) nothing starts here;
     * the hooks bootstrap on their first call. */
    const char *d = getenv("ALLOCLENS_AGENT_DIR");
    if (!d || !d[0] || strlen(d) >= PATH_BYTES - 64)
        return;
    ag_bootstrap();
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
    ag_prof_init(dir, exe);
    active = 1;
    pthread_atfork(NULL, NULL, after_fork_child);
    start_thread();
}

/* ------------------------------------------------------------ attach (crates/attach) */

/* Called by alloclens on a thread of a running process that it borrowed at a safe point, right
 * after dlopen of this library (docs/attach.md). The program waits for that thread, so it only
 * takes the settings and starts the agent thread, which does the rest. Called again by a later
 * attach (dlopen of the same file returns the same library): the thread, ended when the earlier
 * directory went away, starts again writing into the new one. `sample_bytes` > 0 asks for the heap
 * profile too, its table made in `table_dir` (which outlives the attach's directory). Returns 0,
 * or -1 for a directory path too long or an agent preloaded already. */
static int attach(const char *directory, uint64_t interval_ms, uint64_t sample_bytes,
                  const char *table_dir)
{
    size_t n = strlen(directory);
    size_t t = table_dir ? strlen(table_dir) : 0;
    if (n == 0 || n >= PATH_BYTES - 64 || t >= PATH_BYTES - 64)
        return -1;
    if (!attached) {
        if (active) /* preloaded and running already: alloclens refuses that case */
            return -1;
        init_wake();
        pid = getpid();
        ppid = getppid();
        ag_sample_only = 1; /* before any hook can run: only an attach patches them in */
        attach_setup = 1;
        attached = 1;
    }
    pthread_mutex_lock(&snap_lock);
    memcpy(dir, directory, n + 1);
    if (interval_ms > 0)
        interval_ns = interval_ms * 1000000ull;
    profile_bytes = t > 0 ? sample_bytes : 0;
    memcpy(profile_dir, t > 0 ? table_dir : "", t + 1);
    profile_pending = 1;
    orphaned = 0;
    active = 1;
    int start = !running || thread_done;
    pthread_cond_signal(&wake); /* a thread still running writes into the new directory now */
    pthread_mutex_unlock(&snap_lock);
    if (start) {
        if (running)
            pthread_join(thread, NULL);
        start_thread();
    }
    return 0;
}

/* watch --pid: snapshots of the allocator's statistics every interval_ms in `directory`. */
AG_EXPORT int alloclens_agent_attach(const char *directory, uint64_t interval_ms)
{
    return attach(directory, interval_ms, 0, NULL);
}

/* watch --pid --profile: the same, and the heap profile's sampler (got_hooks.c). */
AG_EXPORT int alloclens_agent_attach_profile(const char *directory, uint64_t interval_ms,
                                             uint64_t sample_bytes, const char *table_dir)
{
    return attach(directory, interval_ms, sample_bytes, table_dir);
}

/* The thread is inside final_snapshot: a signal handler on it that calls _exit must not wait for
 * the lock its own thread holds. */
static __thread int in_final;

/* How long _exit waits for a periodic snapshot in progress (a few ms) before giving up. */
#define EXIT_WAIT_NS 500000000ull

/* The final snapshot. `wait`: at exit, wait for a snapshot in progress; from _exit, wait for it a
 * bounded time (the agent thread may be writing its periodic snapshot: giving up at once lost the
 * final snapshot of a fork child that exits right after its agent thread started), and not at all
 * from a signal handler on a thread already inside it. A vfork child shares `pid` with its parent
 * and is not getpid(): it writes nothing and takes no lock. */
static void final_snapshot(int wait)
{
    if (!active || in_final || pid != getpid())
        return;
    ag_busy_enter();
    int locked;
    if (wait) {
        locked = pthread_mutex_lock(&snap_lock) == 0;
    } else {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + EXIT_WAIT_NS;
        until.tv_sec += (time_t)(ns / 1000000000ull);
        until.tv_nsec = (long)(ns % 1000000000ull);
        locked = pthread_mutex_timedlock(&snap_lock, &until) == 0;
    }
    if (locked) {
        in_final = 1;
        if (!stopped && !orphaned) {
            trim_if_asked();
            take(1);
            stopped = 1;
        }
        in_final = 0;
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
