/*
 * accountant.c - the names of the shared vocabulary (accountant.h): relations and accountants
 * as the API spells them. Calls nothing but the C library.
 */
#include "accountant.h"

#include <string.h>

static const char *const REL_NAMES[] = {"add_or_remove_one", "replace_one", "replace_special"};
#define N_REL (sizeof REL_NAMES / sizeof REL_NAMES[0])
static const char *const ACCT_NAMES[] = {"auto", "thm41", "gdp_clt",   "gdp_exact",    "rdp",
                                         "pld",  "pnsgd", "proactive", "shuffle_exact"};
#define N_ACCT (sizeof ACCT_NAMES / sizeof ACCT_NAMES[0])

/* names[i] for i < n, else "unknown". */
static const char *name_in(const char *const *names, unsigned n, unsigned i)
{
    return i < n ? names[i] : "unknown";
}

/* The index of s in names[0..n), or -1. */
static int index_in(const char *const *names, unsigned n, const char *s)
{
    for (unsigned i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return (int)i;
    return -1;
}

const char *dp_relation_name(dp_relation r)
{
    return name_in(REL_NAMES, N_REL, (unsigned)r);
}

const char *dp_accountant_name(dp_accountant a)
{
    return name_in(ACCT_NAMES, N_ACCT, (unsigned)a);
}

int dp_relation_parse(const char *s, dp_relation *r)
{
    int i = index_in(REL_NAMES, N_REL, s);
    if (i >= 0)
        *r = (dp_relation)i;
    return i < 0 ? -1 : 0;
}

int dp_accountant_parse(const char *s, dp_accountant *a)
{
    int i = index_in(ACCT_NAMES, N_ACCT, s);
    if (i >= 0)
        *a = (dp_accountant)i;
    return i < 0 ? -1 : 0;
}
