/*
 * profile_int.h - internal to core/dp's profile files: what the accountants' tree walks
 * share (profile_common.c), and each walk's entry, called by the dispatch (profile.c).
 *
 * Call direction, one way only: profile.c (dispatch, build and query)
 *   -> profile_scalar.c, profile_rdp.c, profile_pld.c (one tree walk per accountant)
 *   -> profile_pld_leaf.c (the PLD leaves; profile_pld.h) -> profile_common.c.
 * None of them calls profile.c.
 */
#ifndef DP_PROFILE_INT_H
#define DP_PROFILE_INT_H

#include "profile.h"

/* ---- profile_common.c: the walks' shared vocabulary ------------------------------------ */

/* Warnings more than one walk gives (static strings). */
extern const char dp_warn_pnsgd[];      /* projected noisy SGD (seed 000) */
extern const char dp_warn_nonprivate[]; /* a NonPrivateDpEvent */
extern const char dp_warn_noiseless[];  /* a mechanism with noise 0 */

/* The certified per-epoch delta of a shuffled leaf (Theorem 4.1) into *delta, its conditions
 * into rep; DPB_EUNSUPPORTED / DPB_EINVAL (worded in err) when it does not apply. */
dpb_status dp_thm41_leaf(const dp_event *ev, dp_relation rel, double *delta, dp_report *rep,
                         dpb_error *err);

/* DPB_EUNSUPPORTED: the accountant acct has no analysis for an event of kind what. */
dpb_status dp_unsupported(dpb_error *err, const char *what, const char *acct);

/* The event kind's dp_accounting class name (a static string). */
const char *dp_kind_name(dp_event_kind k);

/* The noise multiplier s in sensitivity-1 units for the relation (replace-one halves it). */
double dp_sens1(double s, dp_relation rel);

/* add_or_remove_one and replace_special (zero-out): the same pairs for sums and Poisson
 * sampling. */
int dp_add_remove_like(dp_relation rel);

/* DPB_EUNSUPPORTED: the class cls is accounted for the relation takes only. */
dpb_status dp_refuse_relation(dpb_error *err, const char *cls, const char *takes);

/* The noise multiplier of the one Gaussian mechanism the event inside a sampled class cls is
 * (a nest of Composed/SelfComposed Gaussians), or DPB_EUNSUPPORTED (worded in err). */
dpb_status dp_inner_sigma(const dp_event *ev, const char *cls, double *sigma, dpb_error *err);

/* A tree aggregation's multiplier: exactly a Gaussian mechanism's (0: no node sees the
 * record); replace_special only (else DPB_EUNSUPPORTED), DPB_EINVAL on a bad multiplier. */
dpb_status dp_tree_sigma(const dp_event *ev, dp_relation rel, double *sigma, dpb_error *err);

/* The integer sensitivity factor of a discrete mechanism for the relation (2 for replace-one,
 * else 1). */
double dp_sens_scale(dp_relation rel);

/* DPB_EUNSUPPORTED: randomized response's relations, worded in err. */
dpb_status dp_rr_relation(dpb_error *err);

/* Whether randomized response is accounted under replace-one for this relation. */
int dp_rr_replace_one(dp_relation rel);

/* seed 000's bound at eps for the pnsgd_params at ctx (1 where it fails): a pld_profile_fn. */
double dp_pnsgd_profile_fn(void *ctx, double eps);

/* An accumulating tree walk (thm41 and gdp, rdp): the relation, where conditions and errors
 * go (borrowed), and what it accumulates into. */
typedef struct {
    dp_relation rel;
    dp_report *rep;
    dpb_error *err;
    dp_accountant acct; /* profile_scalar.c: thm41, gdp_exact or gdp_clt ... */
    double *acc;        /* ... and its accumulator */
    dp_profile *pr;     /* profile_rdp.c: the curve and its order infinity */
} dp_walk_state;

/* A walk's leaf: adds the leaf ev, mult times, into w. dp_walk_tree walks the structure such
 * walks treat alike: a SelfComposed event multiplies mult by its count, a Composed one walks
 * its events in order (the first failure returned), a NoOp adds nothing, an SGLD run or a
 * proactive history is walked as the DP-SGD tree it stands for (dp_map_to_dpsgd; its failure
 * returned, worded in w->err); every other event is leaf's. */
typedef dpb_status (*dp_leaf_fn)(const dp_walk_state *w, const dp_event *ev, double mult);
dpb_status dp_walk_tree(const dp_walk_state *w, const dp_event *ev, double mult, dp_leaf_fn leaf);

/* ---- the walks ---------------------------------------------------------------------------- */

/* profile_scalar.c: thm41 (the sum of ln(1 - delta_i)) or gdp (the sum of mu_i^2) of the tree
 * times mult, added into *acc. */
dpb_status dp_walk_scalar(const dp_event *ev, dp_relation rel, dp_accountant acct, double mult,
                          double *acc, dp_report *rep, dpb_error *err);

/* profile_rdp.c: an rdp profile's answer at x (eps when want_eps is 0: delta; else the
 * epsilon at delta x), its deferred orders completed only where they could decide; *order
 * (optional) the order attaining it. */
double dp_rdp_lazy(dp_profile *pr, int want_eps, double x, double *order);

/* profile_pld.c: the PLD of the tree, both directions (pld_pmf owned by the caller), on the
 * grid h, coarsened where the composition needs more than PLD_MAX_POINTS; composed as pc says
 * (borrowed; tilt and precision of the outermost composition). strict: shuffle_exact (a
 * shuffled epoch outside the exact model's range is refused, not bounded by Theorem 4.1). */
typedef struct {
    pld_pmf d[2];
    int symmetric; /* only d[0] is set */
} dp_pld_pair;
dpb_status dp_walk_pld_adaptive(const dp_event *ev, dp_relation rel, double h, int strict,
                                const pld_ctx *pc, dp_pld_pair *out, dp_report *rep,
                                dpb_error *err);

#endif
