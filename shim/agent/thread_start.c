/*
 * The agent's thread starts when the program starts its second thread. Until then the program
 * runs on one thread and glibc's malloc stays on its single-thread path (no arena lock, no atomic
 * fastbin operation: SINGLE_THREAD_P), which a thread of the agent's would end for good; the
 * snapshots are taken on the program's thread meanwhile (snapshot.c). With a second thread glibc
 * has left that path anyway, so the agent's thread costs the program nothing more from then on.
 * pthread_create is never called from a signal handler (it is not async-signal-safe), so starting
 * a thread here cannot deadlock where starting one from a heap hook could (pthread_create itself
 * allocates the new thread's TLS). A thread made otherwise (C11 thrd_create calls glibc's
 * internally, a raw clone) leaves the snapshots on the program's threads.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

#include "agent.h"

/* This library's pthread_create by a hidden name: the exported name, in a library dlopened
 * RTLD_LOCAL (an attach), is the program's. */
AG_HIDDEN int ag_hook_pthread_create(pthread_t *t, const pthread_attr_t *attr,
                                     void *(*fn)(void *), void *arg);

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

AG_HIDDEN int ag_next_pthread_create(pthread_t *t, const pthread_attr_t *attr,
                                     void *(*fn)(void *), void *arg)
{
    static create_fn next;
    if (next == NULL) {
        ag_busy_enter(); /* what dlsym allocates is the agent's */
        create_fn f = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
        /* An attached agent is not in the global scope: the program's definition. */
        if (f == NULL || f == ag_hook_pthread_create)
            f = (create_fn)dlsym(RTLD_DEFAULT, "pthread_create");
        next = f != ag_hook_pthread_create ? f : NULL;
        ag_busy_leave();
    }
    return next != NULL ? next(t, attr, fn, arg) : EAGAIN;
}

AG_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
                             void *arg)
{
    ag_thread_wanted();
    return ag_next_pthread_create(t, attr, fn, arg);
}

AG_HOOK_ALIAS(pthread_create);
