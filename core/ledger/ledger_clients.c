/*
 * ledger_clients.c - layer 1 (verbs): clients: registration (one, many, each), reads and
 * lists. Each change is one write transaction (ledger_txn.h); the state is read and applied
 * through ledger_mem.h, records encoded through ledger_record.h.
 */
#include "ledger_txn.h"
#include "ledger_record.h"
#include "ledger_mem.h"

/* A filter's target (eps, delta) is fixed before its first charge: one raised after seeing
 * outputs voids the guarantee, and one lowered is not what the filter ran against. */
static const char FILTER_BUDGET_FIXED[] =
    "the budget of a privacy-filter client that was charged cannot change: the filter's "
    "guarantee is for the (epsilon, delta) fixed before its first charge (register a new client "
    "for a new budget)";

static int filter_budget_changes(const lclient *c, const ledger_client *in)
{
    return c->rounds > 0 && ledger_mode_is_filter((ledger_mode)c->mode) &&
           (c->eps != in->epsilon || c->delta != in->delta);
}

static const char MODE_FIXED[] = "the accounting mode and neighbouring relation of a client "
                                 "that was charged cannot change";

/* 1 when ledger_put_client must refuse in for the stored client c (DPB_ECONFLICT): *field
 * and *why say why. */
static int client_conflict(const lclient *c, const ledger_client *in, const char **field,
                           const char **why)
{
    if (c->rounds > 0 && (c->mode != in->mode || c->rel != in->relation)) {
        *field = "accounting";
        *why = MODE_FIXED;
        return 1;
    }
    if (filter_budget_changes(c, in)) {
        *field = "budget";
        *why = FILTER_BUDGET_FIXED;
        return 1;
    }
    return 0;
}

/* Log the client record of in and apply it (an undo entry reserved); *pos receives its
 * position. On failure everything not durable is withdrawn. Caller holds the write lock. */
static dpb_status log_client(lg_txn *t, const ledger_client *in, long *pos)
{
    bw w = {0};
    lg_client_record(&w, in->id, in->epsilon, in->delta, in->mode, in->relation, in->labels);
    dpb_status st = lg_txn_log(t, REC_CLIENT, &w);
    if (st != DPB_OK)
        return st;
    st = lg_apply_logged_client(t->l, t->l->last_seq, in->id, in->epsilon, in->delta, in->mode,
                                in->relation, in->labels, pos);
    return st == DPB_OK ? DPB_OK : lg_txn_abandon(t, st);
}

/* Before a write lock that sets budgets: the spends re-evaluating the existing pld clients
 * whose budget changes will need (lg_recompute at the new budget: the charged multiset, and
 * with one more of the last round's event), copied under the read lock and computed into the
 * spend cache with no lock held (ledger_txn.h, "spends before the lock"), so that the write
 * lock, which reads wait for, is not held for a PLD computation. DPB_OK, DPB_ECANCELLED or
 * DPB_ECOST (nothing changed). */
static dpb_status put_prefetch(ledger *l, const ledger_client *in, size_t n, lg_prefetch *p,
                               dpb_error *err)
{
    lg_change *ch = malloc((n ? n : 1) * sizeof *ch);
    if (ch == NULL)
        return DPB_OK; /* computed under the lock, as it can */
    size_t m = 0;
    pthread_rwlock_rdlock(&l->lock);
    for (size_t i = 0; i < n; i++) {
        if (in[i].mode != LEDGER_PLD || !lg_valid_id(in[i].id))
            continue;
        long pos = lg_find_client(l, in[i].id);
        if (pos < 0)
            continue;
        const lclient *x = &l->cl[pos];
        if (x->mode != LEDGER_PLD || x->rel != in[i].relation || x->uncertified ||
            (x->eps == in[i].epsilon && x->delta == in[i].delta) || x->nev == 0)
            continue;
        ch[m++] = (lg_change){pos, LEV_NONE, 0, 0, 1, in[i].epsilon, in[i].delta};
    }
    if (m)
        (void)lg_prefetch_copy(l, ch, m, p); /* out of memory: computed under the lock */
    pthread_rwlock_unlock(&l->lock);
    free(ch);
    return lg_prefetch_run(l, p, NULL, err);
}

/* st = call(pre), with the spends computed before it (put_prefetch) and computed again while
 * a client changed in between (LEDGER_STALE), LG_PREFETCH_TRIES times at most. */
#define WITH_PREFETCH(st, l, in, n, call, err)                                                     \
    do {                                                                                           \
        (st) = LEDGER_STALE;                                                                       \
        for (int tries_ = 0; (st) == LEDGER_STALE; tries_++) {                                     \
            lg_prefetch p_ = {0};                                                                  \
            if (((st) = put_prefetch(l, in, n, &p_, err)) == DPB_OK) {                             \
                const lg_prefetch *pre = tries_ + 1 < LG_PREFETCH_TRIES ? &p_ : NULL;              \
                RETRY_RACES(st, call, err);                                                        \
            }                                                                                      \
            lg_prefetch_free(l, &p_);                                                              \
        }                                                                                          \
    } while (0)

/* 1 if entry in is valid on its own (the checks of ledger_put_client before the lock). */
static int client_entry_ok(const ledger_client *in)
{
    return lg_valid_id(in->id) && isfinite(in->epsilon) && in->epsilon >= 0.0 && in->delta > 0.0 &&
           in->delta < 1.0 && (unsigned)in->mode < LEDGER_NMODES && (unsigned)in->relation <= 1;
}

/* 1 if client c already is as in asks (budget, mode, relation, labels). */
static int client_same(const lclient *c, const ledger_client *in)
{
    return c->eps == in->epsilon && c->delta == in->delta && c->mode == in->mode &&
           c->rel == in->relation && strcmp(c->labels ? c->labels : "", in->labels) == 0;
}

static dpb_status put_client_once(ledger *l, const ledger_client *in, const lg_prefetch *pre,
                                  int *created, ledger_client *out, dpb_error *err)
{
    if (!lg_valid_id(in->id))
        return dpb_fail(err, DPB_EINVAL, "id", "a client id is " LEDGER_ID_RULE);
    if (!(isfinite(in->epsilon) && in->epsilon >= 0.0) || !(in->delta > 0.0 && in->delta < 1.0))
        return dpb_fail(err, DPB_EINVAL, "budget",
                        "a budget needs epsilon >= 0 (finite) and 0 < delta < 1");
    if ((unsigned)in->mode >= LEDGER_NMODES || (unsigned)in->relation > 1)
        return dpb_fail(err, DPB_EINVAL, "accounting", "unknown accounting mode or relation");
    lg_txn t;
    dpb_status st = lg_txn_begin(&t, l, err);
    if (st == DPB_OK)
        st = lg_txn_writable(&t);
    long pos = st == DPB_OK ? lg_find_client(l, in->id) : -1;
    const char *field, *why;
    if (st == DPB_OK && pos >= 0 && client_conflict(&l->cl[pos], in, &field, &why))
        st = dpb_fail(err, DPB_ECONFLICT, field, "%s", why);
    if (st == DPB_OK && pre && !lg_prefetch_current(l, pre))
        st = LEDGER_STALE; /* changed since the spends were computed: again */
    if (st == DPB_OK)
        st = lg_txn_reserve(&t, 1);
    if (st == DPB_OK) {
        *created = pos < 0;
        st = log_client(&t, in, &pos);
    }
    if (st == DPB_OK)
        lg_client_view(l, &l->cl[pos], out);
    return lg_txn_end(&t, st);
}

dpb_status ledger_put_client(ledger *l, const ledger_client *in, int *created, ledger_client *out,
                             dpb_error *err)
{
    dpb_status st;
    lg_refine_yield(l);
    WITH_PREFETCH(st, l, in, 1, put_client_once(l, in, pre, created, out, err), err);
    return st;
}

static dpb_status put_clients_once(ledger *l, const ledger_client *in, size_t n,
                                   const lg_prefetch *pre, dpb_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (!client_entry_ok(&in[i]))
            return dpb_fail(err, DPB_EINVAL, "clients", "entry %zu: invalid id or budget", i);
    lg_txn t;
    dpb_status st = lg_txn_begin(&t, l, err);
    if (st == DPB_OK)
        st = lg_txn_writable(&t);
    /* all or none: every entry is checked before the first one is logged (the batch itself
     * never charges, so an earlier entry cannot make a later one conflict) */
    for (size_t i = 0; i < n && st == DPB_OK; i++) {
        long pos = lg_find_client(l, in[i].id);
        const char *field, *why;
        if (pos >= 0 && client_conflict(&l->cl[pos], &in[i], &field, &why))
            st = dpb_fail(err, DPB_ECONFLICT, field, "entry %zu: %s", i, why);
    }
    if (st == DPB_OK && pre && !lg_prefetch_current(l, pre))
        st = LEDGER_STALE; /* changed since the spends were computed: again */
    if (st == DPB_OK)
        st = lg_txn_reserve(&t, n);
    for (size_t i = 0; i < n && st == DPB_OK; i++) {
        long pos;
        st = log_client(&t, &in[i], &pos);
    }
    if (st == DPB_OK)
        lg_txn_wait(&t, l->last_seq);
    return lg_txn_end(&t, st);
}

dpb_status ledger_put_clients(ledger *l, const ledger_client *in, size_t n, dpb_error *err)
{
    dpb_status st;
    lg_refine_yield(l);
    WITH_PREFETCH(st, l, in, n, put_clients_once(l, in, n, pre, err), err);
    return st;
}

static dpb_status put_clients_each_once(ledger *l, const ledger_client *in, size_t n,
                                        const lg_prefetch *pre, ledger_put_outcome *out,
                                        dpb_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (!client_entry_ok(&in[i]))
            return dpb_fail(err, DPB_EINVAL, "clients",
                            "clients[%zu]: invalid id, budget, accounting or relation", i);
    memset(out, 0, n * sizeof *out);
    lg_txn t;
    dpb_status st = lg_txn_begin(&t, l, err);
    if (st == DPB_OK)
        st = lg_txn_writable(&t);
    if (st == DPB_OK && pre && !lg_prefetch_current(l, pre))
        st = LEDGER_STALE; /* changed since the spends were computed: again */
    if (st == DPB_OK)
        st = lg_txn_reserve(&t, n);
    for (size_t i = 0; i < n && st == DPB_OK; i++) {
        ledger_put_outcome *o = &out[i];
        long pos = lg_find_client(l, in[i].id);
        const char *field, *why;
        if (pos >= 0 && client_conflict(&l->cl[pos], &in[i], &field, &why)) {
            o->result = LEDGER_PUT_CONFLICT;
            snprintf(o->field, sizeof o->field, "%s", field);
            snprintf(o->detail, sizeof o->detail, "%s", why);
        } else if (pos >= 0 && client_same(&l->cl[pos], &in[i])) {
            o->result = LEDGER_PUT_UNCHANGED;
            /* shown only once durable: wait for the change that made it so */
            if (l->cl[pos].seq > 0)
                lg_txn_wait(&t, l->cl[pos].seq);
        } else {
            o->result = pos < 0 ? LEDGER_PUT_CREATED : LEDGER_PUT_UPDATED;
            if ((st = log_client(&t, &in[i], &pos)) != DPB_OK)
                break;
        }
        o->version = pos >= 0 ? l->cl[pos].version : 0;
    }
    return lg_txn_end(&t, st);
}

dpb_status ledger_put_clients_each(ledger *l, const ledger_client *in, size_t n,
                                   ledger_put_outcome *out, dpb_error *err)
{
    dpb_status st;
    lg_refine_yield(l);
    WITH_PREFETCH(st, l, in, n, put_clients_each_once(l, in, n, pre, out, err), err);
    return st;
}

static dpb_status show_client(const ledger *l, long pos, void *out)
{
    lg_client_view(l, &l->cl[pos], out);
    return DPB_OK;
}

dpb_status ledger_get_client(ledger *l, const char *id, ledger_client *out)
{
    return lg_read_one(l, lg_find_client, id, lg_seq_client, show_client, out);
}

int ledger_read_only(ledger *l)
{
    return lg_ledger_ro(l);
}

/* A list's order: (key, id), ascending or descending (ids are unique: a total order). */
typedef struct {
    const ledger *l;
    ledger_sort key;
    int desc;
} list_order;

static double remaining_of(const lclient *c)
{
    return c->spent < c->eps ? c->eps - c->spent : 0.0;
}

/* < 0 when client x comes before client y in the order o. */

/* < 0 when client x comes before client y in the order o. */
static int cmp_clients(const list_order *o, uint32_t xi, uint32_t yi)
{
    const lclient *x = &o->l->cl[xi];
    const lclient *y = &o->l->cl[yi];
    int c = 0;
    if (o->key == LEDGER_SORT_SPENT)
        c = x->spent < y->spent ? -1 : x->spent > y->spent;
    else if (o->key == LEDGER_SORT_REMAINING) {
        double rx = remaining_of(x), ry = remaining_of(y);
        c = rx < ry ? -1 : rx > ry;
    }
    if (c == 0) /* ties by id: its place in the id order (no string to fetch) */
        c = o->l->rank[xi] < o->l->rank[yi] ? -1 : o->l->rank[xi] > o->l->rank[yi];
    return o->desc ? -c : c;
}

static const ledger *id_sort_ledger; /* under lg_sort_mu: qsort has no context argument */

static int cmp_pos_id(const void *a, const void *b)
{
    return strcmp(id_sort_ledger->cl[*(const uint32_t *)a].id,
                  id_sort_ledger->cl[*(const uint32_t *)b].id);
}

/* Bring the id order (l->by_id, l->rank) up to date with the clients: the new ones sorted
 * and merged in (a sort only of what was added since the last list). 0, or -1 out of memory.
 * Caller holds the read lock (the clients stay put) and not id_mu. */
static int id_order_update(ledger *l)
{
    pthread_mutex_lock(&l->id_mu);
    size_t n = l->ncl, old = l->nby_id;
    int rc = 0;
    uint32_t *tail = NULL, *merged = NULL;
    if (old == n)
        goto out;
    rc = -1;
    if (n > l->cap_by_id) {
        size_t cap = l->cap_by_id ? l->cap_by_id : 1024;
        while (cap < n)
            cap *= 2;
        uint32_t *b = realloc(l->by_id, cap * sizeof *b);
        if (b == NULL)
            goto out;
        l->by_id = b;
        uint32_t *r = realloc(l->rank, cap * sizeof *r);
        if (r == NULL)
            goto out;
        l->rank = r;
        l->cap_by_id = cap;
    }
    size_t add = n - old;
    tail = malloc(add * sizeof *tail);
    merged = old ? malloc(n * sizeof *merged) : NULL;
    if (tail == NULL || (old && merged == NULL))
        goto out;
    for (size_t i = 0; i < add; i++)
        tail[i] = (uint32_t)(old + i);
    pthread_mutex_lock(&lg_sort_mu);
    id_sort_ledger = l;
    qsort(tail, add, sizeof *tail, cmp_pos_id);
    pthread_mutex_unlock(&lg_sort_mu);
    if (old == 0) {
        memcpy(l->by_id, tail, add * sizeof *tail);
    } else {
        size_t i = 0, j = 0, k = 0;
        while (i < old && j < add)
            merged[k++] =
                strcmp(l->cl[l->by_id[i]].id, l->cl[tail[j]].id) < 0 ? l->by_id[i++] : tail[j++];
        while (i < old)
            merged[k++] = l->by_id[i++];
        while (j < add)
            merged[k++] = tail[j++];
        memcpy(l->by_id, merged, n * sizeof *merged);
    }
    for (size_t i = 0; i < n; i++)
        l->rank[l->by_id[i]] = (uint32_t)i;
    l->nby_id = n;
    rc = 0;
out:
    pthread_mutex_unlock(&l->id_mu);
    free(tail);
    free(merged);
    return rc;
}

static int list_match(const ledger_query *q, const lclient *c)
{
    return (q->status < 0 || lg_status_of(c) == (ledger_status)q->status) &&
           (!q->label || lg_has_label(c, q->label));
}

/* heap[0..k) is a max-heap in the order o (its root comes last of the k): sift the root
 * down. */
static void heap_down(const list_order *o, uint32_t *heap, size_t k)
{
    for (size_t i = 0;;) {
        size_t c = 2 * i + 1, big = i;
        if (c < k && cmp_clients(o, heap[c], heap[big]) > 0)
            big = c;
        if (c + 1 < k && cmp_clients(o, heap[c + 1], heap[big]) > 0)
            big = c + 1;
        if (big == i)
            return;
        uint32_t t = heap[i];
        heap[i] = heap[big];
        heap[big] = t;
        i = big;
    }
}

static void heap_up(const list_order *o, uint32_t *heap, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (cmp_clients(o, heap[i], heap[p]) <= 0)
            return;
        uint32_t t = heap[i];
        heap[i] = heap[p];
        heap[p] = t;
        i = p;
    }
}

dpb_status ledger_list(ledger *l, const ledger_query *q, ledger_client *out, size_t *n,
                       size_t *total, uint64_t *version)
{
    if (lg_read_begin(l, NULL) != DPB_OK)
        return DPB_EUNAVAILABLE;
    lg_rdlock_durable(l);
    if (id_order_update(l) != 0) {
        pthread_rwlock_unlock(&l->lock);
        return DPB_ENOMEM;
    }
    *n = 0;
    if (q->sort == LEDGER_SORT_ID && q->label == NULL) {
        /* walk the id order: a page costs what it skips and shows; the total of a status
         * (or of everyone) is the counters' */
        size_t m = 0, end = q->offset + q->limit, j = 0;
        if (q->status < 0) /* everyone: the page starts at its offset */
            m = j = q->offset < l->ncl ? q->offset : l->ncl;
        for (; j < l->ncl && m < end; j++) {
            uint32_t pos = l->by_id[q->descending ? l->ncl - 1 - j : j];
            if (!list_match(q, &l->cl[pos]))
                continue;
            if (m >= q->offset && *n < q->limit)
                lg_client_view(l, &l->cl[pos], &out[(*n)++]);
            m++;
        }
        *total = q->status >= 0 ? (size_t)l->by_status[q->status] : l->ncl;
        *version = lg_view_tag(l);
        pthread_rwlock_unlock(&l->lock);
        return DPB_OK;
    }
    /* by spend, or a label's clients: the first offset + limit matching clients in the order
     * (ties and the id order by rank), kept in a bounded max-heap: a page costs one pass over
     * the clients in memory order and log(offset + limit) per match, not a sort */
    list_order o = {l, q->sort, q->descending};
    size_t want = q->offset + q->limit;
    if (want < q->offset || want > l->ncl)
        want = l->ncl;
    uint32_t *idx = malloc((want ? want : 1) * sizeof *idx);
    if (idx == NULL) {
        pthread_rwlock_unlock(&l->lock);
        return DPB_ENOMEM;
    }
    size_t m = 0, k = 0;
    for (size_t i = 0; i < l->ncl; i++) {
        if (!list_match(q, &l->cl[i]))
            continue;
        m++;
        if (k < want) {
            idx[k++] = (uint32_t)i;
            heap_up(&o, idx, k - 1);
        } else if (want > 0 && cmp_clients(&o, (uint32_t)i, idx[0]) < 0) {
            idx[0] = (uint32_t)i;
            heap_down(&o, idx, k);
        }
    }
    for (size_t end = k; end > 1; end--) { /* heapsort: the kept clients in order */
        uint32_t t = idx[0];
        idx[0] = idx[end - 1];
        idx[end - 1] = t;
        heap_down(&o, idx, end - 1);
    }
    for (size_t i = q->offset; i < k && *n < q->limit; i++)
        lg_client_view(l, &l->cl[idx[i]], &out[(*n)++]);
    *total = m;
    free(idx);
    *version = lg_view_tag(l);
    pthread_rwlock_unlock(&l->lock);
    return DPB_OK;
}
