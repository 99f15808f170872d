/*
 * ledger_record.c - layer 3: the log's records (ledger_record.h), encoded and replayed. The
 * encoders only write bytes; the appliers decode one record each and apply it through
 * ledger_mem.h (layer 4). Calls ledger_mem.h and dp events' codec, nothing above.
 */
#include "ledger_record.h"
#include "ledger_mem.h"

/* ---- encoding -------------------------------------------------------------------------------- */

void lg_client_record(bw *w, const char *id, double eps, double delta, int mode, int rel,
                      const char *labels)
{
    bw_str(w, id);
    bw_f64(w, eps);
    bw_f64(w, delta);
    bw_u8(w, (unsigned)mode);
    bw_u8(w, (unsigned)rel);
    bw_str(w, labels);
}

void lg_event_record(bw *w, const ledger *l, uint32_t idx)
{
    /* LEDGER_FORMAT 6: the event's profile when it has one to give (spend.h), after the
     * event, then its length; bit 7 of the relation says it is there */
    unsigned char p[SPEND_PROFILE_MAX];
    size_t pn = spend_event_profile(l->sp, l->evs[idx].se, p);
    bw_u32(w, idx);
    bw_u8(w, (unsigned)l->evs[idx].rel | (pn > 0 ? EVENT_PROFILED : 0u));
    bw_put(w, l->evs[idx].bytes, l->evs[idx].nbytes);
    if (pn > 0) {
        bw_put(w, p, pn);
        bw_u32(w, (uint32_t)pn);
    }
}

void lg_round_record(bw *w, const char *id, const unsigned char hash[16], int policy,
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

void lg_commit_record(bw *w, const char *id, const unsigned char hash[16], const uint32_t *idx,
                      size_t m)
{
    bw_str(w, id);
    bw_put(w, hash, 16);
    bw_u32(w, (uint32_t)m);
    for (size_t i = 0; i < m; i++)
        bw_u32(w, idx[i]);
}

void lg_release_record(bw *w, const char *id, int expired)
{
    bw_str(w, id);
    bw_u8(w, (unsigned)expired);
}

void lg_name_record(bw *w, const char *name, const unsigned char *eb, size_t n)
{
    bw_str(w, name);
    bw_put(w, eb, n);
}

/* ---- replay ---------------------------------------------------------------------------------- */

void lg_read_outcome(ledger *l, br *r, lout *o, int with_reported)
{
    char *pid = br_str(r, LEDGER_ID_MAX);
    o->admitted = (uint8_t)br_u8(r);
    o->reason = (uint8_t)br_u8(r);
    o->before = br_f64(r);
    o->after = br_f64(r);
    o->acct = -1;
    o->reported = with_reported ? (uint8_t)br_u8(r) : 0;
    long pos = pid ? lg_find_client(l, pid) : -1;
    if (pos >= 0) {
        o->id = l->cl[pos].id;
        free(pid);
    } else {
        o->id = pid;
        o->owned = 1;
    }
}

int lg_restore_name(ledger *l, const char *name, const unsigned char *b, size_t n, uint64_t seq)
{
    dp_event *ev = NULL;
    int bad = name == NULL || lg_find_name(l, name) >= 0 ||
              dp_event_decode(b, n, &ev, NULL) != DPB_OK || lg_apply_name(l, name, b, n, seq) != 0;
    dp_event_free(ev);
    return bad ? -1 : 0;
}

/* An EVENT record's relation byte rb, then from r->at its encoded event: its length into *n
 * and the stored profile after it (LEDGER_FORMAT 6, rb & EVENT_PROFILED: the profile's bytes,
 * then their u32 length; before, none) into *p, *pn (0: none). 0, or -1 when they do not
 * fit the record. */
static int event_and_profile(const br *r, unsigned rb, size_t *n, const unsigned char **p,
                             size_t *pn)
{
    size_t rest = r->n - r->at;
    *p = NULL;
    *pn = 0;
    *n = rest;
    if (!(rb & EVENT_PROFILED))
        return 0;
    br t = {r->p, r->n, r->n - 4, 0};
    uint32_t len = rest >= 4 ? br_u32(&t) : 0;
    if (rest < 4 || len == 0 || len > rest - 4)
        return -1;
    *n = rest - 4 - len;
    *p = r->p + r->at + *n;
    *pn = len;
    return 0;
}

static int apply_event(ledger *l, br *r)
{
    uint32_t idx = br_u32(r);
    unsigned rb = br_u8(r), rel = rb & ~EVENT_PROFILED;
    size_t n, pn;
    const unsigned char *p;
    if (r->bad || rel > 1 || idx != l->nevs || event_and_profile(r, rb, &n, &p, &pn) != 0)
        return -1;
    uint32_t got;
    int fresh;
    if (lg_intern(l, r->p + r->at, n, (dp_relation)rel, &got, &fresh) != DPB_OK || !fresh ||
        got != idx)
        return -1;
    /* a profile of another version is dropped (the event classified at its first use) */
    return pn > 0 && spend_event_set_profile(l->sp, l->evs[idx].se, p, pn) < 0 ? -1 : 0;
}

static int apply_client(ledger *l, br *r)
{
    char *id = br_str(r, LEDGER_ID_MAX);
    double eps = br_f64(r), delta = br_f64(r);
    unsigned mode = br_u8(r), rel = br_u8(r);
    char *labels = br_str(r, LEDGER_LABELS_MAX);
    int bad = r->bad || mode >= LEDGER_NMODES || rel > 1 ||
              lg_apply_client(l, id, eps, delta, (int)mode, (int)rel, labels, NULL) != DPB_OK;
    free(id);
    free(labels);
    return bad ? -1 : 0;
}

/* The charges (or holds, expires != 0) of a replayed round's admitted clients out[0..cnt),
 * each with its own relation's interned event (same bytes as ev); evs2 receives a
 * reservation's events per relation. 0, or -1. */
static int replay_charges(ledger *l, uint32_t ev, const lout *out, uint32_t cnt, uint64_t expires,
                          uint32_t evs2[2])
{
    int bad = 0;
    for (uint32_t i = 0; i < cnt; i++) {
        long pos = lg_find_client(l, out[i].id);
        if (pos >= 0 && !out[i].admitted) /* stuck state (ledger_apply.c) */
            lg_offer_answer(l, 0, pos, (long)l->nrd, out[i].reason, out[i].after);
        if (pos < 0 || !out[i].admitted)
            continue;
        lclient *c = &l->cl[pos];
        uint32_t evc = ev;
        if (l->evs[ev].rel != c->rel) {
            int fresh;
            if (lg_intern(l, l->evs[ev].bytes, l->evs[ev].nbytes, (dp_relation)c->rel, &evc,
                          &fresh) != DPB_OK)
                bad = 1;
        }
        if (expires) { /* a reservation: held, not charged */
            evs2[c->rel] = evc;
            bad |= lg_reserve_change(l, 0, pos, evc, 1, 0, (long)l->nrd, -1) != 0;
            continue;
        }
        bad |= lg_replay_charge(l, pos, evc, isinf(out[i].after)) != 0;
    }
    return bad ? -1 : 0;
}

static int apply_round(ledger *l, uint8_t type, br *r)
{
    char *id = br_str(r, LEDGER_ID_MAX);
    const unsigned char *h = br_take(r, 16);
    unsigned policy = br_u8(r), ran = br_u8(r);
    uint32_t ev = br_u32(r), cnt = br_u32(r);
    uint64_t expires = 0;
    /* a round id is stored once: a second record of it means the snapshot and the log
     * overlap (a wrong snapshot seq) */
    if (r->bad || ev >= l->nevs || cnt > LEDGER_MAX_PARTICIPANTS ||
        (id != NULL && lg_find_round(l, id) >= 0)) {
        free(id);
        return -1;
    }
    lout *out = calloc(cnt ? cnt : 1, sizeof *out);
    if (out == NULL) {
        free(id);
        return -1;
    }
    for (uint32_t i = 0; i < cnt && !r->bad; i++)
        lg_read_outcome(l, r, &out[i], 0);
    char *owner = NULL;
    if (type == REC_RESERVE) {
        expires = br_u64(r);
        if (expires == 0)
            r->bad = 1;
        /* the owner follows since LEDGER_FORMAT 4; a record before it ends here (no owner) */
        if (!r->bad && r->at < r->n)
            owner = br_str(r, LEDGER_OWNER_MAX);
    }
    int bad = r->bad || (type == REC_RESERVE && r->at != r->n);
    unsigned char hash[16] = {0};
    uint32_t evs2[2] = {ev, ev};
    if (expires)
        evs2[0] = evs2[1] = LEV_NONE;
    if (!bad) {
        memcpy(hash, h, 16);
        /* charges go to each client's own interned event (same bytes, its relation) */
        bad = replay_charges(l, ev, out, cnt, expires, evs2) != 0;
    }
    if (bad || lg_store_round(l, id, hash, (int)policy, (int)ran, l->last_seq, evs2, out, NULL, cnt,
                              0, expires, owner) != DPB_OK) {
        lg_outcomes_free(out, cnt);
        free(id);
        free(owner);
        return -1;
    }
    free(id);
    free(owner);
    return 0;
}

static int apply_name(ledger *l, br *r)
{
    char *name = br_str(r, LEDGER_ID_MAX);
    int bad = r->bad || lg_restore_name(l, name, r->p + r->at, r->n - r->at, l->last_seq) != 0;
    free(name);
    return bad ? -1 : 0;
}

static int apply_resolve(ledger *l, uint8_t type, br *r)
{
    char *id = br_str(r, LEDGER_ID_MAX);
    long rp = id ? lg_find_round(l, id) : -1;
    free(id);
    if (rp < 0 || l->rd[rp].state != LEDGER_RESERVED || l->rd[rp].out == NULL)
        return -1;
    if (type == REC_RELEASE) {
        unsigned why = br_u8(r);
        if (r->bad || r->at != r->n || why > 1)
            return -1;
        return lg_resolve_round(l, rp, 0, why ? LEDGER_EXPIRED : LEDGER_RELEASED, NULL, NULL, 0,
                                NULL);
    }
    const unsigned char *h = br_take(r, 16);
    uint32_t m = br_u32(r);
    if (r->bad || m > l->rd[rp].n || (size_t)m * 4 != r->n - r->at)
        return -1;
    uint32_t *idx = malloc((m ? m : 1) * sizeof *idx);
    if (idx == NULL)
        return -1;
    for (uint32_t i = 0; i < m; i++)
        idx[i] = br_u32(r);
    int rc = lg_resolve_round(l, rp, 0, LEDGER_COMMITTED, h, idx, m, NULL);
    free(idx);
    return rc;
}

static int apply_record(ledger *l, uint8_t type, const unsigned char *p, size_t n)
{
    br r = {p, n, 0, 0};
    switch (type) {
    case REC_EVENT:
        return apply_event(l, &r);
    case REC_CLIENT:
        return apply_client(l, &r);
    case REC_ROUND:
    case REC_RESERVE:
        return apply_round(l, type, &r);
    case REC_NAME:
        return apply_name(l, &r);
    case REC_COMMIT:
    case REC_RELEASE:
        return apply_resolve(l, type, &r);
    }
    return -1;
}

/* The record seq against the log's tree: a leaf kept for it must be its leaf (else
 * l->tree_bad names it), a new one is pushed. 0, or -1. */
static int tree_record(ledger *l, uint64_t seq, uint8_t type, const void *payload, size_t len)
{
    uint64_t have = tlog_leaves(l->tree);
    if (seq == have + 1)
        return tlog_push_record(l->tree, seq, type, payload, len) == DPB_OK ? 0 : -1;
    tlog_hash kept, h;
    if (seq > have || tlog_leaf(l->tree, tlog_leaf_index(seq), kept) != DPB_OK) {
        l->tree_bad = seq;
        l->tree_bad_type = type;
        return -1;
    }
    tlog_leaf_hash(type, seq, payload, len, h);
    if (memcmp(h, kept, sizeof h) != 0) {
        l->tree_bad = seq;
        l->tree_bad_type = type;
        return -1;
    }
    return 0;
}

dpb_status lg_tree_refusal(ledger *l, dpb_error *err)
{
    uint64_t seq = l->tree_bad;
    if (seq > tlog_leaves(l->tree))
        return dpb_fail(err, DPB_ECORRUPT, "data_dir",
                        "%s: the log's record seq %llu (%s) does not follow the log's tree, which "
                        "ends at seq %llu: records before it are missing; refusing to start",
                        l->dir, (unsigned long long)seq, tlog_kind_name(l->tree_bad_type),
                        (unsigned long long)tlog_leaves(l->tree));
    return dpb_fail(err, DPB_ECORRUPT, "data_dir",
                    "%s: the log's record seq %llu (%s, leaf %llu) is not the record the ledger "
                    "logged: its hash differs from the leaf the log's tree kept for it (changed "
                    "after it was written); refusing to start",
                    l->dir, (unsigned long long)seq, tlog_kind_name(l->tree_bad_type),
                    (unsigned long long)tlog_leaf_index(seq));
}

/* A timed record's time taken off its payload (*t; 0 and nothing taken for an untimed one).
 * 0, or -1 when too short. */
static int untime(uint8_t *type, const unsigned char **p, size_t *n, uint64_t *t)
{
    *t = 0;
    if (!(*type & REC_TIMED))
        return 0;
    br r = {*p, *n, 0, 0};
    *t = br_u64(&r);
    if (r.bad || *t == 0)
        return -1;
    *type = (uint8_t)(*type & ~REC_TIMED);
    *p += 8;
    *n -= 8;
    return 0;
}

/* A stored record as replay and the snapshot's cover check read it: checked against the log's
 * tree (as stored), then its time taken off (*type, *p, *len its kind and fields; *t its time,
 * 0 unknown). 0, or -1. */
static int record_open(ledger *l, uint64_t seq, uint8_t *type, const void *payload,
                       const unsigned char **p, size_t *len, uint64_t *t)
{
    if (tree_record(l, seq, *type, payload, *len) != 0)
        return -1;
    *p = payload;
    return untime(type, p, len, t);
}

int lg_replay_fn(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len)
{
    ledger *l = ctx;
    const unsigned char *p;
    uint64_t t;
    if (record_open(l, seq, &type, payload, &p, &len, &t) != 0)
        return -1;
    l->last_seq = seq;
    l->records_since_snap++;
    /* a bucket closing during a replay takes the statuses at its end: the clients the replay
     * changed since the last boundary are recomputed first (those alone: lg_settle_dirty) */
    if (l->series_stale && lg_series_rolls(l, t)) {
        lg_settle_dirty(l);
        l->series_stale = 0;
    }
    lg_series_advance(l, t);
    l->rec_time = t;
    if (t > l->last_time)
        l->last_time = t;
    l->series_stale = 1;
    return apply_record(l, type, p, len);
}

void lg_after_apply(ledger *l)
{
    l->nevs_logged = l->nevs;
    lg_settle_dirty(l);
    lg_recount(l);
    l->series_stale = 0;
}

/* ---- records the snapshot claims to hold ----------------------------------------------------
 * A log record with seq <= the snapshot's seq (a crash came between the snapshot and the
 * log's truncation) is skipped, but only once the snapshot is seen to hold it: the same event
 * at the same index, the round with the same id and seq, a client whose last such record is
 * what the snapshot holds (checked after the scan, cover_bad). Anything else means the
 * snapshot's seq is wrong (format 1 does not checksum it). */

static int covered_client(ledger *l, br *r)
{
    char *id = br_str(r, LEDGER_ID_MAX);
    double eps = br_f64(r), delta = br_f64(r);
    unsigned mode = br_u8(r), rel = br_u8(r);
    char *labels = br_str(r, LEDGER_LABELS_MAX);
    long pos = !r->bad && id ? lg_find_client(l, id) : -1;
    int rc = -1;
    if (pos >= 0 &&
        (l->cover_bad != NULL || (l->cover_bad = calloc(l->ncl ? l->ncl : 1, 1)) != NULL)) {
        const lclient *c = &l->cl[pos];
        l->cover_bad[pos] =
            !(c->eps == eps && c->delta == delta && c->mode == mode && c->rel == rel &&
              strcmp(c->labels ? c->labels : "", labels ? labels : "") == 0);
        rc = 0;
    }
    free(id);
    free(labels);
    return rc;
}

/* The stored round named first in r: its position, or -1. */
static long covered_round(ledger *l, br *r)
{
    char *id = br_str(r, LEDGER_ID_MAX);
    long pos = id ? lg_find_round(l, id) : -1;
    free(id);
    return pos;
}

int lg_covered_fn(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len)
{
    ledger *l = ctx;
    const unsigned char *p;
    uint64_t t;
    if (record_open(l, seq, &type, payload, &p, &len, &t) != 0)
        return -1;
    br r = {p, len, 0, 0};
    switch (type) {
    case REC_EVENT: {
        uint32_t idx = br_u32(&r);
        unsigned rb = br_u8(&r), rel = rb & ~EVENT_PROFILED;
        size_t n, pn;
        const unsigned char *pp;
        if (r.bad || idx >= l->nevs || event_and_profile(&r, rb, &n, &pp, &pn) != 0)
            return -1;
        const lev *e = &l->evs[idx];
        return e->rel == rel && e->nbytes == n && memcmp(e->bytes, p + r.at, e->nbytes) == 0 ? 0
                                                                                             : -1;
    }
    case REC_CLIENT:
        return covered_client(l, &r);
    case REC_ROUND:
    case REC_RESERVE: {
        long pos = covered_round(l, &r);
        return pos >= 0 && l->rd[pos].seq == seq ? 0 : -1;
    }
    case REC_COMMIT:
    case REC_RELEASE: {
        long pos = covered_round(l, &r);
        return pos >= 0 && l->rd[pos].state_seq == seq ? 0 : -1;
    }
    case REC_NAME: {
        char *name = br_str(&r, LEDGER_ID_MAX);
        long pos = name ? lg_find_name(l, name) : -1;
        free(name);
        return pos >= 0 && l->nm[pos].seq == seq && l->nm[pos].nbytes == len - r.at &&
                       memcmp(l->nm[pos].bytes, p + r.at, len - r.at) == 0
                   ? 0
                   : -1;
    }
    }
    return -1;
}
