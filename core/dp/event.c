/* event.c - mechanism description trees. */
#include "event.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

dp_event *dp_event_new(dp_event_kind kind)
{
    dp_event *ev = calloc(1, sizeof *ev);
    if (ev)
        ev->kind = kind;
    return ev;
}

void dp_event_free(dp_event *ev)
{
    if (ev == NULL)
        return;
    switch (ev->kind) {
    case DP_EV_SELF_COMPOSED:
        dp_event_free(ev->u.self.event);
        break;
    case DP_EV_COMPOSED:
        for (size_t i = 0; i < ev->u.composed.n; i++)
            dp_event_free(ev->u.composed.events[i]);
        free(ev->u.composed.events);
        break;
    case DP_EV_POISSON_SAMPLED:
        dp_event_free(ev->u.sampled.event);
        break;
    case DP_EV_PROACTIVE:
        free(ev->u.proactive.sigma);
        free(ev->u.proactive.batch);
        free(ev->u.proactive.rounds);
        break;
    case DP_EV_MIXTURE_GAUSSIANS:
        free(ev->u.mog.c);
        free(ev->u.mog.p);
        break;
    case DP_EV_REPEAT_AND_SELECT:
        dp_event_free(ev->u.rs.event);
        break;
    case DP_EV_SHUFFLED_EPOCH:
    case DP_EV_GAUSSIAN:
    case DP_EV_LAPLACE:
    case DP_EV_EPSILON_DELTA:
    case DP_EV_NO_OP:
    case DP_EV_NON_PRIVATE:
    case DP_EV_PNSGD:
    case DP_EV_SGLD:
    case DP_EV_RANDOMIZED_RESPONSE:
    case DP_EV_DISCRETE_GAUSSIAN:
    case DP_EV_DISCRETE_LAPLACE:
    case DP_EV_EXPONENTIAL:
    case DP_EV_PERMUTE_AND_FLIP:
    case DP_EV_ZCDP:
        break;
    /* ---- kinds 21..28 ---- */
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
        dp_event_free(ev->u.fixed.event);
        break;
    case DP_EV_TREE_AGGREGATION:
        free(ev->u.tree.steps);
        break;
    case DP_EV_TRUNCATED_GAUSSIAN:
        break;
    }
    free(ev);
}

/* Indexed by dp_param (event.h numbers them from DP_PARAM_NONE = 0). */
static const char *const PARAM_NAMES[] = {
    "none",        "noise_multiplier", "rounds", "count", "sampling_probability",
    "noise_scale", "dataset_size",     "c1"};
_Static_assert(sizeof PARAM_NAMES / sizeof PARAM_NAMES[0] == DP_PARAM_C1 + 1,
               "every parameter has a name");

const char *dp_param_name(dp_param p)
{
    return (unsigned)p < sizeof PARAM_NAMES / sizeof PARAM_NAMES[0] ? PARAM_NAMES[p] : "none";
}

/* The children of ev: *n of them, at the array returned (NULL: none). */
static dp_event *const *children(const dp_event *ev, size_t *n)
{
    *n = 1;
    switch (ev->kind) {
    case DP_EV_SELF_COMPOSED:
        return &ev->u.self.event;
    case DP_EV_POISSON_SAMPLED:
        return &ev->u.sampled.event;
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
        return &ev->u.fixed.event;
    case DP_EV_REPEAT_AND_SELECT:
        return &ev->u.rs.event;
    case DP_EV_COMPOSED:
        *n = ev->u.composed.n;
        return ev->u.composed.events;
    default:
        *n = 0;
        return NULL;
    }
}

static void find_unknown(dp_event *ev, dp_event **first, int *n)
{
    if (ev == NULL)
        return;
    if (ev->unknown != DP_PARAM_NONE) {
        if (*first == NULL)
            *first = ev;
        (*n)++;
    }
    size_t k;
    dp_event *const *kids = children(ev, &k);
    for (size_t i = 0; i < k; i++)
        find_unknown(kids[i], first, n);
}

size_t dp_event_nodes(const dp_event *ev)
{
    if (ev == NULL)
        return 0;
    size_t k, total = 1;
    dp_event *const *kids = children(ev, &k);
    for (size_t i = 0; i < k; i++)
        total += dp_event_nodes(kids[i]);
    return total;
}

dp_event *dp_event_find_unknown(dp_event *ev, int *nunknown)
{
    dp_event *first = NULL;
    int n = 0;
    find_unknown(ev, &first, &n);
    if (nunknown)
        *nunknown = n;
    return first;
}

/* ---- binary encoding ------------------------------------------------------------------ */

typedef struct {
    unsigned char **buf;
    size_t *len, *cap;
    int failed;
} wbuf;

static void put(wbuf *w, const void *p, size_t n)
{
    if (w->failed)
        return;
    if (*w->len + n > *w->cap) {
        size_t ncap = *w->cap ? *w->cap : 256;
        while (ncap < *w->len + n)
            ncap *= 2;
        unsigned char *nb = realloc(*w->buf, ncap);
        if (nb == NULL) {
            w->failed = 1;
            return;
        }
        *w->buf = nb;
        *w->cap = ncap;
    }
    memcpy(*w->buf + *w->len, p, n);
    *w->len += n;
}

static void put_u8(wbuf *w, unsigned v)
{
    unsigned char b = (unsigned char)v;
    put(w, &b, 1);
}

static void put_u64(wbuf *w, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    put(w, b, 8);
}

static void put_f64(wbuf *w, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    put_u64(w, v);
}

typedef struct {
    const unsigned char *p;
    size_t len, at;
    int bad;
} rbuf;

static const unsigned char *take(rbuf *r, size_t n)
{
    if (r->bad || r->len - r->at < n) {
        r->bad = 1;
        return NULL;
    }
    const unsigned char *q = r->p + r->at;
    r->at += n;
    return q;
}

static unsigned get_u8(rbuf *r)
{
    const unsigned char *q = take(r, 1);
    return q ? q[0] : 0;
}

static uint64_t get_u64(rbuf *r)
{
    const unsigned char *q = take(r, 8);
    uint64_t v = 0;
    if (q)
        for (int i = 7; i >= 0; i--)
            v = v << 8 | q[i];
    return v;
}

static double get_f64(rbuf *r)
{
    uint64_t v = get_u64(r);
    double d;
    memcpy(&d, &v, 8);
    return d;
}

/* A decoded number must lie where the JSON codec would have let it: the log is checksummed,
 * but a record that passes its checksum with an impossible value is refused, not used. */
static int positive(double x)
{
    return x > 0.0 && isfinite(x);
}

static int nonneg(double x)
{
    return x >= 0.0 && isfinite(x);
}

/* ---- one field list for both directions ------------------------------------------------ */

/* A transfer: writing to w, or (w NULL) reading from r. */
typedef struct {
    wbuf *w;
    rbuf *r;
} xfer;

/* Each moves one field: writing, it reads the field; reading, it stores into the field. */
static void x_f64(xfer *x, double *v)
{
    if (x->w)
        put_f64(x->w, *v);
    else
        *v = get_f64(x->r);
}

static void x_u64(xfer *x, uint64_t *v)
{
    if (x->w)
        put_u64(x->w, *v);
    else
        *v = get_u64(x->r);
}

/* A one-byte field of the given (integer or enum) type. */
#define X_U8(x, field, type)                                                                       \
    ((x)->w ? put_u8((x)->w, (unsigned)(field)) : (void)((field) = (type)get_u8((x)->r)))

static void pnsgd_fields(xfer *x, pnsgd_params *p)
{
    X_U8(x, p->noise, pnsgd_noise);
    X_U8(x, p->mode, pnsgd_noise_mode);
    X_U8(x, p->order, pnsgd_order);
    double *d[] = {&p->noise_level,
                   &p->lipschitz,
                   &p->smoothness,
                   &p->strong_convexity,
                   &p->learning_rate,
                   &p->diameter,
                   &p->lo,
                   &p->hi,
                   &p->c1,
                   &p->c2,
                   &p->alpha};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        x_f64(x, d[i]);
    x_u64(x, &p->n);
    x_u64(x, &p->index);
}

static void sgld_fields(xfer *x, sgld_params *p)
{
    X_U8(x, p->clipped, int);
    X_U8(x, p->sampling, sgld_sampling);
    x_f64(x, &p->clipping_norm);
    x_f64(x, &p->batch_size);
    x_f64(x, &p->dataset_size);
    x_f64(x, &p->step_size);
    x_u64(x, &p->steps);
}

/* The fixed fields of ev's kind, in their stored order (a node's counts, arrays and children
 * follow them: encode_rest, decode_rest). ev is only read when writing. 0 for a kind the
 * format does not know. */
static int fields(xfer *x, dp_event *ev)
{
    switch (ev->kind) {
    case DP_EV_SHUFFLED_EPOCH:
        x_f64(x, &ev->u.shuffled.noise_multiplier);
        x_u64(x, &ev->u.shuffled.rounds);
        break;
    case DP_EV_SELF_COMPOSED:
        x_u64(x, &ev->u.self.count);
        break;
    case DP_EV_COMPOSED:
    case DP_EV_NO_OP:
    case DP_EV_NON_PRIVATE:
        break;
    case DP_EV_GAUSSIAN:
    case DP_EV_LAPLACE:
        x_f64(x, &ev->u.noise.noise_multiplier);
        break;
    case DP_EV_EPSILON_DELTA:
        x_f64(x, &ev->u.epsdelta.epsilon);
        x_f64(x, &ev->u.epsdelta.delta);
        break;
    case DP_EV_POISSON_SAMPLED:
        x_f64(x, &ev->u.sampled.sampling_probability);
        break;
    case DP_EV_PNSGD:
        pnsgd_fields(x, &ev->u.pnsgd);
        break;
    case DP_EV_PROACTIVE:
        x_f64(x, &ev->u.proactive.dataset_size);
        X_U8(x, ev->u.proactive.variant, pro_variant);
        break;
    case DP_EV_SGLD:
        sgld_fields(x, &ev->u.sgld);
        break;
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
        x_u64(x, &ev->u.fixed.population);
        x_u64(x, &ev->u.fixed.sample_size);
        break;
    case DP_EV_TREE_AGGREGATION:
        x_f64(x, &ev->u.tree.noise_multiplier);
        X_U8(x, ev->u.tree.scalar, int);
        break;
    case DP_EV_TRUNCATED_GAUSSIAN:
        x_u64(x, &ev->u.truncated.dataset_size);
        x_f64(x, &ev->u.truncated.sampling_probability);
        x_u64(x, &ev->u.truncated.batch_size);
        x_f64(x, &ev->u.truncated.noise_multiplier);
        break;
    /* ---- issue 16: the mechanism events (kinds 13..20) ---- */
    case DP_EV_RANDOMIZED_RESPONSE:
        x_f64(x, &ev->u.rr.noise_parameter);
        x_u64(x, &ev->u.rr.num_buckets);
        break;
    case DP_EV_DISCRETE_GAUSSIAN:
        x_f64(x, &ev->u.dgauss.sigma);
        x_f64(x, &ev->u.dgauss.sensitivity);
        x_u64(x, &ev->u.dgauss.dimension);
        break;
    case DP_EV_DISCRETE_LAPLACE:
        x_f64(x, &ev->u.dlap.noise_parameter);
        x_u64(x, &ev->u.dlap.sensitivity);
        break;
    case DP_EV_EXPONENTIAL:
    case DP_EV_PERMUTE_AND_FLIP:
        x_f64(x, &ev->u.pure.epsilon);
        break;
    case DP_EV_ZCDP:
        x_f64(x, &ev->u.zcdp.rho);
        x_f64(x, &ev->u.zcdp.xi);
        break;
    case DP_EV_MIXTURE_GAUSSIANS:
        x_f64(x, &ev->u.mog.sigma);
        break;
    case DP_EV_REPEAT_AND_SELECT:
        x_f64(x, &ev->u.rs.mean);
        x_f64(x, &ev->u.rs.shape);
        break;
    default:
        return 0;
    }
    return 1;
}

/* ---- writing ------------------------------------------------------------------------- */

static void encode(wbuf *w, const dp_event *ev);

/* What follows a node's fixed fields: its counts, arrays and children. */
static void encode_rest(wbuf *w, const dp_event *ev)
{
    switch (ev->kind) {
    case DP_EV_SELF_COMPOSED:
        encode(w, ev->u.self.event);
        break;
    case DP_EV_COMPOSED:
        put_u64(w, ev->u.composed.n);
        for (size_t i = 0; i < ev->u.composed.n; i++)
            encode(w, ev->u.composed.events[i]);
        break;
    case DP_EV_POISSON_SAMPLED:
        encode(w, ev->u.sampled.event);
        break;
    case DP_EV_PROACTIVE:
        put_u64(w, (uint64_t)ev->u.proactive.nphases);
        for (int i = 0; i < ev->u.proactive.nphases; i++) {
            put_f64(w, ev->u.proactive.sigma[i]);
            put_f64(w, ev->u.proactive.batch[i]);
            put_f64(w, ev->u.proactive.rounds[i]);
        }
        break;
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
        encode(w, ev->u.fixed.event);
        break;
    case DP_EV_TREE_AGGREGATION:
        put_u64(w, ev->u.tree.nsteps);
        for (size_t i = 0; i < ev->u.tree.nsteps; i++)
            put_u64(w, ev->u.tree.steps[i]);
        break;
    case DP_EV_MIXTURE_GAUSSIANS:
        put_u64(w, ev->u.mog.n);
        for (size_t i = 0; i < ev->u.mog.n; i++) {
            put_f64(w, ev->u.mog.c[i]);
            put_f64(w, ev->u.mog.p[i]);
        }
        break;
    case DP_EV_REPEAT_AND_SELECT:
        encode(w, ev->u.rs.event);
        break;
    default:
        break;
    }
}

static void encode(wbuf *w, const dp_event *ev)
{
    if (ev->unknown != DP_PARAM_NONE) {
        w->failed = 2;
        return;
    }
    put_u8(w, (unsigned)ev->kind);
    xfer x = {w, NULL};
    /* writing only reads the node */
    if (!fields(&x, (dp_event *)ev)) {
        w->failed = 2;
        return;
    }
    encode_rest(w, ev);
}

dpb_status dp_event_encode(const dp_event *ev, unsigned char **buf, size_t *len, size_t *cap)
{
    wbuf w = {buf, len, cap, 0};
    encode(&w, ev);
    return w.failed == 1 ? DPB_ENOMEM : w.failed == 2 ? DPB_EINVAL : DPB_OK;
}

/* ---- reading: what follows the fixed fields, and the bounds each kind must meet -------- */

/* ---- kinds 21..28: fixed-size and truncated sampling, tree aggregation ---- */

/* Largest population and step list a stored event may carry (as the JSON codec admits). */
#define EV_MAX_POPULATION 1000000000ULL
#define EV_MAX_TREE_STEPS 10000

static int kind_sampling(unsigned kind)
{
    return kind >= DP_EV_SAMPLED_WITH_REPLACEMENT && kind <= DP_EV_TRUNCATED_GAUSSIAN;
}

static dp_event *decode_node(rbuf *r, int depth);

static void decode_sampling(rbuf *r, dp_event *ev, int depth)
{
    switch (ev->kind) {
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
        if (ev->u.fixed.population == 0 || ev->u.fixed.population > EV_MAX_POPULATION ||
            ev->u.fixed.sample_size > ev->u.fixed.population)
            r->bad = 1;
        if (!r->bad)
            ev->u.fixed.event = decode_node(r, depth + 1);
        break;
    case DP_EV_TREE_AGGREGATION: {
        uint64_t n = get_u64(r);
        if (r->bad || !positive(ev->u.tree.noise_multiplier) || ev->u.tree.scalar > 1 || n == 0 ||
            n > EV_MAX_TREE_STEPS || (ev->u.tree.scalar && n != 1)) {
            r->bad = 1;
            break;
        }
        ev->u.tree.steps = calloc((size_t)n, sizeof(uint64_t));
        if (ev->u.tree.steps == NULL) {
            r->bad = 1;
            break;
        }
        ev->u.tree.nsteps = (size_t)n;
        for (uint64_t i = 0; i < n; i++)
            if ((ev->u.tree.steps[i] = get_u64(r)) > ((uint64_t)1 << 53))
                r->bad = 1;
        break;
    }
    case DP_EV_TRUNCATED_GAUSSIAN:
        if (ev->u.truncated.dataset_size == 0 || ev->u.truncated.dataset_size > EV_MAX_POPULATION ||
            !(ev->u.truncated.sampling_probability >= 0.0 &&
              ev->u.truncated.sampling_probability <= 1.0) ||
            ev->u.truncated.batch_size > ((uint64_t)1 << 53) ||
            !positive(ev->u.truncated.noise_multiplier))
            r->bad = 1;
        break;
    default:
        r->bad = 1;
        break;
    }
}

/* ---- issue 16: the mechanism events (kinds 13..20), bounds as the JSON codec's ---- */
static void decode_mech(rbuf *r, dp_event *ev, int depth)
{
    switch (ev->kind) {
    case DP_EV_RANDOMIZED_RESPONSE:
        if (!(ev->u.rr.noise_parameter >= 0.0 && ev->u.rr.noise_parameter <= 1.0) ||
            ev->u.rr.num_buckets < 1)
            r->bad = 1;
        break;
    case DP_EV_DISCRETE_GAUSSIAN:
        if (!nonneg(ev->u.dgauss.sigma) || !positive(ev->u.dgauss.sensitivity))
            r->bad = 1;
        break;
    case DP_EV_DISCRETE_LAPLACE:
        if (!nonneg(ev->u.dlap.noise_parameter) || ev->u.dlap.sensitivity > 1000000)
            r->bad = 1;
        break;
    case DP_EV_EXPONENTIAL:
    case DP_EV_PERMUTE_AND_FLIP:
        if (!nonneg(ev->u.pure.epsilon))
            r->bad = 1;
        break;
    case DP_EV_ZCDP:
        if (!nonneg(ev->u.zcdp.rho) || !nonneg(ev->u.zcdp.xi))
            r->bad = 1;
        break;
    case DP_EV_MIXTURE_GAUSSIANS: {
        uint64_t n = get_u64(r);
        if (r->bad || n == 0 || n > 1000 || !nonneg(ev->u.mog.sigma)) {
            r->bad = 1;
            break;
        }
        ev->u.mog.c = calloc((size_t)n, sizeof(double));
        ev->u.mog.p = calloc((size_t)n, sizeof(double));
        if (ev->u.mog.c == NULL || ev->u.mog.p == NULL) {
            r->bad = 1;
            break;
        }
        ev->u.mog.n = (size_t)n;
        for (size_t i = 0; i < ev->u.mog.n; i++) {
            ev->u.mog.c[i] = get_f64(r);
            ev->u.mog.p[i] = get_f64(r);
            if (!nonneg(ev->u.mog.c[i]) || !(ev->u.mog.p[i] >= 0.0 && ev->u.mog.p[i] <= 1.0))
                r->bad = 1;
        }
        break;
    }
    case DP_EV_REPEAT_AND_SELECT:
        if (!(ev->u.rs.mean >= 1.0 && isfinite(ev->u.rs.mean)) || !(ev->u.rs.shape >= 0.0)) {
            r->bad = 1;
            break;
        }
        ev->u.rs.event = decode_node(r, depth + 1);
        break;
    default:
        r->bad = 1;
        break;
    }
}

/* A composition: its count (at most 1000; 0 is the empty composition, the identity) and
 * its events; the events decoded so far are owned by ev even when one fails. */
static void decode_composed(rbuf *r, dp_event *ev, int depth)
{
    uint64_t n = get_u64(r);
    if (r->bad || n > 1000) { /* 0: the empty composition (the identity) */
        r->bad = 1;
        return;
    }
    ev->u.composed.events = calloc(n ? (size_t)n : 1, sizeof(dp_event *));
    if (ev->u.composed.events == NULL) {
        r->bad = 1;
        return;
    }
    for (uint64_t i = 0; i < n && !r->bad; i++)
        ev->u.composed.events[ev->u.composed.n++] = decode_node(r, depth + 1);
}

/* A proactive event's phases (1 to 1000), each sigma and batch positive and its rounds an
 * integer in [1, 1e15]; the arrays are owned by ev even when a value is refused. */
static void decode_proactive(rbuf *r, dp_event *ev)
{
    uint64_t n = get_u64(r);
    if (r->bad || n == 0 || n > 1000 || ev->u.proactive.variant > PRO_PAPER) {
        r->bad = 1;
        return;
    }
    ev->u.proactive.sigma = calloc((size_t)n, sizeof(double));
    ev->u.proactive.batch = calloc((size_t)n, sizeof(double));
    ev->u.proactive.rounds = calloc((size_t)n, sizeof(double));
    if (!ev->u.proactive.sigma || !ev->u.proactive.batch || !ev->u.proactive.rounds) {
        r->bad = 1;
        return;
    }
    ev->u.proactive.nphases = (int)n;
    for (uint64_t i = 0; i < n; i++) {
        ev->u.proactive.sigma[i] = get_f64(r);
        ev->u.proactive.batch[i] = get_f64(r);
        ev->u.proactive.rounds[i] = get_f64(r);
        double rd = ev->u.proactive.rounds[i];
        if (!positive(ev->u.proactive.sigma[i]) || !positive(ev->u.proactive.batch[i]) ||
            !(rd >= 1.0 && rd <= 1e15 && rd == floor(rd)))
            r->bad = 1;
    }
    if (!positive(ev->u.proactive.dataset_size))
        r->bad = 1;
}

/* What follows a node's fixed fields (already read into ev), and the bounds its kind must
 * meet; sets r->bad on a value out of bounds. */
static void decode_rest(rbuf *r, dp_event *ev, int depth)
{
    switch (ev->kind) {
    case DP_EV_SHUFFLED_EPOCH:
        if (!positive(ev->u.shuffled.noise_multiplier))
            r->bad = 1;
        break;
    case DP_EV_SELF_COMPOSED:
        ev->u.self.event = decode_node(r, depth + 1);
        break;
    case DP_EV_COMPOSED:
        decode_composed(r, ev, depth);
        break;
    case DP_EV_GAUSSIAN:
    case DP_EV_LAPLACE:
        if (!(ev->u.noise.noise_multiplier >= 0.0 && isfinite(ev->u.noise.noise_multiplier)))
            r->bad = 1;
        break;
    case DP_EV_EPSILON_DELTA:
        if (!(isfinite(ev->u.epsdelta.epsilon) && ev->u.epsdelta.epsilon >= 0.0 &&
              ev->u.epsdelta.delta >= 0.0 && ev->u.epsdelta.delta <= 1.0))
            r->bad = 1;
        break;
    case DP_EV_POISSON_SAMPLED:
        if (!(ev->u.sampled.sampling_probability >= 0.0 &&
              ev->u.sampled.sampling_probability <= 1.0))
            r->bad = 1;
        ev->u.sampled.event = decode_node(r, depth + 1);
        break;
    case DP_EV_NO_OP:
    case DP_EV_NON_PRIVATE:
        break;
    case DP_EV_PNSGD:
        if (ev->u.pnsgd.noise > PNSGD_LAPLACE || ev->u.pnsgd.mode > PNSGD_NOISE_ONLINE ||
            ev->u.pnsgd.order > PNSGD_SHUFFLED)
            r->bad = 1;
        break;
    case DP_EV_PROACTIVE:
        decode_proactive(r, ev);
        break;
    case DP_EV_SGLD:
        break;
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
    case DP_EV_TREE_AGGREGATION:
    case DP_EV_TRUNCATED_GAUSSIAN:
        decode_sampling(r, ev, depth);
        break;
    default:
        decode_mech(r, ev, depth);
        break;
    }
}

static dp_event *decode_node(rbuf *r, int depth)
{
    if (depth > 64) {
        r->bad = 1;
        return NULL;
    }
    unsigned kind = get_u8(r);
    if (r->bad ||
        ((kind < DP_EV_SHUFFLED_EPOCH || kind > DP_EV_LAST_MECH) && !kind_sampling(kind))) {
        r->bad = 1;
        return NULL;
    }
    dp_event *ev = dp_event_new((dp_event_kind)kind);
    if (ev == NULL) {
        r->bad = 1;
        return NULL;
    }
    xfer x = {NULL, r};
    if (!fields(&x, ev))
        r->bad = 1;
    else
        decode_rest(r, ev, depth);
    if (r->bad) {
        dp_event_free(ev);
        return NULL;
    }
    return ev;
}

dpb_status dp_event_decode(const unsigned char *buf, size_t len, dp_event **out, size_t *used)
{
    rbuf r = {buf, len, 0, 0};
    dp_event *ev = decode_node(&r, 0);
    if (ev == NULL || r.bad) {
        dp_event_free(ev);
        return DPB_ECORRUPT;
    }
    *out = ev;
    if (used)
        *used = r.at;
    return DPB_OK;
}
