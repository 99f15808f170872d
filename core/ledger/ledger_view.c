/*
 * ledger_view.c - layer 4 (top): the state as ledger.h shows it: a client's view, a round's
 * answer with its outcomes' guarantees, labels and the lists' ETag. Reads only; calls
 * ledger_spendof.c, ledger_index.c and ledger_names.c.
 */
#include "ledger_mem.h"

void lg_client_view(const ledger *l, const lclient *c, ledger_client *v)
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
    v->spent_accountant = lg_spend_accountant(l, c);
    if (v->status == LEDGER_STUCK) {
        const lrnd *r = &l->rd[c->stuck_rd - 1];
        v->stuck_since = r->seq;
        snprintf(v->stuck_round, sizeof v->stuck_round, "%s", r->id);
    }
}

/* The accounting mode and, for an admitted charge, the guarantee of an outcome. */
void lg_outcome_guarantee(const ledger *l, ledger_outcome *o, int creating)
{
    long pos = lg_find_client(l, o->id);
    o->mode = pos >= 0 ? l->cl[pos].mode : creating && l->opt.default_budget ? LEDGER_RDP : -1;
    double eps = pos >= 0 ? l->cl[pos].eps : l->opt.default_epsilon;
    o->guarantee = o->mode < 0 ? LEDGER_NO_GUARANTEE
                               : ledger_guarantee_of((ledger_mode)o->mode, o->spent_after, eps, 0);
}

void lg_round_view(const ledger *l, const lrnd *r, ledger_round_res *res)
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
    snprintf(res->owner, sizeof res->owner, "%s", r->owner ? r->owner : "");
    res->state_seq = r->state_seq;
    uint32_t ev = r->ev[0] != LEV_NONE ? r->ev[0] : r->ev[1];
    if (r->phase && ev != LEV_NONE && ev < l->nevs && (res->event = malloc(l->evs[ev].nbytes))) {
        memcpy(res->event, l->evs[ev].bytes, l->evs[ev].nbytes);
        res->event_len = l->evs[ev].nbytes;
    }
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
        /* only a commit reports (its flags are set before its clients are charged, which a
         * reader let in during the charges may see under the state still reserved) */
        o->reported = r->out[i].reported && r->state == LEDGER_COMMITTED;
        lg_outcome_guarantee(l, o, 0);
    }
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

uint64_t lg_view_tag(const ledger *l)
{
    uint64_t v[3] = {l->version, l->refines, l->boot};
    return fnv64(v, sizeof v, 14695981039346656037ULL);
}

void ledger_round_res_free(ledger_round_res *r)
{
    free(r->outcomes);
    r->outcomes = NULL;
    free(r->event);
    r->event = NULL;
}
