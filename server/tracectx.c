/*
 * tracectx.c - the traceparent header of W3C Trace Context level 1 (tracectx.h).
 *
 * May call: nothing but the C library.
 */
#include "tracectx.h"

#include <string.h>

/* n lowercase hex digits at s; *nonzero set when one of them is not '0'. */
static int lowhex(const char *s, size_t n, int *nonzero)
{
    int nz = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return 0;
        nz |= c != '0';
    }
    if (nonzero)
        *nonzero = nz;
    return 1;
}

int tracectx_parse(const char *v, tracectx *out)
{
    out->trace_id[0] = out->parent_id[0] = '\0';
    if (v == NULL)
        return 0;
    /* never more than 56 bytes are looked at: a hostile length costs nothing */
    size_t n = strnlen(v, 56);
    int tid = 0, pid = 0;
    if (n < 55 || !lowhex(v, 2, NULL) || memcmp(v, "ff", 2) == 0 || v[2] != '-' ||
        !lowhex(v + 3, 32, &tid) || v[35] != '-' || !lowhex(v + 36, 16, &pid) || v[52] != '-' ||
        !lowhex(v + 53, 2, NULL) || !tid || !pid)
        return 0;
    /* version 00 ends there; a later version goes on after a '-' */
    if (memcmp(v, "00", 2) == 0 ? n != 55 : n > 55 && v[55] != '-')
        return 0;
    memcpy(out->trace_id, v + 3, 32);
    out->trace_id[32] = '\0';
    memcpy(out->parent_id, v + 36, 16);
    out->parent_id[16] = '\0';
    return 1;
}
