/*
 * problem.h - the one table of error answers (RFC 9457 application/problem+json), mirrored
 * in openapi.yaml (components/schemas/Problem, x-problem-codes). Codes are stable.
 */
#ifndef HTTP_PROBLEM_H
#define HTTP_PROBLEM_H

#include <jansson.h>

#include "../core/common/status.h"

typedef enum {
    PB_NONE = 0,
    PB_MALFORMED_JSON,        /* 400 body is not JSON (syntax, invalid UTF-8, NaN literal) */
    PB_DUPLICATE_KEY,         /* 400 an object repeats a key */
    PB_NUMBER_OUT_OF_RANGE,   /* 400 a number overflows a double or an integer field */
    PB_UNKNOWN_FIELD,         /* 400 a field the schema does not define */
    PB_MISSING_FIELD,         /* 400 a required field is absent */
    PB_WRONG_TYPE,            /* 400 a field has the wrong JSON type */
    PB_INVALID_PARAMETER,     /* 400 a value is outside its domain */
    PB_TOO_MANY_VALUES,       /* 400 a list is longer than allowed */
    PB_UNKNOWN_EVENT,         /* 400 class_name is not an event we know */
    PB_NOT_COVERED,           /* 422 the theorem's conditions fail: it certifies nothing */
    PB_INFEASIBLE,            /* 422 no parameter value reaches the target */
    PB_UNSUPPORTED,           /* 422 event/relation/accountant combination not supported */
    PB_NOT_FOUND,             /* 404 */
    PB_METHOD_NOT_ALLOWED,    /* 405 */
    PB_BODY_TOO_LARGE,        /* 413 */
    PB_UNSUPPORTED_MEDIA,     /* 415 */
    PB_NUMERICAL_FAILURE,     /* 500 a solver did not converge */
    PB_INTERNAL,              /* 500 */
    PB_OUT_OF_MEMORY,         /* 503 */
    PB_LIMIT_EXCEEDED,        /* 400 a computation would exceed a size limit (e.g. PLD grid) */
    PB_UNCERTIFIABLE,         /* 422 the mechanism cannot be certified at all (unclipped SGLD) */
    PB_CONFLICT,              /* 409 the same round id with another body; immutable fields */
    PB_READ_ONLY,             /* 503 the ledger stopped accepting writes after an I/O failure */
    PB_NOT_DURABLE,           /* 503 this change could not be made durable (not acknowledged) */
    PB_UNAUTHORIZED,          /* 401 no valid API key */
    PB_FORBIDDEN,             /* 403 the key lacks the scope */
    PB_RATE_LIMITED,          /* 429 the key's request rate is exceeded */
    PB_INVALID_ID,            /* 400 a client or round id breaks the id rule (codec.h) */
    PB_INVALID_FRAMING,       /* 400 ambiguous message framing (Content-Length/Transfer-Encoding) */
    PB_BAD_REQUEST,           /* 400 the request breaks HTTP/1.1 (no Host, NUL in the URL) */
    PB_HEADERS_TOO_LARGE,     /* 431 the request head exceeds --max-header-bytes */
    PB_OVERLOADED,            /* 503 every place for computations is taken: Retry-After */
    PB_COMPUTE_DEADLINE,      /* 422 a computation ran past --compute-deadline and was stopped */
    PB_RESERVATION_EXPIRED,   /* 409 a two-phase round's reservation expired: nothing to commit */
    PB_RESERVATION_RELEASED,  /* 409 a two-phase round's reservation was released */
    PB_UNKNOWN_EVENT_NAME,    /* 422 event_name names no registered event */
    PB_LEDGER_UNAVAILABLE,    /* 503 the ledger's database cannot be reached: Retry-After */
    PB_HTTP_VERSION,          /* 505 an HTTP version other than 1.0 and 1.1 */
    PB_SHUTTING_DOWN,         /* 503 /readyz of a daemon stopping (SIGTERM): drain it */
    PB_NOT_RESERVATION_OWNER, /* 403 another key holds the reservation */
    PB_RESERVATION_QUOTA,     /* 409 the key holds as many client-reservations as allowed */
    PB_LEDGER_COST,           /* 422 a ledger request would compute past --ledger-max-pld-evals */
    PB_ANSWER_MEMORY,         /* 503 answers waiting to be read hold --answer-memory: Retry-After */
    PB_EVENT_TOO_LARGE,       /* 413 an event for the ledger past LEDGER_EVENT_BYTES_MAX stored */
    PB_EVENT_TOO_COMPLEX,     /* 422 an event for the ledger past LEDGER_EVENT_NODES_MAX objects */
    PB_NAMED_EVENTS_LIMIT,    /* 422 a new name past --max-named-events/--max-named-event-bytes */
    PB_LOG_TAMPERED,          /* 500 a logged record differs from its leaf in the log's tree */
    PB_SIGNING_OFF,           /* 404 no --signing-key: no signed tree head to answer */
    PB_COUNT_
} problem_code;

/* Retry-After of 503 ledger_unavailable: the store reconnects on the next request (each
 * attempt bounded by its connect timeout), so a short wait costs little and a restarted or
 * failed-over database is used again within a second of its return. */
#define PROBLEM_LEDGER_RETRY_AFTER "1"

typedef struct {
    problem_code code;
    char field[96];
    char detail[400];
    json_t *extra; /* owned: extension members merged into the answer (or NULL) */
} problem;

/* HTTP status, stable code and title of a problem code. */
int problem_http_status(problem_code c);
const char *problem_code_name(problem_code c);
const char *problem_title(problem_code c);

/* The problem code a core status maps to. */
problem_code problem_from_status(dpb_status s);

/* The length of the valid UTF-8 sequence at s (at most n bytes), 0 if there is none: no
 * overlong forms, no surrogates, nothing above U+10FFFF. */
size_t utf8_seq_len(const unsigned char *s, size_t n);

/* Record a problem unless one is recorded already (first wins). field may be NULL. The field
 * and detail are made printable UTF-8 (any other byte becomes '?'), so that echoing input
 * never breaks the answer. */
void problem_set(problem *p, problem_code c, const char *field, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Record out_of_memory ("out of memory") as problem_set does; returns -1, so that a reader
 * out of memory ends with `return problem_oom(pb);`. */
int problem_oom(problem *p);

/* Record a core error as a problem. */
void problem_from_error(problem *p, const dpb_error *err);

/* Attach an extension member (steals value). */
void problem_extra(problem *p, const char *key, json_t *value);

/* Build the JSON body (new reference). Releases p->extra. */
json_t *problem_to_json(problem *p);

#endif
