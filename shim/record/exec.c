/*
 * exec and posix_spawn: announced to the recorder, so that a program that does not load the shim
 * (statically linked, set-user-ID, its LD_PRELOAD cleared or replaced) is reported as not traced
 * instead of vanishing from the trace (docs/recording.md, "Programs that are not traced").
 *
 * The shim cannot see inside the new program; it says what it is about to run (path, argv[0],
 * what the environment passed holds) and the recorder decides once the exec happened: a hello
 * from the pid means traced; otherwise it looks at /proc/PID (exe, auxv, environ) or, when the
 * program is already gone, at the file and at what this message said.
 *
 * These run in vfork children too (posix_spawn, vfork + exec), which share the parent's memory:
 * nothing here writes shared state, takes a lock, allocates or calls dlsym. The message goes out
 * with one sendmsg on the image's socket (the child's copy of the descriptor); a failed send is
 * ignored (the exec itself matters more than its announcement).
 *
 * glibc's execl, execlp, execle, execv and execvp are not interposed one by one by libc (they call
 * its internal execve): each is defined here on top of the real execve or execvpe. fexecve,
 * execveat and the raw system call are not announced (docs/recording.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

extern char **environ;

/* Appends a string (NUL included when `nul`) to buf; returns the new length. */
static size_t put(char *buf, size_t n, size_t cap, const char *s, int nul)
{
    for (; s && *s && n < cap; s++)
        buf[n++] = *s;
    if (nul && n < cap)
        buf[n++] = 0;
    return n;
}

static const char *env_value(char *const envp[], const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; envp && envp[i]; i++)
        if (strncmp(envp[i], name, len) == 0 && envp[i][len] == '=')
            return envp[i] + len + 1;
    return NULL;
}

static void announce(uint32_t phase, pid_t pid, const char *path, char *const argv[],
                     char *const envp[], int error)
{
    if (atomic_load(&al_proc.state) != AL_ACTIVE || al_proc.sock < 0)
        return;
    struct {
        struct al_msg_hdr h;
        struct al_exec e;
        char text[4096 + 256 + 1024];
    } m;
    memset(&m.h, 0, sizeof m.h + sizeof m.e);
    m.e.pid = (uint32_t)pid;
    m.e.phase = phase;
    m.e.error = (uint32_t)error;
    size_t n = 0;
    if (phase != AL_EXEC_FAILED) {
        const char *preload = env_value(envp, "LD_PRELOAD");
        const char *sock = env_value(envp, AL_ENV_SOCKET);
        const char *ours = al_socket_path();
        if (preload)
            m.e.env |= AL_EXEC_ENV_PRELOAD;
        if (sock && ours && strcmp(sock, ours) == 0)
            m.e.env |= AL_EXEC_ENV_SOCKET;
        n = put(m.text, n, 4096, path, 1);
        n = put(m.text, n, 4096 + 256, argv ? argv[0] : NULL, 1);
        n = put(m.text, n, sizeof m.text, preload, 0);
    }
    m.h.type = AL_MSG_EXEC;
    m.h.len = (uint32_t)(sizeof m.h + sizeof m.e + n);
    struct iovec iov = {.iov_base = &m, .iov_len = m.h.len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    while (sendmsg(al_proc.sock, &mh, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
}

static pid_t self_pid(void)
{
    /* getpid() may be cached by libc; in a vfork child it is the child's own pid we want. */
    return (pid_t)syscall(SYS_getpid);
}

/* Runs the real exec between its announcement and, should it return (fail), the retraction. */
static int exec_announced(int p, const char *path, char *const argv[], char *const envp[])
{
    if (al_real.execve == NULL && al_bootstrap() != 0 && al_real.execve == NULL) {
        errno = ENOSYS;
        return -1;
    }
    pid_t pid = self_pid();
    int saved = errno;
    announce(AL_EXEC_BEFORE, pid, path, argv, envp, 0);
    errno = saved;
    int rc = p ? al_real.execvpe(path, argv, envp) : al_real.execve(path, argv, envp);
    saved = errno;
    announce(AL_EXEC_FAILED, pid, NULL, NULL, NULL, saved);
    errno = saved;
    return rc;
}

AL_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    return exec_announced(0, path, argv, envp);
}

AL_EXPORT int execv(const char *path, char *const argv[])
{
    return exec_announced(0, path, argv, environ);
}

AL_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    return exec_announced(1, file, argv, envp);
}

AL_EXPORT int execvp(const char *file, char *const argv[])
{
    return exec_announced(1, file, argv, environ);
}

/* The variadic forms: the arguments are gathered into an array on the stack (no allocation). */
#define GATHER_ARGS(first, ap, argv)                                                               \
    size_t argc_ = 1;                                                                              \
    va_start(ap, first);                                                                           \
    while (va_arg(ap, const char *) != NULL)                                                       \
        argc_++;                                                                                   \
    va_end(ap);                                                                                    \
    char *argv[argc_ + 1];                                                                         \
    argv[0] = (char *)(first);                                                                     \
    va_start(ap, first);                                                                           \
    for (size_t i_ = 1; i_ <= argc_; i_++)                                                         \
        argv[i_] = va_arg(ap, char *);

AL_EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    GATHER_ARGS(arg, ap, argv)
    va_end(ap);
    return exec_announced(0, path, argv, environ);
}

AL_EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    GATHER_ARGS(arg, ap, argv)
    va_end(ap);
    return exec_announced(1, file, argv, environ);
}

AL_EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    GATHER_ARGS(arg, ap, argv)
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return exec_announced(0, path, argv, envp);
}

/* posix_spawn returns once the child exec'd (or failed to): announced after, with its pid. */
static int spawned(int rc, pid_t *pid, const char *path, char *const argv[], char *const envp[])
{
    if (rc == 0 && pid != NULL) {
        int saved = errno;
        announce(AL_EXEC_SPAWNED, *pid, path, argv, envp ? envp : environ, 0);
        errno = saved;
    }
    return rc;
}

AL_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    if (al_real.posix_spawn == NULL && al_bootstrap() != 0 && al_real.posix_spawn == NULL)
        return ENOSYS;
    /* The caller may not want the pid; the announcement needs it. */
    pid_t own;
    pid_t *out = pid ? pid : &own;
    return spawned(al_real.posix_spawn(out, path, fa, attr, argv, envp), out, path, argv, envp);
}

AL_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    if (al_real.posix_spawnp == NULL && al_bootstrap() != 0 && al_real.posix_spawnp == NULL)
        return ENOSYS;
    pid_t own;
    pid_t *out = pid ? pid : &own;
    return spawned(al_real.posix_spawnp(out, file, fa, attr, argv, envp), out, file, argv, envp);
}
