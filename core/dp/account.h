/*
 * account.h - accountants: turn an event into privacy numbers (delta(eps), eps(delta)) and
 * solve one parameter of an event for a target (eps, delta). This is the one entry point
 * the server uses for compute requests; each accountant lives in its own module.
 *
 * Accountants (docs/MATH.md, "What every number carries"):
 *   thm41     seed 004 Theorem 4.1 composed by the exact f_{0,delta} rule  -> upper_bound
 *   gdp_clt   seed 004 Theorem 5.2 asymptotic Gaussian-DP coefficient      -> estimate
 *   gdp_exact compositions of unsampled Gaussians: exactly mu-GDP           -> upper_bound
 *   rdp       Renyi DP, improved conversion                                 -> upper_bound
 *   pld       pessimistic privacy-loss distributions                       -> upper_bound
 *   shuffle_exact  seed 004's model computed numerically (shuffle_exact.h)   -> upper_bound
 * `auto` picks the tightest certified accountant for the event and says which it picked;
 * it never picks an estimate: gdp_exact for unsampled Gaussians, shuffle_exact for shuffled
 * epochs alone (thm41 outside its range), pld otherwise (rdp where pld cannot represent
 * the event). pld accounts shuffled epochs with the exact model too where it applies.
 */
#ifndef DP_ACCOUNT_H
#define DP_ACCOUNT_H

#include <stddef.h>

#include "../common/status.h"
#include "accountant.h"
#include "event.h"
#include "pld.h"
#include "report.h"

/* Most points one query may ask for. */
#define DP_MAX_POINTS 1000

/*
 * delta(eps_i) for i < n (1 <= n <= DP_MAX_POINTS; each eps_i finite and >= 0).
 * Writes delta[i] and ln_delta[i] (ln_delta may be NULL), and fills rep (accountant,
 * guarantee, conditions checked, warnings). Returns DPB_OK, or DPB_EINVAL /
 * DPB_EUNSUPPORTED / DPB_ENOTCOVERED with err (may be NULL) saying why; rep still lists
 * the conditions that were checked when the answer is DPB_ENOTCOVERED.
 */
dpb_status dp_delta(const dp_event *ev, dp_relation rel, dp_accountant acct, const double *eps,
                    size_t n, double *delta, double *ln_delta, dp_report *rep, dpb_error *err);

/* As dp_delta, with options and per-point extras (may be NULL). */
dpb_status dp_delta_ex(const dp_event *ev, dp_relation rel, dp_accountant acct,
                       const dp_options *opt, const double *eps, size_t n, double *delta,
                       double *ln_delta, dp_point_extra *aux, dp_report *rep, dpb_error *err);

/*
 * The smallest eps with delta(eps) <= delta_i, for 0 < delta_i < 1. eps[i] is +INFINITY
 * when the accountant certifies no finite eps at that delta (a warning says why).
 */
dpb_status dp_epsilon(const dp_event *ev, dp_relation rel, dp_accountant acct, const double *delta,
                      size_t n, double *eps, dp_report *rep, dpb_error *err);
dpb_status dp_epsilon_ex(const dp_event *ev, dp_relation rel, dp_accountant acct,
                         const dp_options *opt, const double *delta, size_t n, double *eps,
                         dp_point_extra *aux, dp_report *rep, dpb_error *err);

/*
 * A curve for plotting: delta at each eps[i], and a lower bound beta[j] on the trade-off
 * function f(alpha[j]) (type I error alpha, type II error beta): the true trade-off curve
 * of the mechanism lies on or above it whenever the accountant's guarantee is an
 * upper_bound. Exact for gdp_exact (G_mu) and thm41 (1 - alpha - delta); for rdp and pld
 * the envelope sup_eps (1 - delta(eps) - e^eps alpha) over a fine eps grid.
 */
dpb_status dp_curve(const dp_event *ev, dp_relation rel, dp_accountant acct, const dp_options *opt,
                    const double *eps, size_t n_eps, double *delta, const double *alpha,
                    size_t n_alpha, double *beta, dp_report *rep, dpb_error *err);

/* What a calibration found. Fields not meaningful for the solved parameter are NAN
 * (doubles) or 0 (flags). */
typedef struct {
    dp_param param;
    double value; /* the solved parameter; integral for rounds and count */
    /* noise_multiplier: the whole feasible interval (value == lo, the least noise) */
    int has_interval;
    double lo, hi;
    /* the accountant's delta at eps_target with the solved value substituted */
    double achieved_delta;
    /* when DPB_EINFEASIBLE: the best delta reachable and the parameter value reaching it */
    int has_best;
    double best_delta, best_at;
    /* the stated tolerance: the result is the best value within it (relative; 0 = exact) */
    double tolerance;
    /* thm41 specifics (docs/MATH.md section 2) */
    double per_epoch_delta;  /* per-epoch target from the f_{0,delta} composition */
    double rounds_eq3;       /* closed form (3), real */
    double rounds_eq4;       /* closed form (4), real */
    double regime_delta_max; /* delta up to which (3) implies (4) at this sigma */
    double regime_sigma_max; /* sigma up to which (3) implies (4) at per_epoch_delta */
    /* pnsgd schedules (solve_for c1): the C1 whose limit delta* (n -> infinity) is the
     * target, next to the C1 that meets it at this n */
    double limit_c1;
    /* shuffle_exact: Theorem 4.1's answer to the same calibration (+inf: it has none) */
    double thm41_value;
} dp_calibration;

/*
 * Solve the one unknown parameter of tmpl (exactly one node must carry dp_event.unknown)
 * for a target (eps_target >= 0, 0 < delta_target < 1). Never overshoots: the result is
 * verified against the target with the accountant itself before it is returned. tmpl is
 * borrowed; its unknown field is overwritten with the solution. Estimates (gdp_clt) are
 * not used to calibrate (DPB_EUNSUPPORTED). noise_multiplier: the smallest feasible value
 * (thm41: the whole interval); count: the largest feasible integer; rounds: the smallest
 * feasible integer; sampling_probability: the largest feasible value. Monotonicity in the
 * parameter (delta non-increasing in the noise, non-decreasing in count and rate) makes
 * bisection valid for rdp, pld and gdp_exact.
 */
dpb_status dp_calibrate(dp_event *tmpl, dp_relation rel, dp_accountant acct, double eps_target,
                        double delta_target, dp_calibration *out, dp_report *rep, dpb_error *err);
dpb_status dp_calibrate_ex(dp_event *tmpl, dp_relation rel, dp_accountant acct,
                           const dp_options *opt, double eps_target, double delta_target,
                           dp_calibration *out, dp_report *rep, dpb_error *err);

/* For the ledger: the RDP curve of ev at every RDP_DEFAULT_ORDERS order (all evaluated) and
 * its order infinity (RDP_CURVE_LEN values), for adding to a client's running curve.
 * DPB_EUNSUPPORTED when ev has no RDP curve (shuffled epochs, (eps, delta) with delta > 0, PNSGD),
 * DPB_EUNCERTIFIABLE for unclipped SGLD. */
dpb_status dp_rdp_curve(const dp_event *ev, dp_relation rel, double *curve, dpb_error *err);

/* POST /v1/rdp: the RDP curve of ev at the given orders (n <= RDP_MAX_ORDERS, each > 1 and at
 * most RDP_MAX_ORDER, or +inf: the order infinity, the max divergence the rdp accountant
 * composes additively; NULL: RDP_DEFAULT_ORDERS, n ignored), every order evaluated; curve[i]
 * is +inf where the divergence is infinite (or not bounded here). rep names the accountant
 * (rdp) and the guarantee. */
dpb_status dp_rdp_curve_at(const dp_event *ev, dp_relation rel, const double *orders, size_t n,
                           double *curve, dp_report *rep, dpb_error *err);

/* For the ledger's gdp_filter: mu^2 of ev when it is a composition of unsampled Gaussians
 * (exactly mu-GDP, Dong, Roth, Su 2019), summed as gdp_exact sums it (+inf for a non-private
 * event). DPB_EUNSUPPORTED for any other event. */
dpb_status dp_gdp_mu2_of(const dp_event *ev, dp_relation rel, double *mu2, dpb_error *err);

/* For the ledger: ln(1 - delta) of ev's (0, delta) total-variation guarantee, for events that
 * thm41 accounts (shuffled epochs and their compositions). */
dpb_status dp_tv_log1m_of(const dp_event *ev, dp_relation rel, double *s, dpb_error *err);

/* For the ledger's kept compositions (ledger/spend_kept.c): the pld accountant's pair of
 * pessimistic distributions of ev alone on the grid h (both directions, out[0] removal,
 * out[1] addition; *symmetric: only out[0] is set), composed as the compute API composes
 * it (no tilt, double transforms), each owned by the caller (pld_free). DPB_EUNSUPPORTED
 * when the pld accountant does not account ev, other failures as dp_epsilon's. */
dpb_status dp_pld_pair_of(const dp_event *ev, dp_relation rel, double h, pld_pmf out[2],
                          int *symmetric, dpb_error *err);

#endif
