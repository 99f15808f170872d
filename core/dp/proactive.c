/*
 * proactive.c - the closed forms and the DP calculator of seed 002 (docs/MATH.md section 4).
 *
 * gamma: phi(gamma) = gamma - F(sigma, eps/(gamma k)) increases with gamma (F decreases as
 * its argument a = eps/(gamma k) shrinks), so the smallest gamma with phi >= 0 is found by
 * bisection between the edge of F's domain and a gamma where phi > 0.
 */
#include "proactive.h"

#include <math.h>

#include "normal.h"

#define E_ 2.71828182845904523536028747135266250
#define THREE_MINUS_2SQRT2 0.171572875253809902396622551580603843
#define REL 1e-12

double pro_sigma_of(double eps, double delta)
{
    if (!(eps > 0.0) || !(delta > 0.0 && delta < 1.0))
        return NAN;
    return dp_round_up(sqrt(2.0 * (eps - log(delta)) / eps), REL);
}

double pro_eps_of(double sigma, double delta)
{
    if (!(delta > 0.0 && delta < 1.0) || !(sigma * sigma > 2.0))
        return HUGE_VAL;
    return dp_round_up(-2.0 * log(delta) / (sigma * sigma - 2.0), REL);
}

double pro_ln_delta_of(double sigma, double eps)
{
    if (!(sigma * sigma > 2.0) || !(eps >= 0.0))
        return 0.0;
    double ld = -eps * (sigma * sigma - 2.0) / 2.0;
    return ld * (1.0 - REL); /* ld <= 0: moving it towards 0 rounds delta up */
}

double pro_h(double x)
{
    double r = E_ / x;
    double v = 1.0 / (sqrt(1.0 + r * r) + r); /* = sqrt(1 + r^2) - r, without cancellation */
    return v * v;
}

double pro_g(double x)
{
    double a = 1.0 / (E_ * x), b = pro_h(x);
    return a < b ? a : b;
}

/* The largest a in F's domain for sigma (exclusive). */
static double a_limit(double sigma)
{
    double lim = pro_h(sigma);
    if (THREE_MINUS_2SQRT2 < lim)
        lim = THREE_MINUS_2SQRT2;
    /* sigma (1 - a) - 2 e sqrt(a) > 0: solve for sqrt(a) */
    double r = (-2.0 * E_ + sqrt(4.0 * E_ * E_ + 4.0 * sigma * sigma)) / (2.0 * sigma);
    if (r * r < lim)
        lim = r * r;
    return lim;
}

double pro_F(double sigma, double a, pro_variant v)
{
    if (!(sigma > 0.0) || !isfinite(sigma) || !(a > 0.0) || !(a < a_limit(sigma)))
        return NAN;
    double sa = sqrt(a);
    double d1 = v == PRO_PAPER ? (1.0 - sa) * (1.0 - sa) : 1.0 - a - 2.0 * sa;
    double d2 = sigma * (1.0 - a) - 2.0 * E_ * sa;
    if (!(d1 > 0.0) || !(d2 > 0.0))
        return NAN;
    double t = sigma / d1 + E_ * E_ * E_ / (sigma * d2);
    return 2.0 / (1.0 - a) + 16.0 * a / (1.0 - a) * t * exp(3.0 / (sigma * sigma));
}

dpb_status pro_gamma(double sigma, double eps, double k, pro_variant v, double *gamma, double *a)
{
    if (!(sigma > 0.0) || !(eps > 0.0) || !(k > 0.0) || !isfinite(sigma + eps + k))
        return DPB_EINVAL;
    if (v == PRO_PAPER) {
        double g = pro_F(sigma, eps / (2.0 * k), PRO_PAPER);
        if (isnan(g))
            return DPB_ENOTCOVERED;
        *gamma = g;
        *a = eps / (g * k);
        return DPB_OK;
    }
    double lim = a_limit(sigma);
    double lo = eps / (k * lim); /* gamma must exceed this for a < lim */
    lo = nextafter(lo * (1.0 + 1e-15), HUGE_VAL);
    double hi = lo > 4.0 ? 2.0 * lo : 8.0;
    /* phi(hi) > 0 (F -> 2 as a -> 0) */
    for (int i = 0; i < 200; i++) {
        double f = pro_F(sigma, eps / (hi * k), PRO_CORRECTED);
        if (!isnan(f) && hi >= f)
            break;
        hi *= 2.0;
    }
    double flo = pro_F(sigma, eps / (lo * k), PRO_CORRECTED);
    if (!isnan(flo) && lo >= flo) {
        hi = lo; /* the inequality already holds at the domain's edge */
    } else {
        for (int i = 0; i < 300 && hi - lo > 1e-15 * hi; i++) {
            double mid = 0.5 * (lo + hi);
            double f = pro_F(sigma, eps / (mid * k), PRO_CORRECTED);
            if (!isnan(f) && mid >= f)
                hi = mid;
            else
                lo = mid;
        }
    }
    *gamma = dp_round_up(hi, 1e-14);
    *a = eps / (*gamma * k);
    if (!(*a < lim))
        return DPB_ENOTCOVERED;
    return DPB_OK;
}

static void cond(dp_report *rep, const char *name, const char *statement, int holds, double lhs,
                 double rhs)
{
    if (rep)
        dp_report_condition(rep, name, statement, holds, lhs, rhs);
}

/* The conditions of Theorem B.4 at integers (and optionally Theorem 3.1's). Returns 1 if
 * all hold. */
static int check_b4(double sigma, double eps, double delta, double N, double k, double s_bar,
                    double theta, double gamma, int theorem31, dp_report *rep)
{
    double s_max = theta * s_bar;
    double sig_eps = sqrt(2.0 * (eps - log(delta)) / eps);
    int ok = 1, h;
    h = sigma >= sig_eps * (1.0 - 1e-14);
    cond(rep, "b4_35_noise", "(35) sigma >= sqrt(2(eps + ln(1/delta))/eps)", h, sigma, sig_eps);
    ok &= h;
    double need = gamma * theta * theta * k * s_bar / N;
    h = eps >= need;
    cond(rep, "b4_34_rounds", "(34) eps >= gamma theta^2 k s_bar/N (T >= gamma theta^2 k^2/eps)", h,
         eps, need);
    ok &= h;
    double cap = dp_round_down(gamma, 2e-12) * pro_h(sigma) * k;
    h = eps <= cap;
    cond(rep, "b4_33_epsilon", "(33) eps <= gamma h(sigma) k", h, eps, cap);
    ok &= h;
    double smax_cap = N * pro_g(sig_eps);
    h = s_max <= smax_cap;
    cond(rep, "b4_32_batch", "(32) s_max <= N g(sqrt(2(eps + ln(1/delta))/eps))", h, s_max,
         smax_cap);
    ok &= h;
    if (theorem31) {
        h = eps < 0.5;
        cond(rep, "t31_epsilon", "Theorem 3.1: eps < 0.5", h, eps, 0.5);
        ok &= h;
        h = delta <= 1.0 / N;
        cond(rep, "t31_delta", "Theorem 3.1: delta <= 1/N", h, delta, 1.0 / N);
        ok &= h;
        h = N >= 10000.0;
        cond(rep, "t31_dataset", "Theorem 3.1: N >= 10000", h, N, 10000.0);
        ok &= h;
        h = theta <= 6.85;
        cond(rep, "t31_theta", "Theorem 3.1: theta <= 6.85", h, theta, 6.85);
        ok &= h;
        double l7 = (2.0 / E_) * (2.0 / E_) * k * k, r7 = 0.5 - log(delta);
        h = l7 >= r7;
        cond(rep, "t31_7_epochs", "Theorem 3.1 (7): (2/e)^2 k^2 >= 1/2 + ln(1/delta)", h, l7, r7);
        ok &= h;
    }
    return ok;
}

static const char *first_failed(const dp_report *rep)
{
    for (int i = 0; i < rep->ncond; i++)
        if (!rep->cond[i].holds)
            return rep->cond[i].statement;
    return "a condition";
}

/* The checks both plan verbs make first: in_domain (the caller's range check of sigma, delta,
 * dataset_size, its count named count_name and theta) else DPB_EINVAL, then (6)'s sigma^2 > 2
 * else DPB_ENOTCOVERED; DPB_OK when both hold. */
static dpb_status plan_args(int in_domain, const char *count_name, double sigma, dpb_error *err)
{
    if (!in_domain)
        return dpb_fail(err, DPB_EINVAL, "plan",
                        "need noise_multiplier > 0, 0 < delta < 1, dataset_size >= 1, "
                        "%s >= 1 and theta >= 1",
                        count_name);
    if (!(sigma * sigma > 2.0))
        return dpb_fail(err, DPB_ENOTCOVERED, "noise_multiplier",
                        "(6) needs noise_multiplier^2 > 2 (got %.6g)", sigma);
    return DPB_OK;
}

dpb_status pro_plan_run(double sigma, double delta, double N, double K, double theta, pro_variant v,
                        int theorem31, pro_plan *plan, dpb_error *err)
{
    *plan = (pro_plan){0};
    int in_domain = sigma > 0.0 && isfinite(sigma) && delta > 0.0 && delta < 1.0 && N >= 1.0 &&
                    K >= 1.0 && theta >= 1.0 && isfinite(N + K + theta);
    dpb_status st = plan_args(in_domain, "total_gradients", sigma, err);
    if (st != DPB_OK)
        return st;
    double eps = pro_eps_of(sigma, delta), k = K / N, gamma, a;
    plan->eps = eps;
    st = pro_gamma(sigma, eps, k, v, &gamma, &a);
    if (st != DPB_OK)
        return dpb_fail(err, st, "noise_multiplier",
                        "no gamma keeps eps/(gamma k) inside F's domain: epsilon %.6g is too "
                        "large for %.6g epochs at this sigma ((33) fails)",
                        eps, k);
    plan->gamma = gamma;
    plan->a = a;
    plan->mean_batch = N * a / (theta * theta);
    plan->rounds_min = K / plan->mean_batch;
    /* integers: batch down, rounds up; then re-check everything, stepping the batch down */
    double s = floor(plan->mean_batch);
    for (; s >= 1.0; s -= 1.0) {
        double T = ceil(K / s), k2 = s * T / N, g2, a2;
        dp_report rep = {0};
        if (pro_gamma(sigma, eps, k2, v, &g2, &a2) != DPB_OK)
            continue;
        if (check_b4(sigma, eps, delta, N, k2, s, theta, g2, theorem31, &rep)) {
            plan->batch = s;
            plan->rounds = T;
            plan->k_actual = k2;
            plan->conditions = rep;
            return DPB_OK;
        }
        if (s == floor(plan->mean_batch))
            plan->conditions = rep; /* keep the first attempt's conditions for the answer */
        /* conditions that no smaller batch can repair: stop at once */
        int fixable = 1;
        for (int i = 0; i < rep.ncond; i++)
            if (!rep.cond[i].holds && rep.cond[i].name[0] == 't')
                fixable = 0;
        if (!fixable)
            break;
    }
    return dpb_fail(err, DPB_ENOTCOVERED, "plan",
                    "no integer batch size meets the conditions; the first that fails: %s",
                    first_failed(&plan->conditions));
}

dpb_status pro_max_rounds(double sigma, double delta, double N, double s, double theta,
                          pro_variant v, double *eps, double *t_max, dp_report *rep, dpb_error *err)
{
    int in_domain = sigma > 0.0 && delta > 0.0 && delta < 1.0 && N >= 1.0 && s >= 1.0 &&
                    theta >= 1.0 && isfinite(sigma + N + s + theta);
    dpb_status st = plan_args(in_domain, "batch_size", sigma, err);
    if (st != DPB_OK)
        return st;
    *eps = pro_eps_of(sigma, delta);
    double a = theta * theta * s / N, F = pro_F(sigma, a, v);
    int in = !isnan(F);
    cond(rep, "domain", "theta^2 s/N < min(h(sigma), 3 - 2 sqrt 2) (F's domain; (33))", in, a,
         a_limit(sigma));
    if (!in)
        return dpb_fail(err, DPB_ENOTCOVERED, "batch_size",
                        "theta^2 batch/N = %.6g is outside F's domain (< %.6g): use a smaller "
                        "batch",
                        a, a_limit(sigma));
    double smax_cap = N * pro_g(sigma);
    int ok32 = theta * s <= smax_cap;
    cond(rep, "b4_32_batch", "(32) s_max <= N g(sigma)", ok32, theta * s, smax_cap);
    if (!ok32)
        return dpb_fail(err, DPB_ENOTCOVERED, "batch_size",
                        "(32) fails: the largest batch is %.6g (N g(sigma)), got %.6g",
                        smax_cap / theta, s);
    *t_max = floor(dp_round_down(*eps * N * N / (F * theta * theta * s * s), 1e-12));
    if (*t_max < 1.0)
        return dpb_fail(err, DPB_EINFEASIBLE, "batch_size",
                        "not even one round fits this batch size at this sigma");
    return DPB_OK;
}

dpb_status pro_history_init(const double *sigma, const double *batch, const double *rounds,
                            int nphases, double N, pro_variant v, pro_history *h, dp_report *rep,
                            dpb_error *err)
{
    *h = (pro_history){0};
    if (nphases < 1 || !(N >= 1.0))
        return dpb_fail(err, DPB_EINVAL, "phases", "at least one phase and dataset_size >= 1");
    double smin = HUGE_VAL, smax = 0.0, K = 0.0, T = 0.0;
    for (int i = 0; i < nphases; i++) {
        if (!(sigma[i] > 0.0) || !(batch[i] >= 1.0) || !(rounds[i] >= 1.0) || !(batch[i] <= N))
            return dpb_fail(err, DPB_EINVAL, "phases",
                            "each phase needs noise_multiplier > 0, 1 <= batch_size <= "
                            "dataset_size and rounds >= 1");
        if (sigma[i] < smin)
            smin = sigma[i];
        if (batch[i] > smax)
            smax = batch[i];
        K += batch[i] * rounds[i];
        T += rounds[i];
    }
    h->variant = v;
    h->N = N;
    h->sigma_min = smin;
    h->s_max = smax;
    h->K = K;
    h->k = K / N;
    h->s_bar = K / T;
    h->theta = smax / h->s_bar;
    h->alpha = h->theta * smax / N;
    int ok = smin * smin > 2.0;
    cond(rep, "sigma_squared_above_2", "(6) needs sigma_min^2 > 2", ok, smin * smin, 2.0);
    double F = pro_F(smin, h->alpha, v);
    int in = !isnan(F);
    cond(rep, "domain", "theta s_max/N < min(h(sigma_min), 3 - 2 sqrt 2) (F's domain)", in,
         h->alpha, a_limit(smin));
    double cap = N * pro_g(smin);
    int ok32 = smax <= cap;
    cond(rep, "b4_32_batch", "(32) s_max <= N g(sigma_min)", ok32, smax, cap);
    h->certified = ok && in && ok32;
    if (!h->certified)
        return DPB_OK;
    h->eps_floor = dp_round_up(F * h->alpha * h->k, 1e-12);
    /* (33): eps/(gamma k) < a_limit; at eps the gamma is F(sigma, a) with a = eps/(gamma k),
     * so eps = a F(a) k: the largest eps is that at a just below the limit. */
    double lim = dp_round_down(a_limit(smin), 1e-9);
    double Fl = pro_F(smin, lim, v);
    h->eps_max = isnan(Fl) ? h->eps_floor : dp_round_down(lim * Fl * h->k, 1e-12);
    if (h->eps_max < h->eps_floor)
        h->eps_max = h->eps_floor;
    return DPB_OK;
}

double pro_history_delta(const pro_history *h, double eps)
{
    if (!h->certified || eps < h->eps_floor)
        return HUGE_VAL;
    if (eps > h->eps_max)
        eps = h->eps_max;
    double ld = pro_ln_delta_of(h->sigma_min, eps);
    return dp_round_up(exp(ld), 1e-12);
}

double pro_history_eps(const pro_history *h, double delta)
{
    if (!h->certified)
        return HUGE_VAL;
    double e = pro_eps_of(h->sigma_min, delta);
    if (e < h->eps_floor)
        e = h->eps_floor;
    return e > h->eps_max ? HUGE_VAL : e;
}
