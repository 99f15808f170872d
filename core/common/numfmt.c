/* numfmt.c - shortest round-trip decimal forms of doubles (see numfmt.h). */
#include "numfmt.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Integers below 2^53 in plain digits, without printf. */
static size_t write_int(uint64_t u, int neg, char *out)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t k = 0;
    if (neg)
        out[k++] = '-';
    while (n)
        out[k++] = tmp[--n];
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

/* x (1e-4 <= |x| < 1e15, needing 16 or 17 significant digits) as %.16g writes it when that
 * reads back (only tried when try16), else as %.17g: the same digits, computed exactly in
 * integers rather than by printf and strtod. The 16 digits read back when they lie within
 * half a unit in the last place of x (the half below a power of two is half as wide), a tie
 * going to x when its mantissa is even, as strtod rounds. */
static size_t long_decimal(double x, int try16, char out[DPB_NUM_MAX])
{
    double a = fabs(x);
    int e;
    double f = frexp(a, &e);
    uint64_t M = (uint64_t)ldexp(f, 53);
    int E = e - 53;
    /* X = floor(log10 a), checked against the 17 digits it gives */
    int X = (int)floor(log10(a));
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

/* x as m / 10^k with m a whole number below 2^53 and the fewest decimals k that read back to
 * x, written in plain notation; 0 when there is none (x needs more digits, or lies outside
 * 1e-4 <= |x| < 1e15, where %g writes an exponent). m and 10^k (k <= 22) are exact doubles,
 * so m / 10^k is correctly rounded, as strtod of the same text is: the check is exact. The
 * fewest decimals at a fixed magnitude are the fewest significant digits: the shortest.
 * a * 10^k is off the exact product by at most half a unit below 2^53, and any m that reads
 * back lies within one unit of the exact product: m is nearbyint(a * 10^k) or a neighbour.
 * When none is found, *try16 says whether a 16-digit form with m >= 2^53 (which this cannot
 * check) remains possible; every other form with 16 digits or fewer has been ruled out. */
static size_t short_decimal(double x, char out[DPB_NUM_MAX], int *try16)
{
    double a = fabs(x);
    *try16 = 1;
    if (!(a >= 1e-4 && a < 1e15))
        return 0;
    for (int k = 1; k <= 22; k++) {
        double p = nearbyint(a * POW10[k]), m = -1.0;
        if (p >= TWO53) {
            /* the last k held m < 2^53: 16 digits there already checked, or 16 digits here */
            *try16 = p <= 1e16; /* 1e16 itself may be 9999999999999999 rounded up */
            return 0;
        }
        if (p / POW10[k] == a)
            m = p;
        else if (p >= 1.0 && (p - 1.0) / POW10[k] == a)
            m = p - 1.0;
        else if (p + 1.0 < TWO53 && (p + 1.0) / POW10[k] == a)
            m = p + 1.0;
        if (m < 0.0)
            continue;
        return plain(x < 0, (uint64_t)m, k, out);
    }
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
    int try16;
    size_t k = short_decimal(x, out, &try16);
    if (k)
        return k;
    /* and small ones (deltas: 1e-5, 2.5e-7): a short decimal in exponent notation */
    k = small_decimal(x, out);
    if (k)
        return k;
    int in_range = fabs(x) >= 1e-4 && fabs(x) < 1e15;
    if (in_range && fabs(x) >= DBL_MIN && (k = long_decimal(x, try16, out)) > 0)
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
