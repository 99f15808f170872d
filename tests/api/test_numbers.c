/* test_numbers.c - numbers as people write them: the shortest text that reads back to the
 * same double (core/common/numfmt.h), the JSON writer (server/jsonout.h) against jansson's
 * own, and answers and problem details that say 0.05, not 0.050000000000000003. */
#include <float.h>
#include <math.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/common/numfmt.h"
#include "../../server/jsonout.h"
#include "check.h"
#include "suites.h"

static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static uint64_t next64(void)
{
    return tl_splitmix(&rng); /* fixed seed: a failure is reproducible */
}

static double from_bits(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint64_t bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Significant digits in a %g-shaped text. */
static int digits(const char *s)
{
    const char *s0 = s;
    int n = 0, lead = 1;
    for (; *s && *s != 'e'; s++) {
        if (*s < '0' || *s > '9')
            continue;
        if (*s == '0' && lead)
            continue;
        lead = 0;
        n++;
    }
    /* the trailing zeros of a whole number in plain digits are not significant */
    if (strpbrk(s0, ".e") == NULL)
        for (const char *t = s - 1; t >= s0 && *t == '0'; t--)
            n--;
    return n;
}

/* x's text reads back to x bit for bit (-0 reads back as 0), no longer than %.17g's, and
 * one digit fewer would not read back: the form is the shortest. Returns 1 when it holds. */
static int round_trips(double x)
{
    char s[DPB_NUM_MAX];
    size_t n = dpb_num(x, s);
    if (n != strlen(s) || n >= DPB_NUM_MAX)
        return 0;
    double y = strtod(s, NULL);
    if (bits(y) != bits(x == 0.0 ? 0.0 : x))
        return 0;
    if (strchr(s, '+') || strstr(s, "e0") || strstr(s, "e-0") || strchr(s, ','))
        return 0;
    int k = digits(s);
    if (k > 1) {
        char shorter[64];
        snprintf(shorter, sizeof shorter, "%.*g", k - 1, x);
        if (strtod(shorter, NULL) == x)
            return 0;
    }
    return 1;
}

static void shortest_round_trip_random_bits(void)
{
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        double x = from_bits(next64());
        if (x != x || x - x != 0.0) /* NaN, infinities */
            continue;
        if (!round_trips(x) && bad++ < 5) {
            char s[DPB_NUM_MAX];
            dpb_num(x, s);
            CHECKF(0, "%.17g (bits %016" PRIx64 ") written '%s'", x, bits(x), s);
        }
    }
    CHECKF(bad == 0, "%d of 200000 random doubles", bad);
}

/* %g's own text for x: the first precision whose text reads back, its exponent trimmed
 * ("1e-05" -> "1e-5"), as dpb_num writes numbers outside plain notation. */
static void printf_shortest(double x, char out[64])
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, 64, "%.*g", prec, x);
        if (strtod(out, NULL) == x)
            break;
    }
    char *e = strchr(out, 'e');
    if (e == NULL)
        return;
    char *from = e + 1, *to = e + 1;
    if (*from == '-')
        to = ++from;
    else if (*from == '+')
        from++;
    while (*from == '0' && from[1] != '\0')
        from++;
    memmove(to, from, strlen(from) + 1);
}

/* dpb_num(x) is printf_shortest(x); the first 5 differences (bad so far) are reported. */
static int same_as_printf(double x, int bad)
{
    char s[DPB_NUM_MAX], want[64];
    dpb_num(x, s);
    printf_shortest(x, want);
    if (strcmp(s, want) == 0)
        return 1;
    if (bad < 5)
        CHECKF(0, "%.17g written '%s', printf's shortest '%s'", x, s, want);
    return 0;
}

/* Numbers written without printf (small ones with 15 digits or fewer: 1e-5, 2.5e-7; 16 or
 * 17 digits in plain notation): the text must be printf's, byte for byte. */
static void numbers_written_as_printf_would(void)
{
    int bad = 0, n = 0;
    for (int i = 0; i < 100000; i++) {
        /* m * 10^-k with 1 to 15 digits, and random doubles in 1e-22 .. 1e-4 */
        double x;
        if (i % 2) {
            char t[48];
            unsigned long long m = next64() % (i % 4 == 1 ? 1000ULL : 1000000000000000ULL);
            snprintf(t, sizeof t, "%llue-%d", m, 5 + (int)(next64() % 25));
            x = strtod(t, NULL);
        } else {
            x = from_bits((next64() & 0x000FFFFFFFFFFFFFULL) |
                          ((uint64_t)(1023 - 14 - next64() % 60) << 52));
        }
        if (next64() & 1)
            x = -x;
        if (x == 0.0)
            continue;
        n++;
        bad += !same_as_printf(x, bad);
    }
    CHECKF(bad == 0, "%d of %d small doubles", bad, n);
    /* and 16 or 17 digits in plain notation (1e-4 .. 1e15), computed exactly in integers:
     * random doubles there, and the neighbours of powers of two (where the gap below is half
     * the gap above) */
    bad = n = 0;
    for (int i = 0; i < 100000; i++) {
        double x = from_bits((next64() & 0x000FFFFFFFFFFFFFULL) |
                             ((uint64_t)(1023 - 14 + next64() % 64) << 52));
        if (i % 4 == 0) {
            x = ldexp(1.0, (int)(next64() % 63) - 13);
            x = nextafter(x, i % 8 ? 0.0 : 1e300);
        }
        if (!(x >= 1e-4 && x < 1e15) || x == floor(x))
            continue;
        n++;
        bad += !same_as_printf(x, bad);
    }
    CHECKF(bad == 0, "%d of %d doubles in plain notation", bad, n);
    /* and short decimals in plain notation (1 to 16 digits, 1e-4 .. 1e15), found on the 15-
     * and 16-digit grids: the fewest, as printf's first precision that reads back, and the
     * decimals next to them (one more digit, one unit off) */
    bad = n = 0;
    for (int i = 0; i < 100000; i++) {
        char t[48];
        int ndig = 1 + (int)(next64() % 16);
        unsigned long long m = 1 + next64() % 9;
        for (int d = 1; d < ndig; d++)
            m = m * 10 + next64() % 10;
        if (i % 3 == 1)
            m = m * 10 + 1 + next64() % 9;
        else if (i % 3 == 2)
            m += next64() % 2 ? 1 : m > 1 ? -1ULL : 1;
        snprintf(t, sizeof t, "%llue%d", m, -(int)(next64() % 24));
        double x = strtod(t, NULL);
        if (!(x >= 1e-4 && x < 1e15) || x == floor(x))
            continue;
        n++;
        bad += !same_as_printf(next64() & 1 ? -x : x, bad);
    }
    CHECKF(bad == 0 && n > 30000, "%d of %d short decimals in plain notation", bad, n);
    char s[DPB_NUM_MAX];
    CHECK(strcmp(dpb_num_str(0.463791055202202, s), "0.463791055202202") == 0);
    CHECK(strcmp(dpb_num_str(123456789012345.6, s), "123456789012345.6") == 0);
    CHECK(strcmp(dpb_num_str(0.0001, s), "0.0001") == 0);
    CHECK(strcmp(dpb_num_str(0.30486861157348816, s), "0.30486861157348816") == 0);
    CHECK(strcmp(dpb_num_str(0.014754478187500511, s), "0.014754478187500511") == 0);
    CHECK(strcmp(dpb_num_str(-4.605170269485859, s), "-4.605170269485859") == 0);
    CHECK(strcmp(dpb_num_str(1e-5, s), "1e-5") == 0);
    CHECK(strcmp(dpb_num_str(-2.5e-7, s), "-2.5e-7") == 0);
    CHECK(strcmp(dpb_num_str(9.99999999999999e-5, s), "9.99999999999999e-5") == 0);
    CHECK(strcmp(dpb_num_str(1e-22, s), "1e-22") == 0);
}

static void shortest_round_trip_special_values(void)
{
    int bad = 0;
    /* subnormals: the smallest, random mantissas, the largest */
    CHECK(round_trips(from_bits(1)));
    CHECK(round_trips(from_bits(0x000FFFFFFFFFFFFFULL)));
    CHECK(round_trips(DBL_MIN) && round_trips(DBL_MAX) && round_trips(-DBL_MAX));
    for (int i = 0; i < 20000; i++)
        bad += !round_trips(from_bits(next64() & 0x800FFFFFFFFFFFFFULL));
    /* every power of ten a double holds, and its neighbours */
    for (int e = -323; e <= 308; e++) {
        char t[16];
        snprintf(t, sizeof t, "1e%d", e);
        double p = strtod(t, NULL);
        bad +=
            !round_trips(p) + !round_trips(nextafter(p, 0.0)) + !round_trips(nextafter(p, DBL_MAX));
        char s[DPB_NUM_MAX];
        dpb_num(p, s);
        /* a power of ten is one digit */
        bad += digits(s) != 1;
    }
    /* whole numbers around 2^53 and 1e17, where the plain-digit form ends */
    for (double x = 9007199254740000.0; x < 9007199254740999.0; x = nextafter(x, DBL_MAX))
        bad += !round_trips(x);
    for (double x = 99999999999999000.0; x < 100000000000002000.0; x = nextafter(x, 1e300))
        bad += !round_trips(x);
    CHECKF(bad == 0, "%d special values", bad);

    char s[DPB_NUM_MAX];
    CHECK(strcmp(dpb_num_str(0.1 + 0.2, s), "0.30000000000000004") == 0);
    CHECK(strcmp(dpb_num_str(0.05, s), "0.05") == 0);
    CHECK(strcmp(dpb_num_str(7.8, s), "7.8") == 0);
    CHECK(strcmp(dpb_num_str(0.0099999991650223611, s), "0.009999999165022361") == 0);
    CHECK(strcmp(dpb_num_str(1e-7, s), "1e-7") == 0);
    CHECK(strcmp(dpb_num_str(2.5e21, s), "2.5e21") == 0);
    CHECK(strcmp(dpb_num_str(-0.0, s), "0") == 0);
    CHECK(strcmp(dpb_num_str(1140369.0, s), "1140369") == 0);
    CHECK(strcmp(dpb_num_str(-3.0, s), "-3") == 0);
    CHECK(strcmp(dpb_num_str(5e-324, s), "5e-324") == 0);
    CHECK(strcmp(dpb_num_str(1.7976931348623157e308, s), "1.7976931348623157e308") == 0);
}

/* A tree without reals: jsonout writes exactly what json_dumps(JSON_COMPACT) writes. */
static void jsonout_matches_jansson(void)
{
    json_t *o = json_object();
    char all[128];
    for (int i = 1; i < 128; i++)
        all[i - 1] = (char)i;
    all[127] = '\0';
    json_object_set_new(o, "ascii", json_string(all));
    json_object_set_new(o, "utf8", json_string("\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 / \\ \""));
    json_object_set_new(o, "nul", json_stringn("a\0b", 3));
    json_object_set_new(o, "k\"ey\n", json_integer(-1));
    json_object_set_new(o, "min", json_integer(INT64_MIN));
    json_object_set_new(o, "max", json_integer(INT64_MAX));
    json_object_set_new(o, "zero", json_integer(0));
    json_object_set_new(o, "empty_o", json_object());
    json_object_set_new(o, "empty_a", json_array());
    json_object_set_new(o, "", json_string(""));
    json_t *a = json_array();
    json_array_append_new(a, json_true());
    json_array_append_new(a, json_false());
    json_array_append_new(a, json_null());
    json_array_append_new(a, json_pack("{s:[i,{s:s}]}", "z", 7, "y", "x"));
    json_object_set_new(o, "list", a);
    json_object_set_new(o, "b_after_list", json_string("insertion order is kept"));
    size_t n = 0;
    char *mine = jsonout_dump(o, &n);
    char *theirs = json_dumps(o, JSON_COMPACT);
    CHECK(mine && theirs);
    if (mine && theirs) {
        CHECKF(strcmp(mine, theirs) == 0, "\n mine   %s\n theirs %s", mine, theirs);
        CHECK(n == strlen(theirs) + 2 || n == strlen(mine)); /* "nul" holds a NUL: see below */
        CHECK(n == strlen(mine));
    }
    free(mine);
    free(theirs);
    json_decref(o);
}

/* Strings with one byte to escape (or not) at every offset: the writer scans eight bytes at
 * a time, so the byte is tried in every lane of the first words and after them, and the
 * text must stay json_dumps's. */
static void jsonout_escapes_at_every_offset(void)
{
    static const char special[] = {'"',  '\\', '\n', 0x01, 0x1f, 0x20,
                                   0x7f, '!',  '#',  '[',  ']',  (char)0xc3};
    int bad = 0, n = 0;
    for (size_t len = 0; len < 40; len++) {
        for (size_t at = 0; at <= len; at++) {
            for (size_t k = 0; k < sizeof special; k++) {
                char str[48];
                memset(str, 'a', len);
                size_t sl = len;
                if (at < len) {
                    str[at] = special[k];
                    if (special[k] == (char)0xc3) { /* a two-byte UTF-8 letter: e acute */
                        memmove(str + at + 1, str + at, len - at);
                        str[at + 1] = (char)0xa9;
                        sl++;
                    }
                }
                json_t *o = json_object();
                json_object_set_new(o, "s", json_stringn(str, sl));
                json_object_set_new(o, str, json_integer((json_int_t)len)); /* a key too */
                size_t ln = 0;
                char *mine = jsonout_dump(o, &ln), *theirs = json_dumps(o, JSON_COMPACT);
                n++;
                if (!(mine && theirs && strcmp(mine, theirs) == 0) && bad++ < 3)
                    CHECKF(0, "length %zu, byte 0x%02x at %zu:\n mine   %s\n theirs %s", len,
                           (unsigned char)special[k], at, mine ? mine : "(null)",
                           theirs ? theirs : "(null)");
                free(mine);
                free(theirs);
                json_decref(o);
            }
        }
    }
    CHECKF(bad == 0, "%d of %d strings", bad, n);
}

/* Reals: the shortest text, a '.' or an exponent always (a real stays a real), every value
 * read back bit for bit; where %.17g is already shortest, jansson's exact text. */
/* The writer (jsonout_w) gives the same bytes as the tree with the same members, and refuses
 * what the tree's dump refuses. */
static void jsonout_writer_matches_tree(void)
{
    json_t *inner = json_pack("{s:[i,{s:s}], s:f}", "z", 7, "y", "x\n\"", "r", 0.1);
    json_t *o = json_pack("{s:s, s:b, s:[{s:f, s:f}, {s:f, s:f}], s:[], s:{}, s:O, s:f}", "a",
                          "\xc3\xa9 \x01", "ok", 1, "list", "x", 1.0, "y", 1e-5, "x", -2.5, "y",
                          0.30000000000000004, "empty_a", "empty_o", "tree", inner, "last", 7.8);
    jsonout_w w;
    jsonout_init(&w);
    jsonout_open(&w, '{');
    jsonout_key(&w, "a");
    jsonout_str(&w, "\xc3\xa9 \x01");
    jsonout_key(&w, "ok");
    jsonout_bool(&w, 1);
    jsonout_key(&w, "list");
    jsonout_open(&w, '[');
    const double xy[] = {1.0, 1e-5, -2.5, 0.30000000000000004};
    for (int i = 0; i < 2; i++) {
        jsonout_open(&w, '{');
        jsonout_key(&w, "x");
        jsonout_realv(&w, xy[2 * i]);
        jsonout_key(&w, "y");
        jsonout_realv(&w, xy[2 * i + 1]);
        jsonout_close(&w, '}');
    }
    jsonout_close(&w, ']');
    jsonout_key(&w, "empty_a");
    jsonout_open(&w, '[');
    jsonout_close(&w, ']');
    jsonout_key(&w, "empty_o");
    jsonout_open(&w, '{');
    jsonout_close(&w, '}');
    jsonout_key(&w, "tree");
    jsonout_tree(&w, inner);
    json_t *last = json_pack("{s:f}", "last", 7.8);
    jsonout_members(&w, last);
    jsonout_close(&w, '}');
    size_t n = 0, m = 0;
    char *mine = jsonout_finish(&w, &n);
    char *tree = jsonout_dump(o, &m);
    CHECK(mine && tree);
    if (mine && tree)
        CHECKF(n == m && strcmp(mine, tree) == 0, "\n writer %s\n tree   %s", mine, tree);
    free(mine);
    free(tree);
    json_decref(last);
    json_decref(inner);
    json_decref(o);
    /* a non-finite real, an unclosed object, a key without its value: NULL */
    jsonout_init(&w);
    jsonout_open(&w, '[');
    jsonout_realv(&w, 1.0 / 0.0);
    jsonout_close(&w, ']');
    CHECK(jsonout_finish(&w, &n) == NULL);
    jsonout_init(&w);
    jsonout_open(&w, '{');
    CHECK(jsonout_finish(&w, &n) == NULL);
    jsonout_init(&w);
    jsonout_open(&w, '{');
    jsonout_key(&w, "k");
    jsonout_close(&w, '}');
    CHECK(jsonout_finish(&w, &n) == NULL);
}

static void jsonout_reals(void)
{
    json_t *a = json_array();
    static const double fixed[] = {0.05,
                                   7.8,
                                   0.1 + 0.2,
                                   1.0,
                                   -0.0,
                                   0.0,
                                   1e300,
                                   1e-300,
                                   1e16,
                                   1e17,
                                   123456789012345678.0,
                                   5e-324,
                                   0.009999999165022361};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        json_array_append_new(a, json_real(fixed[i]));
    for (int i = 0; i < 5000; i++) {
        double x = from_bits(next64());
        if (x == x && x - x == 0.0)
            json_array_append_new(a, json_real(x));
    }
    size_t n = 0;
    char *s = jsonout_dump(a, &n);
    CHECK(s != NULL);
    if (s == NULL) {
        json_decref(a);
        return;
    }
    CHECKF(strncmp(s,
                   "[0.05,7.8,0.30000000000000004,1.0,0.0,0.0,1e300,1e-300,1e16,"
                   "1e17,1.2345678901234568e17,5e-324,0.009999999165022361,",
                   115) == 0,
           "%.160s", s);
    json_error_t e;
    json_t *back = json_loads(s, 0, &e);
    CHECKF(back && json_array_size(back) == json_array_size(a), "%s", e.text);
    int bad = 0;
    for (size_t i = 0; back && i < json_array_size(a); i++) {
        json_t *v = json_array_get(back, i);
        double want = json_real_value(json_array_get(a, i));
        bad += !json_is_real(v) || bits(json_real_value(v)) != bits(want == 0.0 ? 0.0 : want);
    }
    CHECKF(bad == 0, "%d reals did not read back as the same double", bad);
    json_decref(back);
    free(s);
    /* a value %.17g already writes shortest: jansson's text, byte for byte */
    int same = 0, tried = 0;
    for (int i = 0; i < 20000 && tried < 2000; i++) {
        double x = from_bits(next64());
        char t[DPB_NUM_MAX];
        if (!(x == x && x - x == 0.0) || fabs(x) < DBL_MIN || digits(dpb_num_str(x, t)) != 17)
            continue;
        tried++;
        json_t *one = json_real(x);
        char *mine = jsonout_dump(one, &n);
        char *theirs = json_dumps(one, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(17));
        same += mine && theirs && strcmp(mine, theirs) == 0;
        free(mine);
        free(theirs);
        json_decref(one);
    }
    CHECKF(tried >= 1000 && same == tried, "%d of %d written as jansson does", same, tried);
    json_decref(a);
}

/* An answer over HTTP: the request's 0.05 comes back as 0.05, and 7.8 as 7.8. */
static void answers_say_what_was_asked(void)
{
    api_reply r;
    api_postf(&r, "/v1/delta",
              "{\"accountant\":\"thm41\",\"event\":" EPOCH_1 ",\"epsilons\":[0.05,7.8]}");
    CHECK(r.status == 200);
    CHECKF(strstr(r.body, "\"epsilon\":0.05,") != NULL, "%.300s", r.body);
    CHECKF(strstr(r.body, "\"epsilon\":7.8,") != NULL, "%.300s", r.body);
    CHECK(strstr(r.body, "0.050000000000000003") == NULL);
    CHECK(strstr(r.body, "7.7999999999999998") == NULL);
    /* a value that needs its digits keeps them, and reads back to the same double */
    CHECKF(strstr(r.body, "\"delta\":0.009999999165022361") != NULL, "%.600s", r.body);
    api_reply_free(&r);
}

/* Problem details quote numbers the same way. */
static void problem_details_say_what_was_sent(void)
{
    api_reply r;
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":"
              "1000000.1,\"rounds\":100},\"epsilon\":1}");
    CHECK(is_problem(&r, 400, "invalid_parameter", NULL));
    const char *d = jstr(r.json, "detail");
    CHECKF(d && strstr(d, "(got 1000000.1)") != NULL, "%s", d ? d : "(no detail)");
    api_reply_free(&r);
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"PoissonSampledDpEvent\",\"sampling_probability\":"
              "1.1,\"event\":" EPOCH_1 "},\"epsilon\":1}");
    d = jstr(r.json, "detail");
    CHECKF(r.status == 400 && d && strstr(d, "(got 1.1)") != NULL, "%s", d ? d : "(no detail)");
    api_reply_free(&r);
}

/* /metrics: every _sum is written shortest (before: %.6f, "0.500000"). */
static void metrics_sums_are_shortest(void)
{
    api_reply r;
    api_get("/healthz", &r); /* at least one request counted */
    api_reply_free(&r);
    api_get("/metrics", &r);
    CHECK(r.status == 200);
    int sums = 0, bad = 0;
    for (const char *l = r.body; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (*l == '#')
            continue;
        const char *end = strchr(l, '\n');
        size_t n = end ? (size_t)(end - l) : strlen(l);
        const char *sp = memchr(l, ' ', n);
        const char *name_end = memchr(l, '{', n);
        if (sp == NULL || (name_end == NULL || name_end > sp ? sp : name_end) - l < 4)
            continue;
        size_t name_len = (size_t)((name_end && name_end < sp ? name_end : sp) - l);
        if (strncmp(l + name_len - 4, "_sum", 4) != 0)
            continue;
        char v[64], w[DPB_NUM_MAX];
        size_t vn = n - (size_t)(sp + 1 - l);
        if (vn >= sizeof v)
            continue;
        memcpy(v, sp + 1, vn);
        v[vn] = '\0';
        sums++;
        if (strcmp(v, dpb_num_str(strtod(v, NULL), w)) != 0 && bad++ < 3)
            CHECKF(0, "%.*s: '%s', shortest '%s'", (int)n, l, v, w);
    }
    CHECKF(sums >= 2 && bad == 0, "%d sums, %d not shortest", sums, bad);
    api_reply_free(&r);
}

const tl_test NUMBER_TESTS[] = {
    TL_T(metrics_sums_are_shortest),
    TL_T(shortest_round_trip_random_bits),
    TL_T(shortest_round_trip_special_values),
    TL_T(numbers_written_as_printf_would),
    TL_T(jsonout_matches_jansson),
    TL_T(jsonout_escapes_at_every_offset),
    TL_T(jsonout_reals),
    TL_T(jsonout_writer_matches_tree),
    TL_T(answers_say_what_was_asked),
    TL_T(problem_details_say_what_was_sent),
};
const size_t NUMBER_NTESTS = sizeof NUMBER_TESTS / sizeof NUMBER_TESTS[0];
