/*
 * ledger_mem.h - layer 4 of core/ledger: the in-memory state and its undo (the contract of
 * ledger_names.c, ledger_index.c, ledger_spendof.c, ledger_undo.c, ledger_apply.c and
 * ledger_view.c). These files change and read struct ledger (ledger_int.h) and call only
 * spend.h and store.h below them; they never log a record nor take or release the lock:
 * "caller holds the write lock" (or "a lock") is every caller's duty, as said per function.
 * Within the layer the files call downward in that order (names, index, spendof, undo,
 * apply, view).
 *
 * Invariants (under the lock):
 *   - every client's spend fields are those computed from its event counts (recomputed on
 *     each change; recovered clients are recomputed once after replay);
 *   - the order of records in the log is the order in which changes were applied;
 *   - status and spend-bucket counters equal the sums over clients;
 *   - an interned event's index never changes and is logged (EVENT record) before any
 *     record that refers to it;
 *   - every change whose record may not be durable yet has an undo entry (ledger_undo.c).
 */
#ifndef DPB_LEDGER_MEM_H
#define DPB_LEDGER_MEM_H

#include "ledger_int.h"

/* The memos of all clients together take at most this by default (ledger_options). */
#define LEDGER_MEMO_BYTES ((size_t)64 << 20)

/* ---- ledger_names.c: names and checks of ledger.h's values (no state) ------------------- */

/* 1 if the NUL-terminated id is a valid client, round or event id (ledger_id_valid). */
int lg_valid_id(const char *id);
/* 1 if owner is a valid reservation owner: 1 to LEDGER_OWNER_MAX bytes of printable ASCII
 * other than space (an API key's name, or its fingerprint). */
int lg_valid_owner(const char *owner);

/* ---- ledger_index.c: strings, the open-addressing indexes, the event vocabulary --------- */

/* A fresh copy of s (owned by the caller), or NULL out of memory. */
char *lg_xstrdup(const char *s);
/* An empty index of cap slots (a power of two). 0, or -1 out of memory. */
int lg_index_init(lindex *x, size_t cap);
/* The FNV-1a hash the string indexes use. */
uint64_t lg_str_hash(const char *s);
/* Insert pos into x (count entries before it), doubling x past half full (hash_of rehashes).
 * 0, or -1 out of memory (x unchanged). */
int lg_index_insert(ledger *l, lindex *x, size_t count,
                    uint64_t (*hash_of)(const ledger *, uint32_t), uint32_t pos);
/* Remove pos (hashing to h) from x, keeping every other key reachable. */
void lg_index_delete(lindex *x, uint64_t h, uint32_t pos,
                     uint64_t (*hash_of)(const ledger *, uint32_t), const ledger *l);
/* The hashes of client, round and named-event positions (index rebuilds and deletes). */
uint64_t lg_cl_hash(const ledger *l, uint32_t pos);
uint64_t lg_rd_hash(const ledger *l, uint32_t pos);
uint64_t lg_nm_hash(const ledger *l, uint32_t pos);
/* The position of a named event, client or round, or -1. A lock is held. */
long lg_find_name(const ledger *l, const char *name);
long lg_find_client(const ledger *l, const char *id);
long lg_find_round(const ledger *l, const char *id);
/* The position of client id, given where it was found before (hint; -1: nowhere): hint when
 * the client there is id (clients never move; a withdrawn one's place may hold another), else
 * found again. A lock is held. */
long lg_client_at(const ledger *l, long hint, const char *id);
/* The owner table's entry of name, or -1 (a lock is held); or made, with nothing held
 * (write lock; -1 out of memory). */
long lg_find_owner(const ledger *l, const char *name);
long lg_intern_owner(ledger *l, const char *name);
/* The client-reservations owner holds now (0: none, or an unknown owner). A lock is held. */
uint64_t lg_owner_held(const ledger *l, const char *owner);
/* Count r's admitted clients into (sign +1) or out of (-1) what its owner holds (none: no
 * change). Write lock. */
void lg_owner_count(ledger *l, const lrnd *r, int sign);
/* Every owner's held count, and l->nreserved, summed again from the reserved rounds (after
 * recovery, and after a withdrawal took changes back). Write lock. */
void lg_owner_recount(ledger *l);
/* The index of the encoded event (bytes, n) interned for rel, or LEV_NONE. A lock is held. */
uint32_t lg_find_event(const ledger *l, const unsigned char *bytes, size_t n, int rel);
/* 1 when ev is in the vocabulary (for either relation): an event stored before
 * ledger_event_check's limits is still taken. A lock is held. */
int lg_event_known(const ledger *l, const dp_event *ev);
/* Intern the encoded event for rel (bytes borrowed; the spend engine keeps a copy, checked
 * to decode, and nothing is computed: lg_ev_se): *idx its index, *fresh 1 when new (then it
 * is scratch until logged: l->nevs_logged). DPB_ENOMEM, DPB_ECORRUPT (bytes do not decode).
 * Caller holds the write lock. */
dpb_status lg_intern(ledger *l, const unsigned char *bytes, size_t n, dp_relation rel,
                     uint32_t *idx, int *fresh);
/* For each b[i], the position in a[0..na) of the entry with the same event, or UINT32_MAX,
 * into pos[0..nb) (the entries of a are distinct events). O(na + nb): a hash of a's events
 * once the nested scan would cost more. 0, or -1 out of memory. */
int lg_count_positions(const lcount *a, uint32_t na, const lcount *b, uint32_t nb, uint32_t *pos);
/* Merge b[0..nb) into a[0..*na) (a has room for *na + nb entries; a's events distinct, and b's):
 * the counts of an event in both are added, the others appended in b's order, a's order kept. O(*na
 * + nb). 0, or -1 out of memory (a unchanged). */
int lg_merge_counts(lcount *a, uint32_t *na, const lcount *b, uint32_t nb);
/* A set of ids held in an array, by content, for linear-time duplicate checks and lookups: the
 * id of element i is the string pointer at (char *)first_id + i * stride (stride sizeof(char
 * *) for an array of ids; sizeof of the struct for a field of an array of structs). Sized for n
 * elements, empty; 0, or -1 out of memory. add: puts element i in, UINT32_MAX when it was not
 * there, else the element already holding an equal id (i not added). find: the element holding
 * id, or UINT32_MAX. The array must outlive the set. */
typedef struct {
    uint32_t *slot;
    size_t cap;
    const char *base;
    size_t stride;
} lg_idtab;
int lg_idtab_init(lg_idtab *t, const void *first_id, size_t stride, size_t n);
uint32_t lg_idtab_add(lg_idtab *t, uint32_t i);
uint32_t lg_idtab_find(const lg_idtab *t, const char *id);
void lg_idtab_free(lg_idtab *t);
/* Event i of the vocabulary in the spend engine, decoded and classified on this first use
 * (spend_event_ready: any thread, under either lock): every term of a spend is built from
 * it. lg_ev_kind: its class (EV_RDP, ...). A lock is held. */
spend_event *lg_ev_se(const ledger *l, uint32_t i);
int lg_ev_kind(const ledger *l, uint32_t i);
/* Drop the newest interned event (referenced by no client or round). Write lock. */
void lg_drop_last_event(ledger *l);
/* Drop the interned events not in the log (a dry run, a refused or failed change), so their
 * indices stay free for the next logged event. Write lock. */
void lg_drop_unlogged_events(ledger *l);
/* Free what a client (not its memo: lg_memo_drop) owns; the entry itself stays (an array
 * element). */
void lg_client_release(lclient *c);
/* Free a round's outcomes out[0..n) (NULL: none) and the ids they own. */
void lg_outcomes_free(lout *out, uint32_t n);
/* Serialises the sorts that read a ledger through a global (qsort has no context). */
extern pthread_mutex_t lg_sort_mu;

/* ---- ledger_spendof.c: spends, statuses, counters, memos, admission ---------------------- */

/* The spend admission sees for c (its charged events and held reservations) with `extra`
 * more of event xev (extra 0: as it is), into *out (HUGE_VAL when it cannot be computed:
 * never admits then). c is borrowed; a lock is held. */
void lg_spend_held(ledger *l, const lclient *c, uint32_t xev, uint64_t extra, spend_result *out);
/* lg_spend_held with the registered event x itself (NULL when extra is 0), interned or not. */
void lg_spend_held_se(ledger *l, const lclient *c, spend_event *x, uint64_t extra,
                      spend_result *out);
/* The honest status of c (ledger.h). */
ledger_status lg_status_of(const lclient *c);
/* Count c out of (sign -1) or into (+1) the status and spend-bucket counters. Write lock. */
void lg_counters(ledger *l, const lclient *c, int sign);
/* The counters summed again over every client. Write lock. */
void lg_recount(ledger *l);
/* Recompute the spend, accountant and status of c (a stored client), bringing its memo to
 * its terms and the memos' bytes under the cap. Write lock. */
void lg_recompute(ledger *l, lclient *c);
/* The clients' spends this thread evaluated (spend_full), so far: a change (ledger_txn.c)
 * adds those evaluated under its write lock to l->locked_spends. */
extern _Thread_local uint64_t lg_spends_here;
/* After a change of the client's held reservations only (its charged events as they were, so
 * its spend as it was): its honest status again, stuck (0 or 1) when the caller computed it
 * before the lock from the same client (its version stamped), or -1: computed here. */
void lg_recompute_held(ledger *l, lclient *c, int stuck);
/* Whether one more of the client's last charged event, with its held reservations, would
 * not be admitted now (the honest status's test; 0 without a last event). Any lock. */
int lg_stuck_of(ledger *l, const lclient *c);
/* Free c's memo (made again at its next change). Write lock. */
void lg_memo_drop(ledger *l, lclient *c);
/* The accountant c's spend is (lclient.sacct), named at this first read when recovered from
 * a snapshot (LG_SACCT_UNNAMED: the snapshot stores the value only, and naming it needs the
 * curves of all its events). A lock is held. */
int lg_spend_accountant(const ledger *l, const lclient *c);
/* The admission test of `extra` more rounds of event xev for c (stored: known 1, or a new
 * client with the default budget), counting its held reservations; *after (and *acct, if
 * not NULL) receive the spend and accountant it would leave. LEDGER_OK when admitted. */
ledger_reason lg_admission(ledger *l, const lclient *c, int known, uint32_t xev, uint64_t extra,
                           double *after, int8_t *acct);
/* lg_admission of the registered event x itself (interned or not: a round's admissions
 * computed before its write lock). Any lock. */
ledger_reason lg_admission_se(ledger *l, const lclient *c, int known, spend_event *x,
                              uint64_t extra, double *after, int8_t *acct);
/* The honest status's test (lg_stuck_of) for c once `hold` more (+1: reserved) or fewer (-1:
 * released) of the registered event x are held: what lg_recompute_held will find after that
 * change, computed from c as it is (any lock: the caller stamps c's version and checks it
 * under the write lock). 0 or 1, or -1 out of memory. */
int lg_stuck_after_hold(ledger *l, const lclient *c, spend_event *x, int hold);

/* ---- ledger_series.c: the records' clock, the series over time --------------------------- */

/* The rings of the series, allocated empty (0, or -1 out of memory), and freed. */
int lg_series_init(ledger *l);
void lg_series_free(ledger *l);
/* The ledger's clock (ledger_options.clock_ms, else CLOCK_REALTIME), ms since the epoch. */
uint64_t lg_clock_ms(const ledger *l);
/* The time of the next record: max(the clock, the last record's time), never 0. */
uint64_t lg_next_time(const ledger *l);
/* 1 when a record at time t (0: unknown) opens a new bucket (closes the newest). */
int lg_series_rolls(const ledger *l, uint64_t t);
/* Before a record at time t (0: unknown: nothing) is applied: every ring advanced to t's
 * bucket, the buckets closed by it given the statuses now (l->by_status: the caller makes
 * them current first). Write lock. */
void lg_series_advance(ledger *l, uint64_t t);
/* Count a stored round (its record's time: rounds, refusals, a one-step round's charges)
 * into (sign +1) or out of (-1) its buckets; and a commit's charges (its state time).
 * Nothing while a snapshot loads (series_mute) or for an unknown time. Write lock. */
void lg_series_round(ledger *l, const lrnd *r, int sign);
void lg_series_commit(ledger *l, const lrnd *r, int sign);
/* The buckets of res in [from_ms, to_ms) into out->points (room for every bucket of the ring),
 * and the rest of *out but view. A lock is held. */
void lg_series_get(const ledger *l, ledger_resolution res, uint64_t from_ms, uint64_t to_ms,
                   ledger_series *out);
/* The snapshot's part: written (a lock held), and read into a ledger being opened (0, or -1
 * when it does not parse). */
void lg_series_write(const ledger *l, bw *w);
int lg_series_read(ledger *l, br *r);

/* ---- ledger_undo.c: durability, memory never ahead of the log ---------------------------- */

/* 1 once the ledger is read-only (a failed log, an abandoned change). No lock needed. */
int lg_ledger_ro(ledger *l);
/* Room for k more undo entries, taken before anything is logged (pushing cannot fail then).
 * 0, or -1 out of memory. Write lock. */
int lg_reserve_undo(ledger *l, size_t k);
/* An undo entry of change (seq, kind) to the client at pos (or -1), holding what any change
 * of a client may alter; the kind-specific fields are the caller's. */
lundo lg_client_undo(const ledger *l, uint64_t seq, uint8_t kind, long pos);
/* Free what an undo entry owns (old labels, events and reservations). */
void lg_undo_release(lundo *u);
/* Push *u (room reserved; its owned pointers are taken over). Write lock. */
void lg_push_undo(ledger *l, const lundo *u);
/* Forget the undo entries whose records are durable now. Write lock. */
void lg_prune_undo(ledger *l);
/* Free what lg_prune_undo set aside (a batch of more than LG_PRUNE_NOW entries is not freed
 * under the write lock): called after releasing the lock, by any thread, at any time. */
#define LG_PRUNE_NOW 64
void lg_bury(ledger *l);
/* After a failed log or a voided shared sync: take back, newest first, every change whose
 * record is not durable; a failed log makes the ledger read-only. Idempotent. Write lock. */
void lg_withdraw_locked(ledger *l);
/* lg_withdraw_locked under the write lock it takes (no lock held by the caller). */
void lg_withdraw(ledger *l);
/* The write lock: the writers' lock (l->wmu), then the write side of l->lock; and back. A
 * try that takes neither returns -1. */
void lg_wrlock(ledger *l);
void lg_wrunlock(ledger *l);
int lg_trywrlock(ledger *l);
/* In a change's long apply, between two participants (each client's state whole, the
 * change's records appended): the readers waiting for the lock are let in, then the write
 * side taken again; the writers' lock stays held, so no other change starts meanwhile. Only
 * in a transaction (l->gaps); else nothing. Write lock. */
void lg_let_readers(ledger *l);
/* The same before the change's records are appended (its admission checked, its record
 * written), on a ledger of its own store only: a shared store's failed sync voids what is
 * pending, which a change may append to only once withdrawn, so there a writer appends
 * without a gap before. lg_gap_open gives the write side back for a while (1: given back;
 * lg_gap_close takes it again); the writers' lock stays held. Write lock. */
void lg_let_readers_early(ledger *l);
int lg_gap_open(ledger *l);
void lg_gap_close(ledger *l, int opened);
/* How many participants a live apply changes between two gaps (lg_let_readers). */
#define LG_GAP_EVERY 2048
/* A shared store's sync failed with st: every pending record is void. A lock is held. */
void lg_voided(ledger *l, dpb_status st);
/* 0 once every record up to seq is durable (waits for, or runs, the group commit); -1 if the
 * log failed first or a shared store voided the pending records (the caller withdraws and
 * looks again). A lock is held (read or write). */
int lg_settle(ledger *l, uint64_t seq);
/* A change is starting: the background refinement gives way. No lock needed. */
void lg_refine_yield(ledger *l);

/* ---- ledger_apply.c: the changes, applied in memory (live with undo, or replayed) -------- */

/* Allocate c's history ring before anything changes. 0, or -1 out of memory. */
int lg_hist_ready(lclient *c);
/* Insert or update client id in memory, no undo (replay, or under apply_logged_client); *pos
 * receives its position. DPB_ENOMEM. Write lock. */
dpb_status lg_apply_client(ledger *l, const char *id, double eps, double delta, int mode, int rel,
                           const char *labels, long *pos_out);
/* The same for a change whose record seq was just appended, pushing its undo entry (room
 * reserved). DPB_ENOMEM (the caller abandons). Write lock. */
dpb_status lg_apply_logged_client(ledger *l, uint64_t seq, const char *id, double eps, double delta,
                                  int mode, int rel, const char *labels, long *pos_out);
/* Store a named event (bytes copied) whose record is seq. 0, or -1 out of memory. Write lock. */
int lg_apply_name(ledger *l, const char *name, const unsigned char *bytes, size_t n, uint64_t seq);
/* A reservation change of the client at pos: held count of ev += hold (+1 or -1), `charge`
 * more of ev charged, round rpos pushed into its history (rpos >= 0). Live (seq: its record,
 * an undo entry reserved) or replayed (seq 0: the client is marked for recomputation). A live
 * change of what it holds only (charge 0) keeps its spend and takes its honest status from
 * stuck (0 or 1: computed before the lock; -1: computed here, lg_recompute_held). 0, or -1
 * out of memory. Write lock. */
int lg_reserve_change(ledger *l, uint64_t seq, long pos, uint32_t ev, int hold, int charge,
                      long rpos, int stuck);
/* Take back, in the client's counts, the change a reservation change's undo entry (U_RESV)
 * records: its held count, its charge. The client must be as the change left it (undo runs
 * newest first). Never allocates. */
void lg_resv_undo(lclient *c, const lundo *u);
/* Store a round (record seq) in memory, taking ownership of out[0..n) once stored (l->nrd
 * grew); a reservation when expires_at != 0 (evi: its event per relation). With apply (live,
 * undo entries reserved for the round and each admitted client) every admitted client is
 * charged (or held) its relation's event evi[rel]; pos (NULL: looked up) gives each outcome's
 * client position as found under this lock (-1: none). A reservation records owner (NULL or
 * "": none), counted in what it holds. DPB_ENOMEM (the caller abandons). Write lock. */
dpb_status lg_store_round(ledger *l, const char *id, const unsigned char hash[16], int policy,
                          int already_ran, uint64_t seq, const uint32_t evi[2], lout *out,
                          const long *pos, uint32_t n, int apply, uint64_t expires_at,
                          const char *owner);

/* Recompute the clients a replay marked dirty (only those: their list) and count them back
 * into the status counters. Write lock. */
void lg_settle_dirty(ledger *l);
/* 1 if a round's answer `reason` to the stored client c changes its stuck state (ledger.h,
 * LEDGER_STUCK): a refusal for its budget, or a policy refusal of a stuck client. */
int lg_offer_touches(const lclient *c, int reason);
/* A round's refusal `reason` of the client at pos, in its stuck state: a refusal for its
 * budget makes it stuck on the round at rpos, after (its spend_after) kept rounded down; a
 * policy refusal clears it; other reasons leave it. Live (seq: the round's record, an undo
 * entry reserved when lg_offer_touches) or replayed (seq 0). Write lock. */
void lg_offer_answer(ledger *l, uint64_t seq, long pos, long rpos, int reason, double after);
/* A replayed charge of the admitted client at pos with event ev by the round being stored
 * (position l->nrd); uncertifiable: its recorded spend says the event made it so. 0, or -1
 * out of memory. Write lock. */
int lg_replay_charge(ledger *l, long pos, uint32_t ev, int uncertifiable);
/* Resolve the reservation at rp: commit it (charge the admitted outcomes idx[0..m), release
 * the others) or release it (state LEDGER_RELEASED or LEDGER_EXPIRED). Live (seq: its
 * record; undo room for the round and each admitted client) or replayed (seq 0). hint (NULL:
 * none) has an outcome's client position as found before (lg_client_at checks it). 0, or -1
 * on a bad index or out of memory (the caller abandons). Write lock. */
int lg_resolve_round(ledger *l, long rp, uint64_t seq, int state, const unsigned char *chash,
                     const uint32_t *idx, uint32_t m, const long *hint);

/* ---- ledger_view.c: the state shown through ledger.h's structs --------------------------- */

/* The stored client c as ledger.h shows it. A lock is held. */
void lg_client_view(const ledger *l, const lclient *c, ledger_client *v);
/* The stored round r as ledger.h shows it (outcomes allocated: ledger_round_res_free). */
void lg_round_view(const ledger *l, const lrnd *r, ledger_round_res *res);
/* The accounting mode and, for an admitted charge, the guarantee of outcome o (creating: a
 * round may create the client with the default budget). A lock is held. */
void lg_outcome_guarantee(const ledger *l, ledger_outcome *o, int creating);
/* 1 if c carries the label "k=v" kv. */
int lg_has_label(const lclient *c, const char *kv);
/* The ETag of lists and the summary: the version, the refinements and the open. */
uint64_t lg_view_tag(const ledger *l);

#endif
