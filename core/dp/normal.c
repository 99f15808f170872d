/*
 * normal.c - normal tails and Gaussian DP.
 *
 * erfcx: for 0 < x < 25 a table of polynomials, one per interval of width 1/4: erfcx is
 * entire, and its degree-10 Chebyshev interpolants on these intervals, evaluated in double
 * by Estrin's scheme, are within 5e-16 of it, relative (tests/ref/gen_erfcx_table.py makes
 * and checks the table, core/dp/erfcx_table.h). That is one lookup and a few independent
 * products where exp(x^2) erfc(x) costs two libm calls, and the discretisation of a PLD
 * leaf evaluates it twice per grid point. erfcx(0) = 1 exactly. For x >= 25 the
 * asymptotic series sum_k (-1)^k (2k-1)!! / (2x^2)^k, truncated after 12 terms, is accurate
 * to far below an ulp. For x < 0 the product exp(x^2) erfc(x) is formed with x^2 split
 * exactly (hi + lo by fma), so the only errors are those of libm's exp and erfc (a few
 * ulp); there erfc(x) lies in (1, 2) and the product has no cancellation.
 */
#include "normal.h"

#include <float.h>
#include <math.h>

#include <gsl/gsl_cdf.h>

#include "erfcx_table.h"

_Static_assert(ERFCX_TABLE_DEG == 10, "dp_erfcx's Estrin scheme is written for degree 10");

#define SQRT_2PI 2.50662827463100050241576528481104525
#define LN_SQRT_2PI 0.918938533204672741780329736405617640
#define SQRT_PI_2 1.25331413731550025120788264240552263 /* sqrt(pi/2) */
#define INV_SQRT_PI 0.564189583547756286948079451560772586
#define SQRT1_2 0.707106781186547524400844362104849039

/* exp(-s * x^2) for s in {1, 1/2}, with x^2 split exactly: exp(-(hi+lo)s). */
static double exp_neg_sq(double x, double s)
{
    double hi = x * x;
    double lo = fma(x, x, -hi);
    return exp(-hi * s) * (1.0 - lo * s);
}

double dp_erfcx(double x)
{
    if (isnan(x))
        return x;
    if (x >= 25.0) {
        if (x > 1e150) /* 1/(sqrt(pi) x) is exact to an ulp; avoid x*x overflow */
            return INV_SQRT_PI / x;
        double r = 1.0 / (2.0 * x * x);
        double term = 1.0, sum = 1.0;
        for (int k = 1; k <= 12; k++) {
            term *= -(2.0 * k - 1.0) * r;
            sum += term;
        }
        return INV_SQRT_PI / x * sum;
    }
    if (x == 0.0)
        return 1.0; /* exactly, as the series gives it: Phi^{-1}(1/2) = 0 rests on it */
    if (x > 0.0) {
        int j = (int)(x * 4.0);
        const double *c = ERFCX_TABLE[j];
        /* Estrin's scheme: three levels of independent products in place of ten in a row */
        double u = (x - (j * 0.25 + 0.125)) * 8.0, u2 = u * u, u4 = u2 * u2;
        double q0 = (c[0] + c[1] * u) + (c[2] + c[3] * u) * u2;
        double q1 = (c[4] + c[5] * u) + (c[6] + c[7] * u) * u2;
        double q2 = (c[8] + c[9] * u) + c[10] * u2;
        return q0 + (q1 + q2 * u4) * u4;
    }
    if (x < -26.7)
        return HUGE_VAL;
    double hi = x * x;
    double lo = fma(x, x, -hi);
    return exp(hi) * (1.0 + lo) * erfc(x);
}

double dp_npdf(double x)
{
    if (fabs(x) > 64.0) /* exp(-2048) underflows; also keeps x*x finite */
        return isnan(x) ? x : 0.0;
    return exp_neg_sq(x, 0.5) / SQRT_2PI;
}

double dp_log_npdf(double x)
{
    return -0.5 * x * x - LN_SQRT_2PI;
}

double dp_mills(double x)
{
    return SQRT_PI_2 * dp_erfcx(x * SQRT1_2);
}

double dp_Q(double x)
{
    if (isnan(x))
        return x;
    if (x >= 0.0)
        return x > 37.0 ? exp(dp_log_Q(x)) : dp_npdf(x) * dp_mills(x);
    if (x < -40.0)
        return 1.0;
    return 1.0 - dp_npdf(-x) * dp_mills(-x);
}

double dp_Q_pdf(double x, double phi)
{
    if (isnan(x))
        return x;
    if (x >= 0.0)
        return phi * dp_mills(x);
    if (x < -40.0)
        return 1.0;
    return 1.0 - phi * dp_mills(-x);
}

double dp_Phi(double x)
{
    return dp_Q(-x);
}

double dp_log_Q(double x)
{
    if (x < 0.0)
        return log1p(-dp_Q(-x));
    return dp_log_npdf(x) + log(dp_mills(x));
}

double dp_Phi_inv(double p)
{
    if (isnan(p) || p < 0.0 || p > 1.0)
        return NAN;
    if (p == 0.0)
        return -HUGE_VAL;
    if (p == 1.0)
        return HUGE_VAL;
    if (p > 0.5)
        return -dp_Q_inv(p); /* Phi(-x) = Q(x) = p, so Phi^{-1}(p) = -Q^{-1}(p) */
    double x = gsl_cdf_ugaussian_Pinv(p);
    /* One Newton step on ln Phi(x) = ln p: robust in the far tail. */
    double lp = dp_log_Q(-x);
    double m = dp_mills(-x); /* Phi(x)/phi(x) */
    x -= (lp - log(p)) * m;
    return x;
}

double dp_Q_inv(double q)
{
    if (isnan(q) || q < 0.0 || q > 1.0)
        return NAN;
    if (q == 0.0)
        return HUGE_VAL;
    if (q == 1.0)
        return -HUGE_VAL;
    if (q > 0.5) {
        /* x < 0: Q is not small there, so one Newton step on Q itself suffices. */
        double x = gsl_cdf_ugaussian_Qinv(q);
        double qx = dp_Q(x);
        x += (qx - q) / dp_npdf(x);
        return x;
    }
    double x = gsl_cdf_ugaussian_Qinv(q);
    double lq = dp_log_Q(x);
    double m = dp_mills(x); /* Q(x)/phi(x) */
    x += (lq - log(q)) * m;
    return x;
}

double dp_round_up(double x, double rel)
{
    if (!(x > 0.0) || isinf(x))
        return x;
    return nextafter(x * (1.0 + rel), HUGE_VAL);
}

double dp_round_down(double x, double rel)
{
    if (!(x > 0.0) || isinf(x))
        return x;
    return nextafter(x * (1.0 - rel), 0.0);
}

/* g(s) = -m'(s) = 1 - s m(s) > 0, without the cancellation of that form for large s:
 * there the asymptotic series g(s) = sum_{k>=1} (-1)^{k+1} (2k-1)!! / s^{2k} is used. */
static double mills_neg_deriv(double s)
{
    if (s >= 25.0) {
        double r = 1.0 / (s * s), term = r, sum = r;
        for (int k = 2; k <= 14; k++) {
            term *= -(2.0 * k - 1.0) * r;
            sum += term;
        }
        return sum;
    }
    return 1.0 - s * dp_mills(s);
}

/* m(x) - m(x + h) for x >= 0, h > 0, and a bound on its relative error. When the direct
 * difference cancels badly, integrate g = -m' over [x, x + h] by 8-point Gauss-Legendre;
 * the interval is then tiny against g's scale (max(1, x)), so the rule is exact to
 * rounding. */
static double mills_diff(double x, double h, double *relerr)
{
    double ma = dp_mills(x), mb = dp_mills(x + h);
    double direct = ma - mb;
    double cond = direct > 0.0 ? (ma + mb) / direct : HUGE_VAL;
    if (cond < 1e3) {
        *relerr = 8.0 * DBL_EPSILON * cond;
        return direct;
    }
    static const double node[4] = {0.183434642495649804939, 0.525532409916328985818,
                                   0.796666477413626739592, 0.960289856497536231684};
    static const double weight[4] = {0.362683783378361982965, 0.313706645877887287338,
                                     0.222381034453374470544, 0.101228536290376259153};
    double c = x + 0.5 * h, r = 0.5 * h, sum = 0.0;
    for (int i = 0; i < 4; i++)
        sum += weight[i] * (mills_neg_deriv(c - r * node[i]) + mills_neg_deriv(c + r * node[i]));
    double s_hi = x + h < 25.0 ? x + h : 25.0;
    *relerr = 16.0 * DBL_EPSILON * (1.0 + s_hi * s_hi);
    return r * sum;
}

dpb_status dp_gdp_delta(double mu, double eps, double *delta, double *ln_delta)
{
    if (!isfinite(mu) || !(mu > 0.0) || !isfinite(eps) || !(eps >= 0.0))
        return DPB_EINVAL;
    double a = -eps / mu + mu / 2.0;
    double b = a - mu; /* b <= -mu/2 < 0 since eps >= 0 */
    /* a and b carry the rounding of eps/mu and of the sums; phi(a) and m(.) amplify an
     * absolute error da by about |a| da. Count it in the error bound. */
    double da = 4.0 * DBL_EPSILON * (eps / mu + mu);
    double input_err = 2.0 * (fabs(a) + fabs(b) + 1.0) * da;
    if (a < -1e150) {
        /* phi(a) is 0 to far below the smallest double and ln phi(a) is -inf in double */
        if (delta)
            *delta = 0.0;
        if (ln_delta)
            *ln_delta = -HUGE_VAL;
        return DPB_OK;
    }
    if (!(input_err < 1.0))
        input_err = 1.0;
    double d, ld, relerr;
    if (a <= 0.0) {
        double diff = mills_diff(-a, mu, &relerr);
        relerr += input_err + 4.0 * DBL_EPSILON;
        ld = dp_log_npdf(a) + log(diff) + log1p(relerr);
        d = dp_npdf(a) * diff;
    } else {
        /* 0 < a <= mu/2 (eps <= mu^2/2): delta = [Phi(a) - Phi(b)] - (e^eps - 1) Phi(b),
         * where Phi(a) - Phi(b) = (erf(a/sqrt2) + erf(-b/sqrt2))/2 has no cancellation and
         * the second part is at most a fraction of the first (delta >= 0.39 mu here). */
        double p = 0.5 * (erf(a * SQRT1_2) + erf(-b * SQRT1_2));
        double e = expm1(eps) * dp_Phi(b);
        d = p - e;
        if (d < 0.0)
            d = 0.0;
        relerr = (8.0 * DBL_EPSILON * (p + e) + 0.5 * da) / (d > 1e-300 ? d : 1e-300);
        ld = log(d) + log1p(relerr);
    }
    d = dp_round_up(d, relerr);
    if (d > 1.0)
        d = 1.0;
    if (ld > 0.0)
        ld = 0.0;
    if (delta)
        *delta = d;
    if (ln_delta)
        *ln_delta = ld;
    return DPB_OK;
}

/* delta_mu(eps) <= target, compared on delta itself while it is a normal number (the
 * same value dp_gdp_delta reports) and on ln delta below that. */
static int gdp_meets(double mu, double eps, double target)
{
    double d, ld;
    dp_gdp_delta(mu, eps, &d, &ld);
    return target >= 1e-290 ? d <= target : ld <= log(target);
}

dpb_status dp_gdp_epsilon(double mu, double delta, double *eps)
{
    if (!isfinite(mu) || !(mu > 0.0) || !(delta > 0.0) || !(delta < 1.0))
        return DPB_EINVAL;
    if (gdp_meets(mu, 0.0, delta)) {
        *eps = 0.0;
        return DPB_OK;
    }
    /* delta(eps) is decreasing; bracket in eps, then bisect. */
    double lo = 0.0, hi = mu * mu / 2.0 + mu + 1.0;
    for (int i = 0; i < 200; i++) {
        if (gdp_meets(mu, hi, delta))
            break;
        lo = hi;
        hi *= 2.0;
        if (!isfinite(hi))
            return DPB_ENUMERIC;
    }
    for (int i = 0; i < 200 && hi - lo > 4.0 * DBL_EPSILON * hi; i++) {
        double mid = 0.5 * (lo + hi);
        if (gdp_meets(mu, mid, delta))
            hi = mid;
        else
            lo = mid;
    }
    *eps = hi; /* feasible end */
    return DPB_OK;
}
