/*
 * store_pg.c - PLACEHOLDER until the PostgreSQL store lands: it is to be REPLACED WHOLE by the
 * real store_pg.c (store.h); it only lets the ledger build and say clearly that this build
 * cannot use a PostgreSQL url.
 */
#include "store.h"

#include <string.h>

int store_is_pg_url(const char *s)
{
    return s != NULL &&
           (strncmp(s, "postgresql://", 13) == 0 || strncmp(s, "postgres://", 11) == 0);
}

dpb_status store_pg_open(const char *url, const store_pg_options *o, ledger_store **out,
                         dpb_error *err)
{
    (void)url;
    (void)o;
    *out = NULL;
    return dpb_fail(err, DPB_EUNAVAILABLE, "ledger_url", "PostgreSQL support not built");
}

dpb_status store_pg_migrate(const char *url, const store_pg_options *o, int *from, int *to,
                            dpb_error *err)
{
    (void)url;
    (void)o;
    (void)from;
    (void)to;
    return dpb_fail(err, DPB_EUNAVAILABLE, "ledger_url", "PostgreSQL support not built");
}
