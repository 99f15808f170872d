#!/usr/bin/env python3
"""Independent high-precision reference values for dpbudget's PNSGD (seed 000)
accountant and for the Kairouz-Oh-Viswanath optimal composition.

Computes with mpmath at 50 significant digits (never with floats):
  - theta_gamma(r) (eq. 1.3) and 1 - theta computed directly,
  - Theorem 1 (fixed index i), randomly stopped, and Theorem 2 (shuffled) deltas,
  - Theorem 3 (Laplace schedule) and Theorem 4 (Gaussian schedule): v(n), s(n),
    the finite delta(n) of (3.1) and the limits delta*,
  - the C1 that gives a target delta* in (4.2) / (4.4),
  - the online products (6.1) of Theorems 5 and 6, their exact limits (log-sum
    plus Euler-Maclaurin tail) and the integral bracket of (6.3) / (6.5),
  - KOV optimal composition delta'(eps').
See docs/MATH.md sections 1 and 3 for the formulas (docs/MATH.md is
authoritative where it corrects the paper).

Every input is first rounded to the nearest IEEE double and the reference value
is computed at exactly that double; intermediate schedule values (v(n), s(n),
v_j, s_j) are NOT rounded: delta is computed at the exact real schedule value
(the printed v / s are its nearest double). Every output is rounded to the
nearest double and printed with 17 significant digits. An output whose true
value is below 1e-330 (nearest double 0) is printed as 0.0; the script refuses
values that would fall in the subnormal range.

Run (from the repository root; needs only python3 + mpmath):
    python3 tests/ref/gen_ref_pnsgd.py > tests/unit/ref_pnsgd.h
It also runs self-checks (assertions) and prints a summary to stderr.
"""
import math
import sys
import time

import mpmath as mp
from mpmath import mpf

mp.mp.dps = 50
T_START = time.time()


def D(x):
    """The exact value of the double nearest to x, as an mpf."""
    return mpf(float(x)) if not isinstance(x, str) else mpf(float(mpf(x)))


def log(*a):
    print(*a, file=sys.stderr)


def close(a, b, rel):
    a, b = mpf(a), mpf(b)
    return abs(a - b) <= rel * max(abs(a), abs(b))


# --------------------------------------------------------------------------
# formatting
# --------------------------------------------------------------------------
ZERO_BELOW = mpf(10) ** -330


def fd(v):
    """mpf -> nearest double, printed with 17 significant digits."""
    v = mpf(v)
    if v != 0 and abs(v) < ZERO_BELOW:
        return '0.0'          # nearest double is 0 (true value noted in comments)
    f = float(v)
    assert f == f and f not in (float('inf'), float('-inf')), v
    assert v == 0 or abs(f) >= 2.2250738585072014e-308, ('value is subnormal', v)
    s = '%.17g' % f
    if not any(c in s for c in '.en'):
        s += '.0'
    return s


def fu(n):
    n = int(n)
    assert 0 <= n < 2 ** 64
    return '%dULL' % n


out = []


def emit(s=''):
    out.append(s)


def emit_array(ctype, name, comment, rows):
    emit('/* %s */' % comment)
    emit('static const struct %s %s[] = {' % (ctype, name))
    for r in rows:
        emit('    {' + ', '.join(r) + '},')
    emit('};')
    emit('#define %s_COUNT (sizeof %s / sizeof %s[0])' % (name, name, name))
    emit()


def ns(v, d=15):
    return mp.nstr(mpf(v), d)


# --------------------------------------------------------------------------
# special functions
# --------------------------------------------------------------------------
def Phi(x):
    return mp.erfc(-mpf(x) / mp.sqrt(2)) / 2


def Q(x):
    return mp.erfc(mpf(x) / mp.sqrt(2)) / 2


def theta(eps, r):
    """theta_{e^eps}(r) = Q(eps/r - r/2) - e^eps Q(eps/r + r/2)  (1.3), with enough
    guard digits for the cancellation (checked by recomputing with more)."""
    eps, r = mpf(eps), mpf(r)

    def at(dps):
        with mp.workdps(dps):
            return Q(eps / r - r / 2) - mp.exp(eps) * Q(eps / r + r / 2)
    v1 = at(mp.mp.dps + 40)
    v2 = at(mp.mp.dps + 80)
    assert close(v1, v2, mpf(10) ** -(mp.mp.dps + 5)) or v1 == v2, (eps, r, v1, v2)
    return +v2


def one_minus_theta(eps, r):
    """1 - theta_{e^eps}(r) = Phi(eps/r - r/2) + e^eps Q(eps/r + r/2): no cancellation."""
    eps, r = mpf(eps), mpf(r)
    return Phi(eps / r - r / 2) + mp.exp(eps) * Q(eps / r + r / 2)


def gdp_delta(mu, eps):
    """delta(eps) of mu-GDP (docs/MATH.md section 1), written independently of theta."""
    mu, eps = mpf(mu), mpf(eps)
    with mp.workdps(mp.mp.dps + 80):
        return +(Phi(-eps / mu + mu / 2) - mp.exp(eps) * Phi(-eps / mu - mu / 2))


def W0(x):
    w = mp.lambertw(mpf(x))
    assert w.imag == 0
    w = w.real
    assert close(w * mp.exp(w), x, mpf(10) ** -45)
    return w


def contraction(eta, beta, rho):
    if rho == 0:
        return mpf(1)
    q = 2 * eta * beta * rho / (beta + rho)
    assert q <= 1
    return mp.sqrt(1 - q)


# --------------------------------------------------------------------------
# Theorem 1 / 2 building blocks. Everything works with b = 1 - B.
# --------------------------------------------------------------------------
def gauss_Ab(L, eta, beta, rho, Dk, s, eps):
    c = contraction(eta, beta, rho)
    A = theta(eps, 2 * L / s)
    b = one_minus_theta(eps, c * Dk / (eta * s))
    return A, b


def laplace_Ab(L, eta, beta, rho, width, v, eps):
    c = contraction(eta, beta, rho)
    ea = eps / 2 - L / v
    A = -mp.expm1(ea) if ea < 0 else mpf(0)
    eb = eps / 2 - c * width / (2 * eta * v)
    b = mp.exp(eb) if eb < 0 else mpf(1)     # B = (1 - e^eb)_+  ->  b = min(1, e^eb)
    return A, b


def powB(b, m):
    """B^m with B = 1 - b (0^0 = 1)."""
    m = int(m)
    if m == 0:
        return mpf(1)
    if b >= 1:
        return mpf(0)
    return mp.exp(m * mp.log1p(-b))


def one_minus_powB(b, m):
    m = int(m)
    if m == 0:
        return mpf(0)
    if b >= 1:
        return mpf(1)
    return -mp.expm1(m * mp.log1p(-b))


def deltas(A, b, n, i):
    """fixed (Thm 1), randomly stopped, its i-free bound A/(n(1-B)), shuffled (3.1)."""
    n, i = int(n), int(i)
    assert 1 <= i <= n
    fixed = A * powB(b, n - i)
    stopped = A * one_minus_powB(b, n - i + 1) / (n * b)
    bound = A / (n * b)
    shuffled = A * one_minus_powB(b, n) / (n * b)
    # brute force check for small n: shuffled = (1/n) sum_{j=0}^{n-1} A B^j
    if n <= 1000:
        B = 1 - b
        assert close(shuffled, A * mp.fsum(B ** j for j in range(n)) / n, mpf(10) ** -40) or A == 0
        assert close(stopped, A * mp.fsum(B ** j for j in range(n - i + 1)) / n, mpf(10) ** -40) or A == 0
    return fixed, stopped, bound, shuffled


emit('/* ref_pnsgd.h -- generated by tests/ref/gen_ref_pnsgd.py, do not edit.')
emit(' * Regenerate: python3 tests/ref/gen_ref_pnsgd.py > tests/unit/ref_pnsgd.h')
emit(' * Independent mpmath (50 digits) reference values for the PNSGD accountant')
emit(' * (seed 000, docs/MATH.md section 3) and the KOV optimal composition (docs/MATH.md')
emit(' * section 1). Every input is the nearest double to the listed decimal and')
emit(' * values are computed at exactly that double; schedule values (v(n), s(n))')
emit(' * are used unrounded (the listed v / s are their nearest doubles); outputs')
emit(' * are the nearest doubles (17 significant digits). 0.0 means the true value')
emit(' * is below 1e-330 (nearest double 0). theta(eps, r) = theta_{e^eps}(r),')
emit(' * c = sqrt(1 - 2 eta beta rho/(beta + rho)). */')
emit('#ifndef DPBUDGET_REF_PNSGD_H')
emit('#define DPBUDGET_REF_PNSGD_H')
emit()
emit('struct ref_pnsgd_theta { double eps, r, theta, one_minus_theta; };')
emit('struct ref_pnsgd_delta { int gaussian; double L, eta, beta, rho, size /* D or b-a */, '
     'noise /* s or v */, eps;')
emit('    unsigned long long n, i; double fixed, stopped, stopped_bound, shuffled; };')
emit('struct ref_pnsgd_thm3 { unsigned long long n; double v, delta, delta_star, scaled_gap; };')
emit('struct ref_pnsgd_thm4 { double eta; unsigned long long n; double s, delta, delta_star; };')
emit('struct ref_pnsgd_inv_c1 { int gaussian; double eps, delta_star, C1; };')
emit('struct ref_pnsgd_online { int gaussian; unsigned long long n; double delta; };')
emit('struct ref_pnsgd_online_limit { int gaussian; double limit, paper_upper, integral_lower; };')
emit('struct ref_kov { double eps, delta; unsigned long long E; double eps_total, delta_total; };')
emit()

# ==========================================================================
# 1. theta
# ==========================================================================
rows = []
log('== 1. theta_{e^eps}(r)')
for es, rs in [('0', '0.5'), ('1', '0.5'), ('1', '2'), ('1', '20'), ('5', '1'), ('0.1', '1e-3'), ('2', '40')]:
    eps, r = D(es), D(rs)
    th = theta(eps, r)
    omt = one_minus_theta(eps, r)
    g = gdp_delta(r, eps)
    # theta == GDP delta of mu = r at eps (identical formula: Q(x) = Phi(-x))
    assert close(th, g, mpf(10) ** -45) or th == g, (es, rs, th, g)
    # 1 - theta computed directly agrees with 1 - theta
    with mp.workdps(mp.mp.dps + 200):
        assert close(omt, 1 - theta(eps, r), mpf(10) ** -45), (es, rs)
    rows.append([fd(eps), fd(r), fd(th), fd(omt)])
    log('theta(eps=%s, r=%s) = %s   1-theta = %s   (GDP delta agrees: rel diff %s)' % (
        es, rs, ns(th), ns(omt), ns(abs(th - g) / th if th else 0, 3)))
emit_array('ref_pnsgd_theta', 'REF_PNSGD_THETA',
           '1. theta_{e^eps}(r) = Q(eps/r - r/2) - e^eps Q(eps/r + r/2) (= GDP delta of mu = r at eps)\n'
           '   and one_minus_theta = Phi(eps/r - r/2) + e^eps Q(eps/r + r/2) computed directly.\n'
           '   (eps, r) = (0.1, 1e-3): theta = %s underflows (0.0)' % ns(theta(D('0.1'), D('1e-3')), 6), rows)

# ==========================================================================
# 2. fixed / randomly stopped / shuffled
# ==========================================================================
log('== 2. Theorem 1 / randomly stopped / Theorem 2')
rows = []


def add_delta_rows(gaussian, Ls, etas, betas, rhos, sizes, noises, epss, n_list):
    L, eta, beta, rho, size, noise, eps = (D(x) for x in (Ls, etas, betas, rhos, sizes, noises, epss))
    if gaussian:
        A, b = gauss_Ab(L, eta, beta, rho, size, noise, eps)
    else:
        A, b = laplace_Ab(L, eta, beta, rho, size, noise, eps)
    log('%s L=%s eta=%s beta=%s rho=%s size=%s noise=%s eps=%s: c=%s A=%s 1-B=%s' % (
        'gauss' if gaussian else 'laplace', Ls, etas, betas, rhos, sizes, noises, epss,
        ns(contraction(eta, beta, rho)), ns(A), ns(b)))
    for n in n_list:
        for i in sorted({1, n // 2, n}):
            fx, st, bd, sh = deltas(A, b, n, i)
            rows.append([str(gaussian), fd(L), fd(eta), fd(beta), fd(rho), fd(size), fd(noise), fd(eps),
                         fu(n), fu(i), fd(fx), fd(st), fd(bd), fd(sh)])
            log('   n=%d i=%d: fixed=%s stopped=%s bound=%s shuffled=%s  (n(1-B)=%s)' % (
                n, i, ns(fx, 12), ns(st, 12), ns(bd, 12), ns(sh, 12), ns(n * b, 6)))


N12 = 10 ** 12
# Gaussian, c = 1: r_A = 2L/s, r_B = D/(eta s). s = 0.7 puts 1-B ~ 1e-12, so n = 1e12 has n(1-B) ~ 1.
for s in ['0.7', '5', '50']:
    for e in ['0.5', '1']:
        add_delta_rows(1, '1', '0.1', '1', '0', '1', s, e, [100, N12])
# Laplace, c = 1: 1-B = e^{1/2 - 5/v}. v = 0.18 puts 1-B ~ 1.4e-12; v = 10 is the knife edge
# B = (1 - e^{+2.8e-17})_+ = 0 (0^0 = 1 at i = n); v = 100 also gives A = 0.
for v in ['0.18', '1', '10', '100']:
    add_delta_rows(0, '10', '0.1', '0.5', '0', '1', v, '1', [1000, N12])
# strongly convex: beta = 1, rho = 0.5, eta = 0.5 -> c = sqrt(2/3)
add_delta_rows(1, '1', '0.5', '1', '0.5', '1', '1', '1', [100, 10 ** 6])
add_delta_rows(0, '1', '0.5', '1', '0.5', '1', '0.2', '1', [100, 10 ** 6])
assert close(contraction(D('0.5'), D('1'), D('0.5')), mp.sqrt(mpf(2) / 3), mpf(10) ** -45)
emit_array('ref_pnsgd_delta', 'REF_PNSGD_DELTA',
           '2. Theorem 1 fixed index: A B^(n-i); randomly stopped: A (1 - B^(n-i+1))/(n (1-B)); its bound\n'
           '   A/(n(1-B)); Theorem 2 shuffled (3.1): A (1 - B^n)/(n (1-B)).\n'
           '   gaussian=1: A = theta(eps, 2L/s), B = theta(eps, c D/(eta s)), size = D, noise = s (std).\n'
           '   gaussian=0: A = (1 - e^(eps/2 - L/v))_+, B = (1 - e^(eps/2 - c (b-a)/(2 eta v)))_+, size = b-a,\n'
           '   noise = v (Laplace scale). s = 0.7 / v = 0.18 have 1-B ~ 1.5e-12 (n = 1e12 -> n(1-B) ~ 1);\n'
           '   v = 10: B = 0 (exactly: e^(1/2 - 1/(2*0.1*10)) = e^(+2.8e-17) >= 1; 0^0 = 1); v = 100: A = B = 0', rows)

# ==========================================================================
# 3. Theorem 3 (Laplace schedule)
# ==========================================================================
log('== 3. Theorem 3')
L, beta, rho, eta, eps, a_, b_ = D('10'), D('0.5'), D('0'), D('0.1'), D('1'), D('0'), D('1')
C1, C2 = D('1e5'), D('2')
c = contraction(eta, beta, rho)
K = C1 * mp.exp(eps / 2)
dstar3 = -mp.expm1(-K) / K
assert close(dstar3, mpf('6.065306597e-6'), mpf('1e-9')), dstar3
p_exp = 2 * L * eta / (c * (b_ - a_))       # A = 1 - e^{eps/2} x^{-p}, x = n/C1 + C2
# n (delta(n) - delta*) -> C2 e^{-eps/2} (1 - e^{-K}) - e^{-K} (C1 C2 - K/2)   (needs p > 1)
gap_lim = C2 * mp.exp(-eps / 2) * (-mp.expm1(-K)) - mp.exp(-K) * (C1 * C2 - K / 2)
assert p_exp > 1


def thm3(n):
    x = n / C1 + C2
    v = c * (b_ - a_) / (2 * eta * mp.log(x))
    A, b = laplace_Ab(L, eta, beta, rho, b_ - a_, v, eps)
    assert close(b, K / (n + C1 * C2), mpf(10) ** -45)            # 1 - B = C1 e^{eps/2}/(n + C1 C2)
    assert close(A, -mp.expm1(eps / 2 - p_exp * mp.log(x)), mpf(10) ** -45)
    d = A * one_minus_powB(b, n) / (n * b)
    return v, d


rows = []
for n in [10 ** 6, 10 ** 7, 10 ** 8, 10 ** 9, 10 ** 10, 10 ** 12]:
    v, d = thm3(n)
    gap = n * (d - dstar3)
    rows.append([fu(n), fd(v), fd(d), fd(dstar3), fd(gap)])
    log('n=%.0e v=%s delta=%s n(delta-delta*)=%s' % (n, ns(v), ns(d, 20), ns(gap, 15)))
for n in [10 ** 15, 10 ** 20]:
    v, d = thm3(n)
    log('   (beyond table) n=%.0e n(delta-delta*)=%s' % (n, ns(n * (d - dstar3), 15)))
    assert close(n * (d - dstar3), gap_lim, 10 * mpf(n) ** -1 * 1e6)
log('delta* = %s (docs/MATH.md 6.065306597e-6); limit n(delta-delta*) = C2 e^{-eps/2} = %s (docs/MATH.md 1.21306)' % (
    ns(dstar3, 20), ns(gap_lim, 20)))
assert close(gap_lim, mpf('1.21306'), mpf('1e-5'))
emit_array('ref_pnsgd_thm3', 'REF_PNSGD_THM3',
           '3. Theorem 3: L=10, beta=0.5, rho=0, eta=0.1, eps=1, (a,b)=(0,1), C1=1e5, C2=2.\n'
           '   v = c (b-a)/(2 eta ln(n/C1 + C2)); delta = (3.1) at v (1 - B = C1 e^(eps/2)/(n + C1 C2) exactly);\n'
           '   delta_star = (1 - exp(-C1 e^(eps/2)))/(C1 e^(eps/2)); scaled_gap = n (delta - delta_star)\n'
           '   -> C2 e^(-eps/2) (1 - e^-K) - e^-K (C1 C2 - K/2), K = C1 e^(eps/2): = 2 e^(-1/2) = %s here\n'
           '   (valid when 2 L eta/(c (b-a)) > 1)' % ns(gap_lim, 17), rows)

# ==========================================================================
# 4. Theorem 4 (Gaussian schedule)
# ==========================================================================
log('== 4. Theorem 4')
C1, C2, Dk, L, beta, rho, eps = D('1e5'), D('100'), D('1'), D('10'), D('0.5'), D('0'), D('1')
K = C1 * mp.exp(eps / 2)
dstar4 = -mp.expm1(-2 * K) / (2 * K)
assert close(dstar4, mpf('3.032653299e-6'), mpf('1e-9')), dstar4
log('delta* = %s (docs/MATH.md 3.032653299e-6)' % ns(dstar4, 20))
rows = []
directions = {}
for es in ['0.1', '0.01']:
    eta = D(es)
    c = contraction(eta, beta, rho)
    signs = []
    for n in [10 ** 6, 10 ** 8, 10 ** 10, 10 ** 12, 10 ** 15]:
        W = W0(mpf(n) ** 2 / (2 * mp.pi * C1 ** 2) + C2)
        s = c * Dk / (2 * eta * mp.sqrt(W))
        A, b = gauss_Ab(L, eta, beta, rho, Dk, s, eps)
        assert close(b, one_minus_theta(eps, 2 * mp.sqrt(W)), mpf(10) ** -40)
        d = A * one_minus_powB(b, n) / (n * b)
        signs.append(d > dstar4)
        rows.append([fd(eta), fu(n), fd(s), fd(d), fd(dstar4)])
        log('eta=%s n=%.0e W=%s s=%s A=%s n(1-B)/(2C1e^{eps/2})=%s delta=%s delta-delta*=%s' % (
            es, n, ns(W, 8), ns(s), ns(A, 10), ns(n * b / (2 * K), 10), ns(d), ns(d - dstar4, 6)))
    directions[es] = 'above' if all(signs) else ('below' if not any(signs) else 'mixed')
    log('eta=%s: delta(n) approaches delta* from %s' % (es, directions[es]))
emit_array('ref_pnsgd_thm4', 'REF_PNSGD_THM4',
           '4. Theorem 4: C1=1e5, C2=100, D=1, L=10, beta=0.5, rho=0, eps=1.\n'
           '   s = c D/(2 eta sqrt(W0(n^2/(2 pi C1^2) + C2))); delta = (3.1) at s;\n'
           '   delta_star = (1 - exp(-2 C1 e^(eps/2)))/(2 C1 e^(eps/2)).\n'
           '   eta = 0.1: delta > delta_star (from %s); eta = 0.01: delta < delta_star (from %s),\n   very slowly: A = theta(eps, 0.4 sqrt(W)) -> 1 only like e^(-W/50)/sqrt(W), W ~ 2 ln n'
           % (directions['0.1'], directions['0.01']), rows)
assert directions['0.1'] == 'above' and directions['0.01'] == 'below'

# ==========================================================================
# 5. inverse schedules: C1 for a target delta*
# ==========================================================================
log('== 5. C1 for a target delta*')


def R_of(delta):
    """Positive root K of (1 - e^{-K})/K = delta (0 < delta < 1): K = 1/delta + W0(-e^{-1/delta}/delta)."""
    delta = mpf(delta)
    with mp.workdps(mp.mp.dps + 30):
        z = -mp.exp(-1 / delta) / delta
        w = mp.lambertw(z)
        assert abs(w.imag) == 0
        Kr = 1 / delta + w.real
        assert close(-mp.expm1(-Kr) / Kr, delta, mpf(10) ** -70)
        # independent check by bisection on the decreasing function
        lo, hi = mpf(0), 2 / delta + 10
        for _ in range(400):
            mid = (lo + hi) / 2
            if -mp.expm1(-mid) / mid > delta:
                lo = mid
            else:
                hi = mid
        assert close(lo, Kr, mpf(10) ** -60)
        return +Kr


rows = []
for g in [0, 1]:
    for ds in ['1e-3', '1e-6', '0.1', '0.5']:
        eps, dt = D('1'), D(ds)
        R = R_of(dt)
        C1v = R / mp.exp(eps / 2) / (2 if g else 1)
        Kc = C1v * mp.exp(eps / 2) * (2 if g else 1)
        assert close(-mp.expm1(-Kc) / Kc, dt, mpf(10) ** -45)
        rows.append([str(g), fd(eps), fd(dt), fd(C1v)])
        log('%s eps=1 delta*=%s: C1=%s' % ('gauss (4.4)' if g else 'laplace (4.2)', ds, ns(C1v, 20)))
emit_array('ref_pnsgd_inv_c1', 'REF_PNSGD_INV_C1',
           '5. C1 with delta_star(C1) = target: Laplace (4.2) C1 = R/e^(eps/2), Gaussian (4.4) C1 = R/(2 e^(eps/2)),\n'
           '   R = positive root of (1 - e^-R)/R = delta_star = 1/delta_star + W0(-e^(-1/delta_star)/delta_star)', rows)

# ==========================================================================
# 6. online products (Theorems 5 and 6)
# ==========================================================================
log('== 6. online (Theorems 5 / 6)')
L, beta, rho, eps, eta, alpha = D('10'), D('0.5'), D('0'), D('1'), D('0.01'), D('1.5')
a_, b_, Dk = D('0'), D('1'), D('1')
I_IDX, C1, C2 = 100, D('100'), D('100')
c = contraction(eta, beta, rho)
K_lap = C1 * mp.exp(eps / 2)


def v_j(j):
    return c * (b_ - a_) / (2 * eta * mp.log(mpf(j) ** alpha / C1 + C2))


def Wg(t):
    return W0(mpf(t) ** (2 * alpha) / (2 * mp.pi * C1 ** 2) + C2)


def s_j(j):
    return c * Dk / (2 * eta * mp.sqrt(Wg(j)))


def f_lap(t):
    """log B_t (Laplace); B_t = 1 - C1 e^{eps/2}/(t^alpha + C1 C2)."""
    return mp.log1p(-K_lap / (mpf(t) ** alpha + C1 * C2))


def f_gauss(t):
    """log B_t (Gaussian); B_t = theta(eps, 2 sqrt(W0(t^{2 alpha}/(2 pi C1^2) + C2)))."""
    return mp.log1p(-one_minus_theta(eps, 2 * mp.sqrt(Wg(t))))


# identities: B_t from the noise v_t / s_t equals the closed forms
for t in [101, 150, 1000, 12345, 10 ** 6, 10 ** 9]:
    A_, b_t = laplace_Ab(L, eta, beta, rho, b_ - a_, v_j(t), eps)
    assert close(b_t, K_lap / (mpf(t) ** alpha + C1 * C2), mpf(10) ** -45), t
    A_, b_t = gauss_Ab(L, eta, beta, rho, Dk, s_j(t), eps)
    assert close(mp.log1p(-b_t), f_gauss(t), mpf(10) ** -40), t
A_lap = laplace_Ab(L, eta, beta, rho, b_ - a_, v_j(I_IDX), eps)[0]
A_gau = gauss_Ab(L, eta, beta, rho, Dk, s_j(I_IDX), eps)[0]
assert close(A_gau, theta(eps, 2 * L / s_j(I_IDX)), mpf(10) ** -45)


def tail_integral(f, a):
    """int_a^inf f(x) dx with x = a/u^2 (f ~ x^-alpha makes the integrand smooth in u)."""
    a = mpf(a)
    return mp.quad(lambda u: f(a / u ** 2) * 2 * a / u ** 3, [0, mpf(1) / 64, mpf(1) / 8, mpf(1) / 2, 1])


def tail_integral_check(f, a):
    """Same integral by plain quadrature over [a, 1e16 a] plus the substituted form beyond
    (mp.quad's own [X, inf] map is inaccurate, ~1e-19 relative, for x^-1.5 decay)."""
    a = mpf(a)
    pts = [a * mpf(10) ** k for k in range(0, 17)]
    return mp.quad(f, pts) + tail_integral(f, pts[-1])


# the substituted far tail against the asymptotic series of the Laplace integrand
_X = mpf(10) ** 20
_Kl = mpf(100) * mp.exp(mpf(1) / 2)
assert close(tail_integral(lambda x: mp.log1p(-_Kl / (x ** mpf(1.5) + 10000)), _X),
             -2 * _Kl / mp.sqrt(_X) + (_Kl * 10000 - _Kl ** 2 / 2) / (2 * _X ** 2), mpf(10) ** -40)


def em_tail(f, a, m=5):
    """sum_{t=a}^inf f(t) by Euler-Maclaurin: int_a^inf f + f(a)/2 - sum_k B_2k/(2k)! f^(2k-1)(a)."""
    s = tail_integral(f, a) + f(a) / 2
    for k in range(1, m + 1):
        s -= mp.bernoulli(2 * k) / mp.factorial(2 * k) * mp.diff(f, mpf(a), 2 * k - 1)
    return s


ONLINE_N = [10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6, 10 ** 7, 10 ** 8]
N0 = 20001
rows_online = []
rows_limit = []
summary = {}
for gaussian, f, A_i in [(0, f_lap, A_lap), (1, f_gauss, A_gau)]:
    name = 'gauss (Thm 6)' if gaussian else 'laplace (Thm 5)'
    t0 = time.time()
    S = mpf(0)
    snap = {}
    for t in range(I_IDX + 1, N0):
        S += f(t)
        if t in (1000, 2000, 5000, 10000):
            snap[t] = +S
    S_N0 = S                                  # sum_{t=i+1}^{N0-1}
    T_N0 = em_tail(f, N0)
    log_lim = S_N0 + T_N0
    # consistency of the Euler-Maclaurin tail: tail from 1001 / 2001 vs exact sum + tail from N0
    for a0 in (1001, 2001):
        t_a = em_tail(f, a0)
        assert close(t_a, S_N0 - snap[a0 - 1] + T_N0, mpf(10) ** -30), (name, a0, t_a)
    ti, tc = tail_integral(f, N0), tail_integral_check(f, N0)
    assert close(ti, tc, mpf(10) ** -35), (ti, tc)
    limit = A_i * mp.exp(log_lim)
    upper = A_i * mp.exp(tail_integral(f, I_IDX + 1))       # paper (6.3) / (6.5)
    lower = A_i * mp.exp(tail_integral(f, I_IDX))           # integral from i
    assert lower < limit < upper
    rows_online.append([str(gaussian), fu(I_IDX), fd(A_i)])
    log('%s: A_i = %s' % (name, ns(A_i, 20)))
    rates = []
    for n in ONLINE_N:
        if n < N0:
            logp = snap[n]
        else:
            logp = log_lim - em_tail(f, n + 1)
        d = A_i * mp.exp(logp)
        rows_online.append([str(gaussian), fu(n), fd(d)])
        rate = (d - limit) * mpf(n) ** (alpha - 1)
        rates.append(rate)
        log('   n=%.0e delta=%s  (delta-limit) n^(alpha-1) = %s' % (n, ns(d, 17), ns(rate, 10)))
    Kc = K_lap if not gaussian else 2 * C1 * mp.exp(eps / 2)
    pred = limit * Kc / (alpha - 1)
    far = {}
    for n in [10 ** 10, 10 ** 12, 10 ** 16]:
        d = A_i * mp.exp(log_lim - em_tail(f, n + 1))
        far[n] = (d - limit) * mpf(n) ** (alpha - 1)
        log('   (rate only) n=%.0e (delta-limit) n^(alpha-1) = %s' % (n, ns(far[n], 10)))
    log('   predicted asymptote of (delta-limit) n^(alpha-1): limit * K/(alpha-1) = %s' % ns(pred, 10))
    log('   limit=%s  paper (6.%s) upper=%s (overshoot %s%%)  integral-from-i lower=%s (%s%%)' % (
        ns(limit, 17), '5' if gaussian else '3', ns(upper, 17), ns(100 * (upper / limit - 1), 4),
        ns(lower, 17), ns(100 * (lower / limit - 1), 4)))
    log('   (%.1fs)' % (time.time() - t0))
    rows_limit.append([str(gaussian), fd(limit), fd(upper), fd(lower)])
    summary[gaussian] = (limit, upper, lower, rates, pred, log_lim, far[10 ** 12])

# float cross-check of delta(1e6) (Laplace) and delta(1e5) (Gaussian) by direct double-precision summation
Kf = float(K_lap)
sf = math.fsum(math.log1p(-Kf / (t ** 1.5 + 10000.0)) for t in range(I_IDX + 1, 10 ** 6 + 1))
d_f = float(A_lap) * math.exp(sf)
lap_1e6 = A_lap * mp.exp(summary[0][5] - em_tail(f_lap, 10 ** 6 + 1))
assert abs(d_f / float(lap_1e6) - 1) < 1e-11, (d_f, lap_1e6)


def wf(x):
    w = math.log(x) - math.log(math.log(x)) if x > 3 else 1.0
    for _ in range(60):
        ew = math.exp(w)
        w -= (w * ew - x) / (ew * (w + 1))
    return w


def omt_f(e, r):
    return 0.5 * math.erfc(-(e / r - r / 2) / math.sqrt(2)) + math.exp(e) * 0.5 * math.erfc((e / r + r / 2) / math.sqrt(2))


sg = math.fsum(math.log1p(-omt_f(1.0, 2 * math.sqrt(wf(t ** 3.0 / (2 * math.pi * 1e4) + 100.0))))
               for t in range(I_IDX + 1, 10 ** 5 + 1))
g_1e5 = A_gau * mp.exp(summary[1][5] - em_tail(f_gauss, 10 ** 5 + 1))
assert abs(float(A_gau) * math.exp(sg) / float(g_1e5) - 1) < 1e-9, (sg, g_1e5)
log('float cross-checks of delta(1e6) (Laplace) and delta(1e5) (Gaussian) agree')

emit_array('ref_pnsgd_online', 'REF_PNSGD_ONLINE',
           '6. Online (6.1): delta(n) = A_i prod_{t=i+1}^n B_t, i = 100, L=10, beta=0.5, rho=0, eps=1, eta=0.01,\n'
           '   alpha=1.5, C1=100, C2=100; gaussian=0: (a,b)=(0,1), v_j = c(b-a)/(2 eta ln(j^alpha/C1 + C2)),\n'
           '   B_t = 1 - C1 e^(eps/2)/(t^alpha + C1 C2); gaussian=1: D=1, s_j = c D/(2 eta sqrt(W0(j^(2 alpha)/(2 pi C1^2) + C2))),\n'
           '   B_t = theta(eps, 2 sqrt(W0(...))), A_i = theta(eps, 2L/s_i). The n = 100 rows are A_i (empty product).',
           rows_online)
(ll, lu, lo), (gl, gu, go) = summary[0][:3], summary[1][:3]
emit_array('ref_pnsgd_online_limit', 'REF_PNSGD_ONLINE_LIMIT',
           '6. n -> inf: limit = A_i prod_{t>i} B_t (log1p sum to 2e4 + Euler-Maclaurin tail); paper_upper = (6.3)/(6.5)\n'
           '   = A_i exp(int_{i+1}^inf log B_x dx); integral_lower = A_i exp(int_i^inf log B_x dx).\n'
           '   paper_upper overshoots the limit by %s%% (Laplace) and %s%% (Gaussian). Rate: (delta(n) - limit) n^(alpha-1)\n'
           '   -> limit K/(alpha-1), K = C1 e^(eps/2) (Laplace; %s at n=1e8, limit %s) or 2 C1 e^(eps/2) (Gaussian,\n'
           '   with a 1/ln n correction: %s at n=1e8, %s at n=1e12, limit %s): O(n^(1-alpha)), not 1/log n'
           % (ns(100 * (lu / ll - 1), 3), ns(100 * (gu / gl - 1), 3), ns(summary[0][3][-1], 6), ns(summary[0][4], 6),
              ns(summary[1][3][-1], 6), ns(summary[1][6], 6), ns(summary[1][4], 6)), rows_limit)

# ==========================================================================
# 7. KOV optimal composition
# ==========================================================================
log('== 7. KOV')


def kov(eps, delta, E, eps_t):
    eps, delta, eps_t = mpf(eps), mpf(delta), mpf(eps_t)
    E = int(E)
    with mp.workdps(mp.mp.dps + 30):
        p = mp.exp(eps) / (1 + mp.exp(eps))
        lp, lq = mp.log(p), mp.log1p(-p)
        s = mpf(0)
        for k in range(E + 1):
            z = eps_t - (2 * k - E) * eps
            if z < 0:
                s += mp.exp(mp.log(mp.binomial(E, k)) + k * lp + (E - k) * lq) * (-mp.expm1(z))
        keep = mp.exp(E * mp.log1p(-delta))
        res = -mp.expm1(E * mp.log1p(-delta)) + keep * s
    return +res


def kov_check(eps, delta, E, eps_t):
    """Independent form: hockey stick E_{e^eps'}(P^E || Q^E) for P = (p, 1-p), Q = (1-p, p),
    summed over k = number of 'first' outcomes, then the (1-delta)^E mixing."""
    eps, delta, eps_t = mpf(eps), mpf(delta), mpf(eps_t)
    E = int(E)
    with mp.workdps(mp.mp.dps + 60):
        e = mp.exp(eps)
        s = mpf(0)
        for k in range(E + 1):
            pk = mp.binomial(E, k) * e ** k / (1 + e) ** E
            qk = mp.binomial(E, k) * e ** (E - k) / (1 + e) ** E
            s += max(mpf(0), pk - mp.exp(eps_t) * qk)
        return +(1 - (1 - delta) ** E * (1 - s))


rows = []
for es, ds, E, ets in [('1', '1e-6', 10, '3'), ('0.5', '0', 20, '2'), ('0.1', '1e-5', 100, '1'),
                       ('0.01', '1e-7', 1000, '0.5')]:
    eps, dl, et = D(es), D(ds), D(ets)
    v = kov(eps, dl, E, et)
    assert close(v, kov_check(eps, dl, E, et), mpf(10) ** -40)
    rows.append([fd(eps), fd(dl), fu(E), fd(et), fd(v)])
    log('KOV eps=%s delta=%s E=%d eps\'=%s: delta\' = %s' % (es, ds, E, ets, ns(v, 17)))
emit_array('ref_kov', 'REF_KOV',
           "7. KOV optimal composition: delta'(eps') = 1 - (1-delta)^E + (1-delta)^E sum_k C(E,k) p^k (1-p)^(E-k)\n"
           "   (1 - e^(eps' - (2k-E) eps))_+, p = e^eps/(1+e^eps)", rows)

emit('#endif /* DPBUDGET_REF_PNSGD_H */')
print('\n'.join(out))
log('done in %.1fs' % (time.time() - T_START))
