/*
 * ledger_snapfmt.c - layer 3: the snapshot's payload (format LEDGER_FORMAT): the whole state
 * written in one piece, and read back into a ledger being opened. Calls ledger_record.c's
 * shared decoders and ledger_mem.h (layer 4), nothing above.
 */
#include "ledger_record.h"
#include "ledger_mem.h"

/* Format 5: the events' stored profiles (spend.h), after the named events: a u64 count,
 * then (event index u32, u32 length + profile bytes) for each event that has one. */
static void write_profiles(ledger *l, bw *w)
{
    unsigned char p[SPEND_PROFILE_MAX];
    size_t at = w->n, np = 0;
    bw_u64(w, 0); /* the count, set below */
    for (size_t i = 0; i < l->nevs && !w->oom; i++) {
        size_t pn = spend_event_profile(l->sp, l->evs[i].se, p);
        if (pn == 0)
            continue;
        bw_u32(w, (uint32_t)i);
        bw_u32(w, (uint32_t)pn);
        bw_put(w, p, pn);
        np++;
    }
    for (int k = 0; k < 8 && !w->oom; k++)
        w->b[at + (size_t)k] = (unsigned char)((uint64_t)np >> (8 * k));
}

/* Format 5's profiles, given to their events (another version's dropped). 0, or -1. */
static int load_profiles(ledger *l, br *r)
{
    uint64_t np = br_u64(r);
    for (uint64_t i = 0; i < np && !r->bad; i++) {
        uint32_t idx = br_u32(r);
        uint32_t len = br_u32(r);
        const unsigned char *b = br_take(r, len);
        if (r->bad || idx >= l->nevs || spend_event_set_profile(l->sp, l->evs[idx].se, b, len) < 0)
            return -1;
    }
    return r->bad ? -1 : 0;
}

/* The whole state as one payload. Caller holds at least the read lock. */
dpb_status lg_serialize(ledger *l, bw *w)
{
    bw_u32(w, LEDGER_FORMAT);
    bw_u64(w, l->version);
    bw_u64(w, l->nevs);
    for (size_t i = 0; i < l->nevs; i++) {
        bw_u8(w, (unsigned)l->evs[i].rel);
        bw_u32(w, (uint32_t)l->evs[i].nbytes);
        bw_put(w, l->evs[i].bytes, l->evs[i].nbytes);
    }
    bw_u64(w, l->ncl);
    for (size_t i = 0; i < l->ncl; i++) {
        const lclient *c = &l->cl[i];
        lg_client_record(w, c->id, c->eps, c->delta, c->mode, c->rel, c->labels);
        bw_u8(w, c->uncertified);
        bw_u64(w, c->rounds);
        bw_u64(w, c->version);
        bw_f64(w, c->spent);
        bw_f64(w, c->dtv);
        bw_u32(w, c->nev);
        for (uint32_t k = 0; k < c->nev; k++) {
            bw_u32(w, c->ev[k].ev);
            bw_u64(w, c->ev[k].count);
        }
        bw_u32(w, c->last_ev); /* format 2 */
        bw_u8(w, c->stuck);
        bw_u32(w, c->nrv); /* format 3 */
        for (uint32_t k = 0; k < c->nrv; k++) {
            bw_u32(w, c->rv[k].ev);
            bw_u64(w, c->rv[k].count);
        }
        bw_u32(w, c->hseen); /* format 3: the history ring */
        for (uint32_t k = 0; c->hseen && k < LEDGER_HISTORY; k++)
            bw_u32(w, c->hist ? c->hist[k] : 0);
    }
    bw_u64(w, l->nrd);
    for (size_t i = 0; i < l->nrd; i++) {
        const lrnd *r = &l->rd[i];
        bw_str(w, r->id);
        bw_put(w, r->hash, 16);
        bw_u8(w, r->policy);
        bw_u8(w, r->already_ran);
        bw_u64(w, r->seq);
        bw_u32(w, r->n);
        bw_u32(w, r->admitted);
        bw_u8(w, r->phase); /* format 3 */
        bw_u8(w, r->state);
        bw_u64(w, r->state_seq);
        bw_u64(w, r->expires_at);
        bw_put(w, r->chash, 16);
        bw_u32(w, r->ev[0]);
        bw_u32(w, r->ev[1]);
        bw_u32(w, r->reported);
        bw_str(w, r->owner); /* format 4 ("": none) */
        bw_u8(w, r->out != NULL);
        if (r->out)
            for (uint32_t k = 0; k < r->n; k++) {
                bw_str(w, r->out[k].id);
                bw_u8(w, r->out[k].admitted);
                bw_u8(w, r->out[k].reason);
                bw_f64(w, r->out[k].before);
                bw_f64(w, r->out[k].after);
                bw_u8(w, r->out[k].reported); /* format 3 */
            }
    }
    bw_u64(w, l->nnm); /* format 3: the named events */
    for (size_t i = 0; i < l->nnm; i++) {
        bw_str(w, l->nm[i].name);
        bw_u64(w, l->nm[i].seq);
        bw_u32(w, (uint32_t)l->nm[i].nbytes);
        bw_put(w, l->nm[i].bytes, l->nm[i].nbytes);
    }
    /* format 5: time. The snapshot's own, the last record's, every round's two (its record's,
     * its commit's or release's; 0: unknown) and the series (ledger_series.c) */
    bw_u64(w, lg_next_time(l)); /* never before the last record's */
    bw_u64(w, l->last_time);
    for (size_t i = 0; i < l->nrd; i++) {
        bw_u64(w, l->rd[i].time_ms);
        bw_u64(w, l->rd[i].state_time_ms);
    }
    lg_series_write(l, w);
    /* format 6: the events' profiles */
    write_profiles(l, w);
    /* format 7: the stuck clients, each its position, its round's (1 + position) and the
     * refused spend_after kept (float bits) */
    uint64_t nstuck = 0;
    for (size_t i = 0; i < l->ncl; i++)
        nstuck += l->cl[i].stuck_rd != 0;
    bw_u64(w, nstuck);
    for (size_t i = 0; i < l->ncl; i++)
        if (l->cl[i].stuck_rd) {
            uint32_t bits;
            memcpy(&bits, &l->cl[i].stuck_after, 4);
            bw_u32(w, (uint32_t)i);
            bw_u32(w, l->cl[i].stuck_rd);
            bw_u32(w, bits);
        }
    return w->oom ? DPB_ENOMEM : DPB_OK;
}

/* The snapshot's events, interned in their order (each index as it was). 0, or -1. */
static int load_events(ledger *l, br *r, uint64_t ne)
{
    for (uint64_t i = 0; i < ne && !r->bad; i++) {
        unsigned rel = br_u8(r);
        uint32_t len = br_u32(r);
        const unsigned char *b = br_take(r, len);
        uint32_t idx;
        int fresh;
        if (r->bad || rel > 1 || lg_intern(l, b, len, (dp_relation)rel, &idx, &fresh) != DPB_OK ||
            idx != i)
            return -1;
    }
    return 0;
}

/* The counts of a client's charged or held events: n entries, each an event below ne;
 * held ones (nonzero) have a count. r->bad on damage. NULL when n is 0 or out of memory. */
static lcount *load_counts(br *r, uint32_t n, uint64_t ne, int held)
{
    lcount *a = n ? malloc(n * sizeof *a) : NULL;
    if (n && a == NULL && held)
        r->bad = 1;
    for (uint32_t k = 0; a && k < n; k++) {
        a[k].ev = br_u32(r);
        a[k].count = br_u64(r);
        if (a[k].ev >= ne || (held && a[k].count == 0))
            r->bad = 1;
    }
    return a;
}

/* The fields of a client after its head (budget, accounting, labels), format-dependent. */
static void load_client_body(lclient *c, br *r, uint32_t format, uint64_t ne)
{
    c->uncertified = (uint8_t)br_u8(r);
    c->rounds = br_u64(r);
    c->version = br_u64(r);
    c->spent = br_f64(r);
    c->dtv = br_f64(r);
    c->nev = br_u32(r);
    if (r->bad || c->nev > ne) {
        r->bad = 1;
        return;
    }
    c->ev = load_counts(r, c->nev, ne, 0);
    /* format 1 did not keep the last charged event: the status then follows the spend
     * alone until the client's next charge */
    c->last_ev = format >= 2 ? br_u32(r) : LEV_NONE;
    c->stuck = format >= 2 ? (uint8_t)br_u8(r) : 0;
    if ((c->last_ev != LEV_NONE && c->last_ev >= ne) || c->stuck > 1)
        r->bad = 1;
    c->nrv = format >= 3 ? br_u32(r) : 0;
    if (c->nrv > ne)
        r->bad = 1;
    c->rv = !r->bad ? load_counts(r, c->nrv, ne, 1) : NULL;
    c->hseen = format >= 3 ? br_u32(r) : 0;
    if (c->hseen && !r->bad && lg_hist_ready(c) != 0)
        r->bad = 1;
    for (uint32_t k = 0; c->hseen && c->hist && k < LEDGER_HISTORY; k++)
        c->hist[k] = br_u32(r); /* checked against the rounds below */
    /* a spend is >= 0 (+inf when uncertified); anything else is damage */
    if (!(c->spent >= 0.0) || !(c->dtv >= 0.0 && c->dtv <= 1.0))
        r->bad = 1;
}

/* One client appended to l->cl. 0, or -1 (nothing of it kept). */
static int load_client(ledger *l, br *r, uint32_t format, uint64_t ne)
{
    char *id = br_str(r, LEDGER_ID_MAX);
    double eps = br_f64(r), delta = br_f64(r);
    unsigned mode = br_u8(r), rel = br_u8(r);
    char *labels = br_str(r, LEDGER_LABELS_MAX);
    if (r->bad || mode >= LEDGER_NMODES || rel > 1 ||
        lg_grow((void **)&l->cl, &l->cap_cl, l->ncl + 1, sizeof *l->cl) != 0) {
        free(id);
        free(labels);
        return -1;
    }
    lclient *c = &l->cl[l->ncl];
    memset(c, 0, sizeof *c);
    c->id = id;
    c->labels = labels && labels[0] ? labels : NULL;
    if (c->labels == NULL)
        free(labels);
    c->eps = eps;
    c->delta = delta;
    c->mode = (uint8_t)mode;
    c->rel = (uint8_t)rel;
    load_client_body(c, r, format, ne);
    if ((c->nev && c->ev == NULL) || r->bad ||
        lg_index_insert(l, &l->cl_index, l->ncl, lg_cl_hash, (uint32_t)l->ncl) != 0) {
        /* not yet counted in l->ncl: release what this entry holds */
        lg_client_release(c);
        c->id = c->labels = NULL;
        c->ev = c->rv = NULL;
        c->hist = NULL;
        return -1;
    }
    l->ncl++;
    lg_counters(l, c, +1);
    return 0;
}

/* A round's two-phase fields (format 3), as stored. */
typedef struct {
    unsigned phase, state;
    uint64_t state_seq, expires_at;
    unsigned char chash[16];
    uint32_t ev[2], reported;
} round_state;

static void load_round_state(br *r, round_state *x)
{
    x->phase = br_u8(r);
    x->state = br_u8(r);
    x->state_seq = br_u64(r);
    x->expires_at = br_u64(r);
    const unsigned char *ch = br_take(r, 16);
    if (ch)
        memcpy(x->chash, ch, 16);
    x->ev[0] = br_u32(r);
    x->ev[1] = br_u32(r);
    x->reported = br_u32(r);
}

/* One round stored (lg_store_round, not applied: the clients hold their charges). 0, or -1. */
static int load_round(ledger *l, br *r, uint32_t format, uint64_t ne)
{
    char *id = br_str(r, LEDGER_ID_MAX);
    const unsigned char *h = br_take(r, 16);
    unsigned policy = br_u8(r), ran = br_u8(r);
    uint64_t seq = br_u64(r);
    uint32_t cnt = br_u32(r), adm = br_u32(r);
    round_state x = {0, LEDGER_CHARGED, 0, 0, {0}, {LEV_NONE, LEV_NONE}, 0};
    if (format >= 3)
        load_round_state(r, &x);
    char *owner = format >= 4 ? br_str(r, LEDGER_OWNER_MAX) : NULL;
    unsigned has = br_u8(r);
    /* a reserved round keeps its answers (its commit needs them) */
    if (r->bad || cnt > LEDGER_MAX_PARTICIPANTS || x.phase > 1 || x.state > LEDGER_EXPIRED ||
        (x.phase == 0) != (x.state == LEDGER_CHARGED) || (x.phase && x.expires_at == 0) ||
        (x.ev[0] != LEV_NONE && x.ev[0] >= ne) || (x.ev[1] != LEV_NONE && x.ev[1] >= ne) ||
        (x.state == LEDGER_RESERVED && !has)) {
        free(id);
        free(owner);
        return -1;
    }
    lout *out = NULL;
    if (has) {
        out = calloc(cnt ? cnt : 1, sizeof *out);
        if (out == NULL) {
            free(id);
            return -1;
        }
        for (uint32_t k = 0; k < cnt && !r->bad; k++)
            lg_read_outcome(l, r, &out[k], format >= 3);
    }
    unsigned char hash[16] = {0};
    if (h)
        memcpy(hash, h, 16);
    if (r->bad || lg_store_round(l, id, hash, (int)policy, (int)ran, seq, 0, out, NULL,
                                 has ? cnt : 0, 0, x.phase ? x.expires_at : 0, owner) != DPB_OK) {
        /* the outcomes were not taken over by a stored round: release them */
        lg_outcomes_free(out, cnt);
        free(id);
        free(owner);
        return -1;
    }
    lrnd *rr = &l->rd[l->nrd - 1];
    rr->n = cnt;
    rr->admitted = adm;
    if (format >= 3) {
        rr->phase = (uint8_t)x.phase;
        rr->state = (uint8_t)x.state;
        rr->state_seq = x.state_seq;
        memcpy(rr->chash, x.chash, 16);
        rr->ev[0] = x.ev[0];
        rr->ev[1] = x.ev[1];
        rr->reported = x.reported;
    }
    free(id);
    free(owner);
    return 0;
}

/* Format 5's times (after the named events): the snapshot's and the last record's, the
 * rounds', the series. */
static int load_times(ledger *l, br *r)
{
    uint64_t taken = br_u64(r);
    l->last_time = br_u64(r);
    if (taken == 0 || l->last_time > taken)
        r->bad = 1; /* its records were all made before it was */
    for (size_t i = 0; i < l->nrd && !r->bad; i++) {
        l->rd[i].time_ms = br_u64(r);
        l->rd[i].state_time_ms = br_u64(r);
    }
    return r->bad || lg_series_read(l, r) != 0 ? -1 : 0;
}

static int load_snapshot(ledger *l, br *r);

int lg_load_snapshot(ledger *l, br *r)
{
    l->series_mute = 1; /* its rounds are in its series already */
    int rc = load_snapshot(l, r);
    l->series_mute = 0;
    return rc;
}

static int load_snapshot(ledger *l, br *r)
{
    uint32_t format = br_u32(r);
    if (format < 1 || format > LEDGER_FORMAT)
        return -1;
    l->version = br_u64(r);
    uint64_t ne = br_u64(r);
    if (load_events(l, r, ne) != 0)
        return -1;
    uint64_t nc = br_u64(r);
    for (uint64_t i = 0; i < nc && !r->bad; i++)
        if (load_client(l, r, format, ne) != 0)
            return -1;
    uint64_t nr = br_u64(r);
    for (uint64_t i = 0; i < nr && !r->bad; i++)
        if (load_round(l, r, format, ne) != 0)
            return -1;
    for (size_t i = 0; i < l->ncl && !r->bad; i++) /* history entries name stored rounds */
        for (uint32_t k = 0; k < l->cl[i].hseen && k < LEDGER_HISTORY; k++)
            if (l->cl[i].hist[k] >= l->nrd)
                r->bad = 1;
    uint64_t nn = format >= 3 ? br_u64(r) : 0;
    for (uint64_t i = 0; i < nn && !r->bad; i++) {
        char *name = br_str(r, LEDGER_ID_MAX);
        uint64_t seq = br_u64(r);
        uint32_t len = br_u32(r);
        const unsigned char *b = br_take(r, len);
        if (r->bad || lg_restore_name(l, name, b, len, seq) != 0)
            r->bad = 1;
        free(name);
    }
    if (format >= 5 && !r->bad && load_times(l, r) != 0)
        r->bad = 1;
    if (format >= 6 && !r->bad && load_profiles(l, r) != 0)
        return -1;
    uint64_t ns = format >= 7 ? br_u64(r) : 0; /* the stuck clients */
    for (uint64_t i = 0; i < ns && !r->bad; i++) {
        uint32_t pos = br_u32(r), rd = br_u32(r), bits = br_u32(r);
        if (r->bad || pos >= l->ncl || rd == 0 || rd > l->nrd || l->cl[pos].stuck_rd != 0) {
            r->bad = 1;
            break;
        }
        l->cl[pos].stuck_rd = rd;
        memcpy(&l->cl[pos].stuck_after, &bits, 4);
    }
    if (ns > 0)
        lg_recount(l);
    return r->bad || r->at != r->n ? -1 : 0;
}
