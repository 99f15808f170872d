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
    /* 15 significant digits always read back as written (DBL_DIG), so from 15 on the first
     * precision whose text reads back to x is the shortest (%g drops trailing zeros). Below
     * DBL_MIN (subnormals) fewer bits are kept and fewer digits may do: try them all. */
    int n = 0;
    for (int prec = fabs(x) < DBL_MIN ? 1 : 15; prec <= 17; prec++) {
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
