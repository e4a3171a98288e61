/*
 * The interposed heap entry points. Each forwards to the next allocator in the chain (al_real,
 * resolved with dlsym(RTLD_NEXT)) and appends one record to the calling thread's ring.
 *
 * Order of events (what makes the trace causal): an allocation takes its sequence number after
 * the real call returned, a free before the real free runs. So when a block moves from one thread
 * to another, or an address is reused, the counter has already passed the earlier event.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* ------------------------------------------------------------------ calls in signal handlers */

/* A call that interrupted al_record on this thread (a signal handler's, or libunwind's while
 * record --stacks walks the stack): the stack walk, the ring slot or the seq are mid-update (and
 * libunwind is not reentrant: the call gets no stack of its own), so it is queued and recorded by the interrupted call when it is done
 * (al_flush_deferred), with the next seqs. The block itself is allocated or freed at once, as the
 * program asked: a handler frees only blocks allocated before (recorded already), and what it
 * allocates cannot be a block the interrupted call still owns, so the order stays causal on this
 * thread. A call that finds the queue full, or interrupts a nested call filling a slot (a signal
 * in a signal handler), is counted in the image's lost counter, which the recorder reports. */
static void defer(struct al_tls *t, uint64_t op, const void *addr, size_t size,
                  const void *old_addr)
{
    if (t->def_writing || t->def_head - t->def_tail >= AL_DEFERRED) {
        if (al_proc.lost)
            atomic_fetch_add_explicit(al_proc.lost, 1, memory_order_relaxed);
        return;
    }
    t->def_writing = 1;
    atomic_signal_fence(memory_order_seq_cst);
    struct al_deferred *d = &t->def[t->def_head & (AL_DEFERRED - 1)];
    d->op = op;
    d->addr = addr;
    d->size = size;
    d->old_addr = old_addr;
    atomic_signal_fence(memory_order_seq_cst);
    t->def_head = t->def_head + 1;
    atomic_signal_fence(memory_order_seq_cst);
    t->def_writing = 0;
}

/* Records the queued calls in order (with `in_hook` set by the caller). A copy is taken before
 * the slot is released: a handler may queue into it while the copy is being recorded. */
static void put_deferred(struct al_tls *t)
{
    while (t->def_tail != t->def_head) {
        struct al_deferred d = t->def[t->def_tail & (AL_DEFERRED - 1)];
        atomic_signal_fence(memory_order_seq_cst);
        t->def_tail = t->def_tail + 1;
        atomic_signal_fence(memory_order_seq_cst);
        if (t->ring != NULL && atomic_load(&al_proc.state) == AL_ACTIVE)
            al_put(t, t->ring, d.op, d.addr, d.size, d.old_addr);
    }
}

/* The ring is full and the thread waits for the recorder (al_put_wait) when a signal handler
 * calls: the interrupted call has taken neither a slot nor a seq, and only reads the ring's
 * tail while it waits. Its record is written first, on its behalf (its call came first), then
 * the queued calls, then this one; the interrupted call, back from its wait, sees `wait_done`
 * and writes nothing. `waiting` is down meanwhile, so a signal in this handler queues its call
 * instead of writing into the slot being written. A handler can wait for the recorder as any
 * call can (al_put_wait saves and restores the interrupted wait's state). */
static void hand_off(struct al_tls *t, uint64_t op, const void *addr, size_t size,
                     const void *old_addr)
{
    t->waiting = 0;
    atomic_signal_fence(memory_order_seq_cst);
    if (!t->wait_done) {
        struct al_deferred w = t->wait_for;
        if (t->ring != NULL && atomic_load(&al_proc.state) == AL_ACTIVE)
            al_put(t, t->ring, w.op, w.addr, w.size, w.old_addr);
        atomic_signal_fence(memory_order_seq_cst);
        t->wait_done = 1;
    }
    put_deferred(t);
    if (t->ring != NULL && atomic_load(&al_proc.state) == AL_ACTIVE)
        al_put(t, t->ring, op, addr, size, old_addr);
    atomic_signal_fence(memory_order_seq_cst);
    t->waiting = 1; /* the interrupted call still waits: a later handler's call goes straight in */
}

AL_HIDDEN int al_put_wait(struct al_tls *t, struct al_ring *r, uint64_t op, const void *addr,
                          size_t size, const void *old_addr)
{
    /* A handler's own wait, inside hand_off, nests in the interrupted one. */
    int was_waiting = t->waiting, was_done = t->wait_done;
    struct al_deferred was_for = t->wait_for;
    int ok = 1;
    while (atomic_load_explicit(&r->head, memory_order_relaxed) >= r->head_limit) {
        t->wait_for = (struct al_deferred){op, addr, size, old_addr};
        t->wait_done = 0;
        atomic_signal_fence(memory_order_seq_cst);
        t->waiting = 1;
        atomic_signal_fence(memory_order_seq_cst);
        ok = al_ring_wait(r);
        atomic_signal_fence(memory_order_seq_cst);
        t->waiting = 0;
        atomic_signal_fence(memory_order_seq_cst);
        if (t->wait_done || !ok) {
            ok = 0;
            break;
        }
    }
    t->wait_for = was_for;
    t->wait_done = was_done;
    atomic_signal_fence(memory_order_seq_cst);
    t->waiting = was_waiting;
    return ok;
}

AL_HIDDEN __attribute__((noinline)) void al_flush_deferred(struct al_tls *t)
{
    for (;;) {
        al_hook_enter(t); /* a handler's call meanwhile is queued behind these */
        atomic_signal_fence(memory_order_seq_cst);
        put_deferred(t);
        al_hook_leave(t);
        atomic_signal_fence(memory_order_seq_cst);
        /* A handler that ran between the last check and clearing in_hook queued a call. */
        if (t->def_tail == t->def_head)
            return;
    }
}

/* ------------------------------------------------------------------------- record --stacks */

AL_HIDDEN __attribute__((noinline)) void al_record_stacks(struct al_tls *t, struct al_ring *r,
                                                        uint64_t op, const void *addr,
                                                        size_t size, const void *old_addr)
{
    /* Up from here, not just around al_put: a signal handler's call while the stack is walked is
     * queued and recorded after this one, without a stack of its own (libunwind is not
     * reentrant, and the handler's call must not be dropped). */
    al_hook_enter(t);
    atomic_signal_fence(memory_order_seq_cst);
    if ((al_stacks.frees || !al_op_is_free(op)) &&
        (al_stacks.sample_bytes == 0 || al_sample(t, size))) {
        uint32_t at = al_stack_capture();
        if (at == 0)
            at = al_stacks.unknown_at; /* sampled, no stack: the empty stack (0 when all) */
        if (op == AL_OP_REALLOC || op == AL_OP_REALLOCARRAY) {
            uintptr_t old = (uintptr_t)old_addr;
            if (at != 0 && (old >> 48) == 0 && (size >> 48) == 0) {
                old_addr = (const void *)(old | (uintptr_t)(at >> 16) << 48);
                size |= (size_t)(at & 0xffff) << 48;
                op |= AL_OP_HAS_STACK;
            }
        } else if (at != 0) {
            old_addr = (const void *)(uintptr_t)at;
            op |= AL_OP_HAS_STACK;
        }
    }
    al_put(t, r, op, addr, size, old_addr);
    atomic_signal_fence(memory_order_seq_cst);
    al_hook_leave(t);
    atomic_signal_fence(memory_order_seq_cst);
    if (AL_UNLIKELY(t->def_head != t->def_tail))
        al_flush_deferred(t);
}

AL_HIDDEN __attribute__((noinline)) void al_record_rest(struct al_tls *t, struct al_ring *r,
                                                      uint64_t op, const void *addr, size_t size,
                                                      const void *old_addr)
{
    al_put(t, r, op, addr, size, old_addr);
    atomic_signal_fence(memory_order_seq_cst);
    al_hook_leave(t);
    atomic_signal_fence(memory_order_seq_cst);
    if (AL_UNLIKELY(t->def_head != t->def_tail))
        al_flush_deferred(t);
}

/* --------------------------------------------------------------------------- slow path */

/* First event of a thread or of the image, or tracing off / re-entered. */
AL_HIDDEN __attribute__((noinline)) void al_record_slow(uint64_t op, const void *addr, size_t size,
                                                      const void *old_addr, const void *caller)
{
    struct al_tls *t = &al_tls;
    struct al_ring *r = t->ring;
    /* Tracing with stacks: al_record's one test of the state sends every call here. */
    if (AL_LIKELY(r != NULL && t->guards == 0 &&
                  atomic_load_explicit(&al_proc.state, memory_order_relaxed) == AL_ACTIVE &&
                  atomic_load_explicit(&al_proc.stacks_on, memory_order_relaxed) &&
                  (!AL_ATTACHED ||
                   r->session == atomic_load_explicit(&al_proc.session, memory_order_relaxed)))) {
        al_record_stacks(t, r, op, addr, size, old_addr);
        return;
    }
    if (t->busy)
        return;
    if (t->in_hook) {
        if (atomic_load_explicit(&al_proc.state, memory_order_relaxed) != AL_ACTIVE)
            return;
        /* ld.so allocating libunwind's thread-local storage while the stack is walked: the
         * shim's call, not the program's (a signal handler's call comes from the program). */
        if ((uintptr_t)caller - al_stacks.loader_start <
            al_stacks.loader_end - al_stacks.loader_start)
            return;
        if (t->waiting && !t->def_writing)
            hand_off(t, op, addr, size, old_addr);
        else
            defer(t, op, addr, size, old_addr);
        return;
    }
    /* free records without its own ready() test: nothing is recorded before the bootstrap. */
    if (AL_UNLIKELY(al_real.malloc == NULL) && al_bootstrap() != 0)
        return;
    /* The set-up below makes system calls; the program sees errno as the allocator left it. */
    int saved_errno = errno;
    int state = atomic_load(&al_proc.state);
    if (state == AL_UNINIT) {
        al_proc_init();
        state = atomic_load(&al_proc.state);
    }
    if (AL_ATTACHED && t->ring != NULL && t->ring->session != atomic_load(&al_proc.session))
        t->ring = NULL; /* a ring of an earlier attach, its recorder gone */
    if (state == AL_ACTIVE && t->ring == NULL) {
        /* A signal handler's call meanwhile is queued (the shim's own, in pthread_setspecific,
         * passes through: al_ring_attach raises the guard around it). */
        al_hook_enter(t);
        atomic_signal_fence(memory_order_seq_cst);
        al_ring_attach(t);
        atomic_signal_fence(memory_order_seq_cst);
        al_hook_leave(t);
        atomic_signal_fence(memory_order_seq_cst);
    }
    if (state == AL_ACTIVE && t->ring != NULL)
        al_record(op, addr, size, old_addr);
    errno = saved_errno;
}

/* The aligned entry points run with the guard up: an allocator may implement one with another
 * through the PLT (glibc's valloc calls memalign paths, others call posix_memalign), which would
 * record the call twice. */
static inline int ready(void)
{
    return AL_LIKELY(al_real.malloc != NULL) || al_bootstrap() == 0;
}

/* --------------------------------------------------------------------------------- hooks */

AL_EXPORT void *malloc(size_t size)
{
    if (AL_UNLIKELY(!ready()))
        return al_arena_alloc(size, 16);
    void *p = al_real.malloc(size);
    al_record(AL_OP_MALLOC, p, size, NULL);
    return p;
}

AL_EXPORT void *calloc(size_t n, size_t size)
{
    if (AL_UNLIKELY(!ready())) {
        size_t total;
        if (__builtin_mul_overflow(n, size, &total))
            return NULL;
        return al_arena_alloc(total, 16); /* static storage: already zero */
    }
    void *p = al_real.calloc(n, size);
    size_t total;
    if (__builtin_mul_overflow(n, size, &total))
        total = SIZE_MAX;
    al_record(AL_OP_CALLOC, p, total, NULL);
    return p;
}

static void *arena_realloc(void *old, size_t size)
{
    void *p = malloc(size);
    if (p && old) {
        size_t n = al_arena_size(old);
        memcpy(p, old, n < size ? n : size);
    }
    return p;
}

AL_EXPORT void *realloc(void *old, size_t size)
{
    if (AL_UNLIKELY(al_arena_owns(old)))
        return arena_realloc(old, size);
    if (AL_UNLIKELY(!ready()))
        return al_arena_alloc(size, 16);
    void *p = al_real.realloc(old, size);
    al_record(AL_OP_REALLOC, p, size, old);
    return p;
}

AL_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    if (AL_UNLIKELY(al_arena_owns(old)))
        return arena_realloc(old, total);
    if (AL_UNLIKELY(!ready()))
        return al_arena_alloc(total, 16);
    /* realloc, not the real reallocarray: glibc's calls realloc through the PLT, which would
     * record the call twice. The overflow check above is what reallocarray adds. */
    void *p = al_real.realloc(old, total);
    al_record(AL_OP_REALLOCARRAY, p, total, old);
    return p;
}

AL_EXPORT void free(void *p)
{
    if (AL_UNLIKELY(al_arena_owns(p)))
        return; /* bootstrap arena: never returned */
    /* No ready() test: a thread has a ring only after the bootstrap (al_record_slow tests it),
     * and al_real.free is resolve_free until then. */
    /* Attached: a block allocated before the attach is freed with the bytes it held. */
    al_record(AL_OP_FREE, p, AL_ATTACHED && p ? al_usable_size(p) : 0, NULL);
    al_real.free(p);
}

AL_EXPORT void free_sized(void *p, size_t size)
{
    if (AL_UNLIKELY(al_arena_owns(p)) || AL_UNLIKELY(!ready()))
        return;
    al_record(AL_OP_FREE_SIZED, p, size, NULL);
    if (al_real.free_sized)
        al_real.free_sized(p, size);
    else
        al_real.free(p);
}

AL_EXPORT void free_aligned_sized(void *p, size_t align, size_t size)
{
    if (AL_UNLIKELY(al_arena_owns(p)) || AL_UNLIKELY(!ready()))
        return;
    al_record(AL_OP_FREE_ALIGNED_SIZED, p, size, NULL);
    if (al_real.free_aligned_sized)
        al_real.free_aligned_sized(p, align, size);
    else
        al_real.free(p);
}

AL_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    if (AL_UNLIKELY(!ready())) {
        *out = al_arena_alloc(size, align);
        return *out ? 0 : ENOMEM;
    }
    al_tls.busy++;
    int rc = al_real.posix_memalign(out, align, size);
    al_tls.busy--;
    al_record(AL_OP_POSIX_MEMALIGN, rc == 0 ? *out : NULL, size, NULL);
    return rc;
}

AL_EXPORT void *aligned_alloc(size_t align, size_t size)
{
    if (AL_UNLIKELY(!ready()))
        return al_arena_alloc(size, align);
    al_tls.busy++;
    void *p = al_real.aligned_alloc(align, size);
    al_tls.busy--;
    al_record(AL_OP_ALIGNED_ALLOC, p, size, NULL);
    return p;
}

AL_EXPORT void *memalign(size_t align, size_t size)
{
    if (AL_UNLIKELY(!ready()))
        return al_arena_alloc(size, align);
    al_tls.busy++;
    void *p = al_real.memalign(align, size);
    al_tls.busy--;
    al_record(AL_OP_MEMALIGN, p, size, NULL);
    return p;
}

AL_EXPORT void *valloc(size_t size)
{
    if (AL_UNLIKELY(!ready()))
        return al_arena_alloc(size, 4096);
    al_tls.busy++;
    void *p = al_real.valloc(size);
    al_tls.busy--;
    al_record(AL_OP_VALLOC, p, size, NULL);
    return p;
}

AL_EXPORT void *pvalloc(size_t size)
{
    if (AL_UNLIKELY(!ready()))
        return al_arena_alloc(size, 4096);
    al_tls.busy++;
    void *p = al_real.pvalloc(size);
    al_tls.busy--;
    al_record(AL_OP_PVALLOC, p, size, NULL);
    return p;
}

/* ------------------------------------------------------------------------- process exit */

/* _exit skips destructors: tell the recorder that this end is deliberate (not a crash) first. */
AL_EXPORT void _exit(int status)
{
    al_send_end(AL_END__EXIT);
    if (al_real.exit_ || al_bootstrap() == 0 || al_real.exit_)
        al_real.exit_(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

AL_EXPORT void _Exit(int status)
{
    al_send_end(AL_END__EXIT);
    if (al_real.Exit_ || al_bootstrap() == 0 || al_real.Exit_)
        al_real.Exit_(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}
