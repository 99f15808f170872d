/* status.c - status names and first-error-wins recording. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *dpb_strstatus(dpb_status s)
{
    switch (s) {
    case DPB_OK:
        return "ok";
    case DPB_EINVAL:
        return "invalid_parameter";
    case DPB_ENOTCOVERED:
        return "not_covered";
    case DPB_EINFEASIBLE:
        return "infeasible";
    case DPB_EUNSUPPORTED:
        return "unsupported";
    case DPB_ENOMEM:
        return "out_of_memory";
    case DPB_ENUMERIC:
        return "numerical_failure";
    case DPB_ELIMIT:
        return "limit_exceeded";
    case DPB_EUNCERTIFIABLE:
        return "uncertifiable";
    case DPB_EIO:
        return "io_error";
    case DPB_ECORRUPT:
        return "corrupt";
    case DPB_ENOTFOUND:
        return "not_found";
    case DPB_ECONFLICT:
        return "conflict";
    case DPB_EREADONLY:
        return "read_only";
    case DPB_EBUDGET:
        return "budget_exceeded";
    case DPB_ECANCELLED:
        return "cancelled";
    case DPB_EUNAVAILABLE:
        return "unavailable";
    }
    return "unknown_status";
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
