/*
 * ledger_rounds.c - layer 1 (verbs): rounds: admission under the policies, idempotent round
 * ids, dry runs, one-step charges and reservations (the first phase of two-phase rounds).
 * A round is one write transaction (ledger_txn.h); its spends are prefetched before it.
 */
#include "ledger_txn.h"
#include "ledger_record.h"
#include "ledger_mem.h"

/* Why client id's accounting mode cannot account the event ev (its class, readied). */
static void unsupported_why(char *why, size_t cap, const char *id, ledger_mode mode,
                            const spend_event *ev)
{
    const spend_class *v = spend_event_class(ev);
    if (mode == LEDGER_GDP_FILTER)
        snprintf(why, cap,
                 "client '%.128s' uses gdp_filter accounting, which accounts compositions of "
                 "unsampled Gaussian mechanisms only (use rdp_filter for sampled events)",
                 id);
    else if (mode == LEDGER_RDP_FILTER)
        snprintf(
            why, cap,
            "client '%.128s' uses rdp_filter accounting: a privacy filter needs the event's "
            "RDP curve, and this event has none (shuffled epochs' total-variation bound, "
            "(epsilon, delta) events with delta > 0 and PNSGD passes cannot be filtered)%s%.150s",
            id, v->why[0] ? ": " : "", v->why);
    else
        snprintf(why, cap,
                 "client '%.128s' uses %s accounting, which cannot account this event%s%.200s", id,
                 ledger_mode_name(mode), v->why[0] ? ": " : "", v->why);
}

/* The profiles of the participants' events not computed yet (recovered, and not yet reached
 * by ledger_open.c's warm_main), computed here with no lock held, so that the admission
 * under the write lock finds them. */
static void ready_participants(ledger *l, const ledger_round_req *req)
{
    spend_event **pending = NULL;
    size_t n = 0, cap = 0;
    pthread_rwlock_rdlock(&l->lock);
    for (size_t i = 0; i < req->n; i++) {
        long pos = lg_find_client(l, req->participants[i]);
        const lclient *c = pos >= 0 ? &l->cl[pos] : NULL;
        for (uint32_t k = 0; c && k < c->nev + c->nrv; k++) {
            spend_event *se = l->evs[k < c->nev ? c->ev[k].ev : c->rv[k - c->nev].ev].se;
            if (spend_event_is_ready(se) ||
                lg_grow((void **)&pending, &cap, n + 1, sizeof *pending))
                continue;
            spend_event_ref(l->sp, se);
            pending[n++] = se;
        }
    }
    pthread_rwlock_unlock(&l->lock);
    for (size_t i = 0; i < n; i++) {
        spend_event_ready(l->sp, pending[i]);
        spend_event_put(l->sp, pending[i]);
    }
    free(pending);
}

/* ---- the spends a round needs, computed before its lock ---------------------------------------
 *
 * A pld client's spend may need its PLD (spend.c: when the rdp bound is past the budget),
 * which takes from milliseconds to seconds. It is computed here, before the round takes the
 * write lock, from a copy of each participant's counts taken under the read lock, and kept in
 * spend.c's cache by content; the admission under the write lock then evaluates the same
 * multiset and finds it. Every pld participant's version is stamped (stamps): should one
 * have changed in between (a concurrent round charged it), the round goes round again
 * (LEDGER_STALE) instead of computing under the lock, LG_PREFETCH_TRIES times at most. The
 * computation runs within the ledger's deadline and cost cap (ledger_set_compute_limits):
 * DPB_ECANCELLED or DPB_ECOST, nothing charged. The round's event is registered in spend.c
 * here too (its RDP curve), and held until the round ends so that lg_intern() finds it. */
static dpb_status prefetch_spends(ledger *l, const ledger_round_req *req, spend_event *pre[2],
                                  lg_prefetch *stamps, dpb_error *err)
{
    unsigned char *eb = NULL;
    size_t elen = 0, ecap = 0, nt = 0, cap_t = 0, ns = 0;
    struct pclient {
        double eps, delta;
        uint8_t rel, once; /* once: the admission's count only (the charged-only spend) */
        size_t off, m;
        double rdp[2]; /* the rdp values of one and two more (the memo's, read under the
                        * lock), NAN when no memo covers them */
    } *sn = malloc(2 * req->n * sizeof *sn);
    spend_term *t = NULL;
    int rels[2] = {0, 0}, ok = 1;
    if (sn == NULL || dp_event_encode(req->event, &eb, &elen, &ecap) != DPB_OK) {
        free(sn);
        free(eb);
        return DPB_OK; /* answered by the round itself */
    }
    /* the relations the participants use: the round's event is registered for those */
    pthread_rwlock_rdlock(&l->lock);
    if (lg_find_round(l, req->round_id) >= 0)
        ok = 0; /* a retry: answered from the stored round */
    for (size_t i = 0; i < req->n && ok; i++) {
        long pos = lg_find_client(l, req->participants[i]);
        rels[pos < 0 ? DP_REL_ADD_OR_REMOVE : l->cl[pos].rel] = 1; /* default clients: so */
    }
    pthread_rwlock_unlock(&l->lock);
    for (int r = 0; r < 2 && ok; r++)
        if (rels[r] && spend_event_get(l->sp, eb, elen, (dp_relation)r, &pre[r]) != DPB_OK)
            pre[r] = NULL;
    pthread_rwlock_rdlock(&l->lock);
    for (size_t i = 0; i < req->n && ok; i++) {
        long pos = lg_find_client(l, req->participants[i]);
        if (pos < 0)
            continue;
        const lclient *c = &l->cl[pos];
        if (c->mode != LEDGER_PLD || c->uncertified || pre[c->rel] == NULL)
            continue;
        if (lg_prefetch_stamp(l, pos, stamps) != 0) {
            ok = 0;
            break;
        }
        if (lg_grow((void **)&t, &cap_t, nt + 2 * c->nev + c->nrv + 2, sizeof *t) != 0) {
            ok = 0;
            break;
        }
        /* the charged events (distinct), then the held reservations merged in: the multiset
         * admission composes, in lg_spend_held's order */
        size_t off = nt;
        uint32_t m = c->nev;
        lcount *ms = malloc(((size_t)c->nev + c->nrv + 1) * sizeof *ms);
        if (ms != NULL && m)
            memcpy(ms, c->ev, m * sizeof *ms);
        if (ms == NULL || lg_merge_counts(ms, &m, c->rv, c->nrv) != 0) {
            free(ms);
            ok = 0;
            break;
        }
        for (uint32_t k = 0; k < m; k++) /* one spend event per interned (event, relation) */
            t[nt++] = (spend_term){l->evs[ms[k].ev].se, ms[k].count};
        free(ms);
        /* decided by the rdp bound within the budget, both times: no PLD to compute (the
         * client's memo tells in a few comparisons, under this read lock) */
        spend_event *x = pre[c->rel];
        dp_relation rel = (dp_relation)c->rel;
        double r1 = NAN, r2 = NAN;
        if (!spend_rdp_value(c->memo, c->delta, rel, t + off, nt - off, x, 1, &r1))
            r1 = NAN;
        if (!spend_rdp_value(c->memo, c->delta, rel, t + off, nt - off, x, 2, &r2))
            r2 = NAN;
        if (r1 <= c->eps && r2 <= c->eps) {
            nt = off;
            continue;
        }
        for (size_t j = off; j < nt; j++)
            spend_event_ref(l->sp, t[j].ev); /* a withdrawn charge could drop it meanwhile */
        sn[ns] = (struct pclient){c->eps, c->delta, c->rel, 0, off, nt - off, {r1, r2}};
        nt++; /* room for the round's event */
        ns++;
        if (c->nrv > 0 && !req->reserve) { /* its charged spend after the charge, held apart */
            size_t off2 = nt;
            for (uint32_t k = 0; k < c->nev; k++) {
                t[nt] = (spend_term){l->evs[c->ev[k].ev].se, c->ev[k].count};
                spend_event_ref(l->sp, t[nt++].ev);
            }
            sn[ns++] = (struct pclient){c->eps, c->delta, c->rel, 1, off2, nt - off2, {NAN, NAN}};
            nt++; /* room for the round's event */
        }
    }
    pthread_rwlock_unlock(&l->lock);
    /* each candidate: the client's terms with the round's event once more (its admission),
     * and twice (its status after the charge: whether one more still fits). With kept
     * compositions the status is decided from the kept one in one pass under the lock
     * (spend_decide_only) and needs nothing computed ahead; without them (--pld-kept-memory
     * 0) it is computed here, so that nothing is composed under the write lock. */
    spend_stats ks;
    spend_engine_stats(l->sp, &ks);
    uint64_t most = ks.kept_cap_bytes > 0 ? 1u : 2u;
    spend_candidate *cand = ok ? malloc((2 * ns + 1) * sizeof *cand) : NULL;
    spend_term *w = cand ? malloc((2 * nt + 1) * sizeof *w) : NULL;
    size_t nc = 0;
    for (size_t i = 0; w && i < ns; i++) {
        for (uint64_t more = 1; more <= (sn[i].once ? 1u : most); more++) {
            spend_term *ct = t + sn[i].off, *cw = w + (more - 1) * nt + sn[i].off; /* m + 1 */
            size_t m = sn[i].m, k;
            spend_event *x = pre[sn[i].rel];
            if (x == NULL)
                continue;
            if (m)
                memcpy(cw, ct, m * sizeof *cw);
            for (k = 0; k < m && cw[k].ev != x; k++)
                ;
            if (k < m)
                cw[k].count += more;
            else
                cw[m++] = (spend_term){x, more};
            cand[nc++] = (spend_candidate){sn[i].eps,
                                           sn[i].delta,
                                           (dp_relation)sn[i].rel,
                                           cw,
                                           m,
                                           !isnan(sn[i].rdp[more - 1]),
                                           sn[i].rdp[more - 1]};
        }
    }
    dpb_status st = DPB_OK;
    if (l->max_pld_evals > 0 && nc > l->max_pld_evals)
        st = dpb_fail(err, DPB_ECOST, "participants",
                      "the admission of this round needs up to %zu PLD evaluations, more "
                      "than the ledger allows one request (%llu): nothing was charged; send "
                      "fewer participants per round",
                      nc, (unsigned long long)l->max_pld_evals);
    dpb_cancel own = {l->compute_deadline > 0.0 ? dpb_cancel_now() + l->compute_deadline : 0.0,
                      NULL};
    const dpb_cancel *prev = dpb_cancel_enter(l->compute_deadline > 0.0 ? &own : NULL);
    if (w && st == DPB_OK)
        spend_prefetch(l->sp, cand, nc);
    if (st == DPB_OK && dpb_cancelled())
        st = dpb_fail(err, DPB_ECANCELLED, NULL,
                      "the participants' spends were still being computed at the ledger's "
                      "deadline: nothing was charged");
    dpb_cancel_leave(prev);
    free(w);
    free(cand);
    for (size_t i = 0; i < ns; i++)
        for (size_t k = 0; k < sn[i].m; k++)
            spend_event_put(l->sp, t[sn[i].off + k].ev);
    free(t);
    free(sn);
    free(eb);
    return st;
}

/* The request's own checks, before any lock. DPB_OK or DPB_EINVAL. */
static dpb_status round_request_ok(const ledger_round_req *req, dpb_error *err)
{
    if (!lg_valid_id(req->round_id))
        return dpb_fail(err, DPB_EINVAL, "round_id", "a round id is " LEDGER_ID_RULE);
    if (req->n == 0 || req->n > LEDGER_MAX_PARTICIPANTS)
        return dpb_fail(err, DPB_EINVAL, "participants", "between 1 and %d participants",
                        LEDGER_MAX_PARTICIPANTS);
    for (size_t i = 0; i < req->n; i++)
        if (!lg_valid_id(req->participants[i]))
            return dpb_fail(err, DPB_EINVAL, "participants",
                            "participant %zu is not a valid client id", i);
    if (req->reserve &&
        (req->already_ran || req->ttl_seconds < 1 || req->ttl_seconds > LEDGER_TTL_MAX))
        return dpb_fail(err, DPB_EINVAL,
                        req->already_ran ? "already_ran" : "reservation_ttl_seconds",
                        req->already_ran ? "a round that already ran is recorded in one step, not "
                                           "reserved"
                                         : "a reservation is held 1 to %d seconds",
                        LEDGER_TTL_MAX);
    if (req->reserve && req->owner && !lg_valid_owner(req->owner))
        return dpb_fail(err, DPB_EINVAL, "owner",
                        "a reservation's owner is 1 to %d printable ASCII bytes without spaces",
                        LEDGER_OWNER_MAX);
    return DPB_OK;
}

/* What a round's admission builds under the lock. */
typedef struct {
    const ledger_round_req *req;
    const unsigned char *ebytes; /* the encoded event */
    size_t elen;
    lout *out;       /* one per participant (ids borrowed from the request until stored) */
    uint32_t evi[2]; /* the event interned per relation used (have[rel]) */
    int have[2];
    size_t refused;
    char why[400]; /* why the event is unsupported, for the first such participant */
    /* admissions computed before the write lock (admit_before), or NULL: each participant's
     * client position and version then, its mode and budget (for the answer) */
    long *pos;
    uint64_t *ver;
    int8_t *mode;
    double *eps;
    int used[2]; /* the relations whose event an admission used */
} round_build;

static void round_pre_free(round_build *b);

/* Forget admissions computed before the lock (admit_before): admit_all starts afresh. */
static void round_pre_drop(round_build *b)
{
    round_pre_free(b);
    b->refused = 0;
    b->why[0] = '\0';
    b->used[0] = b->used[1] = 0;
    memset(b->out, 0, b->req->n * sizeof *b->out);
}

static void round_pre_free(round_build *b)
{
    free(b->pos);
    free(b->ver);
    free(b->mode);
    free(b->eps);
    b->pos = NULL;
    b->ver = NULL;
    b->mode = NULL;
    b->eps = NULL;
}

/* The operator's cap on what one owner holds reserved (ledger_options.max_reserved_per_owner):
 * DPB_OK, or DPB_EQUOTA when this reservation's admitted clients would take its owner past it.
 * A lock is held. */
static dpb_status owner_quota(const ledger *l, const round_build *b, dpb_error *err)
{
    const ledger_round_req *req = b->req;
    uint64_t cap = l->opt.max_reserved_per_owner;
    if (!req->reserve || req->owner == NULL || cap == 0)
        return DPB_OK;
    uint64_t adding = 0, held = lg_owner_held(l, req->owner);
    for (size_t i = 0; i < req->n; i++)
        adding += b->out[i].admitted;
    if (adding == 0 || held + adding <= cap)
        return DPB_OK;
    return dpb_fail(err, DPB_EQUOTA, "participants",
                    "the key '%s' holds %llu client-reservations and this reservation would add "
                    "%llu, past the operator's cap of %llu per key: commit or release held "
                    "reservations (or wait for them to expire), or reserve fewer clients",
                    req->owner, (unsigned long long)held, (unsigned long long)adding,
                    (unsigned long long)cap);
}

/* The admission of participant i (its client at pos, or -1), into b->out[i]: of the round's
 * event interned (pre NULL: the write lock held), or of its registered events pre[rel]
 * (before the lock, under the read lock: nothing interned). */
static dpb_status admit_one(ledger *l, round_build *b, size_t i, long pos, spend_event *const *pre,
                            dpb_error *err)
{
    const ledger_round_req *req = b->req;
    lout *o = &b->out[i];
    int rel = pos >= 0 ? l->cl[pos].rel : DP_REL_ADD_OR_REMOVE;
    if (pre == NULL && !b->have[rel]) {
        int fresh;
        dpb_status st = lg_intern(l, b->ebytes, b->elen, (dp_relation)rel, &b->evi[rel], &fresh);
        if (st != DPB_OK)
            return dpb_fail(err, st, "event", "the event could not be prepared");
        b->have[rel] = 1;
    }
    b->used[rel] = 1;
    spend_event *x = pre ? pre[rel] : lg_ev_se(l, b->evi[rel]);
    lclient tmp = {0}, *c;
    if (pos >= 0) {
        c = &l->cl[pos];
    } else { /* a client to be created with the default budget */
        tmp.id = (char *)o->id;
        tmp.last_ev = LEV_NONE;
        tmp.eps = l->opt.default_epsilon;
        tmp.delta = l->opt.default_delta;
        c = &tmp;
    }
    o->before = pos >= 0 ? c->spent : 0.0;
    o->reason = (uint8_t)lg_admission_se(l, c, pos >= 0, x, 1, &o->after, &o->acct);
    /* After the fact, every known participant is recorded, even past its budget (an
     * uncertifiable round makes the spend infinite); unsupported events still are not. */
    if (req->already_ran && o->reason != LEDGER_OK && o->reason != LEDGER_UNSUPPORTED &&
        o->reason != LEDGER_FILTER_UNSUPPORTED && o->reason != LEDGER_UNKNOWN_CLIENT)
        o->reason = LEDGER_RECORDED;
    o->admitted = o->reason == LEDGER_OK || o->reason == LEDGER_RECORDED;
    if (!o->admitted)
        b->refused++;
    if ((o->reason == LEDGER_UNSUPPORTED || o->reason == LEDGER_FILTER_UNSUPPORTED) &&
        b->why[0] == '\0')
        unsupported_why(b->why, sizeof b->why, o->id, (ledger_mode)c->mode, x);
    /* before the lock: what holding it will make of the client's honest status */
    if (pre && req->reserve && o->admitted && pos >= 0) {
        int stuck = lg_stuck_after_hold(l, c, x, 1);
        o->pre_stuck = stuck >= 0 ? (uint8_t)(stuck + 1) : 0;
    }
    return DPB_OK;
}

/* Participant i's admission, its duplicates found by seen. pre: as admit_one. */
static dpb_status admit_each(ledger *l, round_build *b, lg_idtab *seen, size_t i,
                             spend_event *const *pre, dpb_error *err)
{
    const ledger_round_req *req = b->req;
    lout *o = &b->out[i];
    o->id = req->participants[i];
    o->acct = -1;
    long pos = lg_find_client(l, o->id);
    if (b->pos != NULL) { /* before the lock: the client as it is now, for the check after */
        b->pos[i] = pos;
        b->ver[i] = pos >= 0 ? l->cl[pos].version : 0;
        b->mode[i] = (int8_t)(pos >= 0 ? l->cl[pos].mode : l->opt.default_budget ? LEDGER_RDP : -1);
        b->eps[i] = pos >= 0 ? l->cl[pos].eps : l->opt.default_epsilon;
    }
    if (lg_idtab_add(seen, (uint32_t)i) != UINT32_MAX) {
        o->reason = LEDGER_DUPLICATE;
        o->before = o->after = pos >= 0 ? l->cl[pos].spent : NAN;
        b->refused++;
        return DPB_OK;
    }
    if (pos < 0 && !l->opt.default_budget) {
        o->reason = LEDGER_UNKNOWN_CLIENT;
        o->before = o->after = NAN;
        b->refused++;
        return DPB_OK;
    }
    return admit_one(l, b, i, pos, pre, err);
}

/* After every participant's admission: the all-or-nothing policy. DPB_OK, or
 * DPB_EUNSUPPORTED (no participant can account the event). */
static dpb_status admit_finish(round_build *b, dpb_error *err)
{
    const ledger_round_req *req = b->req;
    /* an event that no participant's accounting can account is a bad request, not a round:
     * nothing is stored, and the answer says why */
    size_t nunsup = 0;
    for (size_t i = 0; i < req->n; i++)
        nunsup +=
            b->out[i].reason == LEDGER_UNSUPPORTED || b->out[i].reason == LEDGER_FILTER_UNSUPPORTED;
    if (nunsup == req->n)
        return dpb_fail(err, DPB_EUNSUPPORTED, "event", "%s", b->why);
    /* all_or_nothing voids the round, except after the fact: a round that ran is recorded
     * for every known participant */
    if (req->policy == LEDGER_ALL_OR_NOTHING && b->refused > 0 && !req->already_ran)
        for (size_t i = 0; i < req->n; i++)
            if (b->out[i].admitted) {
                b->out[i].admitted = 0;
                b->out[i].reason = LEDGER_POLICY;
            }
    return DPB_OK;
}

/* Every participant's admission (duplicates and unknown clients refused), then the
 * all-or-nothing policy. DPB_OK, DPB_ENOMEM, DPB_EUNSUPPORTED (no participant can account
 * the event), or intern's failure. Write lock. */
static dpb_status admit_all(ledger *l, round_build *b, dpb_error *err)
{
    const ledger_round_req *req = b->req;
    lg_idtab seen; /* duplicates: the participants met so far */
    if (lg_idtab_init(&seen, req->participants, sizeof *req->participants, req->n) != 0)
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    dpb_status st = DPB_OK;
    for (size_t i = 0; i < req->n && st == DPB_OK; i++)
        st = admit_each(l, b, &seen, i, NULL, err);
    lg_idtab_free(&seen);
    return st != DPB_OK ? st : admit_finish(b, err);
}

/* Participants admitted per hold of the read lock before the write lock (writers, a round
 * among them, take the lock between two slices). */
#define ROUND_SLICE 512

/* The admissions computed before the write lock, ROUND_SLICE participants per hold of the
 * read lock: b->out as admit_all leaves it before its policy (admit_finish, under the lock),
 * from the registered events pre[rel], each
 * participant's client as it was then kept (b->pos, b->ver: round_apply checks them under the
 * write lock, and goes round again if one changed), each admitted reservation's honest status
 * after it (pre_stuck). Under the write lock only a linear check is left, not a spend.
 * DPB_OK; any other status leaves the admissions to the write lock (b->pos NULL). */
static dpb_status admit_before(ledger *l, round_build *b, spend_event *const pre[2])
{
    const ledger_round_req *req = b->req;
    size_t n = req->n;
    b->pos = malloc(n * sizeof *b->pos);
    b->ver = malloc(n * sizeof *b->ver);
    b->mode = malloc(n * sizeof *b->mode);
    b->eps = malloc(n * sizeof *b->eps);
    lg_idtab seen;
    if (b->pos == NULL || b->ver == NULL || b->mode == NULL || b->eps == NULL ||
        lg_idtab_init(&seen, req->participants, sizeof *req->participants, n) != 0) {
        round_pre_free(b);
        return DPB_ENOMEM;
    }
    dpb_status st = DPB_OK;
    dpb_error ignore = {0};
    for (size_t at = 0; at < n && st == DPB_OK;) {
        size_t end = at + ROUND_SLICE < n ? at + ROUND_SLICE : n;
        pthread_rwlock_rdlock(&l->lock);
        if (at == 0 && lg_find_round(l, req->round_id) >= 0)
            st = DPB_ECONFLICT; /* a stored round: answered under the lock */
        for (; at < end && st == DPB_OK; at++) {
            spend_event *const *x = pre;
            int rel = DP_REL_ADD_OR_REMOVE;
            long pos = lg_find_client(l, req->participants[at]);
            if (pos >= 0)
                rel = l->cl[pos].rel;
            if (pre[rel] == NULL)
                x = NULL; /* not registered: this request is admitted under the lock */
            st = x ? admit_each(l, b, &seen, at, x, &ignore) : DPB_ENOMEM;
        }
        pthread_rwlock_unlock(&l->lock);
    }
    lg_idtab_free(&seen);
    if (st != DPB_OK) /* computed again under the lock, where it is answered */
        round_pre_drop(b);
    return st;
}

/* The round's event interned for the relations admit_before's admissions used. Write lock. */
static dpb_status intern_used(ledger *l, round_build *b, dpb_error *err)
{
    for (int rel = 0; rel < 2; rel++) {
        int fresh;
        if (!b->used[rel] || b->have[rel])
            continue;
        dpb_status st = lg_intern(l, b->ebytes, b->elen, (dp_relation)rel, &b->evi[rel], &fresh);
        if (st != DPB_OK)
            return dpb_fail(err, st, "event", "the event could not be prepared");
        b->have[rel] = 1;
    }
    return DPB_OK;
}

/* The answer, from b->out (ids borrowed from the request). DPB_OK or DPB_ENOMEM. */
/* Outcome i of the answer, from b->out[i]. */
static void fill_outcome(const ledger *l, const round_build *b, size_t i, ledger_outcome *o)
{
    const lout *x = &b->out[i];
    snprintf(o->id, sizeof o->id, "%s", x->id);
    o->admitted = x->admitted;
    o->reason = x->admitted && x->reason == LEDGER_OK ? LEDGER_OK : x->reason;
    o->spent_before = x->before;
    o->spent_after = x->after;
    o->after_accountant = x->acct;
    if (b->mode != NULL) { /* before the lock: the client's mode and budget then */
        o->mode = b->mode[i];
        o->guarantee = o->mode < 0
                           ? LEDGER_NO_GUARANTEE
                           : ledger_guarantee_of((ledger_mode)o->mode, x->after, b->eps[i], 0);
    } else {
        lg_outcome_guarantee(l, o, 1);
    }
}

static dpb_status round_answer(const ledger *l, const round_build *b, ledger_round_res *res,
                               dpb_error *err)
{
    const ledger_round_req *req = b->req;
    snprintf(res->round_id, sizeof res->round_id, "%s", req->round_id);
    res->policy = req->policy;
    res->dry_run = req->dry_run;
    res->already_ran = req->already_ran;
    res->n = req->n;
    res->outcomes = calloc(req->n, sizeof *res->outcomes);
    if (res->outcomes == NULL)
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < req->n; i++) {
        fill_outcome(l, b, i, &res->outcomes[i]);
        res->admitted += (size_t)b->out[i].admitted;
    }
    res->reserve = req->reserve;
    res->state = req->reserve ? LEDGER_RESERVED : LEDGER_CHARGED;
    snprintf(res->owner, sizeof res->owner, "%s", req->reserve && req->owner ? req->owner : "");
    return DPB_OK;
}

/* Under the write lock, after admit_before: the participants whose client changed since (a
 * round or a change of budget meanwhile: another position or version) admitted again here,
 * their answers redone, the others standing as computed; then the policy (admit_finish), its
 * voided outcomes marked in the answer. DPB_OK, DPB_EUNSUPPORTED, or intern's failure.
 * Linear in the participants; spends only for those that changed. */
static dpb_status admissions_refresh(ledger *l, round_build *b, ledger_round_res *res,
                                     dpb_error *err)
{
    const ledger_round_req *req = b->req;
    for (size_t i = 0; i < req->n; i++) {
        if (i > 0 && i % LG_GAP_EVERY == 0)
            lg_let_readers_early(l); /* nothing changed yet; no other writer meanwhile */
        long pos = lg_client_at(l, b->pos[i], req->participants[i]);
        lout *o = &b->out[i];
        /* the same client, version and spend (a background refinement lowers a spend and
         * keeps the version) */
        if (pos == b->pos[i] &&
            (pos < 0 || (l->cl[pos].version == b->ver[i] && l->cl[pos].spent == o->before)))
            continue;
        b->pos[i] = pos;
        b->mode[i] = (int8_t)(pos >= 0 ? l->cl[pos].mode : l->opt.default_budget ? LEDGER_RDP : -1);
        b->eps[i] = pos >= 0 ? l->cl[pos].eps : l->opt.default_epsilon;
        if (o->reason == LEDGER_DUPLICATE) { /* still one: its spend as it is now */
            o->before = o->after = pos >= 0 ? l->cl[pos].spent : NAN;
        } else {
            b->refused -= !o->admitted;
            memset(o, 0, sizeof *o);
            o->id = req->participants[i];
            o->acct = -1;
            if (pos < 0 && !l->opt.default_budget) {
                o->reason = LEDGER_UNKNOWN_CLIENT;
                o->before = o->after = NAN;
                b->refused++;
            } else {
                dpb_status st = admit_one(l, b, i, pos, NULL, err);
                if (st != DPB_OK)
                    return st;
            }
        }
        fill_outcome(l, b, i, &res->outcomes[i]);
    }
    dpb_status st = admit_finish(b, err);
    res->admitted = 0;
    for (size_t i = 0; i < req->n && st == DPB_OK; i++) {
        if (b->out[i].reason == LEDGER_POLICY) { /* voided by all_or_nothing */
            res->outcomes[i].admitted = 0;
            res->outcomes[i].reason = LEDGER_POLICY;
        }
        res->admitted += (size_t)b->out[i].admitted;
    }
    return st;
}

/* Log the round's new clients (default budget), each applied as it is logged (its position
 * into pos[i]), then point the outcomes' ids at the clients' (or own a copy). pos[i]: the
 * participant's client position (-1: none), as found under this lock. Failure: withdrawn or
 * abandoned. */
static dpb_status log_new_clients(lg_txn *t, round_build *b, long *pos)
{
    ledger *l = t->l;
    const ledger_round_req *req = b->req;
    for (size_t i = 0; i < req->n; i++)
        if (b->out[i].admitted && pos[i] < 0) {
            bw w = {0};
            lg_client_record(&w, b->out[i].id, l->opt.default_epsilon, l->opt.default_delta,
                             LEDGER_RDP, DP_REL_ADD_OR_REMOVE, NULL);
            dpb_status st = lg_txn_log(t, REC_CLIENT, &w);
            if (st != DPB_OK)
                return st;
            st = lg_apply_logged_client(l, l->last_seq, b->out[i].id, l->opt.default_epsilon,
                                        l->opt.default_delta, LEDGER_RDP, DP_REL_ADD_OR_REMOVE,
                                        NULL, &pos[i]);
            if (st != DPB_OK)
                return lg_txn_abandon(t, st);
        }
    /* outcome ids must outlive the request: point at the clients' ids, or own a copy */
    for (size_t i = 0; i < req->n; i++) {
        if (pos[i] < 0) /* unknown, or another mention of a client made just now */
            pos[i] = lg_find_client(l, b->out[i].id);
        if (pos[i] >= 0) {
            b->out[i].id = l->cl[pos[i]].id;
        } else {
            b->out[i].id = lg_xstrdup(b->out[i].id);
            b->out[i].owned = 1;
            if (b->out[i].id == NULL) {
                b->out[i].owned = 0;
                return lg_txn_abandon(t, DPB_ENOMEM);
            }
        }
    }
    return DPB_OK;
}

/* Log and apply the admitted round: undo room, new events, new clients, the round record,
 * the stored round (b->out taken over once stored: set NULL). Failure: withdrawn or
 * abandoned. Write lock. */
static dpb_status log_round(lg_txn *t, round_build *b, long *pos, ledger_round_res *res)
{
    ledger *l = t->l;
    const ledger_round_req *req = b->req;
    /* Room to withdraw everything this round changes, before anything is logged: its new
     * events, its new clients, its charges and the round itself. */
    size_t changes = (l->nevs - l->nevs_logged) + 1;
    for (size_t i = 0; i < req->n; i++)
        if (b->out[i].admitted)
            changes += pos[i] < 0 ? 2 : 1; /* created, charged */
        else
            changes++; /* its stuck state, perhaps (lg_offer_answer) */
    dpb_status st = lg_txn_reserve(t, changes);
    /* Log: new events (in index order: replay checks it), new clients, the round; each
     * applied as it is logged. */
    if (st != DPB_OK || (st = lg_txn_log_events(t)) != DPB_OK ||
        (st = log_new_clients(t, b, pos)) != DPB_OK)
        return st;
    uint32_t ev_used = b->have[0] ? b->evi[0] : b->evi[1];
    uint64_t expires = req->reserve ? (uint64_t)time(NULL) + req->ttl_seconds : 0;
    const uint32_t evs[2] = {b->have[0] ? b->evi[0] : LEV_NONE, b->have[1] ? b->evi[1] : LEV_NONE};
    bw w = {0};
    /* a large record is written with the readers let in (no other writer meanwhile: the
     * outcomes and the clients' ids it reads stay put) */
    int gap = req->n > LG_GAP_EVERY ? lg_gap_open(l) : 0;
    lg_round_record(&w, req->round_id, req->body_hash, req->policy, req->already_ran, ev_used,
                    b->out, (uint32_t)req->n);
    lg_gap_close(l, gap);
    if (req->reserve) {
        bw_u64(&w, expires);
        bw_str(&w, req->owner); /* LEDGER_FORMAT 4 */
    }
    if ((st = lg_txn_log(t, req->reserve ? REC_RESERVE : REC_ROUND, &w)) != DPB_OK ||
        (req->n > LG_GAP_EVERY && (st = lg_txn_sync_early(t)) != DPB_OK))
        return st;
    uint64_t seq = l->last_seq;
    res->seq = seq;
    res->logged_seq = seq;
    res->reserve = req->reserve;
    res->state = req->reserve ? LEDGER_RESERVED : LEDGER_CHARGED;
    res->expires_at = expires;
    size_t nrd = l->nrd;
    st =
        lg_store_round(l, req->round_id, req->body_hash, req->policy, req->already_ran, seq, evs,
                       b->out, pos, (uint32_t)req->n, 1, expires, req->reserve ? req->owner : NULL);
    if (l->nrd > nrd)
        b->out = NULL; /* taken over by the stored round (withdrawn with it on failure) */
    return st == DPB_OK ? DPB_OK : lg_txn_abandon(t, st);
}

/* A stored round answered: replayed (the same body) or a conflict. */
static dpb_status stored_round(ledger *l, long rpos, const ledger_round_req *req,
                               ledger_round_res *res, dpb_error *err)
{
    static const unsigned char none[16];
    int same = memcmp(l->rd[rpos].hash, req->body_hash, 16) == 0 ||
               (memcmp(req->legacy_hash, none, 16) != 0 &&
                memcmp(l->rd[rpos].hash, req->legacy_hash, 16) == 0);
    if (!same)
        return dpb_fail(err, DPB_ECONFLICT, "round_id",
                        "round id '%s' was already used with a different request body",
                        req->round_id);
    lg_round_view(l, &l->rd[rpos], res);
    res->replayed = 1;
    return DPB_OK;
}

/* Rounds of more participants than this are admitted before the write lock (admit_before);
 * smaller ones under it, where they take about as long as the check would. */
#define ROUND_EARLY_MIN 64

/* The round: admitted, answered and, unless a dry run, logged and applied. pre (the round's
 * registered events; NULL: none, or this is the last try) lets a large round be admitted
 * and answered before the write lock, which then only checks that its participants are as
 * they were (else LEDGER_STALE: again). */
static dpb_status round_apply(ledger *l, const ledger_round_req *req, const lg_prefetch *stamps,
                              spend_event *const *pre, ledger_round_res *res, dpb_error *err)
{
    memset(res, 0, sizeof *res);
    dpb_status st = round_request_ok(req, err);
    if (st != DPB_OK)
        return st;
    round_build b;
    memset(&b, 0, sizeof b);
    b.req = req;
    unsigned char *ebytes = NULL;
    size_t ecap = 0;
    if ((st = dp_event_encode(req->event, &ebytes, &b.elen, &ecap)) != DPB_OK) {
        free(ebytes);
        return dpb_fail(err, st, "event", "the event cannot be recorded");
    }
    b.ebytes = ebytes;
    if ((b.out = calloc(req->n, sizeof *b.out)) == NULL) {
        free(ebytes);
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    }
    /* a large round's admissions and answer, before the write lock */
    ledger_round_res early;
    memset(&early, 0, sizeof early);
    if (pre != NULL && !req->dry_run && req->n > ROUND_EARLY_MIN &&
        admit_before(l, &b, pre) == DPB_OK && round_answer(l, &b, &early, err) != DPB_OK) {
        ledger_round_res_free(&early);
        round_pre_drop(&b);
    }
    lg_txn t;
    int answered = 0;
    if ((st = lg_txn_begin(&t, l, err)) != DPB_OK)
        goto fail;
    /* A stored round is answered (replayed, or a conflict) only once it is durable: one whose
     * record a failure cut away is withdrawn first, and then this is a new round (refused
     * below if the ledger is read-only). A round durable before a failure is still
     * replayed. A dry run answers from durable state only. */
    long rpos = req->dry_run
                    ? lg_find_round(l, req->round_id)
                    : lg_find_durable_locked(l, lg_find_round, req->round_id, lg_seq_round);
    if (req->dry_run && lg_settle(l, l->last_seq) != 0)
        lg_withdraw_locked(l);
    if (rpos >= 0 && !req->dry_run) {
        st = stored_round(l, rpos, req, res, err);
        answered = 1;
    } else if (!req->dry_run && (st = lg_txn_writable(&t)) != DPB_OK) {
        answered = 1;
    }
    if (!answered && stamps && !lg_prefetch_current(l, stamps)) {
        st = LEDGER_STALE; /* a participant changed since its spends were computed: again */
        answered = 1;
    }
    if (answered) {
        lg_wrunlock(l);
        free(ebytes);
        free(b.out);
        round_pre_free(&b);
        ledger_round_res_free(&early);
        return st;
    }
    if (b.pos != NULL) { /* admitted and answered before the lock: the changed ones again */
        *res = early;
        memset(&early, 0, sizeof early);
        if ((st = intern_used(l, &b, err)) != DPB_OK ||
            (st = admissions_refresh(l, &b, res, err)) != DPB_OK ||
            (st = owner_quota(l, &b, err)) != DPB_OK)
            goto fail;
    } else if ((st = admit_all(l, &b, err)) != DPB_OK || (st = owner_quota(l, &b, err)) != DPB_OK ||
               (st = round_answer(l, &b, res, err)) != DPB_OK) {
        goto fail;
    }
    if (req->dry_run) {
        lg_drop_unlogged_events(l); /* a dry run leaves nothing behind, not even an event */
        lg_wrunlock(l);
        free(ebytes);
        free(b.out);
        return DPB_OK;
    }
    /* each participant's client position under this lock: kept from the admission (b.pos,
     * checked by admissions_refresh), else found once here */
    long *pos = b.pos;
    if (pos == NULL && (pos = malloc((req->n ? req->n : 1) * sizeof *pos)) == NULL) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        goto fail;
    }
    for (size_t i = 0; pos != b.pos && i < req->n; i++)
        pos[i] = lg_find_client(l, req->participants[i]);
    st = log_round(&t, &b, pos, res);
    if (pos != b.pos)
        free(pos);
    if (st != DPB_OK)
        goto fail;
    free(ebytes);
    round_pre_free(&b);
    st = lg_txn_end(&t, DPB_OK);
    if (st != DPB_OK)
        ledger_round_res_free(res);
    return st;
fail:
    lg_drop_unlogged_events(l);
    lg_wrunlock(l);
    free(ebytes);
    lg_outcomes_free(b.out, (uint32_t)req->n);
    round_pre_free(&b);
    ledger_round_res_free(&early);
    ledger_round_res_free(res);
    return st;
}

dpb_status ledger_round(ledger *l, const ledger_round_req *req, ledger_round_res *res,
                        dpb_error *err)
{
    memset(res, 0, sizeof *res); /* every answer, a refusal before round_apply's too */
    if (req->event != NULL && ledger_event_check(req->event, err) != LEDGER_EVENT_FITS) {
        /* an event stored before the limits (a named one, a retried round) is still taken */
        pthread_rwlock_rdlock(&l->lock);
        int stored = lg_find_round(l, req->round_id) >= 0 || lg_event_known(l, req->event);
        pthread_rwlock_unlock(&l->lock);
        if (!stored)
            return DPB_ELIMIT;
    }
    dpb_status st = LEDGER_STALE;
    for (int tries = 0; st == LEDGER_STALE; tries++) {
        spend_event *pre[2] = {NULL, NULL};
        lg_prefetch stamps = {0};
        lg_refine_yield(l); /* before the prefetch's computations */
        st = DPB_OK;
        if (req->event != NULL && req->n > 0 && req->n <= LEDGER_MAX_PARTICIPANTS) {
            ready_participants(l, req);
            st = prefetch_spends(l, req, pre, &stamps, err);
        }
        if (st == DPB_OK) {
            const lg_prefetch *check = tries + 1 < LG_PREFETCH_TRIES ? &stamps : NULL;
            /* the last try admits under the lock, whatever changes meanwhile */
            spend_event *const *early = check ? pre : NULL;
            RETRY_RACES(st, round_apply(l, req, check, early, res, err), err);
        }
        lg_prefetch_free(l, &stamps);
        spend_event_put(l->sp, pre[0]);
        spend_event_put(l->sp, pre[1]);
    }
    return st;
}
