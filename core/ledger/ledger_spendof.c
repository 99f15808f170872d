/*
 * ledger_spendof.c - layer 4: a client's spend (computed by spend.c through the client's
 * memo), its status and the counters over clients, the memos' budget, and the admission
 * test of a charge. Calls spend.h, ledger_index.c and ledger_names.c.
 */
#include "ledger_mem.h"

/* The client's spend with `extra` more of event `xev` (extra 0: as it is), and the
 * accountant it is, through the client's memo (only read; update: the memo to bring to c's
 * terms, by lg_recompute under the write lock). */
_Thread_local uint64_t lg_spends_here;

static void spend_full(ledger *l, const lclient *c, spend_memo **update, spend_event *x,
                       uint64_t extra, spend_result *out)
{
    lg_spends_here++;
    if (c->uncertified) {
        memset(out, 0, sizeof *out);
        out->uncertified = 1;
        out->accountant = -1;
        out->spent = HUGE_VAL;
        return;
    }
    size_t n = c->nev;
    if (!extra)
        x = NULL;
    spend_term stack[16] = {{0}}, *t = n <= 16 ? stack : malloc(n * sizeof *t);
    if (t == NULL) {
        memset(out, 0, sizeof *out);
        out->accountant = -1;
        out->spent = HUGE_VAL;
        return;
    }
    for (size_t i = 0; i < n; i++)
        t[i] = (spend_term){lg_ev_se(l, c->ev[i].ev), c->ev[i].count};
    spend_eval_more(l->sp, c->memo, update, c->mode, c->eps, c->delta, (dp_relation)c->rel, t, n, x,
                    extra, out);
    if (t != stack)
        free(t);
}

/* The spend that admission sees: the charged events and the held reservations, with `extra`
 * more of xev. Reservations enter as pending counts in the same multiset (spend_of). */
void lg_spend_held(ledger *l, const lclient *c, uint32_t xev, uint64_t extra, spend_result *out)
{
    lg_spend_held_se(l, c, extra ? lg_ev_se(l, xev) : NULL, extra, out);
}

void lg_spend_held_se(ledger *l, const lclient *c, spend_event *x, uint64_t extra,
                      spend_result *out)
{
    if (c->nrv == 0) {
        spend_full(l, c, NULL, x, extra, out);
        return;
    }
    lclient t = *c;
    lcount stack[8], *ms = c->nev + c->nrv <= 8 ? stack : malloc((c->nev + c->nrv) * sizeof *ms);
    if (ms == NULL) {
        memset(out, 0, sizeof *out);
        out->accountant = -1;
        out->spent = HUGE_VAL; /* refuses: never admits on a spend it could not compute */
        return;
    }
    uint32_t m = c->nev;
    if (m)
        memcpy(ms, c->ev, m * sizeof *ms);
    if (lg_merge_counts(ms, &m, c->rv, c->nrv) != 0) { /* linear in the client's events */
        if (ms != stack)
            free(ms);
        memset(out, 0, sizeof *out);
        out->accountant = -1;
        out->spent = HUGE_VAL;
        return;
    }
    t.ev = ms;
    t.nev = m; /* the memo (of c->ev) is only read: it covers ms when the held events are new */
    spend_full(l, &t, NULL, x, extra, out);
    if (ms != stack)
        free(ms);
}

/* The honest status (ledger.h): exhausted when the spend reached the budget, or when the
 * event of the client's last charged round would not be admitted again now; else stuck when
 * the latest round that tested its budget refused it for it (stuck_rd, ledger_apply.c). */
ledger_status lg_status_of(const lclient *c)
{
    if (c->uncertified)
        return LEDGER_UNCERTIFIED;
    if (c->spent >= c->eps || c->stuck)
        return LEDGER_EXHAUSTED;
    return c->stuck_rd ? LEDGER_STUCK : LEDGER_ACTIVE;
}

static int bucket_of(const lclient *c)
{
    if (!(c->spent < c->eps) || !(c->eps > 0.0))
        return 10;
    double f = 10.0 * c->spent / c->eps; /* < 10 here; never cast a value out of int range */
    return !(f >= 0.0) ? 0 : f >= 9.0 ? 9 : (int)f;
}

/* Unaccount / account a client in the counters around a change. */
void lg_counters(ledger *l, const lclient *c, int sign)
{
    l->by_status[lg_status_of(c)] += (uint64_t)sign;
    l->hist[bucket_of(c)] += (uint64_t)sign;
}

void lg_recount(ledger *l)
{
    memset(l->by_status, 0, sizeof l->by_status);
    memset(l->hist, 0, sizeof l->hist);
    for (size_t i = 0; i < l->ncl; i++)
        lg_counters(l, &l->cl[i], +1);
}

void lg_memo_drop(ledger *l, lclient *c)
{
    l->memo_bytes -= spend_memo_bytes(c->memo);
    l->memo_n -= c->memo != NULL;
    spend_memo_free(c->memo);
    c->memo = NULL;
}

/* The client's memo brought to its terms, and the memos' bytes kept under the cap: past it
 * the other clients' memos are freed in turn, from a cursor that goes round the clients
 * (made again at their next change). */
static void memo_update(ledger *l, lclient *c, spend_result *r)
{
    size_t before = spend_memo_bytes(c->memo);
    spend_full(l, c, &c->memo, NULL, 0, r);
    size_t after = spend_memo_bytes(c->memo);
    l->memo_bytes = l->memo_bytes - before + after;
    l->memo_n = l->memo_n - (before > 0) + (after > 0);
    size_t cap = l->opt.memo_bytes ? l->opt.memo_bytes : LEDGER_MEMO_BYTES;
    for (size_t seen = 0; l->memo_bytes > cap && seen < l->ncl; seen++) {
        lclient *o = &l->cl[l->memo_next++ % l->ncl];
        if (o != c)
            lg_memo_drop(l, o);
    }
}

void ledger_memo_stats(ledger *l, size_t *clients, size_t *bytes)
{
    pthread_rwlock_rdlock(&l->lock);
    *clients = l->memo_n;
    *bytes = l->memo_bytes;
    pthread_rwlock_unlock(&l->lock);
}

void ledger_kept_stats(ledger *l, ledger_kept_figures *f)
{
    spend_stats s;
    spend_engine_stats(l->sp, &s);
    *f = (ledger_kept_figures){s.kept_entries,   s.kept_bytes,     s.kept_peak_bytes,
                               s.kept_cap_bytes, s.kept_composed,  s.kept_rebuilt,
                               s.kept_evicted,   s.kept_fallbacks, s.rdp_summed};
}

uint64_t ledger_locked_spends(ledger *l)
{
    return atomic_load_explicit(&l->locked_spends, memory_order_relaxed);
}

void ledger_kept_cap(ledger *l, size_t bytes)
{
    spend_engine_kept_cap(l->sp, bytes);
}

void lg_recompute(ledger *l, lclient *c)
{
    spend_result r;
    memo_update(l, c, &r);
    c->spent = r.spent;
    c->dtv = r.dtv;
    c->sacct = (int8_t)r.accountant;
    if (r.uncertified)
        c->uncertified = 1;
    lg_recompute_held(l, c, -1);
}

int lg_stuck_of(ledger *l, const lclient *c)
{
    if (c->last_ev == LEV_NONE || c->uncertified || !(c->spent < c->eps))
        return 0;
    spend_result more;
    spend_decide_only(1); /* the test, not the value */
    lg_spend_held(l, c, c->last_ev, 1, &more);
    spend_decide_only(0);
    return !(more.spent <= c->eps);
}

void lg_recompute_held(ledger *l, lclient *c, int stuck)
{
    c->stuck = (uint8_t)(stuck >= 0 ? stuck : lg_stuck_of(l, c));
}

/* The accountant of a spend recovered from a snapshot (which stores the value only): it
 * needs the curves of all the client's events, so it is named at its first read, not at
 * open (recovery then computes nothing for the vocabulary the snapshot holds). */
int lg_spend_accountant(const ledger *l, const lclient *c)
{
    int8_t a = __atomic_load_n(&c->sacct, __ATOMIC_ACQUIRE);
    if (a != LG_SACCT_UNNAMED)
        return a;
    spend_term stack[8], *t = c->nev <= 8 ? stack : malloc(c->nev * sizeof *t);
    if (t == NULL)
        return -1; /* not named: tried again at the next read */
    a = -1;
    if (!c->uncertified) {
        for (uint32_t i = 0; i < c->nev; i++)
            t[i] = (spend_term){lg_ev_se(l, c->ev[i].ev), c->ev[i].count};
        a = (int8_t)spend_accountant_of(l->sp, c->mode, c->eps, c->delta, t, c->nev, c->spent);
    }
    if (t != stack)
        free(t);
    /* readers (under the read lock) may name it at once: the same value */
    __atomic_store_n((int8_t *)&c->sacct, a, __ATOMIC_RELEASE);
    return a;
}

/* The admission test of `extra` more rounds of event xev for client c (a stored client, or a
 * new one with the default budget), counting its held reservations; *after receives the
 * spend they would leave. LEDGER_OK when admitted. */
ledger_reason lg_admission(ledger *l, const lclient *c, int known, uint32_t xev, uint64_t extra,
                           double *after, int8_t *acct)
{
    return lg_admission_se(l, c, known, lg_ev_se(l, xev), extra, after, acct);
}

ledger_reason lg_admission_se(ledger *l, const lclient *c, int known, spend_event *x,
                              uint64_t extra, double *after, int8_t *acct)
{
    int kind = spend_event_class(x)->kind;
    spend_result sr;
    lg_spend_held_se(l, c, x, extra, &sr);
    *after = sr.spent;
    if (acct)
        *acct = (int8_t)sr.accountant;
    if (kind == EV_UNCERTIFIABLE || sr.uncertified)
        return LEDGER_UNCERTIFIABLE;
    if (sr.unsupported && ledger_mode_is_filter((ledger_mode)c->mode))
        return LEDGER_FILTER_UNSUPPORTED;
    if (sr.unsupported || kind == EV_NOT_COVERED || (c->mode == LEDGER_RDP && kind == EV_PLD_ONLY))
        return LEDGER_UNSUPPORTED;
    if (known && c->spent >= c->eps && !(*after <= c->eps))
        return LEDGER_EXHAUSTED_ALREADY;
    return *after <= c->eps ? LEDGER_OK : LEDGER_OVER_BUDGET;
}

int lg_stuck_after_hold(ledger *l, const lclient *c, spend_event *x, int hold)
{
    if (c->last_ev == LEV_NONE || c->uncertified || !(c->spent < c->eps))
        return 0;
    /* the charged events with the held ones merged (lg_spend_held's multiset), then x */
    lcount *ms = malloc(((size_t)c->nev + c->nrv + 1) * sizeof *ms);
    spend_term *t = malloc(((size_t)c->nev + c->nrv + 2) * sizeof *t);
    uint32_t m = c->nev;
    if (ms != NULL && m)
        memcpy(ms, c->ev, m * sizeof *ms);
    if (ms == NULL || t == NULL || lg_merge_counts(ms, &m, c->rv, c->nrv) != 0) {
        free(ms);
        free(t);
        return -1;
    }
    size_t n = 0;
    int seen = 0;
    for (uint32_t k = 0; k < m; k++) {
        spend_term y = {lg_ev_se(l, ms[k].ev), ms[k].count};
        if (y.ev == x) {
            seen = 1;
            y.count = hold < 0 && y.count < (uint64_t)-hold ? 0 : y.count + (uint64_t)(int64_t)hold;
        }
        if (y.count > 0)
            t[n++] = y;
    }
    if (!seen && hold > 0)
        t[n++] = (spend_term){x, (uint64_t)hold};
    free(ms);
    spend_result more;
    spend_decide_only(1); /* the test, not the value (as lg_stuck_of) */
    spend_eval_more(l->sp, c->memo, NULL, c->mode, c->eps, c->delta, (dp_relation)c->rel, t, n,
                    lg_ev_se(l, c->last_ev), 1, &more);
    spend_decide_only(0);
    free(t);
    return !(more.spent <= c->eps);
}
