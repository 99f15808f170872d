/*
 * ledger_index.c - layer 4: the ledger's indexes (open addressing over positions in its
 * arrays), the lookups of clients, rounds and named events, and the event vocabulary
 * (interning, dropping scratch events). Calls spend.h (event references) and
 * ledger_names.c only.
 */
#include "ledger_mem.h"

pthread_mutex_t lg_sort_mu = PTHREAD_MUTEX_INITIALIZER; /* qsort has no context argument */

char *lg_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Grow an array (never p = realloc(p)). */
int lg_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (np == NULL)
        return -1;
    *p = np;
    *cap = nc;
    return 0;
}

int lg_index_init(lindex *x, size_t cap)
{
    x->slot = malloc(cap * sizeof *x->slot);
    if (x->slot == NULL)
        return -1;
    memset(x->slot, 0xff, cap * sizeof *x->slot);
    x->cap = cap;
    return 0;
}

uint64_t lg_str_hash(const char *s)
{
    return fnv64(s, strlen(s), 14695981039346656037ULL);
}

/* Find: returns the slot position for key (hash h) using eq(pos) to compare. */
static size_t index_find(const ledger *l, const lindex *x, uint64_t h, lindex_eq eq,
                         const void *key)
{
    size_t m = x->cap - 1, i = (size_t)h & m;
    while (x->slot[i] != UINT32_MAX && !eq(l, x->slot[i], key))
        i = (i + 1) & m;
    return i;
}

int lg_index_insert(ledger *l, lindex *x, size_t count,
                    uint64_t (*hash_of)(const ledger *, uint32_t), uint32_t pos)
{
    if ((count + 1) * 2 > x->cap) {
        lindex nx;
        if (lg_index_init(&nx, x->cap * 2) != 0)
            return -1;
        for (size_t i = 0; i < x->cap; i++)
            if (x->slot[i] != UINT32_MAX) {
                size_t j = (size_t)hash_of(l, x->slot[i]) & (nx.cap - 1);
                while (nx.slot[j] != UINT32_MAX)
                    j = (j + 1) & (nx.cap - 1);
                nx.slot[j] = x->slot[i];
            }
        free(x->slot);
        *x = nx;
    }
    size_t j = (size_t)hash_of(l, pos) & (x->cap - 1);
    while (x->slot[j] != UINT32_MAX)
        j = (j + 1) & (x->cap - 1);
    x->slot[j] = pos;
    return 0;
}

/* Remove position pos (present, hashing to h) from x: linear probing with backward shift, so
 * every other key stays reachable from its home slot. */
void lg_index_delete(lindex *x, uint64_t h, uint32_t pos,
                     uint64_t (*hash_of)(const ledger *, uint32_t), const ledger *l)
{
    size_t m = x->cap - 1, i = (size_t)h & m;
    while (x->slot[i] != pos) {
        if (x->slot[i] == UINT32_MAX)
            return;
        i = (i + 1) & m;
    }
    x->slot[i] = UINT32_MAX;
    for (size_t j = (i + 1) & m; x->slot[j] != UINT32_MAX; j = (j + 1) & m) {
        size_t k = (size_t)hash_of(l, x->slot[j]) & m;
        /* the entry at j may move to the hole at i unless its home k lies in (i, j] */
        int stays = i <= j ? (k > i && k <= j) : (k > i || k <= j);
        if (!stays) {
            x->slot[i] = x->slot[j];
            x->slot[j] = UINT32_MAX;
            i = j;
        }
    }
}

static int cl_eq(const ledger *l, uint32_t pos, const void *key)
{
    return strcmp(l->cl[pos].id, key) == 0;
}
uint64_t lg_cl_hash(const ledger *l, uint32_t pos)
{
    return lg_str_hash(l->cl[pos].id);
}
static int rd_eq(const ledger *l, uint32_t pos, const void *key)
{
    return strcmp(l->rd[pos].id, key) == 0;
}
uint64_t lg_rd_hash(const ledger *l, uint32_t pos)
{
    return lg_str_hash(l->rd[pos].id);
}

static int lg_ev_eq(const ledger *l, uint32_t pos, const void *key)
{
    const evkey *k = key;
    const lev *e = &l->evs[pos];
    return e->rel == k->rel && e->nbytes == k->n && memcmp(e->bytes, k->bytes, k->n) == 0;
}
static uint64_t ev_hash(const ledger *l, uint32_t pos)
{
    return l->evs[pos].hash;
}

static int nm_eq(const ledger *l, uint32_t pos, const void *key)
{
    return strcmp(l->nm[pos].name, key) == 0;
}
uint64_t lg_nm_hash(const ledger *l, uint32_t pos)
{
    return lg_str_hash(l->nm[pos].name);
}

long lg_find_name(const ledger *l, const char *name)
{
    size_t i = index_find(l, &l->nm_index, lg_str_hash(name), nm_eq, name);
    return l->nm_index.slot[i] == UINT32_MAX ? -1 : (long)l->nm_index.slot[i];
}

long lg_find_client(const ledger *l, const char *id)
{
    size_t i = index_find(l, &l->cl_index, lg_str_hash(id), cl_eq, id);
    return l->cl_index.slot[i] == UINT32_MAX ? -1 : (long)l->cl_index.slot[i];
}

long lg_client_at(const ledger *l, long hint, const char *id)
{
    if (hint >= 0 && (size_t)hint < l->ncl &&
        (l->cl[hint].id == id || strcmp(l->cl[hint].id, id) == 0))
        return hint;
    return lg_find_client(l, id);
}

long lg_find_round(const ledger *l, const char *id)
{
    size_t i = index_find(l, &l->rd_index, lg_str_hash(id), rd_eq, id);
    return l->rd_index.slot[i] == UINT32_MAX ? -1 : (long)l->rd_index.slot[i];
}

static int ow_eq(const ledger *l, uint32_t pos, const void *key)
{
    return strcmp(l->ow[pos].name, key) == 0;
}
static uint64_t ow_hash(const ledger *l, uint32_t pos)
{
    return lg_str_hash(l->ow[pos].name);
}

long lg_find_owner(const ledger *l, const char *name)
{
    if (l->ow_index.slot == NULL)
        return -1;
    size_t i = index_find(l, &l->ow_index, lg_str_hash(name), ow_eq, name);
    return l->ow_index.slot[i] == UINT32_MAX ? -1 : (long)l->ow_index.slot[i];
}

long lg_intern_owner(ledger *l, const char *name)
{
    long pos = lg_find_owner(l, name);
    if (pos >= 0)
        return pos;
    if ((l->ow_index.slot == NULL && lg_index_init(&l->ow_index, 16) != 0) ||
        lg_grow((void **)&l->ow, &l->cap_ow, l->now + 1, sizeof *l->ow) != 0)
        return -1;
    lowner *o = &l->ow[l->now];
    o->held = 0;
    if ((o->name = lg_xstrdup(name)) == NULL)
        return -1;
    if (lg_index_insert(l, &l->ow_index, l->now, ow_hash, (uint32_t)l->now) != 0) {
        free(o->name);
        return -1;
    }
    return (long)l->now++;
}

uint64_t lg_owner_held(const ledger *l, const char *owner)
{
    long op = owner ? lg_find_owner(l, owner) : -1;
    return op >= 0 ? l->ow[op].held : 0;
}

void lg_owner_count(ledger *l, const lrnd *r, int sign)
{
    long op = r->owner ? lg_find_owner(l, r->owner) : -1;
    if (op < 0)
        return;
    if (sign > 0)
        l->ow[op].held += r->admitted;
    else
        l->ow[op].held -= l->ow[op].held < r->admitted ? l->ow[op].held : r->admitted;
}

void lg_owner_recount(ledger *l)
{
    for (size_t i = 0; i < l->now; i++)
        l->ow[i].held = 0;
    l->nreserved = 0;
    for (size_t i = 0; i < l->nrd; i++)
        if (l->rd[i].phase && l->rd[i].state == LEDGER_RESERVED) {
            lg_owner_count(l, &l->rd[i], +1);
            l->nreserved++;
        }
}

int lg_event_known(const ledger *l, const dp_event *ev)
{
    unsigned char *b = NULL;
    size_t n = 0, cap = 0;
    int known = dp_event_encode(ev, &b, &n, &cap) == DPB_OK &&
                (lg_find_event(l, b, n, DP_REL_ADD_OR_REMOVE) != LEV_NONE ||
                 lg_find_event(l, b, n, DP_REL_REPLACE) != LEV_NONE);
    free(b);
    return known;
}

/* The event's index for relation rel if interned, else UINT32_MAX (LEV_NONE). */
uint32_t lg_find_event(const ledger *l, const unsigned char *bytes, size_t n, int rel)
{
    evkey k = {bytes, n, (dp_relation)rel};
    uint64_t h = fnv64(bytes, n, 14695981039346656037ULL ^ (uint64_t)rel);
    size_t s = index_find(l, &l->ev_index, h, lg_ev_eq, &k);
    return l->ev_index.slot[s];
}

/* Intern (ev, rel); *idx receives its index and *fresh whether it is new (to be logged).
 * bytes are borrowed; the spend engine keeps a copy, and nothing is computed until the
 * event's first use (lg_ev_se). */
dpb_status lg_intern(ledger *l, const unsigned char *bytes, size_t n, dp_relation rel,
                     uint32_t *idx, int *fresh)
{
    uint64_t h = fnv64(bytes, n, 14695981039346656037ULL ^ (uint64_t)rel);
    uint32_t have = lg_find_event(l, bytes, n, (int)rel);
    *fresh = 0;
    if (have != LEV_NONE) {
        *idx = have;
        return DPB_OK;
    }
    if (lg_grow((void **)&l->evs, &l->cap_evs, l->nevs + 1, sizeof *l->evs) != 0)
        return DPB_ENOMEM;
    lev *e = &l->evs[l->nevs];
    memset(e, 0, sizeof *e);
    dpb_status st = spend_event_get_lazy(l->sp, bytes, n, rel, &e->se);
    if (st != DPB_OK)
        return st;
    e->bytes = spend_event_bytes(e->se, &e->nbytes);
    e->hash = h;
    e->rel = rel;
    *idx = (uint32_t)l->nevs;
    if (lg_index_insert(l, &l->ev_index, l->nevs, ev_hash, (uint32_t)l->nevs) != 0) {
        spend_event_put(l->sp, e->se);
        return DPB_ENOMEM;
    }
    l->nevs++;
    *fresh = 1;
    return DPB_OK;
}

spend_event *lg_ev_se(const ledger *l, uint32_t i)
{
    spend_event *se = l->evs[i].se;
    spend_event_ready(l->sp, se); /* out of memory: it reads as not covered (refused) */
    return se;
}

int lg_ev_kind(const ledger *l, uint32_t i)
{
    return spend_event_class(lg_ev_se(l, i))->kind;
}

/* Drop the newest interned event (not referenced by any client or round). */
void lg_drop_last_event(ledger *l)
{
    lev *e = &l->evs[l->nevs - 1];
    lg_index_delete(&l->ev_index, e->hash, (uint32_t)(l->nevs - 1), ev_hash, l);
    spend_event_put(l->sp, e->se);
    l->nevs--;
}

/* Drop the events interned by a round that are not in the log (a dry run, a refused or
 * failed round): their indices must stay free for the next logged event. */
void lg_drop_unlogged_events(ledger *l)
{
    while (l->nevs > l->nevs_logged)
        lg_drop_last_event(l);
}

void lg_client_release(lclient *c)
{
    free(c->id);
    free(c->labels);
    free(c->ev);
    free(c->rv);
    free(c->hist);
}

/* Free a round's outcomes out[0..n) (NULL: none) with the ids they own. */
void lg_outcomes_free(lout *out, uint32_t n)
{
    for (uint32_t i = 0; out && i < n; i++)
        if (out[i].owned)
            free((char *)out[i].id);
    free(out);
}

/* Small lists are scanned (no allocation); past this many comparisons a hash is cheaper. */
/* ---- lg_idtab: an open-addressing set of ids held in an array (ledger_mem.h) ---- */

static const char *idtab_id(const lg_idtab *t, uint32_t i)
{
    return *(const char *const *)(t->base + (size_t)i * t->stride);
}

/* The slot of id: its entry's, or the empty one where it would go. */
static size_t idtab_slot(const lg_idtab *t, const char *id)
{
    size_t h = (size_t)lg_str_hash(id) & (t->cap - 1);
    while (t->slot[h] != UINT32_MAX && strcmp(idtab_id(t, t->slot[h]), id) != 0)
        h = (h + 1) & (t->cap - 1);
    return h;
}

int lg_idtab_init(lg_idtab *t, const void *first_id, size_t stride, size_t n)
{
    t->base = first_id;
    t->stride = stride;
    t->cap = 16;
    while (t->cap < 2 * n)
        t->cap *= 2;
    t->slot = malloc(t->cap * sizeof *t->slot);
    if (t->slot == NULL)
        return -1;
    memset(t->slot, 0xff, t->cap * sizeof *t->slot);
    return 0;
}

uint32_t lg_idtab_add(lg_idtab *t, uint32_t i)
{
    size_t h = idtab_slot(t, idtab_id(t, i));
    if (t->slot[h] != UINT32_MAX)
        return t->slot[h];
    t->slot[h] = i;
    return UINT32_MAX;
}

uint32_t lg_idtab_find(const lg_idtab *t, const char *id)
{
    return t->slot[idtab_slot(t, id)];
}

void lg_idtab_free(lg_idtab *t)
{
    free(t->slot);
    t->slot = NULL;
}

#define COUNT_SCAN_MAX 256

int lg_count_positions(const lcount *a, uint32_t na, const lcount *b, uint32_t nb, uint32_t *pos)
{
    if ((uint64_t)na * nb <= COUNT_SCAN_MAX) {
        for (uint32_t i = 0; i < nb; i++) {
            pos[i] = UINT32_MAX;
            for (uint32_t k = 0; k < na && pos[i] == UINT32_MAX; k++)
                if (a[k].ev == b[i].ev)
                    pos[i] = k;
        }
        return 0;
    }
    size_t cap = 16;
    while (cap < 2 * (size_t)na)
        cap *= 2;
    uint32_t *slot = malloc(cap * sizeof *slot);
    if (slot == NULL)
        return -1;
    memset(slot, 0xff, cap * sizeof *slot);
    for (uint32_t k = 0; k < na; k++) {
        size_t h = (size_t)(a[k].ev * 0x9E3779B97F4A7C15ULL >> 32) & (cap - 1);
        while (slot[h] != UINT32_MAX)
            h = (h + 1) & (cap - 1);
        slot[h] = k;
    }
    for (uint32_t i = 0; i < nb; i++) {
        size_t h = (size_t)(b[i].ev * 0x9E3779B97F4A7C15ULL >> 32) & (cap - 1);
        while (slot[h] != UINT32_MAX && a[slot[h]].ev != b[i].ev)
            h = (h + 1) & (cap - 1);
        pos[i] = slot[h];
    }
    free(slot);
    return 0;
}

int lg_merge_counts(lcount *a, uint32_t *na, const lcount *b, uint32_t nb)
{
    uint32_t stack[16], *pos = nb <= 16 ? stack : malloc(nb * sizeof *pos);
    if (pos == NULL || lg_count_positions(a, *na, b, nb, pos) != 0) {
        if (pos != stack)
            free(pos);
        return -1;
    }
    uint32_t m = *na;
    for (uint32_t i = 0; i < nb; i++) {
        if (pos[i] != UINT32_MAX) {
            a[pos[i]].count += b[i].count;
            continue;
        }
        a[m++] = b[i];
    }
    *na = m;
    if (pos != stack)
        free(pos);
    return 0;
}
