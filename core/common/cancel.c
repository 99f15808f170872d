/* cancel.c - the calling thread's cancellation scope (cancel.h). */
#include "cancel.h"

#include "clock.h"

#include <stddef.h>

static _Thread_local const dpb_cancel *current;
static _Thread_local int fired;

double dpb_cancel_now(void)
{
    return dpb_mono_s();
}

const dpb_cancel *dpb_cancel_enter(const dpb_cancel *c)
{
    const dpb_cancel *prev = current;
    if (c != NULL && prev == NULL) {
        current = c;
        fired = 0;
    }
    return prev;
}

void dpb_cancel_leave(const dpb_cancel *prev)
{
    if (prev == NULL) {
        current = NULL;
        fired = 0;
    }
}

int dpb_cancelled(void)
{
    const dpb_cancel *c = current;
    if (c == NULL)
        return 0;
    if (fired)
        return 1;
    if ((c->flag && __atomic_load_n(c->flag, __ATOMIC_RELAXED)) ||
        (c->deadline > 0.0 && dpb_cancel_now() >= c->deadline))
        fired = 1;
    return fired;
}
