/* status.c - status names and first-error-wins recording. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Indexed by status (status.h numbers them from DPB_OK = 0, append-only: a new status
 * appends its name here). */
static const char *const STATUS_NAMES[] = {"ok",
                                           "invalid_parameter",
                                           "not_covered",
                                           "infeasible",
                                           "unsupported",
                                           "out_of_memory",
                                           "numerical_failure",
                                           "limit_exceeded",
                                           "uncertifiable",
                                           "io_error",
                                           "corrupt",
                                           "not_found",
                                           "conflict",
                                           "read_only",
                                           "budget_exceeded",
                                           "cancelled",
                                           "unavailable",
                                           "forbidden",
                                           "quota_exceeded",
                                           "cost_exceeded"};
_Static_assert(sizeof STATUS_NAMES / sizeof STATUS_NAMES[0] == DPB_ECOST + 1,
               "every status has a name");

const char *dpb_strstatus(dpb_status s)
{
    return (unsigned)s < sizeof STATUS_NAMES / sizeof STATUS_NAMES[0] ? STATUS_NAMES[s]
                                                                      : "unknown_status";
}

dpb_status dpb_fail(dpb_error *err, dpb_status s, const char *field, const char *fmt, ...)
{
    if (err == NULL || err->status != DPB_OK)
        return s;
    err->status = s;
    snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail, sizeof err->detail, fmt, ap);
    va_end(ap);
    return s;
}

void dpb_error_clear(dpb_error *err)
{
    if (err == NULL)
        return;
    memset(err, 0, sizeof *err);
}
