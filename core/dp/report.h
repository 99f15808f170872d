/*
 * report.h - what every privacy number carries: its guarantee kind and the conditions
 * that were checked to produce it (docs/MATH.md, "What every number carries").
 */
#ifndef DP_REPORT_H
#define DP_REPORT_H

typedef enum {
    DP_UPPER_BOUND = 0, /* the true delta (or eps) is at most this: safe to rely on */
    DP_ESTIMATE = 1,    /* an approximation: never used for enforcement */
    DP_LOWER_BOUND = 2  /* the true value is at least this: an attack or diagnostic */
} dp_guarantee;

/* One checked condition: "lhs <= rhs" in the sense its statement gives. */
typedef struct {
    const char *name;      /* stable identifier, e.g. "thm41_validity" (static storage) */
    const char *statement; /* the condition in words (static storage) */
    int holds;
    double lhs, rhs; /* the two sides as evaluated (for the first failing instance) */
} dp_condition;

#define DP_MAX_CONDITIONS 16
#define DP_MAX_WARNINGS 4

typedef struct {
    const char *accountant; /* e.g. "thm41" (static storage) */
    dp_guarantee guarantee;
    const char *reference; /* source of the bound (static storage) */
    int ncond;
    dp_condition cond[DP_MAX_CONDITIONS];
    int nwarn;
    const char *warning[DP_MAX_WARNINGS]; /* static storage */
} dp_report;

/* Record a condition. If one of that name exists it is merged: holds becomes the AND, and
 * the first failing instance's sides are kept. Silently drops past DP_MAX_CONDITIONS. */
void dp_report_condition(dp_report *r, const char *name, const char *statement, int holds,
                         double lhs, double rhs);

/* Add a warning once (static string). */
void dp_report_warn(dp_report *r, const char *warning);

/* 1 if every recorded condition holds. */
int dp_report_all_hold(const dp_report *r);

/* Stable names: "upper_bound", "estimate", "lower_bound". */
const char *dp_guarantee_name(dp_guarantee g);

#endif
