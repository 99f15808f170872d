/*
 * ledger_clients.c - clients: registration (one, many, each), reads, lists, and the
 * background refinement of pld spends.
 */
#include "ledger_int.h"

/* ---- clients --------------------------------------------------------------------------------- */

static const char *const MODE_NAMES[LEDGER_NMODES] = {"rdp", "pld", "rdp_filter", "gdp_filter"};

const char *ledger_mode_name(ledger_mode m)
{
    return (unsigned)m < LEDGER_NMODES ? MODE_NAMES[m] : "unknown";
}

int ledger_mode_parse(const char *s, ledger_mode *m)
{
    for (int i = 0; i < LEDGER_NMODES; i++)
        if (strcmp(s, MODE_NAMES[i]) == 0) {
            *m = (ledger_mode)i;
            return 0;
        }
    return -1;
}

int ledger_mode_is_filter(ledger_mode m)
{
    return m == LEDGER_RDP_FILTER || m == LEDGER_GDP_FILTER;
}

const char *ledger_guarantee_name(ledger_guarantee g)
{
    static const char *const names[] = {"fixed_sequence_composition", "adaptive_filter", "none"};
    return (unsigned)g < 3 ? names[g] : "unknown";
}

const char *ledger_guarantee_reference(ledger_mode m)
{
    switch (m) {
    case LEDGER_RDP:
        return "RDP composition (Mironov 2017, Proposition 1) with the improved conversion "
               "(Canonne, Kamath, Steinke 2020): valid when every round's event and the client's "
               "participation are fixed independently of earlier outputs";
    case LEDGER_PLD:
        return "composition of pessimistic privacy-loss distributions (Koskela et al. 2020; "
               "Doroshenko et al. 2022): valid when every round's event and the client's "
               "participation are fixed independently of earlier outputs";
    case LEDGER_RDP_FILTER:
        return "Renyi filters (Feldman & Zrnic 2021) at 21 orders committed in advance, delta "
               "split over the orders by a union bound, each with the improved conversion "
               "(Canonne, Kamath, Steinke 2020): (epsilon, delta)-DP for the budget under fully "
               "adaptive choices (docs/FILTERS.md)";
    case LEDGER_GDP_FILTER:
        return "Gaussian-DP filter (Smith & Thakurta 2022, fully adaptive composition for GDP): "
               "the summed mu^2 stays within the mu-GDP that meets the budget, (epsilon, "
               "delta)-DP under fully adaptive choices (docs/FILTERS.md)";
    }
    return "unknown";
}

ledger_guarantee ledger_guarantee_of(ledger_mode m, double spent, double eps, int uncertified)
{
    if (!ledger_mode_is_filter(m))
        return LEDGER_FIXED_SEQUENCE;
    return !uncertified && spent <= eps ? LEDGER_ADAPTIVE_FILTER : LEDGER_NO_GUARANTEE;
}

static void view_of(const lclient *c, ledger_client *v)
{
    memset(v, 0, sizeof *v);
    snprintf(v->id, sizeof v->id, "%s", c->id);
    v->epsilon = c->eps;
    v->delta = c->delta;
    v->mode = (ledger_mode)c->mode;
    v->relation = (dp_relation)c->rel;
    snprintf(v->labels, sizeof v->labels, "%s", c->labels ? c->labels : "");
    v->spent = c->spent;
    v->remaining = c->spent < c->eps ? c->eps - c->spent : 0.0;
    v->delta_tv = c->dtv;
    v->rounds = c->rounds;
    v->version = c->version;
    v->status = lg_status_of(c);
    v->guarantee = ledger_guarantee_of(v->mode, c->spent, c->eps, c->uncertified);
    v->spent_accountant = c->sacct;
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
        lg_counters(l, &l->cl[pos], -1);
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
    if (pos_out)
        *pos_out = pos;
    return DPB_OK;
}

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

/* An appended record that cannot be applied (out of memory): give up on everything not
 * durable, so the log never holds what memory does not. Caller holds the write lock. */
dpb_status lg_abandon(ledger *l, dpb_status st, dpb_error *err)
{
    store_abandon(l->st, "applying a logged change (out of memory)");
    if (l->shared) { /* the store dropped the pending records: memory follows, read-only */
        atomic_store(&l->read_only, 1);
        lg_voided(l, DPB_ENOMEM);
    }
    lg_withdraw_locked(l);
    return dpb_fail(err, st, NULL,
                    "out of memory applying a change: it is withdrawn and the ledger is "
                    "read-only until restarted");
}

/* Append a record. On failure the caller withdraws (the ledger turns read-only). Caller
 * holds the write lock. */
dpb_status lg_log_record(ledger *l, int type, const bw *w, dpb_error *err)
{
    if (w->oom)
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    uint64_t seq;
    dpb_status st = store_append(l->st, (uint8_t)type, w->b, w->n, &seq);
    if (st == DPB_OK && seq != l->last_seq + 1) { /* the store lost count: trust nothing */
        store_abandon(l->st, "a record appended out of sequence");
        atomic_store(&l->read_only, 1);
        return dpb_fail(err, DPB_EIO, NULL,
                        "the ledger's store appended seq %llu after %llu: the change is "
                        "withdrawn and the ledger is read-only until restarted",
                        (unsigned long long)seq, (unsigned long long)l->last_seq);
    }
    if (st != DPB_OK) {
        dpb_error why = {0};
        store_error(l->st, &why);
        return dpb_fail(err, DPB_EIO, NULL,
                        "the ledger could not write its log (%s): the change is withdrawn, not "
                        "applied, and the ledger is read-only until restarted",
                        why.detail[0] ? why.detail : dpb_strstatus(st));
    }
    l->last_seq = seq;
    l->records_since_snap++;
    return DPB_OK;
}

void lg_maybe_snapshot(ledger *l)
{
    uint64_t every = l->opt.snapshot_every ? l->opt.snapshot_every : 100000;
    if (l->records_since_snap < every || !l->has_thread)
        return;
    pthread_mutex_lock(&l->snap_mu);
    l->snap_wanted = 1;
    pthread_cond_signal(&l->snap_cv);
    pthread_mutex_unlock(&l->snap_mu);
}

int ledger_id_valid(const char *id, size_t len)
{
    if (id == NULL || len == 0 || len > LEDGER_ID_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)id[i];
        int alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || c == '\0' || strchr("._~:@+-", c) == NULL))
            return 0;
    }
    return 1;
}

int lg_valid_id(const char *id)
{
    return ledger_id_valid(id, strlen(id));
}

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
static dpb_status log_client(ledger *l, const ledger_client *in, long *pos, dpb_error *err)
{
    bw w = {0};
    lg_client_record(&w, in->id, in->epsilon, in->delta, in->mode, in->relation, in->labels);
    dpb_status st = lg_log_record(l, REC_CLIENT, &w, err);
    free(w.b);
    if (st != DPB_OK) {
        lg_withdraw_locked(l);
        return st;
    }
    st = lg_apply_logged_client(l, l->last_seq, in->id, in->epsilon, in->delta, in->mode,
                                in->relation, in->labels, pos);
    return st == DPB_OK ? DPB_OK : lg_abandon(l, st, err);
}

/* Adds to c[*nc] the terms of client x's multiset (charged, plus held reservations and one
 * more of last_ev when `next`), each holding a reference on its event. 0, or -1 when out of
 * memory. */
static int prefetch_terms(ledger *l, const lclient *x, const ledger_client *in, int next,
                          spend_candidate *c, size_t *nc)
{
    size_t m = x->nev + (next ? x->nrv + 1 : 0);
    spend_term *t = malloc((m ? m : 1) * sizeof *t);
    if (t == NULL)
        return -1;
    size_t k = 0;
    for (uint32_t i = 0; i < x->nev; i++)
        t[k++] = (spend_term){l->evs[x->ev[i].ev].se, x->ev[i].count};
    for (uint32_t i = 0; next && i <= x->nrv; i++) {
        uint32_t ev = i < x->nrv ? x->rv[i].ev : x->last_ev;
        uint64_t n = i < x->nrv ? x->rv[i].count : 1;
        size_t j = 0;
        while (j < k && t[j].ev != l->evs[ev].se)
            j++;
        if (j < k)
            t[j].count += n;
        else
            t[k++] = (spend_term){l->evs[ev].se, n};
    }
    for (size_t j = 0; j < k; j++)
        spend_event_ref(l->sp, t[j].ev);
    c[(*nc)++] = (spend_candidate){in->epsilon, in->delta, (dp_relation)x->rel, t, k};
    return 0;
}

/* Before a write lock that sets budgets: computes into the spend cache the PLD values that
 * re-evaluating the existing pld clients whose budget changes will need (lg_recompute at the
 * new budget: the charged multiset, and with one more of the last round's event), so that
 * the write lock, which reads wait for, is not held for a PLD computation. Best effort: a
 * client changed meanwhile is computed under the lock, as it would be without this. */
static void put_prefetch(ledger *l, const ledger_client *in, size_t n)
{
    spend_candidate *c = NULL;
    size_t nc = 0, cap = 0;
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
        if (nc + 2 > cap) {
            size_t ncap = cap ? 2 * cap : 8;
            spend_candidate *nb = realloc(c, ncap * sizeof *nb);
            if (nb == NULL)
                break;
            c = nb;
            cap = ncap;
        }
        if (prefetch_terms(l, x, &in[i], 0, c, &nc) != 0 ||
            (x->last_ev != LEV_NONE && prefetch_terms(l, x, &in[i], 1, c, &nc) != 0))
            break;
    }
    pthread_rwlock_unlock(&l->lock);
    if (nc)
        spend_prefetch(l->sp, c, nc);
    for (size_t i = 0; i < nc; i++) {
        for (size_t k = 0; k < c[i].m; k++)
            spend_event_put(l->sp, c[i].t[k].ev);
        free(c[i].t);
    }
    free(c);
}

static dpb_status put_client_once(ledger *l, const ledger_client *in, int *created,
                                  ledger_client *out, dpb_error *err);

dpb_status ledger_put_client(ledger *l, const ledger_client *in, int *created, ledger_client *out,
                             dpb_error *err)
{
    dpb_status st;
    put_prefetch(l, in, 1);
    RETRY_RACES(st, put_client_once(l, in, created, out, err), err);
    return st;
}

static dpb_status put_client_once(ledger *l, const ledger_client *in, int *created,
                                  ledger_client *out, dpb_error *err)
{
    if (!lg_valid_id(in->id))
        return dpb_fail(err, DPB_EINVAL, "id", "a client id is " LEDGER_ID_RULE);
    if (!(isfinite(in->epsilon) && in->epsilon >= 0.0) || !(in->delta > 0.0 && in->delta < 1.0))
        return dpb_fail(err, DPB_EINVAL, "budget",
                        "a budget needs epsilon >= 0 (finite) and 0 < delta < 1");
    if ((unsigned)in->mode >= LEDGER_NMODES || (unsigned)in->relation > 1)
        return dpb_fail(err, DPB_EINVAL, "accounting", "unknown accounting mode or relation");
    pthread_rwlock_wrlock(&l->lock);
    dpb_status st = lg_begin_write(l, err);
    uint64_t seq = 0, gen = lg_cur_gen(l);
    if (st != DPB_OK)
        goto out;
    if (lg_ledger_ro(l)) {
        st = lg_readonly_error(err);
        goto out;
    }
    long pos = lg_find_client(l, in->id);
    const char *field, *why;
    if (pos >= 0 && client_conflict(&l->cl[pos], in, &field, &why)) {
        st = dpb_fail(err, DPB_ECONFLICT, field, "%s", why);
        goto out;
    }
    if (lg_reserve_undo(l, 1) != 0) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        goto out;
    }
    *created = pos < 0;
    st = log_client(l, in, &pos, err);
    seq = l->last_seq;
    if (st == DPB_OK)
        view_of(&l->cl[pos], out);
out:
    pthread_rwlock_unlock(&l->lock);
    if (st == DPB_OK) {
        st = lg_commit(l, seq, gen, err);
        lg_maybe_snapshot(l);
    }
    return st;
}

static dpb_status put_clients_once(ledger *l, const ledger_client *in, size_t n, dpb_error *err);

dpb_status ledger_put_clients(ledger *l, const ledger_client *in, size_t n, dpb_error *err)
{
    dpb_status st;
    put_prefetch(l, in, n);
    RETRY_RACES(st, put_clients_once(l, in, n, err), err);
    return st;
}

static dpb_status put_clients_once(ledger *l, const ledger_client *in, size_t n, dpb_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (!lg_valid_id(in[i].id) || !(isfinite(in[i].epsilon) && in[i].epsilon >= 0.0) ||
            !(in[i].delta > 0.0 && in[i].delta < 1.0) || (unsigned)in[i].mode >= LEDGER_NMODES ||
            (unsigned)in[i].relation > 1)
            return dpb_fail(err, DPB_EINVAL, "clients", "entry %zu: invalid id or budget", i);
    pthread_rwlock_wrlock(&l->lock);
    dpb_status st = lg_begin_write(l, err);
    uint64_t gen = lg_cur_gen(l);
    if (st == DPB_OK && lg_ledger_ro(l))
        st = lg_readonly_error(err);
    /* all or none: every entry is checked before the first one is logged (the batch itself
     * never charges, so an earlier entry cannot make a later one conflict) */
    for (size_t i = 0; i < n && st == DPB_OK; i++) {
        long pos = lg_find_client(l, in[i].id);
        const char *field, *why;
        if (pos >= 0 && client_conflict(&l->cl[pos], &in[i], &field, &why))
            st = dpb_fail(err, DPB_ECONFLICT, field, "entry %zu: %s", i, why);
    }
    if (st == DPB_OK && lg_reserve_undo(l, n) != 0)
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n && st == DPB_OK; i++) {
        long pos;
        st = log_client(l, &in[i], &pos, err);
    }
    uint64_t seq = l->last_seq;
    pthread_rwlock_unlock(&l->lock);
    if (st == DPB_OK) {
        st = lg_commit(l, seq, gen, err);
        lg_maybe_snapshot(l);
    }
    return st;
}

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

static dpb_status put_clients_each_once(ledger *l, const ledger_client *in, size_t n,
                                        ledger_put_outcome *out, dpb_error *err);

dpb_status ledger_put_clients_each(ledger *l, const ledger_client *in, size_t n,
                                   ledger_put_outcome *out, dpb_error *err)
{
    dpb_status st;
    put_prefetch(l, in, n);
    RETRY_RACES(st, put_clients_each_once(l, in, n, out, err), err);
    return st;
}

static dpb_status put_clients_each_once(ledger *l, const ledger_client *in, size_t n,
                                        ledger_put_outcome *out, dpb_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (!client_entry_ok(&in[i]))
            return dpb_fail(err, DPB_EINVAL, "clients",
                            "clients[%zu]: invalid id, budget, accounting or relation", i);
    memset(out, 0, n * sizeof *out);
    pthread_rwlock_wrlock(&l->lock);
    dpb_status st = lg_begin_write(l, err);
    uint64_t gen = lg_cur_gen(l);
    if (st == DPB_OK && lg_ledger_ro(l))
        st = lg_readonly_error(err);
    if (st == DPB_OK && lg_reserve_undo(l, n) != 0)
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    uint64_t seq = 0;
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
            if (l->cl[pos].seq > seq)
                seq = l->cl[pos].seq;
        } else {
            o->result = pos < 0 ? LEDGER_PUT_CREATED : LEDGER_PUT_UPDATED;
            if ((st = log_client(l, &in[i], &pos, err)) != DPB_OK)
                break;
            seq = l->last_seq;
        }
        o->version = pos >= 0 ? l->cl[pos].version : 0;
    }
    pthread_rwlock_unlock(&l->lock);
    if (st == DPB_OK && seq > 0) {
        st = lg_commit(l, seq, gen, err);
        lg_maybe_snapshot(l);
    }
    return st;
}

dpb_status ledger_get_client(ledger *l, const char *id, ledger_client *out)
{
    if (lg_read_begin(l, NULL) != DPB_OK)
        return DPB_EUNAVAILABLE;
    for (;;) {
        pthread_rwlock_rdlock(&l->lock);
        long pos = lg_find_client(l, id);
        if (pos >= 0 && lg_settle(l, l->cl[pos].seq) != 0) {
            pthread_rwlock_unlock(&l->lock);
            lg_withdraw(l); /* then look again: only what is durable is shown */
            continue;
        }
        if (pos >= 0)
            view_of(&l->cl[pos], out);
        pthread_rwlock_unlock(&l->lock);
        return pos >= 0 ? DPB_OK : DPB_ENOTFOUND;
    }
}

/* Take the read lock on a state whose every change is durable. */
void lg_rdlock_durable(ledger *l)
{
    for (;;) {
        pthread_rwlock_rdlock(&l->lock);
        if (lg_settle(l, l->last_seq) == 0)
            return;
        pthread_rwlock_unlock(&l->lock);
        lg_withdraw(l);
    }
}

int ledger_read_only(ledger *l)
{
    return lg_ledger_ro(l);
}

int lg_has_label(const lclient *c, const char *kv)
{
    if (c->labels == NULL)
        return 0;
    size_t n = strlen(kv);
    for (const char *p = c->labels; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && memcmp(p, kv, n) == 0)
            return 1;
        p += len + (e ? 1 : 0);
    }
    return 0;
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

/* ---- Background refinement (pld_refine) ---------------------------------------------------
 * A pld client within its budget shows its rdp value r. A background thread (refine.c), at
 * normal priority but giving way to every change (a change stops its computation, and it
 * starts one only after REFINE_QUIET_NS without changes: so it never holds a lock or a CPU
 * a round needs for long, which a low-priority thread holding a lock would), scans the clients in
 * slices under the read lock for such a state not settled yet, copies its terms (holding references
 * to its events), computes the PLD value p through the spend engine (its cache, the same code a
 * charge uses) outside every lock, and under the write lock, briefly, shows min(p, r) naming the
 * accountant if the client's budget and multiset are still exactly the copied ones: a charge
 * meanwhile is never overwritten. Nothing is logged: the refined value is a function of the logged
 * state, recomputed after a restart, so the client's version (which the log's replay must number
 * the same) is kept; the accountant changes with it, and (version, accountant) is the client's
 * ETag. Lists and the summary change too: their ETag (view_tag) mixes in the refinements applied
 * since open and a value new at every open, as a snapshot may hold refined values. */

uint64_t lg_view_tag(const ledger *l)
{
    uint64_t v[3] = {l->version, l->refines, l->boot};
    return fnv64(v, sizeof v, 14695981039346656037ULL);
}

static int refine_wanted(const lclient *c)
{
    return c->mode == LEDGER_PLD && !c->uncertified && c->sacct == DP_ACCT_RDP && c->nev > 0 &&
           c->refined != c->version + 1;
}

/* 1 if c still has exactly the budget and the terms o[0..m) (in its own order). */
static int refine_same(const ledger *l, const lclient *c, double eps, double delta, uint8_t rel,
                       const spend_term *o, size_t m)
{
    if (c->mode != LEDGER_PLD || c->uncertified || c->sacct != DP_ACCT_RDP || c->eps != eps ||
        c->delta != delta || c->rel != rel || c->nev != m)
        return 0;
    for (size_t i = 0; i < m; i++)
        if (l->evs[c->ev[i].ev].se != o[i].ev || c->ev[i].count != o[i].count)
            return 0;
    return 1;
}

#define REFINE_SLICE 1024 /* clients looked at per hold of the read lock */

#define REFINE_QUIET_NS 100000000u /* 100 ms without a change before a computation starts */

int lg_refine_step(void *arg, const int *stop)
{
    ledger *l = arg;
    if (lg_mono_ns() - __atomic_load_n(&l->rf_last_change, __ATOMIC_ACQUIRE) < REFINE_QUIET_NS)
        return 0; /* changes are under way: wait for a quiet moment */
    char *id = NULL;
    spend_term *o = NULL, *t = NULL;
    size_t m = 0;
    double eps = 0.0, delta = 0.0;
    uint8_t rel = 0;
    pthread_rwlock_rdlock(&l->lock);
    if (l->rf_next == 0) { /* a new pass, unless nothing changed since a pass found nothing */
        if (l->version == l->rf_idle_version) {
            pthread_rwlock_unlock(&l->lock);
            return 0;
        }
        l->rf_pass_version = l->version;
        l->rf_pass_found = 0;
    }
    for (size_t k = 0; k < REFINE_SLICE && l->rf_next < l->ncl && id == NULL; k++) {
        const lclient *c = &l->cl[l->rf_next++];
        if (!refine_wanted(c))
            continue;
        m = c->nev;
        id = lg_xstrdup(c->id);
        o = malloc(m * sizeof *o);
        t = malloc(m * sizeof *t);
        if (id == NULL || o == NULL || t == NULL) {
            free(id);
            free(o);
            free(t);
            pthread_rwlock_unlock(&l->lock);
            return 0; /* out of memory: try again later */
        }
        for (size_t i = 0; i < m; i++) {
            o[i] = t[i] = (spend_term){l->evs[c->ev[i].ev].se, c->ev[i].count};
            spend_event_ref(l->sp, o[i].ev); /* a withdrawn charge could drop it meanwhile */
        }
        eps = c->eps;
        delta = c->delta;
        rel = c->rel;
        l->rf_pass_found++;
    }
    if (id == NULL && l->rf_next >= l->ncl) { /* the pass is over */
        l->rf_next = 0;
        if (l->rf_pass_found == 0)
            l->rf_idle_version = l->rf_pass_version;
    }
    pthread_rwlock_unlock(&l->lock);
    if (id == NULL)
        return 1;
    spend_result r;
    atomic_store(&l->refining, 1);
    __atomic_store_n(&l->rf_yield, 0, __ATOMIC_RELEASE);
    int busy = 0;
    if (lg_mono_ns() - __atomic_load_n(&l->rf_last_change, __ATOMIC_ACQUIRE) < REFINE_QUIET_NS)
        busy = 1; /* a change started while the terms were copied */
    else
        spend_refine(l->sp, eps, delta, (dp_relation)rel, t, m, &l->rf_yield, &r);
    if (__atomic_load_n(&l->rf_yield, __ATOMIC_ACQUIRE) || __atomic_load_n(stop, __ATOMIC_ACQUIRE))
        busy = 1; /* abandoned: a change (or the close) stopped it */
    if (busy) {
        __atomic_fetch_add(&l->refine_abandoned, 1, __ATOMIC_RELAXED);
        if (l->rf_next > 0)
            l->rf_next--; /* this client again, at the next quiet moment */
    } else {
        pthread_rwlock_wrlock(&l->lock);
        long pos = lg_find_client(l, id);
        lclient *c = pos >= 0 ? &l->cl[pos] : NULL;
        if (c && refine_same(l, c, eps, delta, rel, o, m)) {
            c->refined = c->version + 1;
            if (r.accountant == DP_ACCT_PLD && r.spent < c->spent) {
                lg_counters(l, c, -1);
                c->spent = r.spent;
                c->sacct = DP_ACCT_PLD;
                lg_counters(l, c, +1);
                l->refines++;
            }
        } else {
            l->refine_stale++;
        }
        pthread_rwlock_unlock(&l->lock);
    }
    atomic_store(&l->refining, 0);
    for (size_t i = 0; i < m; i++)
        spend_event_put(l->sp, o[i].ev);
    free(id);
    free(o);
    free(t);
    return !busy;
}

/* ---- end of background refinement ---------------------------------------------------------- */

pthread_mutex_t lg_sort_mu = PTHREAD_MUTEX_INITIALIZER; /* qsort has no context argument */

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
                view_of(&l->cl[pos], &out[(*n)++]);
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
        view_of(&l->cl[idx[i]], &out[(*n)++]);
    *total = m;
    free(idx);
    *version = lg_view_tag(l);
    pthread_rwlock_unlock(&l->lock);
    return DPB_OK;
}
