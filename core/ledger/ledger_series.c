/*
 * ledger_series.c - layer 4: time in the ledger: the records' clock, the rounds' times and
 * the ledger-wide series over time (ledger.h, "the ledger-wide series"), kept in fixed rings
 * as records are applied, read by ledger_get_series, written into and read from the
 * snapshot (ledger_snapfmt.c calls lg_series_write / lg_series_read). Calls only ledger_int.h's
 * byte helpers and ledger.h's names: the bottom of the state layer.
 *
 * A record's time is max(the ledger's clock, the time of the record before it) in ms since
 * the Unix epoch: monotone non-decreasing in seq order. Replicas sharing a PostgreSQL log
 * each catch up with the records before appending, so a record's time is the clock of the
 * replica that wrote it, never before its predecessor's: one replica's clock running ahead
 * holds the others' times at its own until their clocks pass it (docs/LEDGER.md, "Time").
 */
#include "ledger_mem.h"

const uint64_t LEDGER_SERIES_WIDTH_MS[LEDGER_NRES] = {60000u, 3600000u, 86400000u};
const uint32_t LEDGER_SERIES_KEEP[LEDGER_NRES] = {1440u, 8784u, 3660u};

const char *ledger_resolution_name(ledger_resolution r)
{
    static const char *const names[] = {"minute", "hour", "day"};
    return (unsigned)r < LEDGER_NRES ? names[r] : "unknown";
}

int ledger_resolution_parse(const char *s, ledger_resolution *r)
{
    for (int i = 0; i < LEDGER_NRES; i++)
        if (strcmp(s, ledger_resolution_name((ledger_resolution)i)) == 0) {
            *r = (ledger_resolution)i;
            return 0;
        }
    return -1;
}

size_t ledger_series_bytes(void)
{
    size_t n = 0;
    for (int r = 0; r < LEDGER_NRES; r++)
        n += LEDGER_SERIES_KEEP[r] * sizeof(ledger_point);
    return n;
}

int lg_series_init(ledger *l)
{
    for (int r = 0; r < LEDGER_NRES; r++) {
        l->series[r].b = calloc(LEDGER_SERIES_KEEP[r], sizeof *l->series[r].b);
        if (l->series[r].b == NULL)
            return -1;
    }
    return 0;
}

void lg_series_free(ledger *l)
{
    for (int r = 0; r < LEDGER_NRES; r++) {
        free(l->series[r].b);
        l->series[r].b = NULL;
    }
}

uint64_t lg_clock_ms(const ledger *l)
{
    if (l->clock_ms)
        return l->clock_ms(l->clock_ctx);
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec < 0 ? 0 : (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

uint64_t lg_next_time(const ledger *l)
{
    uint64_t now = lg_clock_ms(l);
    if (now == 0) /* 0 means "unknown": the epoch's first ms is taken as the next one */
        now = 1;
    return now > l->last_time ? now : l->last_time;
}

static ledger_point *slot(lring *g, int r, uint64_t k)
{
    return &g->b[k % LEDGER_SERIES_KEEP[r]];
}

/* The oldest bucket ring r holds. */
static uint64_t oldest(const lring *g, int r)
{
    uint64_t keep = LEDGER_SERIES_KEEP[r];
    uint64_t lo = g->cur + 1 >= keep ? g->cur + 1 - keep : 0;
    return lo > g->first ? lo : g->first;
}

int lg_series_rolls(const ledger *l, uint64_t t)
{
    const lring *g = &l->series[LEDGER_MINUTE]; /* every boundary is a minute's */
    return t != 0 && g->any && t / LEDGER_SERIES_WIDTH_MS[LEDGER_MINUTE] > g->cur;
}

void lg_series_advance(ledger *l, uint64_t t)
{
    if (t == 0)
        return;
    for (int r = 0; r < LEDGER_NRES; r++) {
        lring *g = &l->series[r];
        uint64_t k = t / LEDGER_SERIES_WIDTH_MS[r];
        if (!g->any) {
            g->any = 1;
            g->first = g->cur = k;
            memset(slot(g, r, k), 0, sizeof(ledger_point));
            continue;
        }
        if (k <= g->cur) /* times are monotone: an older one is counted in the newest bucket */
            continue;
        /* the closing bucket's statuses are those at its end, carried through the empty
         * buckets up to the new one (whose own are the ledger's, live, until it closes) */
        memcpy(slot(g, r, g->cur)->by_status, l->by_status, sizeof l->by_status);
        uint64_t from = g->cur + 1, keep = LEDGER_SERIES_KEEP[r];
        if (k - from >= keep)
            from = k - keep + 1;
        for (uint64_t j = from; j <= k; j++) {
            ledger_point *p = slot(g, r, j);
            memset(p, 0, sizeof *p);
            memcpy(p->by_status, l->by_status, sizeof l->by_status);
        }
        g->cur = k;
    }
}

/* Add (sign +1) or take back (-1) counts at time t in every ring that still holds its bucket. */
static void add_at(ledger *l, uint64_t t, int sign, uint64_t rounds, uint64_t charges, double eps,
                   const uint64_t *refusals)
{
    if (t == 0)
        return;
    for (int r = 0; r < LEDGER_NRES; r++) {
        lring *g = &l->series[r];
        if (!g->any)
            continue;
        uint64_t k = t / LEDGER_SERIES_WIDTH_MS[r];
        if (k > g->cur)
            continue; /* not advanced to (cannot happen: advance comes first) */
        if (k < oldest(g, r))
            continue; /* that bucket is no longer kept */
        if (sign > 0 && k < g->cur)
            k = g->cur;
        ledger_point *p = slot(g, r, k);
        p->rounds += (uint64_t)sign * rounds;
        p->charges += (uint64_t)sign * charges;
        p->epsilon_spent += sign * eps;
        if (sign < 0 && p->epsilon_spent < 0.0)
            p->epsilon_spent = 0.0; /* a sum taken back in another order: rounding only */
        for (int i = 0; refusals && i < LEDGER_NREASONS; i++)
            p->refusals[i] += (uint64_t)sign * refusals[i];
    }
}

/* The increase a charge of outcome o made (a finite after - before), else 0. */
static double increase(const lout *o)
{
    double d = o->after - o->before;
    return isfinite(d) && d > 0.0 ? d : 0.0;
}

void lg_series_round(ledger *l, const lrnd *r, int sign)
{
    if (l->series_mute || r->time_ms == 0)
        return;
    uint64_t refusals[LEDGER_NREASONS] = {0}, charges = 0;
    double eps = 0.0;
    for (uint32_t i = 0; r->out && i < r->n; i++) {
        const lout *o = &r->out[i];
        if (!o->admitted) {
            if (o->reason < LEDGER_NREASONS)
                refusals[o->reason]++;
        } else if (!r->phase) {
            charges++;
            eps += increase(o);
        }
    }
    add_at(l, r->time_ms, sign, 1, charges, eps, refusals);
}

void lg_series_commit(ledger *l, const lrnd *r, int sign)
{
    if (l->series_mute || r->state_time_ms == 0 || r->state != LEDGER_COMMITTED)
        return;
    uint64_t charges = 0;
    double eps = 0.0;
    for (uint32_t i = 0; r->out && i < r->n; i++)
        if (r->out[i].admitted && r->out[i].reported) {
            charges++;
            eps += increase(&r->out[i]);
        }
    add_at(l, r->state_time_ms, sign, 0, charges, eps, NULL);
}

/* ---- the series as ledger.h shows it (a lock held) --------------------------------------------
 */

void lg_series_get(const ledger *l, ledger_resolution res, uint64_t from_ms, uint64_t to_ms,
                   ledger_series *out)
{
    out->resolution = res;
    out->last_time_ms = l->last_time;
    for (int r = 0; r < LEDGER_NRES; r++) {
        const lring *g = &l->series[r];
        if (!g->any)
            continue;
        out->kept_from_ms[r] = oldest(g, r) * LEDGER_SERIES_WIDTH_MS[r];
        out->kept_to_ms[r] = (g->cur + 1) * LEDGER_SERIES_WIDTH_MS[r];
    }
    const lring *g = &l->series[res];
    uint64_t w = LEDGER_SERIES_WIDTH_MS[res];
    if (!g->any || to_ms <= from_ms)
        return;
    uint64_t lo = oldest(g, res), hi = g->cur; /* buckets [lo, hi] */
    if (from_ms / w > lo)
        lo = from_ms / w;
    if (to_ms != UINT64_MAX && (to_ms - 1) / w < hi)
        hi = (to_ms - 1) / w;
    if (lo > hi || out->points == NULL)
        return;
    for (uint64_t k = lo; k <= hi; k++) {
        ledger_point *p = &out->points[out->n++];
        *p = g->b[k % LEDGER_SERIES_KEEP[res]];
        p->start_ms = k * w;
        if (k == g->cur) /* the newest bucket's end is now */
            memcpy(p->by_status, l->by_status, sizeof l->by_status);
    }
    out->from_ms = lo * w;
    out->to_ms = (hi + 1) * w;
}

/* ---- the snapshot's part (format 5) -----------------------------------------------------------
 * u8 resolutions, then each: u64 width_ms, u32 keep, u8 any, u64 first, u64 cur, u32 count and
 * the count buckets held, oldest first, each a u8 of flags (1: counts follow, u64 rounds,
 * u64 charges, f64 epsilon_spent, u8 n + n x (u8 reason, u64 refusals) for the reasons with
 * some; 2: statuses follow, u8 n + n x u64, by ledger_status; else the statuses are the
 * previous bucket's). An idle bucket is 1 byte, a busy one about 26 + 9 per reason. */

static int point_idle(const ledger_point *p)
{
    int idle = p->rounds == 0 && p->charges == 0 && p->epsilon_spent == 0.0;
    for (int i = 0; idle && i < LEDGER_NREASONS; i++)
        idle = p->refusals[i] == 0;
    return idle;
}

void lg_series_write(const ledger *l, bw *w)
{
    bw_u8(w, LEDGER_NRES);
    for (int r = 0; r < LEDGER_NRES; r++) {
        const lring *g = &l->series[r];
        uint64_t lo = g->any ? oldest(g, r) : 0;
        bw_u64(w, LEDGER_SERIES_WIDTH_MS[r]);
        bw_u32(w, LEDGER_SERIES_KEEP[r]);
        bw_u8(w, (unsigned)g->any);
        bw_u64(w, g->first);
        bw_u64(w, g->cur);
        bw_u32(w, g->any ? (uint32_t)(g->cur - lo + 1) : 0);
        const uint64_t *prev = NULL;
        for (uint64_t k = lo; g->any && k <= g->cur; k++) {
            const ledger_point *p = &g->b[k % LEDGER_SERIES_KEEP[r]];
            /* the newest bucket's statuses are the ledger's now */
            const uint64_t *st = k == g->cur ? l->by_status : p->by_status;
            int counts = !point_idle(p);
            int statuses = prev == NULL || memcmp(prev, st, sizeof l->by_status) != 0;
            bw_u8(w, (unsigned)(counts | statuses << 1));
            if (counts) {
                bw_u64(w, p->rounds);
                bw_u64(w, p->charges);
                bw_f64(w, p->epsilon_spent);
                unsigned nz = 0;
                for (int i = 0; i < LEDGER_NREASONS; i++)
                    nz += p->refusals[i] != 0;
                bw_u8(w, nz);
                for (int i = 0; i < LEDGER_NREASONS; i++)
                    if (p->refusals[i]) {
                        bw_u8(w, (unsigned)i);
                        bw_u64(w, p->refusals[i]);
                    }
            }
            if (statuses) {
                bw_u8(w, LEDGER_NSTATUS);
                for (int i = 0; i < LEDGER_NSTATUS; i++)
                    bw_u64(w, st[i]);
            }
            prev = st;
        }
    }
}

/* n counts into a[0..cap) (those past cap dropped, those missing 0). */
static void read_counts(br *rd, uint64_t *a, unsigned cap)
{
    unsigned n = br_u8(rd);
    for (unsigned i = 0; i < n && !rd->bad; i++) {
        uint64_t v = br_u64(rd);
        if (i < cap)
            a[i] = v;
    }
}

int lg_series_read(ledger *l, br *rd)
{
    unsigned nres = br_u8(rd);
    for (unsigned r = 0; r < nres && !rd->bad; r++) {
        uint64_t width = br_u64(rd);
        uint32_t keep = br_u32(rd);
        unsigned any = br_u8(rd);
        uint64_t first = br_u64(rd), cur = br_u64(rd);
        uint32_t count = br_u32(rd);
        /* a bucket's end must be a time (cur + 1 buckets of width fit in 64 bits) */
        if (rd->bad || any > 1 || first > cur || (any && (count == 0 || count > keep)) ||
            (!any && count) || cur - first + 1 < count || width == 0 ||
            cur >= UINT64_MAX / width - 1)
            return -1;
        /* a ring of another width or resolution (another version) is read and left out */
        int use = r < LEDGER_NRES && width == LEDGER_SERIES_WIDTH_MS[r] && any;
        lring *g = use ? &l->series[r] : NULL;
        uint64_t prev[LEDGER_NSTATUS] = {0};
        for (uint32_t i = 0; i < count && !rd->bad; i++) {
            uint64_t k = cur - count + 1 + i;
            ledger_point p = {0};
            unsigned flags = br_u8(rd);
            if (flags > 3)
                return -1;
            if (flags & 1) {
                p.rounds = br_u64(rd);
                p.charges = br_u64(rd);
                p.epsilon_spent = br_f64(rd);
                unsigned nz = br_u8(rd);
                for (unsigned j = 0; j < nz && !rd->bad; j++) {
                    unsigned reason = br_u8(rd);
                    uint64_t v = br_u64(rd);
                    if (reason < LEDGER_NREASONS) /* a reason of a newer version: left out */
                        p.refusals[reason] = v;
                }
                if (!(p.epsilon_spent >= 0.0))
                    return -1;
            }
            if (flags & 2)
                read_counts(rd, prev, LEDGER_NSTATUS);
            memcpy(p.by_status, prev, sizeof prev);
            if (g && cur - k < LEDGER_SERIES_KEEP[r]) /* a smaller ring keeps the newest */
                g->b[k % LEDGER_SERIES_KEEP[r]] = p;
        }
        if (g) {
            g->any = 1;
            g->cur = cur;
            uint64_t lo = cur - count + 1;
            g->first = first > lo ? first : lo;
        }
    }
    return rd->bad ? -1 : 0;
}

/* ---- reading --------------------------------------------------------------------------------- */

void ledger_series_free(ledger_series *s)
{
    free(s->points);
    memset(s, 0, sizeof *s);
}
