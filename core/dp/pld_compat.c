/*
 * pld_compat.c - transitional (pld.h): the pld_ctx that account.c's rebuilds still set by
 * thread (pld_tilt_enter, pld_extended_enter), read once by dp_profile_build
 * (pld_ctx_current) and passed down explicitly from there. It calls nothing; it goes when
 * account.c passes a pld_ctx to dp_profile_build_ctx.
 */
#include "pld.h"

#include <math.h>

static _Thread_local pld_ctx current = {{NAN, NAN, 0.0}, 0};

/* Install next for this thread; the previous setting. */
static pld_ctx swap(pld_ctx next)
{
    pld_ctx prev = current;
    current = next;
    return prev;
}

int pld_extended_enter(int on)
{
    return swap((pld_ctx){current.tilt, on}).ext;
}

pld_tilt_at pld_tilt_enter(pld_tilt_at at)
{
    return swap((pld_ctx){at, current.ext}).tilt;
}

void pld_extended_leave(int prev)
{
    current.ext = prev;
}

void pld_tilt_leave(pld_tilt_at prev)
{
    current.tilt = prev;
}

pld_ctx pld_ctx_current(void)
{
    return current;
}
