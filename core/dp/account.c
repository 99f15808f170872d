/*
 * account.c - accountant dispatch over event trees.
 *
 * thm41: every leaf is one epoch of shuffled DP-SGD bounded by seed 004 Theorem 4.1, a
 * (0, delta_i) guarantee; the tree composes exactly by f_{0,d1} (x) f_{0,d2} =
 * f_{0,1-(1-d1)(1-d2)}, carried as s = sum ln(1 - delta_i) (MATH.md section 2).
 * gdp_clt: every leaf is approximated by mu_i-GDP (Theorem 5.2), composed as
 * mu = sqrt(sum mu_i^2). An estimate.
 */
#include "account.h"

#include <math.h>
#include <string.h>

#include "normal.h"
#include "shuffle.h"

static const char REF_THM41[] = "seed 004 (van Dijk & Ertan), Theorem 4.1, with B = 0.4748; "
                                "epochs composed by the exact f_{0,delta} rule";
static const char REF_GDP_CLT[] = "seed 004 (van Dijk & Ertan), Theorem 5.2: asymptotic "
                                  "mu-GDP with mu = sqrt(E (e^{1/sigma^2} - 1)/(M - 1))";

static const char W_TV[] = "Theorem 4.1 bounds total variation only: delta is the same for "
                           "every epsilon >= 0, and no finite epsilon is certified for a "
                           "delta below it";
static const char W_ESTIMATE[] = "asymptotic approximation (M -> infinity with sigma fixed) "
                                 "with no finite-M error bound; it can be far below the true "
                                 "delta: never enforce a budget with it";

static const char *const REL_NAMES[] = {"add_or_remove_one", "replace_one"};
static const char *const ACCT_NAMES[] = {"auto", "thm41", "gdp_clt"};

const char *dp_relation_name(dp_relation r)
{
    return (unsigned)r < 2 ? REL_NAMES[r] : "unknown";
}

int dp_relation_parse(const char *s, dp_relation *r)
{
    for (unsigned i = 0; i < 2; i++)
        if (strcmp(s, REL_NAMES[i]) == 0) {
            *r = (dp_relation)i;
            return 0;
        }
    return -1;
}

const char *dp_accountant_name(dp_accountant a)
{
    return (unsigned)a < 3 ? ACCT_NAMES[a] : "unknown";
}

int dp_accountant_parse(const char *s, dp_accountant *a)
{
    for (unsigned i = 0; i < 3; i++)
        if (strcmp(s, ACCT_NAMES[i]) == 0) {
            *a = (dp_accountant)i;
            return 0;
        }
    return -1;
}

/* ---- choosing an accountant ------------------------------------------------------- */

static int all_leaves_shuffled(const dp_event *ev)
{
    switch (ev->kind) {
    case DP_EV_SHUFFLED_EPOCH:
        return 1;
    case DP_EV_SELF_COMPOSED:
        return all_leaves_shuffled(ev->u.self.event);
    case DP_EV_COMPOSED:
        for (size_t i = 0; i < ev->u.composed.n; i++)
            if (!all_leaves_shuffled(ev->u.composed.events[i]))
                return 0;
        return 1;
    }
    return 0;
}

static dpb_status resolve(const dp_event *ev, dp_relation rel, dp_accountant *acct, dp_report *rep,
                          dpb_error *err)
{
    memset(rep, 0, sizeof *rep);
    if (ev == NULL)
        return dpb_fail(err, DPB_EINVAL, "event", "an event is required");
    if (!all_leaves_shuffled(ev))
        return dpb_fail(err, DPB_EUNSUPPORTED, "event",
                        "this event has no supported accountant yet");
    if (*acct == DP_ACCT_AUTO)
        *acct = DP_ACCT_THM41;
    if (rel != DP_REL_ADD_OR_REMOVE)
        return dpb_fail(err, DPB_EUNSUPPORTED, "neighboring_relation",
                        "seed 004's analysis of shuffled DP-SGD is proved for the "
                        "add_or_remove_one (zero-out) relation only; replace_one is not "
                        "covered by %s",
                        dp_accountant_name(*acct));
    rep->accountant = dp_accountant_name(*acct);
    if (*acct == DP_ACCT_THM41) {
        rep->guarantee = DP_UPPER_BOUND;
        rep->reference = REF_THM41;
    } else {
        rep->guarantee = DP_ESTIMATE;
        rep->reference = REF_GDP_CLT;
        dp_report_warn(rep, W_ESTIMATE);
    }
    return DPB_OK;
}

/* ---- thm41: the total-variation profile of a tree ------------------------------- */

static void thm41_conditions(dp_report *rep, const dp_thm41 *e)
{
    dp_report_condition(rep, "rounds_at_least_3", "M >= 3 (rounds per epoch)", e->rounds_ok,
                        (double)e->rounds, 3.0);
    if (!e->rounds_ok)
        return;
    dp_report_condition(rep, "sigma_at_least_sqrt_3_over_ln_m",
                        "noise_multiplier >= sqrt(3 / ln M)", e->sigma_ok, e->sigma, e->sigma_min);
    if (!e->sigma_ok)
        return;
    dp_report_condition(rep, "thm41_validity",
                        "condition (1): delta + B coef mu <= 1/2 - Phi(-(e^{1/sigma^2} - 1)/2)",
                        e->cond_ok, e->cond_lhs, e->cond_rhs);
}

/* s += multiplicity * ln(1 - delta_leaf) over the tree. */
static dpb_status thm41_sum(const dp_event *ev, double mult, double *s, dp_report *rep,
                            dpb_error *err)
{
    switch (ev->kind) {
    case DP_EV_SHUFFLED_EPOCH: {
        dp_thm41 e;
        dpb_status st = dp_thm41_eval(ev->u.shuffled.noise_multiplier, ev->u.shuffled.rounds, &e);
        if (st == DPB_EINVAL)
            return dpb_fail(err, st, "event", "noise_multiplier must be > 0 and rounds >= 1");
        thm41_conditions(rep, &e);
        if (st != DPB_OK) {
            if (!e.rounds_ok)
                return dpb_fail(err, st, "rounds",
                                "Theorem 4.1 needs M >= 3 rounds per epoch; got %llu",
                                (unsigned long long)e.rounds);
            if (!e.sigma_ok)
                return dpb_fail(err, st, "noise_multiplier",
                                "Theorem 4.1 needs noise_multiplier >= sqrt(3/ln M) = %.6g at "
                                "M = %llu; got %.6g",
                                e.sigma_min, (unsigned long long)e.rounds, e.sigma);
            return dpb_fail(err, st, "event",
                            "Theorem 4.1's validity condition (1) fails at noise_multiplier "
                            "%.6g, M = %llu (%.6g > %.6g): more rounds per epoch are needed",
                            e.sigma, (unsigned long long)e.rounds, e.cond_lhs, e.cond_rhs);
        }
        *s += mult * dp_tv_log1m(e.delta);
        return DPB_OK;
    }
    case DP_EV_SELF_COMPOSED:
        return thm41_sum(ev->u.self.event, mult * (double)ev->u.self.count, s, rep, err);
    case DP_EV_COMPOSED:
        for (size_t i = 0; i < ev->u.composed.n; i++) {
            dpb_status st = thm41_sum(ev->u.composed.events[i], mult, s, rep, err);
            if (st != DPB_OK)
                return st;
        }
        return DPB_OK;
    }
    return dpb_fail(err, DPB_EUNSUPPORTED, "event", "unsupported event");
}

static dpb_status thm41_total(const dp_event *ev, double *delta, dp_report *rep, dpb_error *err)
{
    double s = 0.0;
    dpb_status st = thm41_sum(ev, 1.0, &s, rep, err);
    if (st == DPB_OK)
        *delta = dp_tv_delta_of_sum(s);
    return st;
}

/* ---- gdp_clt ------------------------------------------------------------------------ */

static dpb_status gdp_mu2(const dp_event *ev, double mult, double *mu2, dpb_error *err)
{
    switch (ev->kind) {
    case DP_EV_SHUFFLED_EPOCH: {
        double mu;
        if (dp_thm52_mu(ev->u.shuffled.noise_multiplier, ev->u.shuffled.rounds, &mu) != DPB_OK)
            return dpb_fail(err, DPB_EINVAL, "event",
                            "the Theorem 5.2 approximation needs noise_multiplier >= 0.04 and "
                            "rounds >= 2");
        *mu2 += mult * mu * mu;
        return DPB_OK;
    }
    case DP_EV_SELF_COMPOSED:
        return gdp_mu2(ev->u.self.event, mult * (double)ev->u.self.count, mu2, err);
    case DP_EV_COMPOSED:
        for (size_t i = 0; i < ev->u.composed.n; i++) {
            dpb_status st = gdp_mu2(ev->u.composed.events[i], mult, mu2, err);
            if (st != DPB_OK)
                return st;
        }
        return DPB_OK;
    }
    return dpb_fail(err, DPB_EUNSUPPORTED, "event", "unsupported event");
}

/* ---- public queries ------------------------------------------------------------------ */

static dpb_status check_points(const double *v, size_t n, int is_delta, dpb_error *err)
{
    const char *field = is_delta ? "delta" : "epsilon";
    if (n == 0 || n > DP_MAX_POINTS)
        return dpb_fail(err, DPB_ELIMIT, field, "between 1 and %d values may be asked for",
                        DP_MAX_POINTS);
    for (size_t i = 0; i < n; i++) {
        if (is_delta ? !(v[i] > 0.0 && v[i] < 1.0) : !(isfinite(v[i]) && v[i] >= 0.0))
            return dpb_fail(err, DPB_EINVAL, field,
                            is_delta ? "delta must lie strictly between 0 and 1"
                                     : "epsilon must be a finite number >= 0");
    }
    return DPB_OK;
}

dpb_status dp_delta(const dp_event *ev, dp_relation rel, dp_accountant acct, const double *eps,
                    size_t n, double *delta, double *ln_delta, dp_report *rep, dpb_error *err)
{
    dpb_status st = resolve(ev, rel, &acct, rep, err);
    if (st == DPB_OK)
        st = check_points(eps, n, 0, err);
    if (st != DPB_OK)
        return st;
    if (acct == DP_ACCT_THM41) {
        double d;
        st = thm41_total(ev, &d, rep, err);
        if (st != DPB_OK)
            return st;
        dp_report_warn(rep, W_TV);
        for (size_t i = 0; i < n; i++) {
            delta[i] = d;
            if (ln_delta)
                ln_delta[i] = log(d);
        }
        return DPB_OK;
    }
    double mu2 = 0.0;
    st = gdp_mu2(ev, 1.0, &mu2, err);
    if (st != DPB_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        double ld;
        st = dp_gdp_delta(sqrt(mu2), eps[i], &delta[i], &ld);
        if (st != DPB_OK)
            return dpb_fail(err, st, "event", "the composed GDP parameter is out of range");
        if (ln_delta)
            ln_delta[i] = ld;
    }
    return DPB_OK;
}

dpb_status dp_epsilon(const dp_event *ev, dp_relation rel, dp_accountant acct, const double *delta,
                      size_t n, double *eps, dp_report *rep, dpb_error *err)
{
    dpb_status st = resolve(ev, rel, &acct, rep, err);
    if (st == DPB_OK)
        st = check_points(delta, n, 1, err);
    if (st != DPB_OK)
        return st;
    if (acct == DP_ACCT_THM41) {
        double d;
        st = thm41_total(ev, &d, rep, err);
        if (st != DPB_OK)
            return st;
        for (size_t i = 0; i < n; i++) {
            eps[i] = delta[i] >= d ? 0.0 : HUGE_VAL;
            if (eps[i] > 0.0)
                dp_report_warn(rep, W_TV);
        }
        return DPB_OK;
    }
    double mu2 = 0.0;
    st = gdp_mu2(ev, 1.0, &mu2, err);
    if (st != DPB_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        st = dp_gdp_epsilon(sqrt(mu2), delta[i], &eps[i]);
        if (st != DPB_OK)
            return dpb_fail(err, st, "event", "the GDP inversion failed");
    }
    return DPB_OK;
}

/* ---- calibration ----------------------------------------------------------------------- */

/* The thm41 calibrations handle a chain SelfComposed^k(ShuffledEpoch): E identical epochs.
 * Returns the leaf and the product of the known counts (the unknown count excluded). */
static const dp_event *epoch_chain(const dp_event *ev, double *known_epochs)
{
    *known_epochs = 1.0;
    while (ev->kind == DP_EV_SELF_COMPOSED) {
        if (ev->unknown != DP_PARAM_COUNT)
            *known_epochs *= (double)ev->u.self.count;
        ev = ev->u.self.event;
    }
    return ev->kind == DP_EV_SHUFFLED_EPOCH ? ev : NULL;
}

static void calibration_init(dp_calibration *c, dp_param p)
{
    memset(c, 0, sizeof *c);
    c->param = p;
    c->value = c->lo = c->hi = c->achieved_delta = NAN;
    c->best_delta = c->best_at = NAN;
    c->per_epoch_delta = c->rounds_eq3 = c->rounds_eq4 = NAN;
    c->regime_delta_max = c->regime_sigma_max = NAN;
}

static dpb_status verify_total(dp_event *tmpl, double delta_target, double *achieved,
                               dp_report *rep)
{
    dp_report scratch = *rep;
    dpb_status st = thm41_total(tmpl, achieved, &scratch, NULL);
    if (st != DPB_OK)
        return st;
    return *achieved <= delta_target ? DPB_OK : DPB_EINFEASIBLE;
}

static dpb_status calibrate_thm41(dp_event *tmpl, dp_event *node, double delta_target,
                                  dp_calibration *c, dp_report *rep, dpb_error *err)
{
    double epochs;
    const dp_event *leafc = epoch_chain(tmpl, &epochs);
    if (leafc == NULL)
        return dpb_fail(err, DPB_EUNSUPPORTED, "event",
                        "thm41 calibration handles one epoch or a self-composition of "
                        "identical epochs, not a composition of different ones");
    dp_event *leaf = (dp_event *)leafc;
    if (!(epochs >= 1.0 && epochs < 1e18))
        return dpb_fail(err, DPB_EINVAL, "count", "the number of epochs is out of range");

    if (node->unknown == DP_PARAM_ROUNDS) {
        double sigma = leaf->u.shuffled.noise_multiplier;
        double de = dp_tv_per_epoch(delta_target, (uint64_t)epochs);
        c->per_epoch_delta = de;
        c->rounds_eq3 = dp_thm41_rounds_eq3(sigma, de);
        c->rounds_eq4 = dp_thm41_rounds_eq4(sigma);
        c->regime_delta_max = dp_thm41_regime_delta_max(sigma);
        uint64_t M;
        dp_thm41 at;
        dpb_status st = dp_thm41_min_rounds(sigma, de, &M, &at);
        if (st == DPB_EINFEASIBLE) {
            leaf->u.shuffled.rounds = UINT64_MAX;
            c->has_best = thm41_total(tmpl, &c->best_delta, rep, NULL) == DPB_OK;
            c->best_at = (double)UINT64_MAX;
            return dpb_fail(err, st, "rounds",
                            "no number of rounds below 2^64 meets delta %.6g with Theorem 4.1",
                            delta_target);
        }
        if (st != DPB_OK)
            return dpb_fail(err, st, "event", "noise_multiplier must be a positive number");
        /* Verify the whole tree (the per-epoch split is rounded); step up if needed. */
        for (int i = 0; i < 64; i++) {
            leaf->u.shuffled.rounds = M;
            if (verify_total(tmpl, delta_target, &c->achieved_delta, rep) == DPB_OK)
                break;
            M += 1 + M / 1000000000000ULL;
        }
        if (!(c->achieved_delta <= delta_target))
            return dpb_fail(err, DPB_ENUMERIC, "rounds", "could not verify the solved rounds");
        /* The per-epoch split is conservative by a hair: step down while the whole tree
         * still meets the target, so M is the smallest integer that does. */
        for (int i = 0; i < 64 && M > 3; i++) {
            double d;
            leaf->u.shuffled.rounds = M - 1;
            if (verify_total(tmpl, delta_target, &d, rep) != DPB_OK)
                break;
            M--;
            c->achieved_delta = d;
        }
        leaf->u.shuffled.rounds = M;
        c->value = (double)M;
        return DPB_OK;
    }

    if (node->unknown == DP_PARAM_NOISE_MULTIPLIER) {
        uint64_t M = leaf->u.shuffled.rounds;
        double de = dp_tv_per_epoch(delta_target, (uint64_t)epochs);
        c->per_epoch_delta = de;
        if (de < 1.0 / 3.0) {
            double smax;
            if (dp_thm41_regime_sigma_max(de, &smax) == DPB_OK)
                c->regime_sigma_max = smax;
        }
        if (M == 0)
            return dpb_fail(err, DPB_EINVAL, "rounds", "rounds must be >= 1");
        double lo, hi, bd, bs;
        dpb_status st = dp_thm41_sigma_interval(M, de, &lo, &hi, &bd, &bs);
        if (st == DPB_EINFEASIBLE) {
            if (bd < HUGE_VAL) {
                leaf->u.shuffled.noise_multiplier = bs;
                c->has_best = thm41_total(tmpl, &c->best_delta, rep, NULL) == DPB_OK;
                c->best_at = bs;
                return dpb_fail(err, st, "noise_multiplier",
                                "no noise_multiplier reaches delta %.6g at M = %llu with "
                                "Theorem 4.1; the smallest certified delta is %.6g at "
                                "noise_multiplier %.6g: use more rounds",
                                delta_target, (unsigned long long)M, c->best_delta, bs);
            }
            return dpb_fail(err, st, "rounds",
                            "Theorem 4.1 certifies nothing at M = %llu for any "
                            "noise_multiplier: use more rounds",
                            (unsigned long long)M);
        }
        if (st != DPB_OK)
            return dpb_fail(err, st, "rounds", "rounds must be >= 1");
        /* Verify both ends on the whole tree. */
        double ach_hi;
        leaf->u.shuffled.noise_multiplier = hi;
        if (verify_total(tmpl, delta_target, &ach_hi, rep) != DPB_OK)
            return dpb_fail(err, DPB_ENUMERIC, "noise_multiplier", "could not verify the interval");
        leaf->u.shuffled.noise_multiplier = lo;
        if (verify_total(tmpl, delta_target, &c->achieved_delta, rep) != DPB_OK)
            return dpb_fail(err, DPB_ENUMERIC, "noise_multiplier", "could not verify the interval");
        c->value = lo;
        c->has_interval = 1;
        c->lo = lo;
        c->hi = hi;
        return DPB_OK;
    }

    if (node->unknown == DP_PARAM_COUNT) {
        dp_thm41 e;
        dpb_status st =
            dp_thm41_eval(leaf->u.shuffled.noise_multiplier, leaf->u.shuffled.rounds, &e);
        if (st != DPB_OK) {
            thm41_conditions(rep, &e);
            return thm41_total(leaf, &c->best_delta, rep, err);
        }
        c->per_epoch_delta = e.delta;
        /* (1 - d)^{epochs x} >= 1 - target  <=>  x <= ln(1 - target) / (epochs ln(1 - d)) */
        double x = floor(dp_tv_log1m(delta_target) / (epochs * dp_tv_log1m(e.delta)));
        if (x > 1e18)
            x = 1e18;
        for (; x >= 1.0; x -= 1.0) {
            node->u.self.count = (uint64_t)x;
            if (verify_total(tmpl, delta_target, &c->achieved_delta, rep) == DPB_OK)
                break;
        }
        if (x < 1.0) {
            node->u.self.count = 1;
            c->has_best = thm41_total(tmpl, &c->best_delta, rep, NULL) == DPB_OK;
            c->best_at = 1.0;
            return dpb_fail(err, DPB_EINFEASIBLE, "count",
                            "even one epoch exceeds delta %.6g: Theorem 4.1 gives %.6g per "
                            "epoch",
                            delta_target, e.delta);
        }
        c->value = x;
        return DPB_OK;
    }
    return dpb_fail(err, DPB_EUNSUPPORTED, "solve_for", "this parameter cannot be solved for");
}

dpb_status dp_calibrate(dp_event *tmpl, dp_relation rel, dp_accountant acct, double eps_target,
                        double delta_target, dp_calibration *out, dp_report *rep, dpb_error *err)
{
    int nunk;
    dp_event *node = tmpl ? dp_event_find_unknown(tmpl, &nunk) : NULL;
    calibration_init(out, node ? node->unknown : DP_PARAM_NONE);
    dpb_status st = resolve(tmpl, rel, &acct, rep, err);
    if (st != DPB_OK)
        return st;
    if (node == NULL || nunk != 1)
        return dpb_fail(err, DPB_EINVAL, "solve_for",
                        "exactly one event field must be left for the solver");
    if (!(isfinite(eps_target) && eps_target >= 0.0))
        return dpb_fail(err, DPB_EINVAL, "target.epsilon", "epsilon must be finite and >= 0");
    if (!(delta_target > 0.0 && delta_target < 1.0))
        return dpb_fail(err, DPB_EINVAL, "target.delta", "delta must lie strictly in (0, 1)");
    if (acct != DP_ACCT_THM41)
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant",
                        "calibration uses certified accountants only; %s is an estimate",
                        dp_accountant_name(acct));
    dp_report_warn(rep, W_TV);
    st = calibrate_thm41(tmpl, node, delta_target, out, rep, err);
    if (st == DPB_OK) {
        /* report the conditions as checked at the solution */
        double d;
        thm41_total(tmpl, &d, rep, NULL);
    }
    return st;
}
