/*
 * ledger.h - per-client privacy budgets across federated rounds (docs/ARCHITECTURE.md, "The
 * ledger").
 *
 * A client has an id, a budget (eps, delta), an accounting mode and a neighbouring relation.
 * Its spend is the composition of every event charged to it, expressed as the eps it has
 * used at its budget's delta:
 *   rdp mode (default): the sum of the events' RDP curves (RDP composition, Mironov 2017,
 *     Proposition 1), converted with the improved conversion.
 *     Shuffled epochs (seed 004, a (0, d) guarantee) add to a total-variation part d_tv,
 *     composed with the RDP part by basic composition: eps is taken at delta - d_tv.
 *   pld mode: the rdp accountant's value of the composition while it is within the budget's
 *     eps, else the smaller of it and the PLD accountant's value of the client's whole
 *     multiset of events (tighter; computed only then, before the round's write lock).
 *     With ledger_options.pld_refine a background thread computes the PLD value of the
 *     others too, off every lock, and shows the smaller when the client is unchanged; a
 *     round admits on it when the PLD cache holds it, never on an estimate.
 *   The spend names its accountant (ledger_client.spent_accountant): the compute API with it
 *   on the client's composition gives the same number (core/ledger/spend.c computes both).
 * Both modes are valid when each round's event (its privacy parameters) and each client's
 * participation are fixed independently of earlier outputs; the mechanisms themselves may
 * depend on them (guarantee "fixed_sequence_composition"). Parameters chosen from released
 * outputs need a privacy filter, which neither mode is; the filter modes are
 * (docs/FILTERS.md, guarantee "adaptive_filter"):
 *   rdp_filter: a round is admitted only if, after it, some order a of LEDGER_FILTER_ORDERS
 *     (committed in advance, k = LEDGER_FILTER_NORDERS of them) has its summed RDP r_a with
 *     eps_a(r_a, delta / k) <= eps, eps_a the improved conversion (Canonne, Kamath, Steinke
 *     2020): a Renyi filter at every order (Feldman & Zrnic 2021) with delta split over the
 *     orders by a union bound. The spend is min_a eps_a(r_a, delta / k): the filter's level,
 *     not an (eps, delta) guarantee of the history by itself (that would be an odometer).
 *   gdp_filter: unsampled Gaussians only; a round is admitted only if the summed mu^2 stays
 *     within mu*^2, mu* the mu-GDP meeting (eps, delta) (Smith & Thakurta 2022). The spend is
 *     eps(delta) of sqrt(sum mu^2)-GDP.
 *   Events a filter cannot account are refused (LEDGER_FILTER_UNSUPPORTED); the budget of a
 *   charged filter client cannot change (the filter's target is fixed in advance).
 * An uncertifiable event (unclipped SGLD) makes the spend infinite, for good.
 *
 * Guarantees: a round is admitted for a client only if its spend after the round is at most
 * its budget's eps (compared in the conservative direction: spends are rounded up); a round
 * is charged atomically (all admitted participants or none) under one lock, so concurrent
 * rounds never overspend (linearizable); a round id is idempotent (the same id with the same
 * body hash returns the stored answer; with a different hash it is DPB_ECONFLICT). A charge
 * is acknowledged only once its log record is durable (fdatasync, group commit), and no
 * change is shown before that: reads, replays, dry runs and snapshots see durable state
 * only. A failed write or sync withdraws every change not durable (those of all requests
 * that shared the failed sync) and makes the ledger read-only (DPB_EREADONLY) until
 * restart; it still answers reads, and replays rounds that were durable.
 *
 * Two-phase rounds: a reservation admits as a round does but holds the admitted clients'
 * budget (pending counts in the multiset every admission composes) until it is committed
 * (the reported clients charged, the others released), released, or expired (released by
 * the ledger's background sweep, once a second, with a logged record); all logged. A
 * reservation records its owner (the API key that made it): only it or an admin commits or
 * releases it (ledger_caller), and an operator's cap bounds what one owner holds at once.
 *
 * Durability: through a store (store.h), the only way in and out of the ledger's log and
 * snapshots; recovery = snapshot + replay. The file store (the default) is DIR/wal.log and
 * DIR/snapshot; a shared store (PostgreSQL, ledger_options.ledger_url) is one log for any
 * number of replicas: the ledger catches up with it before every read and write, and a
 * change that lost the race for its seq to another replica is withdrawn and computed again
 * inside the call (never surfaced); an unreachable database answers DPB_EUNAVAILABLE with
 * the change withdrawn, not read-only. Reads then answer DPB_EUNAVAILABLE too (and
 * ledger_summary.unavailable), never a stale state as current.
 * Memory: a client is a small struct plus its distinct events and counts (and reserved
 * ones), and once charged a ring of its last LEDGER_HISTORY rounds (4 bytes each); rounds keep
 * their full per-client answers within a bounded budget of entries (older rounds keep a
 * summary; a reservation keeps its answers until resolved); PLD values are cached within
 * SPEND_CACHE_BYTES (spend.h).
 * Thread-safe: one rwlock (reads shared, writes exclusive).
 */
#ifndef LEDGER_LEDGER_H
#define LEDGER_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "../common/cancel.h"
#include "../common/status.h"
#include "../dp/account.h"
#include "../dp/event.h"
#include "fs.h"
#include "tlog.h"

/* On-disk format version of log records and snapshots. */
/* Snapshot payload format: 2 adds each client's last charged event and honest-status flag,
 * 3 the reservations (clients' reserved events, rounds' phase and state) and the named
 * events; 1 and 2 are still read. */
/* 4 adds each round's owner (the key that reserved it); 1 to 3 are still read. */
/* 5 adds time (ledger_record.h): every log record carries the wall-clock time it was made, and
 * the snapshot its own time, each round's times and the ledger-wide series (ledger_get_series);
 * records and snapshots of 1 to 4 are still read, their times unknown (0). */
/* 6 adds the events' stored profiles (spend.h) after the times (and each EVENT record carries
 * its own, flagged), so that recovery does not compute them again; 7 the stuck clients
 * (LEDGER_STUCK) at the end. 1 to 6 are still read (their clients are not stuck until a round
 * refuses them again). */
#define LEDGER_FORMAT 7
#define LEDGER_ID_MAX 128 /* bytes of a client or round id */
/* The one id rule (client and round ids), checked where an id enters the service and again
 * by every ledger call that stores one: UUIDs, e-mail addresses and "site-3:client-12" fit;
 * '/', '%', spaces, control characters, NUL and non-ASCII bytes never do, so every id is
 * printable ASCII, valid UTF-8 and one URL path segment. (Logs written before the rule keep
 * their ids: recovery does not re-check them.) */
#define LEDGER_ID_RULE "1 to 128 characters of [A-Za-z0-9._~:@+-], the first a letter or digit"
#define LEDGER_LABELS_MAX 512 /* bytes of a client's labels ("k=v\n" lines) */
#define LEDGER_OWNER_MAX 64   /* bytes of a reservation's owner (printable ASCII, no space) */
#define LEDGER_MAX_PARTICIPANTS 100000
/* The largest event the ledger takes in (a round's or a reservation's, a named event, the
 * event of an eligibility query): its encoding (dp_event_encode) in bytes and its nodes
 * (every event object in it, the nested ones included). Each distinct event stays in the
 * vocabulary for good, and its first use computes its profile (RDP curve) at a cost that
 * grows with its nodes: these bound both. Recovery reads any event already stored. */
#define LEDGER_EVENT_BYTES_MAX 131072
#define LEDGER_EVENT_NODES_MAX 1000
typedef enum {
    LEDGER_EVENT_FITS = 0,
    LEDGER_EVENT_TOO_MANY_NODES = 1, /* more than LEDGER_EVENT_NODES_MAX event objects */
    LEDGER_EVENT_TOO_LARGE = 2       /* an encoding past LEDGER_EVENT_BYTES_MAX */
} ledger_event_fit;
/* Whether ev fits those limits; when not, err (NULL: none) says which and by how much
 * (field "event", status DPB_ELIMIT). Every ledger call taking an event checks it. */
ledger_event_fit ledger_event_check(const dp_event *ev, dpb_error *err);
/* Named events at most, and the bytes of their encodings all together at most, by default
 * (ledger_set_named_limits). */
#define LEDGER_NAMED_EVENTS_DEFAULT 10000
#define LEDGER_NAMED_BYTES_DEFAULT ((size_t)64 << 20)
/* Rounds kept in each client's charge history (the newest; older ones are summarized by the
 * client's aggregate of events): 4 bytes each, allocated at the client's first round. */
#define LEDGER_HISTORY 16

typedef enum {
    LEDGER_RDP = 0,        /* fixed-sequence RDP composition */
    LEDGER_PLD = 1,        /* fixed-sequence PLD composition */
    LEDGER_RDP_FILTER = 2, /* Renyi filter over the default orders (fully adaptive) */
    LEDGER_GDP_FILTER = 3  /* Gaussian-DP filter (fully adaptive, unsampled Gaussians) */
} ledger_mode;
#define LEDGER_NMODES 4

/* The rdp_filter's orders, committed in advance (a subset of RDP_DEFAULT_ORDERS: fewer
 * orders cost less of delta, docs/FILTERS.md), and their positions in RDP_DEFAULT_ORDERS. */
#define LEDGER_FILTER_NORDERS 21
extern const double LEDGER_FILTER_ORDERS[LEDGER_FILTER_NORDERS];
extern const unsigned char LEDGER_FILTER_ORDER_INDEX[LEDGER_FILTER_NORDERS];

/* Which guarantee a client's spend carries. */
typedef enum {
    LEDGER_FIXED_SEQUENCE = 0,  /* rdp, pld: composition of a sequence fixed in advance */
    LEDGER_ADAPTIVE_FILTER = 1, /* rdp_filter, gdp_filter: (eps, delta)-DP for the budget,
                                 * whatever the coordinator adapts */
    LEDGER_NO_GUARANTEE = 2     /* a filter client recorded past its budget (already_ran) or
                                 * charged an uncertifiable event: the filter's guarantee is void */
} ledger_guarantee;

/* "rdp", "pld", "rdp_filter", "gdp_filter"; parse returns 0 on success. */
const char *ledger_mode_name(ledger_mode m);
int ledger_mode_parse(const char *s, ledger_mode *m);
int ledger_mode_is_filter(ledger_mode m);
/* "fixed_sequence_composition", "adaptive_filter", "none" */
const char *ledger_guarantee_name(ledger_guarantee g);
/* The theorem the guarantee of a client in mode m rests on (a sentence). */
const char *ledger_guarantee_reference(ledger_mode m);
/* The guarantee of a client in mode m with this spend, budget eps and uncertified flag. */
ledger_guarantee ledger_guarantee_of(ledger_mode m, double spent, double eps, int uncertified);
/* The honest status: a client is exhausted when its spend reached its budget's eps, or when
 * the event of the last round charged to it would not be admitted again now (its spend after
 * one more would exceed eps, counting held reservations): it can no longer afford what it is
 * being charged. A client neither uncertified nor exhausted is stuck when the latest round
 * whose admission tested its budget refused it for it (LEDGER_OVER_BUDGET,
 * LEDGER_EXHAUSTED_ALREADY) and nothing since gave it room: no round or reservation admitted
 * it (nor passed its own test, LEDGER_POLICY), no reservation it holds was released, expired or
 * committed without it, and no change of its budget made that round's recorded spend_after fit
 * (docs/LEDGER.md, "Stuck clients"). It comes from the admissions rounds made (their logged
 * answers), so a replay, a snapshot and every replica show the same; dry runs and eligibility
 * change nothing. */
typedef enum {
    LEDGER_ACTIVE = 0,      /* none of the below */
    LEDGER_EXHAUSTED = 1,   /* spend at or above eps, or the last charged event no longer fits */
    LEDGER_UNCERTIFIED = 2, /* charged with an uncertifiable event: infinite spend, sticky */
    LEDGER_STUCK = 3        /* the latest round that tested its budget refused it (above) */
} ledger_status;
/* The number of ledger_status values: every count by status (the summary, the series) has one
 * entry per value, named by ledger_status_name. */
#define LEDGER_NSTATUS 4

typedef struct {
    const char *dir;    /* data directory (created if missing) */
    const dpb_fs *fs;   /* NULL: POSIX */
    int default_budget; /* create unknown clients on first use with this budget */
    double default_epsilon, default_delta;
    uint64_t snapshot_every; /* log records between snapshots (0: 100000) */
    size_t keep_outcomes;    /* per-client round answers kept in memory (0: 4 million) */
    int pld_refine; /* a background thread, giving way to every change, replaces pld clients' rdp
                     * spends by their PLD values when smaller (ledger_refine.c, "Background
                     * refinement"); 0: a pld client shows the PLD only near its budget */
    /* NULL: the embedded ledger, the file store in dir (store.h); else a PostgreSQL url: the
     * log and snapshots live in that database, shared by any number of replicas, and dir and
     * fs are unused */
    const char *ledger_url;
    unsigned pg_pool;  /* connections to the database at most (0: 4) */
    size_t memo_bytes; /* the clients' memos of their spends' sums, all together, at most (0:
                        * 64 MiB; docs/ARCHITECTURE.md): past it others are freed in turn */
    /* client-reservations (admitted clients of held reservations, summed) one owner may hold
     * at once (ledger_round_req.owner); a reservation past it is refused, DPB_EQUOTA. 0: no
     * cap */
    uint64_t max_reserved_per_owner;
} ledger_options;

typedef struct ledger ledger;

/* Open (create or recover) a ledger. DPB_ECORRUPT names the damaged file and offset. */
dpb_status ledger_open(const ledger_options *o, ledger **out, dpb_error *err);

typedef struct ledger_store ledger_store; /* store.h */

/* Open a ledger on the store s (store.h; o->dir, o->fs, o->ledger_url and o->pg_pool are not
 * used): recovery from s's snapshot and log, and with a shared store the ledger catches up
 * with the other replicas before every read and write. The ledger owns s from the call on
 * (closed with it, or on failure). ledger_open opens the file store in o->dir, or the
 * PostgreSQL store at o->ledger_url, and calls it. */
dpb_status ledger_open_store(const ledger_options *o, ledger_store *s, ledger **out,
                             dpb_error *err);

/* The clients that have a memo of their spend's sums, and the memos' bytes (under the read
 * lock). */
void ledger_memo_stats(ledger *l, size_t *clients, size_t *bytes);

/* The spends a change needs (the PLDs of pld clients past their rdp bound) are computed
 * before its write lock, within deadline_s seconds (0: none; DPB_ECANCELLED past it) and at
 * most max_pld_evals PLD evaluations (0: no cap; DPB_ECOST past it); nothing is changed
 * then. Both 0 at open. Set before serving. */
void ledger_set_compute_limits(ledger *l, double deadline_s, uint64_t max_pld_evals);

/* The kept compositions (docs/LEDGER.md, "Kept compositions"): distributions held, their
 * bytes now, at most so far and the cap; compositions extended by a charge, rebuilt from
 * their events, evicted, and values computed from scratch instead; pld spends whose
 * history's RDP curves were summed in full (no client's memo covered them). */
typedef struct {
    size_t entries, bytes, peak_bytes, cap_bytes;
    uint64_t composed, rebuilt, evicted, fallbacks;
    uint64_t rdp_summed;
} ledger_kept_figures;
void ledger_kept_stats(ledger *l, ledger_kept_figures *f);

/* The cap of the kept compositions of pld clients past their rdp bound, all together
 * (default SPEND_KEPT_BYTES, 64 MiB; 0: none kept, every pld value composed from scratch):
 * past it the least recently used are dropped, and rebuilt from the log's events when next
 * needed. Any time; lowering it evicts at once. */
void ledger_kept_cap(ledger *l, size_t bytes);
/* The daemon's default of that cap (--pld-kept-memory), in MiB: SPEND_KEPT_BYTES. */
#define LEDGER_KEPT_MIB_DEFAULT 64

/* Write a final snapshot (best effort) and free everything. */
void ledger_close(ledger *l);

/* Free everything without writing a snapshot (offline checks). */
void ledger_close_nosnapshot(ledger *l);

typedef struct {
    char id[LEDGER_ID_MAX + 1];
    double epsilon, delta; /* the budget */
    ledger_mode mode;
    dp_relation relation;
    char labels[LEDGER_LABELS_MAX]; /* "k=v\n" lines, sorted by key */
    /* read-only (set by the ledger) */
    double spent;     /* eps used at the budget's delta; +inf when uncertified/unbounded */
    double remaining; /* max(0, epsilon - spent) */
    double delta_tv;  /* the total-variation part of the spend (shuffled epochs) */
    uint64_t rounds;  /* rounds charged */
    uint64_t version; /* changes with every logged change of the client; a background
                       * refinement (pld_refine) keeps it and turns spent_accountant to pld:
                       * (version, spent_accountant) fixes what a read shows (the ETag) */
    ledger_status status;
    ledger_guarantee guarantee;
    int spent_accountant; /* the dp_accountant whose value for the client's composition (at
                           * the budget's delta) `spent` is, or -1 (a filter's level, a
                           * total-variation part, nothing certified) */
    /* status LEDGER_STUCK: the seq and id of the round that refused it; else 0 and "" */
    uint64_t stuck_since;
    char stuck_round[LEDGER_ID_MAX + 1];
} ledger_client;

/* 1 if id (len bytes) obeys LEDGER_ID_RULE. */
int ledger_id_valid(const char *id, size_t len);

/* Create or update a client: budget and labels may change; mode and relation only while no
 * round was charged (else DPB_ECONFLICT), and so does the budget of a filter client. *created says
 * which. Durable on return. */
dpb_status ledger_put_client(ledger *l, const ledger_client *in, int *created, ledger_client *out,
                             dpb_error *err);

/* Create or update many clients with one sync (bulk loads, benchmarks): all or, on the
 * first invalid entry, none (DPB_EINVAL naming its index). */
dpb_status ledger_put_clients(ledger *l, const ledger_client *in, size_t n, dpb_error *err);

typedef enum {
    LEDGER_PUT_CREATED = 0,
    LEDGER_PUT_UPDATED = 1,
    LEDGER_PUT_UNCHANGED = 2, /* already as asked: nothing logged, version kept */
    LEDGER_PUT_CONFLICT = 3   /* refused as ledger_put_client would (DPB_ECONFLICT) */
} ledger_put_result;

typedef struct {
    ledger_put_result result;
    uint64_t version; /* the client's version after the item (0 for a new conflict) */
    char field[32];   /* of a conflict */
    char detail[240]; /* of a conflict */
} ledger_put_outcome;

/* Create or update many clients, each as ledger_put_client would, with one group-committed
 * sync: every entry is checked first (DPB_EINVAL naming the first invalid index: nothing is
 * applied); then an entry that ledger_put_client would refuse with DPB_ECONFLICT gets its own
 * outcome and the others apply, in order. out holds n outcomes. Durable on return. */
dpb_status ledger_put_clients_each(ledger *l, const ledger_client *in, size_t n,
                                   ledger_put_outcome *out, dpb_error *err);

/* DPB_ENOTFOUND if absent. */
dpb_status ledger_get_client(ledger *l, const char *id, ledger_client *out);

typedef enum { LEDGER_SORT_ID = 0, LEDGER_SORT_SPENT = 1, LEDGER_SORT_REMAINING = 2 } ledger_sort;

typedef struct {
    int status;        /* -1: any, else a ledger_status */
    const char *label; /* "k=v" to match, or NULL */
    ledger_sort sort;
    int descending;
    size_t offset; /* cursor: the position in this order (opaque to callers: see server) */
    size_t limit;  /* 1..1000 */
} ledger_query;

/* A page of clients in the query's order; *total is the number matching, *version the
 * ledger's view (ledger_summary.view: an ETag for the whole list). out holds at least q->limit
 * entries. */
dpb_status ledger_list(ledger *l, const ledger_query *q, ledger_client *out, size_t *n,
                       size_t *total, uint64_t *version);

typedef enum { LEDGER_ALL_OR_NOTHING = 0, LEDGER_ADMIT_ELIGIBLE = 1 } ledger_policy;

typedef enum {
    LEDGER_OK = 0,                /* admitted and charged */
    LEDGER_OVER_BUDGET = 1,       /* the round would take the client past its budget */
    LEDGER_UNKNOWN_CLIENT = 2,    /* no such client and no default budget */
    LEDGER_UNCERTIFIABLE = 3,     /* the event cannot be certified */
    LEDGER_UNSUPPORTED = 4,       /* the event cannot be accounted in this client's mode */
    LEDGER_POLICY = 5,            /* all_or_nothing: another participant was refused */
    LEDGER_DUPLICATE = 6,         /* listed twice in the round */
    LEDGER_EXHAUSTED_ALREADY = 7, /* the client is uncertified or exhausted already */
    LEDGER_RECORDED = 8,          /* already_ran: charged though past the budget */
    LEDGER_FILTER_UNSUPPORTED = 9 /* the client's privacy filter cannot account the event */
} ledger_reason;
#define LEDGER_NREASONS 10 /* ledger_reason values */

const char *ledger_reason_name(ledger_reason r);
const char *ledger_status_name(ledger_status s);

typedef struct {
    char id[LEDGER_ID_MAX + 1];
    int admitted;
    ledger_reason reason;
    double spent_before, spent_after; /* spent_after: the spend the round would leave */
    int mode;                         /* the client's ledger_mode; -1 when unknown */
    ledger_guarantee guarantee;       /* of an admitted charge (see ledger_guarantee_of) */
    int after_accountant; /* the dp_accountant spent_after is (as ledger_client's), -1: not
                           * known (none, or an answer recovered from the log) */
    int reported;         /* a committed reservation: this client was charged */
} ledger_outcome;

/* A round's state. A one-step round is charged at once; a reservation holds the admitted
 * clients' budget (counted as spent by every admission) until committed (the reported
 * clients charged, the others released), released, or expired (released by the ledger). */
typedef enum {
    LEDGER_CHARGED = 0,
    LEDGER_RESERVED = 1,
    LEDGER_COMMITTED = 2,
    LEDGER_RELEASED = 3,
    LEDGER_EXPIRED = 4
} ledger_round_state;
const char *ledger_round_state_name(ledger_round_state s);

#define LEDGER_TTL_MAX 86400 /* seconds a reservation may be held */

typedef struct {
    char round_id[LEDGER_ID_MAX + 1];
    ledger_policy policy;
    int dry_run;           /* answer without charging or storing */
    int already_ran;       /* the round has happened: record it for every known participant even
                            * past the budget (honest accounting after the fact) */
    const dp_event *event; /* borrowed */
    const char *const *participants;
    size_t n;
    unsigned char body_hash[16]; /* of the canonical request, for idempotency */
    /* the hash an earlier version stored for the same request (numbers as spelled), so a
     * retry that spans an upgrade is still replayed; all zero: none */
    unsigned char legacy_hash[16];
    int reserve;          /* two-phase: reserve instead of charging */
    uint64_t ttl_seconds; /* reserve: 1..LEDGER_TTL_MAX */
    /* reserve: who holds the reservation (an API key's identity, never a secret: 1 to
     * LEDGER_OWNER_MAX printable ASCII bytes without spaces), recorded with it: only it (or
     * an admin, ledger_caller) may commit or release it, and ledger_options'
     * max_reserved_per_owner caps what it holds. NULL: nobody in particular */
    const char *owner;
} ledger_round_req;

typedef struct {
    char round_id[LEDGER_ID_MAX + 1];
    ledger_policy policy;
    int dry_run, already_ran;
    int replayed;   /* an earlier answer to the same round id and body */
    int summarized; /* the per-client answers were evicted: only counts remain */
    uint64_t seq;   /* log sequence number of the round (0 for dry runs) */
    int reserve;    /* the round was a reservation (two-phase) */
    ledger_round_state state;
    uint64_t expires_at; /* reserve: unix seconds */
    size_t n, admitted, reported;
    ledger_outcome *outcomes; /* owned; NULL when summarized */
    /* reserve: its owner (ledger_round_req.owner); "": none recorded (nobody in particular,
     * or reserved by a version before owners were recorded, LEDGER_FORMAT 4) */
    char owner[LEDGER_OWNER_MAX + 1];
    /* the record this call logged: a round's ROUND or RESERVE (= seq), a commit's COMMIT; 0
     * when it logged none (dry run, replayed answer, release). Its leaf in the log's tree is
     * tlog_leaf_index(logged_seq) = logged_seq - 1 (tlog.h), in every tree head from the
     * answer on. */
    uint64_t logged_seq;
    uint64_t state_seq; /* log sequence number of its commit or release (0: none) */
    /* a reservation: its event's encoding (dp_event_encode, the bytes of its EVENT record),
     * owned; NULL when not known (a one-step round: the request has it; out of memory) */
    unsigned char *event;
    size_t event_len;
} ledger_round_res;

/* Admit and charge one round. DPB_EUNSUPPORTED (nothing stored): every participant was
 * refused because its accounting mode cannot account the event; DPB_ECONFLICT: the id was
 * used with another body;
 * DPB_EREADONLY: the ledger stopped accepting writes; DPB_EIO: this charge could not be
 * made durable (the ledger is now read-only). */
dpb_status ledger_round(ledger *l, const ledger_round_req *req, ledger_round_res *res,
                        dpb_error *err);

/* Eligibility: which candidates a round of an event would admit now, and how many further
 * such rounds each can afford, by the same admission test as a round (held reservations
 * count as spent), without charging or storing anything. Answered a page at a time. */
#define LEDGER_ELIG_MAX_ROUNDS 1000000
#define LEDGER_ELIG_PAGE_MAX 10000    /* candidates answered at most by one call */
#define LEDGER_ELIG_PAGE_DEFAULT 1000 /* the page size the server uses unless asked */

typedef struct {
    const dp_event *event;  /* borrowed */
    const char *const *ids; /* the candidates, or NULL: every client with label */
    size_t n;               /* 1..LEDGER_MAX_PARTICIPANTS */
    const char *label;      /* "k=v" when ids is NULL */
    uint64_t max_rounds;    /* the cap of affordable_rounds, 1..LEDGER_ELIG_MAX_ROUNDS */
    size_t offset;          /* where the page starts: an index into ids, or a client position (the
                             * label's members in registration order); 0, or an earlier page's next */
    size_t limit;           /* candidates answered at most, 1..LEDGER_ELIG_PAGE_MAX */
    /* the computation's deadline and stop flag (NULL: the ledger's own deadline,
     * ledger_set_compute_limits): past it DPB_ECANCELLED */
    const struct dpb_cancel *cancel;
    /* the cost cap: admission tests that evaluate a PLD, at most, for the page (0: the
     * ledger's own, ledger_set_compute_limits); past it DPB_ECOST (field "limit") */
    uint64_t max_pld_evals;
} ledger_elig_req;

typedef struct {
    char id[LEDGER_ID_MAX + 1];
    int eligible;                   /* one round would be admitted */
    ledger_reason reason;           /* LEDGER_OK when eligible, else the round's refusal reason */
    uint64_t rounds;                /* further rounds affordable now (0 when not eligible) */
    int capped;                     /* rounds == max_rounds and perhaps more */
    double spent, remaining, delta; /* held spend (charges + reservations); NAN when unknown */
    int mode;                       /* ledger_mode, -1 when unknown */
} ledger_elig_item;

typedef struct {
    size_t total; /* candidates in all: the ids listed, or the clients with the label now */
    int more;     /* 1: candidates follow this page: ask again with offset = next */
    size_t next;
} ledger_elig_page;

/* *out (malloc'ed, *n entries, in the order of ids, or of registration for a label): the
 * answer for each candidate of the page from q->offset, at most q->limit, and *pg where the
 * next page starts. The page's state is copied under the read lock; every admission test
 * runs after the lock is released (afford.h), so a slow page never holds up the ledger.
 * Paging a label by client position gives every member once, whatever registers meanwhile.
 * DPB_ECANCELLED past q->cancel's deadline (or its flag), DPB_ECOST past the cost cap. */
dpb_status ledger_eligibility(ledger *l, const ledger_elig_req *q, ledger_elig_item **out,
                              size_t *n, ledger_elig_page *pg, dpb_error *err);

/* Who asks to commit or release a reservation: key, the caller's identity as reservations
 * record it (ledger_round_req.owner); admin: may act on any reservation. A NULL caller, or a
 * NULL key, is not checked (no API keys). A reservation with an owner is committed or
 * released only by its owner or an admin (else DPB_EFORBIDDEN, nothing changed, before any
 * other answer); one without (reserved by nobody in particular, or before owners were
 * recorded) by any caller. */
typedef struct {
    const char *key;
    int admin;
} ledger_caller;

/* Commit a reservation: charge the reported clients (a subset of the admitted ones, in any
 * order, no duplicates) and release the others; durable on return. Idempotent: the same
 * reported set again (hash of the canonical request) answers the stored round (replayed
 * set). DPB_ENOTFOUND: no such round; DPB_EINVAL (field "reported[i]"): an id that was not
 * admitted, or listed twice; DPB_ECONFLICT: a one-step round, another commit body, or a
 * round no longer reserved (res->state says released or expired; res is filled). */
dpb_status ledger_commit(ledger *l, const char *round_id, const char *const *reported, size_t n,
                         const unsigned char hash[16], ledger_round_res *res, dpb_error *err);
/* ledger_commit on behalf of who (see ledger_caller). The reported list is checked (ids,
 * duplicates: linear in n) before any lock. */
dpb_status ledger_commit_as(ledger *l, const char *round_id, const char *const *reported, size_t n,
                            const unsigned char hash[16], const ledger_caller *who,
                            ledger_round_res *res, dpb_error *err);

/* Release a reservation (every admitted client's budget); durable on return; idempotent (a
 * released or expired round answers as it is). DPB_ECONFLICT: a one-step or committed round. */
dpb_status ledger_release(ledger *l, const char *round_id, ledger_round_res *res, dpb_error *err);
/* ledger_release on behalf of who (see ledger_caller). */
dpb_status ledger_release_as(ledger *l, const char *round_id, const ledger_caller *who,
                             ledger_round_res *res, dpb_error *err);

/* Release every reservation whose time is up (at `now`, unix seconds), each with a logged
 * release record; the number released. The ledger's own thread calls it every second. */
size_t ledger_expire(ledger *l, uint64_t now);

/* Named events: an event registered once under a name (the id rule; immutable) and
 * referenced by rounds and eligibility queries. The event is taken into the ledger's
 * vocabulary (logged) for both relations, so that an eligibility query of it runs under the
 * read lock. *created: 1 new, 0 the same event already had the name; DPB_ECONFLICT: the name
 * is taken by another event; DPB_ELIMIT: the event is past ledger_event_check's limits
 * (err's field "event"), or a new name would take the ledger past its named events' limits
 * (ledger_set_named_limits; err's field "name"). Durable on return. */
dpb_status ledger_put_event(ledger *l, const char *name, const dp_event *ev, int *created,
                            uint64_t *seq, dpb_error *err);

/* The named events' limits for new names: how many at most, and their encodings' bytes all
 * together at most (0: LEDGER_NAMED_EVENTS_DEFAULT, LEDGER_NAMED_BYTES_DEFAULT, also before
 * any call). Names already stored stay, past them or not (a ledger recovered under lower
 * limits, or another replica's). */
void ledger_set_named_limits(ledger *l, size_t max_events, size_t max_bytes);

/* How many events' profiles (decoded, classified: RDP curve, total-variation and GDP parts)
 * the ledger computed since it was opened: at most one per distinct event and relation, at
 * its first use. Recovery (ledger_open_profiles: those computed before ledger_open
 * returned) computes those of the events the log's changes touch, never those of the
 * vocabulary a snapshot holds; a thread then computes those of the events the clients hold,
 * off the lock (figures for tests and benchmarks). */
uint64_t ledger_event_profiles(ledger *l);
uint64_t ledger_open_profiles(ledger *l);
/* How many clients' spends were evaluated under the write lock of a change since the ledger
 * was opened (a test's figure): a reservation, a release and the released part of a commit
 * evaluate theirs before the lock (a round of more than 64 participants its admissions
 * too), so they add none unless a participant changed in between. */
uint64_t ledger_locked_spends(ledger *l);
/* How many undo entries holding memory (a client's labels as they were before a change; a
 * reservation change's entry holds none) were freed under the write lock since the ledger was
 * opened (a test's figure): those of a change of more than 64 clients are freed after the
 * lock. */
uint64_t ledger_locked_frees(ledger *l);

/* The event named name (*out: decoded, the caller frees it) and the seq of its record;
 * DPB_ENOTFOUND when unknown. */
dpb_status ledger_get_event(ledger *l, const char *name, dp_event **out, uint64_t *seq);

/* Up to limit names in name order from position offset (*names: malloc'ed array of
 * malloc'ed strings, each freed by the caller); *total: how many there are. */
dpb_status ledger_list_events(ledger *l, size_t offset, size_t limit, char ***names, size_t *n,
                              size_t *total);

/* A client's charge history: its newest rounds, newest first. */
typedef enum {
    LEDGER_H_CHARGED = 0,  /* charged (one step, or reported in a commit) */
    LEDGER_H_RESERVED = 1, /* held by a reservation */
    LEDGER_H_RELEASED = 2  /* a reservation released, expired, or committed without it */
} ledger_hist_state;

typedef struct {
    char round_id[LEDGER_ID_MAX + 1];
    uint64_t seq; /* the round's record */
    ledger_hist_state state;
    double spent_after; /* what the round's admission said; NAN when summarized */
    uint64_t time_ms;   /* when the entry took its state: the round's record (a commit's or a
                         * release's for those), ms since the epoch; 0: unknown (a record
                         * written before LEDGER_FORMAT 5) */
} ledger_hist_item;

typedef struct {
    dp_event *event; /* owned */
    uint64_t count, reserved;
} ledger_agg_item;

typedef struct {
    ledger_hist_item *items; /* owned: n of them, from position offset */
    size_t n, total;         /* total: entries kept (at most LEDGER_HISTORY) */
    int complete;            /* 0: older rounds were dropped from the history */
    ledger_agg_item *agg;    /* owned: every event charged or reserved, with counts */
    size_t nagg;
} ledger_history;

/* DPB_ENOTFOUND if the client is unknown. */
dpb_status ledger_client_history(ledger *l, const char *id, size_t offset, size_t limit,
                                 ledger_history *out);
void ledger_history_free(ledger_history *h);

/* A stored round. DPB_ENOTFOUND if unknown. */
dpb_status ledger_get_round(ledger *l, const char *round_id, ledger_round_res *res);
/* The participants of the stored round round_id (a reservation's: what its commit or release
 * works through), read without waiting for the lock: -1 when no such round is known, -2 when
 * a change holds the ledger now (not known). Memory only (a shared store is not caught up). */
long ledger_round_size_now(ledger *l, const char *round_id);

void ledger_round_res_free(ledger_round_res *r);

typedef struct {
    uint64_t clients, active, exhausted, uncertified, stuck, rounds, version;
    uint64_t by_status[LEDGER_NSTATUS]; /* clients by ledger_status (active..: the same) */
    uint64_t view; /* changes whenever anything the summary or a list shows changes (an ETag):
                    * the version, background refinements, and a value new at every open */
    uint64_t refined, refine_stale; /* background refinements (pld_refine) since open: shown;
                                     * discarded because the client changed meanwhile */
    uint64_t refine_abandoned;      /* computations stopped because a change started */
    int refining;                   /* 1 while the refinement computes a PLD */
    uint64_t spend_hist[11];        /* clients by spent/budget: [0,.1), ..., [.9,1), >= 1 */
    int read_only;
    int unavailable; /* 1: a shared store's database could not be reached to catch up: the
                      * rest shows this replica's last state, maybe behind the others' */
    uint64_t log_bytes;
    /* the log's fdatasync latency (wal_sync_stats) */
    uint64_t sync_count;
    double sync_seconds;
    uint64_t sync_hist[21]; /* WAL_SYNC_NBUCKETS */
} ledger_summary;

void ledger_get_summary(ledger *l, ledger_summary *s);

/* ---- the ledger-wide series over time (ledger_series.c) -------------------------------------
 * Kept as records are applied (live, at replay and at catch-up), from the records' times, in
 * three fixed rings of buckets: LEDGER_SERIES_KEEP[r] buckets of LEDGER_SERIES_WIDTH_MS[r] each
 * (a day of minutes, 366 days of hours, 3660 days of days), about 1.9 MB per ledger whatever
 * the clients and the days; kept through snapshots. A bucket counts the records whose time
 * falls in it: rounds (ROUND and RESERVE records), charges (clients charged: a one-step
 * round's admitted ones, a commit's reported ones), epsilon_spent (the sum of those charges'
 * increases of the client's epsilon upper bound, as their admission computed them: after -
 * before; an uncertifiable charge, +inf, is left out, and shows as a status), refusals by
 * reason (a round's clients not admitted), and by_status as it stood at the bucket's end
 * (when the next bucket's first record came; the newest bucket: now). Records without a
 * time (before LEDGER_FORMAT 5) fall in no bucket. */
typedef enum { LEDGER_MINUTE = 0, LEDGER_HOUR = 1, LEDGER_DAY = 2 } ledger_resolution;
#define LEDGER_NRES 3
extern const uint64_t LEDGER_SERIES_WIDTH_MS[LEDGER_NRES];
extern const uint32_t LEDGER_SERIES_KEEP[LEDGER_NRES];
/* "minute", "hour", "day"; parse returns 0 on success. */
const char *ledger_resolution_name(ledger_resolution r);
int ledger_resolution_parse(const char *s, ledger_resolution *r);

typedef struct {
    uint64_t start_ms; /* the bucket's start, ms since the epoch */
    uint64_t rounds, charges;
    double epsilon_spent;
    uint64_t refusals[LEDGER_NREASONS]; /* by ledger_reason (LEDGER_OK stays 0) */
    uint64_t by_status[LEDGER_NSTATUS];
} ledger_point;

typedef struct {
    ledger_resolution resolution;
    ledger_point *points; /* owned: n of them, oldest first, every bucket of [from, to) */
    size_t n;
    uint64_t from_ms, to_ms; /* the buckets shown (n == 0: both 0) */
    /* per resolution: the oldest and the newest bucket kept (0, 0: none yet) */
    uint64_t kept_from_ms[LEDGER_NRES], kept_to_ms[LEDGER_NRES];
    uint64_t view;         /* lg_view_tag: an ETag (changes with everything shown) */
    uint64_t last_time_ms; /* the time of the last record (0: none known) */
} ledger_series;

/* The buckets of resolution res that overlap [from_ms, to_ms) (0 and UINT64_MAX: no bound),
 * of those kept, from the first bucket with a record on. DPB_OK, DPB_ENOMEM, DPB_EUNAVAILABLE
 * (a shared store's database cannot be reached). */
dpb_status ledger_get_series(ledger *l, ledger_resolution res, uint64_t from_ms, uint64_t to_ms,
                             ledger_series *out);
void ledger_series_free(ledger_series *s);
/* The time of the ledger's last record (ms since the epoch; 0: none known) and the bytes the
 * series keeps in memory. */
uint64_t ledger_last_time(ledger *l);
/* The wall clock that times the log's records from now on, in ms since the Unix epoch (fn
 * NULL: CLOCK_REALTIME, the default); tests set it to make a year of history at once. A
 * record's time is max(clock, the time of the record before it): monotone in seq order. */
void ledger_set_clock(ledger *l, uint64_t (*fn)(void *ctx), void *ctx);
size_t ledger_series_bytes(void);

/* What the ledger's store last saw of its database, for probes: read without the ledger's
 * lock and without asking the database (a shared store probes it once a second by itself).
 * The file store is always reachable. */
typedef struct {
    int reachable;   /* the last exchange with the database was answered */
    int refusing;    /* the database is silent or timed out: ledger calls that need it fail
                      * at once with DPB_EUNAVAILABLE until it answers again */
    double silent_s; /* how long exchanges have waited on it without a sign of life */
} ledger_health;

void ledger_get_health(ledger *l, ledger_health *h);

/* The background snapshots since open: written, failed, and the last failure's detail (""
 * when none, or once a snapshot succeeded again). A failed snapshot loses nothing (every
 * change is in the log) but leaves the log growing, and a restart replaying all of it. */
typedef struct {
    uint64_t written, failed;
    char last_error[320];
} ledger_snapshot_info;
void ledger_snapshot_stats(ledger *l, ledger_snapshot_info *out);

/* 1 once an I/O failure (or running out of memory after logging) stopped the ledger's writes:
 * it answers reads with what is durable, and refuses changes until restarted. */
int ledger_read_only(ledger *l);

/* Moving between stores: copy l's whole durable state into the empty store `to` (a data
 * directory, or a PostgreSQL url), as one snapshot at l's last seq, so that a ledger opened on
 * `to` holds the same clients, spends, rounds, reservations and named events.
 * DPB_ECONFLICT: `to` is not empty (nothing written). */
dpb_status ledger_copy_to(ledger *l, const char *to, dpb_error *err);

/* 0 if a and b hold the same clients (budget, mode, relation, labels, spend, rounds, the
 * events charged and held with their counts, status),
 * rounds (id, state, outcomes, owner) and named events; else 1 with why naming the first
 * difference. */
int ledger_compare(ledger *a, ledger *b, char *why, size_t cap);

/* 128-bit FNV-1a pair over bytes: for request body hashes. */
void ledger_hash128(const void *buf, size_t n, unsigned char out[16]);

/* ---- the log's tree (tlog.h, docs/TRANSPARENCY.md) -----------------------------------------
 * The ledger's log as an RFC 9162 Merkle tree: leaf i is the record seq i + 1
 * (tlog_leaf_index). Every function reads the tree of the durable records (its own mutex; no
 * ledger lock is taken or needed), so a size and root read together are consistent, and a
 * change's leaf (ledger_round_res.logged_seq) is in every head read after its answer. */

/* A shared store (PostgreSQL): apply the records other replicas made durable first, so the
 * tree read next is as new as the shared log (the file store: nothing to do). DPB_OK, or
 * DPB_EUNAVAILABLE (err filled) when the database cannot be reached. */
dpb_status ledger_log_catch_up(ledger *l, dpb_error *err);
/* The tree's size and root hash (32 bytes), read together. */
void ledger_log_head(ledger *l, uint64_t *size, unsigned char root[32]);
/* RFC 9162 2.1.3.1: the audit path of leaf in the tree of size leaves into path[0..*n) (room
 * for TLOG_MAX_PROOF). DPB_EINVAL (err names the field: "leaf_index" not below size,
 * "tree_size" beyond the current size). */
dpb_status ledger_log_inclusion(ledger *l, uint64_t leaf, uint64_t size, tlog_hash *path, size_t *n,
                                dpb_error *err);
/* RFC 9162 2.1.4.1: the consistency proof between sizes first and second into proof[0..*n)
 * (room for TLOG_MAX_PROOF). DPB_EINVAL (err names "first" or "second"). */
dpb_status ledger_log_consistency(ledger *l, uint64_t first, uint64_t second, tlog_hash *proof,
                                  size_t *n, dpb_error *err);
/* Called per entry: leaf index, the entry's head (type u8, seq u64 LE) and payload (borrowed,
 * valid during the call); the entry is head followed by payload. Non-zero stops. */
typedef int (*ledger_entry_fn)(void *ctx, uint64_t leaf, const unsigned char head[9],
                               const void *payload, size_t len);
/* The entries of leaves [start, end) in order, each checked against its leaf first.
 * DPB_EINVAL (err names "start" or "end": start >= end, end beyond the current size),
 * DPB_ECORRUPT (a record changed or missing in the store: err names its seq and kind), DPB_EIO,
 * DPB_EUNAVAILABLE (a shared store). */
dpb_status ledger_log_entries(ledger *l, uint64_t start, uint64_t end, ledger_entry_fn fn,
                              void *ctx, dpb_error *err);
/* The whole log checked (--verify): every record read back from the store and compared with
 * its leaf, every kept node recomputed from its children. *checked: records read. DPB_OK, or
 * DPB_ECORRUPT with err naming the record (seq, kind) or the tree's node; DPB_EIO. */
dpb_status ledger_log_verify(ledger *l, uint64_t *checked, dpb_error *err);

#endif
