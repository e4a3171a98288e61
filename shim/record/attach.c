/*
 * The attach shim's life in a running process (record --pid): the entry alloclens calls after it
 * loaded the library (crates/attach), the thread that waits for the detach, and the detach.
 *
 * Attach: connect to the recorder, announce the image (hello, then the attached message: the
 * allocator's own count of the bytes in use, so the heap that was there before is stated), patch
 * the GOT (shim/common/got.c). From then on every thread's calls are recorded as under the
 * preload shim, each thread getting its ring on its first call.
 *
 * Detach: the recorder shuts its side of the socket (Ctrl-C, SIGTERM, --duration); the watcher
 * thread wakes, writes back the GOT, waits a moment for the calls already inside a hook, ends the
 * image (AL_END_DETACHED) and gives back the rings' memory. The library stays loaded, with its
 * static state: a later attach of the same image starts a new session (al_proc.session), and each
 * thread's ring of the earlier one is replaced on its next call.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "got.h"
#include "internal.h"

static size_t (*usable_size_fn)(void *);

AL_HIDDEN size_t al_usable_size(const void *p)
{
    return usable_size_fn ? usable_size_fn((void *)p) : 0;
}

/* Whether two functions are in the same module (the allocator's malloc_usable_size must be the
 * one of the allocator that serves malloc: another's would read a foreign block header). */
static int same_module(void *a, void *b)
{
    Dl_info ia, ib;
    return a && b && dladdr(a, &ia) && dladdr(b, &ib) && ia.dli_fbase == ib.dli_fbase;
}

/* The allocator's own count of the bytes in use, for the allocators whose statistics can be read
 * with a call (mimalloc keeps none that says it). */
static uint64_t heap_in_use(uint32_t *source)
{
    int (*mallctl)(const char *, void *, size_t *, void *, size_t) =
        (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT, "mallctl");
    if (mallctl && same_module((void *)mallctl, (void *)al_real.malloc)) {
        uint64_t epoch = 1;
        size_t n = sizeof epoch;
        mallctl("epoch", &epoch, &n, &epoch, n);
        size_t allocated = 0;
        n = sizeof allocated;
        if (mallctl("stats.allocated", &allocated, &n, NULL, 0) == 0) {
            *source = AL_HEAP_JEMALLOC;
            return allocated;
        }
    }
    int (*property)(const char *, size_t *) = (int (*)(const char *, size_t *))dlsym(
        RTLD_DEFAULT, "MallocExtension_GetNumericProperty");
    size_t bytes = 0;
    if (property && same_module((void *)property, (void *)al_real.malloc) &&
        property("generic.current_allocated_bytes", &bytes)) {
        *source = AL_HEAP_TCMALLOC;
        return bytes;
    }
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    struct mallinfo2 (*info)(void) = NULL;
    if (libc) {
        if (dlsym(libc, "malloc") == (void *)al_real.malloc)
            info = (struct mallinfo2(*)(void))dlsym(libc, "mallinfo2");
        dlclose(libc);
    }
    if (info) {
        struct mallinfo2 m = info();
        *source = AL_HEAP_GLIBC;
        return (uint64_t)m.uordblks + (uint64_t)m.hblkhd;
    }
    *source = AL_HEAP_NONE;
    return 0;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* How long the detach waits, GOT restored, for the calls that were already inside a hook: they
 * record into their ring before the image ends (a call still in flight after that is not in the
 * trace; docs/attach.md). */
#define IN_FLIGHT_MS 20
#define RECORDER_DONE_MS 10000

static void detach(void)
{
    got_restore();
    pause_ms(IN_FLIGHT_MS);
    struct {
        struct al_msg_hdr h;
        struct al_end e;
    } m = {{AL_MSG_END, sizeof m}, {AL_END_DETACHED, 0}};
    /* Also when tracing stopped on an error meanwhile (al_send wants the state active): the
     * recorder waits for this end. */
    atomic_store(&al_proc.state, AL_ACTIVE);
    al_send(&m, sizeof m, -1);
    atomic_store(&al_proc.state, AL_OFF);
    al_stacks_off();
    /* The hang-up tells the recorder the image ended; it drains the rings after it. Their
     * memory is given back once it has (the memfd is shared: a hole punched now would be zeroes
     * in its view too), or after RECORDER_DONE_MS. */
    shutdown(al_proc.sock, SHUT_RDWR); /* closed by the next attach: a late call may still send */
    for (int waited = 0; waited < RECORDER_DONE_MS && !al_rings_drained(); waited += 10)
        pause_ms(10);
    al_rings_release();
}

/* Waits for the recorder's shutdown (or hang-up), patching modules loaded meanwhile by a bare
 * name (got.h) every 100 ms. Its name starts with "alloclens", so a later attach passes it over
 * when it looks for a thread to borrow. */
static void *watcher(void *unused)
{
    (void)unused;
    prctl(PR_SET_NAME, "alloclens-rec", 0, 0, 0);
    for (;;) {
        struct pollfd p = {.fd = al_proc.sock, .events = POLLIN | POLLRDHUP};
        int n = poll(&p, 1, 100);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 0 || atomic_load(&al_proc.state) != AL_ACTIVE)
            break;
        got_patch_new_modules();
    }
    detach();
    return NULL;
}

static int start_watcher(void)
{
    sigset_t all, old;
    sigfillset(&all);
    /* The thread inherits this mask: the program's signals go to its own threads. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_t t;
    int rc = pthread_create(&t, &attr, watcher, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* Error returns of the entry (alloclens prints the reason). */
#define ATTACH_BUSY -1       /* this image is being recorded already */
#define ATTACH_SOCKET -2     /* the socket path is too long */
#define ATTACH_NO_MALLOC -3  /* no malloc found */
#define ATTACH_CONNECT -4    /* the recorder could not be reached (stderr of the process says why) */
#define ATTACH_THREAD -5     /* the watcher thread could not be started */

/* record --pid's entry, on the thread alloclens borrowed: `stacks` is record --stacks' depth (0:
 * none) with bit 32 for --free-stacks, `sample_bytes` its --stack-sample. Returns the GOT slots
 * patched, or one of the errors above. */
AL_EXPORT long alloclens_record_attach(const char *socket, uint64_t stacks, uint64_t sample_bytes)
{
    int state = atomic_load(&al_proc.state);
    if (state == AL_ACTIVE || state == AL_INITIALIZING)
        return ATTACH_BUSY;
    if (al_set_socket_path(socket) != 0)
        return ATTACH_SOCKET;
    al_tls.busy++;
    long rc = 0;
    if (al_bootstrap() != 0 || got_init() != 0) {
        rc = ATTACH_NO_MALLOC;
        goto out;
    }
    void *usable = dlsym(RTLD_DEFAULT, "malloc_usable_size");
    usable_size_fn = same_module(usable, (void *)al_real.malloc) ? (size_t(*)(void *))usable : NULL;
    /* A new session: the rings of an earlier attach are not this recorder's. */
    atomic_fetch_add(&al_proc.session, 1);
    if (al_proc.sock >= 0)
        close(al_proc.sock);
    al_proc.sock = -1;
    /* A failed stacks set-up says why on the process's stderr; the recording goes on without. */
    if (stacks & 0xffffffffu) {
        al_stacks_discard();
        al_stacks_setup_with((int)(stacks & 0xffffffffu), (int)(stacks >> 32) & 1, sample_bytes);
    }
    atomic_store(&al_proc.state, AL_UNINIT);
    al_tls.busy--; /* al_proc_init raises it itself */
    al_proc_init();
    al_tls.busy++;
    if (atomic_load(&al_proc.state) != AL_ACTIVE) {
        rc = ATTACH_CONNECT;
        goto out;
    }
    struct {
        struct al_msg_hdr h;
        struct al_attached a;
    } m = {{AL_MSG_ATTACHED, sizeof m}, {0, 0, 0}};
    m.a.heap_in_use = heap_in_use(&m.a.heap_source);
    const char *why = NULL;
    if (got_patch(&why) != 0 && why)
        al_write_stderr("record --pid: ", why);
    m.a.got_slots = got_slots();
    al_send(&m, sizeof m, -1);
    if (start_watcher() != 0) {
        got_restore();
        atomic_store(&al_proc.state, AL_OFF);
        shutdown(al_proc.sock, SHUT_RDWR);
        rc = ATTACH_THREAD;
        goto out;
    }
    rc = (long)m.a.got_slots;
out:
    al_tls.busy--;
    return rc;
}
