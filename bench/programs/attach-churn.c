/* The program bench/attach-cost.sh attaches to: THREADS threads (default 4) each replacing a random
 * block among 256 live ones with a new one of a mixed size (16 B to 64 KiB), as fast as they can,
 * for SECONDS seconds (0: until SIGTERM or SIGINT).
 *
 * Every 100 ms the main thread prints one line:
 *     interval T CALLS GAP_US STOPPED_MAX_US STOPPED_SUM_US CPU_US CPU_CALLS PATCHED
 * T is CLOCK_MONOTONIC at the end of the interval in seconds (the clock of python's
 * time.monotonic(), so the bench can place the lines against what it did), CALLS the malloc and
 * free calls made in the interval by all threads, GAP_US the longest time one thread went between
 * two of its checkpoints (every 16 replacements): how long its own code stood still, whatever the
 * cause (a descheduled thread stands still too). STOPPED is the time a thread was neither running
 * nor waiting for a core (a ptrace stop, a futex wait), the longest of one thread and the sum of
 * all: each thread takes, about every 20 ms, its wall time minus its CPU time
 * (CLOCK_THREAD_CPUTIME_ID) minus the time it waited on a run queue (/proc/thread-self/schedstat,
 * up to date while the thread itself runs), so a loaded machine does not count. A stall or a stop
 * is counted in the interval where the thread runs again. CPU_US is the threads' CPU time (user and
 * system) and CPU_CALLS the calls they had made when it was read (every 10 ms, together): calls per
 * CPU second, the program's speed whatever else the machine runs. PATCHED is 1 when the
 * executable's GOT slots of malloc and free no longer hold what they held at the start: a hook is
 * in place (record --pid patches them while attached and must put them back). These are the
 * GLOB_DAT slots that taking the functions' addresses needs; the linker then sends the calls
 * through them too (its .plt.got stubs; `readelf -r` shows no JUMP_SLOT for malloc and free).
 *
 * Each block carries a random tag in its first 8 bytes and the tag's low byte in its last; a
 * block is checked when it is freed. At the end every block is freed and the program prints
 *     checksum ok calls=N tags=X
 * (or "checksum BAD ..." with the count of blocks whose bytes changed) and exits 0 only when every
 * tag read back was the one written: a run that an attach disturbed ends otherwise.
 * Usage: attach-churn [THREADS] [SECONDS] */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 256
#define CHECKPOINT 16           /* replacements between two clock readings */
#define ACCOUNT_NS 10000000ull  /* how often a thread accounts its time */

struct worker {
    _Alignas(64) atomic_uint_fast64_t calls;
    atomic_uint_fast64_t max_gap_ns; /* since the main thread last took it */
    atomic_int_fast64_t stopped_ns;  /* since the start; a reading may go back a little */
    atomic_uint_fast64_t cpu_ns, cpu_calls; /* CPU time since the start, and the calls made then */
    pthread_t thread;
    unsigned index;
    uint64_t written, read, bad; /* tag sums; touched by the worker alone until joined */
};

static atomic_int stop;
static volatile sig_atomic_t signalled;

static void on_signal(int sig)
{
    (void)sig;
    signalled = 1;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The executable's GOT slot of malloc and of free, read where it is (x86_64): a plain `&malloc`
 * would be a load the compiler may hoist, the GOT being constant to it. */
static void got_slots(void *slots[2])
{
    __asm__ volatile("movq malloc@GOTPCREL(%%rip), %0" : "=r"(slots[0]));
    __asm__ volatile("movq free@GOTPCREL(%%rip), %0" : "=r"(slots[1]));
}

/* Where a thread's wall time went: on a core, waiting for one, or neither (stopped). */
struct account {
    uint64_t wall, cpu, queued;
};

static struct account take_account(int schedstat, uint64_t wall)
{
    struct account a = {.wall = wall};
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    a.cpu = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
    char text[96];
    ssize_t n = pread(schedstat, text, sizeof text - 1, 0);
    if (n > 0) { /* "ON_CPU_NS QUEUED_NS SLICES" */
        text[n] = 0;
        char *end;
        strtoull(text, &end, 10);
        a.queued = strtoull(end, NULL, 10);
    }
    return a;
}

/* Mostly small blocks, some medium, a few large (below glibc's mmap threshold). */
static size_t pick_size(uint64_t x)
{
    unsigned kind = (unsigned)(x >> 56) % 100;
    if (kind < 75)
        return 16 + (x >> 8) % 241;
    if (kind < 97)
        return 256 + (x >> 8) % 3841;
    return 4096 + (x >> 8) % 61441;
}

static void release(struct worker *w, unsigned char *p)
{
    uint64_t tag;
    memcpy(&tag, p, sizeof tag);
    size_t size = pick_size(tag);
    if (p[size - 1] != (unsigned char)tag)
        w->bad++;
    w->read += tag;
    free(p);
}

static void *work(void *arg)
{
    struct worker *w = arg;
    unsigned char *slots[SLOTS] = {0};
    uint64_t x = 0x9E3779B97F4A7C15ull * (w->index + 1);
    uint64_t last = now_ns(), calls = 0;
    int schedstat = open("/proc/thread-self/schedstat", O_RDONLY);
    struct account previous = take_account(schedstat, last);
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < CHECKPOINT; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            unsigned s = x & (SLOTS - 1);
            if (slots[s]) {
                release(w, slots[s]);
                calls++;
            }
            size_t size = pick_size(x);
            unsigned char *p = malloc(size);
            memcpy(p, &x, sizeof x);
            p[size - 1] = (unsigned char)x;
            w->written += x;
            slots[s] = p;
            calls++;
        }
        atomic_store_explicit(&w->calls, calls, memory_order_relaxed);
        uint64_t t = now_ns();
        if (t - last > atomic_load_explicit(&w->max_gap_ns, memory_order_relaxed))
            atomic_store_explicit(&w->max_gap_ns, t - last, memory_order_relaxed);
        last = t;
        if (schedstat >= 0 && t - previous.wall >= ACCOUNT_NS) {
            struct account a = take_account(schedstat, t);
            int64_t stopped = (int64_t)(a.wall - previous.wall) - (int64_t)(a.cpu - previous.cpu) -
                              (int64_t)(a.queued - previous.queued);
            atomic_fetch_add_explicit(&w->stopped_ns, stopped, memory_order_relaxed);
            atomic_store_explicit(&w->cpu_ns, a.cpu, memory_order_relaxed);
            atomic_store_explicit(&w->cpu_calls, calls, memory_order_relaxed);
            previous = a;
        }
    }
    if (schedstat >= 0)
        close(schedstat);
    for (int s = 0; s < SLOTS; s++)
        if (slots[s]) {
            release(w, slots[s]);
            calls++;
        }
    atomic_store_explicit(&w->calls, calls, memory_order_relaxed);
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4;
    double seconds = argc > 2 ? atof(argv[2]) : 0;
    if (n < 1 || n > 64 || seconds < 0) {
        fprintf(stderr, "usage: attach-churn [THREADS 1-64] [SECONDS, 0: until SIGTERM]\n");
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);

    void *original[2], *now[2];
    got_slots(original);
    static struct worker workers[64];
    for (int i = 0; i < n; i++) {
        workers[i].index = (unsigned)i;
        pthread_create(&workers[i].thread, NULL, work, &workers[i]);
    }

    uint64_t start = now_ns(), previous = 0;
    int64_t stopped_before[64] = {0};
    uint64_t cpu_before = 0, cpu_calls_before = 0;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    while (!signalled && (seconds == 0 || now_ns() - start < (uint64_t)(seconds * 1e9))) {
        next.tv_nsec += 100000000;
        if (next.tv_nsec >= 1000000000) {
            next.tv_nsec -= 1000000000;
            next.tv_sec++;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) != 0 && !signalled)
            ;
        uint64_t calls = 0, gap = 0;
        int64_t stopped_max = 0, stopped_sum = 0;
        uint64_t cpu = 0, cpu_calls = 0;
        for (int i = 0; i < n; i++) {
            calls += atomic_load_explicit(&workers[i].calls, memory_order_relaxed);
            uint64_t g = atomic_exchange_explicit(&workers[i].max_gap_ns, 0, memory_order_relaxed);
            gap = g > gap ? g : gap;
            int64_t s = atomic_load_explicit(&workers[i].stopped_ns, memory_order_relaxed);
            int64_t d = s - stopped_before[i] > 0 ? s - stopped_before[i] : 0;
            stopped_before[i] = s;
            stopped_max = d > stopped_max ? d : stopped_max;
            stopped_sum += d;
            cpu += atomic_load_explicit(&workers[i].cpu_ns, memory_order_relaxed);
            cpu_calls += atomic_load_explicit(&workers[i].cpu_calls, memory_order_relaxed);
        }
        got_slots(now);
        printf("interval %.6f %llu %llu %lld %lld %llu %llu %d\n", now_ns() / 1e9,
               (unsigned long long)(calls - previous), (unsigned long long)(gap / 1000),
               (long long)(stopped_max / 1000), (long long)(stopped_sum / 1000),
               (unsigned long long)((cpu - cpu_before) / 1000),
               (unsigned long long)(cpu_calls - cpu_calls_before),
               now[0] != original[0] || now[1] != original[1]);
        cpu_before = cpu;
        cpu_calls_before = cpu_calls;
        previous = calls;
    }

    atomic_store(&stop, 1);
    uint64_t calls = 0, written = 0, read = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(workers[i].thread, NULL);
        calls += atomic_load(&workers[i].calls);
        written += workers[i].written;
        read += workers[i].read;
        bad += workers[i].bad;
    }
    int ok = written == read && bad == 0;
    printf("checksum %s calls=%llu tags=%016llx", ok ? "ok" : "BAD", (unsigned long long)calls,
           (unsigned long long)written);
    if (!ok)
        printf(" read=%016llx changed_blocks=%llu", (unsigned long long)read,
               (unsigned long long)bad);
    printf("\n");
    return ok ? 0 : 1;
}
