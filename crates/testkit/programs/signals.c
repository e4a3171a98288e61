#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
static volatile sig_atomic_t handled;
static void *kept[1000];
static void on_alarm(int sig) {
    (void)sig;
    void *p = malloc(48); /* not async-signal-safe in general; glibc's tcache copes here */
    if (handled < 1000) kept[handled] = p; else free(p);
    handled++;
}
int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    while (handled < 1500)
        for (int i = 0; i < 1000; i++) { void *volatile p = malloc(100 + i % 200); free(p); }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("live: handled=%d\n", (int)handled);
    return 0;
}
