/*
 * ledger_names.c - layer 4 (bottom): the names of ledger.h's enumerations, the id rule and
 * the request hash. Pure functions of their arguments: no state, calls nothing in the ledger.
 */
#include "ledger_mem.h"

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

ledger_event_fit ledger_event_check(const dp_event *ev, dpb_error *err)
{
    size_t nodes = dp_event_nodes(ev);
    if (nodes > LEDGER_EVENT_NODES_MAX) {
        dpb_fail(err, DPB_ELIMIT, "event",
                 "the event holds %zu event objects (nested ones counted); the ledger takes "
                 "events of at most %d: compose fewer distinct events, or count repeats with "
                 "SelfComposedDpEvent",
                 nodes, LEDGER_EVENT_NODES_MAX);
        return LEDGER_EVENT_TOO_MANY_NODES;
    }
    unsigned char *b = NULL;
    size_t n = 0, cap = 0;
    dpb_status st = dp_event_encode(ev, &b, &n, &cap);
    free(b);
    if (st == DPB_OK && n > LEDGER_EVENT_BYTES_MAX) {
        dpb_fail(err, DPB_ELIMIT, "event",
                 "the event takes %zu bytes stored; the ledger takes events of at most %d "
                 "(long lists of steps or phases count)",
                 n, LEDGER_EVENT_BYTES_MAX);
        return LEDGER_EVENT_TOO_LARGE;
    }
    return LEDGER_EVENT_FITS;
}

int lg_valid_id(const char *id)
{
    return ledger_id_valid(id, strlen(id));
}

int lg_valid_owner(const char *owner)
{
    size_t n = strlen(owner);
    for (size_t i = 0; i < n; i++)
        if (owner[i] <= ' ' || owner[i] > '~')
            return 0;
    return n >= 1 && n <= LEDGER_OWNER_MAX;
}

const char *ledger_reason_name(ledger_reason r)
{
    static const char *const names[] = {"admitted",          "over_budget", "unknown_client",
                                        "uncertifiable",     "unsupported", "all_or_nothing",
                                        "duplicate",         "exhausted",   "recorded_past_budget",
                                        "filter_unsupported"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "unknown";
}

const char *ledger_round_state_name(ledger_round_state s)
{
    static const char *const names[] = {"charged", "reserved", "committed", "released", "expired"};
    return (unsigned)s < 5 ? names[s] : "unknown";
}

const char *ledger_status_name(ledger_status s)
{
    static const char *const names[] = {"active", "exhausted", "uncertified", "stuck"};
    return (unsigned)s < LEDGER_NSTATUS ? names[s] : "unknown";
}

void ledger_hash128(const void *buf, size_t n, unsigned char out[16])
{
    uint64_t a = fnv64(buf, n, 14695981039346656037ULL);
    uint64_t b = fnv64(buf, n, 0x84222325cbf29ce4ULL ^ (uint64_t)n);
    for (int i = 0; i < 8; i++) {
        out[i] = (unsigned char)(a >> (8 * i));
        out[8 + i] = (unsigned char)(b >> (8 * i));
    }
}
