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

const char *dp_relation_name(dp_relation r)
{
    return (unsigned)r < N_REL ? REL_NAMES[r] : "unknown";
}

int dp_relation_parse(const char *s, dp_relation *r)
{
    for (unsigned i = 0; i < N_REL; i++)
        if (strcmp(s, REL_NAMES[i]) == 0) {
            *r = (dp_relation)i;
            return 0;
        }
    return -1;
}

const char *dp_accountant_name(dp_accountant a)
{
    return (unsigned)a < N_ACCT ? ACCT_NAMES[a] : "unknown";
}

int dp_accountant_parse(const char *s, dp_accountant *a)
{
    for (unsigned i = 0; i < N_ACCT; i++)
        if (strcmp(s, ACCT_NAMES[i]) == 0) {
            *a = (dp_accountant)i;
            return 0;
        }
    return -1;
}
