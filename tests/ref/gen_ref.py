#!/usr/bin/env python3
"""Independent high-precision reference values for dpbudget's unit tests.

Computes, with mpmath at 50 significant digits (never with floats), the values
used by tests/unit: erfcx, the normal CDF Phi and Q = 1 - Phi, Phi^{-1},
the Gaussian-DP delta(eps; mu), the seed-004 Theorem 4.1 bound and its validity
condition (1), the seed-004 Table 1 / in-text M solves, delta_max / sigma_max,
feasible sigma intervals, and the Theorem 5.2 asymptotic GDP coefficient.
See docs/MATH.md sections 1 and 2 for the formulas.

Every input is first rounded to the nearest IEEE double and the reference
value is computed at exactly that double (so a C test can evaluate at the
same input); every output is then rounded to the nearest double and printed
with 17 significant digits.

Run (from the repository root; needs only python3 + mpmath):
    python3 tests/ref/gen_ref.py > tests/unit/ref_values.h
It also runs self-checks (assertions) and prints a summary to stderr.
"""
import sys
import mpmath as mp
from mpmath import mpf

mp.mp.dps = 50
B = mpf('0.4748')  # Shevtsova's proven Berry-Esseen upper bound (docs/MATH.md section 2)


def D(x):
    """The exact value of the double nearest to x, as an mpf."""
    return mpf(float(x)) if not isinstance(x, str) else mpf(float(mpf(x)))


def log(*a):
    print(*a, file=sys.stderr)


# --------------------------------------------------------------------------
# formatting
# --------------------------------------------------------------------------
def fd(v):
    """mpf -> nearest double, printed with 17 significant digits."""
    f = float(v)
    assert f == f and f not in (float('inf'), float('-inf')), v
    assert v == 0 or abs(f) >= 1e-300, ('value underflows', v)
    s = '%.17g' % f
    if not any(c in s for c in '.en'):
        s += '.0'
    return s


def fu(n):
    n = int(n)
    assert 0 <= n < 2 ** 64
    return '%dULL' % n


def fs(s):
    return '"' + s.replace('\\', '\\\\').replace('"', '\\"') + '"'


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


# --------------------------------------------------------------------------
# special functions (mpmath)
# --------------------------------------------------------------------------
def erfcx_direct(x):
    x = mpf(x)
    extra = int(max(0, mp.log10(abs(x) + 1))) * 2 + 20
    with mp.workdps(mp.mp.dps + extra):
        return +(mp.exp(x * x) * mp.erfc(x))


def erfcx_asym(x):
    """Asymptotic series 1/(x sqrt pi) sum (-1)^n (2n-1)!!/(2x^2)^n, for x >= 10."""
    x = mpf(x)
    with mp.workdps(mp.mp.dps + 10):
        s = mpf(0)
        term = mpf(1)
        n = 0
        while True:
            s += term
            nxt = -term * (2 * n + 1) / (2 * x * x)
            if abs(nxt) >= abs(term) or abs(nxt) < mpf(10) ** (-(mp.mp.dps + 5)):
                break
            term = nxt
            n += 1
        return +(s / (x * mp.sqrt(mp.pi)))


def Phi(x):
    return mp.erfc(-mpf(x) / mp.sqrt(2)) / 2


def Q(x):
    return mp.erfc(mpf(x) / mp.sqrt(2)) / 2


def phi(x):
    x = mpf(x)
    return mp.exp(-x * x / 2) / mp.sqrt(2 * mp.pi)


def lower_tail_inv(p):
    """x with Phi(x) = p, p <= 1/2 (Newton on ln Phi, then check)."""
    p = mpf(p)
    assert 0 < p <= mpf(1) / 2
    if p == mpf(1) / 2:
        return mpf(0)
    lp = mp.log(p)
    x = -mp.sqrt(-2 * lp) if p < mpf('0.1') else mpf(-1)
    for _ in range(200):
        g = mp.log(Phi(x)) - lp
        # d/dx ln Phi = phi/Phi
        step = g / (phi(x) / Phi(x))
        x -= step
        if abs(step) < mpf(10) ** (-(mp.mp.dps - 3)) * max(1, abs(x)):
            break
    assert abs(Phi(x) / p - 1) < mpf(10) ** -40, (p, x)
    return x


def Phi_inv(p):
    p = mpf(p)
    if p <= mpf(1) / 2:
        return lower_tail_inv(p)
    return -lower_tail_inv(1 - p)   # 1 - p is exact for a double p


def gdp_delta(mu, eps):
    mu, eps = mpf(mu), mpf(eps)
    with mp.workdps(120):
        a = -eps / mu + mu / 2
        b = -eps / mu - mu / 2
        d1 = Phi(a) - mp.exp(eps) * Phi(b)
        # Mills-ratio form: delta = phi(a) [m(-a) - m(-b)], m(x) = sqrt(pi/2) erfcx(x/sqrt2)
        m = lambda x: mp.sqrt(mp.pi / 2) * erfcx_direct(x / mp.sqrt(2))
        d2 = phi(a) * (m(-a) - m(-b))
        assert abs(d1 - d2) <= mpf(10) ** -60 * abs(d1), (mu, eps, d1, d2)
        return +d1


# --------------------------------------------------------------------------
# seed 004, Theorem 4.1
# --------------------------------------------------------------------------
def thm41_terms(sigma, M):
    sigma = mpf(sigma)
    M = mpf(int(M))
    t = 1 / sigma ** 2
    et = mp.exp(t)
    mu = mp.sqrt(mp.expm1(t) / (M - 1))
    coef = et * (1 + 4 * mp.exp(-3 * t)) / (-mp.expm1(-t)) ** 2
    s2p = mp.sqrt(2 * mp.pi)
    s2ep = mp.sqrt(2 * mp.e * mp.pi)
    T1 = 2 * B * coef * mu
    T2 = mu / s2p
    T3 = (1 / (4 * s2p) + (1 / (2 * s2ep)) * (1 + et / (-mp.expm1(-t)))) * mu ** 2
    T4 = mu ** 3 / (4 * s2ep)
    T5 = mu ** 4 / (32 * s2ep)
    L = mp.log(M)
    T6 = mpf('4.52') / (mpf('2.88') * mp.sqrt(L) - mpf('2.41') / mp.sqrt(L)) * M ** (mpf(-25) / 24)
    return dict(t=t, mu=mu, coef=coef, T=[T1, T2, T3, T4, T5, T6])


def thm41(sigma, M):
    """(delta, lhs, rhs, valid) of Theorem 4.1 and condition (1)."""
    r = thm41_terms(sigma, M)
    delta = mp.fsum(r['T'])
    lhs = delta + B * r['coef'] * r['mu']
    rhs = mp.erf(mp.expm1(r['t']) / (2 * mp.sqrt(2))) / 2
    return delta, lhs, rhs, lhs <= rhs


def domain_ok(sigma, M):
    return M >= 3 and mpf(sigma) >= mp.sqrt(3 / mp.log(M))


def feasible_M(sigma, M, target):
    d, lhs, rhs, ok = thm41(sigma, M)
    return d <= target and ok


def closed3(sigma, delta):
    t = 1 / mpf(sigma) ** 2
    br = (2 * B * mp.exp(3 * t / 2) * (1 + 4 * mp.exp(-3 * t)) / (-mp.expm1(-t)) ** mpf(1.5)
          + mp.sqrt(mp.expm1(t)) / mp.sqrt(2 * mp.pi))
    return 1 + (br / mpf(delta)) ** 2


def closed4(sigma):
    t = 1 / mpf(sigma) ** 2
    br = (3 * B * mp.exp(3 * t / 2) * (1 + 4 * mp.exp(-3 * t)) / (-mp.expm1(-t)) ** mpf(1.5)
          + mp.sqrt(mp.expm1(t)) / mp.sqrt(2 * mp.pi))
    return 1 + (br / (mp.erf(mp.expm1(t) / (2 * mp.sqrt(2))) / 2)) ** 2


def check_monotone_in_M(sigma):
    prev_d = prev_l = None
    for k in range(0, 361):
        M = int(mp.floor(mpf(3) * mpf(10) ** (mpf(k) / 20)))
        d, lhs, rhs, _ = thm41(sigma, M)
        if prev_d is not None:
            assert d <= prev_d and lhs <= prev_l, ('not monotone in M', sigma, M)
        prev_d, prev_l = d, lhs


def solve_M(sigma, target):
    """Smallest integer M >= 3 with thm41 delta <= target and condition (1)."""
    lo, hi = 2, 3                 # invariant: lo infeasible (or 2), hi candidate
    while not feasible_M(sigma, hi, target):
        lo, hi = hi, hi * 2
        assert hi < 2 ** 64
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if feasible_M(sigma, mid, target):
            hi = mid
        else:
            lo = mid
    assert feasible_M(sigma, hi, target) and (hi == 3 or not feasible_M(sigma, hi - 1, target))
    assert domain_ok(sigma, hi)
    return hi


def binding_M(sigma, M, target):
    """Which condition fails at M-1: 'delta', '(1)' or 'both'."""
    d, lhs, rhs, ok = thm41(sigma, M - 1)
    a, b = d > target, not ok
    return 'both' if a and b else ('delta' if a else '(1)')


# --------------------------------------------------------------------------
# sigma interval for given (M, delta)
# --------------------------------------------------------------------------
def sig_feasible(sigma, M, target):
    if not domain_ok(sigma, M):
        return False
    d, lhs, rhs, ok = thm41(sigma, M)
    return d <= target and ok


def argmin_delta(M, smin):
    f = lambda s: mp.fsum(thm41_terms(s, M)['T'])
    # grid then golden section then Newton on derivative
    grid = [smin * mpf(50 / smin) ** (mpf(k) / 2000) for k in range(2001)]
    vals = [f(s) for s in grid]
    # U-shape check: one local minimum on the grid
    k = min(range(len(vals)), key=lambda i: vals[i])
    assert all(vals[i] > vals[i + 1] for i in range(k)), 'delta not decreasing left of min'
    assert all(vals[i] < vals[i + 1] for i in range(k, len(vals) - 1)), 'delta not increasing right'
    if k == 0:
        return grid[0], vals[0]
    a, b = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    s = mp.findroot(lambda s: mp.diff(f, s), (a + b) / 2)
    assert a < s < b
    return s, f(s)


def sigma_interval(M, target):
    smin = mp.sqrt(3 / mp.log(M))
    sarg, dmin = argmin_delta(M, smin)
    grid = [smin * mpf(50 / smin) ** (mpf(k) / 4000) for k in range(4001)]
    flags = [sig_feasible(s, M, target) for s in grid]
    runs = sum(1 for i in range(len(flags)) if flags[i] and (i == 0 or not flags[i - 1]))
    # condition (1) set alone must also be an interval (checked for the record)
    c1 = [thm41(s, M)[3] for s in grid]
    runs1 = sum(1 for i in range(len(c1)) if c1[i] and (i == 0 or not c1[i - 1]))
    assert runs1 <= 1 and runs <= 1, (M, target, runs, runs1)
    info = dict(smin=smin, argmin=sarg, dmin=dmin, cond1_at_argmin=thm41(sarg, M)[3])
    if runs == 0:
        # confirm with the argmin itself
        assert not sig_feasible(sarg, M, target)
        return None, info
    i0 = flags.index(True)
    i1 = len(flags) - 1 - flags[::-1].index(True)
    assert i0 > 0 and i1 < len(flags) - 1

    def bis(a, b):  # a infeasible/feasible boundary: returns boundary point
        fa = sig_feasible(a, M, target)
        for _ in range(200):
            m = (a + b) / 2
            if sig_feasible(m, M, target) == fa:
                a = m
            else:
                b = m
            if b - a < mpf(10) ** -40:
                break
        return a, b
    a, b = bis(grid[i0 - 1], grid[i0])       # a infeasible, b feasible
    lo = b
    a2, b2 = bis(grid[i1], grid[i1 + 1])     # a2 feasible, b2 infeasible
    hi = a2

    def why(s):
        if not domain_ok(s, M):
            return 'domain'
        d, lhs, rhs, ok = thm41(s, M)
        return 'both' if (d > target and not ok) else ('delta' if d > target else '(1)')
    info['lo_binds'] = why(lo - mpf(10) ** -30)
    info['hi_binds'] = why(hi + mpf(10) ** -30)
    return (lo, hi), info


# ==========================================================================
# compute everything
# ==========================================================================
emit('/* ref_values.h -- generated by tests/ref/gen_ref.py, do not edit.')
emit(' * Regenerate: python3 tests/ref/gen_ref.py > tests/unit/ref_values.h')
emit(' * Independent mpmath (50 digits) reference values; every input is the')
emit(' * nearest double to the listed decimal and values are computed at exactly')
emit(' * that double; outputs are the nearest doubles (17 significant digits).')
emit(' * t = 1/sigma^2. B (Berry-Esseen) = 0.4748. */')
emit('#ifndef DPBUDGET_REF_VALUES_H')
emit('#define DPBUDGET_REF_VALUES_H')
emit()

# ---- A. erfcx ----
emit('struct ref_erfcx { double x, value; };')
emit('struct ref_phi { double x, phi; };')
emit('struct ref_q { double x, q; };')
emit('struct ref_phi_inv { double p, x; };')
emit('struct ref_gdp { double mu, eps, delta, ln_delta; };')
emit('struct ref_gdp_ln { double mu, eps, ln_delta; };')
emit('struct ref_thm41 { double sigma; unsigned long long M; double delta, lhs, rhs; int valid; };')
emit('struct ref_thm41_terms { double sigma; unsigned long long M; double t1, t2, t3, t4, t5, t6, mu, coef; int domain_ok; };')
emit('struct ref_m_solve { const char *what; double sigma, delta_target; unsigned long long m_exact;\n'
     '    double delta_at_m, delta_at_m_minus_1; int limited_by_cond1;\n'
     '    double m_closed3; unsigned long long m_closed3_ceil;\n'
     '    double m_closed4; unsigned long long m_closed4_ceil; unsigned long long min_n; };')
emit('struct ref_delta_max { double sigma, delta_max; };')
emit('struct ref_sigma_max { double delta, sigma_max; };')
emit('struct ref_sigma_interval { unsigned long long M; double delta_target; int feasible;\n'
     '    double sigma_lo, sigma_hi, min_delta, argmin_sigma, sigma_domain_min; };')
emit('struct ref_gdp_asym { double sigma; unsigned long long M, E; double mu_e, delta_eps1, ln_delta_eps1; };')
emit()

xs = ['-27', '-26', '-10', '-5', '-1', '-0.5', '-1e-3', '0', '1e-10', '1e-3', '0.1', '0.4', '0.5', '0.9',
      '1', '2', '3.9', '4', '5', '10', '26.6', '27', '50', '100', '1e3', '1e5', '1e8', '1e15']
rows = []
DBL_MAX = mpf(2) ** 1024 * (1 - mpf(2) ** -53)
for xsrc in xs:
    x = D(xsrc)
    v = erfcx_direct(x)
    if x >= 10:
        va = erfcx_asym(x)
        assert abs(v / va - 1) < mpf(10) ** -40, (xsrc, v, va)
    if v >= DBL_MAX:
        log('erfcx(%s) = %s overflows a double: skipped' % (xsrc, mp.nstr(v, 5)))
        continue
    rows.append([fd(x), fd(v)])
emit_array('ref_erfcx', 'REF_ERFCX', 'A. erfcx(x) = exp(x^2) erfc(x)', rows)

# ---- B. Phi, Q ----
TINY = mpf('1e-300')
rows = []
for xsrc in ['-40', '-38', '-37.5', '-36', '-30', '-20', '-10', '-8', '-5', '-3', '-1', '-0.1', '0', '0.1',
             '1', '3', '5', '8']:
    x = D(xsrc)
    v = Phi(x)
    if v < TINY:
        log('Phi(%s) = %s < 1e-300: skipped' % (xsrc, mp.nstr(v, 5)))
        continue
    rows.append([fd(x), fd(v)])
emit_array('ref_phi', 'REF_PHI', 'B. Phi(x), normal CDF', rows)
rows = []
for xsrc in ['1', '5', '10', '20', '30', '36', '37']:
    x = D(xsrc)
    v = Q(x)
    if v < TINY:
        log('Q(%s) = %s < 1e-300: skipped' % (xsrc, mp.nstr(v, 5)))
        continue
    rows.append([fd(x), fd(v)])
emit_array('ref_q', 'REF_Q', 'B. Q(x) = 1 - Phi(x) (upper tail)', rows)

# ---- C. Phi^{-1} ----
rows = []
for psrc in ['1e-300', '1e-100', '1e-20', '1e-10', '1e-5', '0.001', '0.02425', '0.1', '0.3', '0.5', '0.7',
             '0.9', '0.97575', '0.999']:
    p = D(psrc)
    rows.append([fd(p), fd(Phi_inv(p))])
for p in [D(1 - 1e-10), 1 - mpf(2) ** -53]:
    assert p == mpf(float(p))
    rows.append([fd(p), fd(Phi_inv(p))])
emit_array('ref_phi_inv', 'REF_PHI_INV',
           'C. Phi^{-1}(p); p near 1 are exact doubles (1-1e-10 rounded, 1-2^-53)', rows)

# ---- D. GDP delta ----
gd = [('0.5', '0'), ('0.5', '1'), ('1', '0'), ('1', '1'), ('1', '5'), ('2', '0.5'), ('3', '2'), ('0.1', '0.5'),
      ('0.01', '0.1'), ('0.2', '10'), ('0.5', '30'), ('1', '40'), ('10', '10'), ('30', '100'),
      ('1e-3', '1e-3'),
      # extra: deep tails, overflow of e^eps, cancellation for tiny mu, delta near 1
      ('1', '18'), ('0.5', '8'), ('1', '35'), ('0.5', '17'), ('5', '100'), ('10', '300'), ('20', '800'),
      ('30', '1000'), ('1e-8', '0'), ('1e-8', '1e-8'), ('1e-3', '0.01'), ('40', '1'), ('8', '0')]
rows, tail = [], []
for msrc, esrc in gd:
    mu, eps = D(msrc), D(esrc)
    d = gdp_delta(mu, eps)
    if d < TINY:
        log('GDP delta(mu=%s, eps=%s) = %s < 1e-300: only ln delta kept' % (msrc, esrc, mp.nstr(d, 5)))
        tail.append([fd(mu), fd(eps), fd(mp.log(d))])
        continue
    rows.append([fd(mu), fd(eps), fd(d), fd(mp.log(d))])
emit_array('ref_gdp', 'REF_GDP',
           'D. mu-GDP delta(eps) = Phi(-eps/mu+mu/2) - e^eps Phi(-eps/mu-mu/2), and ln delta', rows)
emit_array('ref_gdp_ln', 'REF_GDP_LN_TAIL',
           'D. cases whose delta < 1e-300: ln delta only', tail)

# ---- E. Theorem 4.1 ----
th = [('1', 10 ** 6), ('1', 1140369), ('1', 1140368), ('0.5', 1570000000), ('0.75', 3720000),
      ('1.5', 3230000), ('2', 14900000), ('1', 3), ('5', 100), ('1', 10 ** 17), ('0.6', 10 ** 12), ('3', 10 ** 4)]
rows, rows_t = [], []
for ssrc, M in th:
    s = D(ssrc)
    d, lhs, rhs, ok = thm41(s, M)
    rows.append([fd(s), fu(M), fd(d), fd(lhs), fd(rhs), '1' if ok else '0'])
    r = thm41_terms(s, M)
    rows_t.append([fd(s), fu(M)] + [fd(x) for x in r['T']] + [fd(r['mu']), fd(r['coef']),
                                                             '1' if domain_ok(s, M) else '0'])
    log('thm41 sigma=%s M=%d: delta=%s lhs=%s rhs=%s valid=%s domain_ok=%s' % (
        ssrc, M, mp.nstr(d, 10), mp.nstr(lhs, 10), mp.nstr(rhs, 10), ok, domain_ok(s, M)))
emit_array('ref_thm41', 'REF_THM41',
           'E. Theorem 4.1: delta = T1+..+T6; condition (1): lhs = delta + B coef mu <= rhs = '
           'erf((e^t-1)/(2 sqrt 2))/2; valid = (lhs <= rhs)', rows)
emit_array('ref_thm41_terms', 'REF_THM41_TERMS',
           'E. Theorem 4.1 term by term (same cases); domain_ok = (M >= 3 && sigma >= sqrt(3/ln M))', rows_t)

# ---- F/G. M solves ----
def m_solve_row(what, ssrc, target):
    s = D(ssrc)
    target = D(target) if not isinstance(target, mp.mpf) else mpf(float(target))
    check_monotone_in_M(s)
    M = solve_M(s, target)
    dM = thm41(s, M)[0]
    dM1 = thm41(s, M - 1)[0] if M > 3 else mpf(0)
    c1 = binding_M(s, M, target) in ('(1)', 'both') if M > 3 else False
    m3 = closed3(s, target)
    m4 = closed4(s)
    minN = int(mp.ceil(10 * s * M))
    log('%-40s sigma=%s target=%s: M_exact=%d (%s binds at M-1; delta(M)=%s, rel margin %s) '
        'M_closed3=%s ceil %d  M_closed4=%s  minN=%d' % (
            what, ssrc, mp.nstr(target, 12), M, binding_M(s, M, target), mp.nstr(dM, 12),
            mp.nstr((target - dM) / target, 3), mp.nstr(m3, 12), int(mp.ceil(m3)), mp.nstr(m4, 12), minN))
    return [fs(what), fd(s), fd(target), fu(M), fd(dM), fd(dM1), '1' if c1 else '0',
            fd(m3), fu(mp.ceil(m3)), fd(m4), fu(mp.ceil(m4)), fu(minN)]


rows = [m_solve_row('table1', s, '0.01') for s in ['0.5', '0.75', '1', '1.5', '2']]
emit_array('ref_m_solve', 'REF_TABLE1',
           'F. seed 004 Table 1, delta = 0.01: m_exact = smallest M >= 3 with thm41 delta <= target '
           'and (1);\n   delta_at_m(_minus_1) = thm41 delta at m_exact (and m_exact-1); limited_by_cond1 = '
           '(1) fails at m_exact-1;\n   m_closed3/4 = closed forms (3)/(4) as reals and their ceilings; '
           'min_n = ceil(10 sigma m_exact)', rows)

d4_400 = 1 - (1 - mpf(1) / 400) ** (mpf(1) / 4)
d4_100 = 1 - (1 - mpf(1) / 100) ** (mpf(1) / 4)
rows = [m_solve_row('in-text delta=1e-4', '1', '1e-4'),
        m_solve_row('per-epoch 1/400 (paper E=4, total ~0.01)', '1', '0.0025'),
        m_solve_row('per-epoch 1-(1-1/400)^(1/4) (E=4 total 1/400)', '1', d4_400),
        m_solve_row('per-epoch 1/1600 (E=4 total ~1/400)', '1', '0.000625'),
        m_solve_row('per-epoch 1-(1-1/100)^(1/4) (E=4 total 0.01)', '1', d4_100)]
emit_array('ref_m_solve', 'REF_M_SOLVE_EXTRA',
           'G. in-text M solves at sigma = 1 (same fields as REF_TABLE1)', rows)

# delta_max / sigma_max
def delta_max(s):
    t = 1 / mpf(s) ** 2
    return mpf(2) / 3 * (mp.erf(mp.expm1(t) / (2 * mp.sqrt(2))) / 2)


rows = []
for ssrc in ['1', '3.71', '2']:
    s = D(ssrc)
    rows.append([fd(s), fd(delta_max(s))])
    log('delta_max(%s) = %s' % (ssrc, mp.nstr(delta_max(s), 15)))
emit_array('ref_delta_max', 'REF_DELTA_MAX',
           'G. delta_max(sigma) = (2/3)(1/2 - Phi(-(e^t-1)/2)): largest delta for which (3) implies (4)', rows)
# monotone decreasing in sigma
prev = None
for k in range(1, 400):
    v = delta_max(mpf(k) / 20)
    # strictly decreasing until erf saturates to 1 at working precision
    assert prev is None or v < prev or (v == prev and v > mpf(1) / 3 - mpf(10) ** -45)
    prev = v
rows = []
for dsrc in ['0.01', '0.001', '0.1']:
    dl = D(dsrc)
    u = 2 * mp.sqrt(2) * mp.erfinv(3 * dl)            # e^t - 1
    s_closed = 1 / mp.sqrt(mp.log1p(u))
    s_root = mp.findroot(lambda s: delta_max(s) - dl, s_closed * (1 + mpf('1e-3')))
    assert abs(s_root / s_closed - 1) < mpf(10) ** -40
    rows.append([fd(dl), fd(s_closed)])
    log('sigma_max(%s) = %s' % (dsrc, mp.nstr(s_closed, 15)))
emit_array('ref_sigma_max', 'REF_SIGMA_MAX',
           'G. sigma_max(delta) = largest sigma with delta_max(sigma) >= delta', rows)

# ---- H. sigma intervals ----
rows = []
for M, dsrc in [(1140369, '0.01'), (10 ** 7, '0.01'), (10 ** 6, '0.01'), (10 ** 9, '1e-3'), (10 ** 12, '1e-4')]:
    dt = D(dsrc)
    iv, info = sigma_interval(M, dt)
    if iv is None:
        rows.append([fu(M), fd(dt), '0', '0.0', '0.0', fd(info['dmin']), fd(info['argmin']), fd(info['smin'])])
        log('sigma interval M=%d delta=%s: INFEASIBLE; min delta %s at sigma %s ((1) holds there: %s)' % (
            M, dsrc, mp.nstr(info['dmin'], 15), mp.nstr(info['argmin'], 15), info['cond1_at_argmin']))
    else:
        rows.append([fu(M), fd(dt), '1', fd(iv[0]), fd(iv[1]), fd(info['dmin']), fd(info['argmin']),
                     fd(info['smin'])])
        log('sigma interval M=%d delta=%s: [%s, %s] (binding: lo %s, hi %s); min delta %s at sigma %s' % (
            M, dsrc, mp.nstr(iv[0], 15), mp.nstr(iv[1], 15), info['lo_binds'], info['hi_binds'],
            mp.nstr(info['dmin'], 15), mp.nstr(info['argmin'], 15)))
emit_array('ref_sigma_interval', 'REF_SIGMA_INTERVAL',
           'H. feasible sigma set {thm41 delta <= target, (1), sigma >= sqrt(3/ln M)} = [sigma_lo, sigma_hi] '
           'if feasible (else 0, 0);\n   min_delta = min over sigma >= sigma_domain_min of thm41 delta, '
           'attained at argmin_sigma; sigma_domain_min = sqrt(3/ln M)', rows)

# ---- I. Theorem 5.2 asymptotic GDP ----
rows = []
for ssrc, M, E in [('1', 10 ** 4, 1), ('1', 10 ** 4, 10), ('0.8', 10 ** 3, 4)]:
    s = D(ssrc)
    t = 1 / s ** 2
    muE = mp.sqrt(E * mp.expm1(t) / (M - 1))
    d = gdp_delta(muE, 1)
    rows.append([fd(s), fu(M), fu(E), fd(muE), fd(d) if d >= TINY else '0.0', fd(mp.log(d))])
    log('thm5.2 sigma=%s M=%d E=%d: mu_E=%s delta(eps=1)=%s' % (ssrc, M, E, mp.nstr(muE, 15), mp.nstr(d, 15)))
emit_array('ref_gdp_asym', 'REF_GDP_ASYM',
           'I. Theorem 5.2 asymptotic GDP (an estimate, not a bound): mu_e = sqrt(E (e^t-1)/(M-1)), '
           'delta_eps1 = GDP delta at eps = 1\n   '
           '(0.0 when it is below 1e-300: then only ln_delta_eps1 is meaningful)', rows)

emit('#endif /* DPBUDGET_REF_VALUES_H */')
print('\n'.join(out))
