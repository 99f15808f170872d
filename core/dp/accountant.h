/*
 * accountant.h - the vocabulary every accountant shares, at the bottom of the dp layer: the
 * neighbouring relation, the accountant's name, the options a computation takes, the per-point
 * extras an answer may carry, and the mapping of SGLD and proactive events onto DP-SGD.
 * The facade (account.h) and the accountants' walks (profile.h) both include this header;
 * it includes nothing of theirs. Defined in accountant.c (names) and in the walks
 * (dp_map_to_dpsgd); may call event.h and common/ only.
 */
#ifndef DP_ACCOUNTANT_H
#define DP_ACCOUNTANT_H

#include "../common/cancel.h"
#include "../common/status.h"
#include "event.h"

typedef enum {
    DP_REL_ADD_OR_REMOVE = 0,  /* add or remove one record (zero-out); the default */
    DP_REL_REPLACE = 1,        /* replace one record */
    DP_REL_REPLACE_SPECIAL = 2 /* replace one record with a special record that contributes
                                * nothing (zero-out; dp_accounting's REPLACE_SPECIAL): the same
                                * as add_or_remove_one for sums and Poisson sampling */
} dp_relation;

typedef enum {
    DP_ACCT_AUTO = 0,
    DP_ACCT_THM41 = 1,        /* seed 004 Theorem 4.1, (0, delta) per epoch      upper_bound */
    DP_ACCT_GDP_CLT = 2,      /* seed 004 Theorem 5.2 asymptotic mu-GDP          estimate */
    DP_ACCT_GDP_EXACT = 3,    /* unsampled Gaussians: exact mu-GDP closed form   upper_bound */
    DP_ACCT_RDP = 4,          /* Renyi DP with the improved conversion           upper_bound */
    DP_ACCT_PLD = 5,          /* pessimistic privacy-loss distributions (FFT)    upper_bound */
    DP_ACCT_PNSGD = 6,        /* seed 000 bounds, epochs by optimal composition  upper_bound */
    DP_ACCT_PROACTIVE = 7,    /* seed 002 closed form next to RDP, the smaller    upper_bound */
    DP_ACCT_SHUFFLE_EXACT = 8 /* seed 004's model computed exactly (pessimistic    upper_bound
                               * discretisation); epochs and mixtures by PLD */
} dp_accountant;

/* Per-point extras an accountant may attach to an answer (NAN when absent). */
typedef struct {
    double rdp_order;   /* rdp: the order attaining the bound */
    double limit_delta; /* pnsgd schedules: delta* as n -> infinity (a limit, not a bound) */
    double limit_lower, limit_upper; /* pnsgd online: bracket of the limit as n -> infinity */
    double closed_form, rdp_value;   /* proactive: the two values compared (+inf: none) */
    double thm41;                    /* shuffle_exact: Theorem 4.1's answer to the same
                                      * question (delta, or eps); +inf: it certifies nothing */
} dp_point_extra;

/* Accountant options; a zeroed struct (or NULL) means the defaults. */
typedef struct {
    double pld_h; /* PLD loss grid (value_discretization_interval); 0: PLD_DEFAULT_H */
    /* borrowed: stops the computation with DPB_ECANCELLED when it fires (NULL: never) */
    const dpb_cancel *cancel;
} dp_options;

/* Names used by the API; parse returns -1 for an unknown name. */
const char *dp_relation_name(dp_relation r);
int dp_relation_parse(const char *s, dp_relation *r);
const char *dp_accountant_name(dp_accountant a);
int dp_accountant_parse(const char *s, dp_accountant *a);

/* The DP-SGD event tree a clipped SgldDpEvent or a ProactiveDpSgdDpEvent stands for (owned by
 * the caller), so answers can show the mapping; NULL with *st and err set (unclipped SGLD:
 * DPB_EUNCERTIFIABLE, seed 003 Theorem IV.1). */
dp_event *dp_map_to_dpsgd(const dp_event *ev, dpb_status *st, dpb_error *err);

#endif
