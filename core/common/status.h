/*
 * status.h - the one status enum of dpbudget's core, and the caller-owned error struct.
 *
 * Every core function that can fail returns a dpb_status; 0 is success. The enum is
 * append-only: values are part of the server's error mapping (server/problem.c) and of
 * openapi.yaml. Detail goes into an optional caller-owned dpb_error; the first error wins.
 */
#ifndef DPB_STATUS_H
#define DPB_STATUS_H

#include <stddef.h>

typedef enum {
    DPB_OK = 0,
    DPB_EINVAL = 1,         /* an argument is outside its domain (NaN, negative, absurd) */
    DPB_ENOTCOVERED = 2,    /* a theorem's conditions fail: it certifies nothing here */
    DPB_EINFEASIBLE = 3,    /* an inversion has no solution for the target */
    DPB_EUNSUPPORTED = 4,   /* the (event, relation, accountant) combination is not supported */
    DPB_ENOMEM = 5,         /* allocation failed */
    DPB_ENUMERIC = 6,       /* a numerical routine failed to converge */
    DPB_ELIMIT = 7,         /* a request exceeds a configured size limit */
    DPB_EUNCERTIFIABLE = 8, /* the mechanism cannot be certified at all (e.g. unclipped SGLD) */
    DPB_EIO = 9,            /* a write or sync failed: nothing was made durable */
    DPB_ECORRUPT = 10,      /* stored data is damaged (err names file and offset) */
    DPB_ENOTFOUND = 11,     /* no such client or round */
    DPB_ECONFLICT = 12,     /* the same id with a different body */
    DPB_EREADONLY = 13,     /* the ledger stopped accepting writes after an I/O failure */
    DPB_EBUDGET = 14,       /* a charge would exceed a client's budget */
    DPB_ECANCELLED = 15,    /* stopped by its caller's deadline or flag (cancel.h) */
    DPB_EUNAVAILABLE = 16,  /* the ledger's shared store (PostgreSQL) cannot be reached: retry */
    DPB_EFORBIDDEN = 17,    /* the caller may not act on this (a reservation another key holds) */
    DPB_EQUOTA = 18,        /* the caller holds what an operator's cap allows (reservations) */
    DPB_ECOST = 19          /* a ledger request would compute more than its cost cap allows */
} dpb_status;

/* Caller-owned error detail. field names the offending parameter ("" if none). */
typedef struct {
    dpb_status status;
    char field[64];
    char detail[320];
} dpb_error;

/* A short stable lower-case name for a status ("ok", "invalid_parameter", ...). */
const char *dpb_strstatus(dpb_status s);

/* Record an error in err (may be NULL) unless one is already recorded; returns s.
 * field may be NULL. detail is a printf format. */
dpb_status dpb_fail(dpb_error *err, dpb_status s, const char *field, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Reset err to "no error". */
void dpb_error_clear(dpb_error *err);

#endif
