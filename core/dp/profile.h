/*
 * profile.h - internal to core/dp: a privacy profile built from an event tree by one
 * accountant, then queried for delta(eps) and eps(delta). account.c dispatches to it.
 * profile.c builds and queries; the accountants' tree walks live in profile_scalar.c,
 * profile_rdp.c and profile_pld.c (profile_int.h says the direction of their calls).
 */
#ifndef DP_PROFILE_H
#define DP_PROFILE_H

#include "accountant.h"
#include "pld.h"
#include "rdp.h"

typedef struct {
    dp_accountant acct;
    double tv_delta; /* thm41: the (0, delta) total-variation bound of the whole tree */
    double mu;       /* gdp_exact, gdp_clt: the composed Gaussian-DP parameter (may be inf) */
    double mu2;      /* its square as summed by the walk (mu = sqrt(mu2)) */
    /* rdp: the orders (RDP_DEFAULT_ORDERS unless the options give others; borrowed) */
    const double *orders;
    size_t norders;
    double rdp[RDP_MAX_ORDERS]; /* rdp: the composed curve at the orders */
    double rdp_inf;             /* rdp: the order infinity (max divergence, pure DP), which
                                 * composes additively: finite when every mechanism is pure DP
                                 * (Laplace, (eps, 0)), +HUGE_VAL otherwise */
    /* rdp: fractional orders of Poisson-sampled Gaussians are costly and evaluated lazily,
     * only where a lower bound does not already rule the order out (profile.c) */
    unsigned char rdp_done[RDP_MAX_ORDERS];
    size_t npg;
    struct dp_pg_leaf {
        double q, sigma, mult;
    } * pg; /* owned */
    /* rdp: the (eps, delta) events with delta > 0 (no RDP curve), mult times each, composed
     * with the curve at conversion (dp_rdp_lazy, docs/MATH.md section 6) */
    size_t ned;
    struct dp_ed_leaf {
        double eps, delta, mult;
    } * ed;                 /* owned */
    pld_pmf dir[2];         /* pld: remove and add directions */
    int symmetric;          /* pld: dir[1] equals dir[0] and is not stored */
    int pure;               /* pld: every mechanism has a finite max divergence, pure_eps */
    double pure_eps;        /* pld: their composed sum, the larger direction, rounded up:
                             * delta(eps) = 0 from it on (dp_pld_max_loss) */
    const pnsgd_params *pn; /* pnsgd: the pass (borrowed from the event) */
    uint64_t epochs;        /* pnsgd: passes */
    pro_history pro;        /* proactive: the history's closed form */
    void *sub;              /* proactive: the RDP profile of the same history (owned) */
    struct shx_model *shx;  /* shuffle_exact, one epoch: the model (a cache reference) */
    int use_pld;            /* shuffle_exact: answered from dir[] (epochs, mixtures) */
    double thm41_tv;        /* shuffle_exact: Theorem 4.1's delta for the same event (+inf:
                             * not covered) */
} dp_profile;

/* Every field of pr zero, or NULL, but the two arrays sized for the most RDP orders (4.5 KB
 * that clearing cost a light query more than its computation): the RDP builder clears the
 * orders it uses, and marks each of them done or not. */
void dp_profile_clear(dp_profile *pr);

/* Build the profile of ev for a resolved accountant (not DP_ACCT_AUTO). Conditions and
 * warnings go to rep. A pld (or shuffle_exact) profile's outermost composition is computed as
 * pc says (borrowed; NULL: in double, not tilted). */
dpb_status dp_profile_build(const dp_event *ev, dp_relation rel, dp_accountant acct,
                            const dp_options *opt, const pld_ctx *pc, dp_profile *pr,
                            dp_report *rep, dpb_error *err);

/* The rdp profile at the given orders (NULL: RDP_DEFAULT_ORDERS; borrowed, must outlive pr). */
dpb_status dp_profile_build_rdp(const dp_event *ev, dp_relation rel, const double *orders, size_t n,
                                dp_profile *pr, dp_report *rep, dpb_error *err);

/* delta at eps >= 0 (rounded up); ln_delta and aux (per-point extras) optional.
 * The profile is not const: the rdp accountant fills orders in lazily. */
double dp_profile_delta(dp_profile *pr, double eps, double *ln_delta, dp_point_extra *aux);

/* The smallest eps with delta(eps) <= delta (rounded up; +HUGE_VAL when none is finite). */
double dp_profile_epsilon(dp_profile *pr, double delta, dp_point_extra *aux);

void dp_profile_release(dp_profile *pr);

/* rdp: the composed RDP at order index i, evaluated if it was deferred. */
double dp_profile_rdp_order(dp_profile *pr, size_t i);

/* The RDP at order index i in the two parts the accountant adds: *early, the curve's sum but
 * the Poisson-sampled Gaussians' lazily evaluated orders, and *late, theirs (0 at the orders
 * evaluated at once); dp_profile_rdp_order(pr, i) == *early + *late, the same bits. */
void dp_profile_rdp_parts(dp_profile *pr, size_t i, double *early, double *late);

#endif
