#!/usr/bin/env python3
"""Independent high-precision reference values for dpbudget's standard accountants.

Computes with mpmath (never with floats) the reference values used by the unit
tests of the RDP, PLD and (eps, delta) composition accountants (docs/MATH.md
sections 1 and 6):

  A. RDP of the Poisson-subsampled Gaussian (Mironov-Talwar-Zhang 2019): binomial
     sum for integer orders, direct numerical integration of
     E_{mu0}[(mu/mu0)^alpha] for fractional orders (an independent check of the
     series dp_accounting uses); integer orders are cross-checked by quadrature.
  B. dp_accounting's RDP -> (eps, delta) conversions (Canonne-Kamath-Steinke 2020
     Prop. 12 as implemented in dp_accounting.rdp compute_epsilon/compute_delta)
     over the dp_accounting default orders, with the high-precision RDP.
  C. RDP of the Laplace mechanism (Mironov 2017 Prop. 6), checked by quadrature.
  D. Exact privacy profiles delta(eps) (tight hockey-stick divergences) of
     compositions: Gaussian (via Gaussian DP), Poisson-subsampled Gaussian
     (add/remove, both directions, nested quadrature), Laplace (exact law of the
     sum of privacy losses), and (eps0, delta0)-DP (Kairouz-Oh-Viswanath).

Every input is first rounded to the nearest IEEE double and the reference
value is computed at exactly that double; every output is rounded to the
nearest double and printed with 17 significant digits.

Run (from the repository root; needs only python3 + mpmath; ~1 minute, uses a
second process for the 3-fold subsampled-Gaussian integral):
    python3 tests/ref/gen_ref_accountants.py > tests/unit/ref_accountants.h
It also runs self-checks (assertions) and prints a summary to stderr.
"""
import sys
import time
import multiprocessing as mproc
import mpmath as mp
from mpmath import mpf

mp.mp.dps = 50
T_START = time.time()


def D(x):
    """The exact value of the double nearest to x, as an mpf."""
    return mpf(float(x)) if not isinstance(x, str) else mpf(float(mpf(x)))


def log(*a):
    print(*a, file=sys.stderr)
    sys.stderr.flush()


def nstr(x, n=17):
    return mp.nstr(x, n)


# --------------------------------------------------------------------------
# formatting (same conventions as tests/ref/gen_ref.py)
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


def wrap(items, sep, nl, width=100):
    """Join items with sep, breaking lines (with nl) before width characters."""
    lines, cur = [], ''
    for it in items:
        if cur and len(cur) + len(sep) + len(it) > width:
            lines.append(cur + sep.rstrip())
            cur = it
        else:
            cur = cur + sep + it if cur else it
    lines.append(cur)
    return nl.join(lines)


def fu(n):
    n = int(n)
    assert 0 <= n < 2 ** 64
    return '%dULL' % n


out = []


def emit(s=''):
    out.append(s)


arrays = {}   # computed out of order (D2 waits for its worker); printed in ARRAY_ORDER


def emit_array(ctype, name, comment, rows):
    lines = ['/* %s */' % comment, 'static const struct %s %s[] = {' % (ctype, name)]
    lines += ['    {' + ', '.join(r) + '},' for r in rows]
    lines += ['};', '#define %s_COUNT (sizeof %s / sizeof %s[0])' % (name, name, name), '']
    arrays[name] = lines


ARRAY_ORDER = ['REF_RDP_SGM', 'REF_RDP_SGM_EPS', 'REF_RDP_SGM_DELTA', 'REF_RDP_LAPLACE', 'REF_GDP_COMP_DELTA',
               'REF_GDP_COMP_EPS', 'REF_EXACT_SGM', 'REF_EXACT_LAPLACE', 'REF_KOV_COMP']


# --------------------------------------------------------------------------
# normal distribution
# --------------------------------------------------------------------------
def Phi(x):
    return mp.erfc(-x / mp.sqrt(2)) / 2


def Qn(x):
    return mp.erfc(x / mp.sqrt(2)) / 2


def npdf(z, m, s):
    return mp.exp(-(z - m) ** 2 / (2 * s * s)) / (s * mp.sqrt(2 * mp.pi))


LN_DBL_MAX = mp.log(mpf(sys.float_info.max))


def public_check(v, pv):
    """Compare an exact value with a public decimal quoted to some digits."""
    nd = len(pv.split('.')[1])
    rounded = '%.*f' % (nd, float(v))
    trunc = mp.nstr(mp.floor(v * 10 ** nd) / 10 ** nd, 30)
    if rounded == pv:
        return 'AGREES (exact value rounds to %s)' % pv
    if mpf(pv) == mp.floor(v * 10 ** nd) / 10 ** nd:
        return 'agrees only by truncation (exact %s rounds to %s)' % (nstr(v, nd + 3), rounded)
    return 'DISAGREES (exact %s rounds to %s; public - exact = %s)' % (nstr(v, nd + 3), rounded,
                                                                      nstr(mpf(pv) - v, 3))


# --------------------------------------------------------------------------
# A. RDP of the Poisson-subsampled Gaussian
# --------------------------------------------------------------------------
def sgm_log_a_binom(q, s, a):
    """ln A_alpha for integer alpha by the binomial sum (exact up to dps)."""
    a = int(a)
    with mp.workdps(80):
        terms = [mp.binomial(a, k) * (1 - q) ** (a - k) * q ** k * mp.exp((k * k - k) / (2 * s * s))
                 for k in range(a + 1)]
        return +mp.log(mp.fsum(terms))


def sgm_log_a_quad(q, s, a, dps=40, width=2, method='tanh-sinh'):
    """ln A_alpha by direct quadrature of E_{z~N(0,s^2)}[(mu(z)/mu0(z))^alpha] - 1
    = int mu0(z) expm1(alpha log1p(q expm1((2z-1)/(2s^2)))) dz  (integrating A - 1,
    not A, so that nothing cancels when A is close to 1).  The integrand is scaled by
    its maximum (found on a grid) and the line is cut to where it exceeds 10^-(dps+10)
    of the maximum, in pieces of `width` sigma plus the points 0, 1/2, 1.
    Returns (ln A, absolute error estimate of ln A)."""
    with mp.workdps(dps):
        q, s, a = mpf(q), mpf(s), mpf(a)
        c = 1 / (2 * s * s)
        lnrm = -mp.log(s * mp.sqrt(2 * mp.pi))

        def lg(z):  # ln |integrand|
            u = a * mp.log1p(q * mp.expm1((2 * z - 1) * c))
            if u == 0:
                return mpf('-inf')
            return lnrm - z * z * c + mp.log(abs(mp.expm1(u)))

        with mp.workdps(15):
            step = s / 4
            lo = -40 * s - 1
            hi = a + 40 * s + 1      # the q-part of the integrand peaks near z = alpha
            n = int((hi - lo) / step) + 1
            zs = [lo + i * step for i in range(n + 1)]
            hs = [lg(z) for z in zs]
            hm = max(hs)
            idx = [i for i, v in enumerate(hs) if v > hm - (dps + 10) * mp.ln10]
            assert idx[0] > 0 and idx[-1] < n, 'integration window too small'
            zlo, zhi = zs[idx[0] - 1], zs[idx[-1] + 1]
        hm = mpf(hm)
        lnrm2 = lnrm - hm

        def g(z):
            return mp.exp(lnrm2 - z * z * c) * mp.expm1(a * mp.log1p(q * mp.expm1((2 * z - 1) * c)))

        pts = {zlo, zhi}
        k = int(mp.floor(zlo / (width * s))) + 1
        while k * width * s < zhi:
            pts.add(k * width * s)
            k += 1
        for p in (mpf(0), mpf(1) / 2, mpf(1)):
            if zlo < p < zhi:
                pts.add(p)
        v, e = mp.quad(g, sorted(pts), error=True, method=method)
        am1 = v * mp.exp(hm)
        la = mp.log1p(am1)
        # d ln A = dA / A
        return la, abs(e * mp.exp(hm)) / (1 + am1)


RDP_CACHE = {}


def sgm_rdp(q, s, a, how='auto'):
    """RDP eps(alpha) of the Poisson-subsampled Gaussian (q, s exact doubles)."""
    key = (q, s, a, how)
    if key in RDP_CACHE:
        return RDP_CACHE[key]
    if q == 1:
        r = a / (2 * s * s)
    elif a == int(a) and how == 'auto':
        r = sgm_log_a_binom(q, s, a) / (a - 1)
    elif how in ('auto', 'gl'):
        la, _ = sgm_log_a_quad(q, s, a, dps=25, width=4, method='gauss-legendre')
        r = la / (a - 1)
    else:
        la, _ = sgm_log_a_quad(q, s, a, dps=40, width=2, method='tanh-sinh')
        r = la / (a - 1)
    RDP_CACHE[key] = r
    return r


def dpacc_log_a_frac_truncated(q, s, a):
    """dp_accounting's _compute_log_a_frac series (two erfc-weighted binomial series split at
    z0 = s^2 ln(1/q - 1) + 1/2), evaluated in exact arithmetic but with its stopping rule
    (stop after the first i whose two log-terms are both < -30).  Only used to explain
    where a float dp_accounting value differs from the exact one."""
    with mp.workdps(40):
        z0 = s ** 2 * mp.log(1 / q - 1) + mpf(1) / 2
        a0 = a1 = mpf(0)
        i = 0
        while True:
            coef = mp.binomial(a, i)
            j = a - i
            lc = mp.log(abs(coef))
            ls0 = lc + i * mp.log(q) + j * mp.log(1 - q) + (i * i - i) / (2 * s * s) \
                + mp.log(mp.erfc((i - z0) / (mp.sqrt(2) * s)) / 2)
            ls1 = lc + j * mp.log(q) + i * mp.log(1 - q) + (j * j - j) / (2 * s * s) \
                + mp.log(mp.erfc((z0 - j) / (mp.sqrt(2) * s)) / 2)
            sg = 1 if coef > 0 else -1
            a0 += sg * mp.exp(ls0)
            a1 += sg * mp.exp(ls1)
            i += 1
            if max(ls0, ls1) < -30:
                break
        return mp.log(a0 + a1)


# --------------------------------------------------------------------------
# D2 worker: exact delta(eps) of the T-fold Poisson-subsampled Gaussian
# --------------------------------------------------------------------------
def ts_nodes(h, dps):
    """Tanh-sinh nodes/weights on [-1, 1] with step h, truncated at weight 10^-(dps+5)."""
    res = []
    k = 0
    tiny = mpf(10) ** (-dps - 5)
    while True:
        t = k * h
        u = mp.pi / 2 * mp.sinh(t)
        w = h * mp.pi / 2 * mp.cosh(t) / mp.cosh(u) ** 2
        if w < tiny:
            break
        x = mp.tanh(u)
        res.append((x, w))
        if k > 0:
            res.append((-x, w))
        k += 1
    return res


class SGMProfile:
    """Exact privacy profile of the Poisson-subsampled Gaussian (sensitivity 1, noise s),
    add/remove relation.  Remove: P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2); add: the
    pair swapped.  With L(z) = ln(1 - q + q e^{(2z-1)/(2s^2)}) (increasing in z):
      one step, any real e (closed form, L monotone):
        drem1(e) = int (P - e^e Q)_+   (= 1 - e^e for e <= ln(1-q))
        dadd1(e) = int (Q - e^e P)_+   (= 0 for e >= -ln(1-q))
      T steps: delta_T(eps) = E_{z_1..z_{T-1}}[d1(eps - sum loss)], computed by the
      recursion Drem(k, c) = int P(z) Drem(k-1, c - L(z)) dz, Drem(0, .) = drem1
      (Dadd likewise with N(0,s^2) and -L).  Drem(k-1, .) is analytic except at
      c' = k ln(1-q) (beyond it, = 1 - e^c' exactly), so each integral is cut there:
      the analytic side is integrated in closed form (E_P[(1 - e^{c-L}) 1{z > zc}] =
      P(z > zc) - e^c Q(z > zc)) and the other side by tanh-sinh (fixed step h, pieces
      of 2s, range [-W s, 1 + W s]), which is insensitive to the endpoint singularity."""

    def __init__(self, q, s, h='0.125', W=10, step=2, full=False):
        self.q, self.s = mpf(q), mpf(s)
        self.nodes = ts_nodes(mpf(h), mp.mp.dps)
        self.l1 = mp.log1p(-self.q) if self.q < 1 else mpf('-inf')
        self.a, self.b = -W * self.s, 1 + W * self.s
        self.step = step * self.s
        self.full = full   # remove: integrate the analytic side numerically as well (check)

    def L(self, z):
        return mp.log1p(self.q * mp.expm1((2 * z - 1) / (2 * self.s ** 2)))

    def Linv(self, L):
        return self.s ** 2 * mp.log1p(mp.expm1(L) / self.q) + mpf(1) / 2

    def P(self, z):
        return (1 - self.q) * npdf(z, 0, self.s) + self.q * npdf(z, 1, self.s)

    def Pgt(self, z):
        return (1 - self.q) * Qn(z / self.s) + self.q * Qn((z - 1) / self.s)

    def Qgt(self, z):
        return Qn(z / self.s)

    def drem1(self, e):
        q, s = self.q, self.s
        if e <= self.l1:
            return -mp.expm1(e)
        A = mp.expm1(e) + q                 # P - e^e Q > 0  <=>  z > zs
        zs = s * s * mp.log(A / q) + mpf(1) / 2
        return q * Qn((zs - 1) / s) - A * Qn(zs / s)

    def dadd1(self, e):
        q, s = self.q, self.s
        B = -mp.expm1(e) + q * mp.exp(e)    # 1 - e^e (1-q)
        if B <= 0:
            return mpf(0)
        zp = s * s * (mp.log(B / q) - e) + mpf(1) / 2   # Q - e^e P > 0  <=>  z < zp
        return B * Phi(zp / s) - mp.exp(e) * q * Phi((zp - 1) / s)

    def integ(self, f, u, v):
        if v <= u:
            return mpf(0)
        pts = {u, v}
        k = int(mp.floor(u / self.step)) + 1
        while k * self.step < v:
            pts.add(k * self.step)
            k += 1
        for p in (mpf(0), mpf(1) / 2, mpf(1)):
            if u < p < v:
                pts.add(p)
        pts = sorted(pts)
        tot = []
        for x0, x1 in zip(pts[:-1], pts[1:]):
            c, hw = (x0 + x1) / 2, (x1 - x0) / 2
            for x, w in self.nodes:
                tot.append(hw * w * f(c + hw * x))
        return mp.fsum(tot)

    def Drem(self, k, c):
        if k == 0:
            return self.drem1(c)
        if c <= (k + 1) * self.l1:
            return -mp.expm1(c)
        f = lambda z: self.P(z) * self.Drem(k - 1, c - self.L(z))
        if self.q < 1:
            zc = self.Linv(c - k * self.l1)
            if self.full:
                right = self.integ(f, max(zc, self.a), self.b) if zc < self.b else mpf(0)
            else:
                right = self.Pgt(zc) - mp.exp(c) * self.Qgt(zc)
        else:
            zc, right = mpf('inf'), mpf(0)
        return self.integ(f, self.a, min(zc, self.b)) + right

    def Dadd(self, k, c):
        if k == 0:
            return self.dadd1(c)
        if self.q < 1 and c >= -(k + 1) * self.l1:
            return mpf(0)
        zc = self.Linv(-k * self.l1 - c) if self.q < 1 else mpf('inf')
        return self.integ(lambda z: npdf(z, 0, self.s) * self.Dadd(k - 1, c + self.L(z)),
                          self.a, min(zc, self.b))


def d2_worker(task):
    """Runs in a second process: (name, q, s, T, eps, h, full) -> (name, rem, add, seconds)."""
    name, q, s, T, eps, h, full = task
    mp.mp.dps = 25
    t0 = time.time()
    S = SGMProfile(q, s, h=h, full=full)
    rem = S.Drem(T - 1, mpf(eps))
    add = S.Dadd(T - 1, mpf(eps))
    return name, str(rem), str(add), time.time() - t0


# ==========================================================================
def main():
    # start the expensive 3-fold integrals in a second process right away
    q3, s3, e3 = D('0.2'), D('0.5'), D('1')
    tasks = [('fine', q3, s3, 3, e3, '0.125', False),       # the reference value
             ('coarse', q3, s3, 3, e3, '0.25', False),      # accuracy: halve the tanh-sinh step
             ('split2', q3, s3, 2, D('0.3'), '0.125', False),
             ('full2', q3, s3, 2, D('0.3'), '0.125', True),   # closed-form parts integrated numerically
             ('neg2', q3, s3, 2, -D('0.3'), '0.125', False),  # add(eps) = 1 - e^eps + e^eps remove(-eps)
             ('gdp', mpf(1), s3, 2, e3, '0.125', False)]     # q = 1: must equal Gaussian DP
    pool = mproc.get_context('fork').Pool(1)
    pending = pool.map_async(d2_worker, tasks)

    emit('/* ref_accountants.h -- generated by tests/ref/gen_ref_accountants.py, do not edit.')
    emit(' * Regenerate: python3 tests/ref/gen_ref_accountants.py > tests/unit/ref_accountants.h')
    emit(' * Independent mpmath reference values for the standard accountants (docs/MATH.md')
    emit(' * sections 1 and 6): RDP of the Poisson-subsampled Gaussian and of Laplace,')
    emit(' * dp_accounting\'s RDP -> (eps, delta) conversions, and exact privacy profiles')
    emit(' * delta(eps) of compositions (for PLD accountants: their delta must be >= these).')
    emit(' * Every input is the nearest double to the listed decimal and values are computed')
    emit(' * at exactly that double; outputs are the nearest doubles (17 significant digits).')
    emit(' * Sensitivity 1, add/remove neighbours; sigma, b are noise multipliers. */')
    emit('#ifndef DPBUDGET_REF_ACCOUNTANTS_H')
    emit('#define DPBUDGET_REF_ACCOUNTANTS_H')
    emit()
    emit('struct ref_rdp_sgm { double q, sigma, alpha, rdp; };')
    emit('struct ref_rdp_sgm_eps { double q, sigma; unsigned long long T; double delta, eps, best_order; };')
    emit('struct ref_rdp_sgm_delta { double q, sigma; unsigned long long T; double eps, delta, best_order; };')
    emit('struct ref_rdp_laplace { double b, alpha, rdp; };')
    emit('struct ref_gdp_comp_delta { double mu, eps, delta; };')
    emit('struct ref_gdp_comp_eps { double mu, delta, eps; };')
    emit('struct ref_exact_sgm { double q, sigma; unsigned long long T; double eps, delta, delta_remove, delta_add; };')
    emit('struct ref_exact_laplace { double b; unsigned long long T; double eps, delta; };')
    emit('struct ref_kov_comp { double eps0, delta0; unsigned long long k; double eps, delta; };')
    emit()

    # ---------------- A ----------------
    t0 = time.time()
    A_CASES = [('0.01', '1.0'), ('0.04', '1.5'), ('0.2', '0.5'), ('0.001', '0.8'), ('0.5', '2.0'),
               ('1.0', '1.0'), ('1e-6', '10')]
    A_ALPHAS = ['1.1', '1.5', '2', '2.5', '3', '4.7', '8', '10.9', '16', '32', '63', '128', '256']
    rows = []
    overflow = []
    worst_int = mpf(0)       # integer orders: quadrature vs binomial (relative, on rdp)
    worst_frac = mpf(0)      # fractional orders: tanh-sinh (dps 40) vs Gauss-Legendre (dps 25, used in B)
    worst_err = mpf(0)       # quadrature's own error estimate (relative, on rdp)
    log('A. RDP of the Poisson-subsampled Gaussian')
    for qs, ss in A_CASES:
        q, s = D(qs), D(ss)
        for als in A_ALPHAS:
            a = D(als)
            if a == int(a):     # cross-check only: Gauss-Legendre, dps 34
                la_q, err = sgm_log_a_quad(q, s, a, dps=34, width=3, method='gauss-legendre')
            else:               # the reference value: tanh-sinh, dps 40
                la_q, err = sgm_log_a_quad(q, s, a, dps=40, width=2, method='tanh-sinh')
            rq = la_q / (a - 1)
            worst_err = max(worst_err, err / la_q)
            if q == 1:
                r = a / (2 * s * s)
                assert abs(rq / r - 1) < mpf(10) ** -25, (qs, ss, als, rq, r)
                la = r * (a - 1)
            elif a == int(a):
                la = sgm_log_a_binom(q, s, a)
                r = la / (a - 1)
                worst_int = max(worst_int, abs(rq / r - 1))
                assert abs(rq / r - 1) < mpf(10) ** -25, (qs, ss, als, rq, r)
            else:
                r = rq
                la = la_q
                rgl = sgm_rdp(q, s, a, 'gl')
                worst_frac = max(worst_frac, abs(rgl / r - 1))
                assert abs(rgl / r - 1) < mpf(10) ** -22, (qs, ss, als, rgl, r)
            RDP_CACHE[(q, s, a, 'auto')] = r
            if la > LN_DBL_MAX:
                overflow.append('(%s, %s, %s): ln A = %s' % (qs, ss, als, nstr(la, 8)))
            rows.append([fd(q), fd(s), fd(a), fd(r)])
        log('  q=%-6s sigma=%-4s: ' % (qs, ss) + ', '.join(
            '%s:%s' % (al, nstr(RDP_CACHE[(q, s, D(al), 'auto')], 10)) for al in A_ALPHAS))
    log('  integer orders, quadrature (Gauss-Legendre, dps 34) vs binomial sum: max relative difference %s'
        % nstr(worst_int, 3))
    log('  fractional orders, tanh-sinh (dps 40) vs Gauss-Legendre (dps 25, as used for B): max rel. difference %s'
        % nstr(worst_frac, 3))
    log('  quadrature error estimates: max relative %s' % nstr(worst_err, 3))
    log('  A_alpha > DBL_MAX (ln A > %s; rdp itself is moderate) for %d combinations:'
        % (nstr(LN_DBL_MAX, 8), len(overflow)))
    for o in overflow:
        log('    ' + o)
    log('  (%.1fs)' % (time.time() - t0))
    emit_array('ref_rdp_sgm', 'REF_RDP_SGM',
               'A. RDP eps(alpha) = ln(A_alpha)/(alpha-1) of the Poisson-subsampled Gaussian (Mironov-Talwar-Zhang\n'
               '   2019), A_alpha = E_{z~mu0}[(mu(z)/mu0(z))^alpha], mu0 = N(0,sigma^2), mu = (1-q) mu0 + q N(1,sigma^2).\n'
               '   Integer alpha: binomial sum; fractional alpha: direct quadrature (independent of the series);\n'
               '   q = 1: alpha/(2 sigma^2).  A_alpha itself exceeds DBL_MAX (work in log space) in the %d rows\n'
               '   (q, sigma, alpha) = %s.\n'
               '   q = 1e-6 rows: A - 1 ~ 1e-14, so ln A must be log1p(A - 1) with A - 1 summed directly; a log-sum-exp\n'
               '   in doubles is off by 1e-16 to 1e-14 absolute (dp_accounting\'s fractional series: up to 90%% relative).\n'
               '   dp_accounting\'s fractional series also stops at terms < e^-30 (absolute on A): up to ~3e-7 relative\n'
               '   error at small alpha and q (e.g. q = 0.001, alpha = 1.1).'
               % (len(overflow), wrap([o.split(':')[0] for o in overflow], ', ', '\n   ')), rows)

    # ---------------- B ----------------
    t0 = time.time()
    ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024]
    ORDERS = [mpf(float(o)) for o in ORDERS]
    B_CASES = [('0.01', '1.0', 1000, '1e-5'), ('0.04', '1.5', 2250, '1e-5'), ('0.2', '0.5', 3, '1e-5'),
               ('1.0', '10.0', 100, '1e-5'), ('0.001', '0.8', 10000, '1e-6')]

    def rdp_eps(rs, delta):
        vals = []
        for a, r in zip(ORDERS, rs):
            if delta ** 2 + mp.expm1(-r) > 0:
                e = mpf(0)
            elif a > mpf('1.01'):
                e = r + mp.log1p(-1 / a) - mp.log(delta * a) / (a - 1)
            else:
                e = mpf('inf')
            vals.append(e)
        i = min(range(len(vals)), key=lambda j: vals[j])
        second = min(v for j, v in enumerate(vals) if j != i)
        return max(mpf(0), vals[i]), ORDERS[i], second - vals[i]

    def rdp_delta(rs, eps):
        vals = []
        for a, r in zip(ORDERS, rs):
            ld = mpf('-inf') if r == 0 else mp.log1p(-mp.exp(-r)) / 2
            if a > mpf('1.01'):
                ld = min(ld, (a - 1) * (r - eps + mp.log1p(-1 / a)) - mp.log(a))
            vals.append(ld)
        i = min(range(len(vals)), key=lambda j: vals[j])
        second = min(v for j, v in enumerate(vals) if j != i)
        return min(mp.exp(vals[i]), mpf(1)), ORDERS[i], second - vals[i]

    rows_e, rows_d = [], []
    public = {('0.01', '1.0', 1000, '1e-5'): '2.10137', ('0.04', '1.5', 2250, '1e-5'): '7.32911117144'}
    log('B. RDP -> (eps, delta) over the %d dp_accounting default orders' % len(ORDERS))
    for qs, ss, T, ds in B_CASES:
        q, s, delta = D(qs), D(ss), D(ds)
        rs = [T * sgm_rdp(q, s, a) for a in ORDERS]
        e, bo, gap = rdp_eps(rs, delta)
        rows_e.append([fd(q), fd(s), fu(T), fd(delta), fd(e), fd(bo)])
        msg = ''
        if (qs, ss, T, ds) in public:
            pv = public[(qs, ss, T, ds)]
            nd = len(pv.split('.')[1])
            msg = '\n      [docs/MATH.md %s: %s]' % (pv, public_check(e, pv))
            if bo != int(bo):
                lat = dpacc_log_a_frac_truncated(q, s, bo)
                et = T * lat / (bo - 1) + mp.log1p(-1 / bo) - mp.log(delta * bo) / (bo - 1)
                msg += ('\n      (dp_accounting\'s fractional series with its e^-30 truncation gives, at order %s,'
                        ' eps = %s: %s docs/MATH.md)' % (nstr(bo, 3), nstr(et, 15),
                                                    'reproduces' if ('%.*f' % (nd, float(et))) == pv else 'differs from'))
        log('  q=%s sigma=%s T=%d delta=%s: eps = %s at order %s (next-best order is %s worse)%s'
            % (qs, ss, T, ds, nstr(e, 17), nstr(bo, 6), nstr(gap, 3), msg))
        for es in ('1.0', '2.0', '8.0'):
            eps = D(es)
            d, bo2, gap2 = rdp_delta(rs, eps)
            rows_d.append([fd(q), fd(s), fu(T), fd(eps), fd(d), fd(bo2)])
            log('      delta(eps=%s) = %s at order %s (ln-gap to next order %s)'
                % (es, nstr(d, 17), nstr(bo2, 6), nstr(gap2, 3)))
    log('  (%.1fs)' % (time.time() - t0))
    orders_doc = ('orders: dp_accounting defaults [1 + x/10.0 for x in 1..99] + [11..63] + [128, 256, 512, 1024];\n'
                  '   r(a) = T * rdp(a) with the exact RDP of A; argmin = the first of equal minima (numpy argmin).')
    emit_array('ref_rdp_sgm_eps', 'REF_RDP_SGM_EPS',
               'B. dp_accounting compute_epsilon (Canonne-Kamath-Steinke 2020 Prop. 12): eps = max(0, min over orders\n'
               '   a of [r + log1p(-1/a) - log(delta a)/(a-1)]) (0 if delta^2 + expm1(-r) > 0), best_order = argmin;\n   '
               + orders_doc, rows_e)
    emit_array('ref_rdp_sgm_delta', 'REF_RDP_SGM_DELTA',
               'B. dp_accounting compute_delta: ln delta = min over orders a of min(0.5 log1p(-e^-r),\n'
               '   (a-1)(r - eps + log1p(-1/a)) - log a), delta = min(e^that, 1), best_order = argmin;\n   '
               + orders_doc, rows_d)

    # ---------------- C ----------------
    t0 = time.time()
    rows = []
    worst = mpf(0)
    log('C. Laplace RDP (Mironov 2017 Prop. 6) vs quadrature of the Renyi divergence')
    for bs in ('0.5', '1', '2', '10'):
        b = D(bs)
        line = []
        for als in ('1.5', '2', '4', '16', '64'):
            a = D(als)
            r = mp.log(a / (2 * a - 1) * mp.exp((a - 1) / b) + (a - 1) / (2 * a - 1) * mp.exp(-a / b)) / (a - 1)
            f = lambda x: mp.exp(-(a * abs(x) + (1 - a) * abs(x - 1)) / b) / (2 * b)
            I = mp.quad(f, [-mp.inf, 0, 1, mp.inf])
            rq = mp.log(I) / (a - 1)
            worst = max(worst, abs(rq / r - 1))
            assert abs(rq / r - 1) < mpf(10) ** -40, (bs, als, r, rq)
            rows.append([fd(b), fd(a), fd(r)])
            line.append('%s:%s' % (als, nstr(r, 12)))
        log('  b=%-4s ' % bs + ', '.join(line))
    log('  closed form vs quadrature: max relative difference %s (%.1fs)' % (nstr(worst, 3), time.time() - t0))
    emit_array('ref_rdp_laplace', 'REF_RDP_LAPLACE',
               'C. Laplace mechanism RDP (Mironov 2017 Prop. 6), b = scale/sensitivity:\n'
               '   eps(alpha) = ln(alpha/(2alpha-1) e^{(alpha-1)/b} + (alpha-1)/(2alpha-1) e^{-alpha/b})/(alpha-1)',
               rows)

    # ---------------- D1 ----------------
    def gdp_delta(mu, eps):
        return Phi(-eps / mu + mu / 2) - mp.exp(eps) * Phi(-eps / mu - mu / 2)

    def mu_of(sigmas):
        return mp.sqrt(mp.fsum(1 / s ** 2 for s in sigmas))

    log('D1. Gaussian compositions via Gaussian DP (mu = sqrt(sum 1/sigma_i^2))')
    rows_d, rows_e = [], []
    # eps from delta: sigma = 10 composed 100 times
    mu_x = mu_of([D('10')] * 100)
    mu = D(mu_x)
    delta = D('1e-5')
    lo_, hi_ = mpf(3), mpf(6)             # bisection on ln delta(eps), decreasing in eps
    assert gdp_delta(mu, lo_) > delta > gdp_delta(mu, hi_)
    for _ in range(200):
        mid = (lo_ + hi_) / 2
        if gdp_delta(mu, mid) > delta:
            lo_ = mid
        else:
            hi_ = mid
    eps = (lo_ + hi_) / 2
    assert abs(gdp_delta(mu, eps) / delta - 1) < mpf(10) ** -40
    rows_e.append([fd(mu), fd(delta), fd(eps)])
    log('  sigma=10 x100: mu = %s, eps(delta=1e-5) = %s  [docs/MATH.md 4.37718: %s]'
        % (nstr(mu, 17), nstr(eps, 17), public_check(eps, '4.37718')))
    # delta from eps
    sig_r3 = D(mp.sqrt(3))
    mu_x = mu_of([sig_r3] * 3)
    mu = D(mu_x)
    d = gdp_delta(mu, D('1'))
    rows_d.append([fd(mu), fd(D('1')), fd(d)])
    log('  sigma=sqrt(3) x3: mu = %s (exact from the double sigma: %s), delta(1) = %s  [docs/MATH.md 0.126936: %s]'
        % (nstr(mu, 17), nstr(mu_x, 20), nstr(d, 17), public_check(d, '0.126936')))
    mu_x = mu_of([D('0.8'), D('1.3'), D('2.0'), D('5.0')])
    mu = D(mu_x)
    for es in ('0.5', '1', '3'):
        eps = D(es)
        d = gdp_delta(mu, eps)
        rows_d.append([fd(mu), fd(eps), fd(d)])
        log('  sigmas {0.8,1.3,2,5}: mu = %s, delta(%s) = %s' % (nstr(mu, 17), es, nstr(d, 17)))
    emit_array('ref_gdp_comp_delta', 'REF_GDP_COMP_DELTA',
               'D1. Gaussian compositions, exact: delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),\n'
               '   mu = sqrt(sum 1/sigma_i^2) rounded to the nearest double (values are exact at that double mu).\n'
               '   Rows: sigma = sqrt(3) (nearest double) composed 3 times at eps = 1; sigmas {0.8, 1.3, 2.0, 5.0}\n'
               '   each once at eps = 0.5, 1, 3', rows_d)
    emit_array('ref_gdp_comp_eps', 'REF_GDP_COMP_EPS',
               'D1. Gaussian composition, exact eps(delta) (root of the above): sigma = 10 composed 100 times\n'
               '   (mu = 1 exactly)', rows_e)

    # ---------------- D3 ----------------
    t0 = time.time()
    log('D3. Laplace (unsampled) compositions, exact delta(eps)')

    def lap_delta(b, T, eps, check=False):
        """Exact law of S = sum of T losses (units of 1/b): each loss is +1 w.p. 1/2, -1 w.p.
        e^{-1/b}/2, or continuous l in (-1,1) with density c e^{l/(2b)}, c = e^{-1/(2b)}/(4b).
        A sum of j continuous parts has density c^j e^{s/(2b)} V_j(s), V_j(s) = 2^{j-1} IH_j((s+j)/2)
        (IH_j the Irwin-Hall density); delta = E[(1 - e^{eps - S/b})_+], each polynomial piece
        integrated by Gauss-Legendre (exact up to dps on an analytic piece)."""
        c = mp.exp(-1 / (2 * b)) / (4 * b)
        pp, pm = mpf(1) / 2, mp.exp(-1 / b) / 2
        tot, norm, mgf = [], [], []
        for j in range(T + 1):
            def V(s_, j=j):
                x = (s_ + j) / 2
                kmax = int(mp.floor(x))
                return 2 ** (j - 1) * mp.fsum((-1) ** k * mp.binomial(j, k) * (x - k) ** (j - 1)
                                              for k in range(0, min(kmax, j) + 1)) / mp.factorial(j - 1)
            for npl in range(T - j + 1):
                nmi = T - j - npl
                coef = (mp.factorial(T) / (mp.factorial(npl) * mp.factorial(nmi) * mp.factorial(j))
                        * pp ** npl * pm ** nmi * c ** j)
                m = npl - nmi
                if j == 0:
                    tot.append(coef * max(mpf(0), -mp.expm1(eps - m / b)))
                    norm.append(coef)
                    mgf.append(coef * mp.exp(-m / b))
                    continue
                s0 = eps * b - m
                bps = [mpf(-j + 2 * k) for k in range(j + 1)]
                pts = sorted(set(bps + ([s0] if -j < s0 < j else [])))
                lo = max(mpf(-j), s0)
                f = lambda s_: V(s_) * mp.exp(s_ / (2 * b)) * (-mp.expm1(eps - (m + s_) / b))
                for x0, x1 in zip(pts[:-1], pts[1:]):
                    if x0 >= lo:
                        tot.append(coef * mp.quad(f, [x0, x1], method='gauss-legendre'))
                if check:
                    g = lambda s_: V(s_) * mp.exp(s_ / (2 * b))
                    for x0, x1 in zip(bps[:-1], bps[1:]):
                        norm.append(coef * mp.quad(g, [x0, x1], method='gauss-legendre'))
                        mgf.append(coef * mp.exp(-m / b)
                                   * mp.quad(lambda s_: g(s_) * mp.exp(-s_ / b), [x0, x1], method='gauss-legendre'))
        if check:
            return mp.fsum(tot), mp.fsum(norm), mp.fsum(mgf)
        return mp.fsum(tot)

    def lap_d1(b, e):
        """one-step profile for any real e (closed form)"""
        if e >= 1 / b:
            return mpf(0)
        if e <= -1 / b:
            return -mp.expm1(e)
        return -mp.expm1((e - 1 / b) / 2)

    def lap_rec(b, T, eps):
        """independent check, T = 2, 3: delta_T(eps) = E_{x ~ Lap(0,b)}[delta_{T-1}(eps - L(x))],
        L(x) = (|x-1| - |x|)/b, by nested quadrature in x with cuts at the kinks."""
        if T == 1:
            return lap_d1(b, eps)
        inner = lambda e: lap_rec(b, T - 1, e)
        # continuous part x in (0,1): loss (1-2x)/b; kinks of delta_{T-1}(e) at e = k/b, |k| <= T-1
        kinks = sorted({(1 - (eps - mpf(k) / b) * b) / 2 for k in range(-T, T + 1)} | {mpf(0), mpf(1)})
        kinks = [x for x in kinks if 0 <= x <= 1]
        cont = mp.quad(lambda x: mp.exp(-x / b) / (2 * b) * inner(eps - (1 - 2 * x) / b), kinks,
                       method='gauss-legendre')
        return inner(eps - 1 / b) / 2 + mp.exp(-1 / b) / 2 * inner(eps + 1 / b) + cont

    rows = []
    worst_chk, worst_nm = mpf(0), mpf(0)
    for bs in ('1', '2'):
        b = D(bs)
        for T in (1, 2, 5):
            line = []
            for es in ('0.1', '0.5', '1'):
                eps = D(es)
                d, nm, mg = lap_delta(b, T, eps, check=True)
                worst_nm = max(worst_nm, abs(nm - 1), abs(mg - 1))
                if T == 1:
                    chk = lap_d1(b, eps)
                    worst_chk = max(worst_chk, abs(chk - d))
                elif T == 2:
                    with mp.workdps(30):
                        chk = lap_rec(b, T, eps)
                    worst_chk = max(worst_chk, abs(chk - d) / d if d > 0 else abs(chk))
                rows.append([fd(b), fu(T), fd(eps), fd(d)])
                line.append('%s:%s' % (es, nstr(d, 15)))
            log('  b=%s T=%d: ' % (bs, T) + ', '.join(line))
    # T = 3 by the nested recursion for one case (slower)
    with mp.workdps(25):
        d3r = lap_rec(D('1'), 3, D('0.5'))
    d3 = lap_delta(D('1'), 3, D('0.5'))
    log('  checks: T=1 vs closed form 1 - e^{(eps-1/b)/2} and T=2 vs nested quadrature: max rel. diff %s;'
        % nstr(worst_chk, 3))
    log('          T=3 (b=1, eps=0.5) vs nested quadrature: rel. diff %s; total mass and E[e^-S] = 1 to %s (%.1fs)'
        % (nstr(abs(d3r / d3 - 1), 3), nstr(worst_nm, 3), time.time() - t0))
    assert worst_chk < mpf(10) ** -25 and abs(d3r / d3 - 1) < mpf(10) ** -20 and worst_nm < mpf(10) ** -40
    emit_array('ref_exact_laplace', 'REF_EXACT_LAPLACE',
               'D3. Laplace mechanism (scale b, unsampled) composed T times: exact delta(eps) (tight; P = Lap(0,b),\n'
               '   Q = Lap(1,b), symmetric so both directions agree), from the exact law of the summed losses',
               rows)

    # ---------------- D4 ----------------
    log('D4. (eps0, delta0)-DP composed k times, exact (Kairouz-Oh-Viswanath)')
    rows = []
    for e0s, d0s, k, es in (('1', '1e-6', 10, '3'), ('0.5', '0', 20, '2'), ('0.1', '1e-5', 100, '1')):
        e0, d0, eps = D(e0s), D(d0s), D(es)
        p = mp.exp(e0) / (1 + mp.exp(e0))
        s = mp.fsum(mp.binomial(k, i) * p ** i * (1 - p) ** (k - i) * max(mpf(0), -mp.expm1(eps - (2 * i - k) * e0))
                    for i in range(k + 1))
        dk = -mp.expm1(k * mp.log1p(-d0)) + (1 - d0) ** k * s
        # brute-force check: hockey stick on the k-fold product of the 4-point canonical pair
        Pc = [d0, (1 - d0) * p, (1 - d0) * (1 - p)]
        Qc = [mpf(0), (1 - d0) * (1 - p), (1 - d0) * p]
        hs = []
        for n0 in range(k + 1):
            for n1 in range(k - n0 + 1):
                n2 = k - n0 - n1
                mult = mp.factorial(k) / (mp.factorial(n0) * mp.factorial(n1) * mp.factorial(n2))
                pv = Pc[0] ** n0 * Pc[1] ** n1 * Pc[2] ** n2
                qv = Qc[0] ** n0 * Qc[1] ** n1 * Qc[2] ** n2
                hs.append(mult * max(mpf(0), pv - mp.exp(eps) * qv))
        bf = mp.fsum(hs)
        assert abs(bf - dk) <= mpf(10) ** -40 * dk, (bf, dk)
        rows.append([fd(e0), fd(d0), fu(k), fd(eps), fd(dk)])
        log('  eps0=%s delta0=%s k=%d: delta(%s) = %s (brute-force product hockey stick agrees to %s)'
            % (e0s, d0s, k, es, nstr(dk, 17), nstr(abs(bf - dk) / dk, 3)))
    emit_array('ref_kov_comp', 'REF_KOV_COMP',
               'D4. (eps0, delta0)-DP composed k times, optimal (Kairouz-Oh-Viswanath, docs/MATH.md section 1):\n'
               '   delta(eps) = 1 - (1-delta0)^k + (1-delta0)^k sum_i C(k,i) p^i (1-p)^(k-i) (1 - e^{eps - (2i-k) eps0})_+,\n'
               '   p = e^eps0/(1+e^eps0)', rows)

    # ---------------- D2 ----------------
    t0 = time.time()
    log('D2. Poisson-subsampled Gaussian (add/remove), exact delta(eps)')
    mp.mp.dps = 50
    rows = []
    for qs, ss, es in (('0.01', '1', '0.1'), ('0.2', '0.5', '1'), ('0.5', '1', '0.5')):
        q, s, eps = D(qs), D(ss), D(es)
        S = SGMProfile(q, s)
        rem, add = S.drem1(eps), S.dadd1(eps)
        # direct integration of E_P[(1 - e^{eps - L})_+] in both directions
        zr = S.Linv(eps)            # remove: L(z) > eps  <=>  z > zr
        rq = mp.quad(lambda z: S.P(z) * -mp.expm1(eps - S.L(z)), [zr, zr + 1, zr + 5, mp.inf])
        if eps < -S.l1:             # add: -L(z) > eps  <=>  z < Linv(-eps)
            za = S.Linv(-eps)
            aq = mp.quad(lambda z: npdf(z, 0, s) * -mp.expm1(eps + S.L(z)), [-mp.inf, za - 5, za - 1, za])
        else:
            aq = mpf(0)
        assert abs(rq - rem) < mpf(10) ** -40 and abs(aq - add) < mpf(10) ** -40, (rq, rem, aq, add)
        rows.append([fd(q), fd(s), fu(1), fd(eps), fd(max(rem, add)), fd(rem), fd(add)])
        log('  T=1 q=%s sigma=%s eps=%s: delta = %s (remove %s, add %s); direct quadrature agrees to %s'
            % (qs, ss, es, nstr(max(rem, add), 17), nstr(rem, 17), nstr(add, 17),
               nstr(max(abs(rq - rem), abs(aq - add)), 3)))
    res = {name: (mpf(r), mpf(a), sec) for name, r, a, sec in pending.get()}
    pool.close()
    pool.join()
    mp.mp.dps = 50
    fine_r, fine_a, fsec = res['fine']
    crs_r, crs_a, csec = res['coarse']
    sp_r, sp_a, _ = res['split2']
    fu_r, fu_a, _ = res['full2']
    g_r, g_a, gsec = res['gdp']
    mu = mp.sqrt(2) / D('0.5')
    gd = gdp_delta(mu, D('1'))
    ng_r, _, _ = res['neg2']
    dsplit = abs(sp_r - fu_r)
    e03 = D('0.3')
    dswap = abs(sp_a - (1 - mp.exp(e03) + mp.exp(e03) * ng_r))
    dgdp = max(abs(g_r - gd), abs(g_a - gd))
    assert fine_a == 0 and crs_a == 0   # add losses <= -ln(0.8) each: 3 * 0.223 < 1
    assert sp_a > 0 and abs(fine_r - crs_r) < mpf(10) ** -8 and dsplit < mpf(10) ** -17 and dswap < mpf(10) ** -17
    assert dgdp < mpf(10) ** -18
    rows.append([fd(q3), fd(s3), fu(3), fd(e3), fd(max(fine_r, fine_a)), fd(fine_r), fd(fine_a)])
    log('  T=3 q=0.2 sigma=0.5 eps=1: delta = %s (remove %s, add %s: exactly 0 since 3 * (-ln 0.8) < 1)'
        % (nstr(fine_r, 17), nstr(fine_r, 17), nstr(fine_a, 3)))
    log('      [docs/MATH.md 0.15594: %s]' % public_check(fine_r, '0.15594'))
    log('      accuracy: tanh-sinh step h=1/8 (%.0fs) vs h=1/4 (%.0fs): |diff| = %s (the error of h=1/4; the'
        % (fsec, csec, nstr(abs(fine_r - crs_r), 3)))
    log('      error of tanh-sinh roughly squares when h halves, so h=1/8 is accurate to far below 1e-17)')
    log('      checks (h=1/8), T=2, eps=0.3: remove %s, add %s; remove with its closed-form part'
        % (nstr(sp_r, 17), nstr(sp_a, 17)))
    log('      integrated numerically instead: |diff| = %s; add vs 1 - e^eps + e^eps remove(-eps): |diff| = %s;'
        % (nstr(dsplit, 3), nstr(dswap, 3)))
    log('      same code with q=1, T=2 vs exact Gaussian DP: |diff| = %s' % nstr(dgdp, 3))
    log('  (%.1fs waiting for / running D2)' % (time.time() - t0))
    emit_array('ref_exact_sgm', 'REF_EXACT_SGM',
               'D2. Poisson-subsampled Gaussian, add/remove, composed T times: exact delta(eps) = max(delta_remove,\n'
               '   delta_add); remove: P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2); add: P = N(0,s^2), Q = the mixture;\n'
               '   delta_dir = E_P[(1 - e^{eps - L})_+], L = sum of T i.i.d. losses ln(P/Q).  T = 1 closed form (checked\n'
               '   by quadrature); T = 3 by nested tanh-sinh quadrature, error < 1e-18 absolute', rows)

    assert sorted(arrays) == sorted(ARRAY_ORDER)
    for name in ARRAY_ORDER:
        out.extend(arrays[name])
    emit('#endif /* DPBUDGET_REF_ACCOUNTANTS_H */')
    print('\n'.join(out))
    log('total %.1fs' % (time.time() - T_START))


if __name__ == '__main__':
    main()
