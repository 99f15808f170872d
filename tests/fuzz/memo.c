/*
 * memo.c - memos in front of the accountants for the log-replay fuzz target (linked with
 * -Wl,--wrap=dp_rdp_curve,--wrap=dp_epsilon_ex, in make fuzz and in its replay in make test).
 *
 * Recovering a ledger classifies every distinct event by its RDP curve (dp_rdp_curve, at
 * all RDP_CURVE_LEN values) and computes each client's spend (dp_epsilon_ex with PLD): that
 * numerical work was about 80% of each input's time under ASan, and it is the same work
 * again and again: fuzz_wal recovers each ledger twice, and most mutations touch other
 * bytes than the events. Both functions are pure functions of their arguments, so the
 * answer is remembered by the arguments (the event by its binary encoding) with status,
 * error detail, report and extras: the ledger sees exactly what the real function returns.
 * Direct-mapped tables with a fixed number of slots, in static storage: after the first
 * inputs a miss allocates nothing (libFuzzer re-runs an input with a leak check whenever
 * it ends with more mallocs than frees). Keys over MEMO_MAX_KEY bytes are not remembered.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/dp/account.h"
#include "../../core/dp/event.h"
#include "../../core/dp/rdp.h"

#define MEMO_SLOTS 1024
#define MEMO_MAX_KEY 512
#define MEMO_MAX_POINTS 4
#define MEMO_MAX_VAL 3072

dpb_status __real_dp_rdp_curve(const dp_event *ev, dp_relation rel, double *curve, dpb_error *err);
dpb_status __wrap_dp_rdp_curve(const dp_event *ev, dp_relation rel, double *curve, dpb_error *err);
dpb_status __real_dp_epsilon_ex(const dp_event *ev, dp_relation rel, dp_accountant acct,
                                const dp_options *opt, const double *delta, size_t n, double *eps,
                                dp_point_extra *aux, dp_report *rep, dpb_error *err);
dpb_status __wrap_dp_epsilon_ex(const dp_event *ev, dp_relation rel, dp_accountant acct,
                                const dp_options *opt, const double *delta, size_t n, double *eps,
                                dp_point_extra *aux, dp_report *rep, dpb_error *err);

typedef struct {
    size_t klen; /* 0: empty */
    unsigned char key[MEMO_MAX_KEY];
    unsigned char val[MEMO_MAX_VAL];
} memo_slot;

typedef struct {
    memo_slot slot[MEMO_SLOTS];
    unsigned char *buf; /* the key being built (grows, never shrinks) */
    size_t len, cap;
} memo;

static memo rdp_memo, eps_memo;

static uint64_t fnv64(const unsigned char *p, size_t n)
{
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* Start a key with the event's encoding and the given scalar bytes: 0, or -1 (no memo). */
static int key_of(memo *m, const dp_event *ev, const void *scalars, size_t n)
{
    m->len = 0;
    if (dp_event_encode(ev, &m->buf, &m->len, &m->cap) != DPB_OK || m->len + n > MEMO_MAX_KEY)
        return -1;
    if (m->len + n > m->cap) {
        unsigned char *b = realloc(m->buf, m->len + n);
        if (b == NULL)
            return -1;
        m->buf = b;
        m->cap = m->len + n;
    }
    memcpy(m->buf + m->len, scalars, n);
    m->len += n;
    return 0;
}

static memo_slot *slot_of(memo *m)
{
    return &m->slot[fnv64(m->buf, m->len) % MEMO_SLOTS];
}

static const void *memo_get(memo *m)
{
    const memo_slot *s = slot_of(m);
    return s->klen == m->len && memcmp(s->key, m->buf, m->len) == 0 ? s->val : NULL;
}

/* Remember val (vlen bytes, copied) under the current key. */
static void memo_put(memo *m, const void *val, size_t vlen)
{
    memo_slot *s = slot_of(m);
    memcpy(s->key, m->buf, m->len);
    s->klen = m->len;
    memcpy(s->val, val, vlen);
}

/* The caller's error gets the remembered one if it is still clear (first error wins). */
static void give_error(dpb_error *err, const dpb_error *e)
{
    if (err != NULL && err->status == DPB_OK && e->status != DPB_OK)
        *err = *e;
}

typedef struct {
    dpb_status st;
    dpb_error err;
    double curve[RDP_CURVE_LEN];
} rdp_answer;
_Static_assert(sizeof(rdp_answer) <= MEMO_MAX_VAL, "an RDP answer fits a memo slot");

dpb_status __wrap_dp_rdp_curve(const dp_event *ev, dp_relation rel, double *curve, dpb_error *err)
{
    int r = (int)rel;
    if (key_of(&rdp_memo, ev, &r, sizeof r) != 0)
        return __real_dp_rdp_curve(ev, rel, curve, err);
    const rdp_answer *a = memo_get(&rdp_memo);
    static rdp_answer fresh;
    if (a == NULL) {
        memset(&fresh, 0, sizeof fresh);
        fresh.st = __real_dp_rdp_curve(ev, rel, fresh.curve, &fresh.err);
        memo_put(&rdp_memo, &fresh, sizeof fresh);
        a = &fresh;
    }
    if (a->st == DPB_OK)
        memcpy(curve, a->curve, sizeof a->curve);
    give_error(err, &a->err);
    return a->st;
}

typedef struct {
    dpb_status st;
    dpb_error err;
    double eps[MEMO_MAX_POINTS];
    dp_point_extra aux[MEMO_MAX_POINTS];
    dp_report rep;
} eps_answer;
_Static_assert(sizeof(eps_answer) <= MEMO_MAX_VAL, "an epsilon answer fits a memo slot");

dpb_status __wrap_dp_epsilon_ex(const dp_event *ev, dp_relation rel, dp_accountant acct,
                                const dp_options *opt, const double *delta, size_t n, double *eps,
                                dp_point_extra *aux, dp_report *rep, dpb_error *err)
{
    struct {
        int rel, acct, has_opt, has_aux, has_rep;
        double pld_h;
        size_t n;
        double delta[MEMO_MAX_POINTS];
    } k;
    memset(&k, 0, sizeof k); /* padding too: the key is compared as bytes */
    if (n == 0 || n > MEMO_MAX_POINTS)
        return __real_dp_epsilon_ex(ev, rel, acct, opt, delta, n, eps, aux, rep, err);
    k.rel = (int)rel;
    k.acct = (int)acct;
    k.has_opt = opt != NULL;
    k.pld_h = opt ? opt->pld_h : 0.0;
    k.has_aux = aux != NULL;
    k.has_rep = rep != NULL;
    k.n = n;
    memcpy(k.delta, delta, n * sizeof *delta);
    if (key_of(&eps_memo, ev, &k, sizeof k) != 0)
        return __real_dp_epsilon_ex(ev, rel, acct, opt, delta, n, eps, aux, rep, err);
    const eps_answer *a = memo_get(&eps_memo);
    static eps_answer fresh;
    if (a == NULL) {
        memset(&fresh, 0, sizeof fresh);
        fresh.st =
            __real_dp_epsilon_ex(ev, rel, acct, opt, delta, n, fresh.eps, aux ? fresh.aux : NULL,
                                 rep ? &fresh.rep : NULL, &fresh.err);
        memo_put(&eps_memo, &fresh, sizeof fresh);
        a = &fresh;
    }
    memcpy(eps, a->eps, n * sizeof *eps);
    if (aux)
        memcpy(aux, a->aux, n * sizeof *aux);
    if (rep)
        *rep = a->rep;
    give_error(err, &a->err);
    return a->st;
}
