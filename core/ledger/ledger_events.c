/*
 * ledger_events.c - layer 1 (verbs): named events and clients' charge histories. A name is
 * one write transaction (ledger_txn.h); reads settle what they show.
 */
#include "ledger_txn.h"
#include "ledger_record.h"
#include "ledger_mem.h"

static dpb_status put_event_once(ledger *l, const char *name, const dp_event *ev, int *created,
                                 uint64_t *seq_out, dpb_error *err)
{
    *created = 0;
    if (!lg_valid_id(name))
        return dpb_fail(err, DPB_EINVAL, "name", "an event name is " LEDGER_ID_RULE);
    if (ledger_event_check(ev, err) != LEDGER_EVENT_FITS)
        return DPB_ELIMIT;
    unsigned char *eb = NULL;
    size_t elen = 0, ecap = 0;
    dpb_status st = dp_event_encode(ev, &eb, &elen, &ecap);
    if (st != DPB_OK) {
        free(eb);
        return dpb_fail(err, st, "event", "the event cannot be recorded");
    }
    lg_txn t;
    if ((st = lg_txn_begin(&t, l, err)) != DPB_OK)
        goto out;
    long pos = lg_find_durable_locked(l, lg_find_name, name, lg_seq_name);
    if (pos >= 0) {
        const lname *e = &l->nm[pos];
        if (e->nbytes == elen && memcmp(e->bytes, eb, elen) == 0)
            *seq_out = e->seq;
        else
            st = dpb_fail(err, DPB_ECONFLICT, "name",
                          "the name '%s' is taken by another event (names are immutable: "
                          "register this event under another name)",
                          name);
        goto out;
    }
    if ((st = lg_txn_writable(&t)) != DPB_OK)
        goto out;
    size_t max_n = l->max_nm ? l->max_nm : LEDGER_NAMED_EVENTS_DEFAULT;
    size_t max_b = l->max_nm_bytes ? l->max_nm_bytes : LEDGER_NAMED_BYTES_DEFAULT;
    if (l->nnm >= max_n || l->nm_bytes + elen > max_b) {
        st = dpb_fail(err, DPB_ELIMIT, "name",
                      "the ledger holds %zu named events of %zu bytes, and takes at most %zu "
                      "of %zu bytes (--max-named-events, --max-named-event-bytes): send the "
                      "event inline in rounds instead, or ask the operator to raise the limits",
                      l->nnm, l->nm_bytes, max_n, max_b);
        goto out;
    }
    /* the event in the vocabulary for both relations (logged first), then the name */
    for (int rel = 0; rel < 2 && st == DPB_OK; rel++) {
        uint32_t idx;
        int fresh;
        st = lg_intern(l, eb, elen, (dp_relation)rel, &idx, &fresh);
        if (st != DPB_OK)
            dpb_fail(err, st, "event", "the event could not be prepared");
    }
    if (st == DPB_OK)
        st = lg_txn_reserve(&t, l->nevs - l->nevs_logged + 1);
    if (st != DPB_OK) {
        lg_drop_unlogged_events(l);
        goto out;
    }
    if ((st = lg_txn_log_events(&t)) != DPB_OK)
        goto out;
    bw w = {0};
    lg_name_record(&w, name, eb, elen);
    if ((st = lg_txn_log(&t, REC_NAME, &w)) != DPB_OK)
        goto out;
    uint64_t seq = l->last_seq;
    if (lg_apply_name(l, name, eb, elen, seq) != 0) {
        st = lg_txn_abandon(&t, DPB_ENOMEM);
        goto out;
    }
    lundo u = {0};
    u.seq = seq;
    u.lversion = l->version;
    u.kind = U_NAME;
    u.pos = (uint32_t)(l->nnm - 1);
    lg_push_undo(l, &u);
    *created = 1;
    *seq_out = seq;
out:
    free(eb);
    return lg_txn_end(&t, st);
}

dpb_status ledger_put_event(ledger *l, const char *name, const dp_event *ev, int *created,
                            uint64_t *seq_out, dpb_error *err)
{
    dpb_status st;
    RETRY_RACES(st, put_event_once(l, name, ev, created, seq_out, err), err);
    return st;
}

typedef struct {
    dp_event **ev;
    uint64_t *seq;
} event_out;

static dpb_status show_event(const ledger *l, long pos, void *arg)
{
    event_out *o = arg;
    *o->seq = l->nm[pos].seq;
    return dp_event_decode(l->nm[pos].bytes, l->nm[pos].nbytes, o->ev, NULL);
}

uint64_t ledger_event_profiles(ledger *l)
{
    spend_stats s;
    spend_engine_stats(l->sp, &s);
    return s.classified;
}

void ledger_set_named_limits(ledger *l, size_t max_events, size_t max_bytes)
{
    lg_wrlock(l);
    l->max_nm = max_events;
    l->max_nm_bytes = max_bytes;
    lg_wrunlock(l);
}

dpb_status ledger_get_event(ledger *l, const char *name, dp_event **out, uint64_t *seq)
{
    *out = NULL;
    event_out o = {out, seq};
    return lg_read_one(l, lg_find_name, name, lg_seq_name, show_event, &o);
}

static const ledger *name_sort_ledger;
static int cmp_names(const void *a, const void *b)
{
    return strcmp(name_sort_ledger->nm[*(const uint32_t *)a].name,
                  name_sort_ledger->nm[*(const uint32_t *)b].name);
}

dpb_status ledger_list_events(ledger *l, size_t offset, size_t limit, char ***names, size_t *n,
                              size_t *total)
{
    *names = NULL;
    *n = 0;
    if (lg_read_begin(l, NULL) != DPB_OK)
        return DPB_EUNAVAILABLE;
    lg_rdlock_durable(l);
    size_t m = l->nnm;
    uint32_t *idx = malloc((m ? m : 1) * sizeof *idx);
    char **out = calloc(limit ? limit : 1, sizeof *out);
    dpb_status st = idx && out ? DPB_OK : DPB_ENOMEM;
    if (st == DPB_OK) {
        for (size_t i = 0; i < m; i++)
            idx[i] = (uint32_t)i;
        pthread_mutex_lock(&lg_sort_mu);
        name_sort_ledger = l;
        qsort(idx, m, sizeof *idx, cmp_names);
        pthread_mutex_unlock(&lg_sort_mu);
        for (size_t i = offset; i < m && *n < limit; i++)
            if ((out[(*n)++] = lg_xstrdup(l->nm[idx[i]].name)) == NULL)
                st = DPB_ENOMEM;
    }
    *total = m;
    pthread_rwlock_unlock(&l->lock);
    free(idx);
    if (st != DPB_OK) {
        for (size_t i = 0; out && i < *n; i++)
            free(out[i]);
        free(out);
        *n = 0;
        return st;
    }
    *names = out;
    return DPB_OK;
}

/* ---- charge history -------------------------------------------------------------------------- */

dpb_status ledger_client_history(ledger *l, const char *id, size_t offset, size_t limit,
                                 ledger_history *h)
{
    memset(h, 0, sizeof *h);
    if (lg_read_begin(l, NULL) != DPB_OK)
        return DPB_EUNAVAILABLE;
    lg_rdlock_durable(l);
    long pos = lg_find_client(l, id);
    if (pos < 0) {
        pthread_rwlock_unlock(&l->lock);
        return DPB_ENOTFOUND;
    }
    const lclient *c = &l->cl[pos];
    size_t kept = c->hseen < LEDGER_HISTORY ? c->hseen : LEDGER_HISTORY;
    h->total = kept;
    h->complete = c->hseen <= LEDGER_HISTORY;
    h->items = calloc(limit ? limit : 1, sizeof *h->items);
    h->agg = calloc((size_t)c->nev + c->nrv + 1, sizeof *h->agg);
    dpb_status st = h->items && h->agg ? DPB_OK : DPB_ENOMEM;
    for (size_t k = offset; st == DPB_OK && k < kept && h->n < limit; k++) {
        /* newest first: entry hseen - 1 - k */
        const lrnd *r = &l->rd[c->hist[(c->hseen - 1 - k) % LEDGER_HISTORY]];
        ledger_hist_item *it = &h->items[h->n++];
        snprintf(it->round_id, sizeof it->round_id, "%s", r->id);
        it->seq = r->seq;
        it->time_ms = r->time_ms;
        it->spent_after = NAN;
        const lout *o = NULL;
        for (uint32_t i = 0; r->out && i < r->n && o == NULL; i++)
            if (r->out[i].id == c->id) /* a known client's outcome points at its id */
                o = &r->out[i];
        if (o)
            it->spent_after = o->after;
        if (!r->phase || (r->state == LEDGER_COMMITTED && o && o->reported))
            it->state = LEDGER_H_CHARGED;
        else if (r->state == LEDGER_RESERVED)
            it->state = LEDGER_H_RESERVED;
        else
            it->state = LEDGER_H_RELEASED;
        if (r->phase && r->state != LEDGER_RESERVED) /* charged or released by its commit */
            it->time_ms = r->state_time_ms;
    }
    /* the aggregate: every distinct event, charged and reserved counts; a reserved event
     * that is also charged shares its entry (agg[j] is ev[j]): found in linear time */
    uint32_t *rpos = st == DPB_OK ? malloc(((size_t)c->nrv + 1) * sizeof *rpos) : NULL;
    if (st == DPB_OK && (rpos == NULL || lg_count_positions(c->ev, c->nev, c->rv, c->nrv, rpos)))
        st = DPB_ENOMEM;
    for (uint32_t i = 0; st == DPB_OK && i < c->nev + c->nrv; i++) {
        const lcount *e = i < c->nev ? &c->ev[i] : &c->rv[i - c->nev];
        ledger_agg_item *a = NULL;
        if (i >= c->nev && rpos[i - c->nev] != UINT32_MAX)
            a = &h->agg[rpos[i - c->nev]];
        if (a == NULL) {
            a = &h->agg[h->nagg];
            if (dp_event_decode(l->evs[e->ev].bytes, l->evs[e->ev].nbytes, &a->event, NULL) !=
                DPB_OK) {
                st = DPB_ENOMEM;
                break;
            }
            h->nagg++;
        }
        if (i < c->nev)
            a->count += e->count;
        else
            a->reserved += e->count;
    }
    pthread_rwlock_unlock(&l->lock);
    free(rpos);
    if (st != DPB_OK)
        ledger_history_free(h);
    return st;
}

void ledger_history_free(ledger_history *h)
{
    for (size_t i = 0; h->agg && i < h->nagg; i++)
        dp_event_free(h->agg[i].event);
    free(h->agg);
    free(h->items);
    memset(h, 0, sizeof *h);
}
