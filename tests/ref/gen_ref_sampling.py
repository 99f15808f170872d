#!/usr/bin/env python3
"""Independent high-precision reference values for the sampled events of dpbudget
(docs/MATH.md section 6.1): fixed-size sampling with and without replacement, truncated
Poisson sampling, and Poisson sampling under replace-one.

Computed with mpmath (50 digits, never with floats):

  A. Wang, Balle, Kasiviswanathan 2019 (Theorem 9 with the Gaussian's CGF, the terms of
     their Theorem 27, as dp_accounting's _compute_rdp_sample_wor_gaussian uses them) with
     the forward differences of exp(CGF) computed EXACTLY (alternating sums at 50+ digits),
     not bounded: the service bounds them from above, so its RDP must be >= these and close.
  B. Exact hockey-stick divergences delta(eps) of one step for neighbouring datasets that
     the mechanisms can really meet (the other records' gradients 0, the differing
     record's +e against -e, or against its absence), so the true worst case is at least
     this and every certified answer must be >= it:
       poisson_replace   (1-q) N(0) + q N(1)       vs (1-q) N(0) + q N(-1)
                         (others 0, the record +e against -e: dp_accounting's pair)
       wor               (1-g) N(0) + g N(2)       vs N(0), g = m/n (the others -e, the
                         record +e against -e: it replaces an other, a shift of 2)
       wr                sum_k b_k N(2k)           vs N(0), b = Binomial(m, 1/n) (the same
                         neighbours, drawn k times)
       truncated         (1-g) N(0) + g N(1)       vs N(0), g = q E[min(1, B/(N+1))],
                         N ~ Binomial(n-1, q) (others 0, the record +e against absent)
     (sigma scales every N(., 1) to N(., sigma^2)), the larger of both orders. The
     likelihood ratio of each pair is monotone in x, so delta = P(X > x*) - e^eps Q(X > x*)
     at the crossing x*. For wor and wr these are the service's bounds themselves (advanced
     joint convexity is an identity there), so its answers must also be close to them.
  D. Poisson sampling under replace-one, exactly (at grid points of the default PLD step
     1e-4 and between them): the pair above is a worst case (Lebeda,
     Regehr, Kamath, Steinke 2025, Proposition 13), so its delta is the exact value. Its
     loss is decreasing with the closed-form inverse x_e = s^2 (asinh(-a sinh(e/2)) - e/2),
     a = e^{1/(2 s^2)} (1 - q)/q (dp_accounting's _inverse_privacy_loss_replace, derived
     again here), delta = P(X < x_e) - e^e Q(X < x_e); checked against the bisection of B.
  C. Self-checks (assertions): Balle-Barthe-Gaboardi 2018 Theorem 2 (advanced joint
     convexity), the identity the service's bounds rest on, checked by quadrature on
     Gaussian mixtures.

Run (from the repository root; needs python3 + mpmath; a few seconds):
    python3 tests/ref/gen_ref_sampling.py > tests/unit/ref_sampling.h
"""
import sys
import mpmath as mp
from mpmath import mpf

mp.mp.dps = 50


def D(x):
    return mpf(float(x))


def fd(v):
    f = float(v)
    assert f == f and f not in (float('inf'), float('-inf')), v
    s = '%.17g' % f
    if not any(c in s for c in '.en'):
        s += '.0'
    return s


def Qn(x):
    return mp.erfc(x / mp.sqrt(2)) / 2


# ---- A. WBK19 with exact forward differences -------------------------------------------
def wbk_log_a(q, sigma, alpha):
    q, sigma = D(q), D(sigma)
    if alpha == 1:
        return mpf(0)
    c = 1 / (2 * sigma ** 2)

    def h(t):  # exp(CGF) shifted as in dp_accounting: e^{c t (t-1)}
        return mp.exp(c * t * (t - 1))

    def fdiff(j):
        with mp.workdps(60 + 3 * j):
            return mp.fsum((-1) ** (j - i) * mp.binomial(j, i) * h(i) for i in range(j + 1))

    f2 = 1 / sigma ** 2
    a = 1 + q ** 2 * mp.binomial(alpha, 2) * min(4 * (mp.exp(f2) - 1), 2 * mp.exp(f2))
    for i in range(3, alpha + 1):
        jl, jh = 2 * (i // 2), 2 * ((i + 1) // 2)
        dl, dh = fdiff(jl), fdiff(jh)
        assert dl > 0 and dh > 0
        t = min(4 * mp.sqrt(dl * dh), 2 * mp.exp((i - 1) * i * c))
        a += mp.binomial(alpha, i) * q ** i * t
    return mp.log(a)


def wbk_rdp(q, sigma, alpha):
    alpha = D(alpha)
    af = int(mp.floor(alpha))
    if alpha == af:
        return wbk_log_a(q, sigma, af) / (alpha - 1)
    t = alpha - af
    return ((1 - t) * wbk_log_a(q, sigma, af) + t * wbk_log_a(q, sigma, af + 1)) / (alpha - 1)


# ---- B. exact delta of realizable pairs -------------------------------------------------
def mix_tail(comps, x):
    """P(X > x) for a mixture [(w, mean)] of N(mean, 1)."""
    return mp.fsum(w * Qn(x - m) for w, m in comps)


def mix_pdf(comps, x):
    return mp.fsum(w * mp.npdf(x, m, 1) for w, m in comps)


def delta_pair(P, Q, eps):
    """delta(eps) = sup_S P(S) - e^eps Q(S) for mixtures with an increasing likelihood ratio
    (unit variance; the callers scale the means by 1/sigma)."""
    E = mp.exp(D(eps))

    def g(x):
        return mp.log(mix_pdf(P, x)) - mp.log(mix_pdf(Q, x)) - D(eps)
    lo, hi = mpf(-200), mpf(200)
    if g(mpf(-5)) > g(mpf(5)):  # a decreasing ratio: mirror both laws
        return delta_pair([(w, -m) for w, m in P], [(w, -m) for w, m in Q], eps)
    if g(hi) <= 0:
        return mpf(0)
    if g(lo) > 0:
        return mpf(1) - E  # never: the pairs here have bounded losses below
    for _ in range(400):
        mid = (lo + hi) / 2
        if g(mid) > 0:
            hi = mid
        else:
            lo = mid
    x = hi
    return max(mpf(0), mix_tail(P, x) - E * mix_tail(Q, x))


def pair_poisson_replace(q, sigma):
    q, s = D(q), D(sigma)
    return [(1 - q, 0), (q, 1 / s)], [(1 - q, 0), (q, -1 / s)]


def pair_wor(n, m, sigma):
    g, s = mpf(m) / n, D(sigma)
    return [(1 - g, 0), (g, 2 / s)], [(1, 0)]


def pair_wr(n, m, sigma):
    p, s = 1 / mpf(n), D(sigma)
    P = [(mp.binomial(m, k) * p ** k * (1 - p) ** (m - k), 2 * k / s) for k in range(0, m + 1)]
    P = [(w, mu) for w, mu in P if w > mpf(10) ** -60]
    return P, [(1, 0)]


def pair_truncated(n, q, B, sigma):
    q, s = D(q), D(sigma)
    g = mpf(0)
    for N in range(0, n):
        w = mp.binomial(n - 1, N) * q ** N * (1 - q) ** (n - 1 - N)
        g += w * min(mpf(1), mpf(B) / (N + 1))
    g *= q
    return [(1 - g, 0), (g, 1 / s)], [(1, 0)]


# ---- D. the replace-one pair in closed form -----------------------------------------------
def delta_replace_closed(q, sigma, eps):
    q, s, e = D(q), D(sigma), D(eps)
    a = mp.exp(1 / (2 * s * s)) * (1 - q) / q
    x = s * s * (mp.asinh(-mp.sinh(e / 2) * a) - e / 2)
    P = (1 - q) * mp.ncdf(x / s) + q * mp.ncdf((x + 1) / s)
    Q = (1 - q) * mp.ncdf(x / s) + q * mp.ncdf((x - 1) / s)
    return max(mpf(0), P - mp.exp(e) * Q)


# ---- C. advanced joint convexity, checked ------------------------------------------------
def hs(P, Q, alpha):
    """H_alpha(P || Q) for unit-variance mixtures, by quadrature of (p - alpha q)_+."""
    f = lambda x: max(mpf(0), mix_pdf(P, x) - alpha * mix_pdf(Q, x))
    return mp.quad(f, mp.linspace(-30, 30, 61))


def check_ajc():
    for (g, a, b, c, ap) in [(mpf('0.3'), 0, 1, -1, mpf('1.5')), (mpf('0.05'), 0, 2, 0.5, mpf(3)),
                             (mpf('0.7'), 0.2, -1, 1.5, mpf('1.1'))]:
        mu = [(1 - g, a), (g, b)]
        mu_p = [(1 - g, a), (g, c)]
        alpha = 1 + (ap - 1) / g
        beta = ap / alpha
        lhs = hs(mu, mu_p, ap)
        rhs = g * hs([(1, b)], [(1 - beta, a), (beta, c)], alpha)
        assert abs(lhs - rhs) < mpf(10) ** -20, (lhs, rhs)
    print('advanced joint convexity: identity holds on 3 mixtures', file=sys.stderr)


def main():
    check_ajc()
    out = []
    out.append('/* ref_sampling.h -- generated by tests/ref/gen_ref_sampling.py, do not edit.')
    out.append(' * Regenerate: python3 tests/ref/gen_ref_sampling.py > tests/unit/ref_sampling.h')
    out.append(' * A: Wang-Balle-Kasiviswanathan RDP of the Gaussian sampled without replacement')
    out.append(' *    (sigma relative to the replace-one sensitivity) with exact forward differences.')
    out.append(' * B: exact delta(eps) of one step for realizable neighbours: lower bounds on the')
    out.append(' *    true worst case (every certified answer is >= these).')
    out.append(' * D: exact delta(eps) of Poisson sampling of a Gaussian under replace-one (the')
    out.append(' *    worst-case pair, Lebeda et al. 2025 Prop. 13) in closed form. */')
    out.append('#ifndef DPBUDGET_REF_SAMPLING_H')
    out.append('#define DPBUDGET_REF_SAMPLING_H')
    out.append('')
    out.append('struct ref_wbk {\n    double q, sigma, alpha, rdp;\n};')
    out.append('struct ref_lower {\n    int kind; /* 0 poisson_replace, 1 wor, 2 wr, 3 truncated */')
    out.append('    double n, m_or_b, q, sigma, eps, delta;\n};')
    out.append('struct ref_replace {\n    double q, sigma, eps, delta;\n};')
    out.append('')
    rows = []
    for q, s in [(0.01, 0.55), (256 / 60000, 0.55), (0.1, 2.0), (0.001, 0.5)]:
        for a in [2, 3, 4.5, 8, 12, 20, 32]:
            v = wbk_rdp(q, s, a)
            rows.append('    {%s, %s, %s, %s},' % (fd(q), fd(s), fd(a), fd(v)))
    out.append('static const struct ref_wbk REF_WBK[] = {')
    out += rows
    out.append('};')
    out.append('#define REF_WBK_COUNT (sizeof REF_WBK / sizeof REF_WBK[0])')
    out.append('')
    rows = []
    for eps in [0.0, 0.1, 0.5, 1.0, 2.0]:
        for q, s in [(0.01, 1.0), (0.1, 0.8), (0.5, 2.0)]:
            P, Q = pair_poisson_replace(q, s)
            d = max(delta_pair(P, Q, eps), delta_pair(Q, P, eps))
            rows.append('    {0, 0, 0, %s, %s, %s, %s},' % (fd(q), fd(s), fd(eps), fd(d)))
        for n, m, s in [(60000, 256, 1.1), (100, 10, 0.7)]:
            P, Q = pair_wor(n, m, s)
            d = max(delta_pair(P, Q, eps), delta_pair(Q, P, eps))
            rows.append('    {1, %d, %d, 0, %s, %s, %s},' % (n, m, fd(s), fd(eps), fd(d)))
        for n, m, s in [(10000, 100, 2.0), (20, 20, 1.5)]:
            P, Q = pair_wr(n, m, s)
            d = max(delta_pair(P, Q, eps), delta_pair(Q, P, eps))
            rows.append('    {2, %d, %d, 0, %s, %s, %s},' % (n, m, fd(s), fd(eps), fd(d)))
        for n, q, B, s in [(300, 0.1, 25, 1.0), (4, 0.5, 2, 1.0)]:
            P, Q = pair_truncated(n, q, B, s)
            d = max(delta_pair(P, Q, eps), delta_pair(Q, P, eps))
            if d > 0:
                rows.append('    {3, %d, %d, %s, %s, %s, %s},' % (n, B, fd(q), fd(s), fd(eps), fd(d)))
    out.append('static const struct ref_lower REF_LOWER[] = {')
    lower_rows = rows
    rows = []
    for q in [0.001, 0.01, 0.1, 0.3, 0.6, 0.8, 0.99]:
        for s in [0.5, 1.0, 2.0, 5.0]:
            for eps in [0.0, 0.00015, 0.00333, 0.1234567, 0.25, 0.5, 1.0, 1.23456, 2.0, 4.0]:
                d = delta_replace_closed(q, s, eps)
                if q in (0.1, 0.8) and s in (0.5, 1.0):  # the closed form against B's bisection
                    P, Q = pair_poisson_replace(q, s)
                    b = delta_pair(P, Q, eps)
                    assert abs(b - d) <= mpf(10) ** -30 * (1 + d), (q, s, eps, b, d)
                if d < 1e-300:
                    continue
                rows.append('    {%s, %s, %s, %s},' % (fd(q), fd(s), fd(eps), fd(d)))
    replace_rows = rows
    rows = lower_rows
    out += rows
    out.append('};')
    out.append('#define REF_LOWER_COUNT (sizeof REF_LOWER / sizeof REF_LOWER[0])')
    out.append('')
    out.append('static const struct ref_replace REF_REPLACE[] = {')
    out += replace_rows
    out.append('};')
    out.append('#define REF_REPLACE_COUNT (sizeof REF_REPLACE / sizeof REF_REPLACE[0])')
    out.append('')
    out.append('#endif')
    print('\n'.join(out))


if __name__ == '__main__':
    main()
