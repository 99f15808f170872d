/* report.c - conditions and warnings attached to a privacy number. */
#include "report.h"

#include <string.h>

void dp_report_condition(dp_report *r, const char *name, const char *statement, int holds,
                         double lhs, double rhs)
{
    for (int i = 0; i < r->ncond; i++) {
        dp_condition *c = &r->cond[i];
        if (strcmp(c->name, name) == 0) {
            if (c->holds && !holds) {
                c->lhs = lhs;
                c->rhs = rhs;
            }
            c->holds = c->holds && holds;
            return;
        }
    }
    if (r->ncond >= DP_MAX_CONDITIONS)
        return;
    r->cond[r->ncond++] = (dp_condition){name, statement, holds != 0, lhs, rhs};
}

void dp_report_warn(dp_report *r, const char *warning)
{
    for (int i = 0; i < r->nwarn; i++)
        if (r->warning[i] == warning || strcmp(r->warning[i], warning) == 0)
            return;
    if (r->nwarn < DP_MAX_WARNINGS)
        r->warning[r->nwarn++] = warning;
}

int dp_report_all_hold(const dp_report *r)
{
    for (int i = 0; i < r->ncond; i++)
        if (!r->cond[i].holds)
            return 0;
    return 1;
}

static const char *const GUARANTEE_NAMES[] = {
    [DP_UPPER_BOUND] = "upper_bound",
    [DP_ESTIMATE] = "estimate",
    [DP_LOWER_BOUND] = "lower_bound",
};

const char *dp_guarantee_name(dp_guarantee g)
{
    return (unsigned)g < sizeof GUARANTEE_NAMES / sizeof GUARANTEE_NAMES[0] ? GUARANTEE_NAMES[g]
                                                                            : "unknown";
}
