/*
 * ledger_apply.c - layer 4: every change to the state, applied in memory: clients, named
 * events, charges, rounds and their reservations, commits and releases. Live (the record
 * just appended: an undo entry pushed, room reserved by the caller) or replayed (from the
 * log or a snapshot: no undo). Calls ledger_undo.c, ledger_spendof.c, ledger_index.c.
 */
#include "ledger_mem.h"

/* Add k to c's charged count of ev (a new entry if needed). 0, or -1 out of memory. */
static int add_count(lclient *c, uint32_t ev, uint64_t k)
{
    for (uint32_t i = 0; i < c->nev; i++)
        if (c->ev[i].ev == ev) {
            c->ev[i].count += k;
            return 0;
        }
    lcount *n = realloc(c->ev, (c->nev + 1) * sizeof *n);
    if (n == NULL)
        return -1;
    c->ev = n;
    c->ev[c->nev++] = (lcount){ev, k};
    return 0;
}

/* The history ring, allocated before anything changes (pushing cannot fail then). */
int lg_hist_ready(lclient *c)
{
    if (c->hist == NULL)
        c->hist = calloc(LEDGER_HISTORY, sizeof *c->hist);
    return c->hist ? 0 : -1;
}

/* Push round position rpos (hist_ready done); *old: the entry it overwrote. */
static void hist_push(lclient *c, uint32_t rpos, uint32_t *old)
{
    uint32_t *slot = &c->hist[c->hseen % LEDGER_HISTORY];
    if (old)
        *old = *slot;
    *slot = rpos;
    c->hseen++;
}

/* A replayed change of c is coming: c leaves the status counters (counted as it was) until
 * lg_settle_dirty recomputes it, once, however many changes it gets meanwhile. */
static void mark_dirty(ledger *l, lclient *c)
{
    if (c->dirty)
        return;
    lg_counters(l, c, -1);
    c->dirty = 1;
    if (lg_grow((void **)&l->dirty, &l->cap_dirty, l->ndirty + 1, sizeof *l->dirty) != 0)
        l->dirty_lost = 1; /* every client scanned instead */
    else
        l->dirty[l->ndirty++] = (uint32_t)(c - l->cl);
}

/* Insert or update a client in memory (no logging). */
dpb_status lg_apply_client(ledger *l, const char *id, double eps, double delta, int mode, int rel,
                           const char *labels, long *pos_out)
{
    long pos = lg_find_client(l, id);
    if (pos < 0) {
        if (lg_grow((void **)&l->cl, &l->cap_cl, l->ncl + 1, sizeof *l->cl) != 0)
            return DPB_ENOMEM;
        lclient *c = &l->cl[l->ncl];
        memset(c, 0, sizeof *c);
        c->last_ev = LEV_NONE;
        c->id = lg_xstrdup(id);
        if (c->id == NULL)
            return DPB_ENOMEM;
        if (lg_index_insert(l, &l->cl_index, l->ncl, lg_cl_hash, (uint32_t)l->ncl) != 0) {
            free(c->id);
            return DPB_ENOMEM;
        }
        pos = (long)l->ncl++;
    } else {
        lclient *c = &l->cl[pos];
        if (!c->dirty) /* a dirty one is out of the counters already */
            lg_counters(l, c, -1);
        /* stuck: the refused round's spend_after does not depend on eps (the composition's
         * eps at the budget's delta, in every mode): it stays while that is above the new eps
         * and the delta and accounting are the same */
        if (c->stuck_rd && (mode != c->mode || rel != c->rel || delta != c->delta ||
                            (eps != c->eps && !((double)c->stuck_after > eps))))
            c->stuck_rd = 0;
    }
    lclient *c = &l->cl[pos];
    c->eps = eps;
    c->delta = delta;
    c->mode = (uint8_t)mode;
    c->rel = (uint8_t)rel;
    free(c->labels);
    c->labels = labels && labels[0] ? lg_xstrdup(labels) : NULL;
    c->version = ++l->version;
    lg_recompute(l, c);
    lg_counters(l, c, +1);
    c->dirty = 0; /* recomputed and counted (a dirty list entry of it is skipped) */
    if (pos_out)
        *pos_out = pos;
    return DPB_OK;
}

/* Apply a client change whose record (seq) was just appended, keeping what it takes to
 * withdraw it (an undo entry must be reserved). Caller holds the write lock. */
dpb_status lg_apply_logged_client(ledger *l, uint64_t seq, const char *id, double eps, double delta,
                                  int mode, int rel, const char *labels, long *pos_out)
{
    long pos = lg_find_client(l, id);
    lundo u = lg_client_undo(l, seq, pos < 0 ? U_CLIENT_NEW : U_CLIENT_SET, pos);
    if (pos >= 0) {
        lclient *c = &l->cl[pos];
        u.eps = c->eps;
        u.delta = c->delta;
        u.mode = c->mode;
        u.rel = c->rel;
        u.labels = c->labels; /* taken over: apply_client sets fresh labels */
        c->labels = NULL;
    }
    dpb_status st = lg_apply_client(l, id, eps, delta, mode, rel, labels, &pos);
    if (st != DPB_OK) {
        if (u.kind == U_CLIENT_SET) {
            free(l->cl[pos].labels);
            l->cl[pos].labels = u.labels;
        }
        return st;
    }
    u.pos = (uint32_t)pos;
    lg_push_undo(l, &u);
    l->cl[pos].seq = seq;
    if (pos_out)
        *pos_out = pos;
    return DPB_OK;
}

/* Store a named event in memory (bytes copied). -1 when out of memory. */
int lg_apply_name(ledger *l, const char *name, const unsigned char *bytes, size_t n, uint64_t seq)
{
    if (lg_grow((void **)&l->nm, &l->cap_nm, l->nnm + 1, sizeof *l->nm) != 0)
        return -1;
    lname *e = &l->nm[l->nnm];
    e->name = lg_xstrdup(name);
    e->bytes = malloc(n ? n : 1);
    if (e->name == NULL || e->bytes == NULL ||
        lg_index_insert(l, &l->nm_index, l->nnm, lg_nm_hash, (uint32_t)l->nnm) != 0) {
        free(e->name);
        free(e->bytes);
        return -1;
    }
    memcpy(e->bytes, bytes, n);
    e->nbytes = n;
    e->seq = seq;
    l->nnm++;
    l->nm_bytes += n;
    return 0;
}

/* Add d (+1 or -1) to the client's reserved count of ev, dropping an entry that reaches 0;
 * u receives what changed (rv_op, rv_at, rv_old) for lg_resv_undo. -1 when out of memory
 * (nothing changed). */
static int rv_adjust(lclient *c, uint32_t ev, int d, lundo *u)
{
    u->rv_op = LG_RV_NONE;
    for (uint32_t i = 0; i < c->nrv; i++)
        if (c->rv[i].ev == ev) {
            u->rv_at = i;
            if (d < 0 && c->rv[i].count <= (uint64_t)-d) {
                u->rv_op = LG_RV_GONE;
                u->rv_old = c->rv[i].count;
                c->rv[i] = c->rv[--c->nrv]; /* the array keeps its room (for the undo) */
                return 0;
            }
            u->rv_op = d < 0 ? LG_RV_DOWN : LG_RV_UP;
            c->rv[i].count = (uint64_t)((int64_t)c->rv[i].count + d);
            return 0;
        }
    if (d < 0)
        return 0; /* nothing held: nothing to release */
    lcount *n = realloc(c->rv, (c->nrv + 1) * sizeof *n);
    if (n == NULL)
        return -1;
    c->rv = n;
    u->rv_op = LG_RV_NEW;
    u->rv_at = c->nrv;
    c->rv[c->nrv++] = (lcount){ev, (uint64_t)d};
    return 0;
}

/* 1 if the client has no entry of ev yet (a charge would append one). */
static int ev_is_new(const lclient *c, uint32_t ev)
{
    for (uint32_t k = 0; k < c->nev; k++)
        if (c->ev[k].ev == ev)
            return 0;
    return 1;
}

/* A reservation change of the client at pos, applied in memory: held count of ev += hold
 * (+1 reserve, -1 release), and `charge` more of ev charged (a commit). With seq != 0 (live,
 * an undo entry reserved) the entry records what changed (a count up or down, an entry added
 * or removed: no copy of the client's arrays, nothing allocated); during replay (seq 0) the
 * client is only marked for recomputation. A change of what it holds only (charge 0) keeps
 * its spend (the same charged events) and takes its honest status from stuck when it is 0 or
 * 1 (computed before the lock), else computes it. -1 when out of memory (nothing changed). */
int lg_reserve_change(ledger *l, uint64_t seq, long pos, uint32_t ev, int hold, int charge,
                      long rpos, int stuck)
{
    lclient *c = &l->cl[pos];
    lundo u = {0};
    if (rpos >= 0 && lg_hist_ready(c) != 0)
        return -1;
    if (!seq)
        mark_dirty(l, c);
    if (seq) {
        u = lg_client_undo(l, seq, U_RESV, pos);
        u.ev = ev;
        u.charged = (uint8_t)(charge != 0);
        u.ev_new = (uint8_t)(charge && ev_is_new(c, ev));
        lg_counters(l, c, -1);
    }
    if (rv_adjust(c, ev, hold, &u) != 0) {
        if (seq)
            lg_counters(l, c, +1);
        return -1;
    }
    if (charge && add_count(c, ev, 1) != 0) { /* put back exactly what was */
        u.charged = 0;
        lg_resv_undo(c, &u);
        if (seq)
            lg_counters(l, c, +1);
        return -1;
    }
    if (hold > 0 || !charge)
        c->stuck_rd = 0; /* admitted by a reservation, or its held budget released */
    if (charge) {
        c->rounds++;
        c->last_ev = ev;
        if (lg_ev_kind(l, ev) == EV_UNCERTIFIABLE)
            c->uncertified = 1;
    }
    if (rpos >= 0) {
        hist_push(c, (uint32_t)rpos, &u.hold);
        u.hpushed = 1;
    }
    c->version = ++l->version;
    if (!seq) {
        c->dirty = 1;
        return 0;
    }
    lg_push_undo(l, &u);
    c->seq = seq;
    if (charge)
        lg_recompute(l, c);
    else /* only what it holds changed: its spend is that of the same charged events */
        lg_recompute_held(l, c, stuck);
    lg_counters(l, c, +1);
    return 0;
}

/* ---- stuck clients (ledger.h, LEDGER_STUCK; docs/LEDGER.md, "Stuck clients") ----------------
 * stuck_rd names the round whose refusal for the client's budget (over_budget,
 * exhausted) is the latest answer that tested its budget; stuck_after keeps that
 * answer's spend_after, rounded down to a float. An admission (a charge, a reservation, a
 * recorded round after the fact) clears it, and so does a policy refusal (the client passed its
 * own test), a release, expiry or commit without it of a reservation it holds (the budget the
 * refusal counted as held is free again), and a budget change after which the recorded spend
 * may fit (lg_apply_client). Other refusals (unsupported, uncertifiable, duplicate) say nothing
 * of its budget and leave it. Everything here is read from the rounds' logged answers: replay,
 * snapshots and replicas give the same; nothing is computed. */

int lg_offer_touches(const lclient *c, int reason)
{
    return reason == LEDGER_OVER_BUDGET || reason == LEDGER_EXHAUSTED_ALREADY ||
           (reason == LEDGER_POLICY && c->stuck_rd != 0);
}

/* x as a float no larger than x (NaN stays NaN: never above an eps). */
static float float_down(double x)
{
    float f = (float)x;
    return (double)f > x ? nextafterf(f, -HUGE_VALF) : f;
}

void lg_offer_answer(ledger *l, uint64_t seq, long pos, long rpos, int reason, double after)
{
    lclient *c = &l->cl[pos];
    if (!lg_offer_touches(c, reason))
        return;
    if (seq) {
        lundo u = lg_client_undo(l, seq, U_OFFER, pos);
        lg_push_undo(l, &u);
        lg_counters(l, c, -1);
        c->seq = seq;
    }
    if (reason == LEDGER_POLICY) {
        c->stuck_rd = 0;
    } else {
        c->stuck_rd = (uint32_t)rpos + 1;
        c->stuck_after = float_down(after);
    }
    c->version = ++l->version;
    if (seq)
        lg_counters(l, c, +1);
}

/* Drop the per-client answers of the oldest rounds beyond the memory budget. */
static void evict_outcomes(ledger *l)
{
    size_t keep = l->opt.keep_outcomes ? l->opt.keep_outcomes : 4000000;
    while (l->kept_outcomes > keep && l->oldest_kept < l->nrd) {
        lrnd *r = &l->rd[l->oldest_kept++];
        if (r->out == NULL || r->state == LEDGER_RESERVED) /* its commit needs them */
            continue;
        lg_outcomes_free(r->out, r->n);
        r->out = NULL;
        l->kept_outcomes -= r->n;
    }
}

/* A live charge of ev to the client at pos by the round just stored (position l->nrd - 1,
 * record seq), its undo entry pushed (room reserved). 0, or -1 out of memory (nothing
 * changed). */
static int charge_live(ledger *l, uint64_t seq, long pos, uint32_t ev)
{
    lclient *c = &l->cl[pos];
    lundo u = lg_client_undo(l, seq, U_CHARGE, pos);
    u.ev = ev;
    u.ev_new = (uint8_t)ev_is_new(c, ev);
    lg_counters(l, c, -1);
    if (lg_hist_ready(c) != 0 || add_count(c, ev, 1) != 0) {
        lg_counters(l, c, +1);
        return -1;
    }
    hist_push(c, (uint32_t)(l->nrd - 1), &u.hold);
    u.hpushed = 1;
    lg_push_undo(l, &u);
    c->seq = seq;
    c->stuck_rd = 0; /* admitted */
    c->rounds++;
    c->last_ev = ev;
    if (lg_ev_kind(l, ev) == EV_UNCERTIFIABLE)
        c->uncertified = 1;
    lg_recompute(l, c); /* the same multiset the admission evaluated: a cache hit */
    c->version = ++l->version;
    lg_counters(l, c, +1);
    return 0;
}

/* Store a round in memory; takes ownership of out. When apply (a live round: undo entries for
 * the round and each admitted client are reserved), charges every admitted client the
 * round's event interned for its own relation (evi[rel]) and recomputes its spend. */
dpb_status lg_store_round(ledger *l, const char *id, const unsigned char hash[16], int policy,
                          int already_ran, uint64_t seq, const uint32_t evi[2], lout *out,
                          const long *at, uint32_t n, int apply, uint64_t expires_at,
                          const char *owner)
{
    long op = expires_at && owner && owner[0] ? lg_intern_owner(l, owner) : -1;
    if (lg_grow((void **)&l->rd, &l->cap_rd, l->nrd + 1, sizeof *l->rd) != 0 ||
        (expires_at && owner && owner[0] && op < 0))
        return DPB_ENOMEM;
    lrnd *r = &l->rd[l->nrd];
    memset(r, 0, sizeof *r);
    r->id = lg_xstrdup(id);
    if (r->id == NULL)
        return DPB_ENOMEM;
    memcpy(r->hash, hash, 16);
    r->policy = (uint8_t)policy;
    r->already_ran = (uint8_t)already_ran;
    r->seq = seq;
    r->time_ms = l->series_mute ? 0 : l->rec_time; /* a snapshot's rounds: its times, later */
    r->n = n;
    r->out = out;
    r->ev[0] = r->ev[1] = LEV_NONE;
    if (expires_at) { /* a reservation */
        r->phase = 1;
        r->state = LEDGER_RESERVED;
        r->expires_at = expires_at;
        r->owner = op >= 0 ? l->ow[op].name : NULL;
        if (evi) {
            r->ev[0] = evi[0];
            r->ev[1] = evi[1];
        }
    }
    if (lg_index_insert(l, &l->rd_index, l->nrd, lg_rd_hash, (uint32_t)l->nrd) != 0) {
        free(r->id);
        return DPB_ENOMEM;
    }
    if (apply) {
        lundo u = {0};
        u.seq = seq;
        u.lversion = l->version;
        u.kind = U_ROUND;
        u.pos = (uint32_t)l->nrd;
        lg_push_undo(l, &u);
    }
    l->nrd++;
    for (uint32_t i = 0; i < n; i++) /* counted first: a reader in a gap sees the round whole */
        r->admitted += out[i].admitted;
    for (uint32_t i = 0; i < n; i++) {
        if (apply && i > 0 && i % LG_GAP_EVERY == 0)
            lg_let_readers(l); /* each client whole, the record appended */
        int offer = !out[i].admitted &&
                    (out[i].reason == LEDGER_OVER_BUDGET ||
                     out[i].reason == LEDGER_EXHAUSTED_ALREADY || out[i].reason == LEDGER_POLICY);
        long pos = !apply || !(out[i].admitted || offer) ? -1
                   : at                                  ? at[i]
                                                         : lg_find_client(l, out[i].id);
        if (!out[i].admitted) {
            if (pos >= 0) /* undo room reserved for every refused participant */
                lg_offer_answer(l, seq, pos, (long)l->nrd - 1, out[i].reason, out[i].after);
            continue;
        }
        if (pos < 0)
            continue;
        uint32_t ev = evi[l->cl[pos].rel];
        /* a reservation holds it: counted by every admission until committed or released */
        int stuck = (int)out[i].pre_stuck - 1;
        out[i].pre_stuck = 0;
        int bad = expires_at ? lg_reserve_change(l, seq, pos, ev, 1, 0, (long)l->nrd - 1, stuck)
                             : charge_live(l, seq, pos, ev);
        if (bad != 0)
            return DPB_ENOMEM; /* the caller abandons the round (withdrawn as a whole) */
    }
    if (op >= 0)
        l->ow[op].held += r->admitted;
    l->nreserved += expires_at != 0;
    l->kept_outcomes += n;
    lg_series_round(l, r, +1); /* before its outcomes may be summarized */
    evict_outcomes(l);
    return DPB_OK;
}

/* Resolve the reservation at rp (reserved): commit it (charge the admitted outcomes at
 * idx[0..m), release the others) or release it (state LEDGER_RELEASED or LEDGER_EXPIRED).
 * Live (seq: its record, appended; undo entries reserved for the round and each admitted
 * client) or replayed (seq 0). 0, or -1 on a bad index or out of memory (the caller then
 * abandons: everything not durable is withdrawn). */
int lg_resolve_round(ledger *l, long rp, uint64_t seq, int state, const unsigned char *chash,
                     const uint32_t *idx, uint32_t m, const long *hint)
{
    lrnd *r = &l->rd[rp];
    if (r->out == NULL)
        return -1;
    if (seq) {
        lundo u = {0};
        u.seq = seq;
        u.lversion = l->version;
        u.kind = U_RSTATE;
        u.pos = (uint32_t)rp;
        u.rstate = r->state;
        u.rstate_seq = r->state_seq;
        u.rstate_time = r->state_time_ms;
        lg_push_undo(l, &u);
    }
    for (uint32_t i = 0; i < m; i++) {
        if (idx[i] >= r->n || !r->out[idx[i]].admitted || r->out[idx[i]].reported) {
            for (uint32_t k = 0; k < r->n; k++)
                r->out[k].reported = 0;
            return -1;
        }
        r->out[idx[i]].reported = 1;
    }
    for (uint32_t i = 0; i < r->n; i++) {
        if (seq && i > 0 && i % LG_GAP_EVERY == 0)
            lg_let_readers(l); /* each client whole, the record appended */
        if (!r->out[i].admitted)
            continue;
        long pos = lg_client_at(l, hint ? hint[i] : -1, r->out[i].id);
        if (pos < 0)
            continue;
        uint32_t ev = r->ev[l->cl[pos].rel];
        if (ev == LEV_NONE)
            continue;
        int charge = state == LEDGER_COMMITTED && r->out[i].reported;
        int stuck = charge ? -1 : (int)r->out[i].pre_stuck - 1;
        r->out[i].pre_stuck = 0;
        if (lg_reserve_change(l, seq, pos, ev, -1, charge, -1, stuck) != 0)
            return -1;
    }
    if (r->state == LEDGER_RESERVED && state != LEDGER_RESERVED) {
        lg_owner_count(l, r, -1); /* its owner holds it no longer */
        l->nreserved -= l->nreserved > 0;
    }
    r->state = (uint8_t)state;
    r->state_seq = seq ? seq : l->last_seq;
    r->state_time_ms = l->rec_time;
    r->reported = m;
    if (chash)
        memcpy(r->chash, chash, 16);
    lg_series_commit(l, r, +1);
    return 0;
}

void lg_settle_dirty(ledger *l)
{
    size_t n = l->dirty_lost ? l->ncl : l->ndirty;
    for (size_t i = 0; i < n; i++) {
        size_t pos = l->dirty_lost ? i : l->dirty[i];
        lclient *c = pos < l->ncl ? &l->cl[pos] : NULL;
        if (c == NULL || !c->dirty)
            continue;
        lg_recompute(l, c);
        c->dirty = 0;
        lg_counters(l, c, +1);
    }
    l->ndirty = 0;
    l->dirty_lost = 0;
}

/* A replayed charge of the client at pos by the round being stored (position l->nrd): its
 * spend is recomputed after the replay (dirty). */
int lg_replay_charge(ledger *l, long pos, uint32_t ev, int uncertifiable)
{
    lclient *c = &l->cl[pos];
    int bad = 0;
    mark_dirty(l, c);
    if (add_count(c, ev, 1) != 0 || lg_hist_ready(c) != 0)
        bad = 1;
    else
        hist_push(c, (uint32_t)l->nrd, NULL);
    c->rounds++;
    c->last_ev = ev;
    c->stuck_rd = 0; /* admitted */
    if (uncertifiable && lg_ev_kind(l, ev) == EV_UNCERTIFIABLE)
        c->uncertified = 1;
    c->version = ++l->version;
    return bad ? -1 : 0;
}
