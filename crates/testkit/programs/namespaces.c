/* Enters a user namespace (and, as root, joins its own mount namespace with setns), both of
 * which the kernel refuses to a process with more than one thread; then lives 500 ms more. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static int threads(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char l[256];
    int n = -1;
    while (f && fgets(l, sizeof l, f))
        if (!strncmp(l, "Threads:", 8))
            n = atoi(l + 8);
    if (f)
        fclose(f);
    return n;
}
int main(void) {
    int before = threads();
    int setns_r = 0, setns_e = 0;
    if (geteuid() == 0) {
        int fd = open("/proc/self/ns/mnt", O_RDONLY);
        setns_r = setns(fd, CLONE_NEWNS);
        setns_e = setns_r ? errno : 0;
        close(fd);
    }
    int r = unshare(CLONE_NEWUSER);
    int e = r ? errno : 0;
    char *p = malloc(1 << 20);
    memset(p, 1, 1 << 20);
    usleep(500000);
    printf("threads_before=%d setns=%d setns_errno=%d unshare=%d unshare_errno=%d threads_after=%d\n",
           before, setns_r, setns_e, r, e, threads());
    free(p);
    return r || setns_r;
}
