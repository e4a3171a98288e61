/*
 * The calls the kernel refuses to a process with more than one thread, made possible with the
 * agent's thread in the process. unshare(CLONE_NEWUSER) (`unshare -U`, rootless containers,
 * sandboxes) and setns() into a user or mount namespace fail with EINVAL while any other thread
 * lives; so do unshare's CLONE_THREAD, CLONE_SIGHAND and CLONE_VM. Around those calls the agent
 * thread is ended (not merely stopped: the kernel counts a thread until it has exited) and started
 * again after, so the program gets the answer it would get without the agent; at worst a snapshot
 * comes a moment late. A call made through syscall(2) directly, not through libc, is not seen.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

/* unshare flags the kernel grants only to a single-threaded process (CLONE_NEWUSER implies
 * CLONE_THREAD; kernel/fork.c, check_unshare_flags). */
#define SINGLE_THREAD_UNSHARE (CLONE_NEWUSER | CLONE_THREAD | CLONE_SIGHAND | CLONE_VM)

/* The next library's call (another preload may wrap it too), else the system call itself. */
static int next_unshare(int flags)
{
    static int (*next)(int);
    if (!next) {
        ag_busy_enter(); /* what dlsym allocates is the agent's */
        next = (int (*)(int))dlsym(RTLD_NEXT, "unshare");
        ag_busy_leave();
    }
    return next ? next(flags) : (int)syscall(SYS_unshare, flags);
}

static int next_setns(int fd, int nstype)
{
    static int (*next)(int, int);
    if (!next) {
        ag_busy_enter(); /* what dlsym allocates is the agent's */
        next = (int (*)(int, int))dlsym(RTLD_NEXT, "setns");
        ag_busy_leave();
    }
    return next ? next(fd, nstype) : (int)syscall(SYS_setns, fd, nstype);
}

AG_EXPORT int unshare(int flags)
{
    if (!(flags & SINGLE_THREAD_UNSHARE))
        return next_unshare(flags);
    int paused = ag_thread_pause();
    int r = next_unshare(flags);
    int e = errno;
    if (paused)
        ag_thread_resume();
    errno = e;
    return r;
}

/* nstype 0 accepts any namespace: a user or mount one may be behind the descriptor. Joining a
 * mount namespace needs the filesystem context unshared, which threads share. */
AG_EXPORT int setns(int fd, int nstype)
{
    if (nstype != 0 && !(nstype & (CLONE_NEWUSER | CLONE_NEWNS)))
        return next_setns(fd, nstype);
    int paused = ag_thread_pause();
    int r = next_setns(fd, nstype);
    int e = errno;
    if (paused)
        ag_thread_resume();
    errno = e;
    return r;
}
