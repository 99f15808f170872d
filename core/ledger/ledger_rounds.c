/*
 * ledger_rounds.c - rounds: admission under the policies, idempotent round ids, two-phase
 * rounds (reserve, commit, release, expiry), eligibility queries, stored rounds.
 */
#include "ledger_int.h"

/* ---- rounds ---------------------------------------------------------------------------------- */

const char *ledger_reason_name(ledger_reason r)
{
    static const char *const names[] = {"admitted",          "over_budget", "unknown_client",
                                        "uncertifiable",     "unsupported", "all_or_nothing",
                                        "duplicate",         "exhausted",   "recorded_past_budget",
                                        "filter_unsupported"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "unknown";
}

const char *ledger_round_state_name(ledger_round_state s)
{
    static const char *const names[] = {"charged", "reserved", "committed", "released", "expired"};
    return (unsigned)s < 5 ? names[s] : "unknown";
}

const char *ledger_status_name(ledger_status s)
{
    static const char *const names[] = {"active", "exhausted", "uncertified"};
    return (unsigned)s < 3 ? names[s] : "unknown";
}

/* Drop the per-client answers of the oldest rounds beyond the memory budget. */
static void evict_outcomes(ledger *l)
{
    size_t keep = l->opt.keep_outcomes ? l->opt.keep_outcomes : 4000000;
    while (l->kept_outcomes > keep && l->oldest_kept < l->nrd) {
        lrnd *r = &l->rd[l->oldest_kept++];
        if (r->out == NULL || r->state == LEDGER_RESERVED) /* its commit needs them */
            continue;
        for (uint32_t i = 0; i < r->n; i++)
            if (r->out[i].owned)
                free((char *)r->out[i].id);
        free(r->out);
        r->out = NULL;
        l->kept_outcomes -= r->n;
    }
}

static void outcome_guarantee(const ledger *l, ledger_outcome *o, int creating);

static void res_of(const ledger *l, const lrnd *r, ledger_round_res *res)
{
    memset(res, 0, sizeof *res);
    snprintf(res->round_id, sizeof res->round_id, "%s", r->id);
    res->policy = (ledger_policy)r->policy;
    res->already_ran = r->already_ran;
    res->seq = r->seq;
    res->n = r->n;
    res->admitted = r->admitted;
    res->reserve = r->phase;
    res->state = (ledger_round_state)r->state;
    res->expires_at = r->expires_at;
    res->reported = r->reported;
    if (r->out == NULL) {
        res->summarized = 1;
        return;
    }
    res->outcomes = calloc(r->n ? r->n : 1, sizeof *res->outcomes);
    if (res->outcomes == NULL) {
        res->summarized = 1;
        return;
    }
    for (uint32_t i = 0; i < r->n; i++) {
        ledger_outcome *o = &res->outcomes[i];
        snprintf(o->id, sizeof o->id, "%s", r->out[i].id);
        o->admitted = r->out[i].admitted;
        o->reason = (ledger_reason)r->out[i].reason;
        o->spent_before = r->out[i].before;
        o->spent_after = r->out[i].after;
        o->after_accountant = r->out[i].acct;
        o->reported = r->out[i].reported;
        outcome_guarantee(l, o, 0);
    }
}

void ledger_round_res_free(ledger_round_res *r)
{
    free(r->outcomes);
    r->outcomes = NULL;
}

/* Add d (+1 or -1) to the client's reserved count of ev, dropping an entry that reaches 0;
 * -1 when out of memory (nothing changed). */
static int rv_adjust(lclient *c, uint32_t ev, int d)
{
    for (uint32_t i = 0; i < c->nrv; i++)
        if (c->rv[i].ev == ev) {
            if (d < 0 && c->rv[i].count <= (uint64_t)-d) {
                c->rv[i] = c->rv[--c->nrv];
                return 0;
            }
            c->rv[i].count = (uint64_t)((int64_t)c->rv[i].count + d);
            return 0;
        }
    if (d < 0)
        return 0; /* nothing held: nothing to release */
    lcount *n = realloc(c->rv, (c->nrv + 1) * sizeof *n);
    if (n == NULL)
        return -1;
    c->rv = n;
    c->rv[c->nrv++] = (lcount){ev, (uint64_t)d};
    return 0;
}

static lcount *copy_counts(const lcount *a, uint32_t n, int *oom)
{
    if (n == 0)
        return NULL;
    lcount *c = malloc(n * sizeof *c);
    if (c == NULL)
        *oom = 1;
    else
        memcpy(c, a, n * sizeof *c);
    return c;
}

/* A reservation change of the client at pos, applied in memory: held count of ev += hold
 * (+1 reserve, -1 release), and `charge` more of ev charged (a commit). With seq != 0 (live,
 * an undo entry reserved) the client's events and reservations are kept to withdraw it;
 * during replay (seq 0) the client is only marked for recomputation. -1 when out of memory. */
int lg_reserve_change(ledger *l, uint64_t seq, long pos, uint32_t ev, int hold, int charge,
                      long rpos)
{
    lclient *c = &l->cl[pos];
    lundo u = {0};
    if (rpos >= 0 && lg_hist_ready(c) != 0)
        return -1;
    if (seq) {
        int oom = 0;
        u = lg_client_undo(l, seq, U_CSNAP, pos);
        u.sev = copy_counts(c->ev, c->nev, &oom);
        u.snev = c->nev;
        u.srv = copy_counts(c->rv, c->nrv, &oom);
        u.snrv = c->nrv;
        if (oom) {
            free(u.sev);
            free(u.srv);
            return -1;
        }
        lg_counters(l, c, -1);
    }
    int bad = rv_adjust(c, ev, hold) != 0 || (charge && lg_add_count(c, ev, 1) != 0);
    if (bad && seq) { /* put back exactly what was */
        free(c->ev);
        free(c->rv);
        c->ev = u.sev;
        c->nev = u.snev;
        c->rv = u.srv;
        c->nrv = u.snrv;
        lg_counters(l, c, +1);
        return -1;
    }
    if (charge) {
        c->rounds++;
        c->last_ev = ev;
        if (l->evs[ev].kind == EV_UNCERTIFIABLE)
            c->uncertified = 1;
    }
    if (rpos >= 0) {
        lg_hist_push(c, (uint32_t)rpos, &u.hold);
        u.hpushed = 1;
    }
    c->version = ++l->version;
    if (!seq) {
        c->dirty = 1;
        return bad ? -1 : 0;
    }
    lg_push_undo(l, &u);
    c->seq = seq;
    lg_recompute(l, c);
    lg_counters(l, c, +1);
    return 0;
}

/* Store a round in memory; takes ownership of out. When apply (a live round: undo entries for
 * the round and each admitted client are reserved), charges every admitted client the
 * round's event interned for its own relation (evi[rel]) and recomputes its spend. */
dpb_status lg_store_round(ledger *l, const char *id, const unsigned char hash[16], int policy,
                          int already_ran, uint64_t seq, const uint32_t evi[2], lout *out,
                          uint32_t n, int apply, uint64_t expires_at)
{
    if (lg_grow((void **)&l->rd, &l->cap_rd, l->nrd + 1, sizeof *l->rd) != 0)
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
    r->n = n;
    r->out = out;
    r->ev[0] = r->ev[1] = LEV_NONE;
    if (expires_at) { /* a reservation */
        r->phase = 1;
        r->state = LEDGER_RESERVED;
        r->expires_at = expires_at;
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
    for (uint32_t i = 0; i < n; i++) {
        if (!out[i].admitted)
            continue;
        r->admitted++;
        if (!apply)
            continue;
        long pos = lg_find_client(l, out[i].id);
        if (pos < 0)
            continue;
        lclient *c = &l->cl[pos];
        uint32_t ev = evi[c->rel];
        if (expires_at) { /* hold it: counted by every admission until committed or released */
            if (lg_reserve_change(l, seq, pos, ev, 1, 0, (long)l->nrd - 1) != 0)
                return DPB_ENOMEM; /* the caller abandons the round (withdrawn as a whole) */
            continue;
        }
        lundo u = lg_client_undo(l, seq, U_CHARGE, pos);
        u.ev = ev;
        u.ev_new = 1;
        for (uint32_t k = 0; k < c->nev; k++)
            if (c->ev[k].ev == ev)
                u.ev_new = 0;
        lg_counters(l, c, -1);
        if (lg_hist_ready(c) != 0 || lg_add_count(c, ev, 1) != 0) {
            lg_counters(l, c, +1);
            return DPB_ENOMEM; /* the caller abandons the round (withdrawn as a whole) */
        }
        lg_hist_push(c, (uint32_t)(l->nrd - 1), &u.hold);
        u.hpushed = 1;
        lg_push_undo(l, &u);
        c->seq = seq;
        c->rounds++;
        c->last_ev = ev;
        if (l->evs[ev].kind == EV_UNCERTIFIABLE)
            c->uncertified = 1;
        lg_recompute(l, c); /* the same multiset the admission evaluated: a cache hit */
        c->version = ++l->version;
        lg_counters(l, c, +1);
    }
    l->kept_outcomes += n;
    evict_outcomes(l);
    return DPB_OK;
}

/* Resolve the reservation at rp (reserved): commit it (charge the admitted outcomes at
 * idx[0..m), release the others) or release it (state LEDGER_RELEASED or LEDGER_EXPIRED).
 * Live (seq: its record, appended; undo entries reserved for the round and each admitted
 * client) or replayed (seq 0). 0, or -1 on a bad index or out of memory (the caller then
 * abandons: everything not durable is withdrawn). */
int lg_resolve_round(ledger *l, long rp, uint64_t seq, int state, const unsigned char *chash,
                     const uint32_t *idx, uint32_t m)
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
        if (!r->out[i].admitted)
            continue;
        long pos = lg_find_client(l, r->out[i].id);
        if (pos < 0)
            continue;
        uint32_t ev = r->ev[l->cl[pos].rel];
        if (ev == LEV_NONE)
            continue;
        int charge = state == LEDGER_COMMITTED && r->out[i].reported;
        if (lg_reserve_change(l, seq, pos, ev, -1, charge, -1) != 0)
            return -1;
    }
    r->state = (uint8_t)state;
    r->state_seq = seq ? seq : l->last_seq;
    r->reported = m;
    if (chash)
        memcpy(r->chash, chash, 16);
    return 0;
}

static void round_record(bw *w, const char *id, const unsigned char hash[16], int policy,
                         int already_ran, uint32_t ev, const lout *out, uint32_t n)
{
    bw_str(w, id);
    bw_put(w, hash, 16);
    bw_u8(w, (unsigned)policy);
    bw_u8(w, (unsigned)already_ran);
    bw_u32(w, ev);
    bw_u32(w, n);
    for (uint32_t i = 0; i < n; i++) {
        bw_str(w, out[i].id);
        bw_u8(w, out[i].admitted);
        bw_u8(w, out[i].reason);
        bw_f64(w, out[i].before);
        bw_f64(w, out[i].after);
    }
}

/* Log the interned events not in the log yet, in index order (replay checks it), each with
 * its undo entry (reserved by the caller). On failure the caller withdraws. Caller holds the
 * write lock. */
dpb_status lg_log_new_events(ledger *l, dpb_error *err)
{
    while (l->nevs_logged < l->nevs) {
        uint32_t idx = (uint32_t)l->nevs_logged;
        bw w = {0};
        bw_u32(&w, idx);
        bw_u8(&w, (unsigned)l->evs[idx].rel);
        bw_put(&w, l->evs[idx].bytes, l->evs[idx].nbytes);
        dpb_status st = lg_log_record(l, REC_EVENT, &w, err);
        free(w.b);
        if (st != DPB_OK)
            return st;
        lundo u = {0};
        u.seq = l->last_seq;
        u.lversion = l->version;
        u.kind = U_EVENT;
        u.pos = idx;
        lg_push_undo(l, &u);
        l->nevs_logged++;
    }
    return DPB_OK;
}

/* Why client id's accounting mode cannot account the event v. */
static void unsupported_why(char *why, size_t cap, const char *id, ledger_mode mode, const lev *v)
{
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

/* The admission test of `extra` more rounds of event xev for client c (a stored client, or a
 * new one with the default budget), counting its held reservations; *after receives the
 * spend they would leave. LEDGER_OK when admitted. */
ledger_reason lg_admission(ledger *l, const lclient *c, int known, uint32_t xev, uint64_t extra,
                           double *after, int8_t *acct)
{
    const lev *v = &l->evs[xev];
    spend_result sr;
    lg_spend_held(l, c, xev, extra, &sr);
    *after = sr.spent;
    if (acct)
        *acct = (int8_t)sr.accountant;
    if (v->kind == EV_UNCERTIFIABLE || sr.uncertified)
        return LEDGER_UNCERTIFIABLE;
    if (sr.unsupported && ledger_mode_is_filter((ledger_mode)c->mode))
        return LEDGER_FILTER_UNSUPPORTED;
    if (sr.unsupported || v->kind == EV_NOT_COVERED ||
        (c->mode == LEDGER_RDP && v->kind == EV_PLD_ONLY))
        return LEDGER_UNSUPPORTED;
    if (known && c->spent >= c->eps && !(*after <= c->eps))
        return LEDGER_EXHAUSTED_ALREADY;
    return *after <= c->eps ? LEDGER_OK : LEDGER_OVER_BUDGET;
}

/* The accounting mode and, for an admitted charge, the guarantee of an outcome. */
static void outcome_guarantee(const ledger *l, ledger_outcome *o, int creating)
{
    long pos = lg_find_client(l, o->id);
    o->mode = pos >= 0 ? l->cl[pos].mode : creating && l->opt.default_budget ? LEDGER_RDP : -1;
    double eps = pos >= 0 ? l->cl[pos].eps : l->opt.default_epsilon;
    o->guarantee = o->mode < 0 ? LEDGER_NO_GUARANTEE
                               : ledger_guarantee_of((ledger_mode)o->mode, o->spent_after, eps, 0);
}

/* ---- the spends a round needs, computed before its lock ---------------------------------------
 *
 * A pld client's spend may need its PLD (spend.c: when the rdp bound is past the budget),
 * which takes from milliseconds to seconds. It is computed here, before the round takes the
 * write lock, from a copy of each participant's counts taken under the read lock, and kept in
 * spend.c's cache by content; the admission under the write lock then evaluates the same
 * multiset and finds it. Should a participant's counts have changed in between (a concurrent
 * round charged it), the admission computes its own value: still exact, only slower. The
 * round's event is registered in spend.c here too (its RDP curve), and held until the round
 * ends so that lg_intern() finds it. */
static void prefetch_spends(ledger *l, const ledger_round_req *req, spend_event *pre[2])
{
    unsigned char *eb = NULL;
    size_t elen = 0, ecap = 0, nt = 0, cap_t = 0, ns = 0;
    struct pclient {
        double eps, delta;
        uint8_t rel;
        size_t off, m;
    } *sn = malloc(req->n * sizeof *sn);
    spend_term *t = NULL;
    int rels[2] = {0, 0}, ok = 1;
    if (sn == NULL || dp_event_encode(req->event, &eb, &elen, &ecap) != DPB_OK) {
        free(sn);
        free(eb);
        return;
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
        if (lg_grow((void **)&t, &cap_t, nt + c->nev + c->nrv + 1, sizeof *t) != 0) {
            ok = 0;
            break;
        }
        /* the charged events (distinct), then the held reservations merged in: the multiset
         * admission composes, in lg_spend_held's order */
        size_t off = nt;
        for (uint32_t k = 0; k < c->nev; k++)
            t[nt++] = (spend_term){l->evs[c->ev[k].ev].se, c->ev[k].count};
        for (uint32_t k = 0; k < c->nrv; k++) {
            spend_event *se = l->evs[c->rv[k].ev].se;
            size_t j = off;
            while (j < nt && t[j].ev != se)
                j++;
            if (j < nt)
                t[j].count += c->rv[k].count;
            else
                t[nt++] = (spend_term){se, c->rv[k].count};
        }
        /* decided by the rdp bound within the budget, both times: no PLD to compute (the
         * client's memo tells in a few comparisons, under this read lock) */
        spend_event *x = pre[c->rel];
        dp_relation rel = (dp_relation)c->rel;
        if (spend_rdp_within(l->sp, c->memo, c->eps, c->delta, rel, t + off, nt - off, x, 1) &&
            spend_rdp_within(l->sp, c->memo, c->eps, c->delta, rel, t + off, nt - off, x, 2)) {
            nt = off;
            continue;
        }
        for (size_t j = off; j < nt; j++)
            spend_event_ref(l->sp, t[j].ev); /* a withdrawn charge could drop it meanwhile */
        sn[ns] = (struct pclient){c->eps, c->delta, c->rel, off, nt - off};
        nt++; /* room for the round's event */
        ns++;
    }
    pthread_rwlock_unlock(&l->lock);
    /* each candidate: the client's terms with the round's event once more (its admission),
     * and twice more (its status after the charge: whether one more still fits) */
    spend_candidate *cand = ok ? malloc((2 * ns + 1) * sizeof *cand) : NULL;
    spend_term *w = cand ? malloc((2 * nt + 1) * sizeof *w) : NULL;
    size_t nc = 0;
    for (size_t i = 0; w && i < ns; i++) {
        for (uint64_t more = 1; more <= 2; more++) {
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
            cand[nc++] = (spend_candidate){sn[i].eps, sn[i].delta, (dp_relation)sn[i].rel, cw, m};
        }
    }
    if (w)
        spend_prefetch(l->sp, cand, nc);
    free(w);
    free(cand);
    for (size_t i = 0; i < ns; i++)
        for (size_t k = 0; k < sn[i].m; k++)
            spend_event_put(l->sp, t[sn[i].off + k].ev);
    free(t);
    free(sn);
    free(eb);
}

static dpb_status round_apply(ledger *l, const ledger_round_req *req, ledger_round_res *res,
                              dpb_error *err);

dpb_status ledger_round(ledger *l, const ledger_round_req *req, ledger_round_res *res,
                        dpb_error *err)
{
    spend_event *pre[2] = {NULL, NULL};
    lg_refine_yield(l); /* before the prefetch's computations */
    if (req->event != NULL && req->n > 0 && req->n <= LEDGER_MAX_PARTICIPANTS)
        prefetch_spends(l, req, pre);
    dpb_status st;
    RETRY_RACES(st, round_apply(l, req, res, err), err);
    spend_event_put(l->sp, pre[0]);
    spend_event_put(l->sp, pre[1]);
    return st;
}

static dpb_status round_apply(ledger *l, const ledger_round_req *req, ledger_round_res *res,
                              dpb_error *err)
{
    memset(res, 0, sizeof *res);
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
    unsigned char *ebytes = NULL;
    size_t elen = 0, ecap = 0;
    dpb_status st = dp_event_encode(req->event, &ebytes, &elen, &ecap);
    if (st != DPB_OK) {
        free(ebytes);
        return dpb_fail(err, st, "event", "the event cannot be recorded");
    }
    lout *out = calloc(req->n, sizeof *out);
    if (out == NULL) {
        free(ebytes);
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    }
    uint64_t seq = 0;
    uint32_t *seen = NULL;
    char why[400] = "";
    pthread_rwlock_wrlock(&l->lock);
    if ((st = lg_begin_write(l, err)) != DPB_OK)
        goto fail;
    uint64_t gen = lg_cur_gen(l);
    long rpos = lg_find_round(l, req->round_id);
    /* A stored round is answered (replayed, or a conflict) only once it is durable: one whose
     * record a failure cut away is withdrawn first, and then this is a new round (refused
     * below if the ledger is read-only). A round durable before a failure is still
     * replayed. */
    while (rpos >= 0 && !req->dry_run && lg_settle(l, l->rd[rpos].seq) != 0) {
        lg_withdraw_locked(l);
        rpos = lg_find_round(l, req->round_id);
    }
    /* A dry run answers from durable state only. */
    if (req->dry_run && lg_settle(l, l->last_seq) != 0)
        lg_withdraw_locked(l);
    if (rpos >= 0 && !req->dry_run) {
        static const unsigned char none[16];
        int same = memcmp(l->rd[rpos].hash, req->body_hash, 16) == 0 ||
                   (memcmp(req->legacy_hash, none, 16) != 0 &&
                    memcmp(l->rd[rpos].hash, req->legacy_hash, 16) == 0);
        if (!same) {
            st = dpb_fail(err, DPB_ECONFLICT, "round_id",
                          "round id '%s' was already used with a different request body",
                          req->round_id);
        } else {
            res_of(l, &l->rd[rpos], res);
            res->replayed = 1;
            st = DPB_OK;
        }
        pthread_rwlock_unlock(&l->lock);
        free(ebytes);
        free(out);
        return st;
    }
    if (lg_ledger_ro(l) && !req->dry_run) {
        pthread_rwlock_unlock(&l->lock);
        free(ebytes);
        free(out);
        return lg_readonly_error(err);
    }
    /* The relation is the client's: intern per relation actually used (at most two). */
    uint32_t evi[2] = {0, 0};
    int have[2] = {0, 0}, fresh[2] = {0, 0};
    size_t refused = 0;
    /* duplicates: an open-addressing set of participant indices */
    size_t scap = 16;
    while (scap < 2 * req->n)
        scap *= 2;
    seen = malloc(scap * sizeof *seen);
    if (seen == NULL) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        goto fail;
    }
    memset(seen, 0xff, scap * sizeof *seen);
    for (size_t i = 0; i < req->n; i++) {
        lout *o = &out[i];
        o->id = req->participants[i];
        o->acct = -1;
        long pos = lg_find_client(l, o->id);
        size_t h = (size_t)lg_str_hash(o->id) & (scap - 1);
        while (seen[h] != UINT32_MAX && strcmp(req->participants[seen[h]], o->id) != 0)
            h = (h + 1) & (scap - 1);
        if (seen[h] != UINT32_MAX) {
            o->reason = LEDGER_DUPLICATE;
            o->before = o->after = pos >= 0 ? l->cl[pos].spent : NAN;
            refused++;
            continue;
        }
        seen[h] = (uint32_t)i;
        if (pos < 0 && !l->opt.default_budget) {
            o->reason = LEDGER_UNKNOWN_CLIENT;
            o->before = o->after = NAN;
            refused++;
            continue;
        }
        int rel = pos >= 0 ? l->cl[pos].rel : DP_REL_ADD_OR_REMOVE;
        if (!have[rel]) {
            st = lg_intern(l, ebytes, elen, (dp_relation)rel, &evi[rel], &fresh[rel]);
            if (st != DPB_OK) {
                dpb_fail(err, st, "event", "the event could not be prepared");
                goto fail;
            }
            have[rel] = 1;
        }
        const lev *v = &l->evs[evi[rel]];
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
        o->reason = (uint8_t)lg_admission(l, c, pos >= 0, evi[rel], 1, &o->after, &o->acct);
        /* After the fact, every known participant is recorded, even past its budget (an
         * uncertifiable round makes the spend infinite); unsupported events still are not. */
        if (req->already_ran && o->reason != LEDGER_OK && o->reason != LEDGER_UNSUPPORTED &&
            o->reason != LEDGER_FILTER_UNSUPPORTED && o->reason != LEDGER_UNKNOWN_CLIENT)
            o->reason = LEDGER_RECORDED;
        o->admitted = o->reason == LEDGER_OK || o->reason == LEDGER_RECORDED;
        if (!o->admitted)
            refused++;
        if ((o->reason == LEDGER_UNSUPPORTED || o->reason == LEDGER_FILTER_UNSUPPORTED) &&
            why[0] == '\0')
            unsupported_why(why, sizeof why, o->id, (ledger_mode)c->mode, v);
    }
    free(seen);
    seen = NULL;
    /* an event that no participant's accounting can account is a bad request, not a round:
     * nothing is stored, and the answer says why */
    size_t nunsup = 0;
    for (size_t i = 0; i < req->n; i++)
        nunsup += out[i].reason == LEDGER_UNSUPPORTED || out[i].reason == LEDGER_FILTER_UNSUPPORTED;
    if (nunsup == req->n) {
        st = dpb_fail(err, DPB_EUNSUPPORTED, "event", "%s", why);
        goto fail;
    }
    /* all_or_nothing voids the round, except after the fact: a round that ran is recorded
     * for every known participant */
    if (req->policy == LEDGER_ALL_OR_NOTHING && refused > 0 && !req->already_ran)
        for (size_t i = 0; i < req->n; i++)
            if (out[i].admitted) {
                out[i].admitted = 0;
                out[i].reason = LEDGER_POLICY;
            }
    /* The answer, from `out` (ids borrowed from the request). */
    snprintf(res->round_id, sizeof res->round_id, "%s", req->round_id);
    res->policy = req->policy;
    res->dry_run = req->dry_run;
    res->already_ran = req->already_ran;
    res->n = req->n;
    res->outcomes = calloc(req->n, sizeof *res->outcomes);
    if (res->outcomes == NULL) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < req->n; i++) {
        ledger_outcome *o = &res->outcomes[i];
        snprintf(o->id, sizeof o->id, "%s", out[i].id);
        o->admitted = out[i].admitted;
        o->reason = out[i].admitted && out[i].reason == LEDGER_OK ? LEDGER_OK : out[i].reason;
        o->spent_before = out[i].before;
        o->spent_after = out[i].after;
        o->after_accountant = out[i].acct;
        outcome_guarantee(l, o, 1);
        res->admitted += (size_t)out[i].admitted;
    }
    res->reserve = req->reserve;
    res->state = req->reserve ? LEDGER_RESERVED : LEDGER_CHARGED;
    if (req->dry_run) {
        lg_drop_unlogged_events(l); /* a dry run leaves nothing behind, not even an event */
        pthread_rwlock_unlock(&l->lock);
        free(ebytes);
        free(out);
        return DPB_OK;
    }
    /* Room to withdraw everything this round changes, before anything is logged: its new
     * events, its new clients, its charges and the round itself. */
    size_t changes = (l->nevs - l->nevs_logged) + 1;
    for (size_t i = 0; i < req->n; i++)
        if (out[i].admitted)
            changes += lg_find_client(l, out[i].id) < 0 ? 2 : 1; /* created, charged */
    if (lg_reserve_undo(l, changes) != 0) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        goto fail;
    }
    /* Log: new events (in index order: replay checks it), new clients, the round; each
     * applied as it is logged. */
    (void)fresh;
    if ((st = lg_log_new_events(l, err)) != DPB_OK)
        goto fail_io;
    for (size_t i = 0; i < req->n; i++)
        if (out[i].admitted && lg_find_client(l, out[i].id) < 0) {
            bw w = {0};
            lg_client_record(&w, out[i].id, l->opt.default_epsilon, l->opt.default_delta,
                             LEDGER_RDP, DP_REL_ADD_OR_REMOVE, NULL);
            st = lg_log_record(l, REC_CLIENT, &w, err);
            free(w.b);
            if (st != DPB_OK)
                goto fail_io;
            st = lg_apply_logged_client(l, l->last_seq, out[i].id, l->opt.default_epsilon,
                                        l->opt.default_delta, LEDGER_RDP, DP_REL_ADD_OR_REMOVE,
                                        NULL, NULL);
            if (st != DPB_OK) {
                lg_abandon(l, st, err);
                goto fail;
            }
        }
    /* outcome ids must outlive the request: point at the clients' ids, or own a copy */
    for (size_t i = 0; i < req->n; i++) {
        long pos = lg_find_client(l, out[i].id);
        if (pos >= 0) {
            out[i].id = l->cl[pos].id;
        } else {
            out[i].id = lg_xstrdup(out[i].id);
            out[i].owned = 1;
            if (out[i].id == NULL) {
                out[i].owned = 0;
                st = lg_abandon(l, DPB_ENOMEM, err);
                goto fail;
            }
        }
    }
    uint32_t ev_used = have[0] ? evi[0] : evi[1];
    uint64_t expires = req->reserve ? (uint64_t)time(NULL) + req->ttl_seconds : 0;
    const uint32_t evs[2] = {have[0] ? evi[0] : LEV_NONE, have[1] ? evi[1] : LEV_NONE};
    bw w = {0};
    round_record(&w, req->round_id, req->body_hash, req->policy, req->already_ran, ev_used, out,
                 (uint32_t)req->n);
    if (req->reserve)
        bw_u64(&w, expires);
    st = lg_log_record(l, req->reserve ? REC_RESERVE : REC_ROUND, &w, err);
    free(w.b);
    if (st != DPB_OK)
        goto fail_io;
    seq = l->last_seq;
    res->seq = seq;
    res->reserve = req->reserve;
    res->state = req->reserve ? LEDGER_RESERVED : LEDGER_CHARGED;
    res->expires_at = expires;
    size_t nrd = l->nrd;
    st = lg_store_round(l, req->round_id, req->body_hash, req->policy, req->already_ran, seq, evs,
                        out, (uint32_t)req->n, 1, expires);
    if (l->nrd > nrd)
        out = NULL; /* taken over by the stored round (withdrawn with it on failure) */
    if (st != DPB_OK) {
        lg_abandon(l, st, err);
        goto fail;
    }
    pthread_rwlock_unlock(&l->lock);
    free(ebytes);
    st = lg_commit(l, seq, gen, err);
    lg_maybe_snapshot(l);
    if (st != DPB_OK)
        ledger_round_res_free(res);
    return st;
fail_io:
    lg_withdraw_locked(l); /* the log failed: everything not durable goes, this round's too */
fail:
    lg_drop_unlogged_events(l);
    pthread_rwlock_unlock(&l->lock);
    free(seen);
    free(ebytes);
    for (size_t i = 0; out && i < req->n; i++)
        if (out[i].owned)
            free((char *)out[i].id);
    free(out);
    ledger_round_res_free(res);
    return st;
}

/* ---- two-phase rounds: commit, release, expiry ----------------------------------------------- */

/* The position of stored round id once durable, with its last state change (one whose
 * record a failure cut away is withdrawn first), or -1. Caller holds the write lock. */
static long durable_round(ledger *l, const char *id)
{
    long rp = lg_find_round(l, id);
    while (rp >= 0 &&
           lg_settle(l, l->rd[rp].seq > l->rd[rp].state_seq ? l->rd[rp].seq
                                                            : l->rd[rp].state_seq) != 0) {
        lg_withdraw_locked(l);
        rp = lg_find_round(l, id);
    }
    return rp;
}

/* Log and apply the release of the reservation at rp (expired: by the ledger, its time up);
 * *seq receives its record. Caller holds the write lock after begin_write. */
static dpb_status release_locked(ledger *l, long rp, int expired, uint64_t *seq, dpb_error *err)
{
    if (lg_reserve_undo(l, 1 + (size_t)l->rd[rp].admitted) != 0)
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    bw w = {0};
    bw_str(&w, l->rd[rp].id);
    bw_u8(&w, (unsigned)expired);
    dpb_status st = lg_log_record(l, REC_RELEASE, &w, err);
    free(w.b);
    if (st != DPB_OK) {
        lg_withdraw_locked(l);
        return st;
    }
    *seq = l->last_seq;
    if (lg_resolve_round(l, rp, *seq, expired ? LEDGER_EXPIRED : LEDGER_RELEASED, NULL, NULL, 0) !=
        0)
        return lg_abandon(l, DPB_ENOMEM, err);
    return DPB_OK;
}

/* Why a round that is not reserved cannot be committed or released (DPB_ECONFLICT). */
static dpb_status not_reserved(const lrnd *r, const char *what, dpb_error *err)
{
    if (!r->phase)
        return dpb_fail(err, DPB_ECONFLICT, "round_id",
                        "round '%s' was charged in one step (its request had no \"phase\": "
                        "\"reserve\"): there is nothing to %s",
                        r->id, what);
    if (r->state == LEDGER_COMMITTED)
        return dpb_fail(err, DPB_ECONFLICT, "round_id", "round '%s' was already committed%s", r->id,
                        strcmp(what, "commit") == 0 ? " with another list of reported clients"
                                                    : ": its charges stand");
    if (r->state == LEDGER_EXPIRED)
        return dpb_fail(err, DPB_ECONFLICT, "round_id",
                        "the reservation of round '%s' expired (its reservation_ttl_seconds "
                        "passed) and its clients' budget was released: reserve a new round",
                        r->id);
    return dpb_fail(err, DPB_ECONFLICT, "round_id",
                    "the reservation of round '%s' was released: reserve a new round", r->id);
}

/* After a commit or release: acknowledge once its record (seq, 0: none) is durable. */
static dpb_status finish_resolve(ledger *l, uint64_t seq, uint64_t gen, dpb_status st,
                                 ledger_round_res *res, dpb_error *err)
{
    if (seq == 0)
        return st;
    dpb_status cs = lg_commit(l, seq, gen, err);
    lg_maybe_snapshot(l);
    if (cs != DPB_OK) {
        ledger_round_res_free(res);
        return cs;
    }
    return st;
}

static dpb_status commit_once(ledger *l, const char *round_id, const char *const *reported,
                              size_t n, const unsigned char hash[16], ledger_round_res *res,
                              dpb_error *err);

dpb_status ledger_commit(ledger *l, const char *round_id, const char *const *reported, size_t n,
                         const unsigned char hash[16], ledger_round_res *res, dpb_error *err)
{
    dpb_status st;
    RETRY_RACES(st, commit_once(l, round_id, reported, n, hash, res, err), err);
    return st;
}

static dpb_status commit_once(ledger *l, const char *round_id, const char *const *reported,
                              size_t n, const unsigned char hash[16], ledger_round_res *res,
                              dpb_error *err)
{
    memset(res, 0, sizeof *res);
    if (!lg_valid_id(round_id))
        return dpb_fail(err, DPB_EINVAL, "round_id", "a round id is " LEDGER_ID_RULE);
    if (n > LEDGER_MAX_PARTICIPANTS)
        return dpb_fail(err, DPB_EINVAL, "reported", "at most %d reported clients",
                        LEDGER_MAX_PARTICIPANTS);
    uint32_t *idx = NULL, *slot = NULL;
    uint64_t seq = 0;
    pthread_rwlock_wrlock(&l->lock);
    dpb_status st = lg_begin_write(l, err);
    uint64_t gen = lg_cur_gen(l);
    if (st != DPB_OK)
        goto out;
    long rp = durable_round(l, round_id);
    if (rp < 0) {
        st = dpb_fail(err, DPB_ENOTFOUND, "round_id", "no round '%s'", round_id);
        goto out;
    }
    if (l->rd[rp].phase && l->rd[rp].state == LEDGER_COMMITTED &&
        memcmp(l->rd[rp].chash, hash, 16) == 0) {
        res_of(l, &l->rd[rp], res);
        res->replayed = 1;
        goto out;
    }
    if (l->rd[rp].phase && l->rd[rp].state == LEDGER_RESERVED &&
        l->rd[rp].expires_at <= (uint64_t)time(NULL) && !lg_ledger_ro(l) &&
        (st = release_locked(l, rp, 1, &seq, err)) != DPB_OK)
        goto out;
    const lrnd *r = &l->rd[rp];
    if (!r->phase || r->state != LEDGER_RESERVED) {
        res_of(l, r, res); /* the caller tells expired from released */
        st = not_reserved(r, "commit", err);
        goto out;
    }
    if (lg_ledger_ro(l)) {
        st = lg_readonly_error(err);
        goto out;
    }
    /* the reported ids, as indices of admitted outcomes (an open-addressing index of them) */
    size_t cap = 16;
    while (cap < 2 * (size_t)r->n)
        cap *= 2;
    idx = malloc((n ? n : 1) * sizeof *idx);
    slot = malloc(cap * sizeof *slot);
    if (idx == NULL || slot == NULL) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        goto out;
    }
    memset(slot, 0xff, cap * sizeof *slot);
    for (uint32_t i = 0; i < r->n; i++)
        if (r->out[i].admitted) {
            size_t h = (size_t)lg_str_hash(r->out[i].id) & (cap - 1);
            while (slot[h] != UINT32_MAX)
                h = (h + 1) & (cap - 1);
            slot[h] = i;
        }
    for (size_t i = 0; i < n; i++) {
        size_t h = (size_t)lg_str_hash(reported[i]) & (cap - 1);
        while (slot[h] != UINT32_MAX && strcmp(r->out[slot[h]].id, reported[i]) != 0)
            h = (h + 1) & (cap - 1);
        char f[40];
        snprintf(f, sizeof f, "reported[%zu]", i);
        if (slot[h] == UINT32_MAX) {
            st = dpb_fail(err, DPB_EINVAL, f,
                          "'%s' was not admitted to round '%s': only its admitted clients can "
                          "report",
                          reported[i], round_id);
            goto out;
        }
        for (size_t k = 0; k < i; k++)
            if (idx[k] == slot[h]) {
                st = dpb_fail(err, DPB_EINVAL, f, "'%s' is listed twice", reported[i]);
                goto out;
            }
        idx[i] = slot[h];
    }
    if (lg_reserve_undo(l, 1 + (size_t)r->admitted) != 0) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        goto out;
    }
    bw w = {0};
    bw_str(&w, round_id);
    bw_put(&w, hash, 16);
    bw_u32(&w, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        bw_u32(&w, idx[i]);
    st = lg_log_record(l, REC_COMMIT, &w, err);
    free(w.b);
    if (st != DPB_OK) {
        lg_withdraw_locked(l);
        goto out;
    }
    seq = l->last_seq;
    if (lg_resolve_round(l, rp, seq, LEDGER_COMMITTED, hash, idx, (uint32_t)n) != 0) {
        st = lg_abandon(l, DPB_ENOMEM, err);
        seq = 0;
        goto out;
    }
    res_of(l, &l->rd[rp], res);
out:
    pthread_rwlock_unlock(&l->lock);
    free(idx);
    free(slot);
    return finish_resolve(l, st == DPB_OK || st == DPB_ECONFLICT ? seq : 0, gen, st, res, err);
}

static dpb_status release_once(ledger *l, const char *round_id, ledger_round_res *res,
                               dpb_error *err);

dpb_status ledger_release(ledger *l, const char *round_id, ledger_round_res *res, dpb_error *err)
{
    dpb_status st;
    RETRY_RACES(st, release_once(l, round_id, res, err), err);
    return st;
}

static dpb_status release_once(ledger *l, const char *round_id, ledger_round_res *res,
                               dpb_error *err)
{
    memset(res, 0, sizeof *res);
    if (!lg_valid_id(round_id))
        return dpb_fail(err, DPB_EINVAL, "round_id", "a round id is " LEDGER_ID_RULE);
    uint64_t seq = 0;
    pthread_rwlock_wrlock(&l->lock);
    dpb_status st = lg_begin_write(l, err);
    uint64_t gen = lg_cur_gen(l);
    long rp = st == DPB_OK ? durable_round(l, round_id) : -1;
    if (st != DPB_OK) {
        /* the database cannot be reached: answered as such */
    } else if (rp < 0) {
        st = dpb_fail(err, DPB_ENOTFOUND, "round_id", "no round '%s'", round_id);
    } else if (!l->rd[rp].phase || l->rd[rp].state == LEDGER_COMMITTED) {
        res_of(l, &l->rd[rp], res);
        st = not_reserved(&l->rd[rp], "release", err);
    } else if (l->rd[rp].state != LEDGER_RESERVED) {
        res_of(l, &l->rd[rp], res); /* released or expired already: idempotent */
        res->replayed = 1;
    } else if (lg_ledger_ro(l)) {
        st = lg_readonly_error(err);
    } else {
        int expired = l->rd[rp].expires_at <= (uint64_t)time(NULL);
        st = release_locked(l, rp, expired, &seq, err);
        if (st == DPB_OK)
            res_of(l, &l->rd[rp], res);
        else
            seq = 0;
    }
    pthread_rwlock_unlock(&l->lock);
    return finish_resolve(l, seq, gen, st, res, err);
}

/* Release round id if it is still a reservation whose time is up: DPB_OK (*done 1 if this
 * call released it), LEDGER_RACE, or a failure. */
static dpb_status expire_once(ledger *l, const char *id, uint64_t now, int *done)
{
    uint64_t seq = 0;
    dpb_error err = {0};
    *done = 0;
    pthread_rwlock_wrlock(&l->lock);
    dpb_status st = lg_begin_write(l, &err);
    uint64_t gen = lg_cur_gen(l);
    long rp = st != DPB_OK || lg_ledger_ro(l) ? -1 : durable_round(l, id);
    if (rp >= 0 && l->rd[rp].state == LEDGER_RESERVED && l->rd[rp].expires_at <= now &&
        (st = release_locked(l, rp, 1, &seq, &err)) != DPB_OK)
        seq = 0;
    pthread_rwlock_unlock(&l->lock);
    if (seq && (st = lg_commit(l, seq, gen, &err)) == DPB_OK)
        *done = 1;
    return st;
}

size_t ledger_expire(ledger *l, uint64_t now)
{
    enum { BATCH = 256 };
    char *ids[BATCH];
    size_t k = 0, done = 0;
    if (lg_read_begin(l, NULL) != DPB_OK)
        return 0; /* a shared store's database cannot be reached: the next sweep */
    pthread_rwlock_rdlock(&l->lock);
    for (size_t i = 0; i < l->nrd && k < BATCH; i++)
        if (l->rd[i].state == LEDGER_RESERVED && l->rd[i].expires_at <= now &&
            (ids[k] = lg_xstrdup(l->rd[i].id)) != NULL)
            k++;
    pthread_rwlock_unlock(&l->lock);
    for (size_t i = 0; i < k; i++) {
        /* another replica expiring it first is a lost race: run again, it is released */
        int one = 0;
        dpb_status st;
        RETRY_RACES(st, expire_once(l, ids[i], now, &one), NULL);
        (void)st;
        done += (size_t)one;
        free(ids[i]);
    }
    if (done)
        lg_maybe_snapshot(l);
    return done;
}

/* ---- eligibility ----------------------------------------------------------------------------- */

/* Two clients whose admissions of any event agree: the same budget, mode, relation,
 * uncertified flag and the same multisets of charged and reserved events. */
static int same_history(const lclient *a, const lclient *b)
{
    if (a->eps != b->eps || a->delta != b->delta || a->mode != b->mode || a->rel != b->rel ||
        a->uncertified != b->uncertified || a->nev != b->nev || a->nrv != b->nrv ||
        (a->spent >= a->eps) != (b->spent >= b->eps))
        return 0;
    for (uint32_t i = 0; i < a->nev; i++) {
        uint32_t k = 0;
        while (k < b->nev && b->ev[k].ev != a->ev[i].ev)
            k++;
        if (k == b->nev || b->ev[k].count != a->ev[i].count)
            return 0;
    }
    for (uint32_t i = 0; i < a->nrv; i++) {
        uint32_t k = 0;
        while (k < b->nrv && b->rv[k].ev != a->rv[i].ev)
            k++;
        if (k == b->nrv || b->rv[k].count != a->rv[i].count)
            return 0;
    }
    return 1;
}

static uint64_t history_hash(const lclient *c)
{
    uint64_t h = fnv64(&c->eps, sizeof c->eps, 14695981039346656037ULL);
    h = fnv64(&c->delta, sizeof c->delta, h);
    unsigned char b[3] = {c->mode, c->rel, c->uncertified};
    h = fnv64(b, 3, h);
    uint64_t x = 0; /* order-free: sum of the entries' own hashes */
    for (uint32_t i = 0; i < c->nev; i++)
        x +=
            fnv64(&c->ev[i], sizeof c->ev[i].ev, fnv64(&c->ev[i].count, 8, 1469598103934665603ULL));
    for (uint32_t i = 0; i < c->nrv; i++)
        x += 31 * fnv64(&c->rv[i].ev, sizeof c->rv[i].ev,
                        fnv64(&c->rv[i].count, 8, 1469598103934665603ULL));
    return fnv64(&x, 8, h);
}

/* One client's eligibility for `ev` (its relation's interned index): the admission of one
 * round, then the number of further rounds it can afford, by doubling then bisection on the
 * same admission test, capped at max_rounds (the spend grows with the count). */
static void eligibility_of(ledger *l, const lclient *c, int known, uint32_t ev, uint64_t max_rounds,
                           ledger_elig_item *it)
{
    double after;
    it->reason = lg_admission(l, c, known, ev, 1, &after, NULL);
    it->eligible = it->reason == LEDGER_OK;
    it->rounds = 0;
    it->capped = 0;
    if (!it->eligible)
        return;
    uint64_t lo = 1, hi = 2; /* lo affordable; hi not known */
    while (hi <= max_rounds && lg_admission(l, c, known, ev, hi, &after, NULL) == LEDGER_OK) {
        lo = hi;
        hi *= 2;
    }
    if (hi > max_rounds) {
        if (lo < max_rounds &&
            lg_admission(l, c, known, ev, max_rounds, &after, NULL) == LEDGER_OK) {
            it->rounds = max_rounds;
            it->capped = 1;
            return;
        }
        if (lo == max_rounds) {
            it->rounds = lo;
            it->capped = 1;
            return;
        }
        hi = max_rounds; /* not affordable */
    }
    while (hi - lo > 1) { /* lo affordable, hi not */
        uint64_t mid = lo + (hi - lo) / 2;
        if (lg_admission(l, c, known, ev, mid, &after, NULL) == LEDGER_OK)
            lo = mid;
        else
            hi = mid;
    }
    it->rounds = lo;
}

/* The event's index for relation rel if interned, else UINT32_MAX. */
static uint32_t find_event(const ledger *l, const unsigned char *bytes, size_t n, int rel)
{
    evkey k = {bytes, n, (dp_relation)rel};
    uint64_t h = fnv64(bytes, n, 14695981039346656037ULL ^ (uint64_t)rel);
    size_t s = lg_index_find(l, &l->ev_index, h, lg_ev_eq, &k);
    return l->ev_index.slot[s];
}

typedef struct {
    uint64_t h;
    long pos; /* the first client with this history */
    size_t item;
} ememo;

/* The answer for every candidate, under a lock already held (read, or write with the event
 * interned but not logged). */
static dpb_status eligibility_locked(ledger *l, const ledger_elig_req *q, const uint32_t evi[2],
                                     ledger_elig_item *items, size_t n, const long *pos)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    ememo *memo = malloc(cap * sizeof *memo);
    if (memo == NULL)
        return DPB_ENOMEM;
    for (size_t i = 0; i < cap; i++)
        memo[i].pos = -2;
    for (size_t i = 0; i < n; i++) {
        ledger_elig_item *it = &items[i];
        long p = pos[i];
        lclient tmp = {0};
        const lclient *c = p >= 0 ? &l->cl[p] : &tmp;
        it->mode = p >= 0 ? c->mode : l->opt.default_budget ? LEDGER_RDP : -1;
        if (p < 0 && !l->opt.default_budget) {
            it->reason = LEDGER_UNKNOWN_CLIENT;
            it->spent = it->remaining = it->delta = NAN;
            continue;
        }
        if (p < 0) { /* created with the default budget by its first round */
            tmp.last_ev = LEV_NONE;
            tmp.eps = l->opt.default_epsilon;
            tmp.delta = l->opt.default_delta;
        }
        it->delta = c->delta;
        it->spent = c->spent;
        it->remaining = c->spent < c->eps ? c->eps - c->spent : 0.0;
        if (c->nrv > 0) { /* held reservations count as spent */
            spend_result held;
            lg_spend_held(l, c, 0, 0, &held);
            it->spent = held.spent;
            it->remaining = it->spent < c->eps ? c->eps - it->spent : 0.0;
        }
        uint32_t ev = evi[c->rel];
        if (p < 0) {
            eligibility_of(l, c, 0, ev, q->max_rounds, it);
            continue;
        }
        uint64_t h = history_hash(c) ^ ev;
        size_t s = (size_t)h & (cap - 1);
        while (memo[s].pos != -2 && !(memo[s].h == h && same_history(&l->cl[memo[s].pos], c) &&
                                      evi[l->cl[memo[s].pos].rel] == ev))
            s = (s + 1) & (cap - 1);
        if (memo[s].pos != -2) {
            const ledger_elig_item *m = &items[memo[s].item];
            it->eligible = m->eligible;
            it->reason = m->reason;
            it->rounds = m->rounds;
            it->capped = m->capped;
            continue;
        }
        eligibility_of(l, c, 1, ev, q->max_rounds, it);
        memo[s] = (ememo){h, p, i};
    }
    free(memo);
    return DPB_OK;
}

dpb_status ledger_eligibility(ledger *l, const ledger_elig_req *q, ledger_elig_item **out,
                              size_t *nout, dpb_error *err)
{
    *out = NULL;
    *nout = 0;
    if (q->max_rounds < 1 || q->max_rounds > LEDGER_ELIG_MAX_ROUNDS)
        return dpb_fail(err, DPB_EINVAL, "max_rounds", "max_rounds is 1 to %d",
                        LEDGER_ELIG_MAX_ROUNDS);
    if (q->ids ? q->n == 0 || q->n > LEDGER_MAX_PARTICIPANTS : q->label == NULL)
        return dpb_fail(err, DPB_EINVAL, "clients", "between 1 and %d client ids, or a label",
                        LEDGER_MAX_PARTICIPANTS);
    if (lg_read_begin(l, err) != DPB_OK)
        return DPB_EUNAVAILABLE;
    unsigned char *eb = NULL;
    size_t elen = 0, ecap = 0;
    dpb_status st = dp_event_encode(q->event, &eb, &elen, &ecap);
    if (st != DPB_OK) {
        free(eb);
        return dpb_fail(err, st, "event", "the event cannot be accounted");
    }
    ledger_elig_item *items = NULL;
    long *pos = NULL;
    size_t n = 0;
    int write_locked = 0;
    for (;;) {
        if (write_locked) {
            pthread_rwlock_wrlock(&l->lock);
            (void)lg_begin_write(l, NULL);      /* caught up by read_begin already, or as it can */
            if (lg_settle(l, l->last_seq) != 0) /* answer from durable state only */
                lg_withdraw_locked(l);
        } else {
            lg_rdlock_durable(l);
        }
        /* the candidates */
        n = q->ids ? q->n : 0;
        if (!q->ids)
            for (size_t i = 0; i < l->ncl; i++)
                n += lg_has_label(&l->cl[i], q->label);
        if (n > LEDGER_MAX_PARTICIPANTS) {
            pthread_rwlock_unlock(&l->lock);
            free(eb);
            return dpb_fail(err, DPB_ELIMIT, "label",
                            "the label selects %zu clients; at most %d are answered at once "
                            "(list their ids in several requests)",
                            n, LEDGER_MAX_PARTICIPANTS);
        }
        free(items);
        free(pos);
        items = calloc(n ? n : 1, sizeof *items);
        pos = malloc((n ? n : 1) * sizeof *pos);
        if (items == NULL || pos == NULL) {
            st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
            break;
        }
        size_t k = 0;
        int need[2] = {0, 0};
        for (size_t i = 0; q->ids ? i < n : i < l->ncl; i++) {
            if (!q->ids && !lg_has_label(&l->cl[i], q->label))
                continue;
            pos[k] = q->ids ? lg_find_client(l, q->ids[i]) : (long)i;
            snprintf(items[k].id, sizeof items[k].id, "%s", q->ids ? q->ids[i] : l->cl[i].id);
            need[pos[k] >= 0 ? l->cl[pos[k]].rel : DP_REL_ADD_OR_REMOVE] = 1;
            k++;
        }
        /* the event, interned for each relation the candidates use */
        uint32_t evi[2] = {LEV_NONE, LEV_NONE};
        int missing = 0;
        for (int r = 0; r < 2; r++)
            if (need[r] && (evi[r] = find_event(l, eb, elen, r)) == LEV_NONE)
                missing = 1;
        if (missing && write_locked) {
            /* intern (scratch, not logged), then answer under the write lock */
            for (int r = 0; r < 2 && st == DPB_OK; r++) {
                int fresh;
                if (need[r] && evi[r] == LEV_NONE)
                    st = lg_intern(l, eb, elen, (dp_relation)r, &evi[r], &fresh);
            }
            if (st != DPB_OK)
                dpb_fail(err, st, "event", "the event could not be prepared");
            missing = 0;
        }
        if (!missing) {
            if (st == DPB_OK && eligibility_locked(l, q, evi, items, n, pos) != DPB_OK)
                st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
            if (write_locked)
                lg_drop_unlogged_events(l);
            pthread_rwlock_unlock(&l->lock);
            break;
        }
        /* an event no round or name has brought in: answered under the write lock with the
         * event taken up as scratch (as a dry run does), so that a query never makes the
         * ledger keep, or log, what it was asked about */
        pthread_rwlock_unlock(&l->lock);
        write_locked = 1;
    }
    free(eb);
    free(pos);
    if (st != DPB_OK) {
        free(items);
        return st;
    }
    *out = items;
    *nout = n;
    return DPB_OK;
}

dpb_status ledger_get_round(ledger *l, const char *round_id, ledger_round_res *res)
{
    if (lg_read_begin(l, NULL) != DPB_OK)
        return DPB_EUNAVAILABLE;
    for (;;) {
        pthread_rwlock_rdlock(&l->lock);
        long pos = lg_find_round(l, round_id);
        if (pos >= 0 &&
            lg_settle(l, l->rd[pos].seq > l->rd[pos].state_seq ? l->rd[pos].seq
                                                               : l->rd[pos].state_seq) != 0) {
            pthread_rwlock_unlock(&l->lock);
            lg_withdraw(l);
            continue;
        }
        if (pos >= 0)
            res_of(l, &l->rd[pos], res);
        pthread_rwlock_unlock(&l->lock);
        return pos >= 0 ? DPB_OK : DPB_ENOTFOUND;
    }
}
