/* cpuprio.c - background threads (cpuprio.h). */
#define _GNU_SOURCE
#include "cpuprio.h"

#include <errno.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

void cpuprio_background(int nice_incr)
{
    /* a thread id is a process id for getpriority and setpriority: nice is per thread */
    id_t tid = (id_t)syscall(SYS_gettid);
    if (nice_incr > 0) {
        errno = 0;
        int cur = getpriority(PRIO_PROCESS, tid);
        if (errno == 0)
            (void)setpriority(PRIO_PROCESS, tid, cur + nice_incr > 19 ? 19 : cur + nice_incr);
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 2)
        return;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) { /* the first: the one left to the prompt threads */
            CPU_CLR(c, &set);
            break;
        }
    (void)sched_setaffinity(0, sizeof set, &set);
}
