/* numfmt.c - shortest round-trip decimal forms of doubles (see numfmt.h). */
#include "numfmt.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Integers in plain digits, without printf: two digits per division. */
static size_t write_int(uint64_t u, int neg, char *out)
{
    static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930"
                                "31323334353637383940414243444546474849505152535455565758596061"
                                "62636465666768697071727374757677787980818283848586878889909192"
                                "93949596979899";
    char tmp[24];
    size_t n = sizeof tmp;
    while (u >= 100) {
        unsigned r = (unsigned)(u % 100);
        u /= 100;
        n -= 2;
        memcpy(tmp + n, pairs + 2 * r, 2);
    }
    if (u >= 10) {
        n -= 2;
        memcpy(tmp + n, pairs + 2 * u, 2);
    } else {
        tmp[--n] = (char)('0' + u);
    }
    size_t k = 0;
    if (neg)
        out[k++] = '-';
    while (n < sizeof tmp)
        out[k++] = tmp[n++];
    out[k] = '\0';
    return k;
}

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                               1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                               1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

#define TWO53 9007199254740992.0

/* m / 10^k (k >= 1, not a whole number) in plain notation, as %g writes it: the digits of m
 * with the point k places from the right, trailing zeros dropped. */
static size_t plain(int neg, uint64_t m, int k, char out[DPB_NUM_MAX])
{
    char d[24];
    size_t n = write_int(m, 0, d);
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (n <= (size_t)k) {
        out[o++] = '0';
        out[o++] = '.';
        for (size_t z = n; z < (size_t)k; z++)
            out[o++] = '0';
        memcpy(out + o, d, n);
        o += n;
    } else {
        memcpy(out + o, d, n - (size_t)k);
        o += n - (size_t)k;
        out[o++] = '.';
        memcpy(out + o, d + n - k, (size_t)k);
        o += (size_t)k;
    }
    while (out[o - 1] == '0') /* m may end in zeros when a*10^k rounded up to them */
        o--;
    if (out[o - 1] == '.')
        o--;
    out[o] = '\0';
    return o;
}

/* 5^k for k <= 27 (below 2^64). */
static uint64_t pow5(int k)
{
    uint64_t p = 1;
    while (k-- > 0)
        p *= 5;
    return p;
}

/* M * 2^E * 10^k rounded to a whole number, half to even (as printf rounds), computed
 * exactly: M * 5^k fits 128 bits for M < 2^53 and k <= 27. The result must be below 2^64. */
static uint64_t scaled_round(uint64_t M, int E, int k)
{
    unsigned __int128 n = (unsigned __int128)M * pow5(k);
    int s = E + k;
    if (s >= 0)
        return (uint64_t)(n << s);
    s = -s;
    if (s >= 127)
        return 0;
    unsigned __int128 q = n >> s, r = n - (q << s), half = (unsigned __int128)1 << (s - 1);
    if (r > half || (r == half && (q & 1)))
        q++;
    return (uint64_t)q;
}

#define NO_EXPONENT INT_MIN /* the decimal exponent is not known yet */

/* x (1e-4 <= |x| < 1e15, needing 16 or 17 significant digits) as %.16g writes it when that
 * reads back (only tried when try16), else as %.17g: the same digits, computed exactly in
 * integers rather than by printf and strtod. The 16 digits read back when they lie within
 * half a unit in the last place of x (the half below a power of two is half as wide), a tie
 * going to x when its mantissa is even, as strtod rounds. */
static size_t long_decimal(double x, int try16, int X, char out[DPB_NUM_MAX])
{
    double a = fabs(x);
    int e;
    double f = frexp(a, &e);
    uint64_t M = (uint64_t)ldexp(f, 53);
    int E = e - 53;
    /* X = floor(log10 a) (given, when the caller knows it), checked against the 17 digits it
     * gives */
    if (X == NO_EXPONENT)
        X = (int)floor(log10(a));
    uint64_t m17 = 0;
    for (int tries = 0; tries < 3; tries++) {
        m17 = scaled_round(M, E, 16 - X);
        if (m17 >= 100000000000000000ULL)
            X++;
        else if (m17 < 10000000000000000ULL)
            X--;
        else
            break;
    }
    if (!(m17 >= 10000000000000000ULL && m17 < 100000000000000000ULL))
        return 0;
    if (try16) {
        int k = 15 - X;
        uint64_t m16 = scaled_round(M, E, k);
        if (m16 >= 1000000000000000ULL && m16 < 10000000000000000ULL) {
            /* |m16 / 10^k - M 2^E| against half an ulp, all scaled by 10^k 2^t to integers */
            int s = E + k, t = s < 2 ? 2 - s : 0;
            unsigned __int128 p5 = pow5(k);
            unsigned __int128 lhs = (unsigned __int128)m16 << t;
            unsigned __int128 mid = ((unsigned __int128)M * p5) << (s + t);
            unsigned __int128 half = p5 << (s + t - 1), below = p5 << (s + t - 2);
            unsigned __int128 lim = lhs >= mid || M != (1ULL << 52) ? half : below;
            unsigned __int128 d = lhs >= mid ? lhs - mid : mid - lhs;
            if (d < lim || (d == lim && (M & 1) == 0))
                return plain(x < 0, m16, k, out);
        }
    }
    return plain(x < 0, m17, 16 - X, out);
}

/* x (1e-4 <= |x| < 1e15, not a whole number) in plain notation when 15 significant digits or
 * fewer read back to it, else 0: the common case, with one multiplication and one division.
 * X, the decimal exponent of |x| (10^X <= |x| < 10^(X+1)), is e log10(2) rounded down (e the
 * binary exponent) or one less, which the size of the scaled value tells. A decimal of d <= 15
 * digits that reads back lies within half an ulp (1.2e-16 relative) of x, so it is the point
 * of the 15-digit grid nearest to x (that grid's points are 1e-15 relative or more apart), and
 * nearbyint(|x| 10^(14-X)) finds it (the product is off by at most a sixteenth of a unit at
 * that size): its trailing zeros dropped, it is the shortest decimal that reads back, the one
 * %g writes. When it does not read back, no decimal of 15 digits or fewer does, and *X is
 * set; near a power of ten, where the grid may hold 14 or 16 digits, *X is NO_EXPONENT and
 * short_decimal decides. */
static size_t fifteen_digits(double x, char out[DPB_NUM_MAX], int *X)
{
    double a = fabs(x);
    int e;
    frexp(a, &e);
    int k = 14 - (int)floor(e * 0.30102999566398120);
    *X = NO_EXPONENT;
    if (k < 1 || k > 21)
        return 0;
    double p = nearbyint(a * POW10[k]);
    if (p < 1e14) { /* X was one less */
        k++;
        p = nearbyint(a * POW10[k]);
    }
    if (!(p >= 1e14 && p < 1e15))
        return 0;
    if (p / POW10[k] != a) {
        *X = 14 - k; /* the 15-digit grid, so no decimal of 15 digits or fewer reads back */
        return 0;
    }
    /* drop the trailing zeros (at most 14) in four steps: 8, 4, 2 and 1 of them */
    uint64_t m = (uint64_t)p;
    static const uint64_t step[] = {100000000, 10000, 100, 10};
    for (int i = 0, z = 8; i < 4; i++, z /= 2) {
        if (k > z && m % step[i] == 0) {
            m /= step[i];
            k -= z;
        }
    }
    return plain(x < 0, m, k, out);
}

/* Whether some whole m reads back to a at k decimals (m / 10^k == a, m < 2^53): 1 with m in
 * *m, else 0. a * 10^k is off the exact product by at most half a unit below 2^53, and any m
 * that reads back lies within one unit of the exact product: m is nearbyint(a * 10^k) or a
 * neighbour. m and 10^k (k <= 22) are exact doubles, so m / 10^k is correctly rounded, as
 * strtod of the same text is: the check is exact. Only for k where nearbyint(a * 10^k) < 2^53. */
static int reads_back(double a, int k, double *m)
{
    double p = nearbyint(a * POW10[k]);
    if (p / POW10[k] == a)
        *m = p;
    else if (p >= 1.0 && (p - 1.0) / POW10[k] == a)
        *m = p - 1.0;
    else if (p + 1.0 < TWO53 && (p + 1.0) / POW10[k] == a)
        *m = p + 1.0;
    else
        return 0;
    return 1;
}

/* x as m / 10^k with m a whole number below 2^53 and the fewest decimals k that read back to
 * x, written in plain notation; 0 when there is none (x needs more digits, or lies outside
 * 1e-4 <= |x| < 1e15, where %g writes an exponent). The fewest decimals at a fixed magnitude
 * are the fewest significant digits: the shortest. Only for what fifteen_digits leaves
 * undecided (near a power of ten): each k in turn.
 * When none is found, *try16 says whether a 16-digit form with m >= 2^53 (which this cannot
 * check) remains possible; every other form with 16 digits or fewer has been ruled out. */
static size_t short_decimal(double x, char out[DPB_NUM_MAX], int *try16)
{
    double a = fabs(x);
    *try16 = 1;
    if (!(a >= 1e-4 && a < 1e15))
        return 0;
    for (int k = 1; k <= 22; k++) {
        double p = nearbyint(a * POW10[k]), m;
        if (p >= TWO53) {
            /* the last k held m < 2^53: 16 digits there already checked, or 16 digits here */
            *try16 = p <= 1e16; /* 1e16 itself may be 9999999999999999 rounded up */
            return 0;
        }
        if (reads_back(a, k, &m))
            return plain(x < 0, (uint64_t)m, k, out);
    }
    return 0;
}

/* After fifteen_digits ruled out 15 digits or fewer at decimal exponent X: the 16-digit
 * decimal when it reads back and is below 2^53 (which reads_back can check), else 0 with
 * *try16 as short_decimal sets it. 17 digits are 1e16 or more, above 2^53: the 16-digit grid is
 * the only one left to check in doubles. */
static size_t sixteen_digits(double x, int X, char out[DPB_NUM_MAX], int *try16)
{
    double a = fabs(x), m;
    int k = 15 - X; /* 1 <= k <= 19 for 1e-4 <= a < 1e15 */
    *try16 = 1;
    if (nearbyint(a * POW10[k]) >= TWO53) {
        *try16 = nearbyint(a * POW10[k]) <= 1e16;
        return 0;
    }
    if (reads_back(a, k, &m))
        return plain(x < 0, (uint64_t)m, k, out);
    /* 1e16 itself may be 9999999999999999 rounded up */
    *try16 = nearbyint(a * POW10[k + 1]) <= 1e16;
    return 0;
}

/* x as m / 10^k for 1e-22 <= |x| < 1e-4, where %g writes an exponent, with at most 15
 * significant digits (m < 10^15): "d.ddde-N", as short_decimal's search finds it. At 15
 * digits or fewer, at most one decimal of that many digits lies within half a unit of x, so
 * this is the text the first %.Pg that reads back would give, without printf. 0 when x needs
 * more digits (or lies outside that range). */
static size_t small_decimal(double x, char out[DPB_NUM_MAX])
{
    double a = fabs(x);
    if (!(a >= 1e-22 && a < 1e-4))
        return 0;
    for (int k = 5; k <= 22; k++) {
        double p = nearbyint(a * POW10[k]), m = -1.0;
        if (p >= 1e15)
            return 0;
        if (p / POW10[k] == a)
            m = p;
        else if (p >= 1.0 && (p - 1.0) / POW10[k] == a)
            m = p - 1.0;
        else if (p + 1.0 < 1e15 && (p + 1.0) / POW10[k] == a)
            m = p + 1.0;
        if (m < 1.0)
            continue;
        char d[24];
        size_t n = write_int((uint64_t)m, 0, d);
        int e = (int)n - 1 - k;          /* m / 10^k = d[0].d[1..] * 10^e */
        while (n > 1 && d[n - 1] == '0') /* m may end in zeros when a*10^k rounded up */
            n--;
        size_t o = 0;
        if (x < 0)
            out[o++] = '-';
        out[o++] = d[0];
        if (n > 1) {
            out[o++] = '.';
            memcpy(out + o, d + 1, n - 1);
            o += n - 1;
        }
        out[o++] = 'e';
        out[o++] = '-';
        o += write_int((uint64_t)-e, 0, out + o);
        return o;
    }
    return 0;
}

/* Drop the exponent's '+' and its leading zeros: "1e+07" -> "1e7", "1e-05" -> "1e-5". */
static size_t trim_exponent(char *s, size_t len)
{
    char *e = strchr(s, 'e');
    if (e == NULL)
        return len;
    char *from = e + 1, *to = e + 1;
    if (*from == '-')
        to = ++from;
    else if (*from == '+')
        from++;
    while (*from == '0' && from[1] != '\0')
        from++;
    if (from != to) {
        memmove(to, from, (size_t)(s + len + 1 - from));
        len -= (size_t)(from - to);
    }
    return len;
}

size_t dpb_num(double x, char out[DPB_NUM_MAX])
{
    if (isnan(x)) {
        memcpy(out, "nan", 4);
        return 3;
    }
    if (isinf(x)) {
        memcpy(out, x > 0 ? "inf" : "-inf", x > 0 ? 4 : 5);
        return x > 0 ? 3 : 4;
    }
    if (x == 0.0) {
        memcpy(out, "0", 2);
        return 1;
    }
    /* the common case in answers and limits: a whole number below 2^53, where every whole
     * number is a double, in plain digits (1140369, not 1.140369e6) */
    if (fabs(x) < 9007199254740992.0 && x == floor(x))
        return write_int((uint64_t)fabs(x), x < 0, out);
    /* the common case among fractions: a short decimal in plain notation (%g's range for it,
     * 1e-4 <= |x| < 1e15) */
    int try16, X = NO_EXPONENT, in_range = fabs(x) >= 1e-4 && fabs(x) < 1e15;
    size_t k = in_range ? fifteen_digits(x, out, &X) : 0;
    if (k)
        return k;
    k = X != NO_EXPONENT ? sixteen_digits(x, X, out, &try16) : short_decimal(x, out, &try16);
    if (k)
        return k;
    /* and small ones (deltas: 1e-5, 2.5e-7): a short decimal in exponent notation */
    k = small_decimal(x, out);
    if (k)
        return k;
    if (in_range && fabs(x) >= DBL_MIN && (k = long_decimal(x, try16, X, out)) > 0)
        return k;
    /* 15 significant digits always read back as written (DBL_DIG), so from 15 on the first
     * precision whose text reads back to x is the shortest (%g drops trailing zeros). Below
     * DBL_MIN (subnormals) fewer bits are kept and fewer digits may do: try them all. In
     * short_decimal's range, any 15 digits would have been found there: start at 16, or at
     * 17 when it ruled out 16 as well. */
    int n = 0;
    for (int prec = fabs(x) < DBL_MIN ? 1 : !in_range ? 15 : try16 ? 16 : 17; prec <= 17; prec++) {
        n = snprintf(out, DPB_NUM_MAX, "%.*g", prec, x);
        if (prec == 17 || strtod(out, NULL) == x)
            break;
    }
    return trim_exponent(out, n > 0 ? (size_t)n : 0);
}

const char *dpb_num_str(double x, char out[DPB_NUM_MAX])
{
    dpb_num(x, out);
    return out;
}
