/*
 * Per-thread rings: the hot path's only destination.
 *
 * Each traced thread owns one single-producer/single-consumer ring of fixed 32-byte records in a
 * memfd shared with the recorder: the thread appends and publishes `head` with a release store,
 * the recorder drains and publishes `tail`. No lock, no syscall and no allocation per event; a
 * thread only waits when its ring is full (the recorder is behind), which is the back-pressure.
 * Since the recorder maps the rings itself, nothing is lost when a thread or process dies without
 * flushing: the recorder drains what was published.
 *
 * Rings outlive threads: a new thread takes the ring of a thread that is gone, announcing itself
 * with an in-band AL_OP_RING_OWNER record. An exiting thread keeps writing into its ring to the
 * end: libc frees after every TLS and pthread-key destructor ran (glibc's __libc_thread_freeres:
 * two free(NULL) per thread), so the ring waits on a retiring list until the kernel says the
 * thread is gone (tgkill(pid, tid, 0) fails with ESRCH) before another thread takes it. The list
 * lock is taken only when a thread starts or exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

AL_HIDDEN __thread struct al_tls al_tls __attribute__((tls_model(AL_TLS_MODEL)));

#define RING_MAP_BYTES ((size_t)AL_RING_HEADER_BYTES + (size_t)AL_RING_RECORDS * AL_RECORD_SIZE)

_Static_assert(sizeof(struct al_record) == AL_RECORD_SIZE, "record layout");
_Static_assert(sizeof(struct al_ring) <= AL_RING_HEADER_BYTES, "ring header fits its page");
_Static_assert(__builtin_offsetof(struct al_ring, head) == AL_RING_HEAD_OFFSET, "head offset");
_Static_assert(__builtin_offsetof(struct al_ring, tail) == AL_RING_TAIL_OFFSET, "tail offset");
_Static_assert((AL_RING_RECORDS & (AL_RING_RECORDS - 1)) == 0, "ring size is a power of two");

static _Atomic int rings_lock_word;
static struct al_ring *free_rings;
static struct al_ring *retiring_rings; /* their threads are exiting (owner_tid), maybe gone */
static struct al_ring *all_rings;
static pthread_key_t exit_key;
static int exit_key_ok;

AL_HIDDEN void al_rings_lock(void)
{
    while (atomic_exchange_explicit(&rings_lock_word, 1, memory_order_acquire))
        sched_yield();
}

AL_HIDDEN void al_rings_unlock(void)
{
    atomic_store_explicit(&rings_lock_word, 0, memory_order_release);
}

/* Thread exit (the pthread key's destructor). The thread keeps its ring: other destructors and
 * libc's own teardown still allocate and free after this. The ring goes to the retiring list,
 * from which a new thread takes it once this one is gone (take_ring). */
static void thread_exit(void *value)
{
    struct al_ring *r = value;
    struct al_tls *t = &al_tls;
    if (r == NULL || r != t->ring)
        return;
    r->owner_tid = t->tid;
    al_rings_lock();
    r->next_free = retiring_rings;
    retiring_rings = r;
    al_rings_unlock();
}

/* A thread's tid is free again, or the thread is a zombie no more: its writes are over. */
static int thread_gone(uint32_t tid, uint32_t self)
{
    if (tid == self)
        return 1; /* the kernel reuses a tid only once its thread is gone */
    return syscall(SYS_tgkill, (int)al_proc.pid, (int)tid, 0) != 0 && errno == ESRCH;
}

/* A ring for a new thread: a free one, or a retiring one whose thread is gone. */
static struct al_ring *take_ring(uint32_t self)
{
    al_rings_lock();
    struct al_ring *r = free_rings;
    if (r) {
        free_rings = r->next_free;
    } else {
        for (struct al_ring **at = &retiring_rings; *at; at = &(*at)->next_free) {
            if (thread_gone((*at)->owner_tid, self)) {
                r = *at;
                *at = r->next_free;
                break;
            }
        }
    }
    al_rings_unlock();
    return r;
}

AL_HIDDEN void al_rings_init(void)
{
    if (!exit_key_ok) /* a key survives fork; created once per image */
        exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

AL_HIDDEN int al_rings_drained(void)
{
    int drained = 1;
    al_rings_lock();
    for (struct al_ring *r = all_rings; r && drained; r = r->next_all)
        drained = atomic_load_explicit(&r->tail, memory_order_acquire) ==
                  atomic_load_explicit(&r->head, memory_order_acquire);
    al_rings_unlock();
    return drained;
}

AL_HIDDEN void al_rings_release(void)
{
    al_rings_lock();
    for (struct al_ring *r = all_rings; r; r = r->next_all)
        madvise(r, RING_MAP_BYTES, MADV_REMOVE);
    all_rings = NULL;
    free_rings = NULL;
    retiring_rings = NULL;
    al_rings_unlock();
}

AL_HIDDEN void al_rings_forget(void)
{
    for (struct al_ring *r = all_rings, *next; r; r = next) {
        next = r->next_all;
        munmap(r, RING_MAP_BYTES);
    }
    all_rings = NULL;
    free_rings = NULL;
    retiring_rings = NULL;
    atomic_store(&rings_lock_word, 0);
}

/* A thread without a ring cannot be traced, and the trace would miss its events without saying
 * so: tracing stops in the image, with the reason, instead (an address-space limit, `ulimit -v`,
 * is the usual cause; retrying on every call would cost three system calls per call). */
static struct al_ring *no_ring(int fd)
{
    if (fd >= 0)
        close(fd);
    al_disable("cannot map a 4 MiB ring for a new thread (no memory or address space left)");
    return NULL;
}

static struct al_ring *ring_create(uint32_t tid)
{
    int fd = memfd_create("alloclens-ring", MFD_CLOEXEC);
    if (fd < 0)
        return no_ring(-1);
    if (ftruncate(fd, (off_t)RING_MAP_BYTES) != 0)
        return no_ring(fd);
    struct al_ring *r = mmap(NULL, RING_MAP_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r == MAP_FAILED)
        return no_ring(fd);
    struct {
        struct al_msg_hdr h;
        struct al_ring_msg m;
    } msg = {{AL_MSG_RING, sizeof msg}, {tid, 0}};
    int sent = al_send(&msg, sizeof msg, fd);
    close(fd); /* the recorder holds its own reference now */
    if (sent != 0) {
        munmap(r, RING_MAP_BYTES);
        return NULL;
    }
    r->session = atomic_load(&al_proc.session);
    r->head_limit = AL_RING_RECORDS; /* empty: the recorder has read nothing yet */
    al_rings_lock();
    r->next_all = all_rings;
    all_rings = r;
    al_rings_unlock();
    return r;
}

/* Gives the calling thread a ring (called on its first traced event). */
AL_HIDDEN struct al_ring *al_ring_attach(struct al_tls *t)
{
    if (t->tid == 0)
        t->tid = al_gettid();
    struct al_ring *r = take_ring(t->tid);
    if (r == NULL && (r = ring_create(t->tid)) == NULL)
        return NULL;
    /* In-band owner record: everything after it in this ring belongs to this thread. */
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (head >= r->head_limit && !al_ring_wait(r)) {
        al_rings_lock();
        r->next_free = free_rings;
        free_rings = r;
        al_rings_unlock();
        return NULL;
    }
    struct al_record *rec = &al_ring_records(r)[head & (AL_RING_RECORDS - 1)];
    rec->seq_op = (uint64_t)AL_OP_RING_OWNER << AL_OP_SHIFT;
    rec->addr = t->tid;
    rec->size = 0;
    rec->old_addr = 0;
    atomic_store_explicit(&r->head, head + 1, memory_order_release);
    t->ring = r;
    if (exit_key_ok) {
        /* glibc allocates (calloc) only for a key past the first 32, its first-level block: only
         * then is the guard raised, since a signal handler's call meanwhile would be lost without
         * a trace (the guard cannot tell it from ours). The key is created at start-up, so it is
         * almost always among the first 32. */
        int guard = exit_key >= 32;
        t->busy += guard;
        pthread_setspecific(exit_key, r);
        t->busy -= guard;
    }
    return r;
}

/* The ring is full: wait for the recorder to drain it. Returns 0 when tracing stopped meanwhile
 * (recorder gone), so the caller drops the event and lets the program continue. */
AL_HIDDEN int al_ring_wait(struct al_ring *r)
{
    for (unsigned i = 1;; i++) {
        r->head_limit = atomic_load_explicit(&r->tail, memory_order_acquire) + AL_RING_RECORDS;
        /* Read each time: a signal handler may write records while this thread waits. */
        atomic_signal_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&r->head, memory_order_relaxed) < r->head_limit)
            return 1;
        if (atomic_load(&al_proc.state) != AL_ACTIVE)
            return 0;
        if (i % 256 == 0 && al_recorder_gone()) {
            al_disable("the recorder is gone");
            return 0;
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}
