/*
 * spend_memo.c - a client's memo (spend.h: spend_eval_more, spend_rdp_within): the folds
 * spend_eval computes, kept per client so that its next round costs O(n) comparisons and
 * no sum over its history.
 *
 * spend_eval sums the terms' RDP curves in sid order, r[k] += count * rdp[k] from zero, and
 * hashes them in the same order (spend_cache_key): both are left folds. The memo keeps both folds
 * over P, every term of the client but the one of the highest sid. A composition whose
 * sid-sorted terms begin with exactly P is finished from them with its few terms after P
 * (the tail): the same operations on the same values in the same order as from scratch, so
 * the same bits (the build is ISO C, -std=c11: no contraction into fused multiply-adds).
 *
 * May call: spend_eval.c (spend_eval, the rdp conversion, the filter level, the pld
 * decision), spend_cache.c (the key fold, spend_cache_has_key), spend_kept.c (whether any
 * composition is kept). Called by the ledger only.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"
#include "spend_int.h"

#define MEMO_TAIL 4 /* most terms after P that a composition may have to be finished here */

struct spend_memo {
    double delta;
    uint8_t rel;
    uint32_t m, cap; /* the terms covered: P = s[0..m-1), then the last, s[m-1] */
    struct mterm {
        uint32_t sid;
        uint64_t count;
    } * s;                      /* sorted by sid */
    uint32_t *rank;             /* rank[i]: the position in s of the caller's term i */
    uint64_t hpre;              /* cache_key's state after delta, relation and P */
    double rpre[RDP_CURVE_LEN]; /* the RDP curves of P, summed */
};

typedef struct {
    spend_term t;
    uint32_t at; /* the caller's index, or UINT32_MAX for the event added */
} mtail;

void spend_memo_free(spend_memo *mm)
{
    if (mm == NULL)
        return;
    free(mm->s);
    free(mm->rank);
    free(mm);
}

size_t spend_memo_bytes(const spend_memo *mm)
{
    return mm ? sizeof *mm + mm->cap * (sizeof *mm->s + sizeof *mm->rank) : 0;
}

/* The composition t[0..n) with k more of x (k 0: none) as P then tail[0..*nt) in sid order,
 * when the memo covers it; else 0. */
static int memo_match(const spend_memo *mm, double delta, dp_relation rel, const spend_term *t,
                      size_t n, const spend_event *x, uint64_t k, mtail tail[MEMO_TAIL], size_t *nt)
{
    if (mm == NULL || mm->delta != delta || mm->rel != (uint8_t)rel || n < mm->m)
        return 0;
    size_t m = mm->m, q = 0;
    int64_t psid = m >= 2 ? (int64_t)mm->s[m - 2].sid : -1; /* P's highest */
    for (size_t i = 0; i < m; i++) {
        uint32_t p = mm->rank[i];
        if (mm->s[p].sid != t[i].ev->sid)
            return 0;
        if (p + 1 < m) {
            if (mm->s[p].count != t[i].count)
                return 0;
        } else {
            tail[q++] = (mtail){t[i], (uint32_t)i};
        }
    }
    for (size_t i = m; i < n; i++) {
        if ((int64_t)t[i].ev->sid <= psid || q == MEMO_TAIL)
            return 0;
        tail[q++] = (mtail){t[i], (uint32_t)i};
    }
    if (k > 0) {
        size_t j = 0;
        while (j < q && tail[j].t.ev != x)
            j++;
        if (j < q) {
            tail[j].t.count += k;
        } else {
            if ((int64_t)x->sid <= psid || q == MEMO_TAIL)
                return 0;
            tail[q++] = (mtail){{(spend_event *)x, k}, UINT32_MAX};
        }
    }
    for (size_t i = 1; i < q; i++) /* a few: insertion */
        for (size_t j = i; j > 0 && tail[j - 1].t.ev->sid > tail[j].t.ev->sid; j--) {
            mtail s = tail[j];
            tail[j] = tail[j - 1];
            tail[j - 1] = s;
        }
    for (size_t i = 0; i < q; i++)
        if (tail[i].t.ev->cls.kind != SPEND_RDP || (i > 0 && tail[i - 1].t.ev == tail[i].t.ev))
            return 0;
    *nt = q;
    return 1;
}

/* The folds finished: the summed RDP curves and the cache key of P then tail[0..q). */
static uint64_t memo_finish(const spend_memo *mm, const mtail *tail, size_t q, double *r)
{
    memcpy(r, mm->rpre, sizeof mm->rpre);
    uint64_t h = mm->hpre;
    for (size_t i = 0; i < q; i++) {
        spend_add_curve(r, tail[i].t.ev->cls.rdp, tail[i].t.count);
        h = spend_key_term(h, tail[i].t.ev->sid, tail[i].t.count);
    }
    return h;
}

/* The sorted terms of the composition (m - 1 + q of them) into out. */
static void memo_sorted(const spend_memo *mm, const spend_term *t, const mtail *tail, size_t q,
                        spend_term *out)
{
    for (size_t i = 0; i < mm->m; i++)
        if (mm->rank[i] + 1 < mm->m)
            out[mm->rank[i]] = t[i];
    for (size_t j = 0; j < q; j++)
        out[mm->m - 1 + j] = tail[j].t;
}

static int memo_room(spend_memo *mm, size_t n)
{
    if (n <= mm->cap)
        return 0;
    size_t cap = mm->cap ? mm->cap : SPEND_MEMO_MIN;
    while (cap < n)
        cap *= 2;
    struct mterm *s = realloc(mm->s, cap * sizeof *s);
    if (s == NULL)
        return -1;
    mm->s = s;
    uint32_t *rk = realloc(mm->rank, cap * sizeof *rk);
    if (rk == NULL)
        return -1;
    mm->rank = rk;
    mm->cap = (uint32_t)cap;
    return 0;
}

/* P grows by tail[0..q-1), the last becomes tail[q-1]: the memo covers t[0..n) (n = m-1+q). */
static int memo_advance(spend_memo *mm, const mtail *tail, size_t q)
{
    if (memo_room(mm, mm->m - 1 + q) != 0)
        return -1;
    for (size_t j = 0; j + 1 < q; j++) {
        spend_add_curve(mm->rpre, tail[j].t.ev->cls.rdp, tail[j].t.count);
        mm->hpre = spend_key_term(mm->hpre, tail[j].t.ev->sid, tail[j].t.count);
    }
    for (size_t j = 0; j < q; j++) {
        uint32_t p = mm->m - 1 + (uint32_t)j;
        mm->s[p] = (struct mterm){tail[j].t.ev->sid, tail[j].t.count};
        mm->rank[tail[j].at] = p;
    }
    mm->m += (uint32_t)q - 1;
    return 0;
}

typedef struct {
    uint32_t sid, at;
} sidpos;

static int cmp_sidpos(const void *a, const void *b)
{
    uint32_t x = ((const sidpos *)a)->sid, y = ((const sidpos *)b)->sid;
    return x < y ? -1 : x > y;
}

/* The memo of t[0..n) from scratch, into *memo (made or reused); freed when t is not one a
 * memo serves. */
static void memo_build(spend_memo **memo, double delta, dp_relation rel, const spend_term *t,
                       size_t n)
{
    int ok = n >= SPEND_MEMO_MIN && n < UINT32_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = t[i].ev->cls.kind == SPEND_RDP;
    spend_memo *mm = *memo;
    sidpos *o = ok ? malloc(n * sizeof *o) : NULL;
    if (ok && o != NULL && mm == NULL)
        mm = calloc(1, sizeof *mm);
    if (o == NULL || mm == NULL || memo_room(mm, n) != 0) {
        free(o);
        spend_memo_free(mm);
        *memo = NULL;
        return;
    }
    for (size_t i = 0; i < n; i++)
        o[i] = (sidpos){t[i].ev->sid, (uint32_t)i};
    qsort(o, n, sizeof *o, cmp_sidpos);
    mm->delta = delta;
    mm->rel = (uint8_t)rel;
    mm->m = (uint32_t)n;
    mm->hpre = spend_key_start(delta, rel);
    memset(mm->rpre, 0, sizeof mm->rpre);
    for (size_t j = 0; j < n; j++) {
        const spend_term *tj = &t[o[j].at];
        mm->s[j] = (struct mterm){tj->ev->sid, tj->count};
        mm->rank[o[j].at] = (uint32_t)j;
        if (j + 1 == n)
            break;
        spend_add_curve(mm->rpre, tj->ev->cls.rdp, tj->count);
        mm->hpre = spend_key_term(mm->hpre, tj->ev->sid, tj->count);
    }
    free(o);
    *memo = mm;
}

static int memo_mode(int mode)
{
    return mode == LEDGER_PLD || mode == LEDGER_RDP || mode == LEDGER_RDP_FILTER;
}

/* The spend of a composition the memo covers (spend_eval's, bit for bit). */
static void memo_eval(spend_engine *g, const spend_memo *mm, int mode, double eps, double delta,
                      dp_relation rel, const spend_term *t, const mtail *tail, size_t q,
                      const spend_event *x, uint64_t k, spend_result *out)
{
    double r[RDP_CURVE_LEN];
    uint64_t key = memo_finish(mm, tail, q, r);
    memset(out, 0, sizeof *out);
    out->accountant = -1;
    out->spent = HUGE_VAL;
    if (mode == LEDGER_RDP_FILTER) {
        out->spent = spend_filter_level(r, delta);
        return;
    }
    if (mode == LEDGER_RDP && !(delta > 0.0))
        return;
    double rv = spend_rdp_convert(r, delta < 1.0 ? delta : 0.999999999);
    if (mode == LEDGER_RDP) {
        out->spent = rv;
        out->accountant = DP_ACCT_RDP;
        return;
    }
    size_t m = mm->m - 1 + q;
    /* spend_pld_decide's answer, without a lookup */
    if (rv <= eps && !spend_cache_has_key(&g->cache, key) && !spend_kept_any(&g->kept)) {
        out->spent = rv;
        out->accountant = DP_ACCT_RDP;
        return;
    }
    spend_term stack[64], *s = m <= 64 ? stack : malloc(m * sizeof *s);
    if (s == NULL)
        return; /* nothing certified: refuses */
    memo_sorted(mm, t, tail, q, s);
    spend_pld_decide(g, eps, delta, rel, s, m, rv, key, x, k, out);
    if (s != stack)
        free(s);
}

void spend_eval_more(spend_engine *g, const spend_memo *memo, spend_memo **update, int mode,
                     double eps, double delta, dp_relation rel, const spend_term *t, size_t n,
                     spend_event *x, uint64_t k, spend_result *out)
{
    mtail tail[MEMO_TAIL];
    size_t q = 0;
    if (k == 0)
        x = NULL;
    if (update != NULL)
        memo = *update;
    int hit = memo_mode(mode) && memo_match(memo, delta, rel, t, n, x, k, tail, &q);
    if (hit) {
        memo_eval(g, memo, mode, eps, delta, rel, t, tail, q, x, k, out);
    } else {
        spend_term stack[16], *w = n + 1 <= 16 ? stack : malloc((n + 1) * sizeof *w);
        if (w == NULL) {
            memset(out, 0, sizeof *out);
            out->accountant = -1;
            out->spent = HUGE_VAL; /* refuses: never admits on a spend it could not compute */
            return;
        }
        size_t m = n, i;
        if (n)
            memcpy(w, t, n * sizeof *w);
        for (i = 0; x != NULL && i < n && w[i].ev != x; i++)
            ;
        if (x != NULL && i < n)
            w[i].count += k;
        else if (x != NULL)
            w[m++] = (spend_term){x, k};
        spend_eval_x(g, mode, eps, delta, rel, w, m, x, k, out);
        if (w != stack)
            free(w);
    }
    if (update == NULL || x != NULL)
        return;
    if (!memo_mode(mode)) {
        spend_memo_free(*update);
        *update = NULL;
    } else if (!hit || memo_advance(*update, tail, q) != 0) {
        memo_build(update, delta, rel, t, n);
    }
}

int spend_rdp_value(const spend_memo *memo, double delta, dp_relation rel, const spend_term *t,
                    size_t n, spend_event *x, uint64_t k, double *rv)
{
    mtail tail[MEMO_TAIL];
    size_t q;
    double r[RDP_CURVE_LEN];
    if (!memo_match(memo, delta, rel, t, n, k ? x : NULL, k, tail, &q))
        return 0;
    memo_finish(memo, tail, q, r);
    *rv = spend_rdp_convert(r, delta < 1.0 ? delta : 0.999999999);
    return 1;
}

int spend_rdp_within(spend_engine *g, const spend_memo *memo, double eps, double delta,
                     dp_relation rel, const spend_term *t, size_t n, spend_event *x, uint64_t k)
{
    double r;
    (void)g;
    return spend_rdp_value(memo, delta, rel, t, n, x, k, &r) && r <= eps;
}
