#!/usr/bin/env python3
"""Realizable lower bounds for the soundness audit of the sampled events (docs/MATH.md
section 6.1): exact hockey-stick divergences of neighbouring datasets the mechanisms can
really meet, so every certified delta(eps) must be at least these.

Each pair is a pair of finite Gaussian mixtures (unit variance after dividing the means by
sigma). The lower bound is P(S) - e^eps Q(S) for S the union of the intervals where the
density of P exceeds e^eps times that of Q, found by a sign scan and bisection, with P(S)
and Q(S) from normal cdfs in mpmath: for ANY set S this is at most the true
H_{e^eps}(P || Q), so a missed crossing only lowers the reference. Both orders are taken.

Truncated Poisson sampling (n records, rate q, batch cap B; N ~ Binomial(n - 1, q) others
sampled): the others' gradients -C, the record +C, its neighbour -C (replace_one), absent
(add_or_remove_one) or the zero record (replace_special), which also takes a batch slot.
With N + 1 > B the kept batch is a uniform B-subset: the record's batch sum is
C - (B - 1)C, the batch without it -BC.

Poisson sampling under replace_one (others 0, the record +C against -C, or against
absent inside the triangle's pairs), fixed-size batches without replacement ((1 - m/n)
N(0) + (m/n) N(2) against N(0): the others -C, the record +C against -C) and with
replacement (sum_k Binomial(m, 1/n)(k) N(2k) against N(0)) make the randomized sweep of
make test-slow (--sweep: a fixed seed, 4 eps per case).

Run (from the repository root; /usr/bin/python3 with mpmath; about a minute, --sweep a
few minutes):
    /usr/bin/python3 tests/ref/gen_ref_audit.py > tests/unit/ref_audit.h
    /usr/bin/python3 tests/ref/gen_ref_audit.py --sweep > tests/slow/ref_audit_sweep.h
"""
import random
import sys
import math

import mpmath as mp

mp.mp.dps = 30
def pdf(mix, x):
    return mp.fsum(w*mp.npdf(x, m, 1) for w, m in mix)


def cdf(mix, a, b):
    """mass of [a, b]; each component from the tail it lies in (no 1 - (1 - tiny))"""
    def one(m):
        if a - m > 0:
            return mp.ncdf(-(a - m)) - mp.ncdf(-(b - m))
        return mp.ncdf(b - m) - mp.ncdf(a - m)
    return mp.fsum(w * one(m) for w, m in mix)


def hs(P, Q, eps):
    """certain lower bound of H_{e^eps}(P||Q): P(S)-e^eps Q(S) for S = the positive region found"""
    E = mp.e**mp.mpf(eps)
    ms = [m for _, m in P+Q]
    lo, hi = min(ms)-40, max(ms)+40
    f = lambda x: pdf(P, x) - E*pdf(Q, x)
    # log-ratio sign on a grid
    g = lambda x: mp.log(pdf(P, x)) - mp.log(E*pdf(Q, x))
    N = 600
    xs = [lo + (hi-lo)*i/N for i in range(N+1)]
    sg = [g(x) > 0 for x in xs]
    pts = []
    for i in range(N):
        if sg[i] != sg[i+1]:
            a, b = xs[i], xs[i+1]
            for _ in range(80):
                c = (a+b)/2
                if (g(c) > 0) == sg[i]: a = c
                else: b = c
            pts.append((a+b)/2)
    bnd = [mp.mpf('-inf')] + pts + [mp.mpf('inf')]
    s = mp.mpf(0)
    for i in range(len(bnd)-1):
        a, b = bnd[i], bnd[i+1]
        if mp.isinf(a) and mp.isinf(b): mid = 0
        elif mp.isinf(a): mid = b-1
        elif mp.isinf(b): mid = a+1
        else: mid = (a+b)/2
        if g(mid) > 0:
            s += cdf(P, a, b) - E*cdf(Q, a, b)
    return max(s, mp.mpf(0))


def both(P, Q, eps):
    return max(hs(P, Q, eps), hs(Q, P, eps))


def binpmf(n, q, k):
    return mp.binomial(n, k) * q**k * (1 - q)**(n - k)


def truncated_pairs(n, q, B, sigma, rel):
    """(P, Q) mixtures [(weight, mean)] of the realizable neighbours described above."""
    q, sigma = mp.mpf(q), mp.mpf(sigma)
    outs = {'add_or_remove_one': [(-1, 1, None)], 'replace_special': [(-1, 1, 0)],
            'replace_one': [(-1, 1, -1), (0, 1, -1)]}[rel]
    res = []
    for ov, xv, xpv in outs:
        P, Q = [], []
        for N in range(0, n):
            pN = binpmf(n - 1, q, N)
            for mix, v in ((P, xv), (Q, xpv)):
                if v is None:
                    mix.append((pN, ov * min(N, B)))
                    continue
                mix.append((pN * (1 - q), ov * min(N, B)))
                if N + 1 <= B:
                    mix.append((pN * q, v + ov * N))
                else:
                    k = mp.mpf(B) / (N + 1)
                    mix.append((pN * q * k, v + ov * (B - 1)))
                    mix.append((pN * q * (1 - k), ov * B))
        res.append(([(w, m / sigma) for w, m in P], [(w, m / sigma) for w, m in Q]))
    return res


def sampled_pairs(kind, n, m, q, sigma):
    q, sigma = mp.mpf(q), mp.mpf(sigma)
    if kind == 0:  # Poisson, replace_one
        out = [([(1 - q, 0), (q, -1)], [(1 - q, 0), (q, 1)]), ([(1 - q, 0), (q, 1)], [(1, 0)])]
    elif kind == 1:  # without replacement
        g = mp.mpf(m) / n
        out = [([(1 - g, 0), (g, 2)], [(1, 0)])]
    else:  # with replacement
        p = mp.mpf(1) / n
        out = [([(binpmf(m, p, k), 2 * k) for k in range(m + 1)], [(1, 0)])]
    return [([(w, x / sigma) for w, x in P], [(w, x / sigma) for w, x in Q]) for P, Q in out]


def lower(d):
    """d printed rounded down (still a lower bound)"""
    return mp.nstr(mp.mpf(mp.nstr(d * (1 - mp.mpf('1e-15')), 17, strip_zeros=False)), 17)


def sweep():
    rng = random.Random(16)
    rels = ['add_or_remove_one', 'replace_one', 'replace_special']
    print('/* generated by tests/ref/gen_ref_audit.py --sweep: realizable (lower-bound)')
    print(' * delta(eps) of one step of the sampled events; do not edit */')
    print('struct ref_audit_sweep {')
    print('    int kind; /* 0 Poisson (replace_one), 1 without, 2 with replacement, 3 truncated */')
    print('    int rel;')
    print('    unsigned long long n, m_or_b;')
    print('    double q, sigma, eps, delta;')
    print('};')
    print('static const struct ref_audit_sweep REF_AUDIT_SWEEP[] = {')
    for it in range(64):
        kind = it % 4
        s = mp.nstr(mp.exp(rng.uniform(math.log(0.3), math.log(8))), 8)
        n = rng.choice([2, 3, 5, 8, 12])
        m = rng.randint(1, n)
        q = rng.choice(['0.01', '0.05', '0.1', '0.3', '0.7', '1.0' if kind == 3 else '0.5'])
        rel = rng.choice(rels) if kind == 3 else 'replace_one'
        ps = truncated_pairs(n, q, m, s, rel) if kind == 3 else sampled_pairs(kind, n, m, q, s)
        for e in ['0', mp.nstr(rng.uniform(0, 0.5), 6), mp.nstr(rng.uniform(0.5, 3), 6),
                  mp.nstr(rng.uniform(3, 8), 6)]:
            d = max(both(P, Q, mp.mpf(e)) for P, Q in ps)
            print('    {%d, %s, %dULL, %dULL, %s, %s, %s, %s},' % (kind, REL[rel], n, m, q, s, e,
                                                               lower(d)), flush=True)
    print('};')
    print('#define REF_AUDIT_SWEEP_COUNT (sizeof REF_AUDIT_SWEEP / sizeof REF_AUDIT_SWEEP[0])')


# (n, q, B, sigma, relation, eps): the first three were answered below the reference before
# the fix (the batch without the record shifted by 1 under replace_special)
CASES = [
    (10, '0.7', 1, '0.3292637119406922', 'replace_special', '0.2226935970274007'),
    (10, '0.7', 1, '0.3292637119406922', 'replace_special', '2.3038500808519564'),
    (10, '0.7', 1, '0.3292637119406922', 'replace_special', '4.143811106352263'),
    (6, '0.5', 2, '1.0', 'replace_special', '1.0'),
    (6, '0.5', 2, '1.0', 'add_or_remove_one', '1.0'),
    (6, '0.5', 2, '1.0', 'replace_one', '1.0'),
]
REL = {'add_or_remove_one': 'DP_REL_ADD_OR_REMOVE', 'replace_one': 'DP_REL_REPLACE',
       'replace_special': 'DP_REL_REPLACE_SPECIAL'}

def wbk_lower(q, sigma, alpha, imax=8):
    """WBK19 Theorem 9 (the terms dp_accounting sums, sigma relative to the replace-one
    sensitivity) with exact binomials and exact forward differences, its positive terms
    summed only up to i = imax: a lower bound of the theorem's value (the service's must be
    at least this). Used at huge orders, where lgamma's round-off in ln C(alpha, i) reaches
    4e-10 (alpha = 90861)."""
    q, sigma = mp.mpf(q), mp.mpf(sigma)
    c = 1 / (2 * sigma**2)
    e2 = 2 * c  # eps(2) = 1/sigma^2

    def fd(j):  # Delta^j of h(t) = e^{c t (t - 1)} at 0
        return mp.fsum((-1)**(j - i) * mp.binomial(j, i) * mp.e**(c * i * (i - 1))
                       for i in range(j + 1))
    a = 1 + q**2 * mp.binomial(alpha, 2) * min(4 * (mp.e**e2 - 1), 2 * mp.e**e2)
    for i in range(3, imax + 1):
        jl, jh = 2 * (i // 2), 2 * ((i + 1) // 2)
        s = min(2 * mp.e**((i - 1) * i * c), 4 * mp.sqrt(fd(jl) * fd(jh)))
        a += q**i * mp.binomial(alpha, i) * s
    return mp.log(a) / (alpha - 1)


if len(sys.argv) > 1 and sys.argv[1] == '--sweep':
    sweep()
    sys.exit(0)
print('/* generated by tests/ref/gen_ref_audit.py: realizable (lower-bound) delta(eps) of')
print(' * truncated Poisson sampling; do not edit */')
print('struct ref_audit_trunc {')
print('    unsigned long long n, B;')
print('    double q, sigma;')
print('    int rel;')
print('    double eps, delta;')
print('};')
print('static const struct ref_audit_trunc REF_AUDIT_TRUNC[] = {')
for n, q, B, s, rel, e in CASES:
    d = max(both(P, Q, mp.mpf(e)) for P, Q in truncated_pairs(n, q, B, s, rel))
    # printed rounded down: still a lower bound
    dd = mp.mpf(mp.nstr(d * (1 - mp.mpf('1e-15')), 17, strip_zeros=False))
    print('    {%dULL, %dULL, %s, %s, %s, %s, %s},' % (n, B, q, s, REL[rel], e, mp.nstr(dd, 17)))
print('};')
print('#define REF_AUDIT_TRUNC_COUNT (sizeof REF_AUDIT_TRUNC / sizeof REF_AUDIT_TRUNC[0])')
print('/* WBK19 at orders where lgamma rounds ln C(alpha, 2) down (lower bounds) */')
print('struct ref_audit_wbk {')
print('    double q, sigma, alpha, rdp;')
print('};')
print('static const struct ref_audit_wbk REF_AUDIT_WBK[] = {')
for q, sg, al in [('1e-9', '200.0', 90861), ('1e-8', '100.0', 97230), ('1e-7', '300.0', 99854)]:
    print('    {%s, %s, %d, %s},' % (q, sg, al, lower(wbk_lower(q, sg, al))))
print('};')
print('#define REF_AUDIT_WBK_COUNT (sizeof REF_AUDIT_WBK / sizeof REF_AUDIT_WBK[0])')
